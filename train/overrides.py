"""Reading configs: TOML files of overrides, stored configs (run manifests, `run.json`), and back (no jax here).

`with_overrides(config, table)` applies a nested table of overrides (unknown keys, wrong types and bad values
are one-line CubeErrors); `load_toml` reads a file of them (top-level `TrainConfig` keys and its section tables
`[ppo_lag]`, `[p3o]`, ..., `[offpolicy]`); `config_to_dict` is what a manifest stores; `upgrade_stored_config`
reads a stored config in today's terms. A renamed key (`RENAMED_KEYS`: SAC-PID's `lambda_clip` and
`deriv_ema_beta`, now `PidConfig`'s `lambda_max` and `derivative_ema`) is accepted under its old name in TOML
files and stored configs; the new name is the one written.
"""

from __future__ import annotations

import dataclasses
import tomllib
from pathlib import Path
from typing import Any

from cube.errors import CubeError
from train.config import TrainConfig
from train.multipliers import PID_RENAMED

RENAMED_KEYS: dict[str, dict[str, str]] = {"offpolicy.sac_pid": PID_RENAMED}
"""Config tables (dotted path) -> {old key: current key} of keys renamed since stores were written."""


def _coerce(name: str, value: Any, default: Any) -> Any:
    if isinstance(default, str):
        if not isinstance(value, str):
            raise CubeError(f"config: {name} must be a string")
        return value
    if isinstance(default, tuple):
        if not isinstance(value, list) or not all(isinstance(v, int) for v in value):
            raise CubeError(f"config: {name} must be a list of integers")
        return tuple(value)
    if isinstance(default, bool):
        if not isinstance(value, bool):
            raise CubeError(f"config: {name} must be true or false")
        return value
    if isinstance(default, int):
        if isinstance(value, float) and value.is_integer():
            value = int(value)
        if not isinstance(value, int) or isinstance(value, bool):
            raise CubeError(f"config: {name} must be an integer")
        return value
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise CubeError(f"config: {name} must be a number")
    return float(value)


def _current_names(overrides: dict[str, Any], prefix: str) -> dict[str, Any]:
    """`overrides` of the table at `prefix` with the old names of RENAMED_KEYS under their current name."""
    renamed = RENAMED_KEYS.get(prefix.rstrip("."), {})
    out = {k: v for k, v in overrides.items() if k not in renamed}
    for old, new in renamed.items():
        if old in overrides:
            if new in overrides:
                raise CubeError(f"config: give {prefix}{new} only ({old} is its old name)")
            out[new] = overrides[old]
    return out


def _apply(obj: Any, overrides: dict[str, Any], prefix: str = "") -> Any:
    known = {f.name: f for f in dataclasses.fields(obj)}
    changes: dict[str, Any] = {}
    for key, value in _current_names(overrides, prefix).items():
        name = f"{prefix}{key}"
        if key not in known:
            raise CubeError(f"config: unknown key '{name}' (known: {', '.join(sorted(known))})")
        default = getattr(obj, key)
        if dataclasses.is_dataclass(default):
            if not isinstance(value, dict):
                raise CubeError(f"config: '{name}' must be a table")
            changes[key] = _apply(default, value, prefix=f"{name}.")
        else:
            changes[key] = _coerce(name, value, default)
    return dataclasses.replace(obj, **changes)


def with_overrides(config: TrainConfig, overrides: dict[str, Any]) -> TrainConfig:
    """Return `config` with nested `overrides` applied (unknown keys -> CubeError)."""
    new = _apply(config, overrides)
    new.validate()
    return new


NON_CONFIG_TABLES = ("cluster",)
"""TOML tables that are not TrainConfig overrides (`[cluster]` is read by `train.executors`)."""


def load_toml(path: str | Path, base: TrainConfig | None = None) -> TrainConfig:
    """Load a TOML file of overrides (top-level TrainConfig keys, tables [ppo_lag], [p3o], [focops],
    [ppo_pid], [ppo_saute], [crpo]).

    The `[cluster]` table (executor settings, see docs/cluster.md) is ignored here.
    """
    p = Path(path)
    try:
        data = tomllib.loads(p.read_text())
    except FileNotFoundError:
        raise CubeError(f"config file not found: {p}") from None
    except tomllib.TOMLDecodeError as exc:
        raise CubeError(f"config file {p} is not valid TOML: {exc}") from None
    for name in NON_CONFIG_TABLES:
        data.pop(name, None)
    return with_overrides(base or TrainConfig(), data)


def config_to_dict(config: TrainConfig) -> dict[str, Any]:
    """Plain JSON-able dict of the config (tuples become lists)."""
    return dataclasses.asdict(config)


ADDED_SECTIONS = ("ppo_pid", "ppo_saute", "crpo", "offpolicy")
"""Config sections added after stores were first written (the algorithms beyond the paper's four)."""


def upgrade_stored_config(config: dict[str, Any]) -> dict[str, Any]:
    """A manifest's config in today's terms: the sections it predates (`ADDED_SECTIONS`) at their defaults (a
    run written before they existed was trained exactly as a run of today's defaults for them: it did not use
    them), and the keys of RENAMED_KEYS under their current name (same values, same meaning)."""
    default = config_to_dict(TrainConfig())
    return _with_current_names({**{s: default[s] for s in ADDED_SECTIONS if s not in config}, **config})


def _with_current_names(table: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    """A stored table and its subtables with the keys of RENAMED_KEYS under their current name."""
    return {k: _with_current_names(v, f"{prefix}{k}.") if isinstance(v, dict) else v
            for k, v in _current_names(table, prefix).items()}
