"""The `sb3-monitor` format: Stable-Baselines3 `Monitor` CSVs, one run per folder.

SB3's `Monitor` (`stable_baselines3/common/monitor.py`) writes one `*.monitor.csv` per env: a first line
`#{"t_start": <POSIX s>, "env_id": "<id>"}`, then a CSV of `r,l,t` (the episode's reward sum, its length,
its end in seconds after t_start) plus the `info_keywords`, which it copies from `info` at the episode's
last step only. Every file of a run folder is merged by end time (t_start + t), as SB3's `load_results`
does. Iterates: `--steps-per-iterate N` over the env steps of all envs together when each episode ended:
a vector env steps its envs in lockstep, so that is the number of envs (files) times the env's own steps
so far (the sum of its episodes' lengths), as SB3's `num_timesteps` counts them.

Cost: only from a column the user names with what it holds (`--cost-column c --cost-kind episode`).
Safety-Gymnasium's Gymnasium wrapper puts the per-step cost in `info["cost"]`, so
`Monitor(env, info_keywords=("cost",))` keeps the last step's cost, not the episode's; such a column
(`--cost-kind last-step`) is refused: it cannot give V, D_norm+ or tiers.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from cube.errors import CubeError
from cube.io.conventions import note_convention
from cube.io.registry import STEPS_PER_ITERATE, Importer, ImportRequest, Option
from cube.io.sourcefiles import ImportedRun, add_episodes, iterates_of, read_csv, run_key

MONITOR_FILES = "*monitor.csv"
COST_KINDS = ("episode", "last-step")
LIKELY_COSTS = ("cost", "c", "ep_cost", "episode_cost", "cost_sum")
LAST_STEP_REFUSAL = (
    "holds each episode's last-step cost (Monitor copies info_keywords from the episode's last step only), not "
    "the episode's cost, so it cannot give V, D_norm+ or tiers: record the episode's sum instead, with "
    "cube.io.gym.RecordEpisodes around the env (README, 'Record from your own trainer') or a Monitor fed an "
    "info key that sums the per-step cost (e.g. info['episode_cost'] += cost), and import that")
SEED_PART = re.compile(r"(?:^|[_-])seed[_-]?(\d+)$")


def _header(path: Path) -> dict[str, Any]:
    """The `#{...}` JSON line that opens a Monitor file."""
    try:
        with path.open("r", encoding="utf-8", errors="replace") as f:
            first = f.readline()
    except OSError as exc:
        raise CubeError(f"cannot read {path} ({exc.strerror or type(exc).__name__})") from None
    if not first.strip():
        raise CubeError(f"{path} is empty: a Monitor file starts with a '#{{\"t_start\": ..., \"env_id\": ...}}' line "
                        "and a header r,l,t (was the run stopped before its first episode?)")
    if not first.startswith("#{"):
        raise CubeError(f"{path} does not start with SB3 Monitor's '#{{\"t_start\": ..., \"env_id\": ...}}' line: is "
                        "it a Monitor file? (a plain table of episodes imports with 'saferl import episodes')")
    try:
        header = json.loads(first[1:])
    except ValueError:
        raise CubeError(f"{path}: its first line is not Monitor's JSON header (got {first[:60]!r})") from None
    if not isinstance(header, dict) or not isinstance(header.get("t_start"), int | float):
        raise CubeError(f"{path}: its JSON header has no number t_start (got {first[:60]!r})")
    return header


def _table(path: Path) -> Any:
    """One Monitor file's episodes: its columns, with the absolute end time `end` (s)."""
    import pandas as pd

    header = _header(path)
    table = read_csv(path, skip_lines=1)
    missing = [c for c in ("r", "l", "t") if c not in table.columns]
    if missing:
        raise CubeError(f"{path} lacks Monitor's column(s) {', '.join(missing)} (its columns: "
                        f"{', '.join(map(str, table.columns))})")
    for col in ("r", "l", "t"):
        table[col] = pd.to_numeric(table[col], errors="coerce")
        if table[col].isna().any():
            row = int(np.flatnonzero(table[col].isna().to_numpy())[0])
            raise CubeError(f"{path}, data row {row + 1}: {col} is empty or not a number")
    table["end"] = float(header["t_start"]) + table["t"]
    table["own_steps"] = table["l"].astype(np.int64).cumsum()
    table.attrs["env_id"] = header.get("env_id")
    return table


def _cost(table: Any, path: Path, request: ImportRequest) -> np.ndarray:
    """The episodes' costs from the column the user named, refusing a last-step cost."""
    import pandas as pd

    column, kind = request.option("cost_column"), request.option("cost_kind")
    if column is None:
        likely = [c for c in table.columns if str(c).lower() in LIKELY_COSTS]
        if likely:
            raise CubeError(f"{path} has a column {likely[0]!r}: name it with --cost-column {likely[0]} and say "
                            "what it holds with --cost-kind episode (the episode's summed cost) or last-step "
                            "(Monitor's info_keywords=('cost',) over Safety-Gymnasium keeps the last step's cost)")
        columns = ", ".join(map(str, table.columns))
        raise CubeError(f"{path} has no cost column (its columns: {columns}): a Monitor keeps a cost only as an "
                        "info_keywords column; record the episode's sum (cube.io.gym.RecordEpisodes, or "
                        "Monitor(env, info_keywords=('episode_cost',)) with a wrapper that sums it) and name it "
                        "with --cost-column")
    if column not in table.columns:
        raise CubeError(f"{path} has no column {column!r} (its columns: {', '.join(map(str, table.columns))})")
    if kind is None:
        raise CubeError(f"--cost-column {column}: say what it holds with --cost-kind episode (the episode's summed "
                        "cost) or last-step (the cost at its last step)")
    if kind == "last-step":
        raise CubeError(f"{path}: column {column!r} {LAST_STEP_REFUSAL}")
    costs = pd.to_numeric(table[column], errors="coerce").to_numpy(dtype=np.float64)
    return costs


def _run_folders(sources: Sequence[Path]) -> dict[Path, list[Path]]:
    folders: dict[Path, list[Path]] = {}
    for src in sources:
        if src.is_dir():
            files = sorted(src.rglob(MONITOR_FILES))
        elif src.is_file():
            files = [src]
        else:
            raise CubeError(f"{src} does not exist; give SB3 Monitor files (*.monitor.csv) or folders holding them")
        for f in files:
            folders.setdefault(f.parent, []).append(f)
    if not folders:
        raise CubeError(f"no SB3 Monitor files (*monitor.csv) found in {', '.join(map(str, sources))}")
    return folders


def _folder_labels(folder: Path, env_id: Any) -> dict[str, Any]:
    """task from the header's env_id; algo from rl-baselines3-zoo's `logs/<algo>/<env_id>_<k>/`; seed from
    a `seed<k>`/`seed-<k>` folder name."""
    out: dict[str, Any] = {"task": env_id}
    if env_id and re.fullmatch(re.escape(str(env_id)) + r"_\d+", folder.name):
        out["algo"] = folder.parent.name
    for part in reversed(folder.parts):
        m = SEED_PART.search(part)
        if m:
            out["seed"] = int(m.group(1))
            break
    return out


def _read(request: ImportRequest) -> list[ImportedRun]:
    import pandas as pd

    if request.option("steps_per_iterate") is None:
        raise CubeError("say how episodes form iterates: --steps-per-iterate N (env steps per policy update, all envs "
                        "together: SB3 PPO's n_steps x n_envs, e.g. 2048 x 4 = 8192)")
    runs = []
    for folder, files in _run_folders(request.sources).items():
        tables = [_table(f) for f in files]
        env_ids = {t.attrs.get("env_id") for t in tables}
        table = pd.concat(tables, ignore_index=True).sort_values("end", kind="stable")
        where = str(folder) if len(files) > 1 else str(files[0])
        if table.empty:
            raise CubeError(f"{where}: no finished episode in its Monitor file(s): nothing to import")
        run = ImportedRun(run_key(_folder_labels(folder, sorted(map(str, env_ids))[0]), request.labels, where), where,
                          manifest={"source_files": [f.name for f in files]})
        costs = _cost(table, files[0], request)
        steps = len(files) * table["own_steps"].to_numpy(dtype=np.int64)  # all envs' steps, in lockstep
        iterates = iterates_of(steps, request.option("steps_per_iterate"), None, where)
        add_episodes(run, "train", iterates, table["r"].to_numpy(dtype=np.float64), costs,
                     f"{where}, column {request.option('cost_column')}")
        ends: dict[int, int] = {}
        for j, s in zip(iterates.tolist(), steps.tolist(), strict=True):
            ends[j] = max(ends.get(j, s), s)
        run.iterate_vars["env_steps"] = {j: float(s) for j, s in ends.items()}
        run.manifest.update(env_steps=float(steps.max()), envs=len(files), iterates_done=run.n_iterates(),
                            wall_s=float(table["end"].max() - min(t["end"].min() - t["t"].min() for t in tables)),
                            cost_column={"name": request.option("cost_column"), "kind": request.option("cost_kind")})
        note_convention(run, "cost_discount", "undiscounted", "--cost-kind episode: the episode's summed cost")
        note_convention(run, "history", "complete", f"every row of {len(files)} Monitor file(s)")
        runs.append(run)
    return runs


SB3_MONITOR = Importer(
    name="sb3-monitor", reads="Stable-Baselines3 Monitor CSVs (*.monitor.csv: a '#{t_start, env_id}' line, then "
    "r,l,t and info_keywords), every env's file of a run folder merged by time", gives="episodes",
    gives_text="every episode's reward and the cost column you name (--cost-column C --cost-kind episode), "
    "grouped into iterates by --steps-per-iterate: all metrics, tiers, CDFs; env steps, wall time",
    cannot_text="a cost where the Monitor kept none, or kept the last step's (info_keywords=('cost',) over "
    "Safety-Gymnasium: refused); evaluation episodes; multipliers",
    read=_read, options=(
        Option("--cost-column", "the Monitor column holding each episode's cost (an info_keywords entry)",
               metavar="COLUMN"),
        Option("--cost-kind", "what --cost-column holds: episode (the episode's summed cost) or last-step "
               "(refused: it cannot give V)", choices=COST_KINDS),
        STEPS_PER_ITERATE),
    example="saferl import sb3-monitor logs/ --out sb3.zarr --cost-column c --cost-kind episode --steps-per-iterate "
    "8192 --algo ppo --seed 0 --bound 25")
