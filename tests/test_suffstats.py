"""Sufficient statistics from stores: cache hit, invalidation on new data, netCDF input, selection."""

from __future__ import annotations

import shutil
import threading
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from cube import CubeError, RunKey, export_netcdf, extend_store, open_cube, stats, write_episodes
from cube.selection import Selection, parse_selection
from cube.stats import cache, kernel, suffvars
from cube.stats import suffstats as sfs


@pytest.fixture
def demo_copy(small_demo_cube: Path, tmp_path: Path) -> Path:
    path = tmp_path / "demo.zarr"
    shutil.copytree(small_demo_cube, path)
    shutil.rmtree(path / "_derived", ignore_errors=True)
    return path


def _small_copy(tmp_path: Path) -> Path:
    from cube.io.demo import make_demo_cube

    return make_demo_cube(tmp_path / "src.zarr", algos=("ppo", "p3o"), tasks=("goal",), bounds=(15.0,),
                          n_seeds=2, n_iterates=2, n_train_episodes=4, n_eval_episodes=3)


def _same(a, b) -> None:
    for v in suffvars.STATS_VARS:
        np.testing.assert_array_equal(a[v].values, b[v].values, err_msg=v)
    assert a[suffvars.ALPHA_DIM].values.tolist() == b[suffvars.ALPHA_DIM].values.tolist()
    for d in ("algo", "task", "bound", "seed", "iterate", "mode"):
        assert a[d].values.tolist() == b[d].values.tolist()


def test_cache_hit_then_only_changed_runs_recomputed(demo_copy: Path, monkeypatch: pytest.MonkeyPatch):
    full, patched = [], []
    real_full, real_update = sfs._full_pass, sfs._update_runs
    monkeypatch.setattr(sfs, "_full_pass", lambda *a, **k: full.append(1) or real_full(*a, **k))
    monkeypatch.setattr(sfs, "_update_runs",
                        lambda ss, ds, runs, p, *w: patched.append(runs) or real_update(ss, ds, runs, p, *w))
    first = sfs.load_suffstats(demo_copy)
    assert (demo_copy / cache.CACHE_GROUP / "zarr.json").exists()
    _same(first, sfs.load_suffstats(demo_copy))
    assert len(full) == 1 and not patched

    key = RunKey("ppo_lag", "goal", 15.0, 0)
    write_episodes(demo_copy, key, "greedy", 4, [1.0, 2.0], [0.0, 100.0])
    third = sfs.load_suffstats(demo_copy)
    assert len(full) == 1 and [r.tolist() for r in patched] == [[[1, 0, 0, 0]]]
    cell = third.sel(algo="ppo_lag", task="goal", bound=15.0, seed=0, iterate=4, mode="greedy")
    assert int(cell["n"]) == 2 and float(cell["sum_c"]) == 100.0 and int(cell["n_viol"]) == 1
    _same(third, sfs.load_suffstats(demo_copy, cache=False))  # a full pass (the 2nd)
    # the changed run was patched into the cache on disk: the next load is a plain hit
    _same(third, sfs.load_suffstats(demo_copy))
    assert len(patched) == 1 and len(full) == 2


def test_cache_holds_the_default_cvar_alphas_and_another_when_asked(demo_copy: Path, monkeypatch: pytest.MonkeyPatch):
    """The cache holds CVaR at 0.1 and 0.05; another alpha recomputes once and the cache then holds it too
    (a default read still hits); a patched run gets every alpha the cache holds."""
    from cube.stats.suffvars import ALPHA_DIM, CVAR_VAR

    full = []
    real_full = sfs._full_pass
    monkeypatch.setattr(sfs, "_full_pass", lambda *a, **k: full.append(1) or real_full(*a, **k))
    first = sfs.load_suffstats(demo_copy)
    assert first[ALPHA_DIM].values.tolist() == [0.1, 0.05] and len(full) == 1
    assert sfs.load_suffstats(demo_copy, cvar_alphas=(0.05,))[ALPHA_DIM].values.tolist() == [0.1, 0.05]
    more = sfs.load_suffstats(demo_copy, cvar_alphas=(0.2,))
    assert more[ALPHA_DIM].values.tolist() == [0.1, 0.05, 0.2] and len(full) == 2
    np.testing.assert_array_equal(more[CVAR_VAR].sel({ALPHA_DIM: [0.1, 0.05]}).values, first[CVAR_VAR].values)
    again = sfs.load_suffstats(demo_copy)
    assert again[ALPHA_DIM].values.tolist() == [0.1, 0.05, 0.2] and len(full) == 2
    write_episodes(demo_copy, RunKey("ppo_lag", "goal", 15.0, 0), "greedy", 4, [1.0, 2.0], [0.0, 100.0])
    patched = sfs.load_suffstats(demo_copy)
    assert len(full) == 2
    _same(patched, sfs.load_suffstats(demo_copy, cache=False, cvar_alphas=(0.2,)))


def test_a_cache_of_the_previous_version_is_recomputed_not_misread(demo_copy: Path, monkeypatch: pytest.MonkeyPatch):
    """Statistics cached before CVaR (version 2, no `cvar_c`) are another grid: computed again, with CVaR."""
    from cube.stats.suffvars import CVAR_VAR

    monkeypatch.setattr(cache, "SUFFSTATS_VERSION", 2)
    old = sfs.load_suffstats(demo_copy).drop_vars(CVAR_VAR)
    cube = open_cube(demo_copy)
    cache.write_cache(demo_copy, old, {"grid": cache.grid_fingerprint(cube, old["kappa"].values), "store": ""},
                      cache.run_fingerprints(demo_copy, cube))
    assert CVAR_VAR not in cache.read_cache(demo_copy)
    monkeypatch.undo()
    full = []
    real_full = sfs._full_pass
    monkeypatch.setattr(sfs, "_full_pass", lambda *a, **k: full.append(1) or real_full(*a, **k))
    got = sfs.load_suffstats(demo_copy)
    assert len(full) == 1 and CVAR_VAR in got


def test_writing_the_cache_leaves_readers_listing_the_cube_silent(demo_copy: Path):
    """Readers open the cube (listing its root) while a report writes the cache: written as a group of the
    cube, zarr put a transient file in the cube's root each time (about one warning per write here, on
    stderr, where the TUI draws), and `_derived` was listed before its group marker was written; the cache
    is written as a store of its own and moved in, and side folders appear with their marker in one rename."""
    import warnings

    import zarr

    stop, listing = threading.Event(), threading.Lock()

    def list_the_root() -> None:
        while not stop.is_set():
            with listing:
                list(zarr.open_group(str(demo_copy), mode="r").members())

    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        lister = threading.Thread(target=list_the_root)
        lister.start()
        try:
            for _ in range(20):
                with listing:  # the test's own removal is not what is tested: no listing meanwhile
                    shutil.rmtree(demo_copy / "_derived", ignore_errors=True)
                sfs.load_suffstats(demo_copy)  # makes `_derived` again and writes the cache
        finally:
            stop.set()
            lister.join()
    assert [str(w.message) for w in seen] == []
    _same(sfs.load_suffstats(demo_copy), sfs.load_suffstats(demo_copy, cache=False))


def test_many_changed_runs_fall_back_to_a_full_pass(demo_copy: Path, monkeypatch: pytest.MonkeyPatch):
    sfs.load_suffstats(demo_copy)
    rng = np.random.default_rng(0)
    for algo in ("ppo", "ppo_lag", "p3o"):  # 36 of the 48 runs change: more than half
        for task in ("goal", "circle"):
            for bound in (15.0, 25.0):
                for seed in range(3):
                    r, c = rng.normal(size=3), rng.gamma(2.0, 10.0, 3)
                    write_episodes(demo_copy, RunKey(algo, task, bound, seed), "train", 1, r, c)
    full, patched = [], []
    real_full, real_update = sfs._full_pass, sfs._update_runs
    monkeypatch.setattr(sfs, "_full_pass", lambda *a, **k: full.append(1) or real_full(*a, **k))
    monkeypatch.setattr(sfs, "_update_runs", lambda *a, **k: patched.append(1) or real_update(*a, **k))
    cached = sfs.load_suffstats(demo_copy)
    assert full == [1] and patched == []  # a full pass, not 36 patched runs
    assert (demo_copy / cache.CACHE_GROUP / "zarr.json").exists()
    _same(cached, sfs.load_suffstats(demo_copy, cache=False))
    assert full == [1, 1] and patched == []
    _same(cached, sfs.load_suffstats(demo_copy))  # the full pass was written back: a plain hit now
    assert full == [1, 1] and patched == []


@pytest.mark.parametrize("bad", [0.0, -5.0, np.nan])
def test_a_bound_that_is_not_positive_is_a_one_line_error(bad: float):
    """d = 0 would give Dnorm = inf and tier 0 without a word: the pass refuses it, for Datasets too."""
    from statsdata import random_cube

    ds = random_cube(np.random.default_rng(0), shape=(1, 1, 2, 2, 2, 4), bounds=(bad, 25.0))
    with pytest.raises(CubeError, match=r"safety bounds must be > 0 \(found \[(0.0|-5.0|nan)\]\)") as err:
        sfs.load_suffstats(ds)
    assert "\n" not in str(err.value)


def test_run_chunk_files_come_from_zarrs_metadata(tmp_path: Path):
    """`cache.run_chunks` locates each run's chunk files through zarr's chunk-key encoding: the files zarr
    wrote for that run, and a rewrite of one run's chunk changes that run's fingerprint only."""
    import zarr

    path = _small_copy(tmp_path)
    ds = open_cube(path)
    chunks = cache.run_chunks(path, dict(ds.sizes))
    assert chunks is not None
    arr = zarr.open_group(str(path), mode="r")["cost"]
    files = chunks.files((1, 0, 0, 1))  # a chunk per mode (issue 37's layout): 3 of reward, 3 of cost
    assert len(files) == 6 and files[3] == path / "cost" / arr.metadata.encode_chunk_key((1, 0, 0, 1, 0, 0, 0))
    assert all(f.is_file() for f in files)
    before = cache.run_fingerprints(path, ds)
    group = zarr.open_group(str(path), mode="r+")
    group["cost"][1, 0, 0, 1] = group["cost"][1, 0, 0, 1] + 1
    after = cache.run_fingerprints(path, ds)
    assert np.argwhere(before != after).tolist() == [[1, 0, 0, 1]]
    assert cache.run_chunks(path, {**ds.sizes, "episode": ds.sizes["episode"] + 1}) is None  # not the whole grid


def test_store_not_chunked_per_run_uses_a_whole_store_fingerprint(tmp_path: Path):
    import xarray as xr

    ds = xr.open_zarr(str(_small_copy(tmp_path)), consolidated=False).load()
    path = tmp_path / "rechunked.zarr"
    for v in ds.variables.values():
        v.encoding = {}
    ds.chunk({"seed": -1}).to_zarr(path, consolidated=False)
    assert cache.run_fingerprints(path, open_cube(path)) is None
    first = sfs.load_suffstats(path)
    _same(first, sfs.load_suffstats(path))
    cost = ds["cost"].values.copy()
    cost[0, 0, 0, 0, 0, 0, 0] = 1234.0
    ds["cost"].values[:] = cost
    ds.chunk({"seed": -1}).to_zarr(path, mode="a", consolidated=False)
    again = sfs.load_suffstats(path)
    assert float(again["sum_c"][0, 0, 0, 0, 0, 0]) != float(first["sum_c"][0, 0, 0, 0, 0, 0])
    _same(again, sfs.load_suffstats(path, cache=False))


def test_extending_the_grid_invalidates_the_cache(demo_copy: Path):
    assert sfs.load_suffstats(demo_copy).sizes["seed"] == 3
    extend_store(demo_copy, seeds=[3])
    ss = sfs.load_suffstats(demo_copy)
    assert ss.sizes["seed"] == 4 and int(ss["n"].sel(seed=3).sum()) == 0
    rm = stats.run_metrics(ss, "train")
    assert rm["C"].sel(seed=3).isnull().all()  # a pending run is left out, not counted as zero cost


def test_progress_is_reported_and_no_cache_leaves_store_untouched(demo_copy: Path):
    seen = []
    sfs.load_suffstats(demo_copy, progress=lambda d, t: seen.append((d, t)), cache=False)
    assert seen and seen[-1][0] == seen[-1][1] > 0
    assert not (demo_copy / "_derived").exists()


def test_netcdf_source_gives_the_same_statistics(demo_copy: Path, tmp_path: Path):
    nc = export_netcdf(demo_copy, tmp_path / "demo.nc")
    a, b = sfs.load_suffstats(demo_copy, cache=False), sfs.load_suffstats(nc)
    for v in suffvars.STATS_VARS:
        np.testing.assert_array_equal(a[v].values, b[v].values)
    assert a.attrs["synthetic"] and b.attrs["synthetic"]
    assert a["run_status"].dims == b["run_status"].dims == ("algo", "task", "bound", "seed")
    np.testing.assert_array_equal(a["run_status"].values, b["run_status"].values)  # zarr fast path = xarray
    assert (a["run_status"] == 2).all()


def test_bad_sources_are_one_line_cube_errors(tmp_path: Path):
    with pytest.raises(CubeError, match="does not exist"):
        stats.load_suffstats(tmp_path / "missing.zarr")
    with pytest.raises(CubeError, match="strictly increasing"):
        stats.load_suffstats(tmp_path, kappa=np.array([1.0, 0.0]))


def test_selection_subsets_runs_and_rejects_unknown_labels(small_demo_cube: Path):
    ss = stats.load_suffstats(small_demo_cube, cache=False)
    sel = stats.select(ss, parse_selection(algos="p3o,ppo", bounds="25", seeds="0-1"))
    assert list(sel["algo"].values) == ["p3o", "ppo"]
    assert sel["bound"].values.tolist() == [25.0] and sel["seed"].values.tolist() == [0, 1]
    assert stats.select(ss, Selection(seeds=(1, 1, 0))).seed.values.tolist() == [1, 0]
    with pytest.raises(CubeError, match="seed 1 given twice"):  # one policy for every CLI: no duplicates
        parse_selection(seeds="1,1,0")
    with pytest.raises(CubeError, match="unknown task nope: the cube has goal, circle"):
        stats.select(ss, Selection(tasks=("nope",)))
    with pytest.raises(CubeError, match="no iterates in 50..60"):
        stats.select(ss, Selection(iterates=(50, 60)))


def test_iterate_selection_masks_training_only(small_demo_cube: Path):
    ss = stats.load_suffstats(small_demo_cube, cache=False)
    sel = stats.select(ss, Selection(iterates=(1, 2)))
    n = sel["n"].sel(mode="train").sum(["algo", "task", "bound", "seed"]).values
    assert n[0] == 0 and n[3] == 0 and n[1] > 0 and n[2] > 0
    xr_eq = sel["n"].sel(mode="greedy").values == ss["n"].sel(mode="greedy").values
    assert xr_eq.all()


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"seeds": "a-b"}, "cannot read seeds"),
        ({"bounds": "x"}, "cannot read bounds"),
        ({"iterates": "3:x"}, "cannot read iterates"),
        ({"iterates": "5:2"}, "invalid"),
        ({"seeds": ","}, "empty seeds"),
    ],
)
def test_parse_selection_errors(kwargs, message):
    with pytest.raises(CubeError, match=message):
        parse_selection(**kwargs)


def test_parse_selection_values():
    s = parse_selection(algos="a, b", tasks="goal", bounds="15,25.5", seeds="0,3,5-7", iterates="10:20")
    assert s == Selection(("a", "b"), ("goal",), (15.0, 25.5), (0, 3, 5, 6, 7), (10, 20))
    assert parse_selection(iterates="4").iterates == 4


def test_run_status_is_cached_and_follows_changes(demo_copy: Path):
    from cube import set_run_manifest

    assert (sfs.load_suffstats(demo_copy)["run_status"] == 2).all()
    assert (demo_copy / cache.STATUS_CACHE).exists()
    set_run_manifest(demo_copy, RunKey("ppo", "goal", 15.0, 1), status="partial")
    again = sfs.load_suffstats(demo_copy)
    assert int(again["run_status"].sel(algo="ppo", task="goal", bound=15.0, seed=1)) == 1
    assert int((again["run_status"] == 2).sum()) == again["run_status"].size - 1


def test_run_status_read_straight_from_its_files_is_zarrs(demo_copy: Path, monkeypatch: pytest.MonkeyPatch):
    """The status read beside the pass comes straight from its chunk files (no zarr event loop as a third
    thread of Python); where a chunk does not verify, zarr reads it and names the damage."""
    from cube import set_run_manifest
    from cube.stats import runinfo
    from cube.store.grid import open_view
    from cube.store.read import open_cube

    set_run_manifest(demo_copy, RunKey("ppo", "goal", 15.0, 1), status="partial")
    ds = open_cube(demo_copy, lazy=False)
    zarrs = np.asarray(open_view(demo_copy, ds.encoding.get("saferl_grid"))["run_status"][:])
    read = runinfo.zarr_run_status(demo_copy, ds, cache=False)
    assert read.values.dtype == zarrs.dtype and np.array_equal(read.values, zarrs) and (zarrs == 1).sum() == 1
    through_zarr = []
    monkeypatch.setattr(runinfo, "read_run_array", lambda *a: through_zarr.append(a) or None)
    assert np.array_equal(runinfo.zarr_run_status(demo_copy, ds, cache=False).values, zarrs) and through_zarr
    monkeypatch.undo()
    chunk = sorted(p for p in (demo_copy / "run_status" / "c").rglob("*") if p.is_file())[0]
    chunk.write_bytes(chunk.read_bytes()[:-1] + bytes([chunk.read_bytes()[-1] ^ 1]))
    assert runinfo.zarr_run_status(demo_copy, ds, cache=False) is None  # zarr refused it: xarray's read names it


def test_invalid_costs_in_a_dataset_are_one_line_cube_errors():
    from statsdata import random_cube

    ds = random_cube(np.random.default_rng(0), shape=(1, 1, 2, 2, 2, 4), ragged=False)
    ds["cost"].values[0, 0, 1, 1, 0, 2, 0] = np.inf
    with pytest.raises(CubeError, match=r"1 infinite cost\(s\) \(first at algo=alg0 task=task0 bound=25.0 seed=1 "
                                        r"iterate=0 mode=train\)"):
        sfs.load_suffstats(ds)
    ds["cost"].values[0, 0, 1, 1, 0, 2, 0] = np.nan  # the reward of that episode is still there
    with pytest.raises(CubeError, match=r"NaN cost\(s\) of episodes with a reward"):
        sfs.load_suffstats(ds)


@settings(max_examples=60, deadline=None)
@given(grid=hnp.arrays(np.float64, st.integers(1, 40), elements=st.floats(-50, 50, allow_nan=False), unique=True),
       seed=st.integers(0, 2**32 - 1))
def test_grid_locate_equals_searchsorted(grid, seed):
    kappa = np.sort(grid)
    rng = np.random.default_rng(seed)
    x = np.concatenate([kappa, np.nextafter(kappa, np.inf), np.nextafter(kappa, -np.inf),
                        rng.uniform(-60, 60, 200), [np.nan, np.inf, -np.inf, 1e300, -1e300]])
    np.testing.assert_array_equal(kernel.grid_locate(kappa, x), np.searchsorted(kappa, x, side="left"))
    kappa = kernel.default_kappa()
    x = np.concatenate([kappa, np.nextafter(kappa, np.inf), np.nextafter(kappa, -np.inf), rng.gamma(2, 1, 500) - 1])
    np.testing.assert_array_equal(kernel.grid_locate(kappa, x), np.searchsorted(kappa, x, side="left"))


def _around(values: np.ndarray, dtype: type) -> np.ndarray:
    """values in dtype and their neighbours one and two units in the last place away."""
    v = values.astype(dtype)
    out = [v]
    for direction in (np.inf, -np.inf):
        step = np.nextafter(v, dtype(direction))
        out += [step, np.nextafter(step, dtype(direction))]
    return np.concatenate(out)


@settings(max_examples=60, deadline=None)
@given(grid=hnp.arrays(np.float32, st.integers(1, 40), elements=st.floats(-50, 50, width=32, allow_nan=False),
                       unique=True),
       seed=st.integers(0, 2**32 - 1))
def test_grid_locate_in_float32_equals_searchsorted(grid, seed):
    kappa = np.sort(grid)
    rng = np.random.default_rng(seed)
    x = np.concatenate([_around(kappa, np.float32), rng.uniform(-60, 60, 300).astype(np.float32),
                        np.array([np.nan, np.inf, -np.inf, 3e38, -3e38], dtype=np.float32)])
    np.testing.assert_array_equal(kernel.grid_locate(kappa, x), np.searchsorted(kappa, x, side="left"))


@settings(max_examples=80, deadline=None)
@given(d=st.one_of(st.sampled_from([0.1, 1 / 3, 1.0, 15.0, 25.0, 40.0, 1e-3, 7e5]),
                   st.floats(1e-4, 1e6, allow_nan=False)),
       dtype=st.sampled_from([np.float32, np.float64, np.float16]), seed=st.integers(0, 2**32 - 1))
def test_cost_thresholds_decide_the_float64_tests_exactly(d, dtype, seed):
    """c > t_d and c <= t[g], compared in the stored dtype, are the float64 tests c > d and
    (c - d) / d <= kappa[g], at and around every boundary."""
    kappa = kernel.default_kappa()
    rng = np.random.default_rng(seed)
    with np.errstate(over="ignore"):
        tiny = np.array([1e-45, 1e-38, 1e-30, 1e-20, 1e-10, d * 2.0**-54, d * 2.0**-53, d * 2.0**-52])
        c = np.concatenate([_around(np.array([d]), dtype), _around(d * (1 + kappa), dtype),
                            (rng.gamma(2.0, d / 2, 400)).astype(dtype), np.array([0.0], dtype=dtype),
                            _around(tiny, dtype)])  # tiny costs all give (c - d) / d = -1 exactly
    c = c[np.isfinite(c) & (c >= 0)]
    t_d, t = kernel.cost_thresholds(d, kappa, np.dtype(dtype))
    c64 = c.astype(np.float64)
    np.testing.assert_array_equal(c > t_d, c64 > d)
    np.testing.assert_array_equal(c[:, None] <= t[None, :], (c64[:, None] - d) / d <= kappa[None, :])
    np.testing.assert_array_equal(kernel.grid_locate(t, c), kernel.grid_locate(kappa, (c64 - d) / d))
    np.testing.assert_array_equal(kernel.grid_locate(t, c), np.searchsorted(t, c, side="left"))


def test_grid_locate_takes_the_bucket_path_for_float32_cost_thresholds(monkeypatch: pytest.MonkeyPatch):
    _, t = kernel.cost_thresholds(25.0, kernel.default_kappa(), np.dtype(np.float32))
    c = _around(t, np.float32)
    want = np.searchsorted(t, c, side="left")
    kernel._LOCATE_TABLES.clear()
    kernel.grid_locate(t, c[:1])  # builds the bucket table (with searchsorted)
    monkeypatch.setattr(np, "searchsorted", None)  # so a fallback would fail
    np.testing.assert_array_equal(kernel.grid_locate(t, c), want)


def test_float32_block_equals_its_float64_copy():
    """The float32 kernel (thresholds, no float64 copy) gives what the same episodes as float64 give."""
    rng = np.random.default_rng(3)
    c = rng.gamma(2.0, 10.0, (2, 4, 9, 3)).astype(np.float32)
    d = np.array([0.1, 25.0]).reshape(2, 1, 1, 1)
    c[0] = (0.1 * (1 + rng.choice(kernel.default_kappa(), c[0].shape))).astype(np.float32)  # on the grid
    c[1, 0, :5, 0] = 25.0
    c[1, 1, 2:] = np.nan
    r = rng.normal(size=c.shape).astype(np.float32)
    r[np.isnan(c)] = np.nan
    kappa = kernel.default_kappa()
    narrow = kernel.block_stats(r, c, d, kappa)
    wide = kernel.block_stats(r.astype(np.float64), c.astype(np.float64), d, kappa)
    np.testing.assert_array_equal(narrow[..., [0, 2, 4]], wide[..., [0, 2, 4]])
    np.testing.assert_allclose(narrow[..., [1, 3, 5]], wide[..., [1, 3, 5]], rtol=1e-12)
    np.testing.assert_array_equal(narrow[..., 6:], wide[..., 6:])


def test_background_cache_write_is_waited_for_and_reused(demo_copy: Path, monkeypatch: pytest.MonkeyPatch):
    first = sfs.load_suffstats(demo_copy, background_write=True)
    cache.wait_for_cache_writes(demo_copy)
    assert (demo_copy / cache.CACHE_GROUP / "zarr.json").exists() and not cache._PENDING_WRITES
    monkeypatch.setattr(sfs, "_full_pass", None)  # a second full pass would fail
    _same(first, sfs.load_suffstats(demo_copy))


def test_a_cache_read_waits_for_a_pending_background_write(demo_copy: Path, monkeypatch: pytest.MonkeyPatch):
    started, release = threading.Event(), threading.Event()
    real_write = cache.write_cache

    def slow_write(*args):
        started.set()
        release.wait(timeout=30)
        real_write(*args)

    monkeypatch.setattr(cache, "write_cache", slow_write)
    first = sfs.load_suffstats(demo_copy, background_write=True)
    assert started.wait(timeout=30) and not (demo_copy / cache.CACHE_GROUP).exists()
    threading.Timer(0.2, release.set).start()  # the read below must block until the write is done
    monkeypatch.setattr(sfs, "_full_pass", None)
    _same(first, sfs.load_suffstats(demo_copy))


@pytest.mark.parametrize(
    ("text", "message"),
    [("0-2,2", "seed 2 given twice"), ("0-1000000000", "at most 100,000"), ("-1", "cannot read seeds"),
     ("3:1", "range is empty")],
)
def test_one_list_policy(text, message):
    """The one parser refuses duplicates and huge ranges before expanding them, for report, train and TUI."""
    with pytest.raises(CubeError, match=message):
        parse_selection(seeds=text)


def test_one_range_syntax_everywhere():
    from cube.selection import parse_ints, parse_iterates

    assert parse_ints("0-2,5:6") == (0, 1, 2, 5, 6)
    assert parse_iterates("10-20") == parse_iterates("10:20") == (10, 20)
    assert parse_selection(iterates="3-5").iterates == (3, 5)
