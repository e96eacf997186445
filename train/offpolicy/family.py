"""The off-policy side of `train.runner`: compiled programs of SAC, SAC-Lag and SAC-PID runs and what the
runner records of their iterates, plus the checks `saferl train` runs before anything is written.

`OffPolicyProgram` has `train.runner.Program`'s interface (init / iterate / evaluate / member / stack /
payload / record), so the runner trains, writes, evaluates, checkpoints and resumes a group of off-policy
runs through the very same path as an on-policy one: vmapped over seeds and bounds, episodes written per
iterate, paired expl/greedy evaluations at the evaluation iterates (keys `train.core.eval_key`), the whole
`OffPolicyState` (replay buffer included) as the resume point.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from cube.errors import CubeError
from cube.schema import RunKey
from train.offpolicy import OFFPOLICY_ALGOS, offpolicy_algorithm
from train.offpolicy.config import OFFPOLICY_DIAGNOSTICS, OffPolicyConfig, check_replay_memory, from_train_config


def offpolicy_config(train_config: Any) -> OffPolicyConfig:
    """The `OffPolicyConfig` of a `TrainConfig` (shared fields and its `[offpolicy]` table; validated: a batch
    larger than the replay buffer and the like raise a one-line CubeError with the numbers)."""
    return from_train_config(train_config)


def check_offpolicy_plan(train_config: Any, algos: Sequence[str]) -> OffPolicyConfig | None:
    """Validate the off-policy config of a sweep that trains any of `algos` off-policy (no jax; None if none
    does). Runs before the store is created, so bad input writes nothing."""
    if not any(a in OFFPOLICY_ALGOS for a in algos):
        return None
    return offpolicy_config(train_config)


def offpolicy_group_fit(train_config: Any, obs_size: int, action_size: int, requested: int | None,
                        budget: tuple[int, str]) -> int:
    """Runs per group whose replay buffers fit `budget` = (bytes, where): `requested` if it fits, else the most
    that fit; CubeError (one line, the numbers) if not even one run's (or the requested group's) buffer does."""
    config = offpolicy_config(train_config)
    check_replay_memory(config, obs_size, action_size, requested or 1, budget)
    if requested:
        return requested
    per_run = check_replay_memory(config, obs_size, action_size, 1, budget)
    return max(1, budget[0] // per_run)


class OffPolicyProgram:
    """The compiled init / iterate / evaluate of a group of off-policy runs (`train.runner.Program`'s interface;
    host arrays come back with a leading run axis whatever the group's size). `cost_critic=False`: SAC runs
    only (crax's SAC trains no cost critic)."""

    def __init__(self, config: Any, env: Any, batched: bool, cost_critic: bool = True, n_runs: int = 1) -> None:
        import jax

        from train.offpolicy.core import make_offpolicy_train

        self.config, self.batched = config, batched
        self.off = offpolicy_config(config)
        axis = "runs" if batched else None
        t = make_offpolicy_train(self.off, env, axis_name=axis, cost_critic=cost_critic, n_runs=n_runs)
        if batched:
            self._init = jax.jit(jax.vmap(t.init))
            self._iterate = jax.jit(jax.vmap(t.iterate, axis_name="runs"))
            self._evaluate = jax.jit(jax.vmap(t.evaluate))
        else:
            self._init, self._iterate, self._evaluate = jax.jit(t.init), jax.jit(t.iterate), jax.jit(t.evaluate)
        self.trainer = t

    def init(self, keys: Sequence[RunKey]) -> Any:
        """The initial state of `keys` (seed, algorithm index, initial lambda, d/T)."""
        import jax
        import jax.numpy as jnp

        from train.algorithms import d_step

        algos = [offpolicy_algorithm(k.algo) for k in keys]
        args = (jnp.stack([jax.random.PRNGKey(k.seed) for k in keys]), jnp.asarray([a.id for a in algos], jnp.int32),
                jnp.asarray([a.initial_multiplier(self.off) for a in algos], jnp.float32),
                jnp.asarray([d_step(self.config, k.bound) for k in keys], jnp.float32))
        return self._init(*args) if self.batched else self._init(*(a[0] for a in args))

    def iterate(self, state: Any) -> tuple[Any, Any, np.ndarray]:
        """One iterate: (state, host copy of the output, host lambdas); the one transfer of the iterate."""
        import jax

        state, out = self._iterate(state)
        out, mult = jax.device_get((out, state.multiplier))
        return state, self._runs_axis(out), self._runs_axis(mult)

    def evaluate(self, state: Any, seeds: Sequence[int], iterate: int) -> Any:
        """Paired expl/greedy evaluation episodes of every run (host arrays `[runs, N]`; the on-policy keys)."""
        import jax
        import jax.numpy as jnp

        from train.core import eval_key

        keys = [eval_key(s, iterate) for s in seeds]
        keys = jnp.stack(keys) if self.batched else keys[0]
        return self._runs_axis(jax.device_get(self._evaluate(state.params, state.normalizer, keys)))

    def member(self, state: Any, i: int) -> Any:
        """The state of run i of the group."""
        import jax

        return jax.tree_util.tree_map(lambda x: x[i], state) if self.batched else state

    def stack(self, states: Sequence[Any]) -> Any:
        """The group state of the runs' states."""
        import jax
        import jax.numpy as jnp

        return jax.tree_util.tree_map(lambda *xs: jnp.stack(xs), *states) if self.batched else states[0]

    @staticmethod
    def payload(one: Any) -> dict[str, Any]:
        """The evaluation checkpoint of one run's state (policy, twin Qs, normaliser, lambda, log alpha)."""
        from train.offpolicy.core import checkpoint_payload

        return checkpoint_payload(one.params, one.normalizer, one.multiplier, one.learner.log_alpha)

    @staticmethod
    def record(algo: str, out: Any, mult: float) -> tuple[int, dict[str, float]]:
        """(env steps, per-iterate variables) of one run's host iterate output: lambda (NaN for SAC), gradient
        steps as `n_updates`, every off-policy diagnostic (alpha included)."""
        spec = offpolicy_algorithm(algo)
        values = {"multiplier": mult if spec.uses_multiplier else np.nan, "n_updates": int(out.n_updates),
                  **{k: float(out.metrics[k]) for k in OFFPOLICY_DIAGNOSTICS}}
        return int(out.env_steps), values

    def _runs_axis(self, tree: Any) -> Any:
        import jax

        return tree if self.batched else jax.tree_util.tree_map(lambda x: np.asarray(x)[None], tree)


def offpolicy_names(names: Sequence[str]) -> bool:
    """True if every name of `names` is off-policy, False if none is; CubeError for a mix (one program trains
    one family)."""
    off = {n in OFFPOLICY_ALGOS for n in names}
    if len(off) > 1:
        raise CubeError(f"{', '.join(sorted(set(names)))}: off-policy and on-policy runs cannot share a program")
    return off.pop()
