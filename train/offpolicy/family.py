"""The off-policy family's hooks of the group program (`train.program`): SAC, SAC-Lag and SAC-PID runs trained
by `train.offpolicy.core.make_offpolicy_train`, plus the checks `saferl train` runs before anything is written.

Through `OFFPOLICY_FAMILY` the runner trains, writes, evaluates, checkpoints and resumes a group of off-policy
runs through the very same path as an on-policy one: vmapped over seeds and bounds, episodes written per
iterate, paired expl/greedy evaluations at the evaluation iterates (`train.acting`), the whole `OffPolicyState`
(replay buffer included) as the resume point. A program is built per cost critic (SAC alone has none). No jax
at import.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np

from train.algorithm import OFFPOLICY, d_step
from train.config import TrainConfig
from train.envs import EnvFns, PyTree
from train.offpolicy.base import OffPolicyAlgorithm
from train.offpolicy.config import OFFPOLICY_DIAGNOSTICS, OffPolicyConfig, check_replay_memory, from_train_config
from train.registry import algo_names, algorithm

if TYPE_CHECKING:
    import jax

    from cube.schema import RunKey
    from train.offpolicy.core import OffPolicyIterateOut, OffPolicyState, OffPolicyTrainer
    from train.program import Flags, Payload

EVALUATION_MEMORY = (1 << 62, "an evaluation (no replay buffer is allocated)")
"""The memory budget a trainer built only to evaluate is checked against: it allocates no replay buffer."""


def offpolicy_config(train_config: TrainConfig) -> OffPolicyConfig:
    """The `OffPolicyConfig` of a `TrainConfig` (shared fields and its `[offpolicy]` table; validated: a batch
    larger than the replay buffer and the like raise a one-line CubeError with the numbers)."""
    return from_train_config(train_config)


def check_offpolicy_plan(train_config: TrainConfig, algos: Sequence[str]) -> OffPolicyConfig | None:
    """Validate the off-policy config of a sweep that trains any of `algos` off-policy (no jax; None if none
    does). Runs before the store is created, so bad input writes nothing."""
    if not set(algos) & set(algo_names(OFFPOLICY)):
        return None
    return offpolicy_config(train_config)


def offpolicy_group_fit(train_config: TrainConfig, obs_size: int, action_size: int, requested: int | None,
                        budget: tuple[int, str]) -> int:
    """Runs per group whose replay buffers fit `budget` = (bytes, where): `requested` if it fits, else the most
    that fit; CubeError (one line, the numbers) if not even one run's (or the requested group's) buffer does."""
    config = offpolicy_config(train_config)
    check_replay_memory(config, obs_size, action_size, requested or 1, budget)
    if requested:
        return requested
    per_run = check_replay_memory(config, obs_size, action_size, 1, budget)
    return max(1, budget[0] // per_run)


class OffPolicyFamily:
    """`train.program.TrainerFamily` of the SAC core."""

    name = OFFPOLICY

    def flags(self, algos: Sequence[str]) -> Flags:
        """(cost_critic,): a cost critic if any run needs one (crax's SAC trains none)."""
        return (any(algorithm(a, OffPolicyAlgorithm).cost_critic for a in algos),)

    def build(self, config: TrainConfig, env: EnvFns, flags: Flags, axis_name: str | None = None, n_runs: int = 1,
              for_evaluation: bool = False) -> OffPolicyTrainer:
        """`make_offpolicy_train` (its replay buffers checked against memory, unless `for_evaluation`)."""
        from train.offpolicy.core import make_offpolicy_train

        return make_offpolicy_train(offpolicy_config(config), env, axis_name=axis_name, cost_critic=bool(flags[0]),
                                    n_runs=n_runs, memory=EVALUATION_MEMORY if for_evaluation else None)

    def init_args(self, config: TrainConfig, keys: Sequence[RunKey]) -> tuple[jax.Array, ...]:
        """(seed keys `[runs, 2]`, algorithm ids, initial lambdas, d/T)."""
        import jax
        import jax.numpy as jnp

        off = offpolicy_config(config)
        records = [algorithm(k.algo, OffPolicyAlgorithm) for k in keys]
        return (jnp.stack([jax.random.PRNGKey(k.seed) for k in keys]), jnp.asarray([a.id for a in records], jnp.int32),
                jnp.asarray([a.initial_multiplier(off) for a in records], jnp.float32),
                jnp.asarray([d_step(config, k.bound) for k in keys], jnp.float32))

    def payload(self, one: OffPolicyState) -> Payload:
        """Policy, twin Qs, normaliser, lambda, log alpha."""
        from train.offpolicy.core import checkpoint_payload

        return checkpoint_payload(one.params, one.normalizer, one.multiplier, one.learner.log_alpha)

    def params(self, payload: Payload) -> PyTree:
        from train.offpolicy.core import OffPolicyParams

        return OffPolicyParams(payload["policy"], payload["q"], payload["cost_q"])

    def record(self, config: TrainConfig, algo: str, out: OffPolicyIterateOut,
               mult: float) -> tuple[int, dict[str, float]]:
        """lambda (NaN for SAC), gradient steps as `n_updates`, every off-policy diagnostic (alpha included)."""
        spec = algorithm(algo, OffPolicyAlgorithm)
        values = {"multiplier": mult if spec.uses_multiplier else np.nan, "n_updates": int(out.n_updates),
                  **{k: float(out.metrics[k]) for k in OFFPOLICY_DIAGNOSTICS}}
        return int(out.env_steps), values

    def resume_templates(self, template: OffPolicyState) -> list[PyTree]:
        """None: every off-policy resume point has today's structure."""
        return []

    def upgrade(self, loaded: OffPolicyState, fresh: OffPolicyState) -> OffPolicyState:
        return loaded


OFFPOLICY_FAMILY = OffPolicyFamily()
