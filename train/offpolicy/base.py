"""What an off-policy algorithm record is made of (no jax at import: the registry and the CLI need none).

An `OffPolicyAlgorithm` says how a run starts (its initial lambda), whether it trains the cost critic, and how
lambda moves after every gradient step; the networks, losses and replay are shared by all three (SAC is
SAC-Lag without the cost critic and with lambda fixed at 0, exactly as crax's two trainers differ).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from train.algorithm import OFFPOLICY, AlgorithmRecord
from train.offpolicy.config import OffPolicyConfig

if TYPE_CHECKING:
    import jax

    from train.multipliers import PIDState


@dataclass(frozen=True, kw_only=True)
class OffPolicyAlgorithm(AlgorithmRecord):
    """One off-policy algorithm.

    `multiplier_update(config, lam, pid, mean_cost, d_step) -> (lam, pid)` runs after every gradient step
    (mean_cost: the minibatch's mean per-step cost; d_step = d/T; pid: a `train.multipliers.PIDState`, carried
    by all algorithms, used by SAC-PID only). `config_section` names its field of `OffPolicyConfig`.
    """

    family: str = OFFPOLICY
    multiplier_update: Callable[[OffPolicyConfig, jax.Array, PIDState, jax.Array, jax.Array],
                                tuple[jax.Array, PIDState]]
