"""The off-policy family: SAC, SAC-Lag and SAC-PID as crax-bench trains them, trained by `saferl train --algos
sac,sac_lag,sac_pid` through `train.runner` and `train.program` like the on-policy family.

- `config`: `OffPolicyConfig` (every default with its source), its `[offpolicy]` table and the replay memory
  check (no jax).
- `base`, `sac`, `sac_lag`, `sac_pid`: the record type and the three records (`train.registry` registers them).
- `replay`: crax's uniform replay buffer as a pure jax pytree (ring, same samples as crax's).
- `networks`, `losses`: crax's SAC networks and every loss as pure module-level functions (the multiplier
  rules are the floor's, `train.multipliers`).
- `core`: `make_offpolicy_train(config, env)` -> init / iterate / evaluate, vmappable over runs.
- `family`: the family's hooks of the group program (`OFFPOLICY_FAMILY`) and the checks `saferl train` runs
  before anything is written (replay buffers against memory).

Importing this package needs no jax; `core`, `losses`, `networks` and `replay` do.
"""

from __future__ import annotations

from train.offpolicy.config import OffPolicyConfig, SacLagConfig

__all__ = ["OffPolicyConfig", "SacLagConfig"]
