"""Incremental statistics (issue 25): after any sequence of writes (new iterates, new episodes, evaluations,
new runs, a grown grid, statuses), the statistics kept current by `update_suffstats` and those of an
incremental `saferl report` (the cache patched run by run) equal a full cold pass, for every sufficient
statistic and every table the report shows (aggregate with CIs, per condition, CDF)."""

from __future__ import annotations

import shutil
import tempfile
import warnings
from pathlib import Path

import numpy as np
import pytest
import xarray as xr
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cube import CubeWriter, RunKey, create_store, set_run_manifest, stats
from cube.errors import CubeError
from cube.stats.cache import wait_for_cache_writes
from cube.stats.suffstats import load_suffstats_at, update_suffstats
from cube.store.layout import extend_store, grow_store

ALGOS, TASKS, BOUNDS = ["ppo", "ppo_lag"], ["goal"], [10.0]

write_op = st.tuples(st.just("episodes"), st.integers(0, 7), st.sampled_from(["train", "final_expl", "final_greedy"]),
                     st.integers(0, 5), st.integers(1, 6), st.integers(0, 2**31 - 1))
status_op = st.tuples(st.just("status"), st.integers(0, 7), st.sampled_from(["partial", "complete"]))
run_op = st.tuples(st.just("run"), st.integers(0, 1))  # 0: a new seed, 1: a new bound
grow_op = st.tuples(st.just("grow"), st.integers(0, 2), st.integers(0, 3))  # more iterates, more episode slots
ops = st.lists(st.one_of(write_op, write_op, write_op, status_op, run_op, grow_op), min_size=1, max_size=8)


def _keys(path: Path) -> list[RunKey]:
    from cube import open_cube

    ds = open_cube(path)
    return [RunKey(str(a), str(t), float(b), int(s)) for a in ds.algo.values for t in ds.task.values
            for b in ds.bound.values for s in ds.seed.values]


def _apply(path: Path, op: tuple) -> None:
    """One write of the sequence (positions taken modulo the current grid)."""
    from cube import open_cube

    kind = op[0]
    if kind == "episodes":
        _, run, mode, iterate, n, seed = op
        ds = open_cube(path)
        keys = _keys(path)
        key = keys[run % len(keys)]
        iterate = ds.sizes["iterate"] - 1 if mode != "train" else iterate % ds.sizes["iterate"]
        n = min(n, ds.sizes["episode"])
        rng = np.random.default_rng(seed)
        reward = rng.normal(size=n)
        cost = np.round(np.abs(rng.normal(10.0, 8.0, size=n)), 1)  # costs at and around the bound too
        CubeWriter(path).write_episodes(key, mode.removeprefix("final_"), iterate, reward, cost)
    elif kind == "status":
        keys = _keys(path)
        set_run_manifest(path, keys[op[1] % len(keys)], status=op[2])
    elif kind == "run":
        ds = open_cube(path)
        if op[1] == 0:
            extend_store(path, seeds=[int(ds.seed.values.max()) + 1])
        else:
            extend_store(path, bounds=[float(ds.bound.values.max()) * 2])
    else:
        ds = open_cube(path)
        grow_store(path, n_iterates=ds.sizes["iterate"] + op[1], n_episodes=ds.sizes["episode"] + op[2])


def _tables(ss: xr.Dataset) -> dict[str, xr.Dataset | str]:
    """Every table the report shows, or the one-line error it ends with (no data yet)."""
    out: dict[str, xr.Dataset | str] = {}
    warnings.simplefilter("ignore")  # few seeds: NaN CIs, said in warnings (the caller's catch_warnings)
    for name, make in (("aggregate", lambda: stats.aggregate_table(ss, boot=50, rng_seed=3)),
                       ("conditions", lambda: stats.condition_table(ss)),
                       ("cdf", lambda: stats.cdf_curves(ss, boot=50, rng_seed=3))):
        try:
            out[name] = make()
        except CubeError as exc:
            out[name] = str(exc)
    return out


def _assert_same(got: xr.Dataset, want: xr.Dataset) -> None:
    assert set(want.data_vars) <= set(got.data_vars)
    for v in want.data_vars:
        xr.testing.assert_identical(got[v].reset_coords(drop=True), want[v].reset_coords(drop=True))


def _assert_same_tables(got: dict, want: dict) -> None:
    assert got.keys() == want.keys()
    for name, table in want.items():
        if isinstance(table, str):
            assert got[name] == table, name
        else:
            xr.testing.assert_allclose(got[name], table, rtol=0, atol=0)


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(ops=ops, steps=st.integers(1, 3))
def test_incremental_statistics_equal_a_cold_pass(ops: list[tuple], steps: int) -> None:
    folder = Path(tempfile.mkdtemp())
    try:
        path = folder / "c.zarr"
        create_store(path, algos=ALGOS, tasks=TASKS, bounds=BOUNDS, seeds=[0, 1], n_iterates=3, n_episodes=4)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            ss, seqs = load_suffstats_at(path)  # the follower's start, and a cache for the report
            wait_for_cache_writes()
            for i, op in enumerate(ops):
                _apply(path, op)
                if (i + 1) % steps == 0 or i == len(ops) - 1:
                    ss, _, seqs = update_suffstats(ss, path, seqs)
            wait_for_cache_writes()
            cold = stats.load_suffstats(path, cache=False)
            report = stats.load_suffstats(path)  # what `saferl report` reads: the cache, patched
            _assert_same_tables(_tables(ss), _tables(cold))
        _assert_same(ss, cold)
        _assert_same(report, cold)
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def test_an_incremental_report_reads_only_the_runs_that_changed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch
                                                                 ) -> None:
    """`saferl report` on a store that grew since its last report: one run written, one run read again."""
    from cube.cli import main
    from cube.stats import suffstats

    path = tmp_path / "c.zarr"
    create_store(path, algos=ALGOS, tasks=TASKS, bounds=BOUNDS, seeds=[0, 1, 2], n_iterates=3, n_episodes=4)
    for key in _keys(path):
        CubeWriter(path).write_episodes(key, "train", 0, [1.0, 2.0], [5.0, 15.0])
    assert main(["report", str(path), "--boot", "20"]) == 0
    wait_for_cache_writes()
    CubeWriter(path).write_episodes(_keys(path)[4], "train", 1, [3.0], [30.0])
    seen: list[int] = []
    real = suffstats._update_runs

    def counting(ss, ds, runs, *args, **kwargs):
        seen.append(len(runs))
        return real(ss, ds, runs, *args, **kwargs)

    monkeypatch.setattr(suffstats, "_update_runs", counting)
    assert main(["report", str(path), "--boot", "20"]) == 0
    wait_for_cache_writes()
    assert seen == [1]
    _assert_same(stats.load_suffstats(path), stats.load_suffstats(path, cache=False))
