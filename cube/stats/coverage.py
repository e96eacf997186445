"""Coverage of the violation-rate intervals by simulation: seeds and episodes drawn from known violation
probabilities, the paper's bootstrap interval and the honest one (`cube.stats.honest`) computed on each
replication, and the share of replications whose interval holds the truth.

The model: a condition with population violation probability p has K seeds; seed k's probability is
p_k ~ Beta(p c, (1 - p) c) (concentration c; intra-seed correlation 1/(c + 1)) or p_k = p ("identical"),
and its V is X_k / N with X_k ~ Binomial(N, p_k). The truth of a condition is p = E[p_k]: the V of a new
seed on average (the paper's CI is about another sample of seeds, not about these seeds' own p_k). For
IQM(V), P = 12 conditions (as the paper's 4 tasks x 3 bounds) with p_c = p m_c, m = linspace(0, 2, 12),
so the truth IQM(p_c) = p and the conditions include one that never violates.

`coverage_grid` runs the grid; `bench/coverage.py` prints and stores it (docs/statistics.md).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

import numpy as np
import pandas as pd

from cube.stats.bootstrap import percentile_ci, stratified_bootstrap_weights, weighted_means
from cube.stats.honest import ICC_FLOOR, honest_bounds, honest_iqm_bounds
from cube.stats.metrics import iqm

__all__ = ["GRID_P", "GRID_SEEDS", "GRID_EPISODES", "SPREADS", "IQM_MULTIPLIERS", "draw_rates", "bootstrap_means",
           "coverage_cell", "coverage_grid"]

GRID_P = (0.0, 0.001, 0.01, 0.05, 0.3)
GRID_SEEDS = (3, 5, 10, 30)
GRID_EPISODES = (10, 100, 2048)
SPREADS = ("beta", "identical")
IQM_MULTIPLIERS = np.linspace(0.0, 2.0, 12)


def draw_rates(rng: np.random.Generator, means: np.ndarray, n_seeds: int, n_episodes: int, reps: int,
               concentration: float | None) -> np.ndarray:
    """Per-seed violation rates V (reps, P, K) of P conditions with population probabilities `means` (P,):
    p_k ~ Beta(p c, (1 - p) c) (c = `concentration`; None: p_k = p), V = Binomial(N, p_k) / N."""
    means = np.asarray(means, dtype=np.float64)
    shape = (reps, means.size, n_seeds)
    p = np.broadcast_to(means[None, :, None], shape)
    if concentration is not None:
        inner = (p > 0) & (p < 1)
        a = np.where(inner, p * concentration, 1.0)
        b = np.where(inner, (1.0 - p) * concentration, 1.0)
        p = np.where(inner, rng.beta(a, b), p)
    return rng.binomial(n_episodes, p) / n_episodes


def bootstrap_means(rng: np.random.Generator, v: np.ndarray, boot: int, chunk: int = 2) -> np.ndarray:
    """Stratified-bootstrap replicates of each condition's seed mean: v (R, P, K) -> (boot, R, P), every
    (replication, condition) a stratum of `cube.stats.bootstrap` (the report's own resampling)."""
    r, p, k = v.shape
    out = np.empty((boot, r, p))
    # small chunks: the weights of a chunk (boot x strata x K) stay in cache, several times faster than large ones
    for start in range(0, r, chunk):
        part = v[start:start + chunk].reshape(-1, k)
        w = stratified_bootstrap_weights(np.full(part.shape[0], k), k, boot, rng)
        out[:, start:start + chunk] = (weighted_means(w / k, part[..., None])[..., 0]).reshape(boot, -1, p)
    return out


def coverage_cell(rng: np.random.Generator, p: float, n_seeds: int, n_episodes: int, level: str,
                  concentration: float | None, reps: int = 2000, boot: int = 1000, ci: float = 0.95,
                  icc_floor: float = ICC_FLOOR) -> dict[str, float]:
    """Coverage of one grid cell: `level` "condition" (truth p) or "iqm" (12 conditions, truth IQM = p).

    Returns plain / shipped (share of replications whose interval holds the truth: the bootstrap
    percentile interval, the honest one) and their median upper bounds."""
    means = np.array([p]) if level == "condition" else p * IQM_MULTIPLIERS
    truth = p if level == "condition" else float(iqm(means))
    v = draw_rates(rng, means, n_seeds, n_episodes, reps, concentration)
    n = np.full(v.shape, float(n_episodes))
    reps_means = bootstrap_means(rng, v, boot)
    if level == "condition":
        plain = percentile_ci(reps_means[..., 0], ci)
        shipped = honest_bounds(v[:, 0], n[:, 0], reps_means[..., 0], ci, icc_floor)
    else:
        plain = percentile_ci(iqm(reps_means, axis=-1), ci)
        shipped = honest_iqm_bounds(v, n, reps_means, ci, icc_floor)

    def covered(lo: np.ndarray, hi: np.ndarray) -> float:
        slack = 1e-12  # float noise of a mean of equal rates at the truth is not a miss
        return float(np.mean((lo <= truth + slack) & (truth <= hi + slack)))

    return {"plain": covered(*plain), "shipped": covered(*shipped),
            "plain_high": float(np.median(plain[1])), "shipped_high": float(np.median(shipped[1]))}


def coverage_grid(levels: Iterable[str] = ("condition", "iqm"), spreads: Iterable[str] = SPREADS,
                  seeds: Iterable[int] = GRID_SEEDS, episodes: Iterable[int] = GRID_EPISODES,
                  probabilities: Iterable[float] = GRID_P, concentration: float = 10.0, reps: int = 2000,
                  iqm_reps: int = 1000, boot: int = 1000, iqm_boot: int = 500, ci: float = 0.95,
                  icc_floor: float = ICC_FLOOR, rng_seed: int = 0,
                  progress: Callable[[int, int], None] | None = None) -> pd.DataFrame:
    """Every cell of levels x spreads x seeds x episodes x probabilities: one row each with columns level,
    spread, K, N, p, plain, shipped, plain_high, shipped_high (see `coverage_cell`). Each cell draws from
    its own generator (rng_seed, cell number), so a cell's numbers do not depend on which others run."""
    cells = [(lv, sp, k, n, p) for lv in levels for sp in spreads for k in seeds for n in episodes
             for p in probabilities]
    rows = []
    for i, (lv, sp, k, n, p) in enumerate(cells):
        rng = np.random.default_rng([rng_seed, i])
        res = coverage_cell(rng, p, k, n, lv, concentration if sp == "beta" else None,
                            *((reps, boot) if lv == "condition" else (iqm_reps, iqm_boot)), ci, icc_floor)
        rows.append({"level": lv, "spread": sp, "K": k, "N": n, "p": p, **res})
        if progress:
            progress(i + 1, len(cells))
    return pd.DataFrame(rows)
