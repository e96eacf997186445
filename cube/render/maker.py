"""From a cube and a selection to the paper's figures: `FigureMaker` computes what each figure needs
(once each, through `cube.stats`) and hands it to the drawing functions of `cube.render.figures`,
`cube.render.aggregate_figures` and `cube.render.profile_front` (run-level profiles, the reward-cost front).
"""

from __future__ import annotations

import os
import re
import threading
from collections.abc import Callable, Iterator
from concurrent.futures import Future
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

import numpy as np
import xarray as xr

from cube.compute import Progress, StepProgress, step_progress
from cube.errors import CubeError
from cube.render.aggregate_figures import aggregate_curve_figure, intervals_figure, poi_figure, poi_pairs
from cube.render.figures import cdf_figure, curves_figure, hist_figure
from cube.render.profile_front import front_figure, profile_figure
from cube.render.style import DEFAULT_WINDOW, KINDS, STYLES, algo_colors
from cube.schema import same_bound
from cube.stats.curves import hist_panels

if TYPE_CHECKING:  # pragma: no cover
    from matplotlib.figure import Figure

    from cube.selection import Selection



# ------------------------------------------------------------------------------ data -> figures
@dataclass(frozen=True)
class PlotOptions:
    """What the figures are computed with (the flags of `saferl plot`)."""

    settings: tuple[str, ...] | None = None
    baseline: str | None = "auto"
    """The not-safe baseline drawn grey that never sets an axis: "auto" (the unconstrained algorithms, e.g.
    ppo; `cube.stats.metrics.not_safe`), None or "none", or an algorithm."""
    boot: int = 2000
    rng_seed: int = 0
    ci: float = 0.95
    xmax: float | None = 2.0
    style: str = "paper"
    window: int = DEFAULT_WINDOW
    var: str = "multiplier"
    """curves: the per-iterate variable of the third row (`cube.stats.curves.iterate_var_names`)."""
    bins: int = 20
    by: str = "auto"
    pairs: tuple[tuple[str, str], ...] | None = None
    cvar_alpha: float = 0.1
    """The alpha of the CVaR panels (`cube.stats.tail`; 0.1 and 0.05 are cached, another one is computed)."""
    front_cost: str = "Dnorm"
    """front: the cost axis, a lower-is-better metric of the registry (D_norm, CVaR, ...)."""


class FigureMaker:
    """Computes the statistics each figure needs (once each) from a cube and a selection.

    source: a cube path or an opened cube Dataset. ss: its sufficient statistics if already at hand
    (e.g. the TUI's); otherwise they are loaded (cached in the store). progress(description, done, total)
    reports long steps. Colours are fixed by all the cube's algorithms, not only the selected ones.
    """

    def __init__(self, source: str | os.PathLike | xr.Dataset, selection: Selection | None = None,
                 options: PlotOptions | None = None, ss: xr.Dataset | None = None,
                 progress: StepProgress | None = None) -> None:
        from cube import stats

        self.source = source
        self.options = options or PlotOptions()
        if self.options.style not in STYLES:
            raise CubeError(f"unknown style {self.options.style!r}: use {' or '.join(STYLES)}")
        self._progress = progress
        if ss is None:
            ss = stats.load_suffstats(source, background_write=True, progress=self._tick("sufficient statistics"),
                                      cvar_alphas=(self.options.cvar_alpha,))
        self.all_algos = [str(a) for a in ss["algo"].values]
        ss = stats.with_cvar_alpha(ss, self.options.cvar_alpha)
        self.ss = stats.select(ss, selection.check_iterates(ss.sizes["iterate"])) if selection is not None else ss
        marked = stats.not_safe(self.ss["algo"].values, self.options.baseline)
        base = marked[0] if marked else None
        self.options = replace(self.options, baseline=base)
        if self.options.settings is not None:
            stats.require_data(self.ss, self.options.settings)
        self.settings = stats.settings_arg(self.options.settings, self.ss)
        self.colors = algo_colors(self.all_algos, base)
        self.synthetic = bool(self.ss.attrs.get("synthetic"))
        self.means_only = stats.means_only_runs(self.ss)
        """Selected (run, mode) pairs that hold only per-epoch means (imports): no V, D_norm+ or CDF there."""
        self.empty_note = "not available: means only" if self.means_only else "no episodes"
        self._cache: dict[str, Future] = {}
        self._lock = threading.Lock()

    # ------------------------------------------------------------------ helpers
    def _tick(self, what: str) -> Progress | None:
        return step_progress(self._progress, what)

    def _kw(self) -> dict[str, Any]:
        o = self.options
        return {"boot": o.boot, "rng_seed": o.rng_seed, "ci": o.ci}

    def _cached(self, key: str, fn: Callable[[], Any]) -> Any:
        """fn() once per key, also when two threads ask at once (the second waits for the first)."""
        with self._lock:
            fut = self._cache.get(key)
            owner = fut is None
            if owner:
                fut = self._cache[key] = Future()
        if owner:
            try:
                fut.set_result(fn())
            except BaseException as exc:
                fut.set_exception(exc)
                raise
        return fut.result()

    @property
    def cube(self) -> xr.Dataset:
        """The cube restricted to the selected runs (lazy; blocks of up to 30 seeds per dask task)."""
        def open_() -> xr.Dataset:
            from cube.store.read import open_cube

            if isinstance(self.source, xr.Dataset):
                ds = self.source
            else:
                first = open_cube(self.source)
                ds = open_cube(self.source, chunks={"seed": max(1, min(30, first.sizes["seed"]))})
            return ds.sel({d: self.ss[d].values for d in ("algo", "task", "bound", "seed")})

        return self._cached("cube", open_)

    # ------------------------------------------------------------------ statistics
    def cdf(self) -> xr.Dataset:
        from cube import stats

        return self._cached("cdf", lambda: stats.cdf_curves(self.ss, self.settings, progress=self._tick(
            f"bootstrap CDF bands (B={self.options.boot})"), **self._kw()))

    def aggregate(self) -> xr.Dataset:
        from cube import stats

        return self._cached("agg", lambda: stats.aggregate_table(self.ss, self.settings, progress=self._tick(
            f"bootstrap IQM CIs (B={self.options.boot})"), **self._kw()))

    def pois(self) -> list[xr.Dataset]:
        from cube import stats

        def compute() -> list[xr.Dataset]:
            pairs = self.options.pairs or poi_pairs(self.ss["algo"].values, self.options.baseline)
            tick = self._tick(f"probability of improvement (B={self.options.boot})")
            out = []
            for i, (x, y) in enumerate(pairs):
                out.append(stats.probability_of_improvement(self.ss, x, y, self.settings, **self._kw()))
                if tick:
                    tick(i + 1, len(pairs))
            return out

        return self._cached("poi", compute)

    def profiles(self) -> xr.Dataset:
        """Run-level performance profiles of every setting (`cube.stats.profiles.performance_profiles`)."""
        from cube import stats

        return self._cached("profiles", lambda: stats.performance_profiles(self.ss, self.settings, progress=self._tick(
            f"performance-profile bands (B={self.options.boot})"), **self._kw()))

    def front_setting(self) -> str:
        """The setting the front figure draws: final greedy where the selection has it, else the last one."""
        return "final_greedy" if "final_greedy" in self.settings else self.settings[-1]

    def front(self) -> xr.Dataset:
        """The reward-cost front of `front_setting` (`cube.stats.front.reward_cost_front`)."""
        from cube import stats

        o = self.options
        return self._cached("front", lambda: stats.reward_cost_front(
            self.ss, (self.front_setting(),), cost=o.front_cost, boot=o.boot, rng_seed=o.rng_seed,
            baseline=o.baseline or "none", progress=self._tick(f"reward-cost front (B={o.boot})")))

    def env_steps(self) -> xr.DataArray | None:
        return self._cached("env_steps", lambda: self.cube["env_steps"].load() if "env_steps" in self.cube else None)

    def learning_curve(self) -> xr.Dataset:
        from cube.stats.learning_curves import aggregate_learning_curve, steps_differ

        def compute() -> xr.Dataset:
            by = self.options.by
            steps = None
            if by in ("auto", "env_steps"):
                steps = self.env_steps()
                if by == "auto":
                    by = "env_steps" if steps_differ(steps) else "iterate"
            return aggregate_learning_curve(self.ss, boot=self.options.boot, rng_seed=self.options.rng_seed,
                                            ci=self.options.ci, by=by, env_steps=steps,
                                            progress=self._tick(f"learning-curve bands (B={self.options.boot})"))

        return self._cached("curve", compute)

    def training(self) -> xr.Dataset:
        from cube import stats
        from cube.stats import curves

        return self._cached("training", lambda: curves.training_curves(
            stats.iterate_metrics(self.ss, "train"), self.options.window, ("R", "C")))

    def multipliers(self) -> xr.Dataset | None:
        """Seed mean/std curves of `options.var` (the multiplier by default); CubeError naming the variables
        the selection has when another variable is asked for and it has no values."""
        return self._cached("mult", self._read_multipliers)

    def _read_multipliers(self) -> xr.Dataset | None:
        from cube.stats import curves

        var = self.options.var
        out = curves.multiplier_curves(self.cube, self.options.window, var)
        if var != "multiplier" and (out is None or not np.isfinite(out["mult_mean"].values).any()):
            have = curves.iterate_var_names(self.cube, with_values=True)
            what = "no values in this selection" if out is not None else "no such per-iterate variable"
            raise CubeError(f"--var {var}: {what}; the selection has values of {', '.join(have) or 'none'}")
        return out

    def final_costs(self) -> xr.DataArray | None:
        """Costs of each run's final expl and greedy evaluation: dims (algo, task, bound, seed, episode,
        mode); NaN = no episode; None when no run has final evaluations. One read of the cube per distinct
        final iterate (usually one)."""
        return self._cached("final", self._read_final_costs)

    def _read_final_costs(self) -> xr.DataArray | None:
        from cube.stats.curves import final_episode_costs

        return final_episode_costs(self.cube["cost"], self.ss["n"], progress=self._tick("final evaluation episodes"))

    # ------------------------------------------------------------------ figures
    def figure(self, kind: str, *, task: str | None = None, xmax: float | None | str = "option",
               bound: float | None = None) -> Figure:
        """One figure of `kind` (KINDS); `task`/`bound` restrict curves and hist to one task / condition."""
        o = self.options
        base, style = o.baseline, o.style
        if kind == "cdf":
            return cdf_figure(self.cdf(), o.xmax if xmax == "option" else xmax, base, self.colors, style,
                              self.empty_note)
        if kind == "intervals":
            return intervals_figure(self.aggregate(), base, self.colors, style, self.empty_note)
        if kind == "poi":
            return poi_figure(self.pois(), self.colors, style, base)
        if kind == "aggregate-curve":
            return aggregate_curve_figure(self.learning_curve(), base, self.colors, style, self.empty_note)
        if kind == "profile":
            return profile_figure(self.profiles(), self.settings, base, self.colors, style)
        if kind == "front":
            return front_figure(self.front(), self.front_setting(), None, base, self.colors, style)
        if kind == "curves":
            tc, mult = self.training(), self.multipliers()
            sel = condition_selection(tc, task, bound)
            tc = tc.sel(sel)
            mult = mult.sel(sel) if mult is not None else None
            return curves_figure(tc, mult, base, self.colors, style, o.window, self.synthetic)
        if kind == "hist":
            costs = self.final_costs()
            if costs is None:
                raise CubeError("no final evaluation episodes (modes expl/greedy) in the selection: "
                                "nothing to histogram; evaluate the final policies first")
            costs = costs.sel(condition_selection(costs, task, bound))
            return hist_figure(hist_panels(costs, o.bins, own_scale=(base,) if base else ()), base, self.colors,
                               style, self.synthetic,
                               [str(a) for a in self.ss["algo"].values])
        raise CubeError(f"unknown figure {kind!r}: use one of {', '.join(KINDS)} or all")

    def all_figures(self) -> Iterator[tuple[str, Figure]]:
        """(file stem, figure) for the whole set: cdf (x cut at --xmax, default 2), cdf_full (A.1),
        curves_<task> and hist_<task> per task, intervals, poi (with >= 2 algorithms), aggregate_curve,
        profile and front. Figures whose data the selection lacks (no final evaluations, one algorithm) are
        left out."""
        xmax = self.options.xmax if self.options.xmax is not None else 2.0
        yield "cdf", self.figure("cdf", xmax=xmax)
        yield "cdf_full", self.figure("cdf", xmax=None)
        for t in self.ss["task"].values:
            yield f"curves_{safe_name(t)}", self.figure("curves", task=str(t))
        if self.final_costs() is not None:
            for t in self.ss["task"].values:
                yield f"hist_{safe_name(t)}", self.figure("hist", task=str(t))
        yield "intervals", self.figure("intervals")
        if self.ss.sizes["algo"] > 1:
            yield "poi", self.figure("poi")
        yield "aggregate_curve", self.figure("aggregate-curve")
        yield "profile", self.figure("profile")
        yield "front", self.figure("front")


def condition_selection(ds: xr.Dataset | xr.DataArray, task: str | None, bound: float | None) -> dict[str, list]:
    sel: dict[str, list] = {}
    if task is not None:
        if task not in ds["task"].values:
            raise CubeError(f"unknown task {task}: the selection has {', '.join(map(str, ds['task'].values))}")
        sel["task"] = [task]
    if bound is not None:
        hits = [b for b in ds["bound"].values if same_bound(b, bound)]
        if not hits:
            raise CubeError(f"unknown bound {bound:g}: "
                            f"the selection has {', '.join(f'{b:g}' for b in ds['bound'].values)}")
        sel["bound"] = hits[:1]
    return sel


def safe_name(name: Any) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", str(name)) or "_"
