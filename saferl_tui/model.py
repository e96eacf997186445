"""The data model behind the TUI: the opened cube, its sufficient statistics, and a cache of derived
statistics per selection.

Every method that reads the store or reduces data is blocking and is meant to run inside a Textual
thread worker; nothing here imports textual. Results are cached by (view, selection, parameters) so
switching views or going back to an earlier selection re-renders without recomputation.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Hashable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np
import xarray as xr

from cube import stats, views
from cube.errors import CubeError
from cube.selection import Selection

SETTINGS = ("train", "final_expl", "final_greedy")
SETTING_LABELS = {"train": "Train", "final_expl": "Final expl", "final_greedy": "Final greedy"}
METRICS = ("R", "C", "Dnorm", "V", "Dplus")
METRIC_LABELS = {"R": "R̄", "C": "C̄", "Dnorm": "D_norm", "V": "V", "Dplus": "D_norm+"}
HIGHER_IS_BETTER = {"R"}


@dataclass(frozen=True)
class UISelection:
    """Everything the user selected: labels per run dim (explicit tuples), the setting, the training
    iterates (None, j or (lo, hi)) and the baseline algorithm (None for no baseline)."""

    algos: tuple[str, ...]
    tasks: tuple[str, ...]
    bounds: tuple[float, ...]
    seeds: tuple[int, ...]
    setting: str = "train"
    iterates: None | int | tuple[int, int] = None
    baseline: str | None = None

    def cube_selection(self) -> Selection:
        """The ``cube.selection.Selection`` for the statistics API."""
        return Selection(algos=self.algos, tasks=self.tasks, bounds=self.bounds, seeds=self.seeds,
                         iterates=self.iterates)

    @property
    def n_runs(self) -> int:
        """Number of selected runs (algos x tasks x bounds x seeds)."""
        return len(self.algos) * len(self.tasks) * len(self.bounds) * len(self.seeds)

    @property
    def final_setting(self) -> str:
        """The final setting shown next to Train in the Summary (greedy unless expl is selected)."""
        return "final_expl" if self.setting == "final_expl" else "final_greedy"

    def describe(self) -> str:
        """One line: sizes of the selection, the setting and iterates."""
        it = "all" if self.iterates is None else (
            f"{self.iterates}" if isinstance(self.iterates, int) else f"{self.iterates[0]}:{self.iterates[1]}")
        return (f"{len(self.algos)} algos × {len(self.tasks)} tasks × {len(self.bounds)} bounds × "
                f"{len(self.seeds)} seeds = {self.n_runs} runs · {SETTING_LABELS[self.setting]} · iterates {it}")


@dataclass
class CubeInfo:
    """Labels and attributes of an opened cube (what the selection panel offers)."""

    path: str
    algos: tuple[str, ...]
    tasks: tuple[str, ...]
    bounds: tuple[float, ...]
    seeds: tuple[int, ...]
    n_iterates: int
    synthetic: bool
    attrs: dict = field(default_factory=dict)

    def default_selection(self) -> UISelection:
        """Everything selected, setting train, PPO as baseline when present."""
        baseline = "ppo" if "ppo" in self.algos else None
        return UISelection(self.algos, self.tasks, self.bounds, self.seeds, baseline=baseline)


ProgressFn = Callable[[float, str], None]


class CubeModel:
    """Opened cube + sufficient statistics + cache of derived statistics (thread-safe)."""

    def __init__(self, path: str | Path, boot: int = 2000, rng_seed: int = 0) -> None:
        self.path = str(path)
        self.boot = int(boot)
        self.rng_seed = int(rng_seed)
        self.ds: xr.Dataset | None = None
        self.ss: xr.Dataset | None = None
        self.info: CubeInfo | None = None
        self._cache: dict[Hashable, Any] = {}
        self._lock = threading.Lock()

    # ------------------------------------------------------------------ loading
    def load(self, progress: ProgressFn | None = None) -> CubeInfo:
        """Open and validate the cube, then load (or compute and cache) its sufficient statistics.

        Raises CubeError (one line) for a missing path, a non-cube or a corrupt store.
        """
        from cube import open_cube

        if not Path(self.path).exists():
            raise CubeError(f"{self.path} does not exist: give the path of a results cube (.zarr or .nc)")
        try:
            ds = open_cube(self.path)
        except CubeError:
            raise
        except Exception as exc:  # corrupt stores raise anything from zarr/xarray internals
            raise CubeError(f"cannot open {self.path} as a results cube ({type(exc).__name__}: {exc})") from None
        self.ds = ds
        try:
            self.ss = stats.load_suffstats(self.path, progress=_progress_adapter(progress))
        except CubeError:
            raise
        except Exception as exc:
            raise CubeError(f"cannot read the episodes of {self.path} ({type(exc).__name__}: {exc})") from None
        self.info = CubeInfo(
            path=self.path,
            algos=tuple(str(a) for a in ds["algo"].values),
            tasks=tuple(str(t) for t in ds["task"].values),
            bounds=tuple(float(b) for b in ds["bound"].values),
            seeds=tuple(int(s) for s in ds["seed"].values),
            n_iterates=int(ds.sizes["iterate"]),
            synthetic=bool(ds.attrs.get("synthetic", False)),
            attrs=dict(ds.attrs),
        )
        return self.info

    # ------------------------------------------------------------------ cache
    def _cached(self, key: Hashable, fn: Callable[[], Any]) -> Any:
        with self._lock:
            if key in self._cache:
                return self._cache[key]
        value = fn()
        with self._lock:
            self._cache[key] = value
        return value

    def is_cached(self, key: Hashable) -> bool:
        """Whether a derived result is already in the cache."""
        with self._lock:
            return key in self._cache

    def _ss(self, sel: UISelection) -> xr.Dataset:
        """Sufficient statistics of the selection (CubeError when nothing is left)."""
        if not sel.n_runs:
            raise CubeError("the selection is empty: select at least one algorithm, task, bound and seed")
        assert self.ss is not None, "load() first"
        key = ("ss", _sel_key(sel))
        return self._cached(key, lambda: stats.select(self.ss, sel.cube_selection()))

    # ------------------------------------------------------------------ derived statistics
    def aggregate(self, sel: UISelection) -> xr.Dataset:
        """``stats.aggregate_table`` for all three settings (train restricted to the iterates)."""
        key = ("aggregate", _sel_key(sel), self.boot, self.rng_seed)
        return self._cached(key, lambda: stats.aggregate_table(self._ss(sel), SETTINGS, boot=self.boot,
                                                                rng_seed=self.rng_seed, ci=0.95))

    def conditions(self, sel: UISelection) -> xr.Dataset:
        """``stats.condition_table`` for all three settings."""
        key = ("conditions", _sel_key(sel))
        return self._cached(key, lambda: stats.condition_table(self._ss(sel), SETTINGS))

    def cdf(self, sel: UISelection) -> xr.Dataset:
        """``stats.cdf_curves`` for all three settings."""
        key = ("cdf", _sel_key(sel), self.boot, self.rng_seed)
        return self._cached(key, lambda: stats.cdf_curves(self._ss(sel), SETTINGS, boot=self.boot,
                                                           rng_seed=self.rng_seed, ci=0.95))

    def iterate_metrics(self, sel: UISelection) -> xr.Dataset:
        """``stats.iterate_metrics`` (train mode) of the selection, all iterates."""
        full = replace(sel, iterates=None, setting="train")
        key = ("iterate_metrics", _sel_key(full))
        return self._cached(key, lambda: stats.iterate_metrics(self._ss(full), mode="train"))

    def curves(self, sel: UISelection, window: int) -> tuple[xr.Dataset, xr.Dataset | None]:
        """Smoothed seed mean/std of R and C per iterate, and of the multiplier (None if absent)."""
        key = ("curves", _sel_key(replace(sel, iterates=None, setting="train")), int(window))

        def compute() -> tuple[xr.Dataset, xr.Dataset | None]:
            im = self.iterate_metrics(sel)
            mult = views.multiplier_curves(self._cube(sel), window)
            return views.training_curves(im, window), mult

        return self._cached(key, compute)

    def histograms(self, sel: UISelection, task: str, bound: float, bins: int = 20) -> tuple[np.ndarray, dict, dict]:
        """Final-episode cost histograms of one condition: (edges, counts, raw costs)."""
        key = ("hist", sel.algos, sel.seeds, task, float(bound), bins)

        def compute() -> tuple[np.ndarray, dict, dict]:
            costs = views.final_costs(self._cube(sel), task, bound)
            edges, counts = views.cost_histograms(costs, bins=bins)
            return edges, counts, costs

        return self._cached(key, compute)

    def runs(self, sel: UISelection) -> list[dict]:
        """The run manifest rows of the selection."""
        key = ("runs", sel.algos, sel.tasks, sel.bounds, sel.seeds)
        return self._cached(key, lambda: views.run_rows(self._cube(sel)))

    def _cube(self, sel: UISelection) -> xr.Dataset:
        if not sel.n_runs:
            raise CubeError("the selection is empty: select at least one algorithm, task, bound and seed")
        assert self.ds is not None, "load() first"
        return views.select_cube(self.ds, sel.cube_selection())


def _sel_key(sel: UISelection) -> tuple:
    """Cache key of the parts of a selection that change statistics (not setting or baseline)."""
    return (sel.algos, sel.tasks, sel.bounds, sel.seeds, sel.iterates)


def _progress_adapter(progress: ProgressFn | None) -> Any:
    """Adapt a ``progress(fraction, text)`` callback to what ``stats.load_suffstats`` calls."""
    if progress is None:
        return None

    def call(*args: Any, **kwargs: Any) -> None:
        done = kwargs.get("done", args[0] if args else 0)
        total = kwargs.get("total", args[1] if len(args) > 1 else None)
        try:
            frac = float(done) / float(total) if total else float(done)
        except (TypeError, ValueError):
            frac = 0.0
        progress(min(max(frac, 0.0), 1.0), "reading episodes")

    return call


def export_text(kind: str, obj: Any, fmt: str, baseline: str | None) -> str:
    """``cube.export.render`` for the kinds it knows (aggregate, conditions, cdf)."""
    from cube import export

    return export.render(obj, kind=kind, fmt=fmt, baseline=baseline)
