"""Learning parity: this project's trainer and crax-bench's own, same task, algorithm, config and seeds.

For each algorithm and seed both trainers train side by side in this process; printed: per-iterate mean
train episode reward and cost of both (every `--every` iterates), the final expl/greedy evaluation of both
(crax's final policy is rolled out by our evaluator with the same N paired initial states, so the two are
compared like with like), env steps/s of both with compile excluded and their ratio, and over the K seeds
the difference of the final numbers in units of the seed spread, z = (mean_ours - mean_crax) /
sqrt((sd_ours^2 + sd_crax^2) / 2).

What is timed. Ours: iterates 2..J through the full runner, i.e. every training episode transferred and
written to a results cube (iterate 1 holds the compile). crax: its epochs 2..J (`training/sps`, its
`block_until_ready`-timed training epochs; epoch 1 holds the compile); its per-step env-metric host
callback always runs, `--crax-log on` (its default) adds the training-metric callback; its per-epoch
evaluator is replaced by a no-op (crax's final policy goes through our evaluator). crax's epoch is
ceil(num_envs T / steps per update) updates, ours runs updates until every env finished an episode.
crax's train numbers are its logger's `episodic/sum_reward` and `episodic/cost` (the episodes that
ended in that epoch; its sums omit the first step of every episode after the first).

PPO-Saute: crax has no option for this project's default budget (undiscounted, full every episode); the
script says so and compares like for like only with `--config` setting `[ppo_saute] budget_discount = 0.99,
reset_budget = "termination"` (crax's formulation, which it then passes to crax as `gamma_budget`).

    .venv/bin/python bench/learning_parity.py --algos ppo_lag --seeds 0,1            # CPU: circle, 64 envs
    .venv/bin/python bench/learning_parity.py --algos ppo_pid,crpo --seeds 0,1 --bound 2.5 --iterates 12
    .venv/bin/python bench/learning_parity.py --tiny                                 # logic check, ~2 min
    python3 bench/learning_parity.py --paper --algos ppo_lag,focops --seeds 0,1 --iterates 3   # GPU
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import io
import math
import sys
import tempfile
import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any
from unittest import mock

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def _args() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--task", default="circle")
    p.add_argument("--algos", default="ppo,ppo_lag,p3o,focops", help="any of ppo, ppo_lag, p3o, focops, ppo_pid, "
                   "ppo_saute, crpo")
    p.add_argument("--seeds", default="0,1")
    p.add_argument("--bound", type=float, default=25.0)
    p.add_argument("--iterates", type=int, default=20, help="J: iterates of num_envs episodes each")
    p.add_argument("--num-envs", type=int, default=64)
    p.add_argument("--episode-length", type=int, default=200)
    p.add_argument("--batch-size", type=int, default=64)
    p.add_argument("--num-minibatches", type=int, default=8)
    p.add_argument("--epochs", type=int, default=6)
    p.add_argument("--eval-episodes", type=int, default=32)
    p.add_argument("--every", type=int, default=0, help="print every k-th iterate (0: about 8 rows)")
    p.add_argument("--crax-log", choices=("on", "off"), default="on",
                   help="crax's log_training_metrics (its default: on)")
    p.add_argument("--paper", action="store_true",
                   help="the paper's sizes: 2048 envs, T 2000, batch 1024 x 32, 6 epochs, 100 eval episodes")
    p.add_argument("--tiny", action="store_true", help="a tiny config to check this script (CPU, minutes)")
    p.add_argument("--config", help="TOML overrides for both trainers (e.g. reset = \"fresh\")")
    p.add_argument("--no-cache", action="store_true",
                   help="no persistent compile cache (by default a fresh one in a temporary folder, so crax's "
                        "second seed reuses its first seed's compile, as ours does in-process)")
    return p.parse_args()


def make_config(a: argparse.Namespace) -> Any:
    from train.config import TrainConfig
    from train.overrides import load_toml, with_overrides

    if a.paper:
        over: dict[str, Any] = {"num_envs": 2048, "episode_length": 2000, "batch_size": 1024, "num_minibatches": 32,
                                "num_epochs": 6, "eval_episodes": 100}
    elif a.tiny:
        over = {"num_envs": 8, "episode_length": 32, "batch_size": 8, "num_minibatches": 4, "num_epochs": 2,
                "eval_episodes": 4, "policy_hidden": [8, 8], "value_hidden": [16, 16], "cost_value_hidden": [16, 16]}
    else:
        over = {"num_envs": a.num_envs, "episode_length": a.episode_length, "batch_size": a.batch_size,
                "num_minibatches": a.num_minibatches, "num_epochs": a.epochs, "eval_episodes": a.eval_episodes}
    base = load_toml(a.config) if a.config else TrainConfig()
    cfg = with_overrides(base, over)
    iterates = 3 if a.tiny else a.iterates
    cfg = with_overrides(cfg, {"total_env_steps": iterates * cfg.num_envs * cfg.episode_length})
    if cfg.value_hidden != cfg.cost_value_hidden:
        raise SystemExit("learning_parity needs value_hidden == cost_value_hidden (crax's networks)")
    return cfg


# ------------------------------------------------------------------------------------------- ours
def run_ours(runner: Any, out: Path, algo: str, bound: float, seed: int) -> dict[str, Any]:
    from cube import open_cube

    res = runner.run(algo, bound, seed)
    ds = open_cube(out).sel(algo=algo, task=runner.task, bound=bound, seed=seed)
    train_r = np.nanmean(ds["reward"].sel(mode="train").values, axis=1)
    train_c = np.nanmean(ds["cost"].sel(mode="train").values, axis=1)
    j = res.iterates_done - 1
    ev = {m: (float(np.nanmean(ds["reward"].sel(mode=m, iterate=j).values)),
              float(np.nanmean(ds["cost"].sel(mode=m, iterate=j).values))) for m in ("expl", "greedy")}
    steps, wall = np.array(res.iterate_steps[1:], float), np.array(res.iterate_wall_s[1:])
    sps = steps.sum() / wall.sum() if wall.sum() > 0 else float("nan")
    first = res.iterate_steps[0] * (wall.sum() / steps.sum()) if steps.sum() else 0.0
    return {"reward": train_r, "cost": train_c, "eval": ev, "sps": sps, "compile_s": res.iterate_wall_s[0] - first,
            "multiplier": float(ds["multiplier"].values[-1])}


# ------------------------------------------------------------------------------------------- crax
def crax_kwargs(algo: str, cfg: Any, bound: float) -> dict[str, Any]:
    """Every algorithm-specific value explicitly (crax's keyword defaults are not the paper's)."""
    if algo == "ppo":
        return {"clipping_epsilon": cfg.clip_epsilon}
    if algo == "ppo_lag":
        return {"clipping_epsilon": cfg.clip_epsilon, "safety_bound": bound, "lagrangian_coef_rate": cfg.ppo_lag.lr,
                "initial_lambda_lagr": cfg.ppo_lag.init}
    if algo == "p3o":
        return {"clipping_epsilon": cfg.clip_epsilon, "safety_bound": bound, "initial_kappa": cfg.p3o.kappa_init,
                "kappa_increase_factor": cfg.p3o.increase, "kappa_max": cfg.p3o.kappa_max}
    if algo == "focops":
        return {"safety_bound": bound, "initial_nu": cfg.focops.nu_init, "nu_lr": cfg.focops.nu_lr,
                "nu_max": cfg.focops.nu_max, "focops_lam": cfg.focops.temperature,
                "focops_eta": cfg.focops.kl_threshold}
    if algo == "ppo_pid":
        pc = cfg.ppo_pid
        return {"clipping_epsilon": cfg.clip_epsilon, "safety_bound": bound, "initial_lambda_lagr": pc.init,
                "pid_kp": pc.kp, "pid_ki": pc.ki, "pid_kd": pc.kd, "pid_integral_clip": pc.integral_clip,
                "pid_lambda_clip": pc.lambda_max, "pid_deriv_ema_beta": pc.derivative_ema}
    if algo == "ppo_saute":
        sc = cfg.ppo_saute
        return {"clipping_epsilon": cfg.clip_epsilon, "safety_bound": bound, "gamma_budget": sc.budget_discount,
                "violation_penalty": sc.penalty, "normalize_budget_obs": sc.normalize_budget_obs}
    if algo == "crpo":
        return {"clipping_epsilon": cfg.clip_epsilon, "safety_bound": bound, "crpo_eta": cfg.crpo.eta}
    raise ValueError(algo)


def saute_mismatch(cfg: Any) -> str:
    """'' if our PPO-Saute options are ones crax can train too, else what crax cannot do."""
    sc = cfg.ppo_saute
    diffs = [f"reset_budget = {sc.reset_budget!r} (crax: 'termination')"] if sc.reset_budget != "termination" else []
    diffs += ["clip_budget = false (crax clips to [0, 3d])"] if not sc.clip_budget else []
    return "; ".join(diffs)


def run_crax(algo: str, cfg: Any, task: str, bound: float, seed: int, log: bool,
             evaluate: Any) -> dict[str, Any]:
    import functools

    from train.envs import crax_environment
    from train.registry import algorithm

    mod = importlib.import_module(f"crax.training.agents.{algo}.train")
    networks = importlib.import_module("crax.training.agents.ppo.networks")
    env = crax_environment(task, cfg.episode_length)  # the label's level, as crax takes it
    J, per_iterate = cfg.n_iterates, cfg.num_envs * cfg.episode_length
    epochs: list[dict[str, float]] = []
    logs: list[dict[str, float]] = []

    def progress(step: int, metrics: dict[str, Any]) -> None:
        if "episodic/sum_reward" in metrics:
            logs.append({"step": step, "reward": float(metrics["episodic/sum_reward"]),
                         "cost": float(metrics.get("episodic/cost", np.nan))})
        if "training/walltime" in metrics and all(e["step"] != step for e in epochs):
            epochs.append({"step": step, "walltime": float(metrics["training/walltime"])})

    factory = functools.partial(networks.make_ppo_networks, policy_hidden_layer_sizes=cfg.policy_hidden,
                                value_hidden_layer_sizes=cfg.value_hidden,
                                cost_value_hidden_layer_sizes=cfg.cost_value_hidden if algorithm(algo).cost_critic
                                else None)
    acting = importlib.import_module("crax.training.acting")
    t0 = time.perf_counter()
    with contextlib.redirect_stdout(io.StringIO()), mock.patch.object(acting, "Evaluator", NoEvaluator):
        _, params, _, _ = mod.train(
            environment=env, num_timesteps=J * per_iterate, episode_length=cfg.episode_length,
            num_envs=cfg.num_envs, learning_rate=cfg.learning_rate, entropy_cost=cfg.entropy_cost,
            discounting=cfg.discount, unroll_length=cfg.unroll_length, batch_size=cfg.batch_size,
            num_minibatches=cfg.num_minibatches, num_updates_per_batch=cfg.num_epochs,
            normalize_observations=cfg.normalize_observations, reward_scaling=cfg.reward_scaling,
            gae_lambda=cfg.gae_lambda, normalize_advantage=cfg.normalize_advantage, network_factory=factory,
            seed=seed, num_evals=J + 1, num_eval_envs=1, log_training_metrics=log,
            training_metrics_steps=per_iterate, progress_fn=progress, **crax_kwargs(algo, cfg, bound))
    total = time.perf_counter() - t0
    walls = np.diff([0.0] + [e["walltime"] for e in epochs])
    steps = np.diff([0] + [e["step"] for e in epochs]).astype(float)
    sps = steps[1:].sum() / walls[1:].sum() if len(walls) > 1 else float("nan")
    compile_s = walls[0] - steps[0] * walls[1:].sum() / steps[1:].sum() if len(walls) > 1 else float("nan")
    ev = evaluate(params)
    return {"reward": np.array([x["reward"] for x in logs]), "cost": np.array([x["cost"] for x in logs]),
            "eval": ev, "sps": sps, "compile_s": compile_s, "total_s": total,
            "steps_per_epoch": float(steps[0]) if len(steps) else float("nan")}


class NoEvaluator:
    """Stands in for crax's `acting.Evaluator`: its per-epoch evaluation (compile and rollouts) is skipped;
    crax's final policy is evaluated by our evaluator instead. Training is untouched."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        pass

    def run_evaluation(self, *args: Any, **kwargs: Any) -> dict[str, float]:
        return {}


def crax_evaluator(runner: Any, cfg: Any, algo: str, seed_iterate: tuple[int, int], bound: float) -> Any:
    """Roll out crax's final (normalizer, policy, value) with our evaluator: same eval keys as ours (PPO-Saute:
    the budget-augmented observation, as crax's Saute env gives it)."""
    import jax.numpy as jnp

    from train.algorithm import d_step
    from train.nets import Normalizer

    program = runner.program_for([algo])  # the program ours ran: no new compile
    template = program.trainer.template()

    def evaluate(params: Any) -> dict[str, tuple[float, float]]:
        from train.onpolicy.core import Params

        norm, policy, value = params[:3]
        state = SimpleNamespace(params=Params(policy, value, template["cost_value"]),
                                normalizer=Normalizer(norm.count, norm.mean, norm.summed_variance, norm.std),
                                d_step=jnp.float32(d_step(cfg, bound)))
        ev = program.evaluate(state, [seed_iterate[0]], seed_iterate[1])
        return {"expl": (float(np.mean(ev.expl_reward)), float(np.mean(ev.expl_cost))),
                "greedy": (float(np.mean(ev.greedy_reward)), float(np.mean(ev.greedy_cost)))}

    return evaluate


# ------------------------------------------------------------------------------------------- report
def z_score(a: list[float], b: list[float]) -> float:
    if len(a) < 2:
        return float("nan")
    spread = math.sqrt((np.var(a, ddof=1) + np.var(b, ddof=1)) / 2)
    return float((np.mean(a) - np.mean(b)) / spread) if spread > 0 else float("nan")


def report(algo: str, cfg: Any, seeds: list[int], ours: dict[int, Any], crax: dict[int, Any], every: int) -> None:
    J = cfg.n_iterates
    every = every or max(1, J // 8)
    rows = sorted(set(range(0, J, every)) | {J - 1})
    print(f"\n== {algo}: per-iterate mean train episode reward / cost (ours | crax), seeds {seeds}")
    head = "  ".join(f"seed {s}: ours r/c      crax r/c   " for s in seeds)
    print(f"{'iterate':>7}  {head}")
    for j in rows:
        cells = []
        for s in seeds:
            o, c = ours[s], crax[s]
            cr = f"{c['reward'][j]:7.1f} /{c['cost'][j]:6.1f}" if j < len(c["reward"]) else f"{'-':>7} /{'-':>6}"
            cells.append(f"{o['reward'][j]:7.1f} /{o['cost'][j]:6.1f} | {cr}")
        print(f"{j:>7}  " + "  ".join(cells))
    print(f"final evaluation ({cfg.eval_episodes} paired episodes each, our evaluator for both), reward / cost:")
    for s in seeds:
        o, c = ours[s]["eval"], crax[s]["eval"]
        print(f"  seed {s}: ours expl {o['expl'][0]:7.1f} / {o['expl'][1]:6.1f}  greedy {o['greedy'][0]:7.1f} / "
              f"{o['greedy'][1]:6.1f} | crax expl {c['expl'][0]:7.1f} / {c['expl'][1]:6.1f}  greedy "
              f"{c['greedy'][0]:7.1f} / {c['greedy'][1]:6.1f}")
    for s in seeds:
        o, c = ours[s], crax[s]
        print(f"  seed {s}: env steps/s ours {o['sps']:,.0f} crax {c['sps']:,.0f} ratio {o['sps'] / c['sps']:.2f}x; "
              f"compile ours {o['compile_s']:.0f} s crax {c['compile_s']:.0f} s")
    if len(seeds) >= 2:
        def col(d: dict[int, Any], f: Any) -> list[float]:
            return [f(d[s]) for s in seeds]

        items = {"last train reward": lambda d: d["reward"][-1], "last train cost": lambda d: d["cost"][-1],
                 "final expl reward": lambda d: d["eval"]["expl"][0], "final expl cost": lambda d: d["eval"]["expl"][1],
                 "final greedy reward": lambda d: d["eval"]["greedy"][0],
                 "final greedy cost": lambda d: d["eval"]["greedy"][1]}
        print(f"over {len(seeds)} seeds, ours - crax in units of the seed spread (z):")
        for name, f in items.items():
            a, b = col(ours, f), col(crax, f)
            print(f"  {name:<20} ours {np.mean(a):8.2f} +- {np.std(a, ddof=1):6.2f}  crax {np.mean(b):8.2f} +- "
                  f"{np.std(b, ddof=1):6.2f}  z = {z_score(a, b):+.2f}")
        sps_o, sps_c = col(ours, lambda d: d["sps"]), col(crax, lambda d: d["sps"])
        print(f"  env steps/s (mean over seeds) ours {np.mean(sps_o):,.0f} crax {np.mean(sps_c):,.0f} "
              f"ratio {np.mean(sps_o) / np.mean(sps_c):.2f}x")
    sys.stdout.flush()


def main() -> int:
    a = _args()
    cfg = make_config(a)
    import jax

    from train.record import prepare_store
    from train.runner import Runner
    from train.sweep import make_env

    algos, seeds = a.algos.split(","), [int(s) for s in a.seeds.split(",")]
    print(f"device: {jax.devices()[0].device_kind} ({jax.default_backend()}); task {a.task}, bound {a.bound:g}; "
          f"envs {cfg.num_envs}, T {cfg.episode_length}, J {cfg.n_iterates}, unroll {cfg.unroll_length}, batch "
          f"{cfg.batch_size} x {cfg.num_minibatches}, epochs {cfg.num_epochs}, reset {cfg.reset}, advantage "
          f"{cfg.advantage}; crax log_training_metrics {a.crax_log}", flush=True)
    with tempfile.TemporaryDirectory() as tmp:
        if not a.no_cache:
            jax.config.update("jax_compilation_cache_dir", str(Path(tmp) / "jaxcache"))
            jax.config.update("jax_persistent_cache_min_compile_time_secs", 1.0)
        out = Path(tmp) / "parity.zarr"
        prepare_store(out, cfg, algos, [a.task], [a.bound], seeds)
        runner = Runner(out, cfg, a.task, make_env)
        for algo in algos:
            if algo == "ppo_saute" and saute_mismatch(cfg):
                print(f"NOTE ppo_saute: ours uses {saute_mismatch(cfg)}, which crax's Saute cannot; crax trains "
                      f"its own with gamma_budget {cfg.ppo_saute.budget_discount:g}: not like for like", flush=True)
            ours, crax = {}, {}
            for s in seeds:
                t0 = time.perf_counter()
                ours[s] = run_ours(runner, out, algo, a.bound, s)
                t1 = time.perf_counter()
                crax[s] = run_crax(algo, cfg, a.task, a.bound, s, a.crax_log == "on",
                                   crax_evaluator(runner, cfg, algo, (s, cfg.n_iterates - 1), a.bound))
                print(f"[{algo} seed {s}: ours {t1 - t0:.0f} s, crax {time.perf_counter() - t1:.0f} s wall; "
                      f"steps/s ours {ours[s]['sps']:,.0f} crax {crax[s]['sps']:,.0f}]", flush=True)
            report(algo, cfg, seeds, ours, crax, a.every)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
