"""Result files as the real tools write them, for the importer tests.

Every detail is taken from the tools' code (read 2026-11-27) and says where it comes from:

* OmniSafe v0.5.0 (`omnisafe/common/logger.py`, `omnisafe/algorithms/on_policy/base/policy_gradient.py`,
  `.../naive_lagrange/ppo_lag.py`, `.../second_order/cpo.py`, `omnisafe/adapter/onpolicy_adapter.py`,
  `omnisafe/configs/on-policy/{PPOLag,CPO}.yaml`, `omnisafe/algorithms/algo_wrapper.py`).
* SafePO (`safepo/single_agent/ppo_lag.py`, its `EpochLogger`).
* SafeRLEval (`experiments/train/train.py`: `_LocalWriter.save_summary` / `save_history`) with crax's
  `brax/training/logger.py` (`MetricsLogger`).
"""

from __future__ import annotations

import csv
import json
from collections import deque
from collections.abc import Sequence
from pathlib import Path

import numpy as np

# OmniSafe v0.5.0 progress.csv header of PPOLag, in the logger's column order: `register_key` inserts a key,
# then `/Min`, `/Max`, `/Std` (min_and_max=True), then `/Delta` (delta=True); `policy_gradient._init_log`
# registers the first 28, PPOLag's `_init_log` adds Metrics/LagrangeMultiplier (min_and_max=True) last.
OMNISAFE_PPOLAG_COLUMNS = [
    "Metrics/EpRet", "Metrics/EpCost", "Metrics/EpLen", "Train/Epoch", "Train/Entropy", "Train/KL", "Train/StopIter",
    "Train/PolicyRatio", "Train/PolicyRatio/Min", "Train/PolicyRatio/Max", "Train/PolicyRatio/Std", "Train/LR",
    "Train/PolicyStd", "TotalEnvSteps", "Loss/Loss_pi", "Loss/Loss_pi/Delta", "Value/Adv", "Loss/Loss_reward_critic",
    "Loss/Loss_reward_critic/Delta", "Value/reward", "Loss/Loss_cost_critic", "Loss/Loss_cost_critic/Delta",
    "Value/cost", "Time/Total", "Time/Rollout", "Time/Update", "Time/Epoch", "Time/FPS",
    "Metrics/LagrangeMultiplier", "Metrics/LagrangeMultiplier/Min", "Metrics/LagrangeMultiplier/Max",
    "Metrics/LagrangeMultiplier/Std",
]
# CPO logs `Misc/*` (cpo.py `_init_log`, on top of TRPO's) instead of a multiplier.
OMNISAFE_CPO_COLUMNS = [c for c in OMNISAFE_PPOLAG_COLUMNS if not c.startswith("Metrics/Lagrange")] + [
    "Misc/Alpha", "Misc/FinalStepNorm", "Misc/gradient_norm", "Misc/xHx", "Misc/H_inv_g", "Misc/AcceptanceStep",
    "Misc/cost_gradient_norm", "Misc/A", "Misc/B", "Misc/q", "Misc/r", "Misc/s", "Misc/Lambda_star", "Misc/Nu_star",
    "Misc/OptimCase",
]
OMNISAFE_WINDOW = 50  # `register_key('Metrics/EpCost', window_length=50)` in policy_gradient.py of v0.5.0


def omnisafe_config(algo: str, env_id: str, seed: object, *, cost_limit: float = 25.0, steps_per_epoch: int = 2000,
                    vector_env_nums: int = 1) -> dict:
    """config.json of an OmniSafe v0.5.0 run: `Config.tojson()` of the algorithm's yaml defaults plus
    `exp_name`, `env_id`, `algo` (algo_wrapper.py). PPOLag keeps the cost limit in `lagrange_cfgs`, CPO in
    `algo_cfgs`; `logger_cfgs.window_lens` is 100 in both yamls (and unused by 0.5.0's logger)."""
    config = {
        "seed": seed,
        "train_cfgs": {"device": "cpu", "torch_threads": 16, "vector_env_nums": vector_env_nums, "parallel": 1,
                       "total_steps": 3 * steps_per_epoch},
        "algo_cfgs": {"steps_per_epoch": steps_per_epoch, "update_iters": 40, "batch_size": 64, "target_kl": 0.02,
                      "entropy_coef": 0.0, "reward_normalize": False, "cost_normalize": False, "obs_normalize": True,
                      "kl_early_stop": True, "use_max_grad_norm": True, "max_grad_norm": 40.0,
                      "use_critic_norm": True, "critic_norm_coef": 0.001, "gamma": 0.99, "cost_gamma": 0.99,
                      "lam": 0.95, "lam_c": 0.95, "clip": 0.2, "adv_estimation_method": "gae",
                      "standardized_rew_adv": True, "standardized_cost_adv": True, "penalty_coef": 0.0,
                      "use_cost": True},
        "logger_cfgs": {"use_wandb": False, "wandb_project": "omnisafe", "use_tensorboard": True,
                        "save_model_freq": 100, "log_dir": "./runs", "window_lens": 100},
        "model_cfgs": {"weight_initialization_mode": "kaiming_uniform", "actor_type": "gaussian_learning",
                       "linear_lr_decay": True, "exploration_noise_anneal": False, "std_range": [0.5, 0.1],
                       "actor": {"hidden_sizes": [64, 64], "activation": "tanh", "lr": 0.0003},
                       "critic": {"hidden_sizes": [64, 64], "activation": "tanh", "lr": 0.0003}},
        "exp_name": f"{algo}-{{{env_id}}}", "env_id": env_id, "algo": algo,
    }
    if algo == "CPO":
        config["algo_cfgs"]["cost_limit"] = cost_limit
    else:
        config["lagrange_cfgs"] = {"cost_limit": cost_limit, "lagrangian_multiplier_init": 0.001,
                                   "lambda_lr": 0.035, "lambda_optimizer": "Adam"}
    return config


def omnisafe_run(runs: Path, algo: str, env_id: str, seed: int, epochs: Sequence[Sequence[tuple[float, float]]], *,
                 cost_limit: float = 25.0, ep_len: int = 1000, config: object = None) -> Path:
    """A run folder `runs/<Algo>-{<EnvId>}/seed-<000>-<time>/` (Logger: `seed-{zfill(3)}-{hms_time}`) with
    progress.csv and config.json. `epochs[j]`: the (return, cost) of the episodes epoch j finishes (each
    epoch starts from a reset, so 2 episodes of 1000 steps per epoch of 2000 steps). Each row is what
    OmniSafe's logger writes: EpRet/EpCost/EpLen the mean of a deque(maxlen=50) kept across epochs
    (`Logger._update_current_row` clears only keys without a window), NaN while it is empty;
    TotalEnvSteps = (epoch + 1) * steps_per_epoch; Time/Total cumulative. `config`: written as given."""
    folder = runs / f"{algo}-{{{env_id}}}" / f"seed-{str(seed).zfill(3)}-2026-11-26-10-00-00"
    folder.mkdir(parents=True)
    cfg = config if config is not None else omnisafe_config(algo, env_id, seed, cost_limit=cost_limit,
                                                             steps_per_epoch=2 * ep_len)
    (folder / "config.json").write_text(json.dumps(cfg, indent=4))
    columns = OMNISAFE_CPO_COLUMNS if algo == "CPO" else OMNISAFE_PPOLAG_COLUMNS
    windows = {k: deque(maxlen=OMNISAFE_WINDOW) for k in ("ret", "cost", "len")}
    steps = 2 * ep_len
    with (folder / "progress.csv").open("w", newline="") as f:
        out = csv.writer(f)
        out.writerow(columns)
        for j, episodes in enumerate(epochs):
            for ret, cost in episodes:
                windows["ret"].append(ret)
                windows["cost"].append(cost)
                windows["len"].append(float(ep_len))
            row = dict.fromkeys(columns, 0.0)
            mean = {k: float(np.mean(v)) if v else float("nan") for k, v in windows.items()}
            row.update({"Metrics/EpRet": mean["ret"], "Metrics/EpCost": mean["cost"], "Metrics/EpLen": mean["len"],
                        "Train/Epoch": j, "TotalEnvSteps": (j + 1) * steps, "Time/Total": 12.5 * (j + 1),
                        "Time/Epoch": 12.5})
            if "Metrics/LagrangeMultiplier" in row:
                row["Metrics/LagrangeMultiplier"] = 0.001 + 0.1 * j
            out.writerow([row[c] for c in columns])
    return folder


# SafePO `safepo/single_agent/ppo_lag.py`: `logger.log_tabular` calls in this order each epoch.
SAFEPO_COLUMNS = ["Metrics/EpRet", "Metrics/EpCost", "Metrics/EpLen", "Train/Epoch", "Train/TotalSteps",
                  "Train/StopIter", "Train/KL", "Train/LagragianMultiplier", "Train/LR", "Loss/Loss_reward_critic",
                  "Loss/Loss_cost_critic", "Loss/Loss_actor", "Time/Rollout", "Time/Update", "Time/Total",
                  "Value/RewardAdv", "Value/CostAdv"]


def safepo_run(root: Path, algo: str, env_id: str, seed: int, epochs: Sequence[Sequence[tuple[float, float]]], *,
               num_envs: int = 2, steps_per_epoch: int = 4000, ep_len: int = 1000, cost_limit: float | None = 25.0
               ) -> Path:
    """`<log_dir>/<env_id>/<algo>/seed-<000>-<time>/` with config.json (`vars(args)`, flat: no `algo` key)
    and progress.csv. Per finished episode ppo_lag.py appends to deque(maxlen=50) and stores the deque's
    mean; the epoch's row is the mean of what it stored (EpochLogger clears per epoch); Time/Total is the
    epoch's own duration."""
    folder = root / env_id / algo / f"seed-{str(seed).zfill(3)}-2026-11-26-10-00-00"
    folder.mkdir(parents=True)
    args = {"seed": seed, "device": "cpu", "num_envs": num_envs, "total_steps": steps_per_epoch * len(epochs),
            "env_id": env_id, "use_eval": False, "steps_per_epoch": steps_per_epoch, "critic_lr": 0.001,
            "log_dir": str(root), "write_terminal": True, "use_tensorboard": False,
            "lagrangian_multiplier_init": 0.001, "lagrangian_multiplier_lr": 0.035}
    if cost_limit is not None:
        args["cost_limit"] = cost_limit
    (folder / "config.json").write_text(json.dumps(args, indent=4, sort_keys=True))
    decks = {k: deque(maxlen=50) for k in ("ret", "cost", "len")}
    with (folder / "progress.csv").open("w", newline="") as f:
        out = csv.writer(f)
        out.writerow(SAFEPO_COLUMNS)
        for j, episodes in enumerate(epochs):
            stored: dict[str, list[float]] = {k: [] for k in decks}
            for ret, cost in episodes:
                for k, v in (("ret", ret), ("cost", cost), ("len", float(ep_len))):
                    decks[k].append(v)
                    stored[k].append(float(np.mean(decks[k])))
            row = dict.fromkeys(SAFEPO_COLUMNS, 0.0)
            row.update({"Metrics/EpRet": np.mean(stored["ret"]), "Metrics/EpCost": np.mean(stored["cost"]),
                        "Metrics/EpLen": np.mean(stored["len"]), "Train/Epoch": j + 1,
                        "Train/TotalSteps": (j + 1) * steps_per_epoch, "Train/LagragianMultiplier": 0.5 * j,
                        "Time/Total": 30.0})
            out.writerow([row[c] for c in SAFEPO_COLUMNS])
    return folder


# SafeRLEval `_LocalWriter.save_summary`: the row's keys in order, then `train_final` extras not yet there.
SAFERL_EVAL_SUMMARY = ["run_name", "env", "algo", "bound", "seed", "level", "train_reward", "train_cost",
                       "train_violation_rate", "train_cost_mean_violating", "test_reward", "test_cost",
                       "test_violation_rate", "test_cost_mean_violating", "test_episode_costs", "det_test_reward",
                       "det_test_cost", "det_test_violation_rate", "det_test_cost_mean_violating",
                       "det_test_episode_costs"]


def saferl_eval_run(folder: Path, seed: int, *, greedy: Sequence[float], greedy_reward: float | None,
                    expl: Sequence[float] = (), expl_reward: float | None = None, bound: float = 25.0,
                    algo: str = "ppo_lag", env: str = "safe_circle_point",
                    history: Sequence[tuple[int, float, float, float]] = (), raw_expl: str | None = None) -> Path:
    """`<env>_Level_<L>_<algo>_bound<d:g>_seed<k>_<%Y%m%d_%H%M%S_%f>_summary.csv` (+ `_history.csv` when
    `history`). Written by csv.DictWriter: None becomes an empty cell; `test_episode_costs` is
    `json.dumps(s.get("det_test/episode_costs", []))`, so "[]" when no exploration evaluation ran (then
    every `test_*` is empty). `history`: (step, episodic/reward, episodic/cost, training/lambda_lagr) per
    log; `log_step` writes a row per metric present (the violation-rate keys are absent with crax's
    released logger), `value` as float(). `raw_expl`: test_episode_costs as given (bad-input tests)."""
    run = f"{env}_Level_1_{algo}_bound{bound:g}_seed{seed}_20261126_101010_123456"
    costs = np.asarray(greedy, dtype=float)
    ecosts = np.asarray(expl, dtype=float)
    row = {"run_name": run, "env": env, "algo": algo, "bound": bound, "seed": seed, "level": 1,
           "train_reward": 1.0, "train_cost": 2.0, "train_violation_rate": None, "train_cost_mean_violating": None,
           "test_reward": expl_reward, "test_cost": float(ecosts.mean()) if ecosts.size else None,
           "test_violation_rate": float((ecosts > bound).mean()) if ecosts.size else None,
           "test_cost_mean_violating": None,
           "test_episode_costs": raw_expl if raw_expl is not None else json.dumps([float(c) for c in ecosts]),
           "det_test_reward": greedy_reward, "det_test_cost": float(costs.mean()) if costs.size else None,
           "det_test_violation_rate": float((costs > bound).mean()) if costs.size else None,
           "det_test_cost_mean_violating": 0.0,
           "det_test_episode_costs": json.dumps([float(c) for c in costs]),
           "eval/episode_reward": 3.0, "training/sps": 1234.5}
    path = folder / f"{run}_summary.csv"
    with path.open("w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=list(row))
        writer.writeheader()
        writer.writerow(row)
    if history:
        with (folder / f"{run}_history.csv").open("w", newline="") as f:
            writer = csv.DictWriter(f, fieldnames=["step", "metric", "value"])
            writer.writeheader()
            for step, reward, cost, lam in history:
                for metric, value in (("eval/episode_reward", 0.0), ("eval/episode_cost", 0.0),
                                      ("episodic/reward", reward), ("episodic/cost", cost),
                                      ("training/lambda_lagr", lam)):
                    writer.writerow({"step": step, "metric": metric, "value": value})
    return path
