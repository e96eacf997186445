"""The compiled statistics loop (`cube.stats.fused`) gives the numpy kernel's numbers bit for bit, and the
numpy kernel's sums are sequential float64 sums in episode order (checked against a plain Python loop)."""

from __future__ import annotations

import hypothesis.extra.numpy as hnp
import hypothesis.strategies as st
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings

from cube.errors import CubeError
from cube.stats import fused, kernel

pytestmark = pytest.mark.skipif(not fused.available(), reason="numba is not installed")


@pytest.fixture(scope="module", autouse=True, params=["jit", "prebuilt"])
def compiled_loop(request: pytest.FixtureRequest) -> str:
    """Every test on both compiled loops: numba's JIT and the module `cube.stats.prebuilt` builds ahead of
    time from the same source."""
    with pytest.MonkeyPatch.context() as patch:
        if request.param == "prebuilt":
            patch.setenv("SAFERL_CACHE_DIR", str(request.getfixturevalue("prebuilt_cache")))
            patch.setenv("SAFERL_PREBUILT", "on")
        fused.reload()
        assert isinstance(fused.compiled(), fused.Prebuilt) == (request.param == "prebuilt")
        yield request.param
    fused.reload()


def _stats(choice: str, monkeypatch: pytest.MonkeyPatch, r, c, d, kappa, where=None, alphas=(0.1, 0.05)):
    return kernel.cell_stats(r, c, d, kappa, where, kernel=choice, alphas=alphas)


def _assert_same(a, b) -> None:
    assert a[0] == b[0]
    for x, y in zip(a[1:], b[1:], strict=True):
        assert x.dtype == y.dtype and x.shape == y.shape
        np.testing.assert_array_equal(x, y)


def _block(seed: int, shape: tuple[int, ...], dtype: type, empty: float, missing_reward: float,
           bounds: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """A (S, J, E, M) block: gamma costs around the bound (some exactly on CDF thresholds and on d), whole
    cells empty with probability `empty`, single episodes missing, rewards unknown with `missing_reward`."""
    rng = np.random.default_rng(seed)
    s_, _, e_, m_ = shape
    d = bounds[rng.integers(0, bounds.size, s_)].reshape(s_, 1, 1, 1)
    c = (rng.gamma(2.0, 1.0, shape) * d / 2).astype(dtype)
    on_grid = rng.random(shape) < 0.2
    grid_costs = (d * (1 + rng.choice(kernel.default_kappa(), shape))).astype(dtype)
    c = np.where(on_grid, grid_costs, c)
    c = np.where(rng.random(shape) < 0.05, np.broadcast_to(d, shape).astype(dtype), c)
    c[rng.random(shape) < 0.1] = 0
    c[rng.random(shape) < 0.1] = np.nan
    c[np.broadcast_to(rng.random((s_, shape[1], 1, m_)) < empty, shape)] = np.nan
    r = rng.normal(0.0, 10.0 ** rng.integers(-2, 6), shape).astype(dtype)
    r[np.isnan(c) | (rng.random(shape) < missing_reward)] = np.nan
    return r, c, d


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(seed=st.integers(0, 2**32 - 1), dtype=st.sampled_from([np.float32, np.float64]),
       shape=st.tuples(st.integers(1, 3), st.integers(1, 4), st.integers(1, 70), st.integers(1, 3)),
       empty=st.sampled_from([0.0, 0.5, 1.0]), missing_reward=st.sampled_from([0.0, 0.3]),
       bounds=st.sampled_from([np.array([25.0]), np.array([0.1, 25.0, 50.0]), np.array([1 / 3, 7e5])]),
       alphas=st.sampled_from([(0.1, 0.05), (0.3, 1.0, 0.01)]))
def test_fused_equals_numpy_bit_for_bit(monkeypatch, seed, dtype, shape, empty, missing_reward, bounds, alphas):
    """Every statistic, the CVaRs (`CellStats.cvar`) included."""
    r, c, d = _block(seed, shape, dtype, empty, missing_reward, bounds)
    kappa = kernel.default_kappa()
    _assert_same(_stats("fused", monkeypatch, r, c, d, kappa, alphas=alphas),
                 _stats("numpy", monkeypatch, r, c, d, kappa, alphas=alphas))


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(grid=hnp.arrays(np.float64, st.integers(1, 30), elements=st.floats(-1, 20, allow_nan=False), unique=True),
       seed=st.integers(0, 2**32 - 1), dtype=st.sampled_from([np.float32, np.float64]))
def test_fused_equals_numpy_on_any_grid(monkeypatch, grid, seed, dtype):
    """Coarse grids take the bucket table, grids with nearly equal points the binary search."""
    kappa = np.sort(grid)
    r, c, d = _block(seed, (2, 3, 40, 3), dtype, 0.3, 0.1, np.array([15.0, 25.0]))
    _assert_same(_stats("fused", monkeypatch, r, c, d, kappa), _stats("numpy", monkeypatch, r, c, d, kappa))


def _adversarial(seed: int, dtype: type, shape: tuple[int, ...], d: float, pool_size: int, nan_rate: float
                 ) -> tuple[np.ndarray, np.ndarray]:
    """A (S, J, E, M) block of valid episodes built to break a fast path: costs drawn from a small pool (so
    that the CVaR's k-th largest has many ties) of values the kernels decide at a boundary (0, -0.0, the
    smallest subnormal, d and its neighbours, every CDF threshold and its neighbours, huge values), NaN in
    runs at the start, the end and at random, whole cells empty, rewards NaN, -0.0 or huge at random."""
    rng = np.random.default_rng(seed)
    info = np.finfo(dtype)
    at_most_d, t = kernel.cost_thresholds(d, kernel.default_kappa(), np.dtype(dtype))
    edges = np.concatenate([t, [at_most_d, d]]).astype(dtype)
    special = np.concatenate([edges, np.nextafter(edges, dtype(np.inf)), np.nextafter(edges, dtype(0)),
                              np.array([0.0, -0.0, info.smallest_subnormal, info.tiny, 1e30 if dtype is np.float32
                                        else 1e300, info.max if dtype is np.float32 else 1e290], dtype=dtype)])
    special = special[np.isfinite(special) & ~(special < 0)]
    pool = np.concatenate([rng.choice(special, pool_size), (rng.gamma(2.0, d, pool_size)).astype(dtype)])
    c = rng.choice(pool, shape).astype(dtype)
    s_, j_, e_, m_ = shape
    c[rng.random(shape) < nan_rate] = np.nan
    c[:, :, : rng.integers(0, e_ + 1), rng.integers(0, m_)] = np.nan  # leading and trailing gaps
    c[:, :, e_ - rng.integers(0, e_ + 1):, rng.integers(0, m_)] = np.nan
    c[np.broadcast_to(rng.random((s_, j_, 1, m_)) < 0.3, shape)] = np.nan
    r = rng.choice(np.array([0.0, -0.0, 1.5, -2.5, 1e30, -1e30, np.nan], dtype=dtype), shape)
    r = np.where(rng.random(shape) < 0.5, rng.normal(0.0, 100.0, shape), r).astype(dtype)
    r[np.isnan(c)] = np.nan
    return r, c


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(seed=st.integers(0, 2**32 - 1), dtype=st.sampled_from([np.float32, np.float64]),
       shape=st.tuples(st.integers(1, 3), st.integers(1, 3), st.integers(1, 600), st.integers(1, 3)),
       d=st.sampled_from([25.0, 0.1, 1 / 3, 7e5]), pool_size=st.sampled_from([1, 2, 5, 40, 400]),
       nan_rate=st.sampled_from([0.0, 0.1, 0.9]), alphas=st.sampled_from([(0.1, 0.05), (0.05, 0.1, 1.0, 0.003)]))
def test_fused_equals_numpy_on_adversarial_blocks(monkeypatch, seed, dtype, shape, d, pool_size, nan_rate, alphas):
    """Ties at the bound and at every CDF threshold, costs at grid points, zeros (-0.0 too), subnormal and huge
    costs, heavy ties around the CVaR's k-th largest, NaN gaps: every statistic bit for bit."""
    r, c = _adversarial(seed, dtype, shape, d, pool_size, nan_rate)
    kappa = kernel.default_kappa()
    _assert_same(_stats("fused", monkeypatch, r, c, np.array(d), kappa, alphas=alphas),
                 _stats("numpy", monkeypatch, r, c, np.array(d), kappa, alphas=alphas))


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_both_kernels_add_episodes_in_order(monkeypatch, dtype):
    """sum_r, sum_c and sum_over are float64 sums in episode order, NaN adding nothing: a plain loop. float32
    episodes add exactly in float64 whatever the order; the float64 ones spread over 16 orders of magnitude,
    so that adding them in another order gives other sums (checked here too)."""
    r, c, d = _block(7, (2, 5, 300, 3), dtype, 0.2, 0.2, np.array([25.0]))
    if dtype is np.float64:
        scale = 10.0 ** np.random.default_rng(8).integers(-8, 9, r.shape)
        r, c = r * scale, c * scale
    cells, rows = kernel.cell_stats(r, c, d, kernel.default_kappa(), None)[:2]
    r3, c3 = r.reshape(-1, 300, 3), c.reshape(-1, 300, 3)
    want, backwards = np.zeros((rows.size, 3)), np.zeros((rows.size, 3))
    for k, cell in enumerate(rows):
        run, mode = divmod(int(cell), 3)
        for out, order in ((want, range(300)), (backwards, range(299, -1, -1))):
            for e in order:
                y, x = float(r3[run, e, mode]), float(c3[run, e, mode])
                out[k, 0] += 0.0 if np.isnan(y) else y
                out[k, 1] += 0.0 if np.isnan(x) else x
                out[k, 2] += 0.0 if np.isnan(x) else max(x - 25.0, 0.0)
    assert np.array_equal(want, backwards) == (dtype is np.float32)  # the order shows in float64 only
    for choice in ("numpy", "fused"):
        sums = _stats(choice, monkeypatch, r, c, d, kernel.default_kappa()).sums
        np.testing.assert_array_equal(sums[:, [1, 3, 5]], want)


@pytest.mark.parametrize(("where", "value", "message"), [
    ((1, 2, 5, 0), np.inf, "1 infinite cost(s)"), ((0, 1, 3, 1), -1.0, "1 negative cost(s)"),
    ((1, 0, 7, 2), "nan cost", "NaN cost(s) of episodes with a reward"),
    ((0, 0, 0, 0), "inf reward", "1 infinite reward(s)")])
def test_fused_path_names_the_first_bad_episode_as_numpy_does(monkeypatch, where, value, message):
    r, c, d = _block(3, (2, 3, 20, 3), np.float32, 0.0, 0.0, np.array([25.0]))
    if value == "nan cost":
        c[where] = np.nan
    elif value == "inf reward":
        r[where] = np.inf
    else:
        c[where] = value
    errors = []
    for choice in ("fused", "numpy"):
        with pytest.raises(CubeError) as got:
            _stats(choice, monkeypatch, r, c, d, kernel.default_kappa())
        errors.append(str(got.value))
    assert errors[0] == errors[1] and message in errors[0]


def test_auto_uses_the_compiled_loop_for_large_blocks_or_once_loaded(monkeypatch):
    calls = []
    real = fused.fill_cells
    monkeypatch.setattr(fused, "fill_cells", lambda *a: calls.append(a[1].size) or real(*a))
    monkeypatch.setattr(kernel, "FUSED_MIN_VALUES", 1000)
    monkeypatch.setattr(fused, "loaded", lambda: False)  # a process that has not loaded the loop yet
    kappa = kernel.default_kappa()
    small = _block(1, (1, 2, 100, 3), np.float32, 0.0, 0.0, np.array([25.0]))
    large = _block(1, (2, 2, 100, 3), np.float32, 0.0, 0.0, np.array([25.0]))
    _stats("auto", monkeypatch, *small, kappa)
    assert calls == []
    _stats("auto", monkeypatch, *large, kappa)
    assert calls == [1200]
    _stats("numpy", monkeypatch, *large, kappa)
    assert calls == [1200]
    monkeypatch.setattr(fused, "loaded", lambda: True)  # once loaded, small blocks use it too
    _stats("auto", monkeypatch, *small, kappa)
    assert calls == [1200, 600]


def test_an_unknown_kernel_is_one_line(monkeypatch):
    r, c, d = _block(1, (1, 1, 10, 3), np.float32, 0.0, 0.0, np.array([25.0]))
    with pytest.raises(CubeError, match=r"^'numbra' is not a statistics kernel: use auto, numpy, fused$"):
        _stats("numbra", monkeypatch, r, c, d, kernel.default_kappa())
    monkeypatch.setenv("SAFERL_KERNEL", "numbra")
    with pytest.raises(CubeError, match=r"^SAFERL_KERNEL='numbra' is not a kernel: use numpy, fused or auto$"):
        kernel.cell_stats(r, c, d, kernel.default_kappa(), None)


def test_the_environment_replaces_the_default_kernel_only(monkeypatch):
    """SAFERL_KERNEL (a benchmark's override) replaces the default "auto"; an explicit kernel wins."""
    calls = []
    real = fused.fill_cells
    monkeypatch.setattr(fused, "fill_cells", lambda *a: calls.append(a[1].size) or real(*a))
    monkeypatch.setattr(fused, "loaded", lambda: False)  # a process that has not loaded the loop yet
    r, c, d = _block(1, (1, 2, 10, 3), np.float32, 0.0, 0.0, np.array([25.0]))
    kappa = kernel.default_kappa()
    monkeypatch.delenv("SAFERL_KERNEL", raising=False)
    assert kernel.default_kernel() == kernel.DEFAULT_KERNEL == "auto"
    kernel.cell_stats(r, c, d, kappa, None)  # auto, a small block: numpy
    assert calls == []
    monkeypatch.setenv("SAFERL_KERNEL", "fused")
    kernel.cell_stats(r, c, d, kappa, None)
    assert calls == [60]
    kernel.cell_stats(r, c, d, kappa, None, kernel="numpy")
    assert calls == [60]
