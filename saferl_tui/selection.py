"""What the user selects in the TUI (`UISelection`) and what an opened cube offers to select (`CubeInfo`).

Plain values: no textual, no reads (`info_of` takes an opened cube).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import xarray as xr

from cube import stats
from cube.selection import Selection
from cube.stats.metrics import SETTING


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


def info_of(path: str, ds: xr.Dataset) -> CubeInfo:
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
