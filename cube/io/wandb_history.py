"""The `wandb` format: a W&B run's history export (CSV or Parquet) with its config, one run per file.

A history export is a table with one row per `wandb.log` call: `_step` (the call's index), `_runtime`,
`_timestamp` and the logged keys. `run.scan_history()` and the run's `<run-id>-history` artifact (Parquet)
hold every row; `run.history()` returns a *sample* (500 rows by default). A sample is detected from its
`_step` gaps: every row of a complete export is one step after the last (or the same gap throughout, for
a periodic log), a sample's gaps vary; it is imported and said to be sampled (`--complete` when you
filtered rows by key yourself).

What a row is: one finished episode when it logs a per-episode key (CleanRL's `charts/episodic_return`
and `charts/episodic_cost`, synced from TensorBoard with `global_step`; or `--reward-key/--cost-key`),
grouped into iterates by `--steps-per-iterate` over `--step-key` (default `global_step`); or a mean of
several episodes (OmniSafe's `Metrics/EpCost`, FSRL's `train/cost`, or named keys with `--means`), each
row one iterate. Labels and the bound come from the config beside the export (`config.yaml` as W&B writes
it in the run's files, `{key: {value: ...}}`, or `config.json`), else from flags.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from cube.errors import CubeError
from cube.io.conventions import note_convention
from cube.io.registry import STEPS_PER_ITERATE, Importer, ImportRequest, Option
from cube.io.sourcefiles import (
    ImportedRun,
    add_episodes,
    add_means,
    iterates_of,
    json_object,
    read_csv,
    run_key,
    yaml_object,
)

EXPORTS = "*.csv|*.parquet"
EPISODE_KEYS = {"reward": ("charts/episodic_return",), "cost": ("charts/episodic_cost",)}
MEAN_KEYS = {"reward": ("Metrics/EpRet", "train/reward"), "cost": ("Metrics/EpCost", "train/cost")}
MEAN_WINDOWS = {"Metrics/EpCost": (50, "sliding"), "train/cost": (None, "epoch")}
"""Window (episodes) and kind of the known mean keys: OmniSafe's sliding 50; FSRL's epoch means."""
LABEL_KEYS = {"algo": ("algo", "algorithm", "algo_name", "exp_name"), "task": ("env_id", "env", "task", "env_name"),
              "seed": ("seed",), "bound": ("cost_limit", "cost_threshold", "safety_bound", "bound", "threshold")}
CONFIG_NAMES = ("{stem}.config.json", "{stem}.config.yaml", "config.yaml", "config.json")


def _flat(config: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    """A W&B config flattened to dotted keys, `{key: {"value": v}}` entries (config.yaml) read as v."""
    out: dict[str, Any] = {}
    for key, value in config.items():
        if str(key).startswith("_wandb"):
            continue
        if isinstance(value, dict) and set(value) >= {"value"} and set(value) <= {"value", "desc"}:
            value = value["value"]
        if isinstance(value, dict):
            out.update(_flat(value, f"{prefix}{key}."))
        else:
            out[f"{prefix}{key}"] = value
    return out


def _config(export: Path) -> tuple[dict[str, Any], Path | None]:
    """The run's config beside the export (flattened), and its file (None when there is none)."""
    stem = export.name.split(".")[0]
    for name in CONFIG_NAMES:
        path = export.with_name(name.format(stem=stem))
        if not path.is_file() or path == export:
            continue
        return _flat(json_object(path) if path.suffix == ".json" else yaml_object(path)), path
    return {}, None


def _labels(config: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for label, keys in LABEL_KEYS.items():
        for key in keys:
            hit = next((v for k, v in config.items() if k == key or k.endswith("." + key)), None)
            if hit is not None:
                out[label] = hit
                break
    return out


def _frame(path: Path) -> Any:
    import pandas as pd

    if path.suffix.lower() == ".parquet":
        try:
            df = pd.read_parquet(path)
        except ImportError:
            raise CubeError("reading Parquet needs pyarrow: pip install 'saferl[parquet]' (or export CSV)") from None
        except (ValueError, OSError) as exc:
            raise CubeError(f"cannot read {path} as Parquet ({str(exc)[:100]})") from None
    else:
        df = read_csv(path)
    df = df.loc[:, [c for c in df.columns if not str(c).startswith("Unnamed: ")]]  # a saved pandas index
    if "_step" not in df.columns:
        raise CubeError(f"{path} has no _step column: a W&B history export (run.scan_history(), run.history() or the "
                        "run's history artifact) keeps one; export the run's history again with it")
    steps = pd.to_numeric(df["_step"], errors="coerce")
    if steps.isna().any() or (steps < 0).any() or (steps != np.floor(steps)).any():
        raise CubeError(f"{path}: _step must hold whole numbers >= 0 in every row")
    return df.assign(_step=steps.astype(np.int64)).sort_values("_step", kind="stable").reset_index(drop=True)


def history_kind(steps: np.ndarray) -> tuple[str, str]:
    """('complete' | 'sampled', why) from the rows' `_step` (sorted): a complete export's gaps are all the
    logged frequency (the smallest gap), a sample's vary."""
    gaps = np.diff(steps)
    if gaps.size and (gaps == 0).any():
        return "sampled", "a _step appears twice: rows of several exports or runs"
    if not gaps.size or (gaps == gaps.min()).all():
        return "complete", f"every _step gap is {int(gaps.min()) if gaps.size else 1}"
    return "sampled", (f"its _step gaps vary from {int(gaps.min())} to {int(gaps.max())} over {steps.size} rows: "
                       "run.history() returns a sample of the rows (500 by default); export every row with "
                       "run.scan_history() or the run's history artifact (--complete if you filtered rows by key)")


def _column(df: Any, key: str | None) -> np.ndarray:
    import pandas as pd

    if key is None:
        return np.full(len(df), np.nan)
    return pd.to_numeric(df[key], errors="coerce").to_numpy(dtype=np.float64)


def _first(columns: Sequence[str], keys: Sequence[str]) -> str | None:
    return next((k for k in keys if k in columns), None)


def _read(request: ImportRequest) -> list[ImportedRun]:
    from cube.io.sourcefiles import find_files

    return [_read_one(p, request) for p in find_files(request.sources, EXPORTS, "W&B history exports (.csv, .parquet)")
            if not p.name.endswith((".config.json", ".config.yaml"))]


def _read_one(path: Path, request: ImportRequest) -> ImportedRun:
    opt = request.option
    df = _frame(path)
    config, config_path = _config(path)
    where = str(path)
    run = ImportedRun(run_key(_labels(config), request.labels, where), where,
                      manifest={"source_config": str(config_path) if config_path else None})
    columns = [str(c) for c in df.columns]
    for key in (opt("reward_key"), opt("cost_key"), opt("step_key")):
        if key is not None and key not in columns:
            raise CubeError(f"{where} has no column {key!r} (its columns: {', '.join(columns[:12])})")
    kind, why = history_kind(df["_step"].to_numpy())
    if opt("complete"):
        kind, why = "complete", "--complete"
    note_convention(run, "history", kind, why)
    if kind == "sampled":
        run.notes.append(f"{where}: the history looks sampled ({why})")
    means = opt("means") or (opt("cost_key") is None and _first(columns, EPISODE_KEYS["cost"]) is None)
    if means:
        _means(run, df, columns, request)
    else:
        _episodes(run, df, columns, request)
    run.manifest["iterates_done"] = run.n_iterates()
    return run


def _episodes(run: ImportedRun, df: Any, columns: list[str], request: ImportRequest) -> None:
    opt = request.option
    cost_key = opt("cost_key") or _first(columns, EPISODE_KEYS["cost"])
    reward_key = opt("reward_key") or _first(columns, EPISODE_KEYS["reward"])
    rows = df[df[cost_key].notna()]
    step_key = opt("step_key") or ("global_step" if "global_step" in columns else None)
    if opt("steps_per_iterate") is None or step_key is None:
        raise CubeError(f"{run.source}: say how episodes form iterates: --steps-per-iterate N over the env-step column "
                        f"({step_key or 'none found: name it with --step-key'})")
    steps = _column(rows, step_key)
    if np.isnan(steps).any():
        raise CubeError(f"{run.source}: a row with {cost_key} has no {step_key}")
    iterates = iterates_of(steps.astype(np.int64), opt("steps_per_iterate"), None, run.source)
    add_episodes(run, "train", iterates, _column(rows, reward_key), _column(rows, cost_key),
                 f"{run.source}, {cost_key}")
    run.iterate_vars["env_steps"] = {int(j): float(steps[iterates == j].max()) for j in np.unique(iterates)}
    run.manifest.update(env_steps=float(steps.max()), keys={"reward": reward_key, "cost": cost_key, "step": step_key})


def _means(run: ImportedRun, df: Any, columns: list[str], request: ImportRequest) -> None:
    opt = request.option
    cost_key = opt("cost_key") or _first(columns, MEAN_KEYS["cost"])
    if cost_key is None:
        known = ", ".join([*EPISODE_KEYS["cost"], *MEAN_KEYS["cost"]])
        raise CubeError(f"{run.source}: no cost key ({known} not among its columns: {', '.join(columns[:12])}); name "
                        "it with --cost-key (and --means for means)")
    reward_key = opt("reward_key") or _first(columns, MEAN_KEYS["reward"])
    rows = df[df[cost_key].notna()]
    window, kind = MEAN_WINDOWS.get(cost_key, (None, "window")) if not opt("cost_key") else (None, "window")
    window = opt("window") or window
    what = (f"means of a window of the last {window} episodes" if window else
            "epoch means of the episodes of each epoch" if kind == "epoch" else
            "means of several episodes, window unknown (--window N records it)")
    add_means(run, "train", np.arange(len(rows), dtype=np.int64), _column(rows, reward_key), _column(rows, cost_key),
              f"{run.source}, {cost_key}", {"kind": kind, "column": cost_key, "window_episodes": window,
                                            "text": f"W&B's {cost_key} (one row per iterate) are {what}"})
    step_key = opt("step_key") or _first(columns, ("TotalEnvSteps", "global_step", "update/env_step"))
    if step_key is not None:
        steps = _column(rows, step_key)
        run.iterate_vars["env_steps"] = {j: float(s) for j, s in enumerate(steps.tolist()) if np.isfinite(s)}
    run.manifest["keys"] = {"reward": reward_key, "cost": cost_key, "step": step_key}


WANDB = Importer(
    name="wandb", reads="W&B history exports (CSV or Parquet: run.scan_history(), run.history() or the "
    "<run-id>-history artifact) with the config beside them", gives="episodes or means",
    gives_text="one episode per row where a per-episode key is logged (charts/episodic_*, or named), grouped by "
    "--steps-per-iterate: all metrics, tiers, CDFs; or one mean per row (OmniSafe's Metrics/EpCost, FSRL's "
    "train/cost, or named with --means): R̄, C̄, D_norm; complete or sampled history said",
    cannot_text="rows a sampled history (run.history()) left out; V, D_norm+, tiers, CDFs from means",
    read=_read, options=(
        Option("--reward-key", "the column of each episode's return (default: charts/episodic_return)",
               metavar="KEY"),
        Option("--cost-key", "the column of each episode's cost (default: charts/episodic_cost)", metavar="KEY"),
        Option("--step-key", "the column of env steps (default: global_step)", metavar="KEY"),
        STEPS_PER_ITERATE,
        Option("--means", "the named keys are means of several episodes (one row per iterate)", None),
        Option("--window", "episodes in each mean's window", int, metavar="N"),
        Option("--complete", "every row was exported (rows filtered by key make _step gaps irregular)", None)),
    example="saferl import wandb run-abc123-history.parquet --out wb.zarr --steps-per-iterate 2048")
