"""The data model behind the TUI: the opened cube, its sufficient statistics, and a cache of derived
statistics per selection.

Every method that reads the store or reduces data is blocking and is meant to run inside a Textual
thread worker; nothing here imports textual. Results are cached by (view, selection, parameters) so
switching views or going back to an earlier selection re-renders without recomputation.
"""

from __future__ import annotations

import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Hashable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np
import xarray as xr

from cube import stats
from cube.compute import Cancelled, FractionProgress, fraction_progress
from cube.errors import CubeError
from cube.schema import RUN_DIMS, RUN_STATUS
from cube.selection import Selection
from cube.stats import curves
from cube.stats.metrics import SETTING, SETTINGS
from cube.stats.suffstats import load_suffstats_at
from cube.store import summary

_NETCDF_LOCK = threading.RLock()


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
    not_safe: tuple[str, ...] = ()
    """Algorithms that are not safe RL: never "best" (default: `cube.stats.not_safe`, e.g. PPO)."""
    reference: str | None = None
    """Published numbers shown beside the cube's (`cube.io.reference.REFERENCES`, e.g. "paper"), or None."""

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

    def iterates_text(self) -> str:
        """The training iterates as typed: all, J or LO:HI."""
        it = self.iterates
        return "all" if it is None else (f"{it}" if isinstance(it, int) else f"{it[0]}:{it[1]}")

    def describe(self) -> str:
        """One line: sizes of the selection, the setting and iterates."""
        return (f"{len(self.algos)} algos × {len(self.tasks)} tasks × {len(self.bounds)} bounds × "
                f"{len(self.seeds)} seeds = {self.n_runs} runs · {SETTING[self.setting].label} · "
                f"iterates {self.iterates_text()}")

    def describe_short(self) -> str:
        """The same in few columns: '4a×4t×3b×10s=480 · train · it all'."""
        return (f"{len(self.algos)}a×{len(self.tasks)}t×{len(self.bounds)}b×{len(self.seeds)}s={self.n_runs} · "
                f"{SETTING[self.setting].short} · it {self.iterates_text()}")

    def as_dict(self, cube: str | None = None) -> dict:
        """The selection as plain JSON-able values (recorded in exports)."""
        return {"cube": cube, "algos": list(self.algos), "tasks": list(self.tasks),
                "bounds": [float(b) for b in self.bounds], "seeds": [int(s) for s in self.seeds],
                "setting": self.setting, "iterates": (list(self.iterates) if isinstance(self.iterates, tuple)
                                                      else self.iterates),
                "baseline": self.baseline, "not_safe": list(self.not_safe), "reference": self.reference}

    def tag(self, info: CubeInfo | None = None) -> str:
        """A short tag for file names: setting, iterates, sizes, and a hash unless everything is selected
        ('train_4a4t3b10s', 'expl_it10-20_2a4t3b10s-3f9a2c')."""
        import hashlib
        import json

        it = "" if self.iterates is None else "_it" + self.iterates_text().replace(":", "-")
        sizes = f"{len(self.algos)}a{len(self.tasks)}t{len(self.bounds)}b{len(self.seeds)}s"
        full = info is not None and (self.algos, self.tasks, self.bounds, self.seeds) == (
            info.algos, info.tasks, info.bounds, info.seeds)
        digest = "" if full else "-" + hashlib.sha1(json.dumps(self.as_dict()).encode()).hexdigest()[:6]
        return f"{SETTING[self.setting].short}{it}_{sizes}{digest}"


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
    has_env_steps: bool = False

    def default_selection(self) -> UISelection:
        """Everything selected, setting train, no baseline; the unconstrained algorithms (e.g. ppo) not safe
        (`cube.stats.not_safe`, the rule of every table and figure)."""
        return UISelection(self.algos, self.tasks, self.bounds, self.seeds, not_safe=stats.not_safe(self.algos))




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
        self._cache: dict[Hashable, Any] = {}
        self._recent: OrderedDict[Hashable, xr.Dataset] = OrderedDict()
        self._lock = threading.Lock()
        self._gen = 0
        """Bumped by `update`: a result derived from older statistics is not cached."""

    # ------------------------------------------------------------------ loading
    def load(self, progress: FractionProgress | None = None) -> CubeInfo:
        """Open and validate the cube, then load (or compute and cache) its sufficient statistics.

        Raises CubeError (one line) for a missing path or a non-cube, `DamagedStoreError` for a corrupt store.
        """
        from cube import open_cube

        if not Path(self.path).exists():
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
        self.info = _info(self.path, ds)
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
        with self._lock:
            self.ds, self.ss, self.seqs = ds, ss, at
            self.ss_small = ss.drop_vars("le", errors="ignore")
            self.info = _info(self.path, ds)
            self._cache = {k: v for k, v in self._cache.items() if k[0] == "reference"}
            self._recent.clear()
            self._gen += 1
        return changed

    def run_statuses(self, sel: UISelection) -> tuple[list, float]:
        """(every selected run's `cube.store.runstatus.RunStatus`, the time it is of): one
        `RunStatusReader` kept (stored facts re-read only for runs whose sequence moved; claims and last
        writes at each call), stalled after `stall_s` seconds, the time from `clock()` (tests inject one)."""
        from cube.store.runstatus import RunStatusReader

        self._check(sel)
        if not Path(self.path).is_dir():
            raise CubeError(f"{self.path} is a netCDF file: run status is read from a zarr store being written")
        with self._lock:
            if self._status_reader is None:
                self._status_reader = RunStatusReader(self.path, self.stall_s)
            reader = self._status_reader
        now = self.clock()
        runs = reader.read(now=now)
        want = (set(sel.algos), set(sel.tasks), set(sel.bounds), set(sel.seeds))
        return [r for r in runs if r.key.algo in want[0] and r.key.task in want[1] and float(r.key.bound) in want[2]
                and int(r.key.seed) in want[3]], now

    @property
    def following_worthwhile(self) -> bool:
        """Whether some run is partial or pending (follow mode starts on) in a store with write sequences."""
        if self.ss is None or self.seqs is None or "run_status" not in self.ss:
            return False
        return bool((np.asarray(self.ss["run_status"].values) != RUN_STATUS["complete"]).any())

    # ------------------------------------------------------------------ cache
    def _cached(self, key: Hashable, fn: Callable[[], Any]) -> Any:
        with self._lock:
            if key in self._cache:
                return self._cache[key]
            gen = self._gen
        value = fn()
        with self._lock:
            if gen == self._gen:
                self._cache[key] = value
        return value

    def is_cached(self, key: Hashable) -> bool:
        """Whether a derived result is already in the cache."""
        with self._lock:
            return key in self._cache

    def _check(self, sel: UISelection) -> None:
        if not sel.n_runs:
            raise CubeError("the selection is empty: select at least one algorithm, task, bound and seed")
        assert self.ss is not None and self.ss_small is not None, "load() first"

    def _ss_small(self, sel: UISelection, algos: tuple[str, ...] | None = None) -> xr.Dataset:
        """Selected sufficient statistics without the CDF counts (all that tables need; cheap to copy)."""
        self._check(sel)
        algos = sel.algos if algos is None else algos
        key = ("ss_small", algos, *_sel_key(sel)[1:])
        with self._lock:
            if key in self._recent:
                self._recent.move_to_end(key)
                return self._recent[key]
            gen = self._gen
        value = stats.select(self.ss_small, replace(sel, algos=algos).cube_selection())
        with self._lock:
            if gen != self._gen:
                return value
            self._recent[key] = value
            while len(self._recent) > 4:  # selected copies are large: keep only the last few
                self._recent.popitem(last=False)
        return value

    def _by_algo(self, key: tuple, algos: tuple[str, ...], compute: Callable[[tuple[str, ...]], xr.Dataset]
                 ) -> xr.Dataset:
        """A per-algorithm result for ``algos``, derived only for algorithms not derived before.

        Valid for statistics in which an algorithm's values do not depend on the other algorithms
        (true of every ``cube.stats`` table: each bootstrap is seeded per algorithm and setting), so
        toggling algorithms reuses what is already known. ``key`` names everything else it depends on.
        """
        with self._lock:
            have = self._cache.get(key)
            gen = self._gen
        known = set() if have is None else {str(a) for a in have["algo"].values}
        missing = tuple(a for a in algos if a not in known)
        if missing:
            fresh = compute(missing)
            have = fresh if have is None else xr.concat([have, fresh], dim="algo")
            with self._lock:
                if gen == self._gen:
                    self._cache[key] = have
        assert have is not None
        return have.sel(algo=list(algos))

    # ------------------------------------------------------------------ derived statistics
    def _setting_key(self, sel: UISelection, setting: str) -> tuple:
        """What a per-setting result depends on besides the algorithms."""
        return (sel.tasks, sel.bounds, sel.seeds, sel.iterates if setting == "train" else None, setting)

    def aggregate(self, sel: UISelection, settings: tuple[str, ...] = SETTINGS) -> xr.Dataset:
        """``stats.aggregate_table`` of the selection for ``settings`` (train restricted to the iterates).

        Cached per setting and algorithm (see :meth:`_by_algo`): toggling algorithms or switching the
        setting reuses every piece already derived.
        """
        self._check(sel)
        parts = []
        for s in settings:
            key = ("aggregate", *self._setting_key(sel, s), self.boot, self.rng_seed)
            parts.append(self._by_algo(key, sel.algos, lambda algos, s=s: stats.aggregate_table(
                self._ss_small(sel, algos), (s,), boot=self.boot, rng_seed=self.rng_seed, ci=0.95)))
        return _concat_settings(parts).transpose("algo", "setting", "metric")

    def gap(self, sel: UISelection) -> xr.Dataset:
        """``stats.greedy_expl_gap`` of the selection (final settings only: iterates do not matter),
        cached per algorithm (each algorithm's bootstrap is seeded by its name)."""
        self._check(sel)
        key = ("gap", sel.tasks, sel.bounds, sel.seeds, self.boot, self.rng_seed)
        return self._by_algo(key, sel.algos, lambda algos: stats.greedy_expl_gap(
            self._ss_small(sel, algos), boot=self.boot, rng_seed=self.rng_seed, ci=0.95))

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
            return curves.select_cube(rv, sel.cube_selection())["run_status"].transpose(*RUN_DIMS).load()

        return self._cached(key, compute)

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
            parts.append(self._by_algo(key, sel.algos, lambda algos, s=s: stats.condition_table(
                self._ss_small(sel, algos), (s,))))
        return _concat_settings(parts)

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
        return self._cached(("reference", name), lambda: load_reference(name))

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

            parts.append(self._by_algo(key, sel.algos, compute))
        return _concat_settings(parts)

    def iterate_metrics(self, sel: UISelection, mode: str = "train") -> xr.Dataset:
        """``stats.iterate_metrics`` of the selection for ``mode`` (train, expl, greedy), all iterates."""
        full = replace(sel, iterates=None, setting="train")
        key = ("iterate_metrics", _sel_key(full), mode)
        return self._cached(key, lambda: stats.iterate_metrics(self._ss_small(full), mode=mode))

    def learning_curve(self, sel: UISelection) -> xr.Dataset:
        """``stats.aggregate_learning_curve`` of the selection (IQM over conditions per training iterate,
        bootstrap band), cached per selection."""
        self._check(sel)
        key = ("learning", _sel_key(sel), self.boot, self.rng_seed)
        return self._cached(key, lambda: stats.aggregate_learning_curve(
            stats.select(self.ss, sel.cube_selection()), boot=self.boot, rng_seed=self.rng_seed))

    def curves(self, sel: UISelection, window: int, mode: str = "train", var: str = "multiplier"
               ) -> tuple[xr.Dataset, xr.Dataset | None, xr.DataArray | None]:
        """Smoothed seed mean/std of R and C per iterate of ``mode`` episodes (train; or expl / greedy at
        the evaluated iterates, NaN elsewhere), of the per-iterate variable ``var`` (the multiplier by
        default; None if absent), and the seed-mean env steps per iterate (None if the cube has none)."""
        key = ("curves", _sel_key(replace(sel, iterates=None, setting="train")), int(window), mode, var)

        def compute() -> tuple[xr.Dataset, xr.Dataset | None, xr.DataArray | None]:
            im = self.iterate_metrics(sel, mode)
            if mode != "train":  # evaluations: smooth over evaluated iterates only
                keep = np.flatnonzero(np.isfinite(im["R"].values).reshape(-1, im.sizes["iterate"]).any(0)
                                      | np.isfinite(im["C"].values).reshape(-1, im.sizes["iterate"]).any(0))
                im = im.isel(iterate=keep)
            run = curves.select_cube(self._run_vars((var, "env_steps")), sel.cube_selection())
            mult = curves.multiplier_curves(run, window, var)
            steps = None
            if "env_steps" in run:
                steps = run["env_steps"].transpose(*RUN_DIMS, "iterate").mean("seed", skipna=True)
            return curves.training_curves(im, window), mult, steps

        return self._cached(key, compute)

    def iterate_vars(self, sel: UISelection) -> tuple[str, ...]:
        """The per-iterate variables with a value in the selection's runs, multiplier first
        (``curves.iterate_var_names``): what the Curves view's third plot can show. Reads each of them once."""
        assert self.ds is not None, "load() first"
        names = curves.iterate_var_names(self.ds)
        key = ("iterate_vars", _sel_key(replace(sel, iterates=None, setting="train")))
        return self._cached(key, lambda: curves.iterate_var_names(
            curves.select_cube(self._run_vars(names), sel.cube_selection()), with_values=True))

    def _raw(self) -> xr.Dataset:
        """The cube opened without dask (``open_cube(lazy=False)``, the one read path, on the grid of the
        loaded cube): reads of many one-run chunks go straight to zarr / netCDF, several times faster than
        through dask."""
        assert self.ds is not None, "load() first"

        def open_raw() -> xr.Dataset:
            from cube import open_cube

            if not Path(self.path).is_dir():  # netCDF: keep the one dask-backed handle (HDF5 is not thread-safe)
                assert self.ds is not None
                return self.ds
            return open_cube(self.path, check=False, lazy=False, sizes=self.ds.encoding.get("saferl_grid"))

        return self._cached(("raw",), open_raw)

    def _run_vars(self, names: tuple[str, ...]) -> xr.Dataset:
        """Those of ``names`` the cube has (per-run / per-iterate variables), read once and kept."""
        assert self.ds is not None, "load() first"
        have = tuple(n for n in names if n in self.ds.data_vars)
        return self._cached(("run_vars", have), lambda: self._read(lambda: self._raw()[list(have)].load()))

    def _read(self, fn: Callable[[], Any]) -> Any:
        """Run a store read; reads of netCDF files are serialised (the HDF5 library is not thread-safe
        and a cancelled worker may still be reading when the next one starts)."""
        if Path(self.path).is_dir():
            return fn()
        with _NETCDF_LOCK:
            return fn()

    def final_costs(self, sel: UISelection, task: str, bound: float) -> dict:
        """Final-iterate episodic costs of one condition per algorithm and mode (``curves.final_costs``)."""
        key = ("final_costs", sel.algos, sel.seeds, task, float(bound))
        self._check(sel)
        return self._cached(key, lambda: self._read(lambda: curves.final_costs(
            self._raw(), self.ss, task, bound, algos=sel.algos, seeds=sel.seeds)))

    def histograms(self, sel: UISelection, task: str, bound: float, bins: int = 20) -> dict:
        """Final-episode cost histograms of one condition: {algo: `curves.HistPanel`}, from the one
        histogram engine the figures use (`curves.hist_panels`: edges shared by the algorithms, the not-safe
        ones on a scale of their own)."""
        self._check(sel)
        key = ("hist", sel.algos, sel.seeds, task, float(bound), bins, sel.not_safe)

        def compute() -> dict:
            cost, n = self._raw()["cost"].sel(task=task, bound=bound), self.ss["n"].sel(task=task, bound=bound)
            if sel.algos is not None:
                cost, n = cost.sel(algo=list(sel.algos)), n.sel(algo=list(sel.algos))
            if sel.seeds is not None:
                cost, n = cost.sel(seed=list(sel.seeds)), n.sel(seed=list(sel.seeds))
            final = curves.final_episode_costs(cost, n)
            if final is None:
                return {}
            final = final.expand_dims(task=[task], bound=[float(bound)])
            panels = curves.hist_panels(final, bins, own_scale=sel.not_safe)
            return {a: p for (_t, _b, a), p in panels.items()}

        return self._cached(key, lambda: self._read(compute))

    def runs(self, sel: UISelection) -> list[dict]:
        """The run manifest rows of the selection."""
        self._check(sel)
        key = ("runs", sel.algos, sel.tasks, sel.bounds, sel.seeds)
        run_vars = ("run_status", "run_manifest", "env_steps")
        return self._cached(key, lambda: summary.run_rows(curves.select_cube(self._run_vars(run_vars),
                                                                          sel.cube_selection())))


def _concat_settings(parts: list[xr.Dataset]) -> xr.Dataset:
    """Join per-setting results along ``setting``."""
    return xr.concat(parts, dim="setting") if len(parts) > 1 else parts[0]


def _sel_key(sel: UISelection) -> tuple:
    """Cache key of the parts of a selection that change statistics (not setting or baseline)."""
    return (sel.algos, sel.tasks, sel.bounds, sel.seeds, sel.iterates)


def _info(path: str, ds: xr.Dataset) -> CubeInfo:
    """The labels and attributes of the opened cube `ds`."""
    return CubeInfo(
        path=path,
        algos=tuple(str(a) for a in ds["algo"].values),
        tasks=tuple(str(t) for t in ds["task"].values),
        bounds=tuple(float(b) for b in ds["bound"].values),
        seeds=tuple(int(s) for s in ds["seed"].values),
        n_iterates=int(ds.sizes["iterate"]),
        synthetic=bool(ds.attrs.get("synthetic", False)),
        attrs=dict(ds.attrs),
        has_env_steps="env_steps" in ds.data_vars,
    )
