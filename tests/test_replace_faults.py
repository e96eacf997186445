"""`existing="replace"` and `import --into --replace` SIGKILLed at a write point (issue 36): validate finds
nothing, the status is truthful, the run is the old recording or a completed prefix of the new one, and the
next replacement completes without hand cleanup.

Before: a replacement killed inside its first flush (the bracket that empties the old run) left the run
"complete" and empty: validate INVALID, status complete, until re-recorded by hand. Here: the write points of
the first flush (where all of last round's kills landed) and seeded random ones; every write point and 50
random ones of each kind are `bench/fault_trials.py`'s."""

from __future__ import annotations

import random
from pathlib import Path

import pytest
from writertrials import make_old, replace_kill_trial, write_keys

pytestmark = pytest.mark.faults

RANDOM_POINTS = 2


@pytest.fixture(scope="module")
def old_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_old(tmp_path_factory.mktemp("old"))


def _points(keys: list[str], seed: int) -> list[int]:
    """Write points (1-based: a kill just before that write): the first chunk writes of the episodes (inside
    the bracket that empties the old run), the first status write after them, the write that closes that
    bracket (everything written, the sequence still odd), and seeded random ones."""
    first_data = next(i for i, k in enumerate(keys, 1) if k.startswith("reward/c"))
    status_after = next(i for i, k in enumerate(keys, 1) if k.startswith("run_status/c") and i > first_data)
    closing = next(i for i, k in enumerate(keys, 1) if k.startswith("write_seq/c") and i > first_data)
    rng = random.Random(seed)
    return sorted({first_data, first_data + 1, status_after, closing,
                   *rng.sample(range(1, len(keys) + 1), RANDOM_POINTS)})


@pytest.mark.parametrize("how", ["recorder", "import"])
def test_a_replacement_killed_at_a_write_point_leaves_a_truthful_run(old_run: Path, tmp_path: Path,
                                                                      how: str) -> None:
    keys = write_keys(old_run, tmp_path, how)
    problems = [p for nth in _points(keys, 36) for p in replace_kill_trial(old_run, tmp_path, nth, how)]
    assert problems == []
