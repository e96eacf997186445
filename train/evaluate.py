"""`saferl evaluate`: roll out checkpoints stored next to a cube and write their paired expl/greedy episodes.

A checkpoint (`train.checkpoint.save`, written at evaluation iterates) holds the policy and the observation
normaliser of one run (its family's `TrainerFamily.payload`). Its evaluation is the trainer's own paired evaluator
(`train.acting`), compiled once per task, config and program, with the training-time evaluation key
`eval_key(seed, iterate)`: evaluating an iterate that training evaluated writes the same episodes again.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from cube.errors import CubeError
from cube.schema import RunKey, same_bound
from train import checkpoint
from train.algorithm import d_step
from train.config import TrainConfig
from train.envs import EnvFns
from train.program import Flags, Payload, TrainerFamily, trainer_family
from train.registry import algorithm

if TYPE_CHECKING:
    import jax

    from train.rollout import EvalOut


class Evaluator:
    """One compiled evaluation of a (task, config, program): `rollout(payload, key, d_step) -> EvalOut`."""

    def __init__(self, fam: TrainerFamily, flags: Flags, cfg: TrainConfig, env: EnvFns) -> None:
        import jax

        trainer = fam.build(cfg, env, flags, for_evaluation=True)
        self.family = fam
        self.template = trainer.template()
        self._evaluate = jax.jit(trainer.evaluate)

    def rollout(self, payload: Payload, key: jax.Array, d: float) -> EvalOut:
        """The paired episodes of a restored payload (host arrays `[N]` each)."""
        import jax

        from train.nets import Normalizer

        params = self.family.params(payload)
        return jax.device_get(self._evaluate(params, Normalizer(**payload["normalizer"]), key, d))


def evaluate_store(store: str | Path, iterate: int, algos: Sequence[str] | None = None,
                   tasks: Sequence[str] | None = None, bounds: Sequence[float] | None = None,
                   seeds: Sequence[int] | None = None, env_factory: Callable[[str, int], EnvFns] | None = None,
                   report: Callable[[str], None] = print) -> int:
    """Roll out stored checkpoints at `iterate` and write their expl/greedy episodes; returns runs done."""
    from cube import CubeWriter, read_manifests
    from train.acting import eval_key
    from train.overrides import with_overrides

    if env_factory is None:
        from train.envs import make_crax_env

        env_factory = make_crax_env
    rows = read_manifests(store)

    def wanted(row: dict[str, Any]) -> bool:
        return ((algos is None or row["algo"] in algos) and (tasks is None or row["task"] in tasks)
                and (bounds is None or bool(same_bound(bounds, row["bound"]).any()))
                and (seeds is None or row["seed"] in seeds))

    keys = [RunKey.from_dict(r) for r in rows if wanted(r)]
    keys = [k for k in keys if iterate in checkpoint.available_iterates(store, k)]
    if not keys:
        raise CubeError(f"no checkpoint at iterate {iterate} in {store} for the selected runs; "
                        "train with --eval-every or pick an evaluated iterate")
    writer = CubeWriter(store)
    cache: dict[tuple[str, str, str, Flags], Evaluator] = {}
    report(f"evaluating {len(keys)} run(s) at iterate {iterate}")
    for i, key in enumerate(keys, 1):
        cfg = with_overrides(TrainConfig(), checkpoint.read_run_meta(store, key)["config"])
        fam = trainer_family(algorithm(key.algo).family)
        flags = fam.flags([key.algo])
        ck = (key.task, repr(cfg), fam.name, flags)
        if ck not in cache:
            report(f"[{i}/{len(keys)}] {key}: building the env and compiling the evaluation (a first compile on a "
                   "CPU takes minutes)...")
            cache[ck] = Evaluator(fam, flags, cfg, env_factory(key.task, cfg.episode_length))
        ev_fn = cache[ck]
        payload = checkpoint.load(store, key, iterate, ev_fn.template)
        ev = ev_fn.rollout(payload, eval_key(key.seed, iterate), d_step(cfg, key.bound))
        writer.write_episodes(key, "expl", iterate, ev.expl_reward, ev.expl_cost)
        writer.write_episodes(key, "greedy", iterate, ev.greedy_reward, ev.greedy_cost)
        report(f"[{i}/{len(keys)}] {key}: iterate {iterate}: expl cost {np.mean(ev.expl_cost):.2f}, "
               f"greedy cost {np.mean(ev.greedy_cost):.2f} (d={key.bound:g}, {len(ev.expl_cost)} episodes each)")
    return len(keys)
