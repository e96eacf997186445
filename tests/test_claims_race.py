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


CHURN_ROUNDS = 250
CHURN_PROCESSES = 4


def _churn(store: str, start: object, out: object) -> None:
    """Take, hold and release one run's claim in a loop; a hold checks 5 times that the claim is still ours.
    Reports (start_ns, end_ns, replaced) of each hold."""
    import os
    import time

    from train.claims import release

    key = _key(0)
    me = os.getpid()
    holds = []
    start.wait()  # type: ignore[attr-defined]
    for _ in range(CHURN_ROUNDS):
        if not try_claim(store, key):
            continue
        begin = time.monotonic_ns()  # CLOCK_MONOTONIC: one clock for every process of the machine
        replaced = any((read_claim(store, key) or {}).get("pid") != me for _ in range(5))
        end = time.monotonic_ns()
        holds.append((begin, end, replaced))
        release(store, key)
    out.put((me, holds))  # type: ignore[attr-defined]


def test_a_claim_has_one_holder_at_a_time_under_churn(tmp_path: Path) -> None:
    """Several processes take, hold and release the same run's claim as fast as they can: no two holds
    overlap, and no holder ever finds its claim replaced (before: hundreds of overlapping holds)."""
    store = tmp_path / "s.zarr"
    store.mkdir()
    ctx = mp.get_context("spawn")
    start, out = ctx.Barrier(CHURN_PROCESSES), ctx.Queue()
    procs = [ctx.Process(target=_churn, args=(str(store), start, out)) for _ in range(CHURN_PROCESSES)]
    for p in procs:
        p.start()
    holds = [(b, e, r, pid) for pid, rows in (out.get(timeout=300) for _ in procs) for b, e, r in rows]
    for p in procs:
        p.join(60)
        assert p.exitcode == 0
    holds.sort()
    overlaps = [(a, b) for a, b in zip(holds, holds[1:], strict=False) if b[0] < a[1] and a[3] != b[3]]
    assert not overlaps, f"{len(overlaps)} of {len(holds)} holds overlapped"
    assert not any(r for _, _, r, _ in holds), "a holder found its claim replaced"
    assert len(holds) >= CHURN_ROUNDS // 5 and len({pid for *_, pid in holds}) > 1  # it changed hands


@pytest.mark.parametrize("content", ['["host", 1]', '{"host": "h", "pid"', "", '{"host": "HOST", "pid": -1}',
                                     '{"host": "HOST", "pid": 0}', '{"host": "HOST", "pid": "12"}',
                                     '{"host": "HOST", "pid": true}', '{"pid": 12}', "\x00\xff"])
def test_a_damaged_claim_is_stale(tmp_path: Path, content: str) -> None:
    """Claims a kill or a bad disk left unreadable name no holder: reading them never raises, status
    says they are damaged, and the next trainer takes the run."""
    from train.claims import claim_state

    store = tmp_path / "s.zarr"
    store.mkdir()
    key = _key(0)
    path = claim_path(store, key)
    path.parent.mkdir(parents=True)
    path.write_text(content.replace("HOST", socket.gethostname()), errors="surrogateescape")
    state = claim_state(store, key)
    assert state.state == "damaged" and state.takeable and "damaged" in state.describe()
    assert read_claim(store, key) is None
    assert try_claim(store, key)
    holder = read_claim(store, key) or {}
    assert (holder["host"], holder["pid"]) == (socket.gethostname(), __import__("os").getpid())
