"""`saferl evaluate`: roll out checkpoints stored next to a cube and write their paired expl/greedy episodes.

A checkpoint (`train.checkpoint.save`, written at evaluation iterates) holds the policy and the observation
normaliser of one run: on-policy runs `core.checkpoint_payload`, off-policy runs (SAC, SAC-Lag, SAC-PID)
`offpolicy.core.checkpoint_payload`. Its evaluation is the trainer's own, compiled once per task, config
and family, with the training-time evaluation key `core.eval_key(seed, iterate)`: evaluating an iterate
that training evaluated writes the same episodes again.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from cube.errors import CubeError
from cube.schema import RunKey
from train import checkpoint
from train.algorithms import algorithm, d_step, is_offpolicy
from train.config import TrainConfig

EVALUATION_MEMORY = (1 << 62, "an evaluation (no replay buffer is allocated)")
"""The memory budget given to the off-policy trainer's builder here: evaluating allocates no replay buffer."""


class Evaluator:
    """One compiled evaluation of a (task, config, family): `rollout(payload, key, d_step) -> EvalOut`."""

    def __init__(self, algo: str, cfg: TrainConfig, env: Any) -> None:
        import jax

        if is_offpolicy(algo):
            from train.offpolicy.core import make_offpolicy_train
            from train.offpolicy.program import offpolicy_config

            trainer: Any = make_offpolicy_train(offpolicy_config(cfg), env, cost_critic=algo != "sac",
                                                memory=EVALUATION_MEMORY)
        else:
            from train.core import make_train

            trainer = make_train(cfg, env, budget=algorithm(algo).budget)
        self.offpolicy = is_offpolicy(algo)
        self.template = trainer.template()
        self._evaluate = jax.jit(trainer.evaluate)

    def rollout(self, payload: dict[str, Any], key: Any, d: Any) -> Any:
        """The paired episodes of a restored payload (host arrays [N] each)."""
        import jax

        from train.nets import Normalizer

        if self.offpolicy:
            from train.offpolicy.core import OffPolicyParams

            params: Any = OffPolicyParams(payload["policy"], payload["q"], payload["cost_q"])
        else:
            from train.core import Params

            params = Params(payload["policy"], payload["value"], payload["cost_value"])
        return jax.device_get(self._evaluate(params, Normalizer(**payload["normalizer"]), key, d))


def evaluate_store(store: str | Path, iterate: int, algos: Sequence[str] | None = None,
                   tasks: Sequence[str] | None = None, bounds: Sequence[float] | None = None,
                   seeds: Sequence[int] | None = None, env_factory: Callable[..., Any] | None = None,
                   report: Callable[[str], None] = print) -> int:
    """Roll out stored checkpoints at `iterate` and write their expl/greedy episodes; returns runs done."""
    from cube import CubeWriter, read_manifests
    from train.config import with_overrides
    from train.core import eval_key

    if env_factory is None:
        from train.envs import make_crax_env

        env_factory = make_crax_env
    rows = read_manifests(store)

    def wanted(row: dict[str, Any]) -> bool:
        return ((algos is None or row["algo"] in algos) and (tasks is None or row["task"] in tasks)
                and (bounds is None or any(np.isclose(row["bound"], b) for b in bounds))
                and (seeds is None or row["seed"] in seeds))

    keys = [RunKey.from_dict(r) for r in rows if wanted(r)]
    keys = [k for k in keys if iterate in checkpoint.available_iterates(store, k)]
    if not keys:
        raise CubeError(f"no checkpoint at iterate {iterate} in {store} for the selected runs; "
                        "train with --eval-every or pick an evaluated iterate")
    writer = CubeWriter(store)
    cache: dict[tuple[str, str, Any], Evaluator] = {}
    for key in keys:
        cfg = with_overrides(TrainConfig(), checkpoint.read_run_meta(store, key)["config"])
        family = ("offpolicy", key.algo != "sac") if is_offpolicy(key.algo) else algorithm(key.algo).budget
        ck = (key.task, repr(cfg), family)
        if ck not in cache:
            cache[ck] = Evaluator(key.algo, cfg, env_factory(key.task, cfg.episode_length))
        ev_fn = cache[ck]
        payload = checkpoint.load(store, key, iterate, ev_fn.template)
        ev = ev_fn.rollout(payload, eval_key(key.seed, iterate), d_step(cfg, key.bound))
        writer.write_episodes(key, "expl", iterate, ev.expl_reward, ev.expl_cost)
        writer.write_episodes(key, "greedy", iterate, ev.greedy_reward, ev.greedy_cost)
        report(f"{key}: iterate {iterate}: expl cost {np.mean(ev.expl_cost):.2f}, "
               f"greedy cost {np.mean(ev.greedy_cost):.2f} (d={key.bound:g}, {len(ev.expl_cost)} episodes each)")
    return len(keys)
