"""Results other tools wrote, read into a saferl cube (`saferl import FORMAT SRC... --out CUBE`).

Formats (one reader each, all returning `ImportedRun`s that `write_runs` turns into a store):

* `episodes`: a tidy table, one row per episode (CSV or Parquet), columns
  algo, task, bound, seed, iterate, mode, reward, cost (reward may be empty). The universal format.
* `saferl-eval`: the paper's suite (SafeRLEval): `<env>_Level_<L>_<algo>_bound<d>_seed<k>_<time>_summary.csv`
  with the final exploration and greedy episodes' costs as JSON lists (no rewards), plus the optional
  `_history.csv` of windowed training means.
* `omnisafe`, `safepo`: run folders with `progress.csv` (one row per epoch of windowed means) and
  `config.json` (the cost limit).

Windowed means are stored as one value per iterate and flagged per (run, mode) as means only
(`cube.schema.MEANS_ONLY`): R, C and D_norm follow from them, V, D_norm+, tiers and CDFs do not.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from cube.compute import Progress
from cube.errors import CubeError
from cube.schema import EPISODE_RULE_HINT, MODES, RunKey, first_broken_episode
from cube.store.fs import staged_store
from cube.store.layout import create_store
from cube.store.writer import CubeWriter

FORMATS: tuple[str, ...] = ("episodes", "saferl-eval", "omnisafe", "safepo")
EPISODE_COLUMNS: tuple[str, ...] = ("algo", "task", "bound", "seed", "iterate", "mode", "reward", "cost")
LABELS: tuple[str, ...] = ("algo", "task", "bound", "seed")


@dataclass
class ImportedRun:
    """One run read from a source: its labels, episodes per (mode, iterate), what is means only.

    episodes: (mode, iterate) -> (rewards, costs), 1-D float arrays (rewards NaN where unknown).
    means_only: the modes whose values are windowed means, one per iterate, not episodes.
    iterate_vars: name -> {iterate: value} (env_steps, multiplier).
    """

    key: RunKey
    source: str
    episodes: dict[tuple[str, int], tuple[np.ndarray, np.ndarray]] = field(default_factory=dict)
    means_only: set[str] = field(default_factory=set)
    iterate_vars: dict[str, dict[int, float]] = field(default_factory=dict)
    manifest: dict[str, Any] = field(default_factory=dict)

    def n_iterates(self) -> int:
        its = [j for _, j in self.episodes] + [j for v in self.iterate_vars.values() for j in v]
        return 1 + max(its, default=0)

    def n_episodes(self) -> int:
        return max((c.size for _, c in self.episodes.values()), default=1)


# ---------------------------------------------------------------------------------------- helpers
def _files(sources: Sequence[str | Path], pattern: str, what: str) -> list[Path]:
    """The files named, or found (recursively, sorted) under the folders named, matching `pattern`
    (several patterns separated by '|')."""
    found: list[Path] = []
    for src in map(Path, sources):
        if src.is_dir():
            found.extend(sorted({p for pat in pattern.split("|") for p in src.rglob(pat)}))
        elif src.is_file():
            found.append(src)
        else:
            raise CubeError(f"{src} does not exist; give {what} files or folders holding them")
    if not found:
        raise CubeError(f"no {what} found in {', '.join(map(str, sources))} (looked for {pattern})")
    return found


def _read_csv(path: Path, **kwargs: Any) -> Any:
    import pandas as pd

    try:
        return pd.read_csv(path, **kwargs)
    except (ValueError, OSError, UnicodeDecodeError) as exc:
        first = (str(exc).splitlines() or [type(exc).__name__])[0][:120]
        raise CubeError(f"cannot read {path} as CSV ({first}); is it the right format?") from None


def _number(value: Any, what: str, where: str) -> float:
    try:
        out = float(value)
    except (TypeError, ValueError):
        raise CubeError(f"{where}: {what} {value!r} is not a number") from None
    return out


def _check_costs(costs: np.ndarray, where: str) -> None:
    """Every imported cost is an episode's (or a mean's): present, and valid by the cube's episode rule."""
    if np.isnan(costs).any():
        raise CubeError(f"{where}: a cost is missing; every episode needs a finite cost")
    broken = first_broken_episode(np.full(costs.shape, np.nan), costs)
    if broken is not None:
        rule, mask = broken
        raise CubeError(f"{where}: {rule.count_text(int(mask.sum()))} (first {costs[mask].flat[0]:g}); "
                        f"{EPISODE_RULE_HINT}")


def apply_labels(runs: list[ImportedRun], overrides: dict[str, Any]) -> list[ImportedRun]:
    """Replace labels by the ones given on the command line (None = keep); refuse runs that collide."""
    given = {k: v for k, v in overrides.items() if v is not None}
    seen: dict[RunKey, str] = {}
    for run in runs:
        if given:
            run.key = RunKey(**{**run.key.as_dict(), **given})
        if run.key in seen:
            raise CubeError(f"{run.source} and {seen[run.key]} are both run {run.key}: give each its own labels "
                            "(e.g. import them separately with --seed)")
        seen[run.key] = run.source
    return runs


# --------------------------------------------------------------------------------------- episodes
def read_episodes_table(sources: Sequence[str | Path]) -> list[ImportedRun]:
    """Runs from tidy tables of episodes (CSV, or Parquet by suffix)."""
    runs: list[ImportedRun] = []
    for path in _files(sources, "*.csv|*.parquet", "episode tables (.csv or .parquet)"):
        runs.extend(_runs_from_frame(_episode_frame(path), str(path)))
    return runs


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
        df = _read_csv(path, dtype={"algo": str, "task": str, "mode": str}, keep_default_na=True)
    missing = [c for c in EPISODE_COLUMNS if c not in df.columns and c != "reward"]
    if missing:
        raise CubeError(f"{path} lacks the column(s) {', '.join(missing)}; an episode table has columns "
                        f"{','.join(EPISODE_COLUMNS)} (reward may be empty)")
    if "reward" not in df.columns:
        df["reward"] = np.nan
    return _checked_frame(df, path)


def _checked_frame(df: Any, path: Path) -> Any:
    """Types and values of an episode table, refusing the first bad row with its line number."""
    import pandas as pd

    def bad(mask: Any, what: str) -> None:
        if mask.any():
            row = int(np.flatnonzero(np.asarray(mask))[0])
            raise CubeError(f"{path}, data row {row + 1}: {what}; fix the table and import again")

    for col in ("algo", "task", "mode"):
        bad(df[col].isna() | (df[col].astype(str).str.strip() == ""), f"empty {col}")
    nums = {c: pd.to_numeric(df[c], errors="coerce") for c in ("bound", "seed", "iterate", "reward", "cost")}
    for col in ("bound", "seed", "iterate", "cost"):
        bad(nums[col].isna(), f"{col} is empty or not a number")
    bad(~np.isfinite(nums["bound"]) | (nums["bound"] <= 0), "bound d must be a finite number > 0")
    for col in ("seed", "iterate"):
        bad((nums[col] < 0) | (nums[col] != np.floor(nums[col])), f"{col} must be a non-negative integer")
    bad(~df["mode"].isin(MODES), f"mode must be one of {', '.join(MODES)}")
    bad(~np.isfinite(nums["cost"]) | (nums["cost"] < 0), "cost must be a finite number >= 0")
    bad(df["reward"].notna() & (nums["reward"].isna() | np.isinf(nums["reward"])), "reward is not a finite number")
    out = pd.DataFrame({"algo": df["algo"].astype(str).str.strip(), "task": df["task"].astype(str).str.strip(),
                        "bound": nums["bound"].astype(np.float64), "seed": nums["seed"].astype(np.int64),
                        "iterate": nums["iterate"].astype(np.int64), "mode": df["mode"].astype(str),
                        "reward": nums["reward"].astype(np.float64), "cost": nums["cost"].astype(np.float64)})
    return out


def _runs_from_frame(df: Any, source: str) -> Iterable[ImportedRun]:
    """One ImportedRun per (algo, task, bound, seed) of a checked frame, episodes in row order."""
    df = df.sort_values(["algo", "task", "bound", "seed", "iterate", "mode"], kind="stable")
    for (algo, task, bound, seed), run in df.groupby(list(LABELS), sort=False):
        out = ImportedRun(RunKey(str(algo), str(task), float(bound), int(seed)), source)
        for (mode, it), cell in run.groupby(["mode", "iterate"], sort=False):
            out.episodes[(str(mode), int(it))] = (cell["reward"].to_numpy(), cell["cost"].to_numpy())
        yield out


# ------------------------------------------------------------------------------------ saferl-eval
SAFERL_EVAL_NAME = re.compile(
    r"^(?P<env>.+)_Level_(?P<level>\d+)_(?P<algo>.+)_bound(?P<bound>[0-9.eE+-]+)_seed(?P<seed>\d+)_(?P<time>.+)_summary\.csv$")
CRAX_TASK = re.compile(r"^safe_(?P<task>[a-z]+)_point$")


def crax_task(env: str) -> str:
    """'safe_goal_point' -> 'goal' (the short task names saferl uses); other names are kept."""
    m = CRAX_TASK.match(env)
    return m.group("task") if m else env


def read_saferl_eval(sources: Sequence[str | Path]) -> list[ImportedRun]:
    """Runs from SafeRLEval `*_summary.csv` files (+ `*_history.csv` beside them when present)."""
    return [_saferl_eval_run(p) for p in _files(sources, "*_summary.csv", "SafeRLEval summary (*_summary.csv)")]


def _saferl_eval_run(path: Path) -> ImportedRun:
    name = SAFERL_EVAL_NAME.match(path.name)
    table = _read_csv(path)
    if len(table) != 1:
        raise CubeError(f"{path}: a SafeRLEval summary has one row, this has {len(table)}")
    row = table.iloc[0].to_dict()
    missing = [c for c in ("test_episode_costs", "det_test_episode_costs") if c not in row]
    if missing:
        raise CubeError(f"{path} lacks {', '.join(missing)}: is it a SafeRLEval *_summary.csv?")
    parts = name.groupdict() if name else {}
    where = str(path)
    labels = {
        "algo": str(row.get("algo") or parts.get("algo") or ""),
        "task": crax_task(str(row.get("env") or parts.get("env") or "")),
        "bound": _number(row.get("bound", parts.get("bound")), "bound", where),
        "seed": int(_number(row.get("seed", parts.get("seed")), "seed", where)),
    }
    if not labels["algo"] or not labels["task"]:
        raise CubeError(f"{path}: no algorithm or environment in the file or its name; pass --algo/--task")
    run = ImportedRun(RunKey(**labels), where, manifest={"format": "saferl-eval", "source": where,
                                                         "level": row.get("level", parts.get("level"))})
    history = path.with_name(path.name[: -len("_summary.csv")] + "_history.csv")
    final = 0
    if history.exists():
        final = _saferl_eval_history(history, run)
    for mode, column in (("expl", "test_episode_costs"), ("greedy", "det_test_episode_costs")):
        try:
            costs = np.asarray(json.loads(str(row[column])), dtype=np.float64)
        except (TypeError, ValueError):
            raise CubeError(f"{path}: {column} is not a JSON list of numbers") from None
        if costs.ndim != 1 or not costs.size:
            raise CubeError(f"{path}: {column} holds no episodes")
        _check_costs(costs, f"{path}, {column}")
        run.episodes[(mode, final)] = (np.full(costs.shape, np.nan), costs)
    return run


def _saferl_eval_history(path: Path, run: ImportedRun) -> int:
    """Windowed training means from a `_history.csv` (step, metric, value): one iterate per logged step.
    Returns the last iterate (where the final evaluation is placed)."""
    hist = _read_csv(path)
    if not {"step", "metric", "value"} <= set(hist.columns):
        raise CubeError(f"{path}: a SafeRLEval history has columns step,metric,value")
    wide = hist.pivot_table(index="step", columns="metric", values="value", aggfunc="last").sort_index()
    if "episodic/cost" not in wide:
        return 0
    wide = wide[wide["episodic/cost"].notna()]
    for j, (step, values) in enumerate(wide.iterrows()):
        cost = np.array([values["episodic/cost"]], dtype=np.float64)
        _check_costs(cost, f"{path}, step {step}")
        reward = np.array([values.get("episodic/reward", np.nan)], dtype=np.float64)
        run.episodes[("train", j)] = (reward, cost)
        run.iterate_vars.setdefault("env_steps", {})[j] = float(step)
        if "training/lambda_lagr" in values and np.isfinite(values["training/lambda_lagr"]):
            run.iterate_vars.setdefault("multiplier", {})[j] = float(values["training/lambda_lagr"])
    if len(wide):
        run.means_only.add("train")
    return max(len(wide) - 1, 0)


# -------------------------------------------------------------------------------- omnisafe / safepo
@dataclass(frozen=True)
class ProgressFormat:
    """Column names and label rules of a tool that logs one row of windowed means per epoch."""

    name: str
    reward: str
    cost: str
    steps: str
    multipliers: tuple[str, ...]
    labels: Callable[[Path, dict[str, Any]], dict[str, Any]]


def _omnisafe_labels(run_dir: Path, config: dict[str, Any]) -> dict[str, Any]:
    """runs/<Algo>-{<EnvId>}/seed-<000>-<time>/: labels from config.json, else from the folders."""
    folder = re.match(r"^(?P<algo>[^-{]+)-\{(?P<env>.+)\}$", run_dir.parent.name)
    limit = None
    for section in ("lagrange_cfgs", "algo_cfgs"):
        if isinstance(config.get(section), dict) and config[section].get("cost_limit") is not None:
            limit = config[section]["cost_limit"]
            break
    return {"algo": config.get("algo") or (folder.group("algo") if folder else None),
            "task": config.get("env_id") or (folder.group("env") if folder else None),
            "seed": config.get("seed", _seed_from(run_dir.name)), "bound": limit}


def _safepo_labels(run_dir: Path, config: dict[str, Any]) -> dict[str, Any]:
    """<task>/<algo>/seed-<000>-<time>/: labels from the folders, cost limit from config.json."""
    return {"algo": config.get("algo") or run_dir.parent.name, "task": config.get("task") or run_dir.parent.parent.name,
            "seed": config.get("seed", _seed_from(run_dir.name)), "bound": config.get("cost_limit")}


def _seed_from(name: str) -> int | None:
    m = re.match(r"^seed-(\d+)", name)
    return int(m.group(1)) if m else None


PROGRESS_FORMATS = {
    "omnisafe": ProgressFormat("omnisafe", "Metrics/EpRet", "Metrics/EpCost", "TotalEnvSteps",
                               ("Metrics/LagrangeMultiplier",), _omnisafe_labels),
    "safepo": ProgressFormat("safepo", "Metrics/EpRet", "Metrics/EpCost", "Train/TotalSteps",
                             ("Train/LagragianMultiplier", "Train/LagrangianMultiplier"), _safepo_labels),
}


def read_progress_runs(sources: Sequence[str | Path], fmt: str, bound: float | None = None) -> list[ImportedRun]:
    """Runs from `progress.csv` files of OmniSafe or SafePO (windowed means per epoch, means only)."""
    spec = PROGRESS_FORMATS[fmt]
    return [_progress_run(p, spec, bound) for p in _files(sources, "progress.csv", f"{fmt} progress.csv")]


def _progress_run(path: Path, spec: ProgressFormat, bound: float | None) -> ImportedRun:
    config_path = path.with_name("config.json")
    config: dict[str, Any] = {}
    if config_path.exists():
        try:
            config = json.loads(config_path.read_text())
        except (ValueError, OSError) as exc:
            raise CubeError(f"cannot read {config_path} as JSON ({str(exc)[:80]})") from None
    labels = spec.labels(path.parent, config)
    if bound is not None:
        labels["bound"] = bound
    where = str(path)
    for name in ("algo", "task", "seed", "bound"):
        if labels.get(name) is None:
            flag = {"bound": "--bound (the cost limit d)"}.get(name, f"--{name}")
            raise CubeError(f"{where}: no {name} in config.json or the folder names; pass {flag}")
    table = _read_csv(path)
    for col in (spec.cost, spec.steps):
        if col not in table.columns:
            raise CubeError(f"{where} lacks the column {col!r}: is it a {spec.name} progress.csv?")
    run = ImportedRun(RunKey(str(labels["algo"]), str(labels["task"]), _number(labels["bound"], "bound", where),
                             int(_number(labels["seed"], "seed", where))), where,
                      means_only={"train"}, manifest={"format": spec.name, "source": where})
    multiplier = next((c for c in spec.multipliers if c in table.columns), None)
    j = 0
    for _, row in table.iterrows():
        cost = _number(row[spec.cost], spec.cost, where)
        if np.isnan(cost):  # an epoch before the first finished episode: nothing to keep
            continue
        _check_costs(np.array([cost]), f"{where}, epoch {j}")
        reward = _number(row[spec.reward], spec.reward, where) if spec.reward in table.columns else np.nan
        run.episodes[("train", j)] = (np.array([reward]), np.array([cost]))
        run.iterate_vars.setdefault("env_steps", {})[j] = _number(row[spec.steps], spec.steps, where)
        if multiplier is not None and np.isfinite(_number(row[multiplier], multiplier, where)):
            run.iterate_vars.setdefault("multiplier", {})[j] = float(row[multiplier])
        j += 1
    if not run.episodes:
        raise CubeError(f"{where} holds no epoch with a cost: nothing to import")
    return run


# ---------------------------------------------------------------------------------------- writing
def read_runs(fmt: str, sources: Sequence[str | Path], bound: float | None = None) -> list[ImportedRun]:
    """The runs of `sources` in format `fmt` (see FORMATS)."""
    if fmt == "episodes":
        return read_episodes_table(sources)
    if fmt == "saferl-eval":
        return read_saferl_eval(sources)
    if fmt in PROGRESS_FORMATS:
        return read_progress_runs(sources, fmt, bound)
    raise CubeError(f"unknown format {fmt!r}: use one of {', '.join(FORMATS)}")


def _ordered(values: Iterable[Any]) -> list[Any]:
    return list(dict.fromkeys(values))


def write_runs(runs: Sequence[ImportedRun], out: str | Path, *, fmt: str, force: bool = False,
               progress: Progress | None = None) -> Path:
    """A new store at `out` holding `runs` (grid: the labels they use; runs absent from the grid
    combinations stay pending). Written beside `out` and swapped in when complete."""
    if not runs:
        raise CubeError("nothing to import")
    keys = [r.key for r in runs]
    n_iterates = max(r.n_iterates() for r in runs)
    n_episodes = max(r.n_episodes() for r in runs)
    var_names = sorted({name for r in runs for name in r.iterate_vars} | {"env_steps", "multiplier"})
    with staged_store(out, force=force) as staging:
        create_store(staging, algos=_ordered(k.algo for k in keys), tasks=_ordered(k.task for k in keys),
                     bounds=sorted({k.bound for k in keys}), seeds=sorted({k.seed for k in keys}),
                     n_iterates=n_iterates, n_episodes=n_episodes, iterate_vars=tuple(var_names),
                     means_only_flags=any(r.means_only for r in runs),
                     attrs={"description": f"saferl results cube imported from {fmt}", "imported_from": fmt})
        writer = CubeWriter(staging)
        modes = list(writer.coords["mode"])
        for i, run in enumerate(runs):
            reward = np.full((n_iterates, n_episodes, len(modes)), np.nan, dtype=np.float32)
            cost = reward.copy()
            for (mode, j), (r, c) in run.episodes.items():
                reward[j, : c.size, modes.index(mode)] = r
                cost[j, : c.size, modes.index(mode)] = c
            writer.write_run(run.key, reward, cost)
            for mode in run.means_only:
                writer.set_means_only(run.key, mode)
            for name, per_iterate in run.iterate_vars.items():
                vals = np.full(n_iterates, np.nan)
                vals[list(per_iterate)] = list(per_iterate.values())
                writer.write_iterate_vars(run.key, 0, {name: vals})
            writer.set_run_manifest(run.key, status="complete", manifest={"format": fmt, "source": run.source,
                                                                          **run.manifest})
            if progress:
                progress(i + 1, len(runs))
    return Path(out)
