"""Per-run claims under races: 8 processes restarting after a crash take a stale claim exactly once."""

from __future__ import annotations

import json
import multiprocessing as mp
import socket
from pathlib import Path

import pytest

from cube.schema import RunKey
from train.claims import claim_path, read_claim, try_claim

pytestmark = pytest.mark.faults

TRIALS = 100
PROCESSES = 8


def _key(trial: int) -> RunKey:
    return RunKey("ppo_lag", "goal", 25.0, trial)


def _contend(store: str, start: object, results: object) -> None:
    """Every trial: wait for all, then try to claim the trial's run (which holds a stale claim)."""
    for trial in range(TRIALS):
        start.wait()  # type: ignore[attr-defined]
        results.put((trial, try_claim(store, _key(trial))))  # type: ignore[attr-defined]


def _dead_pid() -> int:
    proc = mp.get_context("spawn").Process(target=int)
    proc.start()
    proc.join()
    return int(proc.pid)


def test_a_stale_claim_is_taken_by_exactly_one_of_eight(tmp_path: Path) -> None:
    store = tmp_path / "s.zarr"
    store.mkdir()
    stale = {"host": socket.gethostname(), "pid": _dead_pid()}
    for trial in range(TRIALS):  # a crashed process left a claim on every run
        path = claim_path(store, _key(trial))
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(stale))
    ctx = mp.get_context("spawn")
    start, results = ctx.Barrier(PROCESSES), ctx.Queue()
    procs = [ctx.Process(target=_contend, args=(str(store), start, results)) for _ in range(PROCESSES)]
    for p in procs:
        p.start()
    owners: dict[int, int] = {}
    for _ in range(TRIALS * PROCESSES):
        trial, won = results.get(timeout=120)
        owners[trial] = owners.get(trial, 0) + int(won)
    for p in procs:
        p.join(60)
        assert p.exitcode == 0
    assert owners == dict.fromkeys(range(TRIALS), 1), {t: n for t, n in owners.items() if n != 1}
    holders = {read_claim(store, _key(t))["pid"] for t in range(TRIALS)}
    assert stale["pid"] not in holders and holders <= {p.pid for p in procs}


def test_fresh_claims_and_live_owners(tmp_path: Path) -> None:
    store = tmp_path / "s.zarr"
    store.mkdir()
    key = _key(0)
    assert try_claim(store, key) and try_claim(store, key)  # ours, and still ours
    live = {"host": socket.gethostname(), "pid": 1}  # init: alive
    claim_path(store, key).write_text(json.dumps(live))
    assert not try_claim(store, key)
    other_host = {"host": "elsewhere", "pid": 123456}
    claim_path(store, key).write_text(json.dumps(other_host))
    assert not try_claim(store, key)  # liveness on another host cannot be checked: respected
