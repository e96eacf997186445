"""Fault injection, issue 26 items 2, 6 and 12: recording a run again, writers killed mid-write, writers on a
full disk or a read-only store.

Before: a second Recorder of a run with data kept the old iterates it did not rewrite and marked the run
complete (C = 67 from costs 100, 100 and 1, silently); a writer killed between a run's reward and cost
writes left every later read refused ("a run was being written during every read of it") forever; a full
disk or a read-only store ended in a 50-line OSError traceback."""

from __future__ import annotations

import os
import signal
import warnings
from pathlib import Path

import numpy as np
import pytest
from faultkit import CTX, fill_disk, kill_self_at_write, mount_tmpfs, remount, start, stop, torn_slots, unmount

import cube
from cube import CubeError, CubeWriter, Recorder, RunKey, open_cube, read_manifests, stats, validate
from cube.store.locks import InterruptedWriteWarning

pytestmark = pytest.mark.faults

RUN = {"algo": "a", "task": "t", "bound": 10.0, "seed": 0}
KEY = RunKey("a", "t", 10.0, 0)


def _three_iterates_of_cost_100(path: Path) -> None:
    with Recorder(path, **RUN) as rec:
        for j in range(3):
            rec.train_episodes(j, [1.0], [100.0])


def _train_costs(path: Path) -> np.ndarray:
    return open_cube(path)["cost"].sel(**RUN, mode="train", episode=0).values


# ------------------------------------------------------------------------------------ item 2
def test_recording_a_run_with_data_again_is_refused_in_one_line(tmp_path: Path) -> None:
    path = tmp_path / "r.zarr"
    _three_iterates_of_cost_100(path)
    before = {p: p.read_bytes() for p in path.rglob("*") if p.is_file() and "_locks" not in p.parts}
    with pytest.raises(CubeError) as info, Recorder(path, **RUN) as rec:
        rec.train_episodes(0, [1.0], [1.0])
    message = str(info.value)
    assert "\n" not in message and "existing='resume'" in message and "existing='replace'" in message
    assert "3 iterate(s)" in message and "a/t/d=10/seed=0" in message
    after = {p: p.read_bytes() for p in path.rglob("*") if p.is_file() and "_locks" not in p.parts}
    assert after == before  # nothing written, not even the status


def test_resume_goes_on_after_the_last_recorded_iterate(tmp_path: Path) -> None:
    path = tmp_path / "r.zarr"
    _three_iterates_of_cost_100(path)
    with Recorder(path, **RUN, existing="resume") as rec:
        assert rec.next_iterate == 3
        with pytest.raises(CubeError, match="iterate 0 is recorded already .* record from iterate 3"):
            rec.train_episodes(0, [1.0], [1.0])
        rec.train_episodes(3, [1.0], [1.0])
    np.testing.assert_array_equal(_train_costs(path)[:4], [100.0, 100.0, 100.0, 1.0])
    assert read_manifests(path)[0]["status"] == "complete"


def _killed_mid_flush(path: str) -> None:
    """Record iterates 3 and 4 of a resumed run; die inside the flush of iterate 4 (after its costs)."""
    with Recorder(path, **RUN, existing="resume") as rec:
        rec.train_episodes(3, [1.0], [3.0])
        rec.train_episodes(4, [1.0], [4.0])
        kill_self_at_write(lambda key: key.startswith("run_manifest/"))
        rec.train_episodes(5, [1.0], [5.0])  # flushes iterate 4: episodes, then the manifest (killed)


def test_resume_drops_what_a_killed_recorder_left_after_its_last_flush(tmp_path: Path) -> None:
    path = tmp_path / "r.zarr"
    _three_iterates_of_cost_100(path)
    assert stop(start(_killed_mid_flush, str(path))) == -signal.SIGKILL
    with warnings.catch_warnings(record=True):
        warnings.simplefilter("always")
        with Recorder(path, **RUN, existing="resume") as rec:
            assert rec.next_iterate == 4  # iterate 4's flush never finished: it is recorded again
            rec.train_episodes(4, [1.0], [44.0])
    np.testing.assert_array_equal(_train_costs(path)[:5], [100.0, 100.0, 100.0, 3.0, 44.0])
    assert validate(path) == []


def test_replace_keeps_the_old_run_until_the_first_iterate_lands(tmp_path: Path) -> None:
    from cube.cli import main

    path = tmp_path / "r.zarr"
    _three_iterates_of_cost_100(path)
    with Recorder(path, **RUN, existing="replace") as rec:
        rec.train_episodes(0, [1.0], [1.0])  # buffered: nothing of the new run is in the store yet
        np.testing.assert_array_equal(_train_costs(path)[:3], [100.0, 100.0, 100.0])
        assert read_manifests(path)[0]["status"] == "complete"
        rec.train_episodes(1, [1.0], [1.0])  # iterate 0 lands: the old run goes with it
        costs = _train_costs(path)
        assert costs[0] == 1.0 and np.isnan(costs[1:]).all()
    costs = _train_costs(path)
    np.testing.assert_array_equal(costs[:2], [1.0, 1.0])
    assert np.isnan(costs[2:]).all()
    ss = stats.load_suffstats(path, cache=False)
    assert float(stats.run_metrics(ss, "train")["C"].squeeze()) == pytest.approx(1.0)
    assert main(["report", str(path), "--boot", "10", "--format", "csv"]) == 0


def _load_forever(path: str, ready: object, stop_event: object, bad: object) -> None:
    """Load the run again and again; report any load that is not one writer state of one recording: the
    run of cost 1 at iterate 0, or of cost 100 at its first 1, 2 or 3 iterates (recorded iterate by iterate)."""
    ds = open_cube(path)
    states = ([1.0], [100.0], [100.0, 100.0], [100.0, 100.0, 100.0])
    n = 0
    while not stop_event.is_set():  # type: ignore[attr-defined]
        got = ds.sel(**RUN, mode="train").saferl.load()
        costs = got["cost"].values[:, 0]
        seen = costs[~np.isnan(costs)].tolist()
        if seen not in states or torn_slots(got["reward"].values, got["cost"].values):
            bad.put(seen)  # type: ignore[attr-defined]
        n += 1
        if n == 3:
            ready.set()  # type: ignore[attr-defined]


def test_replacing_is_never_seen_half_done(tmp_path: Path) -> None:
    """A reader process loads the run while it is replaced back and forth: each load is one recording's
    state, never two recordings mixed (cost 1 beside costs 100), never an empty run."""
    import queue

    path = tmp_path / "r.zarr"
    _three_iterates_of_cost_100(path)
    ready, stop_event, bad = CTX.Event(), CTX.Event(), CTX.Queue()
    reader = start(_load_forever, str(path), ready, stop_event, bad)
    try:
        assert ready.wait(120)
        for cycle in range(16):
            with Recorder(path, **RUN, existing="replace") as rec:
                if cycle % 2 == 0:
                    rec.train_episodes(0, [1.0], [1.0])
                else:
                    for j in range(3):
                        rec.train_episodes(j, [1.0], [100.0])
    finally:
        stop_event.set()
        assert stop(reader) == 0
    with pytest.raises(queue.Empty):
        raise AssertionError(f"a load saw {bad.get(timeout=1)}")


def test_the_existing_policy_for_importers(tmp_path: Path) -> None:
    """`CubeWriter.existing_run` / `replace_run`, the mechanism of `saferl import --into`."""
    path = tmp_path / "r.zarr"
    _three_iterates_of_cost_100(path)
    writer = CubeWriter(path)
    with pytest.raises(CubeError, match="existing='resume'"):
        writer.existing_run(KEY)
    assert writer.existing_run(KEY, "resume") == 3 and writer.existing_run(KEY, "replace") == 0
    assert writer.existing_run(RunKey("a", "t", 10.0, 1), "refuse") == 0  # not in the grid yet: empty
    shape = (len(writer.coords["iterate"]), len(writer.coords["episode"]), len(writer.coords["mode"]))
    reward, cost = np.full(shape, np.nan, np.float32), np.full(shape, np.nan, np.float32)
    reward[0, 0, 0], cost[0, 0, 0] = 2.0, 7.0
    writer.replace_run(KEY, reward, cost, manifest={"format": "test"})
    costs = _train_costs(path)
    assert costs[0] == 7.0 and np.isnan(costs[1:]).all()


# ------------------------------------------------------------------------------------ item 6
def _write_then_die_between_reward_and_cost(path: str) -> None:
    """Three whole iterates, then die after writing iterate 3's rewards, before its costs."""
    writer = CubeWriter(path)
    for j in range(3):
        writer.write_episodes(KEY, "train", j, [1.0, 2.0], [10.0, 20.0])
    kill_self_at_write(lambda key: key.startswith("cost/c/"))
    writer.write_episodes(KEY, "train", 3, [5.0, 5.0, 5.0], [50.0, 50.0, 50.0])


def test_a_writer_killed_mid_write_is_an_interrupted_write_not_a_refusal(tmp_path: Path) -> None:
    from cube.cli import main

    path = tmp_path / "k.zarr"
    cube.create_store(path, algos=["a"], tasks=["t"], bounds=[10.0], seeds=[0, 1], n_iterates=6, n_episodes=4)
    cube.set_run_manifest(path, KEY, status="partial")
    assert stop(start(_write_then_die_between_reward_and_cost, str(path))) == -signal.SIGKILL
    plain = open_cube(path)["reward"].sel(**RUN, mode="train", iterate=3).values
    assert np.isfinite(plain).sum() == 3  # the rewards landed, the costs did not: torn for a plain read

    notes: list[str] = []
    assert validate(path, notes=notes) == []
    assert len(notes) == 1 and "a/t/d=10/seed=0" in notes[0] and "iterate 3" in notes[0] and "interrupted" in notes[0]
    with pytest.warns(InterruptedWriteWarning, match="iterate 3"):
        ss = stats.load_suffstats(path, cache=False)
    n = ss["n"].sel(**RUN, mode="train").values
    np.testing.assert_array_equal(n[:4], [2, 2, 2, 0])  # iterate 3 is left out, the others stay
    assert (ss["n_r"].values == ss["n"].values).all()
    assert int(ss["run_status"].sel(**RUN)) == 1  # partial
    with pytest.warns(InterruptedWriteWarning):
        loaded = open_cube(path).saferl.load()
    assert torn_slots(loaded["reward"].values, loaded["cost"].values) == 0
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert main(["validate", str(path)]) == 0
        assert main(["report", str(path), "--boot", "10", "--format", "csv"]) == 0

    CubeWriter(path).write_episodes(KEY, "train", 4, [1.0], [1.0])  # the run's next write repairs it
    raw = open_cube(path).sel(**RUN, mode="train", iterate=3)
    assert np.isnan(raw["reward"].values).all() and np.isnan(raw["cost"].values).all()
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no interrupted write is left
        assert validate(path) == []
        stats.load_suffstats(path, cache=False)


def _record_until_killed(path: str, counter: object) -> None:
    with Recorder(path, **RUN) as rec:
        for j in range(100_000):
            rec.train_episodes(j, np.ones(3 + j % 5), np.full(3 + j % 5, float(j)))
            rec.iterate_vars(j, multiplier=float(j))
            with counter.get_lock():  # type: ignore[attr-defined]
                counter.value = j  # type: ignore[attr-defined]


def test_recorders_killed_at_random_moments_never_leave_a_store_refused(tmp_path: Path) -> None:
    """SIGKILL at arbitrary points of recording (whichever write it lands in): validate, the statistics
    pass and the consistent load work, every iterate they see is whole, and the run is partial."""
    trials = 3
    paths = [tmp_path / f"k{i}.zarr" for i in range(trials)]
    counters = [CTX.Value("i", 0) for _ in range(trials)]
    procs = [start(_record_until_killed, str(p), c) for p, c in zip(paths, counters, strict=True)]
    for i, (proc, counter) in enumerate(zip(procs, counters, strict=True)):
        while counter.value < 5 + 7 * i and proc.is_alive():
            proc.join(0.01)
        os.kill(proc.pid, signal.SIGKILL)
    for proc in procs:
        stop(proc)
    for path in paths:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", InterruptedWriteWarning)
            assert validate(path) == []
            ss = stats.load_suffstats(path, cache=False)
            loaded = open_cube(path).saferl.load()
        assert (ss["n_r"].values == ss["n"].values).all()
        assert torn_slots(loaded["reward"].values, loaded["cost"].values) == 0
        costs = loaded["cost"].sel(**RUN, mode="train").values
        for j, row in enumerate(costs):  # an iterate is all there or not at all
            kept = row[np.isfinite(row)]
            assert kept.size in (0, 3 + j % 5) and (kept == j).all()
        assert read_manifests(path)[0]["status"] == "partial"


# ------------------------------------------------------------------------------------ item 12
@pytest.fixture
def small_disk(tmp_path: Path):
    """A 3 MiB tmpfs (root can mount one here); skipped where mounting is not allowed."""
    mount = tmp_path / "disk"
    why = mount_tmpfs(mount)
    if why:
        pytest.skip(f"cannot mount a tmpfs here ({why}); these tests need root")
    yield mount
    unmount(mount)


def test_a_recorder_on_a_full_disk_is_one_line_and_the_store_stays_valid(small_disk: Path) -> None:
    path = small_disk / "full.zarr"
    _three_iterates_of_cost_100(path)
    fill_disk(small_disk)
    with pytest.raises(CubeError) as info, Recorder(path, algo="b", task="t", bound=10.0, seed=1) as rec:
        for j in range(50):
            rec.train_episodes(j, np.ones(64), np.ones(64))
    message = str(info.value)
    assert "\n" not in message and "No space left on device" in message and "free some space" in message
    (small_disk / "ballast").unlink()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", InterruptedWriteWarning)
        assert validate(path) == []
    np.testing.assert_array_equal(_train_costs(path)[:3], [100.0, 100.0, 100.0])


def test_a_recorder_on_a_read_only_store_is_one_line(small_disk: Path) -> None:
    path = small_disk / "ro.zarr"
    _three_iterates_of_cost_100(path)
    remount(small_disk, "ro")
    try:
        for run in (RUN, {"algo": "b", "task": "t", "bound": 10.0, "seed": 1}):
            with pytest.raises(CubeError) as info, Recorder(path, **run, existing="resume") as rec:
                rec.train_episodes(3, [1.0], [1.0])
            assert "\n" not in str(info.value) and "read-only" in str(info.value)
    finally:
        remount(small_disk, "rw")
    assert validate(path) == []
