"""Round trips, concurrency, grid extension and refusals of the Zarr store."""

from __future__ import annotations

import json
import multiprocessing as mp
from pathlib import Path

import numpy as np
import pytest
import xarray as xr

from cube import (
    CubeError,
    CubeWriter,
    RunKey,
    create_store,
    export_netcdf,
    extend_store,
    open_cube,
    read_manifests,
    set_run_manifest,
    validate,
    write_episodes,
    write_iterate_vars,
)
from cube.schema import DIMS
from tests.conftest import TINY_GRID, ragged_episodes


def _read_run(path: Path, key: RunKey) -> xr.Dataset:
    return open_cube(path).sel(algo=key.algo, task=key.task, bound=key.bound, seed=key.seed).compute()


def test_create_store_has_contract_dims_and_is_empty(tiny_store: Path) -> None:
    ds = xr.open_zarr(tiny_store, consolidated=False)
    assert ds["cost"].dims == DIMS and ds["reward"].dims == DIMS
    assert ds["cost"].dtype == np.float32
    assert ds.sizes["iterate"] == 4 and ds.sizes["episode"] == 6
    assert list(ds["mode"].values) == ["train", "expl", "greedy"]
    assert int(ds["cost"].count()) == 0
    assert (ds["run_status"].values == 0).all()
    assert ds.attrs["saferl_schema_version"] == 1


def test_ragged_round_trip(tiny_store: Path, tiny_key: RunKey) -> None:
    rng = np.random.default_rng(0)
    r0, c0 = ragged_episodes(rng, 6)
    r1, c1 = ragged_episodes(rng, 3)
    write_episodes(tiny_store, tiny_key, "train", 0, r0, c0)
    write_episodes(tiny_store, tiny_key, "train", 1, r1, c1)
    re, ce = ragged_episodes(rng, 2)
    write_episodes(tiny_store, tiny_key, "greedy", 3, re, ce)
    run = _read_run(tiny_store, tiny_key)
    np.testing.assert_allclose(run.cost.sel(mode="train", iterate=0), c0.astype(np.float32))
    np.testing.assert_allclose(run.cost.sel(mode="train", iterate=1)[:3], c1.astype(np.float32))
    assert np.isnan(run.cost.sel(mode="train", iterate=1)[3:]).all()
    np.testing.assert_allclose(run.reward.sel(mode="greedy", iterate=3)[:2], re.astype(np.float32))
    assert int(run.cost.count()) == 6 + 3 + 2
    # nothing leaked into another run
    assert int(open_cube(tiny_store).cost.count()) == 11


def test_rewriting_an_iterate_replaces_all_its_slots(tiny_store: Path, tiny_key: RunKey) -> None:
    write_episodes(tiny_store, tiny_key, "train", 2, np.ones(6), np.ones(6))
    write_episodes(tiny_store, tiny_key, "train", 2, [5.0, 6.0], [1.0, 2.0])
    run = _read_run(tiny_store, tiny_key)
    assert int(run.cost.sel(mode="train", iterate=2).count()) == 2


def test_block_write_of_several_iterates(tiny_store: Path, tiny_key: RunKey) -> None:
    cost = np.arange(12, dtype=float).reshape(3, 4)
    write_episodes(tiny_store, tiny_key, "expl", 1, cost + 1, cost)
    run = _read_run(tiny_store, tiny_key)
    np.testing.assert_array_equal(run.cost.sel(mode="expl").values[1:, :4], cost)
    assert np.isnan(run.cost.sel(mode="expl", iterate=0)).all()


def test_iterate_vars_and_manifest(tiny_store: Path, tiny_key: RunKey) -> None:
    write_iterate_vars(tiny_store, tiny_key, 0, {"env_steps": [10, 20, 30, 40], "multiplier": [0, 0.5, 1, 1.5]})
    write_iterate_vars(tiny_store, tiny_key, 3, {"multiplier": 2.0})
    set_run_manifest(tiny_store, tiny_key, status="partial", manifest={"config": {"lr": 5e-4}})
    run = _read_run(tiny_store, tiny_key)
    np.testing.assert_array_equal(run.env_steps.values, [10, 20, 30, 40])
    np.testing.assert_array_equal(run.multiplier.values, [0, 0.5, 1, 2.0])
    assert int(run.run_status) == 1
    assert json.loads(str(run.run_manifest.values))["config"]["lr"] == 5e-4
    rows = {(r["algo"], r["task"], r["bound"], r["seed"]): r for r in read_manifests(tiny_store)}
    assert rows[("ppo_lag", "circle", 25.0, 1)]["status"] == "partial"
    assert rows[("ppo", "goal", 15.0, 0)]["status"] == "pending"


def _write_runs_in_process(path: str, seeds: list[int], algo: str, start: object = None, mine: object = None,
                           other: object = None, times: object = None) -> None:
    """Write every run of `algo`; with the synchronisation objects: start behind the barrier `start`, and after
    the first run signal `mine` and wait for `other` (the other process's first run) before writing the rest,
    so the two processes' writes overlap every time; the (start, end) monotonic ns go to `times`."""
    import time

    writer = CubeWriter(path)
    if start is not None:
        start.wait()  # type: ignore[attr-defined]
    began = time.monotonic_ns()
    first = True
    for seed in seeds:
        for task in TINY_GRID["tasks"]:
            for bound in TINY_GRID["bounds"]:
                key = RunKey(algo, task, bound, seed)
                for it in range(TINY_GRID["n_iterates"]):
                    value = seed * 1000 + it * 10 + bound / 100
                    writer.write_episodes(key, "train", it, np.full(6, value), np.full(6, value))
                writer.set_run_manifest(key, status="complete")
                if first and mine is not None:
                    first = False
                    mine.set()  # type: ignore[attr-defined]
                    assert other.wait(120)  # type: ignore[attr-defined]
    if times is not None:
        times.put((began, time.monotonic_ns()))  # type: ignore[attr-defined]


def test_two_processes_write_different_runs_concurrently(tiny_store: Path) -> None:
    """Two processes write different runs of one store at the same time: they start behind a barrier and each
    waits, after its first run, for the other's first run, so their writes overlap on every run of the test
    (checked by their time spans); nothing of either is lost."""
    ctx = mp.get_context("spawn")
    start, times = ctx.Barrier(2), ctx.Queue()
    events = [ctx.Event(), ctx.Event()]
    procs = [
        ctx.Process(target=_write_runs_in_process,
                    args=(str(tiny_store), [0, 1, 2], algo, start, events[i], events[1 - i], times))
        for i, algo in enumerate(TINY_GRID["algos"])
    ]
    for p in procs:
        p.start()
    spans = [times.get(timeout=120) for _ in procs]
    for p in procs:
        p.join(timeout=120)
        assert p.exitcode == 0
    assert max(b for b, _ in spans) < min(e for _, e in spans)  # the two writers overlapped
    ds = open_cube(tiny_store).sel(mode="train").compute()
    assert int(ds.cost.count()) == 2 * 2 * 2 * 3 * 4 * 6
    expected = ds.seed * 1000 + ds.iterate * 10 + ds.bound / 100
    np.testing.assert_allclose(ds.cost.isel(episode=0), expected.broadcast_like(ds.cost.isel(episode=0)), rtol=1e-6)
    assert (ds.run_status == 2).all()


def test_extend_grid_keeps_existing_data(tiny_store: Path, tiny_key: RunKey) -> None:
    write_episodes(tiny_store, tiny_key, "train", 0, [1.0, 2.0], [3.0, 4.0])
    before = {p.relative_to(tiny_store): p.stat().st_mtime_ns
              for p in (tiny_store / "cost" / "c").rglob("*") if p.is_file()}
    added = extend_store(tiny_store, algos=["p3o"], bounds=[50.0, 25.0], seeds=[5])
    assert added == {"algo": ["p3o"], "bound": [50.0], "seed": [5]}
    after = {p.relative_to(tiny_store): p.stat().st_mtime_ns
             for p in (tiny_store / "cost" / "c").rglob("*") if p.is_file()}
    assert before == after  # no chunk rewritten
    ds = open_cube(tiny_store)
    assert list(ds.algo.values) == ["ppo", "ppo_lag", "p3o"]
    assert list(ds.bound.values) == [15.0, 25.0, 50.0]
    assert list(ds.seed.values) == [0, 1, 2, 5]
    np.testing.assert_array_equal(_read_run(tiny_store, tiny_key).cost.sel(mode="train", iterate=0)[:2], [3, 4])
    new_key = RunKey("p3o", "goal", 50.0, 5)
    write_episodes(tiny_store, new_key, "greedy", 3, [1.0], [2.0])
    assert int(_read_run(tiny_store, new_key).cost.count()) == 1
    assert int(ds.run_status.sel(algo="p3o").sum()) == 0
    assert validate(tiny_store) == []


def test_netcdf_round_trip(tmp_path: Path, tiny_store: Path, tiny_key: RunKey) -> None:
    write_episodes(tiny_store, tiny_key, "train", 0, [1.0, 2.0, 3.0], [0.0, 20.0, 30.0])
    set_run_manifest(tiny_store, tiny_key, status="complete", manifest={"x": 1})
    out = export_netcdf(tiny_store, tmp_path / "cube.nc")
    a, b = open_cube(tiny_store), open_cube(out)
    xr.testing.assert_equal(a[["reward", "cost"]].compute(), b[["reward", "cost"]].compute())
    assert list(b.algo.values) == list(a.algo.values)
    assert str(b.run_manifest.sel(algo="ppo_lag", task="circle", bound=25.0, seed=1).values) == str(
        a.run_manifest.sel(algo="ppo_lag", task="circle", bound=25.0, seed=1).values
    )
    assert validate(out) == []


def test_foreign_cube_written_by_plain_xarray_opens(tmp_path: Path) -> None:
    rng = np.random.default_rng(1)
    shape = (1, 1, 2, 2, 3, 5, 1)
    coords = {
        "algo": np.array(["mine"], dtype=object), "task": np.array(["goal"], dtype=object),
        "bound": [10, 20], "seed": [0, 1], "iterate": [0, 1, 2], "episode": np.arange(5),
        "mode": np.array(["train"], dtype=object),
    }
    ds = xr.Dataset(
        {"reward": (DIMS, rng.normal(size=shape)), "cost": (DIMS, rng.gamma(2.0, 5.0, shape))}, coords=coords
    )
    ds.to_zarr(tmp_path / "foreign.zarr", zarr_format=3, consolidated=False)
    ds.to_netcdf(tmp_path / "foreign.nc")
    for path in (tmp_path / "foreign.zarr", tmp_path / "foreign.nc"):
        assert validate(path) == []
        opened = open_cube(path)
        assert opened.bound.dtype == np.float64 and opened.cost.dims == DIMS


# ---------------------------------------------------------------------------------------- refusals


@pytest.mark.parametrize(
    ("grid_change", "message"),
    [
        ({"bounds": [0.0]}, "bound d must be a finite number > 0"),
        ({"bounds": [-5.0]}, "bound d must be a finite number > 0"),
        ({"seeds": [1, 1]}, "given twice"),
        ({"algos": []}, "no algo given"),
    ],
)
def test_create_refuses_bad_grids(tmp_path: Path, grid_change: dict, message: str) -> None:
    with pytest.raises(CubeError, match=message):
        create_store(tmp_path / "x.zarr", **{**TINY_GRID, **grid_change})
    assert not (tmp_path / "x.zarr").exists()


def test_create_exist_ok_accepts_same_grid_refuses_other(tiny_store: Path) -> None:
    create_store(tiny_store, **TINY_GRID, exist_ok=True)
    with pytest.raises(CubeError, match="different grid"):
        create_store(tiny_store, **{**TINY_GRID, "seeds": [0, 1]}, exist_ok=True)
    with pytest.raises(CubeError, match="already exists"):
        create_store(tiny_store, **TINY_GRID)


def test_bounds_are_the_same_grid_to_the_one_bound_tolerance(tiny_store: Path) -> None:
    """The grid check compares bounds through `same_bound` (BOUND_RTOL), as every reader does: float noise
    of a bound read back from text is the same grid; 25.0001 (np.allclose's default would accept it) is not."""
    from cube.schema import BOUND_RTOL, same_bound

    noisy = [b * (1 + BOUND_RTOL / 10) for b in TINY_GRID["bounds"]]
    create_store(tiny_store, **{**TINY_GRID, "bounds": noisy}, exist_ok=True)
    with pytest.raises(CubeError, match="different grid"):
        create_store(tiny_store, **{**TINY_GRID, "bounds": [15.0, 25.0001]}, exist_ok=True)
    assert same_bound([15.0, 25.0], noisy).tolist() == [True, True]
    assert same_bound([15.0, 25.0], [15.0, 25.0001]).tolist() == [True, False]


def _snapshot(path: Path) -> dict[str, bytes]:
    return {str(p.relative_to(path)): p.read_bytes() for p in sorted(path.rglob("*")) if p.is_file()}


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"key": RunKey("sac", "goal", 15.0, 0)}, "algo 'sac' is not in the cube's grid"),
        ({"key": RunKey("ppo", "goal", 33.0, 0)}, "bound 33.0 is not in the cube's grid"),
        ({"mode": "eval"}, "unknown mode 'eval'"),
        ({"iterate": 4}, "outside the grid"),
        ({"cost": np.ones(7), "reward": np.ones(7)}, "do not fit"),
        ({"cost": np.array([1.0, -1.0]), "reward": np.ones(2)}, "negative cost"),
        ({"cost": np.array([1.0, np.nan]), "reward": np.ones(2)}, "NaN cost"),
        ({"cost": np.array([1.0, np.inf]), "reward": np.ones(2)}, "infinite"),
        ({"cost": np.ones(3), "reward": np.ones(2)}, "shape"),
    ],
)
def test_bad_writes_are_refused_and_leave_store_unchanged(tiny_store: Path, kwargs: dict, message: str) -> None:
    args = {"key": RunKey("ppo", "goal", 15.0, 0), "mode": "train", "iterate": 0,
            "reward": np.ones(2), "cost": np.ones(2)}
    args.update(kwargs)
    before = _snapshot(tiny_store)
    with pytest.raises(CubeError, match=message):
        write_episodes(tiny_store, args["key"], args["mode"], args["iterate"], args["reward"], args["cost"])
    assert _snapshot(tiny_store) == before


def test_unknown_iterate_variable_is_refused(tiny_store: Path, tiny_key: RunKey) -> None:
    with pytest.raises(CubeError, match="'entropy' is not in the store"):
        write_iterate_vars(tiny_store, tiny_key, 0, {"entropy": 1.0})


RUN_ARRAYS = ("reward", "cost", "env_steps", "multiplier", "run_status", "run_manifest")


def _run_index(path: Path, key: RunKey) -> tuple[int, ...]:
    ds = open_cube(path)
    return tuple(int(np.flatnonzero(ds[d].values == v)[0]) for d, v in key.as_dict().items())


def test_every_array_holds_one_run_per_chunk(tiny_store: Path) -> None:
    """The layout that makes writers of different runs safe: chunk length 1 on every run dim; reward and cost
    hold one mode per chunk (absent evaluation episodes then cost nothing), the others the whole run; kept
    when the grid grows."""
    import zarr

    for when in ("created", "extended"):
        group = zarr.open_group(tiny_store, mode="r")
        for name in RUN_ARRAYS:
            arr = group[name]
            assert arr.chunks[:4] == (1, 1, 1, 1), (when, name, arr.chunks)
            whole = (*arr.shape[4:6], 1) if name in ("reward", "cost") else arr.shape[4:]
            assert arr.chunks[4:] == whole, (when, name, arr.chunks, arr.shape)
        extend_store(tiny_store, algos=["p3o"], seeds=[7])


def test_writing_one_run_touches_only_its_own_chunks(tiny_store: Path, tiny_key: RunKey) -> None:
    writer = CubeWriter(tiny_store)
    for it in range(TINY_GRID["n_iterates"]):
        writer.write_episodes(tiny_key, "train", it, np.ones(6), np.ones(6))
        writer.write_iterate_vars(tiny_key, it, {"env_steps": 10.0 * it, "multiplier": 0.5})
    writer.write_episodes(tiny_key, "greedy", 3, np.ones(4), np.ones(4))
    writer.set_run_manifest(tiny_key, status="complete", manifest={"x": 1})
    index = _run_index(tiny_store, tiny_key)
    for name in RUN_ARRAYS:
        files = sorted(p.relative_to(tiny_store / name / "c") for p in (tiny_store / name / "c").rglob("*")
                       if p.is_file())
        # one chunk for the whole run; reward and cost: one per mode written (train, greedy), none for expl
        assert len(files) == (2 if name in ("reward", "cost") else 1), (name, files)
        assert all(tuple(int(x) for x in f.parts[:4]) == index for f in files), (name, files)


def _write_neighbours_in_process(path: str, seeds: list[int], start: object, rounds: int) -> None:
    writer = CubeWriter(path)
    start.wait()  # type: ignore[attr-defined]  # both processes write at the same moments
    for r in range(rounds):
        for it in range(TINY_GRID["n_iterates"]):
            for seed in seeds:
                key = RunKey("ppo", "goal", 15.0, seed)
                value = seed * 1000 + it * 10 + r
                writer.write_episodes(key, "train", it, np.full(6, value), np.full(6, value))
                writer.write_iterate_vars(key, it, {"env_steps": float(value)})


def test_processes_writing_neighbouring_runs_lose_nothing(tiny_store: Path) -> None:
    """Two processes write runs that sit next to each other in the grid (even and odd seeds), iterate
    by iterate and at the same moments: if neighbouring runs shared a chunk, read-modify-write races
    would lose values here."""
    ctx = mp.get_context("spawn")
    start = ctx.Barrier(2)
    rounds = 12
    procs = [ctx.Process(target=_write_neighbours_in_process, args=(str(tiny_store), seeds, start, rounds))
             for seeds in ([0, 2], [1])]
    for p in procs:
        p.start()
    for p in procs:
        p.join(timeout=120)
        assert p.exitcode == 0
    ds = open_cube(tiny_store).sel(algo="ppo", task="goal", bound=15.0, mode="train").compute()
    expected = ds.seed * 1000 + ds.iterate * 10 + rounds - 1
    np.testing.assert_array_equal(ds.cost.isel(episode=0).values, expected.transpose("seed", "iterate").values)
    np.testing.assert_array_equal(ds.env_steps.values, expected.transpose("seed", "iterate").values)


def test_write_sequences_read_from_files_equal_zarr(tiny_store: Path, tiny_key: RunKey) -> None:
    """The fast reader of the writers' seqlock agrees with zarr, and a damaged sequence chunk is an error
    naming it. The flipped bit sits in the payload (the int64 itself), not in the zstd frame header: zstd
    alone decodes that chunk to another number, so only the CRC check catches it."""
    import zarr
    from numcodecs import Zstd

    from cube.store.locks import read_write_seqs

    writer = CubeWriter(tiny_store)
    for it in range(3):
        writer.write_episodes(tiny_key, "train", it, np.ones(2), np.ones(2))
    fast = read_write_seqs(tiny_store)
    slow = np.asarray(zarr.open_array(tiny_store / "write_seq", mode="r")[...])
    np.testing.assert_array_equal(fast, slow)
    assert fast.sum() == 6 and int(fast[1, 1, 1, 1]) == 6
    chunk = tiny_store / "write_seq" / "c" / "1" / "1" / "1" / "1"
    data = bytearray(chunk.read_bytes())
    data[len(data) - 4 - 8] ^= 0x10  # the first byte of the 8-byte payload (before the 4-byte CRC)
    chunk.write_bytes(bytes(data))
    body = bytes(data[:-4])
    assert int(np.frombuffer(Zstd().decode(body), dtype="<i8")[0]) == 6 ^ 0x10  # zstd is fooled ...
    with pytest.raises(CubeError, match=r"chunk write_seq/c/1/1/1/1 is damaged \(checksum mismatch\)"):
        read_write_seqs(tiny_store)  # ... the checksum is not
