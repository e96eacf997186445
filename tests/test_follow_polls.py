"""Follow mode across several writes (issue 36): every write is seen, the second as the first, and a folder
whose time stamp did not move (a coarse clock: two writes within one tick) is still read again.

Before: every follow test made one write, so handing the model the watcher's own sequence array (which the
next poll updates in place: the model then already "has" the second write and skips it) passed, and so did
never re-reading the folders that changed just before a poll."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np

from cube import CubeWriter, RunKey, create_store
from cube.stats import load_suffstats
from cube.store.locks import WRITE_SEQ, SeqWatch
from saferl_tui.follow import Follower
from saferl_tui.model import CubeModel

KEYS = [RunKey("a", "t", 10.0, s) for s in range(2)]


def _store(tmp_path: Path) -> Path:
    path = tmp_path / "f.zarr"
    create_store(path, algos=["a"], tasks=["t"], bounds=[10.0], seeds=[0, 1], n_iterates=4, n_episodes=4)
    writer = CubeWriter(path)
    for key in KEYS:
        writer.write_episodes(key, "train", 0, [1.0, 2.0], [3.0, 4.0])
    return path


def _sum_c(ss: object, seed: int, iterate: int) -> float:
    return float(ss["sum_c"].sel(algo="a", task="t", bound=10.0, seed=seed, iterate=iterate, mode="train"))  # type: ignore[index]


def test_follow_sees_every_one_of_several_writes(tmp_path: Path) -> None:
    path = _store(tmp_path)
    model = CubeModel(path, boot=20)
    model.load(lambda f, t: None)
    follower = Follower(model)
    assert follower.step() is None  # nothing written since the load
    writer = CubeWriter(path)
    for j, (seed, cost) in enumerate([(0, 10.0), (1, 20.0), (0, 30.0)], start=1):
        writer.write_episodes(KEYS[seed], "train", j, [1.0], [cost])
        update = follower.step()
        assert update is not None and update.changed == 1 and update.error is None, (j, update)
        assert _sum_c(model.ss, seed, j) == cost, j
    fresh = load_suffstats(path, cache=False)
    np.testing.assert_array_equal(model.ss["sum_c"].values, fresh["sum_c"].values)


def test_a_folder_written_within_one_clock_tick_is_read_again(tmp_path: Path) -> None:
    """Two writes of a run whose sequence folder keeps its time stamp (a file system with coarse times):
    the poll after the second still reads that folder's sequences (it changed just before the previous
    poll)."""
    path = _store(tmp_path)
    watch = SeqWatch(path)
    _, first = watch.poll()
    assert first is not None
    first = first.copy()
    folder = path / WRITE_SEQ / "c" / "0" / "0" / "0"
    writer = CubeWriter(path)
    writer.write_episodes(KEYS[0], "train", 1, [1.0], [1.0])
    _, second = watch.poll()
    assert second is not None and second[0, 0, 0, 0] == first[0, 0, 0, 0] + 2
    stamp = folder.stat().st_mtime_ns
    writer.write_episodes(KEYS[0], "train", 2, [1.0], [1.0])
    os.utime(folder, ns=(stamp, stamp))  # the clock did not tick between the two writes
    _, third = watch.poll()
    assert third is not None and third[0, 0, 0, 0] == first[0, 0, 0, 0] + 4
