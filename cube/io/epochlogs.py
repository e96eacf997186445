"""OmniSafe and SafePO run folders: `progress.csv` (one row of means per epoch) and `config.json`.

What their numbers are (read from the tools' code): OmniSafe's `Metrics/EpRet` and `Metrics/EpCost` are
the mean of a sliding window of the last N finished episodes, kept across epochs
(`Logger.register_key(..., window_length=50)` in `policy_gradient.py`, `ddpg.py` and `pets.py` of every
release up to 0.5.0; its config's `logger_cfgs.window_lens` is used only by later, unreleased versions).
Each epoch starts with a reset, so an epoch finishes V floor(S / (V L)) episodes (S steps per epoch, V
envs, L steps per episode). SafePO's `Metrics/EpCost` is, per epoch, the mean over the epoch's finished
episodes of a running mean of the last 50 episodes taken as each finished (`deque(maxlen=50)` in
`safepo/single_agent/*.py`). Each run's manifest says so (`cube.schema.MEANS_KEY`, `_window`).
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from cube.errors import CubeError
from cube.io.conventions import note_convention
from cube.io.registry import Importer, ImportRequest, Option
from cube.io.sourcefiles import (
    ImportedRun,
    bound_value,
    check_costs,
    check_iterates,
    check_label_values,
    find_files,
    json_object,
    number,
    read_csv,
    seed_value,
)
from cube.schema import MEANS_KEY, RunKey

OMNISAFE_WINDOW = 50
"""Episodes in OmniSafe's Metrics/EpRet and EpCost windows in every release up to 0.5.0."""
SAFEPO_WINDOW = 50
"""Episodes in SafePO's running mean (`deque(maxlen=50)`)."""


@dataclass(frozen=True)
class ProgressFormat:
    """Column names, label rules and window semantics of a tool that logs one row of means per epoch.

    window: episodes in its window (`--window` overrides); running: True where each epoch's value is the
    epoch's mean of running means (SafePO), False for a sliding-window mean at the epoch's end (OmniSafe).
    steps_per_epoch, envs: where its config.json keeps them (dotted paths). wall: the column of elapsed
    seconds and whether it is cumulative (True) or per epoch (False)."""

    name: str
    title: str
    reward: str
    cost: str
    length: str
    steps: str
    multipliers: tuple[str, ...]
    labels: Callable[[Path, dict[str, Any]], dict[str, Any]]
    window: int
    window_from: str
    running: bool
    steps_per_epoch: str
    envs: str
    wall: tuple[str, bool]


def _config_value(config: dict[str, Any], dotted: str) -> Any:
    """config['a']['b'] for 'a.b' (None where a level is missing or not an object)."""
    value: Any = config
    for part in dotted.split("."):
        value = value.get(part) if isinstance(value, dict) else None
    return value


def omnisafe_labels(run_dir: Path, config: dict[str, Any]) -> dict[str, Any]:
    """runs/<Algo>-{<EnvId>}/seed-<000>-<time>/: labels from config.json, else from the folders."""
    folder = re.match(r"^(?P<algo>[^-{]+)-\{(?P<env>.+)\}$", run_dir.parent.name)
    limit = next((v for v in (_config_value(config, "lagrange_cfgs.cost_limit"),
                              _config_value(config, "algo_cfgs.cost_limit")) if v is not None), None)
    return {"algo": config.get("algo") or (folder.group("algo") if folder else None),
            "task": config.get("env_id") or (folder.group("env") if folder else None),
            "seed": config["seed"] if config.get("seed") is not None else _seed_from(run_dir.name), "bound": limit}


def safepo_labels(run_dir: Path, config: dict[str, Any]) -> dict[str, Any]:
    """<env_id>/<algo>/seed-<000>-<time>/: labels from the folders, cost limit from config.json."""
    return {"algo": config.get("algo") or run_dir.parent.name,
            "task": config.get("env_id") or config.get("task") or run_dir.parent.parent.name,
            "seed": config["seed"] if config.get("seed") is not None else _seed_from(run_dir.name),
            "bound": config.get("cost_limit")}


def _seed_from(name: str) -> int | None:
    m = re.match(r"^seed-(\d+)", name)
    return int(m.group(1)) if m else None


PROGRESS_FORMATS = {
    "omnisafe": ProgressFormat(
        "omnisafe", "OmniSafe", "Metrics/EpRet", "Metrics/EpCost", "Metrics/EpLen", "TotalEnvSteps",
        ("Metrics/LagrangeMultiplier",), omnisafe_labels, OMNISAFE_WINDOW,
        "OmniSafe <= 0.5.0 fixes 50", False, "algo_cfgs.steps_per_epoch", "train_cfgs.vector_env_nums",
        ("Time/Total", True)),
    "safepo": ProgressFormat(
        "safepo", "SafePO", "Metrics/EpRet", "Metrics/EpCost", "Metrics/EpLen", "Train/TotalSteps",
        ("Train/LagragianMultiplier", "Train/LagrangianMultiplier"), safepo_labels, SAFEPO_WINDOW,
        "SafePO's deque(maxlen=50)", True, "steps_per_epoch", "num_envs", ("Time/Total", False)),
}


def read_progress_runs(sources: Sequence[str | Path], fmt: str, bound: float | None = None,
                       window: int | None = None, given: dict[str, Any] | None = None) -> list[ImportedRun]:
    """Runs from `progress.csv` files of OmniSafe or SafePO (means per epoch, means only). `window`: the
    episodes in the tool's window where it is not the released default (OMNISAFE_WINDOW, SAFEPO_WINDOW).
    `given`: the labels given on the command line (they replace the files' later; a file's label that is
    no name is refused only where none is given)."""
    spec = PROGRESS_FORMATS[fmt]
    if window is not None and not (isinstance(window, int) and 1 <= window <= 1_000_000):
        raise CubeError(f"--window must be a whole number of episodes in 1..1000000, got {window!r}")
    return [_progress_run(p, spec, bound, window, given or {})
            for p in find_files(sources, "progress.csv", f"{fmt} progress.csv")]


def _reader(fmt: str) -> Callable[[ImportRequest], list[ImportedRun]]:
    def read(request: ImportRequest) -> list[ImportedRun]:
        runs = read_progress_runs(request.sources, fmt, request.label("bound"), request.option("window"),
                                  request.labels)
        title = PROGRESS_FORMATS[fmt].title
        for run in runs:  # both log the sums of the environment's own (not normalized) per-step values
            note_convention(run, "cost_discount", "undiscounted", f"{title}'s EpCost: the episode's sum of costs")
            note_convention(run, "normalization", "raw", f"{title} logs the original (unnormalized) reward and cost")
            note_convention(run, "history", "complete", "every epoch row of progress.csv")
        return runs

    return read


def _progress_run(path: Path, spec: ProgressFormat, bound: float | None, window: int | None,
                  given: dict[str, Any]) -> ImportedRun:
    config_path = path.with_name("config.json")
    config = json_object(config_path) if config_path.exists() else {}
    labels = spec.labels(path.parent, config)
    if bound is not None:
        labels["bound"] = bound
    where = str(path)
    check_label_values({k: v for k, v in labels.items() if given.get(k) is None}, str(config_path))
    labels.update({k: v for k, v in given.items() if v is not None and k in labels})
    for name in ("algo", "task", "seed", "bound"):
        if labels.get(name) is None:
            flag = {"bound": "--bound (the cost limit d)"}.get(name, f"--{name}")
            raise CubeError(f"{where}: no {name} in config.json or the folder names; pass {flag}")
    key = RunKey(str(labels["algo"]), str(labels["task"]), bound_value(labels["bound"], f"{config_path}"),
                 seed_value(labels["seed"], f"{config_path}"))
    table = read_csv(path)
    for col in (spec.cost, spec.steps):
        if col not in table.columns:
            raise CubeError(f"{where} lacks the column {col!r}: is it a {spec.name} progress.csv?")
    check_iterates(len(table), where)
    run = ImportedRun(key, where, means_only={"train"}, manifest={"source_config": config} if config else {})
    multiplier = next((c for c in spec.multipliers if c in table.columns), None)
    for j, (_, row) in enumerate(table.iterrows()):  # iterate j = epoch j (row j)
        steps = number(row[spec.steps], spec.steps, f"{where}, epoch {j}")
        if math.isfinite(steps):
            run.iterate_vars.setdefault("env_steps", {})[j] = steps
        cost = number(row[spec.cost], spec.cost, f"{where}, epoch {j}")
        if math.isnan(cost):  # an epoch before the first finished episode: no mean, no value
            continue
        check_costs(np.array([cost]), f"{where}, epoch {j}")
        reward = number(row[spec.reward], spec.reward, where) if spec.reward in table.columns else np.nan
        run.episodes[("train", j)] = (np.array([reward]), np.array([cost]))
        if multiplier is not None:
            lam = number(row[multiplier], multiplier, f"{where}, epoch {j}")
            if math.isfinite(lam):
                run.iterate_vars.setdefault("multiplier", {})[j] = lam
    if not run.episodes:
        raise CubeError(f"{where} holds no epoch with a cost: nothing to import")
    run.manifest.update(_progress_facts(table, spec, run))
    run.manifest[MEANS_KEY] = {"train": _window(table, spec, config, window)}
    return run


def _progress_facts(table: Any, spec: ProgressFormat, run: ImportedRun) -> dict[str, Any]:
    """The MANIFEST_KEYS a progress.csv gives: iterates done, env steps, wall seconds."""
    out: dict[str, Any] = {"iterates_done": run.n_iterates()}
    steps = run.iterate_vars.get("env_steps", {})
    if steps:
        out["env_steps"] = steps[max(steps)]
    column, cumulative = spec.wall
    if column in table.columns:
        import pandas as pd

        seconds = pd.to_numeric(table[column], errors="coerce").to_numpy(dtype=np.float64)
        if seconds.size and np.isfinite(seconds).all():
            out["wall_s"] = float(seconds[-1] if cumulative else seconds.sum())
    return out


def episodes_per_epoch(steps_per_epoch: Any, envs: Any, lengths: np.ndarray) -> int | None:
    """Episodes one epoch finishes when each epoch starts from a reset: envs * floor(steps per env / L),
    if every episode has the same length L (`lengths`: the logged mean episode lengths); None if unknown."""
    try:
        s, v = int(steps_per_epoch), int(envs or 1)
    except (TypeError, ValueError):
        return None
    finite = lengths[np.isfinite(lengths)]
    if s <= 0 or v <= 0 or not finite.size or np.ptp(finite) > 0 or finite[0] < 1 or finite[0] != int(finite[0]):
        return None
    return v * (s // v // int(finite[0])) or None


def _window(table: Any, spec: ProgressFormat, config: dict[str, Any], window: int | None) -> dict[str, Any]:
    """What the tool's per-epoch values are (manifest `means.train`): window, its source, episodes per
    epoch, how far the first windows reach back, and one sentence saying so."""
    import pandas as pd

    n = window or spec.window
    source = "--window" if window else spec.window_from
    config_n = _config_value(config, "logger_cfgs.window_lens")
    lengths = (pd.to_numeric(table[spec.length], errors="coerce").to_numpy(dtype=np.float64)
               if spec.length in table.columns else np.array([]))
    steps = _config_value(config, spec.steps_per_epoch)
    if steps is None and spec.steps in table.columns and len(table) > 1:
        steps = pd.to_numeric(table[spec.steps], errors="coerce").diff().iloc[1]
    e = episodes_per_epoch(steps, _config_value(config, spec.envs), lengths)
    cols = f"{spec.title}'s {spec.cost} and {spec.reward}"
    if spec.running:
        text = (f"{cols} are per-epoch means, over the epoch's finished episodes, of a running mean of the last "
                f"{n} episodes taken as each finished ({source})")
    else:
        text = f"{cols} are means of a sliding window of the last {n} episodes, kept across epochs ({source})"
    out: dict[str, Any] = {"kind": "running" if spec.running else "sliding", "column": spec.cost,
                           "window_episodes": n, "window_from": source, "episodes_per_epoch": e}
    if e is None:
        text += "; the episodes per epoch are unknown, so how far a window reaches back is too"
    elif e >= n:
        text += f"; at {e} episodes per epoch every window lies within its own epoch"
    else:
        span = math.ceil(n / e)
        out.update(window_epochs=span, partial_windows=span - 1)
        text += (f"; at {e} episodes per epoch a full window spans {span} epochs, and the windows of "
                 + (f"epochs 0-{span - 2}" if span > 2 else "epoch 0")
                 + f" hold every episode so far ({e} to {e * (span - 1)})")
    if config_n is not None and config_n != n and not window:
        text += (f"; config.json's logger_cfgs.window_lens = {config_n} is used only by OmniSafe after 0.5.0: "
                 f"import such runs with --window {config_n}")
    out["text"] = text
    return out


_PROGRESS_CANNOT = "any single episode: no V, D_norm+, tiers or CDFs; no final evaluation"
_WINDOW_HELP = Option("--window", "episodes in the tool's window of means when it is not the released default of "
                      "50 (OmniSafe after 0.5.0 uses config.json's logger_cfgs.window_lens)", int, metavar="N")
OMNISAFE = Importer(
    name="omnisafe", reads="OmniSafe run folders: progress.csv + config.json", gives="means",
    gives_text="per epoch, the mean of a sliding window of the last 50 episodes, across epochs (R̄, C̄, D_norm), env "
    "steps, λ (PPOLag), wall time", cannot_text=_PROGRESS_CANNOT, read=_reader("omnisafe"), options=(_WINDOW_HELP,),
    example="saferl import omnisafe runs/ --out omnisafe.zarr")
SAFEPO = Importer(
    name="safepo", reads="SafePO run folders: progress.csv + config.json", gives="means",
    gives_text="per epoch, the mean of running means over the last 50 episodes (R̄, C̄, D_norm), env steps, λ, wall "
    "time", cannot_text=_PROGRESS_CANNOT, read=_reader("safepo"), options=(_WINDOW_HELP,),
    example="saferl import safepo runs/ --out safepo.zarr --bound 25")
