"""Comparisons beyond the paper, aggregated like its tables: the probability that one algorithm improves on
another (Mann-Whitney over seeds, per condition, averaged over conditions) and the paired greedy-minus-
exploration gap of the final policies (docs/statistics.md). Both with stratified-bootstrap CIs.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np
import xarray as xr

from cube.compute import Progress
from cube.errors import CubeError
from cube.stats.bootstrap import bootstrap_rng, check_boot, interval, strata
from cube.stats.metrics import METRIC, METRICS, SETTING, check_metrics, directions
from cube.stats.runs import available_settings, mark_means_only, run_metrics, runs_without, settings_arg, some_labels
from cube.stats.tables import each, grouped_iqm, nan_array, result_table, stacked

__all__ = ["probability_of_improvement", "greedy_expl_gap"]


def _improves(x: np.ndarray, y: np.ndarray, higher: np.ndarray) -> np.ndarray:
    """Pairwise scores (P, Kx, Ky, F): 1 where x_i improves on y_j, 1/2 on a tie, else 0.

    x (P, Kx, F), y (P, Ky, F); higher (F,) bool: whether larger is better for each metric."""
    xi, yj = x[:, :, None, :], y[:, None, :, :]
    better = np.where(higher, xi > yj, xi < yj)
    return better + 0.5 * (xi == yj)


def _poi_statistic(scores: np.ndarray, kx: np.ndarray, ky: np.ndarray) -> Callable[..., np.ndarray]:
    """Replicate statistic (wx, wy) -> (b, F): the mean over strata of U / (kx ky), where with draw
    counts wx, wy the stratum's U is wx^T S wy (one batched matmul)."""
    p, kxm, kym, f = scores.shape
    flat = scores.reshape(p, kxm, kym * f)

    def statistic(wx: np.ndarray, wy: np.ndarray) -> np.ndarray:
        b = wx.shape[0]
        wx, wy = (np.ascontiguousarray(w.transpose(1, 0, 2)) for w in (wx, wy))  # (P, b, K)
        t = np.matmul(wx, flat).reshape(p, b, kym, f)
        return (np.einsum("pbjf,pbj->pbf", t, wy) / (kx * ky)[:, None, None]).mean(0)

    return statistic


def probability_of_improvement(ss: xr.Dataset, x: str, y: str, setting: str | Sequence[str] | None = None,
                               metric: str | Sequence[str] | None = None, boot: int = 2000, rng_seed: int = 0,
                               ci: float = 0.95, iterates=None) -> xr.Dataset:
    """P(X improves on Y): per condition the Mann-Whitney U over seeds / (n_x n_y), averaged over conditions.

    Per condition (task, bound) with seeds of both algorithms, U counts the pairs (x_i, y_j) of per-run
    values where x_i improves on y_j (in each metric's direction of `cube.stats.metrics`: higher R, lower C,
    Dnorm, V, Dplus), ties counting 1/2. The estimate is the mean over those conditions of U / (n_x n_y);
    0.5 = no difference. CI: stratified bootstrap, seeds of X and of Y resampled independently within
    every condition, percentile interval (NaN with a warning when a condition has fewer than 2 seeds of
    either). Returns dims (setting, metric): value, ci_low, ci_high; n_conditions (setting); attrs x, y.
    """
    settings = settings_arg(setting, ss)
    metrics = check_metrics(metric)
    check_boot(boot, ci)
    have = [str(a) for a in ss["algo"].values]
    for a in (x, y):
        if a not in have:
            raise CubeError(f"unknown algo {a} for the probability of improvement: the selection has {', '.join(have)}")
    higher = np.array([METRIC[m].higher_is_better for m in metrics])
    shape = (len(settings), len(metrics))
    value, lo, hi = nan_array(*shape), nan_array(*shape), nan_array(*shape)
    n_cond = np.zeros(shape, dtype=np.int64)
    for si, s in enumerate(settings):
        rm = run_metrics(ss, s, iterates)[list(metrics)]
        vx, vy = stacked(rm, x, metrics)[0], stacked(rm, y, metrics)[0]
        # Each metric over the runs that hold it (means-only runs hold R, C, D_norm, not V, D_norm+): the
        # first group draws from the classic stream, so cubes of episodes give exactly the one-group result.
        for g, (cols, okx, oky) in enumerate(_pair_groups(vx, vy)):
            keep = okx.any(1) & oky.any(1)
            n_cond[si, cols] = int(keep.sum())
            if not keep.any():
                continue
            (px, kx), (py, ky) = strata(vx[keep][..., cols], okx[keep]), strata(vy[keep][..., cols], oky[keep])
            scores = _improves(px, py, higher[cols])
            # Padding rows are zeroed by the valid masks, so they add nothing to U.
            mx = (np.arange(px.shape[1]) < kx[:, None]).astype(np.float64)
            my = (np.arange(py.shape[1]) < ky[:, None]).astype(np.float64)
            value[si, cols] = (np.einsum("pi,pijf,pj->pf", mx, scores, my) / (kx * ky)[:, None]).mean(0)
            tag = s if g == 0 else f"{s}:{','.join(metrics[c] for c in cols)}"
            est = interval([(kx, px.shape[1]), (ky, py.shape[1])], boot, bootstrap_rng(rng_seed, f"{x}>{y}", tag),
                           ci, _poi_statistic(scores, kx, ky), f"CI of P({x} > {y}), {s}")
            if est is not None:
                lo[si, cols], hi[si, cols], _ = est
    dims = ("setting", "metric")
    out = result_table({"value": (dims, value), "ci_low": (dims, lo), "ci_high": (dims, hi),
                  "n_conditions": ("setting", n_cond.max(1)), "n_conditions_metric": (dims, n_cond)},
                 {"setting": list(settings), "metric": list(metrics)}, ss,
                 x=x, y=y, boot=boot, rng_seed=rng_seed, ci=ci,
                 convention=f"P(x improves on y): {directions('name')}; ties count 1/2")
    return mark_means_only(out, ss.sel(algo=[x, y]), settings, ())


def _pair_groups(vx: np.ndarray, vy: np.ndarray) -> list[tuple[list[int], np.ndarray, np.ndarray]]:
    """Metric columns of two algorithms' values (P, K, F) grouped by the runs of both that hold them:
    [(columns, valid x (P, Kx), valid y (P, Ky))]; columns no run of x or of y holds are left out."""
    hx, hy = ~np.isnan(vx), ~np.isnan(vy)
    groups: dict[bytes, list[int]] = {}
    for f in range(vx.shape[-1]):
        if hx[..., f].any() and hy[..., f].any():
            groups.setdefault(hx[..., f].tobytes() + b"|" + hy[..., f].tobytes(), []).append(f)
    return [(cols, hx[..., cols[0]], hy[..., cols[0]]) for cols in groups.values()]



def greedy_expl_gap(ss: xr.Dataset, boot: int = 2000, rng_seed: int = 0, ci: float = 0.95,
                    progress: Progress | None = None) -> xr.Dataset:
    """Paired greedy-minus-exploration gap of every final metric, aggregated like aggregate_table.

    Per run: X(final_greedy) - X(final_expl), each at its mode's final iterate (runs lacking either are
    left out). Then the seed mean per condition, the IQM over conditions and a stratified-bootstrap CI in
    which a seed's (greedy, expl) pair is resampled together. Returns dims (algo, metric): value, ci_low,
    ci_high; n_conditions (algo).
    """
    check_boot(boot, ci)
    for s in ("final_expl", "final_greedy"):
        if s not in available_settings(ss):
            raise CubeError(f"the greedy-expl gap needs {SETTING[s].mode!r} episodes, but no selected run has "
                            f"them ({some_labels(runs_without(ss, s))}): evaluate the final policies first")
    diff = run_metrics(ss, "final_greedy") - run_metrics(ss, "final_expl")
    algos = list(ss["algo"].values)
    shape = (len(algos), len(METRICS))
    value, lo, hi = nan_array(*shape), nan_array(*shape), nan_array(*shape)
    n_cond = np.zeros(len(algos), dtype=np.int64)
    for _, ai, a, _ in each(("gap",), algos, progress):
        values, _ = stacked(diff, a)
        value[ai], lo[ai], hi[ai], n_cond[ai], _ = grouped_iqm(values, boot, rng_seed, a, "gap", ci,
                                                                f"CI of the greedy-expl gap of {a}")
    dims = ("algo", "metric")
    return result_table({"value": (dims, value), "ci_low": (dims, lo), "ci_high": (dims, hi),
                   "n_conditions": ("algo", n_cond)}, {"algo": algos, "metric": list(METRICS)}, ss,
                  boot=boot, rng_seed=rng_seed, ci=ci)

