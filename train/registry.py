"""The algorithm registry: one record per algorithm of either family, looked up by name (no jax here).

A record (`train.algorithm.AlgorithmRecord` and its family's subtype) says the algorithm's family, whether it is
constrained, whether its program trains a cost critic, its config section (whose dataclass holds its defaults)
and initial multiplier, and the hooks its family's core calls. `register(record)` adds one and gives it its `id`,
its branch in its family's `lax.switch` (the family's cores build their switches from `algorithms(family)` when
they are built, so a program built after a registration serves the new algorithm too); the built-in ones are
registered below, in switch order. Adding a trainer: its record module, its losses if new, its config section,
and one line in `BUILT_IN` (docs/ARCHITECTURE.md).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import TypeVar

from cube.errors import CubeError
from train.algorithm import FAMILIES, FAMILY_TITLES, ONPOLICY, AlgorithmRecord
from train.offpolicy.sac import SAC
from train.offpolicy.sac_lag import SAC_LAG
from train.offpolicy.sac_pid import SAC_PID
from train.onpolicy.algorithms.crpo import CRPO
from train.onpolicy.algorithms.focops import FOCOPS
from train.onpolicy.algorithms.p3o import P3O
from train.onpolicy.algorithms.ppo import PPO
from train.onpolicy.algorithms.ppo_lag import PPO_LAG
from train.onpolicy.algorithms.ppo_pid import PPO_PID
from train.onpolicy.algorithms.ppo_saute import PPO_SAUTE

R = TypeVar("R", bound=AlgorithmRecord)

BUILT_IN: tuple[AlgorithmRecord, ...] = (PPO, PPO_LAG, P3O, FOCOPS, PPO_PID, PPO_SAUTE, CRPO, SAC, SAC_LAG, SAC_PID)
"""The built-in records, each family's in its switch order (PPO, PPO-Lag lambda, P3O kappa, FOCOPS nu, PPO-PID
lambda, PPO-Saute, CRPO; SAC, SAC-Lag, SAC-PID)."""

_RECORDS: dict[str, AlgorithmRecord] = {}
"""name -> registered record, in registration order."""


def register(record: R) -> R:
    """Add `record` to the registry; returns it with its `id` (its position among its family's records).
    ValueError for a name taken or an unknown family."""
    if record.name in _RECORDS:
        raise ValueError(f"algorithm '{record.name}' is registered already")
    if record.family not in FAMILIES:
        raise ValueError(f"{record.name}: unknown family '{record.family}' (families: {', '.join(FAMILIES)})")
    registered = dataclasses.replace(record, id=len(algorithms(record.family)))
    _RECORDS[record.name] = registered
    return registered


def unregister(name: str) -> None:
    """Remove the record `name` (its family's later records move up one branch); programs built before keep
    the switch they were built with."""
    record = _RECORDS.pop(name)
    for later in algorithms(record.family)[record.id:]:
        _RECORDS[later.name] = dataclasses.replace(later, id=later.id - 1)


def algorithms(family: str | None = None) -> tuple[AlgorithmRecord, ...]:
    """The registered records (of `family`), in registration order (a family's: its switch order)."""
    return tuple(r for r in _RECORDS.values() if family is None or r.family == family)


def algo_names(family: str | None = None) -> tuple[str, ...]:
    """Names of the registered algorithms (of `family`), in registration order."""
    return tuple(r.name for r in algorithms(family))


def algorithm(name: str, kind: type[R] = AlgorithmRecord) -> R:
    """The record of `name`; a one-line CubeError naming every algorithm for an unknown name, or naming the
    family's for a record that is not a `kind` (e.g. an off-policy name where an on-policy one is needed)."""
    record = _RECORDS.get(name)
    if record is None:
        raise CubeError(f"unknown algorithm '{name}'; choose from {', '.join(algo_names())}")
    if not isinstance(record, kind):
        wanted = [r for r in _RECORDS.values() if isinstance(r, kind)]
        family = FAMILY_TITLES.get(wanted[0].family, "") if wanted else kind.__name__
        raise CubeError(f"unknown {family} algorithm '{name}' (it is {FAMILY_TITLES.get(record.family)}); choose "
                        f"from {', '.join(r.name for r in wanted)}")
    return record


def family_of(names: Sequence[str]) -> str:
    """The one family that trains all of `names` (CubeError for a mix: one program trains one family)."""
    families = {algorithm(n).family for n in names}
    if len(families) != 1:
        raise CubeError(f"{', '.join(sorted(set(names)))}: algorithms of different families "
                        f"({', '.join(sorted(families))}) cannot share a program")
    return families.pop()


for _record in BUILT_IN:
    register(_record)

ALGOS: tuple[str, ...] = algo_names(ONPOLICY)
"""The built-in on-policy algorithms (the `crax-suite` preset's), in switch order."""
PAPER_ALGOS: tuple[str, ...] = tuple(r.name for r in BUILT_IN if r.paper)
"""The paper's four: PPO, PPO-Lag, P3O, FOCOPS."""
