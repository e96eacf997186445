"""Names, dimensions and dtypes of the saferl results cube (schema version 1), its structure check and
canonical form.

The cube is an xarray Dataset with seven dimensions. ``reward`` and ``cost`` are required over all
seven; everything else (per-iterate variables, run manifest, attrs) is optional on read so that cubes
written by other tools can be evaluated.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from cube.errors import CubeError

if TYPE_CHECKING:  # numpy and xarray only in annotations here: the command line starts without them (0.1 s)
    import numpy as np
    import xarray as xr

SCHEMA_VERSION = 1

DIMS: tuple[str, ...] = ("algo", "task", "bound", "seed", "iterate", "episode", "mode")
RUN_DIMS: tuple[str, ...] = ("algo", "task", "bound", "seed")
ITERATE_DIMS: tuple[str, ...] = (*RUN_DIMS, "iterate")
EPISODE_VARS: tuple[str, ...] = ("reward", "cost")
MODES: tuple[str, ...] = ("train", "expl", "greedy")
DEFAULT_ITERATE_VARS: tuple[str, ...] = ("env_steps", "multiplier")

RUN_STATUS = {"pending": 0, "partial": 1, "complete": 2}

# Optional (run dims + mode) flag: 1 where a run's "episodes" of that mode are per-epoch means of a
# window of episodes (imported from tools that keep no per-episode record). R, C and D_norm follow from
# means; V, D_norm+, tiers and CDFs need every episode and are reported as not available there.
MEANS_ONLY = "means_only"
LEGACY_MEANS_ONLY = "aggregate_only"
"""The name of the means-only flag in stores written before 2026-11-26; renamed to MEANS_ONLY on open."""
RUN_STATUS_NAMES = {code: name for name, code in RUN_STATUS.items()}

# The grid's limits (`cube.store.layout` refuses a store beyond them; importers check sources against them).
MAX_ITERATES = 1_000_000
"""Iterates a store may hold: far above any training run (the paper's runs have ~1,000); a larger index
is a unit mix-up (env steps given as the iterate), refused before anything is written."""
MAX_EPISODE_SLOTS = 1_000_000
"""Episode slots per (run, iterate, mode) a store may hold."""
MAX_CHUNK_BYTES = 512 * 2**20
"""One chunk of reward or cost must fit in memory with room to spare (every write of an iterate reads and
rewrites its chunk)."""
STALL_S = 600.0
"""Default seconds without a write after which a running run is stalled (`cube.store.runstatus`)."""
ROW_FIELDS = ("algo", "task", "bound", "seed", "status", "iterates", "env steps", "steps/s", "ETA", "wall", "host",
              "job", "last write", "flags")
"""The fields of a run's row (`cube.store.runstatus.row_text`), in the order `saferl status --wide` shows them."""
NARROW_FIELDS = ("algo", "task", "bound", "seed", "phase", "iterates", "steps/s", "ETA", "last write")
"""The fields of a run's row that `saferl status` shows by default: the ones that fit 80 columns."""

# The kind of label each dimension holds: "str", "float" or "int".
DIM_KINDS: dict[str, str] = {
    "algo": "str",
    "task": "str",
    "bound": "float",
    "seed": "int",
    "iterate": "int",
    "episode": "int",
    "mode": "str",
}


@dataclass(frozen=True)
class RunKey:
    """The labels of one training run: algorithm, task, safety bound d and seed."""

    algo: str
    task: str
    bound: float
    seed: int

    def as_dict(self) -> dict[str, Any]:
        return {"algo": self.algo, "task": self.task, "bound": float(self.bound), "seed": int(self.seed)}

    @classmethod
    def from_dict(cls, row: dict[str, Any]) -> RunKey:
        """The key of a dict holding the four labels (`as_dict`, a `read_manifests` row; other keys ignored)."""
        return cls(row["algo"], row["task"], float(row["bound"]), int(row["seed"]))

    def __str__(self) -> str:
        """The one run label of every message and table: 'ppo_lag/goal/d=25/seed=3'."""
        return f"{self.algo}/{self.task}/d={self.bound:g}/seed={self.seed}"

    @classmethod
    def at(cls, labels: Any, index: Any) -> RunKey:
        """The key of the run at `index` (its positions along RUN_DIMS) of a grid whose labels per run
        dim are `labels` (a mapping dim -> labels, e.g. a Dataset or a dict of arrays)."""
        import numpy as np

        algo, task, bound, seed = (np.asarray(labels[d])[int(i)] for d, i in zip(RUN_DIMS, index, strict=True))
        return cls(str(algo), str(task), float(bound), int(seed))


def dim_kind_ok(kind: str, dtype: np.dtype) -> bool:
    """Whether a coordinate dtype fits the kind of label its dimension holds."""
    if kind == "str":
        return dtype.kind in "OUST"  # T: numpy StringDType
    if kind == "float":
        return dtype.kind in "fiu"
    return dtype.kind in "iu"


def manifest_json(manifest: dict[str, Any]) -> str:
    """Serialise a run manifest to compact, sorted JSON (non-JSON values become strings)."""
    return json.dumps(manifest, sort_keys=True, default=str, separators=(",", ":"))


# ------------------------------------------------------------------ the manifest keys every writer uses
MANIFEST_KEYS: dict[str, str] = {
    "writer": "what wrote the run: 'saferl train', 'cube.Recorder' or 'saferl import <format>'",
    "started": "when the run's latest attempt started, ISO 8601 with its zone ('2026-11-26T10:00:00Z')",
    "finished": "when it ended, same form (absent while it runs)",
    "wall_s": "seconds it took, where the source logs it and gives no start and end (imports)",
    "iterates_done": "iterates written (the last written iterate + 1)",
    "env_steps": "environment steps at the last written iterate",
    "host": "the machine that wrote it (absent for imports)",
}
"""The run-manifest keys that `saferl status` and the summaries read; every writer (`saferl train`,
`cube.Recorder`, `saferl import`) writes those it knows and leaves out the others. Writers add any other
keys (config, versions, source files, notes)."""
LEGACY_MANIFEST_KEYS: dict[str, str] = {"start_time": "started", "end_time": "finished"}
"""Names `saferl train` wrote before 2026-11-27, read as their MANIFEST_KEYS name."""
MEANS_KEY = "means"
"""Manifest key of imported runs: mode -> {"text": one sentence saying what the stored means are (window,
its source, how far it reaches back), plus the numbers it names}."""


def utc_stamp(seconds: float | None = None) -> str:
    """A time (POSIX seconds, default now) in the manifests' form: '2026-11-26T10:00:00Z'."""
    import time

    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(seconds))


def run_facts(row: dict[str, Any]) -> dict[str, Any]:
    """The MANIFEST_KEYS of one manifest (a `read_manifests` row or a stored body), None where unknown;
    legacy names are read too, and `wall_s` is `finished - started` when both are known."""
    from datetime import datetime

    out = {k: row.get(k) for k in MANIFEST_KEYS}
    for old, new in LEGACY_MANIFEST_KEYS.items():
        if out[new] is None and row.get(old) is not None:
            out[new] = row[old]
    if out["writer"] is None:  # manifests written before the key existed
        out["writer"] = ("cube.Recorder" if row.get("recorder") else
                         f"saferl import {row['format']}" if row.get("format") else
                         "saferl train" if row.get("config") is not None else None)
    if out["wall_s"] is None and out["started"] and out["finished"]:
        try:
            start, end = (datetime.fromisoformat(str(out[k])) for k in ("started", "finished"))
            out["wall_s"] = (end - start).total_seconds()
        except (TypeError, ValueError):
            pass
    return out


def means_notes(rows: list[dict[str, Any]], mode: str = "train") -> list[str]:
    """The distinct sentences that say what the means of `mode` are in these manifests (imported runs;
    see MEANS_KEY), in first-seen order; [] for runs of episodes."""
    notes = [((row.get(MEANS_KEY) or {}).get(mode) or {}).get("text") for row in rows]
    return list(dict.fromkeys(n for n in notes if n))


MAX_SEED = 2**63 - 1
"""Seeds are stored as int64: 0..MAX_SEED."""


def seed_label(value: Any) -> int:
    """A seed label as a Python int: an integer (or an integral number) in 0..MAX_SEED; CubeError (one line
    naming the value and the limit) for anything else, before it could wrap around in an int64."""
    import numpy as np

    if isinstance(value, bool | np.bool_):
        raise CubeError(f"seed {value!r} is not an integer; seeds are integers in 0..{MAX_SEED}")
    try:
        number = value if isinstance(value, int | np.integer) else float(value)
        whole = int(number)
    except (TypeError, ValueError, OverflowError):
        raise CubeError(f"seed {value!r} is not an integer; seeds are integers in 0..{MAX_SEED}") from None
    if whole != number or not 0 <= whole <= MAX_SEED:
        raise CubeError(f"seed {value!r} is not an integer in 0..{MAX_SEED} (seeds are stored as int64)")
    return whole


BOUND_RTOL = 1e-9
"""Two safety bounds are the same label when they agree to this relative tolerance (float noise of a
bound read back from text or JSON; distinct bounds of a sweep differ by far more)."""


def same_bound(labels: Any, value: Any) -> np.ndarray:
    """Elementwise: which of the bound `labels` are the bound `value` (to BOUND_RTOL); `value` is one
    bound or an array broadcast against `labels` (two label arrays of one shape compared pairwise). The
    one comparison of bounds: every reader, writer and parser of bound labels goes through it."""
    import numpy as np

    return np.isclose(np.asarray(labels, dtype=np.float64), np.asarray(value, dtype=np.float64),
                      rtol=BOUND_RTOL, atol=0.0)


# ------------------------------------------------------------------------- the one episode rule
@dataclass(frozen=True)
class EpisodeRule:
    """One way an episode breaks the cube's contract: an episode exists where its cost is not NaN; its
    cost is finite and >= 0; its reward is finite, or NaN where unknown (never a reward without a cost).

    `mask(reward, cost)` is elementwise (numpy, dask or xarray arrays); `plural` names the broken
    episodes after a count ("3 negative cost(s)")."""

    name: str
    plural: str
    mask: Any

    def count_text(self, n: int) -> str:
        return f"{n} {self.plural}"


def _cost_nan_where_reward(reward: Any, cost: Any) -> Any:
    import numpy as np

    return np.isnan(cost) & ~np.isnan(reward)


def _cost_infinite(reward: Any, cost: Any) -> Any:
    import numpy as np

    return np.isinf(cost)


def _reward_infinite(reward: Any, cost: Any) -> Any:
    import numpy as np

    return np.isinf(reward)


EPISODE_RULES: tuple[EpisodeRule, ...] = (
    EpisodeRule("cost NaN where reward present", "NaN cost(s) of episodes with a reward", _cost_nan_where_reward),
    EpisodeRule("negative cost", "negative cost(s)", lambda reward, cost: cost < 0),
    EpisodeRule("infinite cost", "infinite cost(s)", _cost_infinite),
    EpisodeRule("infinite reward", "infinite reward(s)", _reward_infinite),
)
"""The valid-episode rule, in the order problems are reported; used by every writer, importer, the
statistics pass and validate."""
EPISODE_RULE_HINT = "costs must be finite and >= 0 for every episode, rewards finite (or NaN where unknown)"


def first_broken_episode(reward: Any, cost: Any) -> tuple[EpisodeRule, Any] | None:
    """The first rule that some episodes of numpy arrays `reward`, `cost` break, and its mask; None if
    all are valid."""
    import numpy as np

    for rule in EPISODE_RULES:
        mask = np.asarray(rule.mask(reward, cost))
        if mask.any():
            return rule, mask
    return None


def final_iterate(counts: np.ndarray) -> np.ndarray:
    """Index of the last iterate with at least one episode (the final settings' iterate).

    ``counts`` has the iterate axis last (episode counts per iterate); returns an int array of the
    leading shape, -1 where a run has no episode at all.
    """
    import numpy as np

    has = np.asarray(counts) > 0
    last = has.shape[-1] - 1 - np.argmax(has[..., ::-1], axis=-1)
    return np.where(has.any(axis=-1), last, -1)


# ------------------------------------------------------- the contract as checks and canonical form
def as_str_array(values: Any) -> np.ndarray:
    """Labels as a plain numpy unicode array (zarr 3 and xarray may hand back numpy StringDType)."""
    import numpy as np

    return np.array([str(v) for v in np.asarray(values).tolist()], dtype=str)


def as_bool(value: Any) -> bool:
    """An attribute read back as a bool (netCDF stores booleans as 0/1, some tools as strings)."""
    import numpy as np

    if isinstance(value, str):
        return value.strip().lower() in ("1", "true", "yes")
    return bool(np.asarray(value).item())


def normalise(ds: xr.Dataset) -> xr.Dataset:
    """Plain numpy string labels, float bounds, int seeds/iterates, dims in the schema's order."""
    import numpy as np

    fixed = {}
    for dim in ("algo", "task", "mode"):
        fixed[dim] = as_str_array(ds[dim].values)
    fixed["bound"] = np.asarray(ds["bound"].values, dtype=np.float64)
    for dim in ("seed", "iterate", "episode"):
        if dim in ds.coords:
            fixed[dim] = np.asarray(ds[dim].values, dtype=np.int64)
    ds = ds.assign_coords(fixed)
    if LEGACY_MEANS_ONLY in ds.data_vars and MEANS_ONLY not in ds.data_vars:
        ds = ds.rename({LEGACY_MEANS_ONLY: MEANS_ONLY})
    if "synthetic" in ds.attrs:
        ds.attrs["synthetic"] = as_bool(ds.attrs["synthetic"])
    for name in ("reward", "cost"):
        if ds[name].dims != DIMS:
            ds[name] = ds[name].transpose(*DIMS)
    return ds


def schema_version_problems(attrs: Mapping[str, Any]) -> list[str]:
    """A problem line when a store's `saferl_schema_version` is one this saferl does not read (a later
    version, or not a version at all); none for foreign cubes, which carry none."""
    import numpy as np

    if "saferl_schema_version" not in attrs:
        return []
    version = attrs["saferl_schema_version"]
    if isinstance(version, bool) or not isinstance(version, int | np.integer) or int(version) != SCHEMA_VERSION:
        newer = isinstance(version, int | np.integer) and not isinstance(version, bool) and version > SCHEMA_VERSION
        return [f"the store has schema version {version!r}; this saferl reads version {SCHEMA_VERSION}"
                + (": upgrade saferl to read it" if newer else ": the store's zarr.json is damaged or foreign")]
    return []


def structure_problems(ds: xr.Dataset) -> list[str]:
    """Contract violations visible without reading data: dims, variables, dtypes, labels."""
    import numpy as np

    problems = schema_version_problems(ds.attrs)
    for dim in DIMS:
        if dim not in ds.dims:
            problems.append(f"dimension '{dim}' is missing (a cube needs {', '.join(DIMS)})")
    for name in EPISODE_VARS:
        if name not in ds.data_vars:
            problems.append(f"variable '{name}' is missing (it must span all seven dimensions)")
            continue
        var = ds[name]
        if set(var.dims) != set(DIMS):
            problems.append(f"variable '{name}' has dims {var.dims}, expected all of {DIMS}")
        if var.dtype.kind != "f":
            problems.append(f"variable '{name}' has dtype {var.dtype}, expected a float type (float32)")
    for dim, kind in DIM_KINDS.items():
        if dim not in ds.dims:
            continue
        if dim not in ds.coords:
            if dim in RUN_DIMS or dim == "mode":
                problems.append(f"dimension '{dim}' has no coordinate labels")
            continue
        values = np.asarray(ds[dim].values)
        if not dim_kind_ok(kind, values.dtype):
            problems.append(f"coordinate '{dim}' has dtype {values.dtype}, expected {kind} labels")
            continue
        problems.extend(label_problems(dim, values))
    for name, var in ds.data_vars.items():
        if name in EPISODE_VARS:
            continue
        if "episode" in var.dims or "mode" in var.dims:
            continue  # extra episode-level variables are allowed
        if not set(var.dims) <= set(ITERATE_DIMS):
            problems.append(f"variable '{name}' has dims {var.dims}, not a subset of {ITERATE_DIMS}")
    return problems


def label_problems(dim: str, values: np.ndarray) -> list[str]:
    import numpy as np

    problems = []
    as_list = [str(v) for v in values.tolist()] if values.dtype.kind in "OUST" else values.tolist()
    seen, dupes = set(), []
    for v in as_list:
        if v in seen and v not in dupes:
            dupes.append(v)
        seen.add(v)
    if dupes:
        problems.append(f"coordinate '{dim}' has duplicate labels {dupes[:3]}; each label must be unique")
    if dim == "bound":
        bad = values[~np.isfinite(values.astype(float)) | (values.astype(float) <= 0)]
        if bad.size:
            problems.append(f"bound {bad[0]} is not a finite number > 0 (d must be positive)")
    if dim == "mode":
        unknown = [m for m in as_list if m not in MODES]
        if unknown:
            problems.append(f"mode labels {unknown} are unknown; modes are {', '.join(MODES)}")
    return problems
