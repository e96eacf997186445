"""The data model behind the TUI: the opened cube, its sufficient statistics, and what each view derives
from them for a selection (`saferl_tui.selection.UISelection`).

Every method that reads the store or reduces data is blocking and is meant to run inside a Textual
thread worker; nothing here imports textual. Results are cached by (view, selection, parameters) in a
`saferl_tui.derived.DerivedCache`, so switching views or going back to an earlier selection re-renders
without recomputation.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import xarray as xr

from cube import stats
from cube.compute import Cancelled, FractionProgress, fraction_progress
from cube.errors import CubeError
from cube.schema import RUN_DIMS, RUN_STATUS
from cube.stats import curves
from cube.stats.metrics import SETTINGS
from cube.stats.subset import select_runs
from cube.stats.suffstats import load_suffstats_at
from cube.store import summary
from cube.store.location import is_remote
from saferl_tui.derived import DerivedCache
from saferl_tui.selection import CubeInfo, UISelection, info_of

_NETCDF_LOCK = threading.RLock()


class LoadCancelled(Cancelled):
    """Raised by a progress callback to abort loading (the app is closing); cube's readers let it through."""


def load_model(model: CubeModel, is_cancelled: Callable[[], bool], report: FractionProgress,
               prepare: Callable[[FractionProgress], None] | None = None) -> tuple[CubeInfo | None, str | None]:
    """Load `model` from a worker thread (the one load path of the app): `prepare(progress)` first (e.g.
    build the demo cube), then the cube and its statistics, reporting to `report(fraction, text)` and
    stopping once `is_cancelled()`. Returns (info, None), (None, one error line), or (None, None) when
    cancelled; never raises for unreadable input."""

    def progress(fraction: float, text: str) -> None:
        if is_cancelled():  # app closing or another cube opened: abort the pass
            raise LoadCancelled
        report(fraction, text)

    try:
        if prepare is not None:
            prepare(progress)
        info = model.load(progress)
    except LoadCancelled:
        return None, None
    except CubeError as exc:
        return None, str(exc)
    except Exception as exc:  # the app must not crash on any unreadable input
        return None, f"cannot open {model.path}: {type(exc).__name__}: {exc}"
    return (None, None) if is_cancelled() else (info, None)


class CubeModel:
    """Opened cube + sufficient statistics + cache of derived statistics (thread-safe)."""

    def __init__(self, path: str | Path, boot: int = 2000, rng_seed: int = 0, stall_s: float = 600.0,
                 clock: Callable[[], float] = time.time) -> None:
        self.path = str(path)
        self.remote = is_remote(self.path)  # a published snapshot at a URL: read-only, nothing to follow
        self.stall_s = float(stall_s)
        """Seconds without a write after which a running run is stalled (Status view)."""
        self.clock = clock
        """The time now (POSIX seconds): the Status view's durations and the header's update time."""
        self._status_reader: Any = None
        self.boot = int(boot)
        self.rng_seed = int(rng_seed)
        self.ds: xr.Dataset | None = None
        self.ss: xr.Dataset | None = None
        self.ss_small: xr.Dataset | None = None
        self.info: CubeInfo | None = None
        self.seqs: np.ndarray | None = None
        """Every run's write sequence the statistics are at (None: the store has none; `follow.Follower`)."""
        self.derived = DerivedCache()
        """Results derived from the statistics (renewed by `update`)."""
        self._lock = threading.Lock()  # the run-status reader

    # ------------------------------------------------------------------ loading
    def load(self, progress: FractionProgress | None = None) -> CubeInfo:
        """Open and validate the cube, then load (or compute and cache) its sufficient statistics.

        Raises CubeError (one line) for a missing path or a non-cube, `DamagedStoreError` for a corrupt store.
        """
        from cube import open_cube

        if not self.remote and not Path(self.path).exists():
            raise CubeError(f"{self.path} does not exist: give the path of a results cube (.zarr or .nc)")
        ds = self._read(lambda: open_cube(self.path))  # a damaged store: one DamagedStoreError line
        self.ds = ds
        cancelled: list[bool] = []

        def watched(fraction: float, text: str) -> None:
            try:
                if progress is not None:
                    progress(fraction, text)
            except LoadCancelled:
                cancelled.append(True)  # remembered: the statistics code may wrap the exception
                raise

        try:
            self.ss, self.seqs = self._read(lambda: load_suffstats_at(
                self.path, progress=fraction_progress(watched, "reading episodes"), background_write=True))
            self.ss_small = self.ss.drop_vars("le", errors="ignore")
        except Exception:
            if cancelled:  # however the statistics code passed it on
                raise LoadCancelled from None
            raise
        self.info = info_of(self.path, ds)
        return self.info

    def update(self, seqs_after: np.ndarray | None) -> np.ndarray:
        """Bring the statistics up to date with the store (`cube.stats.suffstats.update_suffstats`: only the
        runs whose write sequence moved are read again; a grown grid adds runs) and forget every derived
        result. Returns the positions (n, 4) of the runs read again, in the new grid. Blocking (a worker);
        CubeError (one line) when the store is gone or damaged, the model then left as it was."""
        from cube import open_cube
        from cube.stats.suffstats import update_suffstats

        assert self.ss is not None, "load() first"
        ss, changed, at = update_suffstats(self.ss, self.path, self.seqs, seqs_after=seqs_after,
                                           background_write=True)
        ds = open_cube(self.path)

        def swap() -> None:
            self.ds, self.ss, self.seqs = ds, ss, at
            self.ss_small = ss.drop_vars("le", errors="ignore")
            self.info = info_of(self.path, ds)

        self.derived.renew(swap, keep=lambda key: key[0] == "reference")  # published numbers do not change
        return changed

    def run_statuses(self, sel: UISelection) -> tuple[list, float]:
        """(every selected run's `cube.store.runstatus.RunStatus`, the time it is of): one
        `RunStatusReader` kept (stored facts re-read only for runs whose sequence moved; claims and last
        writes at each call), stalled after `stall_s` seconds, the time from `clock()` (tests inject one)."""
        from cube.store.runstatus import RunStatusReader

        self._check(sel)
        if not self.remote and not Path(self.path).exists():
            raise CubeError(f"{self.path} is gone (deleted or moved away): there is no run status to show")
        if not self.remote and not Path(self.path).is_dir():
            raise CubeError(f"{self.path} is a netCDF file: run status is read from a zarr store being written")
        with self._lock:
            if self._status_reader is None:
                self._status_reader = RunStatusReader(self.path, self.stall_s)
            reader = self._status_reader
        now = self.clock()
        runs = reader.read(now=now)
        from cube.render.viewrows import selected_statuses  # as `saferl render` selects them

        return selected_statuses(runs, sel.cube_selection()), now

    @property
    def following_worthwhile(self) -> bool:
        """Whether some run is partial or pending (follow mode starts on) in a store with write sequences."""
        if self.ss is None or self.seqs is None or "run_status" not in self.ss:
            return False
        return bool((np.asarray(self.ss["run_status"].values) != RUN_STATUS["complete"]).any())

    # ------------------------------------------------------------------ selections
    def _check(self, sel: UISelection) -> None:
        if not sel.n_runs:
            raise CubeError("the selection is empty: select at least one algorithm, task, bound and seed")
        assert self.ss is not None and self.ss_small is not None, "load() first"

    def _ss_small(self, sel: UISelection, algos: tuple[str, ...] | None = None) -> xr.Dataset:
        """Selected sufficient statistics without the CDF counts (all that tables need; cheap to copy)."""
        self._check(sel)
        algos = sel.algos if algos is None else algos
        key = ("ss_small", algos, *_sel_key(sel)[1:])
        return self.derived.recent(key, lambda: stats.select(self.ss_small, replace(sel, algos=algos).cube_selection()))

    # ------------------------------------------------------------------ derived statistics
    def _setting_key(self, sel: UISelection, setting: str) -> tuple:
        """What a per-setting result depends on besides the algorithms."""
        return (sel.tasks, sel.bounds, sel.seeds, sel.iterates if setting == "train" else None, setting)

    def aggregate(self, sel: UISelection, settings: tuple[str, ...] = SETTINGS) -> xr.Dataset:
        """``stats.aggregate_table`` of the selection for ``settings`` (train restricted to the iterates).

        Cached per setting and algorithm (`DerivedCache.by_algo`): toggling algorithms or switching the
        setting reuses every piece already derived.
        """
        self._check(sel)
        parts = []
        for s in settings:
            key = ("aggregate", *self._setting_key(sel, s), self.boot, self.rng_seed)
            parts.append(self.derived.by_algo(key, sel.algos, lambda algos, s=s: stats.aggregate_table(
                self._ss_small(sel, algos), (s,), boot=self.boot, rng_seed=self.rng_seed, ci=0.95)))
        return _concat_settings(parts).transpose("algo", "setting", "metric")

    def gap(self, sel: UISelection) -> xr.Dataset:
        """``stats.greedy_expl_gap`` of the selection (final settings only: iterates do not matter),
        cached per algorithm (each algorithm's bootstrap is seeded by its name)."""
        self._check(sel)
        key = ("gap", sel.tasks, sel.bounds, sel.seeds, self.boot, self.rng_seed)
        return self.derived.by_algo(key, sel.algos, lambda algos: stats.greedy_expl_gap(
            self._ss_small(sel, algos), boot=self.boot, rng_seed=self.rng_seed, ci=0.95))

    def improvement(self, sel: UISelection, base: str) -> xr.Dataset:
        """P(algo improves on ``base``) per metric and setting for every other selected algorithm
        (``stats.probability_of_improvement``: Mann-Whitney over seeds per condition, averaged over the
        conditions, stratified-bootstrap 95% CI). Dims (algo, setting, metric): value, ci_low, ci_high.
        Cached per pair of algorithms."""
        self._check(sel)
        parts = []
        for a in (x for x in sel.algos if x != base):
            key = ("improvement", a, base, *self._setting_key(sel, "train"), self.boot, self.rng_seed)
            parts.append(self.derived.get(key, lambda a=a: stats.probability_of_improvement(
                self._ss_small(sel, (a, base)), a, base, SETTINGS, boot=self.boot, rng_seed=self.rng_seed,
                ci=0.95)[["value", "ci_low", "ci_high"]].expand_dims(algo=[a])))
        if not parts:
            raise CubeError(f"no algorithm besides the baseline {base} is selected")
        return xr.concat(parts, dim="algo")

    def run_status(self, sel: UISelection) -> xr.DataArray:
        """Status code per selected run (``cube.schema.RUN_STATUS``; 2 = complete when the cube has none)."""
        self._check(sel)
        key = ("run_status", sel.algos, sel.tasks, sel.bounds, sel.seeds)

        def compute() -> xr.DataArray:
            rv = self._run_vars(("run_status",))
            if "run_status" not in rv:
                shape = (len(sel.algos), len(sel.tasks), len(sel.bounds), len(sel.seeds))
                return xr.DataArray(np.full(shape, RUN_STATUS["complete"]), dims=RUN_DIMS,
                                    coords={"algo": list(sel.algos), "task": list(sel.tasks),
                                            "bound": list(sel.bounds), "seed": list(sel.seeds)})
            return select_runs(rv, sel.cube_selection())["run_status"].transpose(*RUN_DIMS).load()

        return self.derived.get(key, compute)

    def incomplete(self, sel: UISelection) -> dict[tuple[str, str, float], int]:
        """Number of incomplete (partial or pending) runs per (algo, task, bound) of the selection (only
        conditions that have some)."""
        st = self.run_status(sel)
        bad = (np.asarray(st.values) != RUN_STATUS["complete"]).sum(axis=-1)
        out = {}
        for idx in zip(*np.nonzero(bad), strict=True):
            a, t, b = idx
            out[(str(st["algo"].values[a]), str(st["task"].values[t]), float(st["bound"].values[b]))] = int(bad[idx])
        return out

    def conditions(self, sel: UISelection, settings: tuple[str, ...] = SETTINGS) -> xr.Dataset:
        """``stats.condition_table`` of the selection for ``settings`` (cached per setting and algorithm)."""
        self._check(sel)
        parts = []
        for s in settings:
            key = ("conditions", *self._setting_key(sel, s))
            parts.append(self.derived.by_algo(key, sel.algos, lambda algos, s=s: stats.condition_table(
                self._ss_small(sel, algos), (s,))))
        return _concat_settings(parts)

    def honest(self, sel: UISelection, setting: str) -> stats.HonestTables:
        """``stats.honest_tables`` of one setting (honest intervals of V, the tier at their bound, the claim),
        both parts, cached per selection."""
        self._check(sel)
        key = ("honest", sel.algos, *self._setting_key(sel, setting), self.boot, self.rng_seed)
        return self.derived.get(key, lambda: stats.honest_tables(self._ss_small(sel), (setting,), boot=self.boot,
                                                                 rng_seed=self.rng_seed, ci=0.95))

    def aggregate_honest(self, sel: UISelection, settings: tuple[str, ...] = SETTINGS) -> xr.Dataset:
        """`aggregate` with the honest interval of V, the tier at its bound and the claim beside it
        (``stats.with_honest``)."""
        agg = self.aggregate(sel, settings)
        honest = _concat_settings([self.honest(sel, s).aggregate for s in settings])
        return stats.with_honest(agg, honest)

    def conditions_honest(self, sel: UISelection, setting: str) -> xr.Dataset:
        """One setting's condition table with the honest interval of V and the claims beside it."""
        return stats.with_honest(self.conditions(sel, (setting,)), self.honest(sel, setting).conditions)

    def profiles(self, sel: UISelection, setting: str) -> xr.Dataset:
        """``stats.performance_profiles`` of one setting (their thresholds span every selected algorithm's
        runs, so the result is cached per selection, not per algorithm)."""
        self._check(sel)
        key = ("profiles", sel.algos, *self._setting_key(sel, setting), self.boot, self.rng_seed)
        return self.derived.get(key, lambda: stats.performance_profiles(
            self._ss_small(sel), (setting,), boot=self.boot, rng_seed=self.rng_seed, ci=0.95))

    def front(self, sel: UISelection, setting: str, cost: str = "Dnorm") -> xr.Dataset:
        """``stats.reward_cost_front`` of one setting, every selected task (a front compares algorithms:
        cached per selection)."""
        self._check(sel)
        key = ("front", sel.algos, *self._setting_key(sel, setting), cost, self.boot, self.rng_seed)
        return self.derived.get(key, lambda: stats.reward_cost_front(
            self._ss_small(sel), (setting,), cost=cost, boot=self.boot, rng_seed=self.rng_seed, baseline="auto"))

    def plan(self, sel: UISelection, setting: str) -> xr.Dataset:
        """``stats.plan_seeds`` of one setting (seeds per condition for a CI half-width of 0.05 of each
        cost metric's IQM), cached per algorithm (each draws its own stream)."""
        self._check(sel)
        key = ("plan", *self._setting_key(sel, setting), self.boot, self.rng_seed)
        return self.derived.by_algo(key, sel.algos, lambda algos: stats.plan_seeds(
            self._ss_small(sel, algos), (setting,), boot=self.boot, rng_seed=self.rng_seed, ci=0.95))

    def plan_line(self, sel: UISelection, setting: str) -> str:
        """`stats.plan_footer` of the safe-RL algorithms of the selection (all when every one is not safe)."""
        seeds = self.plan(sel, setting)
        safe = [a for a in sel.algos if a not in sel.not_safe]
        return stats.plan_footer(seeds.sel(algo=safe) if safe else seeds, setting)

    def reference_aggregate(self, sel: UISelection) -> xr.Dataset:
        """The aggregate table beside the reference `sel.reference` (`cube.stats.reference.compare_aggregate`);
        CubeError (one line) when the reference has none of the selected labels."""
        from cube.stats.reference import compare_aggregate

        ref = self._reference(sel.reference)
        return compare_aggregate(self.aggregate(sel, SETTINGS), ref.aggregate).assign_attrs(reference=sel.reference)

    def reference_conditions(self, sel: UISelection, setting: str) -> xr.Dataset:
        """One setting's condition table beside the reference (`compare_conditions`); CubeError when the
        reference has none of the selected labels (e.g. no per-condition numbers for final expl)."""
        from cube.stats.reference import compare_conditions

        ref = self._reference(sel.reference)
        return compare_conditions(self.conditions(sel, (setting,)), ref.conditions).assign_attrs(
            reference=sel.reference)

    def _reference(self, name: str | None):
        from cube.io.reference import load_reference

        if name is None:
            raise CubeError("no reference selected: press R to show the paper's numbers")
        return self.derived.get(("reference", name), lambda: load_reference(name))

    def cdf(self, sel: UISelection, settings: tuple[str, ...] = SETTINGS) -> xr.Dataset:
        """``stats.cdf_curves`` of the selection for ``settings`` (cached per setting and algorithm).

        The selection of the full statistics (with the CDF counts, the bulk of the memory) is made
        for the algorithms not derived yet and not kept.
        """
        self._check(sel)
        parts = []
        for s in settings:
            key = ("cdf", *self._setting_key(sel, s), self.boot, self.rng_seed)

            def compute(algos: tuple[str, ...], s: str = s) -> xr.Dataset:
                full = stats.select(self.ss, replace(sel, algos=algos).cube_selection())
                return stats.cdf_curves(full, (s,), boot=self.boot, rng_seed=self.rng_seed, ci=0.95)

            parts.append(self.derived.by_algo(key, sel.algos, compute))
        return _concat_settings(parts)

    def iterate_metrics(self, sel: UISelection, mode: str = "train") -> xr.Dataset:
        """``stats.iterate_metrics`` of the selection for ``mode`` (train, expl, greedy), all iterates."""
        full = replace(sel, iterates=None, setting="train")
        key = ("iterate_metrics", _sel_key(full), mode)
        return self.derived.get(key, lambda: stats.iterate_metrics(self._ss_small(full), mode=mode))

    def learning_curve(self, sel: UISelection) -> xr.Dataset:
        """``stats.aggregate_learning_curve`` of the selection (IQM over conditions per training iterate,
        bootstrap band), cached per selection."""
        self._check(sel)
        key = ("learning", _sel_key(sel), self.boot, self.rng_seed)
        return self.derived.get(key, lambda: stats.aggregate_learning_curve(
            stats.select(self.ss, sel.cube_selection()), boot=self.boot, rng_seed=self.rng_seed))

    def curves(self, sel: UISelection, window: int, mode: str = "train", var: str = "multiplier"
               ) -> tuple[xr.Dataset, xr.Dataset | None, xr.DataArray | None]:
        """Smoothed seed mean/std of R and C per iterate of ``mode`` episodes (train; or expl / greedy at
        the evaluated iterates, NaN elsewhere), of the per-iterate variable ``var`` (the multiplier by
        default; None if absent), and the seed-mean env steps per iterate (None if the cube has none)."""
        key = ("curves", _sel_key(replace(sel, iterates=None, setting="train")), int(window), mode, var)

        def compute() -> tuple[xr.Dataset, xr.Dataset | None, xr.DataArray | None]:
            from cube.render.viewrows import curve_data  # what `saferl render` derives too

            run = select_runs(self._run_vars((var, "env_steps")), sel.cube_selection())
            return curve_data(self.iterate_metrics(sel, mode), run, window, var, mode)

        return self.derived.get(key, compute)

    def iterate_vars(self, sel: UISelection) -> tuple[str, ...]:
        """The per-iterate variables with a value in the selection's runs, multiplier first
        (``curves.iterate_var_names``): what the Curves view's third plot can show. Reads each of them once."""
        assert self.ds is not None, "load() first"
        names = curves.iterate_var_names(self.ds)
        key = ("iterate_vars", _sel_key(replace(sel, iterates=None, setting="train")))
        return self.derived.get(key, lambda: curves.iterate_var_names(
            select_runs(self._run_vars(names), sel.cube_selection()), with_values=True))

    def _raw(self) -> xr.Dataset:
        """The cube opened without dask (``open_cube(lazy=False)``, the one read path, on the grid of the
        loaded cube): reads of many one-run chunks go straight to zarr / netCDF, several times faster than
        through dask."""
        assert self.ds is not None, "load() first"

        def open_raw() -> xr.Dataset:
            from cube import open_cube

            if not self.remote and not Path(self.path).is_dir():  # netCDF: one dask-backed handle (HDF5: no threads)
                assert self.ds is not None
                return self.ds
            return open_cube(self.path, check=False, lazy=False, sizes=self.ds.encoding.get("saferl_grid"))

        return self.derived.get(("raw",), open_raw)

    def _run_vars(self, names: tuple[str, ...]) -> xr.Dataset:
        """Those of ``names`` the cube has (per-run / per-iterate variables), read once and kept."""
        assert self.ds is not None, "load() first"
        have = tuple(n for n in names if n in self.ds.data_vars)
        return self.derived.get(("run_vars", have), lambda: self._read(lambda: self._raw()[list(have)].load()))

    def _read(self, fn: Callable[[], Any]) -> Any:
        """Run a store read; reads of netCDF files are serialised (the HDF5 library is not thread-safe
        and a cancelled worker may still be reading when the next one starts)."""
        if self.remote or Path(self.path).is_dir():  # zarr reads are thread-safe
            return fn()
        with _NETCDF_LOCK:
            return fn()

    def final_costs(self, sel: UISelection, task: str, bound: float) -> dict:
        """Final-iterate episodic costs of one condition per algorithm and mode (``curves.final_costs``)."""
        key = ("final_costs", sel.algos, sel.seeds, task, float(bound))
        self._check(sel)
        return self.derived.get(key, lambda: self._read(lambda: curves.final_costs(
            self._raw(), self.ss, task, bound, algos=sel.algos, seeds=sel.seeds)))

    def histograms(self, sel: UISelection, task: str, bound: float, bins: int = 20) -> dict:
        """Final-episode cost histograms of one condition: {algo: `curves.HistPanel`}, from the one
        histogram engine the figures use (`curves.hist_panels`: edges shared by the algorithms, the not-safe
        ones on a scale of their own)."""
        self._check(sel)
        key = ("hist", sel.algos, sel.seeds, task, float(bound), bins, sel.not_safe)

        def compute() -> dict:
            from cube.render.views import condition_histograms

            return condition_histograms(self._raw()["cost"], self.ss["n"], task, bound, sel.algos, sel.seeds, bins,
                                        sel.not_safe)

        return self.derived.get(key, lambda: self._read(compute))

    def runs(self, sel: UISelection) -> list[dict]:
        """The run manifest rows of the selection."""
        self._check(sel)
        key = ("runs", sel.algos, sel.tasks, sel.bounds, sel.seeds)
        run_vars = ("run_status", "run_manifest", "env_steps")
        return self.derived.get(key, lambda: summary.run_rows(select_runs(self._run_vars(run_vars),
                                                                          sel.cube_selection())))


def _concat_settings(parts: list[xr.Dataset]) -> xr.Dataset:
    """Join per-setting results along ``setting``."""
    return xr.concat(parts, dim="setting") if len(parts) > 1 else parts[0]


def _sel_key(sel: UISelection) -> tuple:
    """Cache key of the parts of a selection that change statistics (not setting or baseline)."""
    return (sel.algos, sel.tasks, sel.bounds, sel.seeds, sel.iterates)
