"""Off-policy safe RL: SAC, SAC-Lag and SAC-PID as crax-bench trains them, trained by `saferl train --algos
sac,sac_lag,sac_pid` through `train.runner` (`program`: the runner's program for them and the checks before
anything is written).

- `config`: `OffPolicyConfig` (every default with its source) and the replay memory check (no jax).
- `sac`, `sac_lag`, `sac_pid`: the algorithm records (`OffPolicyAlgorithm`), registered here in switch order.
- `replay`: crax's uniform replay buffer as a pure jax pytree (ring, same samples as crax's).
- `networks`, `losses`: crax's SAC networks and every loss/update as pure module-level functions.
- `core`: `make_offpolicy_train(config, env)` -> init / iterate / evaluate, vmappable over runs.

Importing this package needs no jax; `core`, `losses`, `networks` and `replay` do.
"""

from __future__ import annotations

from cube.errors import CubeError
from train.offpolicy.base import OffPolicyAlgorithm
from train.offpolicy.config import OffPolicyConfig, SacLagConfig, SacPidConfig
from train.offpolicy.sac import SAC
from train.offpolicy.sac_lag import SAC_LAG
from train.offpolicy.sac_pid import SAC_PID

OFFPOLICY_ALGORITHMS: tuple[OffPolicyAlgorithm, ...] = (SAC, SAC_LAG, SAC_PID)
"""The registry, in the off-policy program's switch order."""
assert [a.id for a in OFFPOLICY_ALGORITHMS] == list(range(len(OFFPOLICY_ALGORITHMS)))

OFFPOLICY_ALGOS: tuple[str, ...] = tuple(a.name for a in OFFPOLICY_ALGORITHMS)
"""Names as stored in the cube's `algo` coordinate."""


def offpolicy_algorithm(name: str) -> OffPolicyAlgorithm:
    """The record of `name` (one-line CubeError for an unknown name)."""
    for a in OFFPOLICY_ALGORITHMS:
        if a.name == name:
            return a
    raise CubeError(f"unknown off-policy algorithm '{name}'; choose from {', '.join(OFFPOLICY_ALGOS)}")


__all__ = ["OFFPOLICY_ALGORITHMS", "OFFPOLICY_ALGOS", "OffPolicyAlgorithm", "OffPolicyConfig", "SacLagConfig",
           "SacPidConfig", "offpolicy_algorithm"]
