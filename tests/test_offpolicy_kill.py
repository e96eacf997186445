"""An off-policy `saferl train` SIGKILLed mid-run and run again (issue 36): it resumes from its last resume
point, whose replay buffer it restores, and the store ends bit for bit as an uninterrupted run's; nothing is
lost or written twice, the next command needs no cleanup. The kill lands just before a seeded cost-chunk
write of the training process (inside a write bracket: the interrupted write is repaired by the resume).

Before: only an in-process interruption (Ctrl-C through the runner's progress hook) was tested."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("jax")
pytest.importorskip("flax")

from cube import open_cube, read_manifests, validate  # noqa: E402
from cube.cli import main  # noqa: E402
from tests.toyconfig import toy_config_toml  # noqa: E402

pytestmark = [pytest.mark.faults, pytest.mark.slow]

N_ITERATES, N_ENVS = 6, 8
CONFIG = toy_config_toml(N_ITERATES, N_ENVS) + ("\n[offpolicy]\ngrad_updates_per_step = 2\nmax_replay_size = 256\n"
                                                "hidden = [8]\n")
ARGS = ["--algos", "sac_lag", "--tasks", "toy", "--bounds", "2", "--seeds", "0,1", "--no-progress"]
KILLED = """
import sys
sys.path.insert(0, {tests!r})
from faultkit import kill_self_at_write
kill_self_at_write(lambda key: key.startswith("cost/c/"), {nth})
from cube.cli import main
sys.exit(main(sys.argv[1:]))
"""


def test_a_sigkilled_offpolicy_run_resumes_to_the_uninterrupted_numbers(tmp_path: Path,
                                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SAFERL_ENABLE_TOY", "1")
    config = tmp_path / "toy.toml"
    config.write_text(CONFIG)
    ref, killed = tmp_path / "ref.zarr", tmp_path / "killed.zarr"
    assert main(["train", "--config", str(config), "--out", str(ref), *ARGS]) == 0
    # 2 runs x (train every iterate + expl and greedy every 2nd) cost writes: kill inside iterates 2..4
    nth = random.Random(36).randint(9, 20)
    code = KILLED.format(tests=str(Path(__file__).parent), nth=nth)
    done = subprocess.run([sys.executable, "-c", code, "train", "--config", str(config), "--out", str(killed), *ARGS],
                          env={**os.environ, "SAFERL_ENABLE_TOY": "1"}, capture_output=True, text=True, timeout=600)
    assert done.returncode == -signal.SIGKILL, done.stderr[-2000:]
    assert [r["status"] for r in read_manifests(killed)] == ["partial", "partial"]
    assert main(["train", "--config", str(config), "--out", str(killed), *ARGS]) == 0  # no cleanup by hand
    assert validate(killed) == []
    rows = read_manifests(killed)
    assert [r["status"] for r in rows] == ["complete", "complete"]
    assert {r["resumed_from"] for r in rows} <= {-1, 1, 3} and any(r["resumed_from"] in (1, 3) for r in rows), rows
    a, b = open_cube(ref).load(), open_cube(killed).load()
    for var in ("reward", "cost", "multiplier", "env_steps"):
        np.testing.assert_array_equal(a[var].values, b[var].values, err_msg=var)
