"""The reward-cost front across bounds, per task, with the bootstrap probability of each point being on it.

Per task and setting, each (algorithm, bound) is a point: its seed-mean reward R̄ and a seed-mean cost
(D_norm by default; any cost-like metric of the registry, e.g. CVaR once it is a record). A point is on
the front (non-dominated) when no other point of the task has a reward at least as high and a cost at
least as low, one of them strictly (higher R̄ better, lower cost better; equal points are all on it).
P(front) is the share of stratified-bootstrap replicates (`cube.stats.bootstrap`: seeds resampled within
every (algorithm, bound), all points of a task from one draw) in which the point is on the front of the
replicate. R̄ is in task units: fronts are never pooled across tasks, and the aggregate only counts, per
algorithm, the tasks on whose front it stands (with at least one bound), observed and expected over
the replicates.
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence

import numpy as np
import pandas as pd
import xarray as xr

from cube.compute import Progress
from cube.errors import CubeError
from cube.stats.bootstrap import bootstrap_rng, check_boot, few_seeds, replicates, strata, weighted_means
from cube.stats.metrics import METRIC, not_safe
from cube.stats.packing import condition_values
from cube.stats.runs import run_metrics, settings_arg

__all__ = ["non_dominated", "reward_cost_front", "front_frame", "front_counts_frame"]


def non_dominated(reward: np.ndarray, cost: np.ndarray) -> np.ndarray:
    """Whether each point is on the front: reward, cost (..., P) -> bool (..., P). Higher reward and lower
    cost are better; a point with a NaN coordinate is never on it and dominates nothing."""
    r, c = np.asarray(reward, dtype=np.float64), np.asarray(cost, dtype=np.float64)
    ok = np.isfinite(r) & np.isfinite(c)
    rj, ri = r[..., None, :], r[..., :, None]  # [..., i, j]: does point j dominate point i?
    cj, ci = c[..., None, :], c[..., :, None]
    dominated = (ok[..., None, :] & (rj >= ri) & (cj <= ci) & ((rj > ri) | (cj < ci))).any(-1)
    return ok & ~dominated


def _task_front(values: np.ndarray, valid: np.ndarray, boot: int, rng: np.random.Generator, what: str
                ) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
    """One task: values (Q, K, 2) [reward, cost] of its Q (algo, bound) points. Returns on_front (Q,),
    p_front (Q,) and the replicates' membership (boot, Q) (None without an interval)."""
    q = values.shape[0]
    on, prob = np.zeros(q, dtype=bool), np.full(q, np.nan)
    keep = valid.any(1)
    packed, k = strata(values, valid)
    if not k.size:
        return on, prob, None
    means = packed.sum(1) / k[:, None]
    on[keep] = non_dominated(means[:, 0], means[:, 1])
    if few_seeds(k, what):
        return on, prob, None
    reps = replicates([(k, packed.shape[1])], boot, rng, lambda w: weighted_means(w / k[None, :, None], packed))
    member = np.zeros((boot, q), dtype=bool)
    member[:, keep] = non_dominated(reps[..., 0], reps[..., 1])
    prob[keep] = member[:, keep].mean(0)
    return on, prob, member


def reward_cost_front(ss: xr.Dataset, settings=None, cost: str = "Dnorm", reward: str = "R", boot: int = 2000,
                      rng_seed: int = 0, iterates=None, baseline: str | None = "auto",
                      progress: Progress | None = None) -> xr.Dataset:
    """Per task and setting: the (algorithm, bound) points, the front and each point's P(front).

    Returns dims (setting, task, algo, bound): reward, cost (seed means), n_seeds, on_front (bool, from
    the point estimates), p_front (share of bootstrap replicates on the front; NaN with a StatsWarning
    where a point of the task has fewer than 2 seeds); dims (setting, algo): n_tasks (tasks where the
    algorithm has a point), tasks_on_front (tasks where one of its bounds is on the front),
    expected_tasks_on_front (the sum over tasks of P(some bound of it on the front)); (algo,): not_safe
    (the unconstrained baseline, `cube.stats.metrics.not_safe`: drawn greyed, still on the front when
    non-dominated). attrs: reward, cost, boot, rng_seed. Draws: one stream per (rng_seed, "front:<task>",
    setting)."""
    settings = settings_arg(settings, ss)
    check_boot(boot, 0.95)
    for name, want_higher in ((reward, True), (cost, False)):
        if name not in METRIC or METRIC[name].higher_is_better != want_higher:
            kind = "a higher-is-better" if want_higher else "a lower-is-better"
            options = [m for m in METRIC if METRIC[m].higher_is_better == want_higher]
            raise CubeError(f"{name!r} is not {kind} metric: use one of {', '.join(options)}")
    algos, tasks = [str(a) for a in ss["algo"].values], [str(t) for t in ss["task"].values]
    bounds = ss["bound"].values
    n_a, n_t, n_b = len(algos), len(tasks), bounds.size
    shape = (len(settings), n_t, n_a, n_b)
    out = {v: np.full(shape, np.nan) for v in ("reward", "cost", "p_front")}
    on_front = np.zeros(shape, dtype=bool)
    n_seeds = np.zeros(shape, dtype=np.int64)
    n_tasks, on_tasks, expected = (np.zeros((len(settings), n_a)) for _ in range(3))
    done = 0
    for si, s in enumerate(settings):
        rm = run_metrics(ss, s, iterates)
        both = np.stack([condition_values(rm, a, (reward, cost)) for a in algos])  # (A, T*B, K, 2)
        both = both.reshape(n_a, n_t, n_b, *both.shape[2:])
        for ti, t in enumerate(tasks):
            values = both[:, ti].reshape(n_a * n_b, *both.shape[3:])  # (A*B, K, 2), algo-major
            valid = np.isfinite(values).all(-1)
            on, prob, member = _task_front(values, valid, boot, bootstrap_rng(rng_seed, f"front:{t}", s),
                                           f"front P of {t}, {s}")
            with np.errstate(invalid="ignore", divide="ignore"):
                means = np.where(valid[..., None], values, 0.0).sum(1) / valid.sum(1)[:, None]
            out["reward"][si, ti] = means[:, 0].reshape(n_a, n_b)
            out["cost"][si, ti] = means[:, 1].reshape(n_a, n_b)
            out["p_front"][si, ti] = prob.reshape(n_a, n_b)
            on_front[si, ti] = on.reshape(n_a, n_b)
            n_seeds[si, ti] = valid.sum(1).reshape(n_a, n_b)
            has = valid.any(1).reshape(n_a, n_b).any(1)
            n_tasks[si] += has
            on_tasks[si] += on.reshape(n_a, n_b).any(1)
            if member is not None:
                expected[si] += member.reshape(boot, n_a, n_b).any(2).mean(0)
            else:
                expected[si] = np.where(has, np.nan, expected[si])
            done += 1
            if progress:
                progress(done, len(settings) * n_t)
    dims = ("setting", "task", "algo", "bound")
    ds = xr.Dataset({**{v: (dims, arr) for v, arr in out.items()}, "on_front": (dims, on_front),
                     "n_seeds": (dims, n_seeds), "n_tasks": (("setting", "algo"), n_tasks.astype(np.int64)),
                     "tasks_on_front": (("setting", "algo"), on_tasks.astype(np.int64)),
                     "expected_tasks_on_front": (("setting", "algo"), expected),
                     "not_safe": ("algo", np.isin(algos, not_safe(algos, baseline)))},
                    coords={"setting": list(settings), "task": tasks, "algo": algos, "bound": bounds})
    ds.attrs.update(ss.attrs)
    ds.attrs.update(reward=reward, cost=cost, boot=boot, rng_seed=rng_seed)
    return ds


FRONT_COLUMNS = ("setting", "task", "algo", "bound", "reward", "cost", "n_seeds", "on_front", "p_front")
COUNT_COLUMNS = ("setting", "algo", "n_tasks", "tasks_on_front", "expected_tasks_on_front")


def _frame(ds: xr.Dataset, columns: Sequence[str]) -> pd.DataFrame:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)
        return ds[[c for c in columns if c in ds.data_vars]].to_dataframe().reset_index()[list(columns)]


def front_frame(front: xr.Dataset) -> pd.DataFrame:
    """A long, CSV-ready table of the points (FRONT_COLUMNS, with the reward and cost metrics in columns
    `reward_metric`, `cost_metric`) and a last `reason` (`cube.stats.reasons.REASONS` code): no-episodes
    where the (algorithm, bound) has no run, few-seeds where P(front) is missing; points without runs are
    kept so every (algorithm, bound) of the selection has a row."""
    df = _frame(front, FRONT_COLUMNS)
    df.insert(4, "reward_metric", front.attrs.get("reward", "R"))
    df.insert(5, "cost_metric", front.attrs.get("cost", "Dnorm"))
    df["reason"] = np.where(df["n_seeds"] == 0, "no-episodes", np.where(df["p_front"].isna(), "few-seeds", ""))
    return df


def front_counts_frame(front: xr.Dataset) -> pd.DataFrame:
    """The aggregate, CSV-ready: per setting and algorithm, COUNT_COLUMNS (never an average of R̄ across
    tasks: only counts of the tasks on whose front the algorithm stands)."""
    return _frame(front, COUNT_COLUMNS)
