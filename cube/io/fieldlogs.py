"""The `fsrl` and `rllib` formats: per-epoch logs of FSRL (tianshou-based) and Ray RLlib, one run per file.

* FSRL's `BaseLogger` (`fsrl/utils/logger/base_logger.py`) writes `progress.txt`, tab-separated: a header
  `Steps` + the stored keys, then one row per epoch, each value the mean of what was stored since the
  last row. Its trainer (`fsrl/trainer/base_trainer.py`) stores `train/reward`, `train/cost` once per
  collect (the collect's mean over its finished episodes) and `test/reward`, `test/cost` once per epoch
  (the mean of `episode_per_test` evaluation episodes, acted deterministically by FSRL's policies'
  default `deterministic_eval=True`). Both are means only; `config.yaml` beside it gives the labels.
* RLlib's Tune logger writes `result.json`, one JSON object per training iteration. The old API stack
  keeps `hist_stats` (top level, or under `env_runners`/`sampler_results` in Ray 2.x): per-episode lists
  which in older RLlib hold the last `metrics_num_episodes_for_smoothing` (100) episodes, overlapping
  across iterations (Ray 2.60 lists just the iteration's); the last `episodes_this_iter` entries of each
  list are the iteration's new episodes, so they are de-overlapped into episodes (an iteration with more
  new episodes than the list holds loses the oldest ones: said, and the history is `sampled`). A cost
  list exists only where a callback adds one (`episode.hist_data["episode_cost"]`, `--cost-key`). The
  new API stack keeps only means (`env_runners/episode_return_mean` and the user's cost metric) over the
  same window: means only.
  `params.json` beside it gives the env and seed; the trial folder (`PPO_<env>_...`) the algorithm.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import numpy as np

from cube.errors import CubeError
from cube.io.conventions import note_convention
from cube.io.registry import Importer, ImportRequest, Option
from cube.io.sourcefiles import (
    ImportedRun,
    add_episodes,
    add_means,
    find_files,
    json_object,
    read_csv,
    run_key,
    yaml_object,
)

FSRL_TRAIN_TEXT = ("FSRL's train/cost and train/reward: per epoch, the mean over the epoch's collect steps of each "
                   "collect's mean episode (epoch means, nothing carried across epochs)")
FSRL_TEST_TEXT = ("FSRL's test/cost and test/reward: per epoch, the mean of the epoch's episode_per_test evaluation "
                  "episodes")
RLLIB_WINDOW = 100
"""RLlib's default metrics_num_episodes_for_smoothing: episodes in hist_stats and in every *_mean."""
RLLIB_PREFIXES = ("", "env_runners/", "sampler_results/")


# ------------------------------------------------------------------------------------------ FSRL
def _fsrl_run(path: Path, request: ImportRequest) -> ImportedRun:
    import pandas as pd

    config_path = path.with_name("config.yaml")
    config = yaml_object(config_path) if config_path.is_file() else {}
    found = {"algo": config.get("algo") or config.get("prefix"), "task": config.get("task"),
             "seed": config.get("seed"), "bound": config.get("cost_limit")}
    where = str(path)
    table = read_csv(path, sep="\t")
    if "train/cost" not in table.columns and "test/cost" not in table.columns:
        raise CubeError(f"{where} has neither train/cost nor test/cost: is it FSRL's progress.txt? (its columns: "
                        f"{', '.join(map(str, table.columns[:10]))})")
    run = ImportedRun(run_key(found, request.labels, where), where,
                      manifest={"source_config": str(config_path) if config.get("task") else None})
    nums = {c: pd.to_numeric(table[c], errors="coerce").to_numpy(dtype=np.float64) for c in table.columns}
    epochs = np.arange(len(table), dtype=np.int64)
    deterministic = (request.conventions.get("evaluation") or "deterministic") == "deterministic"
    for tab, mode, text in (("train", "train", FSRL_TRAIN_TEXT), ("test", "greedy" if deterministic else "expl",
                                                                  FSRL_TEST_TEXT)):
        if f"{tab}/cost" in nums:
            reward = nums.get(f"{tab}/reward", np.full(len(table), np.nan))
            add_means(run, mode, epochs, reward, nums[f"{tab}/cost"], f"{where}, {tab}/cost",
                      {"kind": "epoch", "column": f"{tab}/cost", "window_episodes": None, "text": text})
    if "Steps" in nums:
        run.iterate_vars["env_steps"] = {int(j): float(s) for j, s in zip(epochs, nums["Steps"], strict=True)
                                         if math.isfinite(s)}
        run.manifest["env_steps"] = float(np.nanmax(nums["Steps"]))
    run.manifest["iterates_done"] = run.n_iterates()
    note_convention(run, "cost_discount", "undiscounted", "FSRL's collector: the episode's summed cost")
    note_convention(run, "history", "complete", "every epoch row of progress.txt")
    if "test/cost" in nums:
        note_convention(run, "evaluation", "deterministic" if deterministic else "stochastic",
                        "FSRL's policies' default deterministic_eval=True", default=True)
    return run


def _read_fsrl(request: ImportRequest) -> list[ImportedRun]:
    return [_fsrl_run(p, request) for p in find_files(request.sources, "progress.txt", "FSRL progress.txt")]


# ----------------------------------------------------------------------------------------- RLlib
def _flat(result: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in result.items():
        if isinstance(value, dict) and key != "hist_stats":
            out.update(_flat(value, f"{prefix}{key}/"))
        else:
            out[f"{prefix}{key}"] = value
    return out


def _lookup(row: dict[str, Any], key: str) -> Any:
    """`key` in a flattened result, under the old stack's top level or the env_runners/sampler_results dicts."""
    return next((row[p + key] for p in RLLIB_PREFIXES if p + key in row), None)


def _hist(row: dict[str, Any], key: str) -> list | None:
    hist = _lookup(row, "hist_stats")
    value = hist.get(key) if isinstance(hist, dict) else None
    return value if isinstance(value, list) else None


def _results(path: Path) -> list[dict[str, Any]]:
    rows = []
    try:
        lines = path.read_text(encoding="utf-8", errors="replace").splitlines()
    except OSError as exc:
        raise CubeError(f"cannot read {path} ({exc.strerror or type(exc).__name__})") from None
    for i, line in enumerate(lines):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except ValueError:
            raise CubeError(f"{path}, line {i + 1}: not a JSON object (a result.json has one per iteration)") from None
        if not isinstance(row, dict):
            raise CubeError(f"{path}, line {i + 1}: a JSON {type(row).__name__}, not an iteration's result")
        rows.append(_flat(row))
    if not rows:
        raise CubeError(f"{path} holds no iteration result: nothing to import")
    return rows


def _rllib_labels(path: Path) -> tuple[dict[str, Any], dict[str, Any]]:
    params = path.with_name("params.json")
    config = json_object(params) if params.is_file() else {}
    env = config.get("env")
    trial = path.parent.name
    return {"task": env if isinstance(env, str) else None, "seed": config.get("seed"),
            "algo": trial.split("_", 1)[0] if "_" in trial else None}, config


def _rllib_run(path: Path, request: ImportRequest) -> ImportedRun:
    found, config = _rllib_labels(path)
    where = str(path)
    rows = _results(path)
    run = ImportedRun(run_key(found, request.labels, where), where)
    cost_key = request.option("cost_key") or "episode_cost"
    window = int(config.get("metrics_num_episodes_for_smoothing") or RLLIB_WINDOW)
    if _hist(rows[0], cost_key) is not None and _lookup(rows[0], "episodes_this_iter") is not None:
        _rllib_episodes(run, rows, cost_key, request.option("reward_key") or "episode_reward", window)
    else:
        _rllib_means(run, rows, request.option("cost_key") or "episode_cost_mean", request.option("reward_key"), window)
    steps = [_lookup(r, "num_env_steps_sampled_lifetime") or _lookup(r, "timesteps_total") for r in rows]
    run.iterate_vars["env_steps"] = {j: float(s) for j, s in enumerate(steps) if isinstance(s, int | float)}
    if run.iterate_vars["env_steps"]:
        run.manifest["env_steps"] = max(run.iterate_vars["env_steps"].values())
    run.manifest["iterates_done"] = run.n_iterates()
    return run


def _rllib_episodes(run: ImportedRun, rows: list[dict[str, Any]], cost_key: str, reward_key: str, window: int) -> None:
    """The old stack's hist_stats, de-overlapped: each iteration's last episodes_this_iter entries."""
    iterates: list[int] = []
    rewards: list[float] = []
    costs: list[float] = []
    lost = 0
    for j, row in enumerate(rows):
        new = int(_lookup(row, "episodes_this_iter") or 0)
        cost = _hist(row, cost_key) or []
        reward = _hist(row, reward_key)
        if reward is not None and len(reward) != len(cost):
            raise CubeError(f"{run.source}, iteration {j + 1}: hist_stats {reward_key} and {cost_key} hold different "
                            f"numbers of episodes ({len(reward)}, {len(cost)})")
        kept = min(new, len(cost))
        lost += new - kept
        iterates += [j] * kept
        costs += cost[len(cost) - kept:]
        rewards += (reward[len(reward) - kept:] if reward is not None else [math.nan] * kept)
    add_episodes(run, "train", np.array(iterates, dtype=np.int64), np.array(rewards, dtype=np.float64),
                 np.array(costs, dtype=np.float64), f"{run.source}, hist_stats/{cost_key}")
    if lost:
        note_convention(run, "history", "sampled", f"{lost} episodes beyond hist_stats' window of {window}")
        run.notes.append(f"{run.source}: {lost} episode(s) finished in iterations whose new episodes outnumber "
                         f"hist_stats' {window} (metrics_num_episodes_for_smoothing) and are lost")
    else:
        note_convention(run, "history", "complete", "every iteration's new episodes (episodes_this_iter) in hist_stats")
    run.manifest["keys"] = {"reward": reward_key, "cost": f"hist_stats/{cost_key}"}


def _rllib_means(run: ImportedRun, rows: list[dict[str, Any]], cost_key: str, reward_key: str | None,
                 window: int) -> None:
    """Means over RLlib's smoothing window, one per iteration (the new stack, or the old without a cost list)."""
    costs = np.array([_number(_lookup(r, cost_key)) for r in rows])
    if np.isnan(costs).all():
        keys = sorted(k for k in rows[-1] if "cost" in k.lower()) or sorted(rows[-1])[:10]
        raise CubeError(f"{run.source}: no cost {cost_key!r} in its results (keys like: {', '.join(keys[:8])}); name "
                        "a per-episode hist_stats list or a mean with --cost-key")
    reward_key = reward_key or next((k for k in ("episode_return_mean", "episode_reward_mean")
                                     if _lookup(rows[-1], k) is not None), None)
    rewards = np.array([_number(_lookup(r, reward_key)) if reward_key else math.nan for r in rows])
    add_means(run, "train", np.arange(len(rows), dtype=np.int64), rewards, costs, f"{run.source}, {cost_key}",
              {"kind": "sliding", "column": cost_key, "window_episodes": window,
               "text": f"RLlib's {cost_key} and {reward_key}: means of the last {window} episodes "
                       "(metrics_num_episodes_for_smoothing), overlapping across iterations"})
    note_convention(run, "history", "complete", "every iteration's result")
    run.manifest["keys"] = {"reward": reward_key, "cost": cost_key}


def _number(value: Any) -> float:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else math.nan


def _read_rllib(request: ImportRequest) -> list[ImportedRun]:
    return [_rllib_run(p, request) for p in find_files(request.sources, "result.json", "RLlib result.json")]


_MEANS_CANNOT = "any single episode: no V, D_norm+, tiers or CDFs"
FSRL = Importer(
    name="fsrl", reads="FSRL's progress.txt (tab-separated epoch means) + config.yaml", gives="means",
    gives_text="per epoch, train/* means (R̄, C̄, D_norm of training) and test/* means of the evaluation "
    "episodes (greedy: FSRL's deterministic_eval=True default; --eval stochastic stores them as expl), env steps",
    cannot_text=_MEANS_CANNOT + "; multipliers", read=_read_fsrl,
    example="saferl import fsrl logs/ --out fsrl.zarr")
RLLIB = Importer(
    name="rllib", reads="Ray RLlib/Tune result.json (one JSON per iteration) + params.json", gives="episodes or means",
    gives_text="old API stack: every episode of the hist_stats lists, de-overlapped with episodes_this_iter "
    "(all metrics, tiers, CDFs) where a callback logs a per-episode cost list; new stack: window means per "
    "iteration (R̄, C̄, D_norm); env steps",
    cannot_text="a cost where no callback logged one; episodes beyond hist_stats' window in an iteration (said); "
    "V, D_norm+, tiers, CDFs on the new stack",
    read=_read_rllib, options=(
        Option("--cost-key", "hist_stats list of episode costs (default: episode_cost), or a mean metric (new stack: "
               "e.g. env_runners/episode_cost)", metavar="KEY"),
        Option("--reward-key", "hist_stats list of episode returns (default: episode_reward), or a mean metric",
               metavar="KEY")),
    example="saferl import rllib ~/ray_results/PPO_2026/ --out rllib.zarr --bound 25")
