"""Fault injection, issue 26 item 5: a grower killed while the store grows (labels, iterates, episode slots,
variables) leaves it readable, and the next growth leaves it whole.

Before: a kill between two arrays' resizes left arrays of different lengths: the store could not be opened
('conflicting sizes for dimension ...'), and sometimes stayed so after the next growth."""

from __future__ import annotations

import json
import os
import shutil
import signal
from pathlib import Path

import numpy as np
import pytest
import zarr
from faultkit import CTX, kill_self_at_write, start, stop

import cube
from cube import open_cube, validate
from cube.store.grid import published_sizes

pytestmark = pytest.mark.faults

METADATA_WRITES = 20
"""zarr.json writes of `_grow_a_lot` on the base store (a label, episode slots, a variable, iterates)."""


def _base(path: Path) -> None:
    with cube.Recorder(path, algo="a", task="t", bound=1.0, seed=0) as rec:
        for j in range(3):
            rec.train_episodes(j, np.ones(3), np.full(3, 5.0))


def _grow_a_lot(path: str, nth: int | None, counter: object | None = None) -> None:
    """A new run (a new algo and seed label), 70 episodes (more slots), a new variable, iterate 20 (more
    iterates); killed at the `nth` metadata write when given, else looping until killed from outside."""
    if nth is not None:
        kill_self_at_write(lambda key: key.endswith("zarr.json"), nth)
    seed = 7
    while True:
        with cube.Recorder(path, algo=f"b{seed}", task="t", bound=1.0, seed=seed) as rec:
            rec.train_episodes(0, np.ones(70 + seed), np.ones(70 + seed))
            rec.iterate_vars(0, **{f"kl{seed}": 1.0})
            rec.train_episodes(20 + seed, np.ones(2), np.ones(2))
        if counter is None:
            return
        with counter.get_lock():  # type: ignore[attr-defined]
            counter.value += 1  # type: ignore[attr-defined]
        seed += 1


def _check_whole(path: Path, valid: bool = True) -> None:
    """Readable, the base run intact, and valid (`valid`)."""
    ds = open_cube(path)
    base = ds["cost"].sel(algo="a", task="t", bound=1.0, seed=0, mode="train").values
    np.testing.assert_array_equal(base[:3, :3], 5.0)
    assert np.isnan(base[3:]).all() and np.isnan(base[:, 3:]).all()
    if valid:
        assert validate(path) == []


def _shapes_match_published(path: Path) -> None:
    sizes = published_sizes(path)
    raw = zarr.open_group(path, mode="r")
    for name in raw.array_keys():
        meta = json.loads((path / name / "zarr.json").read_text())
        want = [sizes[d] for d in meta["dimension_names"]]
        assert meta["shape"] == want, (name, meta["shape"], want)


KILL_POINTS = (1, 5, 10, 13, 16, METADATA_WRITES)


def test_a_grower_killed_at_any_metadata_write_leaves_the_store_whole(tmp_path: Path) -> None:
    """Growers killed just before their 1st, 4th, ... last metadata write (one store each, all at once):
    each store opens with its finished runs, and the next growth leaves every array as long as published."""
    paths = [tmp_path / f"g{nth}.zarr" for nth in KILL_POINTS]
    _base(tmp_path / "base.zarr")
    for path in paths:
        shutil.copytree(tmp_path / "base.zarr", path)
    procs = [start(_grow_a_lot, str(path), nth) for path, nth in zip(paths, KILL_POINTS, strict=True)]
    assert [stop(proc) for proc in procs] == [-signal.SIGKILL] * len(procs)  # each died where it was told to
    for path in paths:
        _check_whole(path, valid=False)
        with cube.Recorder(path, algo="c", task="t", bound=2.0, seed=3) as rec:  # the next growth
            rec.train_episodes(40, np.ones(90), np.full(90, 2.0))
        _check_whole(path)
        _shapes_match_published(path)
        assert float(open_cube(path)["cost"].sel(algo="c", task="t", bound=2.0, seed=3, mode="train",
                                                 iterate=40).sum()) == 180.0


def test_growers_killed_at_random_moments_leave_the_store_whole(tmp_path: Path) -> None:
    """SIGKILL from outside after a few growths, wherever the grower is (a resize, a chunk write, a
    publication): the store stays readable with every finished run, and the next growth makes it whole."""
    trials = 2
    paths = [tmp_path / f"r{i}.zarr" for i in range(trials)]
    counters = [CTX.Value("i", 0) for _ in range(trials)]
    _base(tmp_path / "base.zarr")
    for path in paths:
        shutil.copytree(tmp_path / "base.zarr", path)
    procs = [start(_grow_a_lot, str(path), None, counter) for path, counter in zip(paths, counters, strict=True)]
    for i, (proc, counter) in enumerate(zip(procs, counters, strict=True)):
        while counter.value < 1 + i and proc.is_alive():  # a different number of growths for each trial
            proc.join(0.01)
        os.kill(proc.pid, signal.SIGKILL)
    for proc in procs:
        stop(proc)
    for path in paths:
        _check_whole(path, valid=False)
        with cube.Recorder(path, algo="c", task="t", bound=2.0, seed=3) as rec:
            rec.train_episodes(40, np.ones(90), np.full(90, 2.0))
        _check_whole(path)
        _shapes_match_published(path)
