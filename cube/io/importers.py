"""The `episodes` and `saferl-eval` formats of `saferl import` (one `cube.io.registry.Importer` record each).

* `episodes`: a tidy table, one row per episode (CSV or Parquet), columns
  algo, task, bound, seed, iterate, mode, reward, cost (reward may be empty). The universal format.
* `saferl-eval`: the paper's suite (SafeRLEval's training script in `experiments/`):
  `<env>_Level_<L>_<algo>_bound<d>_seed<k>_<time>_summary.csv`, one row whose `test_episode_costs` and
  `det_test_episode_costs` are JSON lists of the final exploration and greedy episodes' costs ("[]" when
  that evaluation did not run) and whose `test_reward` / `det_test_reward` are their mean rewards, plus the
  optional `_history.csv` (`step,metric,value`) of crax's training means: at each logged step the mean,
  over the env steps since the previous log at which episodes ended, of those episodes' mean (crax's
  `MetricsLogger` clears its buffers at every log).

The other formats live one module each beside this one (`epochlogs`: OmniSafe and SafePO; `tensorboard`,
`sb3`, `wandb_history`, `fieldlogs`: FSRL and RLlib; `dsrl`). Means of several episodes are stored as one
value per iterate and flagged per (run, mode) as means only (`cube.schema.MEANS_ONLY`): R, C and D_norm
follow from them, V, D_norm+, tiers and CDFs do not. Each run's manifest says what they are
(`cube.schema.MEANS_KEY`). A final evaluation's mean reward (SafeRLEval keeps no per-episode rewards) is
stored as the reward of its first episode, the other episodes' rewards unknown (NaN), so R̄ of that
evaluation is exactly that mean and every cost metric uses every episode.

Every value is checked before anything is written (`CubeError`, one line naming the value and the limit).
"""
from __future__ import annotations

import json
import math
import re
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from cube.errors import CubeError
from cube.io.conventions import note_convention
from cube.io.registry import Importer, ImportRequest
from cube.io.sourcefiles import (
    ImportedRun,
    bound_value,
    check_costs,
    check_iterates,
    find_files,
    number,
    read_csv,
    seed_value,
)
from cube.schema import MAX_ITERATES, MAX_SEED, MEANS_KEY, MODES, RunKey

EPISODE_COLUMNS: tuple[str, ...] = ("algo", "task", "bound", "seed", "iterate", "mode", "reward", "cost")
LABELS: tuple[str, ...] = ("algo", "task", "bound", "seed")


# --------------------------------------------------------------------------------------- episodes
def read_episodes_table(sources: Sequence[str | Path]) -> list[ImportedRun]:
    """Runs from tidy tables of episodes (CSV, or Parquet by suffix)."""
    runs: list[ImportedRun] = []
    for path in find_files(sources, "*.csv|*.parquet", "episode tables (.csv or .parquet)"):
        runs.extend(_runs_from_frame(_episode_frame(path), str(path)))
    return runs


def _read_episodes(request: ImportRequest) -> list[ImportedRun]:
    return read_episodes_table(request.sources)


def _episode_frame(path: Path) -> Any:
    import pandas as pd

    if path.suffix.lower() in (".parquet", ".pq"):
        try:
            df = pd.read_parquet(path)
        except ImportError:
            raise CubeError("reading Parquet needs pyarrow: pip install 'saferl[parquet]' (or give a CSV)") from None
        except (ValueError, OSError) as exc:
            raise CubeError(f"cannot read {path} as Parquet ({str(exc)[:100]})") from None
    else:
        df = read_csv(path, dtype={"algo": str, "task": str, "mode": str}, keep_default_na=True)
    missing = [c for c in EPISODE_COLUMNS if c not in df.columns and c != "reward"]
    if missing:
        raise CubeError(f"{path} lacks the column(s) {', '.join(missing)}; an episode table has columns "
                        f"{','.join(EPISODE_COLUMNS)} (reward may be empty)")
    if "reward" not in df.columns:
        df["reward"] = np.nan
    return _checked_frame(df, path)


def _checked_frame(df: Any, path: Path) -> Any:
    """Types and values of an episode table, refusing the first bad row with its line number and value."""
    import pandas as pd

    def bad(mask: Any, what: str, col: str | None = None) -> None:
        if mask.any():
            row = int(np.flatnonzero(np.asarray(mask))[0])
            value = df[col].iloc[row] if col is not None else None
            got = f" (got {value.item() if isinstance(value, np.generic) else value!r})" if col is not None else ""
            raise CubeError(f"{path}, data row {row + 1}: {what}{got}; fix the table and import again")

    for col in ("algo", "task", "mode"):
        bad(df[col].isna() | (df[col].astype(str).str.strip() == ""), f"empty {col}")
    nums = {c: pd.to_numeric(df[c], errors="coerce") for c in ("bound", "seed", "iterate", "reward", "cost")}
    for col in ("bound", "seed", "iterate", "cost"):
        bad(nums[col].isna(), f"{col} is empty or not a number", col)
    bad(~np.isfinite(nums["bound"]) | (nums["bound"] <= 0), "bound d must be a finite number > 0", "bound")
    for col in ("seed", "iterate"):
        bad((nums[col] < 0) | (nums[col] != np.floor(nums[col])), f"{col} must be a non-negative integer", col)
    bad(nums["seed"] >= 2.0**63, f"seed must be at most {MAX_SEED} (seeds are stored as int64)", "seed")
    bad(nums["iterate"] >= MAX_ITERATES, f"iterate must be below {MAX_ITERATES:,}, the iterates a store holds "
        "(iterates count policy updates 0, 1, 2, ...; env steps are not iterates)", "iterate")
    bad(~df["mode"].isin(MODES), f"mode must be one of {', '.join(MODES)}", "mode")
    bad(~np.isfinite(nums["cost"]) | (nums["cost"] < 0), "cost must be a finite number >= 0", "cost")
    bad(df["reward"].notna() & (nums["reward"].isna() | np.isinf(nums["reward"])), "reward is not a finite number",
        "reward")
    out = pd.DataFrame({"algo": df["algo"].astype(str).str.strip(), "task": df["task"].astype(str).str.strip(),
                        "bound": nums["bound"].astype(np.float64), "seed": nums["seed"].astype(np.int64),
                        "iterate": nums["iterate"].astype(np.int64), "mode": df["mode"].astype(str),
                        "reward": nums["reward"].astype(np.float64), "cost": nums["cost"].astype(np.float64)})
    return out


def _runs_from_frame(df: Any, source: str) -> Iterable[ImportedRun]:
    """One ImportedRun per (algo, task, bound, seed) of a checked frame, episodes in row order. The frame is
    sorted once and cut where a label changes (linear in the rows: a groupby per run took seconds per
    thousand runs)."""
    df = df.sort_values(["algo", "task", "bound", "seed", "iterate", "mode"], kind="stable")
    if not len(df):
        return
    labels = [df[c].to_numpy() for c in LABELS]
    iterate, mode = df["iterate"].to_numpy(), df["mode"].to_numpy()
    reward, cost = df["reward"].to_numpy(), df["cost"].to_numpy()
    run_starts = _changes(labels)
    cell_starts = _changes([*labels, iterate, mode])
    cells = np.append(cell_starts, len(df))
    k = 0
    for start, end in zip(run_starts, np.append(run_starts[1:], len(df)), strict=True):
        out = ImportedRun(RunKey(str(labels[0][start]), str(labels[1][start]), float(labels[2][start]),
                                 int(labels[3][start])), source,
                          manifest={"iterates_done": int(iterate[start:end].max()) + 1})
        while cells[k] < end:
            lo, hi = cells[k], cells[k + 1]
            out.episodes[(str(mode[lo]), int(iterate[lo]))] = (reward[lo:hi], cost[lo:hi])
            k += 1
        yield out


def _changes(columns: list[np.ndarray]) -> np.ndarray:
    """The rows (indices) where any of `columns` differs from the row before, the first row included."""
    change = np.zeros(len(columns[0]), dtype=bool)
    change[0] = True
    for col in columns:
        change[1:] |= col[1:] != col[:-1]
    return np.flatnonzero(change)


# ------------------------------------------------------------------------------------ saferl-eval
SAFERL_EVAL_NAME = re.compile(
    r"^(?P<env>.+)_Level_(?P<level>\d+)_(?P<algo>.+)_bound(?P<bound>[0-9.eE+-]+)_seed(?P<seed>\d+)_(?P<time>.+)_summary\.csv$")
CRAX_TASK = re.compile(r"^safe_(?P<task>[a-z]+)_point$")
SAFERL_EVAL_FINALS: tuple[tuple[str, str, str], ...] = (
    ("expl", "test_episode_costs", "test_reward"), ("greedy", "det_test_episode_costs", "det_test_reward"))
"""(mode, the JSON list of its episodes' costs, the mean reward of those episodes) of a summary row."""
SAFERL_EVAL_HISTORY_NOTE = (
    "SafeRLEval's training history (crax's MetricsLogger): episodic/cost and episodic/reward at each logged "
    "step are means, over the env steps since the previous log at which episodes ended, of those episodes' "
    "means; nothing is carried from one log to the next")


def crax_task(env: str) -> str:
    """'safe_goal_point' -> 'goal' (the short task names saferl uses); other names are kept."""
    m = CRAX_TASK.match(env)
    return m.group("task") if m else env


def read_saferl_eval(sources: Sequence[str | Path], labels: dict[str, Any] | None = None) -> list[ImportedRun]:
    """Runs from SafeRLEval `*_summary.csv` files (+ `*_history.csv` beside them when present); `labels`:
    those given on the command line, used where a file and its name give none."""
    files = find_files(sources, "*_summary.csv", "SafeRLEval summary (*_summary.csv)")
    return [_saferl_eval_run(p, labels or {}) for p in files]


def _read_saferl_eval(request: ImportRequest) -> list[ImportedRun]:
    runs = read_saferl_eval(request.sources, request.labels)
    for run in runs:  # crax's training loop sums raw per-step costs; its evaluator runs greedy and exploring
        note_convention(run, "cost_discount", "undiscounted", "crax's episode sums (SafeRLEval trains crax)")
        note_convention(run, "normalization", "raw", "crax's episode sums of the environment's rewards")
        note_convention(run, "history", "complete", "every logged row of _history.csv")
    return runs


def _cost_list(text: Any, where: str) -> np.ndarray:
    """A JSON list of episode costs (numbers; "[]" = no episodes) as a float array."""
    try:
        values = json.loads(str(text))
    except ValueError:
        raise CubeError(f"{where} is not a JSON list of numbers (got {str(text)[:40]!r})") from None
    if not isinstance(values, list):
        raise CubeError(f"{where} is a JSON {type(values).__name__}, not a list of episode costs")
    odd = [v for v in values if isinstance(v, bool) or not isinstance(v, int | float)]
    if odd:
        raise CubeError(f"{where} holds {json.dumps(odd[0])[:40]}, not a number: every entry is one episode's cost")
    costs = np.asarray(values, dtype=np.float64)
    check_costs(costs, where)
    return costs


def _saferl_eval_run(path: Path, labels: dict[str, Any]) -> ImportedRun:
    name = SAFERL_EVAL_NAME.match(path.name)
    table = read_csv(path)
    if len(table) != 1:
        raise CubeError(f"{path}: a SafeRLEval summary has one row, this has {len(table)}")
    row = table.iloc[0].to_dict()
    missing = [c for _, c, _ in SAFERL_EVAL_FINALS if c not in row]
    if missing:
        raise CubeError(f"{path} lacks {', '.join(missing)}: is it a SafeRLEval *_summary.csv?")
    parts = name.groupdict() if name else {}
    where = str(path)

    def given(key: str) -> Any:
        value = row.get(key)
        if value is None or (isinstance(value, float) and math.isnan(value)):
            value = parts.get(key)
        return labels.get({"env": "task"}.get(key, key)) if value is None else value

    algo, task = str(given("algo") or ""), crax_task(str(given("env") or ""))
    if not algo or not task or given("bound") is None or given("seed") is None:
        raise CubeError(f"{path}: no algorithm, environment, bound or seed in the file or its name; "
                        "pass --algo/--task/--bound/--seed")
    key = RunKey(algo, task, bound_value(given("bound"), where), seed_value(given("seed"), where))
    run = ImportedRun(key, where, manifest={"level": given("level")})
    history = path.with_name(path.name[: -len("_summary.csv")] + "_history.csv")
    final = _saferl_eval_history(history, run) if history.exists() else 0
    for mode, column, reward_column in SAFERL_EVAL_FINALS:
        costs = _cost_list(row[column], f"{path}, {column}")
        if not costs.size:  # "[]": that evaluation did not run (SafeRLEval's default): no episodes there
            continue
        rewards = np.full(costs.shape, np.nan)
        mean = row.get(reward_column)
        if mean is not None and not (isinstance(mean, float) and math.isnan(mean)):
            rewards[0] = number(mean, reward_column, where)
            if not math.isfinite(rewards[0]):
                raise CubeError(f"{path}: {reward_column} {mean!r} is not a finite number")
            run.reward_means.add(mode)
        run.episodes[(mode, final)] = (rewards, costs)
    if not run.episodes:
        raise CubeError(f"{path}: no episodes ({', '.join(c for _, c, _ in SAFERL_EVAL_FINALS)} are empty and "
                        "no training history is beside it): nothing to import from it")
    run.manifest["iterates_done"] = run.n_iterates()
    if run.reward_means:
        run.manifest["reward_means"] = {m: f"{c}: the mean reward of the {m} episodes, stored as the first "
                                           "episode's reward (per-episode rewards are not kept)"
                                        for m, _, c in SAFERL_EVAL_FINALS if m in run.reward_means}
    return run


def _saferl_eval_history(path: Path, run: ImportedRun) -> int:
    """crax's training means from a `_history.csv` (step, metric, value): one iterate per logged step with
    a cost. Returns the last iterate (where the final evaluations are placed)."""
    import pandas as pd

    hist = read_csv(path, dtype={"metric": str}, keep_default_na=True)
    if not {"step", "metric", "value"} <= set(hist.columns):
        raise CubeError(f"{path}: a SafeRLEval history has columns step,metric,value")
    for col in ("step", "value"):
        nums = pd.to_numeric(hist[col], errors="coerce")
        odd = nums.isna() & hist[col].notna() & (hist[col].astype(str).str.strip().str.lower() != "nan")
        if col == "step":
            odd |= hist[col].isna() | (nums < 0) | (nums != np.floor(nums))
        if odd.any():
            i = int(np.flatnonzero(np.asarray(odd))[0])
            what = "a non-negative integer" if col == "step" else "a number"
            raise CubeError(f"{path}, data row {i + 1}: {col} {hist[col].iloc[i]!r} of {hist['metric'].iloc[i]} "
                            f"is not {what}")
        hist[col] = nums
    wide = hist.pivot_table(index="step", columns="metric", values="value", aggfunc="last", dropna=False)
    wide = wide.sort_index()
    if "episodic/cost" not in wide:
        return 0
    wide = wide[wide["episodic/cost"].notna()]
    check_iterates(len(wide), str(path))
    for j, (step, values) in enumerate(wide.iterrows()):
        cost = np.array([values["episodic/cost"]], dtype=np.float64)
        check_costs(cost, f"{path}, step {step}")
        reward = np.array([values.get("episodic/reward", np.nan)], dtype=np.float64)
        run.episodes[("train", j)] = (reward, cost)
        run.iterate_vars.setdefault("env_steps", {})[j] = float(step)
        if "training/lambda_lagr" in values and np.isfinite(values["training/lambda_lagr"]):
            run.iterate_vars.setdefault("multiplier", {})[j] = float(values["training/lambda_lagr"])
    if len(wide):
        run.means_only.add("train")
        run.manifest[MEANS_KEY] = {"train": {"kind": "interval", "column": "episodic/cost",
                                             "text": SAFERL_EVAL_HISTORY_NOTE}}
        run.manifest["env_steps"] = float(wide.index[-1])
    return max(len(wide) - 1, 0)


def runs_without_violation(runs: Sequence[ImportedRun]) -> int:
    """How many runs have a final evaluation (expl or greedy episodes) without any episode over the bound:
    their D_norm+ is 0 by the paper's definition, while SafeRLEval's printed point estimate leaves them out."""
    return sum(any(mode in ("expl", "greedy") and c.size and not (c > run.key.bound).any()
                   for (mode, _), (_, c) in run.episodes.items()) for run in runs)


EPISODES = Importer(
    name="episodes", reads="tidy tables, one row per episode (CSV or Parquet): algo,task,bound,seed,iterate,mode,"
    "reward,cost", gives="episodes",
    gives_text="every episode's reward and cost per iterate and mode: all metrics, tiers, CDFs",
    cannot_text="per-iterate variables (env steps, multipliers)", read=_read_episodes,
    example="saferl import episodes episodes.parquet --out mine.zarr")
SAFERL_EVAL = Importer(
    name="saferl-eval", reads="SafeRLEval's *_summary.csv (+ the *_history.csv beside it)", gives="episodes and means",
    gives_text="final exploration and greedy episodes' costs (V, D_norm+, tiers, CDFs of the final settings), their "
    "mean rewards (R̄), crax's training means per log (R̄, C̄, D_norm), env steps, λ",
    cannot_text="per-episode rewards; V, D_norm+, tiers, CDFs of training; a final setting whose list is `[]` "
    "(not evaluated)", read=_read_saferl_eval,
    example="saferl import saferl-eval results/ --out paper.zarr")
