"""How many seeds: the seeds per condition a target CI half-width of each metric's IQM needs, and those for
the probability of improvement of two algorithms to exclude 0.5 with a given power, projected from the
cube's own per-seed values (Colas et al. 2018; Patterson et al. 2024 for the practice of planning seeds).

Projection to K' seeds per condition: a replicate draws K' seeds with replacement from each condition's
K observed ones (the same draw as `cube.stats.bootstrap`'s, floor(u K), with K' draws), and each
condition mean's deviation from its observed mean is scaled by sqrt(K / (K - 1)) sqrt((K' - 1) / K'):
the first factor undoes the plug-in variance of K seeds (the resample's variance is (K - 1)/K of the
population's), the second is the plug-in shrinkage the report's own bootstrap will have at K' seeds. So at
K' = K the projection is the report's CI of today. The projected half-width is half the percentile width
of the IQM over those replicates; the seeds needed are the first K' of SEED_GRID whose half-width is at
most the target. Power of the PoI at K' seeds of each algorithm: the share of replicates (the K'-seed
experiments) whose PoI, with the projected interval around it, lies clear of 0.5. Checked against fresh
draws from known distributions in tests/test_plan.py (within 15%).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
import pandas as pd
import xarray as xr

from cube.compute import Progress
from cube.errors import CubeError
from cube.stats.bootstrap import bootstrap_rng, check_boot, percentile_ci, strata, weighted_means
from cube.stats.metrics import METRIC, check_metrics, iqm
from cube.stats.packing import condition_values
from cube.stats.profiles import profile_metrics
from cube.stats.runs import run_metrics, settings_arg

__all__ = ["SEED_GRID", "DEFAULT_HALFWIDTH", "DEFAULT_POWER", "resample_counts", "projected_halfwidth",
           "poi_replicates", "poi_power", "plan_seeds", "plan_poi", "halfwidth_targets", "plan_frame", "plan_footer"]

SEED_GRID = (5, 6, 8, 10, 12, 15, 20, 25, 30, 40, 50, 60, 80, 100, 120, 150, 200, 250, 300, 400, 500)
DEFAULT_HALFWIDTH = 0.05
BATCH = 256  # replicates drawn at once: bounds memory (boot x conditions x K' uniforms per batch)
DEFAULT_POWER = 0.8


def resample_counts(k: np.ndarray, kmax: int, draws: int, boot: int, rng: np.random.Generator) -> np.ndarray:
    """How often each seed is drawn when `draws` seeds are drawn with replacement from each stratum's k[p]:
    (boot, P, kmax) counts, row p summing to `draws` (seed floor(u k[p]) for u ~ U[0, 1), as the engine)."""
    p = k.size
    u = rng.random((boot, p, draws))
    idx = np.minimum((u * k[None, :, None]).astype(np.int64), k[None, :, None] - 1)
    idx += (np.arange(boot * p) * kmax).reshape(boot, p, 1)
    return np.bincount(idx.ravel(), minlength=boot * p * kmax).reshape(boot, p, kmax).astype(np.float64)


def _scale(k: np.ndarray, draws: int) -> np.ndarray:
    """(P,) factor on a resampled condition mean's deviation: sqrt(K/(K-1)) sqrt((K'-1)/K')."""
    return np.sqrt(k / np.maximum(k - 1, 1)) * np.sqrt((draws - 1) / draws)


def projected_halfwidth(values: np.ndarray, k: np.ndarray, draws: int, boot: int, rng: np.random.Generator,
                        ci: float = 0.95) -> np.ndarray:
    """Half the projected percentile CI width of IQM over strata of seed means at `draws` seeds per stratum.

    values (P, Kmax, F) packed by `cube.stats.bootstrap.strata` (k (P,) seeds each, all k >= 2) ->
    (F,), in the metrics' units."""
    mean = values.sum(1) / k[:, None]
    out = []
    for start in range(0, boot, BATCH):  # bounds memory at K' = 500; the stream does not depend on BATCH
        w = resample_counts(k, values.shape[1], draws, min(BATCH, boot - start), rng)
        reps = mean + _scale(k, draws)[:, None] * (weighted_means(w / draws, values) - mean)
        out.append(iqm(reps, axis=1))
    lo, hi = percentile_ci(np.concatenate(out), ci)
    return (hi - lo) / 2.0


def poi_replicates(x: np.ndarray, kx: np.ndarray, y: np.ndarray, ky: np.ndarray, draws: int, boot: int,
                   rng: np.random.Generator, higher: np.ndarray) -> np.ndarray:
    """PoI of X over Y (mean over strata of U / draws^2, ties 1/2) in `boot` experiments of `draws` seeds of
    each, resampled from x (P, Kx, F), y (P, Ky, F) packed with kx, ky seeds: (boot, F), each stratum's
    deviation from its observed U / (kx ky) scaled as in `projected_halfwidth`."""
    mx = (np.arange(x.shape[1]) < kx[:, None]).astype(np.float64)
    my = (np.arange(y.shape[1]) < ky[:, None]).astype(np.float64)
    xi, yj = x[:, :, None, :], y[:, None, :, :]
    score = np.where(higher, xi > yj, xi < yj) + 0.5 * (xi == yj)  # (P, Kx, Ky, F)
    score = score * (mx[:, :, None, None] * my[:, None, :, None])
    observed = np.einsum("pijf->pf", score) / (kx * ky)[:, None]
    out = []
    for start in range(0, boot, BATCH):  # per batch: X's draws, then Y's
        b = min(BATCH, boot - start)
        wx, wy = resample_counts(kx, x.shape[1], draws, b, rng), resample_counts(ky, y.shape[1], draws, b, rng)
        per = np.einsum("bpi,pijf,bpj->bpf", wx, score, wy, optimize=True) / draws**2
        out.append((observed + _scale(np.minimum(kx, ky), draws)[:, None] * (per - observed)).mean(1))
    return np.concatenate(out)


def poi_power(reps: np.ndarray, observed: np.ndarray, ci: float = 0.95) -> np.ndarray:
    """Share of experiments (rows of reps (boot, F)) whose PoI, with the percentile interval of reps placed
    around it (its offsets from `observed` (F,)), excludes 0.5: (F,)."""
    lo, hi = percentile_ci(reps, ci)
    below, above = observed - lo, hi - observed
    return np.mean((reps - below > 0.5) | (reps + above < 0.5), axis=0)


def halfwidth_targets(halfwidth: float | Mapping[str, float] | None, metrics: Sequence[str]) -> np.ndarray:
    """(F,) targets: one number for every metric, or {metric: target} (the others DEFAULT_HALFWIDTH)."""
    if halfwidth is None:
        given = {}
    else:
        given = dict(halfwidth) if isinstance(halfwidth, Mapping) else dict.fromkeys(metrics, halfwidth)
    unknown = [m for m in given if m not in metrics]
    if unknown:
        raise CubeError(f"half-width given for {', '.join(unknown)}, which is not planned: plan {', '.join(metrics)}")
    out = np.array([float(given.get(m, DEFAULT_HALFWIDTH)) for m in metrics])
    if not (np.isfinite(out) & (out > 0)).all():
        raise CubeError(f"a target half-width must be a positive number, got {', '.join(map(str, out))}")
    return out


def _grid(max_seeds: int) -> tuple[int, ...]:
    if max_seeds < 2:
        raise CubeError(f"--max-seeds must be at least 2, got {max_seeds}")
    return tuple(g for g in SEED_GRID if g < max_seeds) + (max_seeds,)


def plan_seeds(ss: xr.Dataset, settings=None, metrics: str | Sequence[str] | None = None,
               halfwidth: float | Mapping[str, float] | None = None, boot: int = 2000, rng_seed: int = 0,
               ci: float = 0.95, iterates=None, max_seeds: int = 500, progress: Progress | None = None) -> xr.Dataset:
    """Seeds per condition for a target CI half-width of each metric's IQM.

    Returns dims (algo, setting, metric): value (IQM now), seeds_now (fewest seeds of a condition),
    n_conditions, halfwidth_now (the projection at today's seeds: the report's CI), target, seeds_needed
    (first K' of the grid meeting the target; -1: not within max_seeds), halfwidth_needed (projected at
    seeds_needed); (algo, setting, metric, seeds): halfwidth (projected at each grid K' evaluated, NaN
    past the first that met the target). NaN (and seeds_needed -1) where a condition has fewer than 2
    seeds. One stream per (rng_seed, "plan:<algo>", "<setting>:<K'>"): a K' gives the same projection
    whatever else is evaluated."""
    settings = settings_arg(settings, ss)
    metrics = profile_metrics() if metrics is None else check_metrics(metrics)
    check_boot(boot, ci)
    target = halfwidth_targets(halfwidth, metrics)
    grid = _grid(max_seeds)
    algos = [str(a) for a in ss["algo"].values]
    shape = (len(algos), len(settings), len(metrics))
    nan = np.full(shape, np.nan)
    value, now, needed_hw = nan.copy(), nan.copy(), nan.copy()
    needed = np.full(shape, -1, dtype=np.int64)
    seeds_now, n_cond = np.zeros(shape, dtype=np.int64), np.zeros(shape, dtype=np.int64)
    curve = np.full((*shape, len(grid)), np.nan)
    done = 0
    for si, s in enumerate(settings):
        rm = run_metrics(ss, s, iterates)
        for ai, a in enumerate(algos):
            values = condition_values(rm, a, metrics)
            for mi in range(len(metrics)):
                packed, k = strata(values[..., mi:mi + 1], np.isfinite(values[..., mi]))
                if not k.size:
                    continue
                value[ai, si, mi] = iqm(packed[..., 0].sum(1) / k)
                seeds_now[ai, si, mi], n_cond[ai, si, mi] = int(k.min()), k.size
                if k.min() < 2:
                    continue
                now[ai, si, mi] = projected_halfwidth(packed, k, int(np.median(k)), boot,
                                                      bootstrap_rng(rng_seed, f"plan:{a}", f"{s}:now"), ci)[0]
                for gi, g in enumerate(grid):
                    rng = bootstrap_rng(rng_seed, f"plan:{a}", f"{s}:{g}")
                    hw = projected_halfwidth(packed, k, g, boot, rng, ci)[0]
                    curve[ai, si, mi, gi] = hw
                    if hw <= target[mi]:
                        needed[ai, si, mi], needed_hw[ai, si, mi] = g, hw
                        break
            done += 1
            if progress:
                progress(done, len(settings) * len(algos))
    dims = ("algo", "setting", "metric")
    out = xr.Dataset({"value": (dims, value), "seeds_now": (dims, seeds_now), "n_conditions": (dims, n_cond),
                      "halfwidth_now": (dims, now), "target": ("metric", target), "seeds_needed": (dims, needed),
                      "halfwidth_needed": (dims, needed_hw), "halfwidth": ((*dims, "seeds"), curve)},
                     coords={"algo": algos, "setting": list(settings), "metric": list(metrics), "seeds": list(grid)})
    out.attrs.update(ss.attrs)
    out.attrs.update(boot=boot, ci=ci, rng_seed=rng_seed, max_seeds=max_seeds)
    return out


def plan_poi(ss: xr.Dataset, x: str, y: str, settings=None, metrics: str | Sequence[str] | None = None,
             power: float = DEFAULT_POWER, boot: int = 2000, rng_seed: int = 0, ci: float = 0.95, iterates=None,
             max_seeds: int = 500, progress: Progress | None = None) -> xr.Dataset:
    """Seeds per condition (of each algorithm) for the CI of P(X improves on Y) to exclude 0.5 with `power`.

    Per condition holding seeds of both, the PoI of `stats.probability_of_improvement` (directions from
    the registry). Returns dims (setting, metric): value (PoI now), power_now (at today's seeds),
    seeds_needed (first K' of the grid with power >= `power`; -1: not within max_seeds, e.g. no
    difference to find), power_needed, n_conditions; attrs x, y, power. NaN where a condition has fewer
    than 2 seeds of either."""
    settings = settings_arg(settings, ss)
    metrics = profile_metrics() if metrics is None else check_metrics(metrics)
    check_boot(boot, ci)
    if not 0.0 < power < 1.0:
        raise CubeError(f"--power must be strictly between 0 and 1, got {power}")
    have = [str(a) for a in ss["algo"].values]
    for a in (x, y):
        if a not in have:
            raise CubeError(f"unknown algo {a} for --poi: the selection has {', '.join(have)}")
    grid = _grid(max_seeds)
    higher = np.array([METRIC[m].higher_is_better for m in metrics])
    shape = (len(settings), len(metrics))
    value, now, reached = np.full(shape, np.nan), np.full(shape, np.nan), np.full(shape, np.nan)
    needed, n_cond = np.full(shape, -1, dtype=np.int64), np.zeros(shape, dtype=np.int64)
    for si, s in enumerate(settings):
        rm = run_metrics(ss, s, iterates)
        vx, vy = condition_values(rm, x, metrics), condition_values(rm, y, metrics)
        for mi in range(len(metrics)):
            ox, oy = np.isfinite(vx[..., mi]), np.isfinite(vy[..., mi])
            keep = ox.any(1) & oy.any(1)
            n_cond[si, mi] = int(keep.sum())
            if not keep.any():
                continue
            (px, kx), (py, ky) = (strata(v[keep][..., mi:mi + 1], o[keep]) for v, o in ((vx, ox), (vy, oy)))
            args = (px, kx, py, ky)
            value[si, mi] = _observed_poi(px, kx, py, ky, higher[mi])
            if min(kx.min(), ky.min()) < 2:
                continue
            obs = np.array([value[si, mi]])
            k_now = int(np.median(np.minimum(kx, ky)))
            now[si, mi] = poi_power(poi_replicates(*args, k_now, boot, bootstrap_rng(rng_seed, f"plan:{x}>{y}",
                                                                                      f"{s}:now"), higher[mi:mi + 1]),
                                    obs, ci)[0]
            for g in grid:
                pw = poi_power(poi_replicates(*args, g, boot, bootstrap_rng(rng_seed, f"plan:{x}>{y}", f"{s}:{g}"),
                                              higher[mi:mi + 1]), obs, ci)[0]
                if pw >= power:
                    needed[si, mi], reached[si, mi] = g, pw
                    break
        if progress:
            progress(si + 1, len(settings))
    dims = ("setting", "metric")
    out = xr.Dataset({"value": (dims, value), "power_now": (dims, now), "seeds_needed": (dims, needed),
                      "power_needed": (dims, reached), "n_conditions": (dims, n_cond)},
                     coords={"setting": list(settings), "metric": list(metrics)})
    out.attrs.update(ss.attrs)
    out.attrs.update(x=x, y=y, power=power, boot=boot, ci=ci, rng_seed=rng_seed, max_seeds=max_seeds)
    return out


def _observed_poi(px: np.ndarray, kx: np.ndarray, py: np.ndarray, ky: np.ndarray, higher: bool) -> float:
    """The PoI of the observed seeds: mean over strata of U / (kx ky), ties 1/2."""
    total = 0.0
    for p in range(kx.size):
        a, b = px[p, :kx[p], 0][:, None], py[p, :ky[p], 0][None, :]
        better = (a > b) if higher else (a < b)
        total += (better.sum() + 0.5 * (a == b).sum()) / (kx[p] * ky[p])
    return total / kx.size


PLAN_COLUMNS = ("goal", "algo", "setting", "metric", "value", "seeds_now", "current", "target", "seeds_needed",
                "projected", "more_than")


def plan_frame(seeds: xr.Dataset, poi: xr.Dataset | None = None) -> pd.DataFrame:
    """One long, CSV-ready table of `plan_seeds` (goal "halfwidth": value = IQM now, current = CI half-width
    now, target = the half-width asked, projected = the half-width at seeds_needed) and `plan_poi` (goal
    "poi", algo "X>Y": value = PoI now, current = power now, target = the power asked, projected = the power
    at seeds_needed; seeds_now empty). seeds_needed is empty where the target is not met within
    max_seeds; more_than then holds max_seeds. A last `reason` (`cube.stats.reasons.REASONS` code):
    no-episodes where there is no value, few-seeds where a condition has fewer than 2 seeds (no projection)."""
    rows = []
    for (a, s, m), one in _cells(seeds, ("algo", "setting", "metric")):
        rows.append(("halfwidth", a, s, m, one["value"], one["seeds_now"], one["halfwidth_now"],
                     float(seeds["target"].sel(metric=m)), one["seeds_needed"], one["halfwidth_needed"],
                     seeds.attrs.get("max_seeds")))
    if poi is not None:
        pair = f"{poi.attrs['x']}>{poi.attrs['y']}"
        for (s, m), one in _cells(poi, ("setting", "metric")):
            rows.append(("poi", pair, s, m, one["value"], np.nan, one["power_now"], float(poi.attrs["power"]),
                         one["seeds_needed"], one["power_needed"], poi.attrs.get("max_seeds")))
    df = pd.DataFrame(rows, columns=list(PLAN_COLUMNS))
    met = df["seeds_needed"] >= 0
    df["more_than"] = np.where(met | df["current"].isna(), np.nan, df["more_than"])
    df["seeds_needed"] = df["seeds_needed"].where(met)
    df["reason"] = np.where(df["value"].isna(), "no-episodes", np.where(df["current"].isna(), "few-seeds", ""))
    return df


def _cells(ds: xr.Dataset, dims: Sequence[str]):
    """((labels...), {var: float}) over the product of `dims`, in order."""
    names = [v for v in ds.data_vars if set(ds[v].dims) == set(dims)]
    flat = {v: ds[v].transpose(*dims).values.reshape(-1) for v in names}
    labels = np.array(np.meshgrid(*[ds[d].values for d in dims], indexing="ij"), dtype=object).reshape(len(dims), -1)
    for i in range(labels.shape[1]):
        yield tuple(str(x) for x in labels[:, i]), {v: float(flat[v][i]) for v in names}


def plan_footer(seeds: xr.Dataset, setting: str | None = None) -> str:
    """One line for a footer: 'seeds per condition for IQM ±0.05 (final_greedy): V 12, D_norm 30, D_norm+
    >500', the most any selected algorithm needs per metric (at the first setting unless given)."""
    setting = setting or str(seeds["setting"].values[0])
    one = seeds.sel(setting=setting)
    parts = []
    for m in one["metric"].values:
        need = one["seeds_needed"].sel(metric=m).values
        have = np.isfinite(one["halfwidth_now"].sel(metric=m).values)
        if not have.any():
            continue
        label = METRIC[str(m)].label
        parts.append(f"{label} >{seeds.attrs.get('max_seeds')}" if (need[have] < 0).any()
                     else f"{label} {int(need[have].max())}")
    targets = sorted({float(t) for t in seeds["target"].values})
    target = "/".join(f"±{t:g}" for t in targets)
    return f"seeds per condition for IQM {target} ({setting}): " + (", ".join(parts) or "no data")
