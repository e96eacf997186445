"""In-memory cubes and a plain-loop reference implementation of the paper's metrics (for stats tests)."""

from __future__ import annotations

import numpy as np
import xarray as xr

DIMS = ("algo", "task", "bound", "seed", "iterate", "episode", "mode")
MODES = ("train", "expl", "greedy")


def cube_ds(reward: np.ndarray, cost: np.ndarray, algos, tasks, bounds, seeds=None) -> xr.Dataset:
    """A Dataset with the cube contract's dims from arrays (A, T, B, S, J, E, 3)."""
    a, t, b, s, j, e, m = cost.shape
    coords = {
        "algo": list(algos), "task": list(tasks), "bound": np.asarray(bounds, dtype=np.float64),
        "seed": np.arange(s) if seeds is None else np.asarray(seeds), "iterate": np.arange(j),
        "episode": np.arange(e), "mode": list(MODES[:m]),
    }
    return xr.Dataset({"reward": (DIMS, reward.astype(np.float32)), "cost": (DIMS, cost.astype(np.float32))},
                      coords=coords)


def random_cube(rng: np.random.Generator, shape=(2, 2, 2, 3, 4, 6), bounds=(15.0, 25.0), ragged=True,
                final_only=True) -> xr.Dataset:
    """Random cube (A, T, B, S, J, E): gamma costs around the bound, ragged NaN padding if `ragged`.

    Train episodes at every iterate; expl/greedy only at the last iterate when `final_only`.
    """
    a, t, b, s, j, e = shape
    cost = rng.gamma(2.0, 10.0, (a, t, b, s, j, e, 3))
    # Some costs exactly at the bound and exactly at grid points, to exercise the <= / > edges.
    d = np.asarray(bounds[:b])[None, None, :, None, None, None]
    cost[:, :, :, :, :, 0, :] = d  # exactly at the bound: not a violation
    cost[:, :, :, :, :, 1 % e, :] = 1.5 * d  # exactly at kappa = 0.5
    reward = rng.normal(10.0, 3.0, cost.shape)
    if ragged:
        n = rng.integers(1, e + 1, (a, t, b, s, j, 1, 3))
        pad = np.arange(e)[None, None, None, None, None, :, None] >= n
        cost[pad] = np.nan
        reward[pad] = np.nan
    if final_only:
        cost[:, :, :, :, :-1, :, 1:] = np.nan
        reward[:, :, :, :, :-1, :, 1:] = np.nan
    algos = [f"alg{i}" for i in range(a)]
    tasks = [f"task{i}" for i in range(t)]
    return cube_ds(reward, cost, algos, tasks, bounds[:b])


NAMES = ("R", "C", "Dnorm", "V", "Dplus", "CVaR")


def ref_cvar(x: np.ndarray, alpha: float = 0.1) -> float:
    """CVaR_alpha by sorting (Rockafellar & Uryasev's empirical estimator): with the N values that are not NaN
    sorted descending, k = ceil(alpha N) with alpha N exact (alpha as the decimal it is written as), the mean
    of x_(1..k-1) and the fraction alpha N - (k - 1) of x_(k); NaN without values."""
    from fractions import Fraction
    from math import ceil

    x = np.sort(np.asarray(x, dtype=np.float64)[~np.isnan(x)])[::-1]
    if x.size == 0:
        return np.nan
    an = Fraction(str(alpha)) * x.size
    k = ceil(an)
    return float((sum(x[: k - 1]) + float(an - (k - 1)) * x[k - 1]) / float(an))


def ref_fixed_policy(r: np.ndarray, c: np.ndarray, d: float, alpha: float = 0.1) -> dict[str, float]:
    """Eqs. 1-4 (and CVaR_alpha of (c - d)/d) for one policy iterate from its episodes (NaN slots dropped);
    NaN if no episode."""
    r, c = r[~np.isnan(r)], c[~np.isnan(c)]
    if c.size == 0:
        return dict.fromkeys(NAMES, np.nan)
    n_plus = sum(1 for x in c if x > d)
    over = sum(max(x - d, 0.0) for x in c)
    return {
        "R": float(np.mean(r)), "C": float(np.mean(c)), "Dnorm": (float(np.mean(c)) - d) / d,
        "V": n_plus / c.size, "Dplus": over / (n_plus * d) if n_plus else 0.0, "CVaR": ref_cvar((c - d) / d, alpha),
    }


def ref_run(ds: xr.Dataset, a: int, t: int, b: int, s: int, setting: str, alpha: float = 0.1) -> dict[str, float]:
    """Per-run metric for a setting: mean over train iterates with episodes, or the last iterate of a mode."""
    d = float(ds["bound"].values[b])
    r = ds["reward"].values.astype(np.float64)[a, t, b, s]
    c = ds["cost"].values.astype(np.float64)[a, t, b, s]
    if setting == "train":
        per = [ref_fixed_policy(r[j, :, 0], c[j, :, 0], d, alpha) for j in range(c.shape[0])]
        per = [p for p in per if not np.isnan(p["C"])]
        if not per:
            return dict.fromkeys(NAMES, np.nan)
        return {k: float(np.mean([p[k] for p in per])) for k in per[0]}
    m = {"final_expl": 1, "final_greedy": 2}[setting]
    with_eps = [j for j in range(c.shape[0]) if np.any(~np.isnan(c[j, :, m]))]
    if not with_eps:
        return dict.fromkeys(NAMES, np.nan)
    return ref_fixed_policy(r[with_eps[-1], :, m], c[with_eps[-1], :, m], d, alpha)
