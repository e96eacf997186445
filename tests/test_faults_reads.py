"""Fault injection, issue 26 items 1 and 9: every read path while writers write and recorders grow the store.

Before: `cube.open_cube(path)` loaded while a writer wrote held rewards without costs in most reads, and so
did `saferl export`; statistics passes, validate and report failed while recorders grew the grid
(conflicting sizes, cannot reshape, could not broadcast)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from faultkit import CTX, start, stop, torn_slots, write_forever

import cube
from cube import CubeWriter, RunKey, create_store, open_cube, stats, validate

pytestmark = pytest.mark.faults

KEY = RunKey("ppo", "goal", 15.0, 0)


@pytest.fixture
def busy_store(tmp_path: Path):
    """A store whose run KEY another process rewrites without pause (the writer never lets go for long)."""
    path = tmp_path / "busy.zarr"
    create_store(path, algos=["ppo"], tasks=["goal"], bounds=[15.0], seeds=[0, 1], n_iterates=4, n_episodes=8)
    writer = CubeWriter(path)
    for it in range(4):
        writer.write_episodes(KEY, "train", it, np.ones(8), np.ones(8))
    started, stop_event = CTX.Event(), CTX.Event()
    proc = start(write_forever, str(path), (KEY.algo, KEY.task, KEY.bound, KEY.seed), started, stop_event)
    assert started.wait(60)
    yield path
    stop_event.set()
    assert stop(proc) == 0


def _same_write(reward: np.ndarray, cost: np.ndarray) -> bool:
    """Rewards and costs of the busy writer's writes: cost = |reward| + 1 (or the first write's ones)."""
    r, c = reward[~np.isnan(reward)], cost[~np.isnan(cost)]
    return r.shape == c.shape and bool((np.isclose(c, np.abs(r) + 1.0, rtol=1e-6) | ((r == 1) & (c == 1))).all())


def test_open_cube_load_is_one_writer_state_per_run(busy_store: Path) -> None:
    """`ds.saferl.load()` of the whole cube and of selections, while a writer never pauses: no torn slot."""
    ds = open_cube(busy_store)
    selections = [ds, ds.sel(seed=0), ds.sel(algo="ppo", mode="train").isel(iterate=[1, 3]),
                  ds.isel(episode=slice(0, 5))[["cost", "reward"]]]
    for attempt in range(40):
        got = selections[attempt % len(selections)].saferl.load()
        assert torn_slots(got["reward"].values, got["cost"].values) == 0, f"load {attempt}"
        run = got.sel(seed=0) if "seed" in got.dims else got
        assert _same_write(run["reward"].values, run["cost"].values), f"load {attempt}: two writes mixed"


def test_export_is_one_writer_state_per_run(busy_store: Path, tmp_path: Path) -> None:
    """`saferl export` while a writer never pauses: every exported run is one writer state."""
    import xarray as xr

    from cube.cli import main

    for attempt in range(8):
        out = tmp_path / f"e{attempt}.nc"
        assert main(["export", str(busy_store), str(out)]) == 0
        with xr.open_dataset(out) as ds:
            assert torn_slots(ds["reward"].values, ds["cost"].values) == 0, f"export {attempt}"


def _record_growing(path: str, seed: int, started: object, stop_event: object) -> None:
    """A recorder whose every iterate grows the iterate axis, and the episode axis up to 40 slots."""
    with cube.Recorder(path, algo="grow", task="t", bound=10.0, seed=seed) as rec:
        j = 0
        while not stop_event.is_set():  # type: ignore[attr-defined]
            n = 1 + j % 40
            rec.train_episodes(j, np.full(n, float(j)), np.full(n, float(j) + 1.0))
            j += 1
            if j == 5:
                started.set()  # type: ignore[attr-defined]


def _record_new_labels(path: str, started: object, stop_event: object) -> None:
    """Recorders of ever new seeds (the seed axis grows), a few iterates each."""
    seed = 100
    while not stop_event.is_set():  # type: ignore[attr-defined]
        with cube.Recorder(path, algo="grow", task="t", bound=10.0, seed=seed) as rec:
            for j in range(3):
                rec.train_episodes(j, np.ones(2), np.full(2, 2.0))
        seed += 1
        started.set()  # type: ignore[attr-defined]


def test_readers_never_fail_while_recorders_grow_the_grid(tmp_path: Path) -> None:
    """Statistics passes (with and without the cache), validate, the consistent load and `saferl report`,
    while two recorders grow the iterate and episode axes at every iterate and a third adds seeds: every
    read sees the grid before or after a growth, never between, and nothing is torn."""
    from cube.cli import main

    path = tmp_path / "growing.zarr"
    with cube.Recorder(path, algo="grow", task="t", bound=10.0, seed=0) as rec:
        rec.train_episodes(0, [1.0], [2.0])
    stop_event = CTX.Event()
    events = [CTX.Event() for _ in range(3)]
    procs = [start(_record_growing, str(path), 1, events[0], stop_event),
             start(_record_growing, str(path), 2, events[1], stop_event),
             start(_record_new_labels, str(path), events[2], stop_event)]
    try:
        for event in events:
            assert event.wait(120)
        for attempt in range(12):
            kind = attempt % 4
            if kind == 0:
                ss = stats.load_suffstats(path, cache=attempt % 8 == 0)
                assert (ss["n_r"].values == ss["n"].values).all(), f"pass {attempt}"
            elif kind == 1:
                assert validate(path) == [], f"validate {attempt}"
            elif kind == 2:
                got = open_cube(path).saferl.load()
                assert torn_slots(got["reward"].values, got["cost"].values) == 0
            else:
                assert main(["report", str(path), "--boot", "10", "--format", "csv"]) == 0, f"report {attempt}"
    finally:
        stop_event.set()
        codes = [stop(p) for p in procs]
    assert codes == [0, 0, 0]
    assert validate(path) == []
