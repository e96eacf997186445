"""Names, dimensions and dtypes of the saferl results cube (schema version 1).

The cube is an xarray Dataset with seven dimensions. ``reward`` and ``cost`` are required over all
seven; everything else (per-iterate variables, run manifest, attrs) is optional on read so that cubes
written by other tools can be evaluated.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import numpy as np

SCHEMA_VERSION = 1

DIMS: tuple[str, ...] = ("algo", "task", "bound", "seed", "iterate", "episode", "mode")
RUN_DIMS: tuple[str, ...] = ("algo", "task", "bound", "seed")
ITERATE_DIMS: tuple[str, ...] = (*RUN_DIMS, "iterate")
EPISODE_VARS: tuple[str, ...] = ("reward", "cost")
MODES: tuple[str, ...] = ("train", "expl", "greedy")
DEFAULT_ITERATE_VARS: tuple[str, ...] = ("env_steps", "multiplier")

RUN_STATUS = {"pending": 0, "partial": 1, "complete": 2}
RUN_STATUS_NAMES = {code: name for name, code in RUN_STATUS.items()}

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

    def __str__(self) -> str:
        return f"{self.algo}/{self.task}/d={self.bound:g}/seed={self.seed}"


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
