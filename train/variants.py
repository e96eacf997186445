"""Variant labels: how a run's formulation differs from crax-bench's, in a few words (no jax here).

The formulation options (`train.config`) default to what crax-bench's own trainers do (`CRAX_OPTIONS`); the
alternatives this project trained with before are `LEGACY_OPTIONS`. `variant_label(config, algo)` names the
choice a stored config made for a run of `algo`: "crax", "legacy", or the options that differ ("reset=fresh
adv=gae", "saute.gamma_b=1 saute.reset=episode"); the runner writes it into every manifest (`variant`) and
`saferl status` shows it. docs/training.md explains each difference.
"""

from __future__ import annotations

from typing import Any

from train.config import TrainConfig
from train.overrides import config_to_dict
from train.registry import algorithm

LEGACY_OPTIONS: dict[str, Any] = {
    "reset": "fresh", "advantage": "gae", "ppo_lag.normalize_cost_advantage": True,
    "p3o.normalize_cost_advantage": True, "p3o.violation": "minibatch",
    "focops.normalize_cost_advantage": True, "focops.loss": "paper",
}
"""The formulation this project trained with before the crax defaults (stores whose manifests lack these
keys were trained so); `dataclasses.replace` them via `with_overrides(config, legacy_overrides())`."""


def legacy_overrides() -> dict[str, Any]:
    """LEGACY_OPTIONS as nested TOML-style overrides."""
    out: dict[str, Any] = {}
    for key, value in LEGACY_OPTIONS.items():
        section, _, name = key.rpartition(".")
        (out.setdefault(section, {}) if section else out)[name or key] = value
    return out


CRAX_OPTIONS: dict[str, Any] = {
    "reset": "replay", "advantage": "brax", "ppo_lag.normalize_cost_advantage": True,
    "p3o.normalize_cost_advantage": False, "p3o.violation": "previous_update",
    "focops.normalize_cost_advantage": False, "focops.loss": "crax",
    "ppo_pid.normalize_cost_advantage": True, "crpo.normalize_cost_advantage": True,
    "ppo_saute.budget_discount": "discount", "ppo_saute.reset_budget": "termination",
    "ppo_saute.clip_budget": True, "ppo_saute.normalize_budget_obs": True,
}
"""Every formulation option and how crax-bench's trainers do it ("discount": the config's discount)."""
_SHORT = {"reset": "reset", "advantage": "adv", "ppo_lag.normalize_cost_advantage": "lag.norm_cadv",
          "p3o.normalize_cost_advantage": "p3o.norm_cadv", "p3o.violation": "p3o.viol",
          "focops.normalize_cost_advantage": "focops.norm_cadv", "focops.loss": "focops.loss",
          "ppo_pid.normalize_cost_advantage": "pid.norm_cadv", "crpo.normalize_cost_advantage": "crpo.norm_cadv",
          "ppo_saute.budget_discount": "saute.gamma_b", "ppo_saute.reset_budget": "saute.reset",
          "ppo_saute.clip_budget": "saute.clip", "ppo_saute.normalize_budget_obs": "saute.norm_obs"}
PAPER_SECTIONS = ("ppo_lag", "p3o", "focops")


def variant_label(config: dict[str, Any] | None, algo: str | None = None) -> str:
    """Short name of a stored config's formulation for a run of `algo`: "crax" when every option that run
    uses is crax-bench's, "legacy" when every option of LEGACY_OPTIONS it uses is this project's earlier one
    (keys missing from an old manifest count as legacy), else the options that differ from crax's
    ("reset=fresh adv=gae ...", "saute.gamma_b=1 saute.reset=episode"). The options a run uses: the shared
    ones and its algorithm's section; `algo` None: the shared ones and the paper's algorithms' sections."""
    if not config:
        return ""
    sections = PAPER_SECTIONS if algo is None else (algorithm(algo).config_section,)
    default = config_to_dict(TrainConfig())
    parts, n_legacy, n_legacy_keys = [], 0, 0
    for key, crax in CRAX_OPTIONS.items():
        section, _, name = key.rpartition(".")
        if section and section not in sections:
            continue
        legacy = LEGACY_OPTIONS.get(key)
        fallback = legacy if key in LEGACY_OPTIONS else (default[section][name] if section else default[key])
        have = (config.get(section) or {}) if section else config
        value = have.get(name if section else key, fallback)
        want = config.get("discount", default["discount"]) if crax == "discount" else crax
        if key in LEGACY_OPTIONS:
            n_legacy_keys += 1
            n_legacy += value == legacy
        if value != want:
            shown = f"{value:g}" if isinstance(value, float) else str(value).lower()
            parts.append(f"{_SHORT[key]}={shown}")
    if n_legacy_keys and n_legacy == n_legacy_keys:
        return "legacy"
    return " ".join(parts) if parts else "crax"
