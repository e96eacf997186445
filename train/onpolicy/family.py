"""The on-policy family's hooks of the group program (`train.program`): PPO, PPO-Lag, P3O, FOCOPS, PPO-PID,
PPO-Saute, CRPO and any registered on-policy record, trained by `train.onpolicy.core.make_train`.

A program is built per (cost critic, env adapter): PPO-only (and PPO-Saute) groups skip the cost critic, as
crax's PPO; PPO-Saute's runs train on its budget task and share a program only with each other. No jax at
import.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np

from cube.errors import CubeError
from train.algorithm import ONPOLICY, d_step
from train.config import TrainConfig
from train.envs import EnvFns, PyTree
from train.onpolicy.algorithms.base import Algorithm
from train.record import DIAGNOSTICS
from train.registry import algorithm

if TYPE_CHECKING:
    import jax

    from cube.schema import RunKey
    from train.onpolicy.core import IterateOut, Trainer, TrainState
    from train.program import Flags, Payload


def iterate_values(algo: Algorithm, metrics: dict[str, np.ndarray], algo_state: np.ndarray,
                   algo_state_mean: np.ndarray) -> dict[str, float]:
    """The per-iterate variables of an algorithm's own (`Algorithm.iterate_vars`) from an iterate's output:
    its diagnostics from `metrics`, its state variables from the state after the iterate or (StateVar.mean)
    the mean state the iterate's updates used (`[STATE_SIZE]` each)."""
    out = {name: float(metrics[name]) for name in algo.diagnostics}
    for v in algo.state_vars:
        out[v.name] = float((algo_state_mean if v.mean else algo_state)[v.slot])
    return out


class OnPolicyFamily:
    """`train.program.TrainerFamily` of the PPO core."""

    name = ONPOLICY

    def flags(self, algos: Sequence[str]) -> Flags:
        """(cost_critic, env_adapter): the cost critic if any run needs it; one adapter for all (CubeError for
        a mix: their tasks, so their networks, differ)."""
        records = [algorithm(a, Algorithm) for a in algos]
        adapters = {r.env_adapter for r in records}
        if len(adapters) > 1:
            own = sorted({r.name for r in records if r.env_adapter is not None})
            raise CubeError(f"{', '.join(own)} cannot share a program with "
                            f"{', '.join(sorted({r.name for r in records} - set(own)))} (they train on another task)")
        return any(r.cost_critic for r in records), adapters.pop()

    def build(self, config: TrainConfig, env: EnvFns, flags: Flags, axis_name: str | None = None, n_runs: int = 1,
              for_evaluation: bool = False) -> Trainer:
        from train.onpolicy.core import make_train

        cost_critic, adapter = flags
        return make_train(config, env, axis_name=axis_name, cost_critic=bool(cost_critic), adapter=adapter)

    def init_args(self, config: TrainConfig, keys: Sequence[RunKey]) -> tuple[jax.Array, ...]:
        """(seed keys `[runs, 2]`, algorithm ids, initial multipliers, d/T, initial states `[runs, STATE_SIZE]`)."""
        import jax
        import jax.numpy as jnp

        records = [algorithm(k.algo, Algorithm) for k in keys]
        return (jnp.stack([jax.random.PRNGKey(k.seed) for k in keys]), jnp.asarray([r.id for r in records], jnp.int32),
                jnp.asarray([r.initial_multiplier(config) for r in records], jnp.float32),
                jnp.asarray([d_step(config, k.bound) for k in keys], jnp.float32),
                jnp.asarray([r.start_state(config) for r in records], jnp.float32))

    def payload(self, one: TrainState) -> Payload:
        from train.onpolicy.core import checkpoint_payload

        return checkpoint_payload(one.params, one.normalizer, one.multiplier)

    def params(self, payload: Payload) -> PyTree:
        from train.onpolicy.core import Params

        return Params(payload["policy"], payload["value"], payload["cost_value"])

    def record(self, config: TrainConfig, algo: str, out: IterateOut, mult: float) -> tuple[int, dict[str, float]]:
        """Env steps = updates x steps per update x envs; the multiplier (NaN for an algorithm without one),
        updates, the shared diagnostics and the algorithm's own variables."""
        spec = algorithm(algo, Algorithm)
        values = {"multiplier": mult if spec.uses_multiplier else np.nan, "n_updates": int(out.n_updates),
                  **{k: float(out.metrics[k]) for k in DIAGNOSTICS},
                  **iterate_values(spec, out.metrics, np.asarray(out.algo_state), np.asarray(out.algo_state_mean))}
        return int(out.n_updates) * config.steps_per_update * config.num_envs, values

    def resume_templates(self, template: TrainState) -> list[PyTree]:
        """The state without `algo_state`: resume points written before runs carried one (the algorithms of that
        time had none)."""
        return [template._replace(algo_state=None)]

    def upgrade(self, loaded: TrainState, fresh: TrainState) -> TrainState:
        """A resume point without `algo_state` goes on from the run's initial (unused) state."""
        return loaded._replace(algo_state=fresh.algo_state) if loaded.algo_state is None else loaded


ONPOLICY_FAMILY = OnPolicyFamily()
