"""Off-policy learning parity: `train.offpolicy` and crax-bench's own SAC / SAC-Lag / SAC-PID `train()`, same
task, config and seeds, side by side in this process (ours is driven through `make_offpolicy_train`
directly; `saferl train` runs the same core through `train.offpolicy.family`).

Printed per algorithm and seed: the mean train episode reward / cost of both every few iterates (an iterate
= num_envs * T env steps for both: crax's epoch is set to the same size), lambda and alpha after the last
iterate, the final expl/greedy evaluation of both (crax's final policy is rolled out by our evaluator with the
same paired initial states), env steps/s of both with compile excluded (iterates / epochs 2..J) and their
ratio. crax gets every value explicitly (its `train()` keyword defaults differ from its CLI's); its per-epoch
evaluator is replaced by a no-op, its per-step metrics host callback stays (it cannot be turned off). crax's
train numbers are its logger's `episodic/sum_reward` and `episodic/cost` over the episodes that ended in the
epoch (means of at most its last 10 per-step means; all envs end together here, so that is all of them).

    .venv/bin/python bench/offpolicy_parity.py                       # CPU: circle, 32 envs, T 200, 8 iterates
    .venv/bin/python bench/offpolicy_parity.py --tiny                # logic check, a few minutes
    python3 bench/offpolicy_parity.py --paper --iterates 2           # GPU: crax's CLI sizes (2048 envs, T 2000)
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import functools
import importlib
import io
import sys
import tempfile
import time
from pathlib import Path
from typing import Any
from unittest import mock

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def _args() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--task", default="circle")
    p.add_argument("--algos", default="sac,sac_lag,sac_pid")
    p.add_argument("--seeds", default="0")
    p.add_argument("--bound", type=float, default=2.5, help="d (default 2.5 at T 200: d/T as the paper's 25/2000)")
    p.add_argument("--iterates", type=int, default=8, help="J: iterates of num_envs episodes each")
    p.add_argument("--num-envs", type=int, default=32)
    p.add_argument("--episode-length", type=int, default=200)
    p.add_argument("--batch-size", type=int, default=256)
    p.add_argument("--grad-updates", type=int, default=4, help="gradient steps per actor step")
    p.add_argument("--hidden", default="64,64")
    p.add_argument("--replay", type=int, default=100_000, help="max_replay_size")
    p.add_argument("--eval-episodes", type=int, default=32)
    p.add_argument("--every", type=int, default=0, help="print every k-th iterate (0: about 8 rows)")
    p.add_argument("--paper", action="store_true", help="crax's CLI sizes: 2048 envs, T 2000, batch 1024 x 32, "
                                                        "256 x 2 networks, replay 1e6, 100 eval episodes")
    p.add_argument("--tiny", action="store_true", help="a tiny config to check this script (CPU, minutes)")
    return p.parse_args()


def make_config(a: argparse.Namespace) -> Any:
    from train.offpolicy import OffPolicyConfig

    if a.paper:
        cfg = OffPolicyConfig()  # every default is crax's CLI value
    elif a.tiny:
        cfg = OffPolicyConfig(num_envs=8, episode_length=40, batch_size=32, grad_updates_per_step=2,
                              hidden=(16, 16), max_replay_size=10_000, eval_episodes=4)
    else:
        cfg = OffPolicyConfig(num_envs=a.num_envs, episode_length=a.episode_length, batch_size=a.batch_size,
                              grad_updates_per_step=a.grad_updates, hidden=tuple(int(h) for h in a.hidden.split(",")),
                              max_replay_size=a.replay, eval_episodes=a.eval_episodes)
    iterates = 3 if a.tiny else a.iterates
    return dataclasses.replace(cfg, total_env_steps=iterates * cfg.num_envs * cfg.episode_length)


# ------------------------------------------------------------------------------------------- ours
def run_ours(program: dict[str, Any], cfg: Any, algo: str, bound: float, seed: int) -> dict[str, Any]:
    import jax

    from train.acting import eval_key
    from train.offpolicy.base import OffPolicyAlgorithm
    from train.registry import algorithm

    a = algorithm(algo, OffPolicyAlgorithm)
    trainer = program["trainer"]
    state = program["init"](jax.random.PRNGKey(seed), a.id, a.initial_multiplier(cfg), bound / cfg.episode_length)
    rewards, costs, walls = [], [], []
    for _ in range(cfg.n_iterates):
        t0 = time.perf_counter()
        state, out = program["iterate"](state)
        out = jax.device_get(out)
        walls.append(time.perf_counter() - t0)
        done = out.episodes.count > 0
        rewards.append(float(np.nanmean(out.episodes.reward[:, done])))
        costs.append(float(np.nanmean(out.episodes.cost[:, done])))
    ev = program["evaluate"](state.params, state.normalizer, eval_key(seed, cfg.n_iterates - 1))
    steps = cfg.iterate_env_steps
    sps = steps * (len(walls) - 1) / sum(walls[1:]) if len(walls) > 1 else float("nan")
    return {"reward": np.array(rewards), "cost": np.array(costs), "eval": summarize(ev), "sps": sps,
            "compile_s": walls[0] - (sum(walls[1:]) / max(len(walls) - 1, 1)),
            "lambda": float(state.multiplier), "alpha": float(out.metrics["alpha"]), "trainer": trainer}


def summarize(ev: Any) -> dict[str, tuple[float, float]]:
    return {"expl": (float(np.mean(ev.expl_reward)), float(np.mean(ev.expl_cost))),
            "greedy": (float(np.mean(ev.greedy_reward)), float(np.mean(ev.greedy_cost)))}


# ------------------------------------------------------------------------------------------- crax
class NoEvaluator:
    """Stands in for crax's `acting.Evaluator` (its per-epoch rollouts and their compile are skipped; crax's final
    policy goes through our evaluator). Training is untouched."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        pass

    def run_evaluation(self, *args: Any, **kwargs: Any) -> dict[str, float]:
        return {}


def device_put_replicated(x: Any, devices: Any) -> Any:
    """`jax.device_put_replicated`, removed in jax 0.10, which crax-bench 0.1.0 pins, yet still called by crax's
    off-policy trainers (`sac/train.py`, `sac_lag/train.py`: `_init_training_state`): a leading device axis."""
    import jax

    stacked = jax.tree_util.tree_map(lambda a: np.stack([np.asarray(a)] * len(devices)), x)
    return jax.device_put(stacked, devices[0])


def crax_kwargs(algo: str, cfg: Any, bound: float) -> dict[str, Any]:
    """The algorithm's own values, explicitly."""
    if algo == "sac":
        return {}
    if algo == "sac_lag":
        c = cfg.sac_lag
        return {"safety_bound": bound, "lagrangian_lr": c.lr, "initial_lambda": c.init, "lambda_max": c.lambda_max}
    c = cfg.sac_pid
    return {"safety_bound": bound, "initial_lambda": c.init, "pid_kp": c.kp, "pid_ki": c.ki, "pid_kd": c.kd,
            "pid_integral_clip": c.integral_clip, "pid_lambda_clip": c.lambda_max,
            "pid_deriv_ema_beta": c.derivative_ema}


def run_crax(algo: str, cfg: Any, task: str, bound: float, seed: int, evaluate: Any) -> dict[str, Any]:
    from train.config import TASKS
    from train.envs import import_crax

    envs = import_crax()
    mod = importlib.import_module(f"crax.training.agents.{algo}.train")
    if algo == "sac":
        nets = importlib.import_module("crax.training.agents.sac.networks")
        factory = functools.partial(nets.make_sac_networks, hidden_layer_sizes=cfg.hidden)
    else:
        nets = importlib.import_module("crax.training.agents.sac_lag.networks")
        factory = functools.partial(nets.make_sac_lag_networks, hidden_layer_sizes=cfg.hidden)
    env = envs.get_environment(TASKS[task], level=1, episode_length=cfg.episode_length)
    J, per_iterate = cfg.n_iterates, cfg.iterate_env_steps
    logs: list[dict[str, float]] = []
    epochs: list[dict[str, float]] = []

    def progress(step: int, metrics: dict[str, Any]) -> None:
        if "episodic/sum_reward" in metrics:
            logs.append({"step": step, "reward": float(metrics["episodic/sum_reward"]),
                         "cost": float(metrics.get("episodic/cost", np.nan))})
        if "training/walltime" in metrics and all(e["step"] != step for e in epochs):
            epochs.append({"step": step, "walltime": float(metrics["training/walltime"]),
                           "lambda": float(metrics.get("training/lambda_lagr", np.nan)),
                           "alpha": float(metrics.get("training/alpha", np.nan))})

    acting = importlib.import_module("crax.training.acting")
    # SAC: J outer iterations of training_metrics_steps; SAC-Lag/PID: num_evals - 1 epochs; both of T actor steps
    schedule = {"num_evals": 0} if algo == "sac" else {"num_evals": J + 1}
    import jax

    with contextlib.redirect_stdout(io.StringIO()), mock.patch.object(acting, "Evaluator", NoEvaluator), \
            mock.patch.object(jax, "device_put_replicated", device_put_replicated, create=True):
        _, params, _, _ = mod.train(
            environment=env, num_timesteps=J * per_iterate, episode_length=cfg.episode_length,
            num_envs=cfg.num_envs, learning_rate=cfg.learning_rate, discounting=cfg.discount, seed=seed,
            batch_size=cfg.batch_size, normalize_observations=cfg.normalize_observations,
            reward_scaling=cfg.reward_scaling, tau=cfg.tau, min_replay_size=cfg.min_replay_size,
            max_replay_size=cfg.max_replay_size, grad_updates_per_step=cfg.grad_updates_per_step,
            num_eval_envs=1, training_metrics_steps=per_iterate, network_factory=factory, progress_fn=progress,
            **schedule, **crax_kwargs(algo, cfg, bound))
    walls = np.diff([0.0] + [e["walltime"] for e in epochs])
    steps = np.diff([0] + [e["step"] for e in epochs]).astype(float)
    sps = steps[1:].sum() / walls[1:].sum() if len(walls) > 1 else float("nan")
    compile_s = walls[0] - steps[0] * walls[1:].sum() / steps[1:].sum() if len(walls) > 1 else float("nan")
    return {"reward": np.array([x["reward"] for x in logs]), "cost": np.array([x["cost"] for x in logs]),
            "eval": evaluate(params), "sps": sps, "compile_s": compile_s,
            "lambda": epochs[-1]["lambda"] if epochs else float("nan"),
            "alpha": epochs[-1]["alpha"] if epochs else float("nan")}


def crax_evaluator(program: dict[str, Any], seed: int, iterate: int) -> Any:
    """Roll out crax's final (normalizer, policy) with our compiled evaluator: same keys as ours."""
    from train.acting import eval_key
    from train.nets import Normalizer
    from train.offpolicy.core import OffPolicyParams

    template = program["trainer"].template()  # critics unused by the evaluator; same tree, no new compile

    def evaluate(params: Any) -> dict[str, tuple[float, float]]:
        norm, policy = params[:2]
        ours = Normalizer(norm.count, norm.mean, norm.summed_variance, norm.std)
        full = OffPolicyParams(policy, template["q"], template["cost_q"])
        return summarize(program["evaluate"](full, ours, eval_key(seed, iterate)))

    return evaluate


# ------------------------------------------------------------------------------------------- report
def report(algo: str, cfg: Any, seeds: list[int], ours: dict[int, Any], crax: dict[int, Any], every: int) -> None:
    J = cfg.n_iterates
    every = every or max(1, J // 8)
    rows = sorted(set(range(0, J, every)) | {J - 1})
    print(f"\n== {algo}: per-iterate mean train episode reward / cost (ours | crax), seeds {seeds}")
    print(f"{'iterate':>7}  " + "  ".join(f"seed {s}: ours r/c      crax r/c   " for s in seeds))
    for j in rows:
        cells = []
        for s in seeds:
            o, c = ours[s], crax[s]
            cr = f"{c['reward'][j]:7.2f} /{c['cost'][j]:6.2f}" if j < len(c["reward"]) else f"{'-':>7} /{'-':>6}"
            cells.append(f"{o['reward'][j]:7.2f} /{o['cost'][j]:6.2f} | {cr}")
        print(f"{j:>7}  " + "  ".join(cells))
    print(f"after iterate {J - 1}: lambda / alpha (ours: the values after it; crax: its last epoch's means), and "
          f"the final evaluation ({cfg.eval_episodes} paired episodes, our evaluator for both), reward / cost:")
    for s in seeds:
        o, c = ours[s], crax[s]
        print(f"  seed {s}: lambda ours {o['lambda']:.4g} crax {c['lambda']:.4g}; alpha ours {o['alpha']:.4g} "
              f"crax {c['alpha']:.4g}")
        oe, ce = o["eval"], c["eval"]
        print(f"  seed {s}: ours expl {oe['expl'][0]:7.2f} / {oe['expl'][1]:6.2f}  greedy {oe['greedy'][0]:7.2f} / "
              f"{oe['greedy'][1]:6.2f} | crax expl {ce['expl'][0]:7.2f} / {ce['expl'][1]:6.2f}  greedy "
              f"{ce['greedy'][0]:7.2f} / {ce['greedy'][1]:6.2f}")
        print(f"  seed {s}: env steps/s ours {o['sps']:,.0f} crax {c['sps']:,.0f} ratio {o['sps'] / c['sps']:.2f}x; "
              f"compile ours {o['compile_s']:.0f} s crax {c['compile_s']:.0f} s")
    sys.stdout.flush()


def main() -> int:
    a = _args()
    cfg = make_config(a)
    import jax

    from train.envs import make_crax_env
    from train.offpolicy.base import OffPolicyAlgorithm
    from train.offpolicy.core import make_offpolicy_train
    from train.registry import algorithm

    algos, seeds = a.algos.split(","), [int(s) for s in a.seeds.split(",")]
    print(f"device: {jax.devices()[0].device_kind} ({jax.default_backend()}); task {a.task}, bound {a.bound:g} "
          f"(d/T {a.bound / cfg.episode_length:g}); envs {cfg.num_envs}, T {cfg.episode_length}, J {cfg.n_iterates}, "
          f"batch {cfg.batch_size} x {cfg.grad_updates_per_step} per actor step, hidden {list(cfg.hidden)}, replay "
          f"{cfg.max_replay_size:,}, lr {cfg.learning_rate:g}, reward scaling {cfg.reward_scaling:g}", flush=True)
    env = make_crax_env(a.task, cfg.episode_length)
    with tempfile.TemporaryDirectory() as tmp:
        jax.config.update("jax_compilation_cache_dir", str(Path(tmp) / "jaxcache"))
        jax.config.update("jax_persistent_cache_min_compile_time_secs", 1.0)
        programs: dict[bool, dict[str, Any]] = {}
        for algo in algos:
            cost_critic = algorithm(algo, OffPolicyAlgorithm).cost_critic
            if cost_critic not in programs:
                t = make_offpolicy_train(cfg, env, cost_critic=cost_critic)
                programs[cost_critic] = {"trainer": t, "init": jax.jit(t.init), "iterate": jax.jit(t.iterate),
                                         "evaluate": jax.jit(t.evaluate)}
            program = programs[cost_critic]
            ours, crax = {}, {}
            for s in seeds:
                t0 = time.perf_counter()
                ours[s] = run_ours(program, cfg, algo, a.bound, s)
                t1 = time.perf_counter()
                crax[s] = run_crax(algo, cfg, a.task, a.bound, s, crax_evaluator(program, s, cfg.n_iterates - 1))
                print(f"[{algo} seed {s}: ours {t1 - t0:.0f} s, crax {time.perf_counter() - t1:.0f} s wall; "
                      f"steps/s ours {ours[s]['sps']:,.0f} crax {crax[s]['sps']:,.0f}]", flush=True)
            report(algo, cfg, seeds, ours, crax, a.every)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
