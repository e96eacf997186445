"""One writer per run for a recording's whole life (issue 36): the Recorder, `import --into` and `saferl train`
claim the run when they open, through `cube.store.claims`.

Before: two Recorders started on one new run both passed `existing="refuse"` (the check ran before data
landed and nothing claimed the run), both exited 0, and the run held one writer's iterates followed by the
other's, marked complete. The racing trials are forked writers meeting at seeded points; the full counts
(200 each) are `bench/fault_trials.py`'s."""

from __future__ import annotations

import json
import multiprocessing as mp
import os
import signal
import socket
from pathlib import Path

import pytest
from faultkit import kill_self_at_write
from writertrials import ITERATES, RUN, race_trial

from cube import CubeError, Recorder, RunKey, read_manifests, validate
from cube.store.claims import ClaimRefused, claim_path, claim_state, read_claim, take_claims
from cube.store.runstatus import RunStatusReader

pytestmark = pytest.mark.faults

KEY = RunKey(RUN["algo"], RUN["task"], RUN["bound"], RUN["seed"])
RACES = 10  # seeded trials here; bench/fault_trials.py runs 200 of each kind


@pytest.mark.parametrize("seed", range(RACES))
def test_two_recorders_of_one_run_one_records_the_other_is_refused(tmp_path: Path, seed: int) -> None:
    assert race_trial(tmp_path, seed, "recorder") == []


@pytest.mark.parametrize("seed", range(3))
def test_two_imports_into_one_run_one_records_the_other_is_refused(tmp_path: Path, seed: int) -> None:
    assert race_trial(tmp_path, seed, "import") == []


def test_a_second_recorder_of_this_process_is_refused_whatever_existing_says(tmp_path: Path) -> None:
    path = tmp_path / "r.zarr"
    with Recorder(path, **RUN) as first:
        first.train_episodes(0, [1.0], [5.0])
        for existing in ("refuse", "resume", "replace"):
            with pytest.raises(ClaimRefused) as info, Recorder(path, **RUN, existing=existing):
                pass
            line = str(info.value)
            assert "\n" not in line and f"host {socket.gethostname()}" in line and f"pid {os.getpid()}" in line
            assert "since 20" in line and "cube.Recorder" in line
        first.train_episodes(1, [1.0], [6.0])
    assert claim_state(path, KEY).state == "free"  # released on exit
    assert read_manifests(path)[0]["status"] == "complete" and validate(path) == []


def _killed_recorder(path: str) -> None:
    with Recorder(path, **RUN) as rec:
        rec.train_episodes(0, [1.0], [7.0])
        kill_self_at_write(lambda key: key.startswith("cost/"))
        rec.train_episodes(1, [1.0], [8.0])  # flushes iterate 0: killed inside that bracket


def test_a_dead_recorders_claim_is_taken_over_and_resume_goes_on(tmp_path: Path) -> None:
    path = tmp_path / "r.zarr"
    proc = mp.get_context("fork").Process(target=_killed_recorder, args=(str(path),))
    proc.start()
    proc.join(60)
    assert proc.exitcode == -signal.SIGKILL
    assert claim_state(path, KEY).state == "stale"
    row = RunStatusReader(path).read()[0]
    assert row.status == "stopped" and row.stored == "partial"
    with Recorder(path, **RUN, existing="resume") as rec:  # no hand cleanup: the killed bracket is repaired
        assert rec.next_iterate == 0
        for j in range(ITERATES):
            rec.train_episodes(j, [1.0], [float(j)])
    assert validate(path) == [] and read_manifests(path)[0]["status"] == "complete"


def test_a_claim_of_another_host_is_refused_and_says_what_to_do(tmp_path: Path) -> None:
    path = tmp_path / "r.zarr"
    with Recorder(path, **RUN) as rec:
        rec.train_episodes(0, [1.0], [1.0])
    claim = claim_path(path, KEY)
    claim.parent.mkdir(parents=True, exist_ok=True)
    claim.write_text(json.dumps({"host": "node7", "pid": 4242, "since": 1_790_000_000.0, "writer": "saferl train"}))
    with pytest.raises(ClaimRefused) as info, Recorder(path, **RUN, existing="resume"):
        pass
    line = str(info.value)
    assert "host node7, pid 4242, since 2026-" in line and "another host" in line and str(claim) in line
    assert read_claim(path, KEY)["host"] == "node7"  # never taken over


def test_a_reused_pid_does_not_keep_a_dead_claim_alive(tmp_path: Path) -> None:
    """A claim naming this host and a live pid whose process started at another time (the pid was reused
    after its claimant died) is stale: the next writer takes it over."""
    path = tmp_path / "r.zarr"
    path.mkdir()
    claim = claim_path(path, KEY)
    claim.parent.mkdir(parents=True)
    claim.write_text(json.dumps({"host": socket.gethostname(), "pid": os.getpid(), "started": 1}))
    assert claim_state(path, KEY).state == "stale"
    with take_claims(path, [KEY], "test") as held:
        assert held.keys == [KEY] and read_claim(path, KEY)["writer"] == "test"
    assert claim_state(path, KEY).state == "free"


def test_claims_of_odd_labels_stay_inside_the_claims_folder(tmp_path: Path) -> None:
    path = tmp_path / "r.zarr"
    path.mkdir()
    keys = [RunKey("../../x", "a/b", 1.0, 0), RunKey(".", "..", 1.0, 1), RunKey("ppo[lag]", "t", 1.0, 2)]
    with take_claims(path, keys, "test"):
        for key in keys:
            assert claim_path(path, key).resolve().is_relative_to((path / "_claims").resolve())
            assert claim_state(path, key).state == "held"
    assert not (tmp_path / "x").exists()


def test_an_import_into_a_run_a_recorder_holds_is_refused(tmp_path: Path) -> None:
    from cube.io.registry import import_runs
    from cube.io.writing import add_runs

    path = tmp_path / "r.zarr"
    table = tmp_path / "e.csv"
    table.write_text("algo,task,bound,seed,iterate,mode,reward,cost\na,t,10,0,0,train,1,2\n")
    with Recorder(path, **RUN) as rec:
        rec.train_episodes(0, [1.0], [3.0])
        with pytest.raises(CubeError, match="another writer is recording it .*cube.Recorder"):
            add_runs(import_runs("episodes", [table]), path, fmt="episodes", replace=True)
    assert read_manifests(path)[0]["status"] == "complete"


def test_a_sweeps_claim_and_a_recorder_exclude_each_other(tmp_path: Path) -> None:
    """`saferl train` claims through the same machinery (`train.claims` is cube's): a run its sweep holds
    refuses a Recorder, and a run a Recorder holds is left by the sweep."""
    from cube import create_store
    from train.claims import release, try_claim

    path = tmp_path / "r.zarr"
    create_store(path, algos=["a"], tasks=["t"], bounds=[10.0], seeds=[0], n_iterates=1, n_episodes=1)
    assert try_claim(path, KEY)
    with pytest.raises(ClaimRefused, match="saferl train"), Recorder(path, **RUN):
        pass
    release(path, KEY)
    with Recorder(path, **RUN) as rec:
        rec.train_episodes(0, [1.0], [1.0])
        assert not try_claim(path, KEY)
