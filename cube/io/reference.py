"""Published results as reference data, shaped like saferl's own tables (means only, no episodes).

The one reference so far, ``paper``, is the paper's own results (Spoor, Plaat, Moerland, "Evaluation Metrics for
Safe Reinforcement Learning"), transcribed exactly as printed from its LaTeX into
``cube/io/reference_data/paper.json``: Table 2 (IQMs and tiers, Train and Final (greedy)), the appendix CI tables
A.2 (Final (expl.) vs Final (greedy)) and A.3 (Train and Final (greedy)) with their 95% stratified-bootstrap CIs
(B = 2000), and the per-condition tables A.4-A.7 (seed mean and sample std over K = 30 seeds per algorithm, task
and bound, Train and Final (greedy), with tiers). Every table keeps its LaTeX label and caption; the file's
``notes`` list the paper's own inconsistencies (kept as printed).

`load_reference` gives xarray Datasets with the dims and variable names of `cube.stats.condition_table` and
`cube.stats.aggregate_table` (NaN where the paper gives nothing), so a renderer shows them like a cube's own
tables; `cube.stats.reference` puts them next to a cube's. The io wing must not import the statistics wing, so
the metric and setting names and the variable pattern are spelled out here; the tests check that they equal
``cube.stats``'s.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from functools import cache
from importlib import resources
from typing import TYPE_CHECKING, Any

from cube.errors import CubeError
from cube.schema import same_bound

if TYPE_CHECKING:  # numpy and xarray load when a reference is built (`saferl --help` lists REFERENCES without them)
    import xarray as xr

__all__ = ["REFERENCES", "Reference", "load_reference", "METRICS", "SETTINGS", "CONDITION_VARS", "AGGREGATE_VARS"]

REFERENCES: tuple[str, ...] = ("paper",)
"""The names `load_reference` knows; each is ``cube/io/reference_data/<name>.json``."""

METRICS: tuple[str, ...] = ("R", "C", "Dnorm", "V", "Dplus")
"""= cube.stats.PAPER_METRICS, the paper's five (the io wing may not import stats; a test checks the two agree)."""
SETTINGS: tuple[str, ...] = ("train", "final_expl", "final_greedy")
"""= cube.stats.SETTINGS."""
CONDITION_VARS: tuple[str, ...] = (*(f"{m}_{s}" for m in METRICS for s in ("mean", "std")), "n_seeds", "tier")
"""The data variables of `cube.stats.condition_table` (dims algo, task, bound, setting)."""
AGGREGATE_VARS: tuple[str, ...] = ("value", "ci_low", "ci_high", "tier", "tier_stability", "n_conditions")
"""The data variables of `cube.stats.aggregate_table` (value/ci_*: algo, setting, metric; the rest: algo, setting)."""

_DATA_PACKAGE = "cube.io"
_DATA_FOLDER = "reference_data"
_NO_TIER = -1  # cube.stats' "no data" tier


@dataclass(frozen=True)
class Reference:
    """A set of published numbers as saferl tables.

    conditions: dims (algo, task, bound, setting); vars ``{m}_mean``, ``{m}_std`` (seed mean and sample std in the
        metric's units: R and C per episode, Dnorm and Dplus in units of d, V a fraction), ``n_seeds`` (int; 0 where
        not printed) and ``tier`` (the printed per-condition tier; -1 where not printed).
    aggregate: dims (algo, setting, metric); vars ``value`` (IQM over conditions), ``ci_low``, ``ci_high``; dims
        (algo, setting): ``tier`` (printed), ``tier_stability`` (NaN: not published), ``n_conditions``.
    tables: each printed aggregate table by its LaTeX label, in the aggregate's shape (CIs NaN where the table
        prints none), for showing one table exactly as published.
    info: the file's provenance (citation, K, N, B, CI level, notes, captions by label).
    Every Dataset's attrs carry source, reference, citation and ``means_only: True`` (no episodes: no CDFs).
    """

    name: str
    conditions: xr.Dataset
    aggregate: xr.Dataset
    tables: Mapping[str, xr.Dataset] = field(default_factory=dict)
    info: Mapping[str, Any] = field(default_factory=dict)

    @property
    def citation(self) -> str:
        """The one-line citation of the source."""
        return str(self.info.get("citation", self.name))

    @property
    def conventions(self) -> dict[str, str]:
        """The source's conventions (`cube.io.conventions`: name -> value), as its text states them."""
        return {k: str(v["value"]) for k, v in (self.info.get("conventions") or {}).items()}


def load_reference(name: str = "paper") -> Reference:
    """The reference `name` (one of REFERENCES) as saferl-shaped tables; CubeError for an unknown name."""
    if name not in REFERENCES:
        raise CubeError(f"unknown reference {name!r}: use one of {', '.join(REFERENCES)}")
    raw = _read(name)
    try:
        attrs = _attrs(raw)
        tables = {t["label"]: t for t in raw["tables"]}
        printed = {label: _aggregate_of(raw, [t], attrs) for label, t in tables.items() if t["kind"] != "conditions"}
        return Reference(
            name=name,
            conditions=_conditions(raw, tables, attrs),
            aggregate=_aggregate(raw, tables, attrs),
            tables=printed,
            info={k: v for k, v in raw.items() if k != "tables"}
            | {"captions": {label: t["caption"] for label, t in tables.items()}},
        )
    except (KeyError, TypeError, ValueError, IndexError) as err:
        raise CubeError(f"the reference data {name}.json is damaged ({type(err).__name__}: {err}): "
                        "reinstall saferl") from None


@cache
def _text(name: str) -> str:
    return (resources.files(_DATA_PACKAGE) / _DATA_FOLDER / f"{name}.json").read_text(encoding="utf-8")


def _read(name: str) -> dict[str, Any]:
    """The parsed data file (a fresh dict per call: callers may not share mutable state)."""
    try:
        return json.loads(_text(name))
    except (OSError, json.JSONDecodeError) as err:
        raise CubeError(f"the reference data {name}.json cannot be read ({err}): reinstall saferl") from None


def _attrs(raw: Mapping[str, Any]) -> dict[str, Any]:
    """The attrs every reference Dataset carries (plain scalars and strings)."""
    return {
        "source": raw["source"],
        "reference": raw["name"],
        "citation": raw["citation"],
        "means_only": bool(raw["means_only"]),
        "description": raw["description"],
        "synthetic": False,
        "seeds_per_condition": int(raw["n_seeds"]),
        "n_final_episodes": int(raw["n_final_episodes"]),
        "boot": int(raw["boot"]),
        "ci": float(raw["ci"]),
    }


def _labels(raw: Mapping[str, Any]) -> tuple[list[str], list[str], list[float]]:
    return list(raw["algos"]), list(raw["tasks"]), [float(b) for b in raw["bounds"]]


def _index(labels: Sequence, value, what: str) -> int:
    import numpy as np

    if isinstance(value, float):
        hits = list(np.flatnonzero(same_bound(labels, value)))
    else:
        hits = [i for i, x in enumerate(labels) if x == value]
    if not hits:
        raise ValueError(f"{what} {value!r} is not one of {list(labels)}")
    return hits[0]


def _conditions(raw: Mapping[str, Any], tables: Mapping[str, Mapping], attrs: dict) -> xr.Dataset:
    """The per-condition tables as one condition table (algo, task, bound, setting)."""
    import numpy as np
    import xarray as xr

    algos, tasks, bounds = _labels(raw)
    shape = (len(algos), len(tasks), len(bounds), len(SETTINGS))
    mean = {m: np.full(shape, np.nan) for m in METRICS}
    std = {m: np.full(shape, np.nan) for m in METRICS}
    n_seeds = np.zeros(shape, dtype=np.int64)
    tier = np.full(shape, _NO_TIER, dtype=np.int64)
    labels = []
    for t in tables.values():
        if t["kind"] != "conditions":
            continue
        labels.append(t["label"])
        ti = _index(tasks, t["task"], "task")
        for row in t["rows"]:
            at = (_index(algos, row["algo"], "algo"), ti, _index(bounds, float(row["bound"]), "bound"),
                  _index(SETTINGS, row["setting"], "setting"))
            for m in METRICS:
                mean[m][at], std[m][at] = (float(x) for x in row[m])
            n_seeds[at] = int(raw["n_seeds"])
            tier[at] = int(row["tier"])
    dims = ("algo", "task", "bound", "setting")
    data: dict[str, tuple] = {}
    for m in METRICS:
        data[f"{m}_mean"], data[f"{m}_std"] = (dims, mean[m]), (dims, std[m])
    data["n_seeds"], data["tier"] = (dims, n_seeds), (dims, tier)
    coords = {"algo": algos, "task": tasks, "bound": np.asarray(bounds, dtype=np.float64), "setting": list(SETTINGS)}
    return xr.Dataset(data, coords=coords, attrs=attrs | {"tables": ", ".join(labels)})


def _aggregate(raw: Mapping[str, Any], tables: Mapping[str, Mapping], attrs: dict) -> xr.Dataset:
    """The aggregate table: per setting, values and CIs from `aggregate_values`, tiers from `aggregate_tiers`."""
    import xarray as xr

    parts, sources = [], []
    for s in SETTINGS:
        values, tiers = raw["aggregate_values"].get(s), raw["aggregate_tiers"].get(s)
        one = _aggregate_of(raw, [tables[values]] if values else [], attrs, keep=s)
        if tiers:
            one["tier"] = _aggregate_of(raw, [tables[tiers]], attrs, keep=s)["tier"]
        parts.append(one)
        sources.append(f"{s}: values {values or 'none'}, tier {tiers or 'none'}")
    out = xr.concat(parts, dim="setting", combine_attrs="drop")
    out.attrs = attrs | {"tables": "; ".join(sources)}
    return out


def _aggregate_of(raw: Mapping[str, Any], chosen: Sequence[Mapping], attrs: dict, keep: str | None = None
                  ) -> xr.Dataset:
    """Aggregate-shaped Dataset (algo, setting, metric) of printed aggregate tables; only setting `keep` if given.

    A row's metric is a number (IQM; CIs NaN) or [IQM, ci_low, ci_high]."""
    import numpy as np
    import xarray as xr

    raw_algos = list(raw["algos"])
    settings = [keep] if keep else list(SETTINGS)
    shape = (len(raw_algos), len(settings), len(METRICS))
    value, lo, hi = np.full(shape, np.nan), np.full(shape, np.nan), np.full(shape, np.nan)
    tier = np.full(shape[:2], _NO_TIER, dtype=np.int64)
    n_cond = np.zeros(shape[:2], dtype=np.int64)
    labels = []
    for t in chosen:
        labels.append(t["label"])
        for row in t["rows"]:
            if row["setting"] not in settings:
                continue
            a, s = _index(raw_algos, row["algo"], "algo"), settings.index(row["setting"])
            for mi, m in enumerate(METRICS):
                cell = row[m]
                value[a, s, mi], lo[a, s, mi], hi[a, s, mi] = (
                    (float(cell), np.nan, np.nan) if isinstance(cell, int | float) else (float(x) for x in cell))
            tier[a, s] = int(row["tier"])
            n_cond[a, s] = int(raw["n_conditions"])
    d3, d2 = ("algo", "setting", "metric"), ("algo", "setting")
    return xr.Dataset(
        {"value": (d3, value), "ci_low": (d3, lo), "ci_high": (d3, hi), "tier": (d2, tier),
         "tier_stability": (d2, np.full(shape[:2], np.nan)), "n_conditions": (d2, n_cond)},
        coords={"algo": list(raw_algos), "setting": settings, "metric": list(METRICS)},
        attrs=attrs | {"tables": ", ".join(labels)},
    )
