"""The `tensorboard` format: TensorBoard event files (`events.out.tfevents.*`), one run per folder.

Every scalar is read (`cube.io.tfrecord`: no TensorFlow, no reservoir sampling; TensorBoard's own
`EventAccumulator` keeps 10,000 per tag unless told otherwise). Two kinds of runs:

* **Episodes.** Single-file RL code in the CleanRL style writes one scalar per finished episode at the
  env step it ended (`charts/episodic_return`; safe forks add `charts/episodic_cost`), several at one step
  with vector envs. Those tags are found by name, or named with `--reward-tag`/`--cost-tag`; the k-th
  reward at a step pairs with the k-th cost at that step. Episodes are grouped into iterates by
  `--steps-per-iterate N` (iterate = step // N) or by the steps of a tag logged once per policy update
  (`--iterate-tag`; by default CleanRL's `charts/learning_rate` or `losses/value_loss` where present).
* **Means.** OmniSafe and SafePO write their `progress.csv` rows as scalars at `global_step = epoch`
  (`Metrics/EpRet`, `Metrics/EpCost`, `TotalEnvSteps`, the multiplier): each epoch one iterate, stored as
  means only with their window (50 episodes, their released default; `--window`). `--means` reads named
  tags the same way.

Labels come from the folder names (CleanRL's `runs/<env_id>__<exp_name>__<seed>__<time>/`, OmniSafe's
`<Algo>-{<EnvId>}/seed-<k>-<time>/tb/` with its config.json) and `--algo/--task/--bound/--seed`.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from cube.errors import CubeError
from cube.io.conventions import note_convention
from cube.io.registry import STEPS_PER_ITERATE, Importer, ImportRequest, Option
from cube.io.sourcefiles import ImportedRun, add_episodes, add_means, iterates_of, json_object, run_key

EVENT_FILES = "events.out.tfevents*"
EPISODE_TAGS = {"reward": ("charts/episodic_return",), "cost": ("charts/episodic_cost",)}
"""Per-episode tags found by name (CleanRL and its safe forks)."""
UPDATE_TAGS = ("charts/learning_rate", "losses/value_loss", "losses/policy_loss", "losses/qf_loss")
"""Tags CleanRL logs once per policy update: their steps group episodes into iterates by default."""
MEAN_TAGS = {"reward": ("Metrics/EpRet",), "cost": ("Metrics/EpCost",), "env_steps": ("TotalEnvSteps",
             "Train/TotalSteps"), "multiplier": ("Metrics/LagrangeMultiplier", "Train/LagragianMultiplier",
                                                 "Train/LagrangianMultiplier")}
"""OmniSafe's and SafePO's per-epoch tags (their progress.csv columns)."""
TOOL_WINDOW = 50
"""Episodes in OmniSafe's (<= 0.5.0) and SafePO's windows of Metrics/EpRet and EpCost."""
CLEANRL_RUN = re.compile(r"^(?P<task>.+?)__(?P<algo>.+?)__(?P<seed>\d+)__(?P<time>\d+)$")


@dataclass
class TagSeries:
    """Every scalar of one tag across a run's files, in file order: steps (n,) int64, values (n,) float64."""

    steps: list[np.ndarray] = field(default_factory=list)
    values: list[np.ndarray] = field(default_factory=list)

    def arrays(self) -> tuple[np.ndarray, np.ndarray]:
        if not self.steps:
            return np.empty(0, np.int64), np.empty(0, np.float64)
        return np.concatenate(self.steps), np.concatenate(self.values)


def read_tags(files: Sequence[Path], wanted: set[str]) -> tuple[dict[str, TagSeries], list[str]]:
    """The scalars of the `wanted` tags in `files` (read in order, every event), and every tag's name."""
    from cube.io.tfrecord import TagTable, scalars

    table = TagTable()
    series: dict[str, TagSeries] = {}
    for path in files:
        for block in scalars(path, table):
            for tag_id in np.unique(block.tag_ids).tolist():
                name = table.names[tag_id]
                if name in wanted:
                    mask = block.tag_ids == tag_id
                    s = series.setdefault(name, TagSeries())
                    s.steps.append(block.steps[mask])
                    s.values.append(block.values[mask])
    return series, table.names


def _run_folders(sources: Sequence[Path]) -> dict[Path, list[Path]]:
    """Event files grouped by folder (one run each), files in name (= creation time) order."""
    folders: dict[Path, list[Path]] = {}
    for src in sources:
        if src.is_dir():
            files = sorted(src.rglob(EVENT_FILES))
        elif src.is_file():
            files = [src]
        else:
            raise CubeError(f"{src} does not exist; give TensorBoard event files (events.out.tfevents.*) or "
                            "folders holding them")
        for f in files:
            folders.setdefault(f.parent, []).append(f)
    if not folders:
        raise CubeError(f"no TensorBoard event files (events.out.tfevents.*) found in {', '.join(map(str, sources))}")
    return {k: sorted(v, key=lambda p: p.name) for k, v in folders.items()}


def _folder_labels(folder: Path) -> tuple[dict[str, Any], str]:
    """Labels from the folder layout (CleanRL's run name, or an OmniSafe/SafePO run's config.json) and
    the tool they point to ('cleanrl', 'omnisafe', 'safepo' or '')."""
    from cube.io.epochlogs import omnisafe_labels, safepo_labels

    m = CLEANRL_RUN.match(folder.name)
    if m:
        return {"algo": m["algo"], "task": m["task"], "seed": int(m["seed"])}, "cleanrl"
    for run_dir in (folder, folder.parent):
        config = run_dir / "config.json"
        if config.is_file():
            settings = json_object(config)
            if re.match(r"^[^-{]+-\{.+\}$", run_dir.parent.name) or "lagrange_cfgs" in settings:
                return omnisafe_labels(run_dir, settings), "omnisafe"
            return safepo_labels(run_dir, settings), "safepo"
    return {}, ""


def _first(names: Sequence[str], candidates: Sequence[str]) -> str | None:
    return next((c for c in candidates if c in names), None)


def _listing(names: Sequence[str]) -> str:
    shown = ", ".join(names[:8]) + (f" and {len(names) - 8} more" if len(names) > 8 else "")
    return shown or "none"


def _read(request: ImportRequest) -> list[ImportedRun]:
    return [_read_run(folder, files, request) for folder, files in _run_folders(request.sources).items()]


def _read_run(folder: Path, files: list[Path], request: ImportRequest) -> ImportedRun:
    opt = request.option
    named = [t for t in (opt("reward_tag"), opt("cost_tag"), opt("iterate_tag")) if t]
    wanted = {*named, *UPDATE_TAGS, *(t for ts in (*EPISODE_TAGS.values(), *MEAN_TAGS.values()) for t in ts)}
    series, names = read_tags(files, wanted)
    where = str(folder)
    found, tool = _folder_labels(folder)
    run = ImportedRun(run_key(found, request.labels, where), where,
                      manifest={"source_files": [f.name for f in files]})
    have = [n for n in names if n in series]
    means = opt("means") or (not opt("cost_tag") and _first(have, EPISODE_TAGS["cost"]) is None
                             and _first(have, MEAN_TAGS["cost"]) is not None)
    if means:
        _means(run, series, have, names, request, tool)
    else:
        _episodes(run, series, have, names, request)
    note_convention(run, "history", "complete", "every event of the file(s), none sampled")
    run.manifest["iterates_done"] = run.n_iterates()
    return run


def _episodes(run: ImportedRun, series: dict[str, TagSeries], have: list[str], names: list[str],
              request: ImportRequest) -> None:
    opt = request.option
    where = run.source
    cost_tag = opt("cost_tag") or _first(have, EPISODE_TAGS["cost"])
    reward_tag = opt("reward_tag") or _first(have, EPISODE_TAGS["reward"])
    if cost_tag is None or cost_tag not in series:
        raise CubeError(f"{where}: no per-episode cost tag ({opt('cost_tag') or ', '.join(EPISODE_TAGS['cost'])} "
                        f"not among its scalar tags: {_listing(names)}); name it with --cost-tag (and --means if "
                        "its values are means of several episodes)")
    steps, costs = _sorted(*series[cost_tag].arrays())
    rewards = np.full(costs.shape, np.nan)
    if reward_tag is not None:
        if reward_tag not in series:
            raise CubeError(f"{where}: no scalar tag {reward_tag!r} (its tags: {_listing(names)})")
        r_steps, r_values = _sorted(*series[reward_tag].arrays())
        _check_pairs(steps, r_steps, cost_tag, reward_tag, where)
        rewards = r_values
    if opt("iterate_tag") and opt("steps_per_iterate") is not None:
        raise CubeError("give --steps-per-iterate or --iterate-tag, not both: each says where iterates end")
    iterate_tag = opt("iterate_tag") or (None if opt("steps_per_iterate") else _first(have, UPDATE_TAGS))
    bounds = None
    if opt("steps_per_iterate") is None:
        if iterate_tag is None:
            raise CubeError(f"{where}: say how episodes form iterates: --steps-per-iterate N (env steps per policy "
                            f"update) or --iterate-tag TAG (a tag logged once per update; its tags: {_listing(names)})")
        if iterate_tag not in series:
            raise CubeError(f"{where}: no scalar tag {iterate_tag!r} to take iterates from (its tags: "
                            f"{_listing(names)})")
        bounds = np.unique(series[iterate_tag].arrays()[0])
        run.manifest["iterates_from"] = f"the steps of {iterate_tag} (one iterate per logged update)"
    else:
        run.manifest["iterates_from"] = f"--steps-per-iterate {opt('steps_per_iterate')}"
    iterates = iterates_of(steps, opt("steps_per_iterate"), bounds, where)
    add_episodes(run, "train", iterates, rewards, costs, f"{where}, {cost_tag}")
    its, first = np.unique(iterates, return_index=True)  # iterates rise with the sorted steps
    last = np.maximum.reduceat(steps, first) if steps.size else steps
    ends = dict(zip(its.tolist(), last.tolist(), strict=True))
    if bounds is not None:
        ends.update({j: int(b) for j, b in enumerate(bounds.tolist()) if j in ends})
    run.iterate_vars["env_steps"] = {j: float(s) for j, s in ends.items()}
    run.manifest["env_steps"] = float(max(ends.values()))
    run.manifest["tags"] = {"reward": reward_tag, "cost": cost_tag}


def _sorted(steps: np.ndarray, values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """By step, keeping file order within a step (the episodes logged at one step)."""
    order = np.argsort(steps, kind="stable")
    return steps[order], values[order]


def _check_pairs(cost_steps: np.ndarray, reward_steps: np.ndarray, cost_tag: str, reward_tag: str, where: str) -> None:
    """The k-th reward at a step pairs with the k-th cost at that step: both tags need the same steps."""
    if cost_steps.size == reward_steps.size and np.array_equal(cost_steps, reward_steps):
        return
    n = min(cost_steps.size, reward_steps.size)
    off = np.flatnonzero(cost_steps[:n] != reward_steps[:n])
    at = int(min(cost_steps[off[0]], reward_steps[off[0]])) if off.size else int(
        (cost_steps if cost_steps.size > n else reward_steps)[n])
    raise CubeError(f"{where}: {cost_tag} ({cost_steps.size:,} values) and {reward_tag} ({reward_steps.size:,}) do "
                    f"not pair episode for episode (first difference at step {at:,}); name the tags of one episode "
                    "with --reward-tag/--cost-tag")


def _per_step(series: dict[str, TagSeries], tag: str | None, steps: np.ndarray) -> np.ndarray:
    """The tag's value at each of `steps` (the last value logged at a step), NaN where it has none."""
    out = np.full(steps.shape, np.nan)
    if tag is None or tag not in series:
        return out
    s, v = series[tag].arrays()
    at = np.searchsorted(steps, s)
    out[at] = v  # later values (file order) overwrite earlier ones at the same step
    return out


def _means(run: ImportedRun, series: dict[str, TagSeries], have: list[str], names: list[str],
           request: ImportRequest, tool: str) -> None:
    opt = request.option
    cost_tag = opt("cost_tag") or _first(have, MEAN_TAGS["cost"])
    if cost_tag not in series:
        raise CubeError(f"{run.source}: no scalar tag {cost_tag!r} (its tags: {_listing(names)})")
    reward_tag = opt("reward_tag") or _first(have, MEAN_TAGS["reward"])
    steps = np.unique(series[cost_tag].arrays()[0])
    iterates = np.arange(steps.size, dtype=np.int64)  # each logged step (an epoch) one iterate
    known_tool = cost_tag in MEAN_TAGS["cost"] and not opt("cost_tag")
    window = opt("window") or (TOOL_WINDOW if known_tool else None)
    source = "--window" if opt("window") else "OmniSafe's (<= 0.5.0) and SafePO's released default" if window else ""
    what = (f"means of a window of the last {window} episodes ({source})" if window else
            "means of a window of episodes of unknown size (--window N records it)")
    text = f"{cost_tag} and {reward_tag or 'no reward tag'} logged once per epoch at global_step = epoch are {what}"
    add_means(run, "train", iterates, _per_step(series, reward_tag, steps), _per_step(series, cost_tag, steps),
              f"{run.source}, {cost_tag}", {"kind": "sliding" if tool != "safepo" else "running", "column": cost_tag,
                                            "window_episodes": window, "window_from": source or None, "text": text})
    for var in ("env_steps", "multiplier"):
        tag = _first(have, MEAN_TAGS[var])
        values = _per_step(series, tag, steps)
        if tag is not None:
            run.iterate_vars[var] = {int(j): float(v) for j, v in zip(iterates, values, strict=True) if np.isfinite(v)}
    if run.iterate_vars.get("env_steps"):
        run.manifest["env_steps"] = max(run.iterate_vars["env_steps"].values())
    if known_tool:
        note_convention(run, "cost_discount", "undiscounted", "OmniSafe's/SafePO's EpCost: the episode's sum of costs")
        note_convention(run, "normalization", "raw", "OmniSafe/SafePO log the original (unnormalized) values")
    run.manifest["tags"] = {"reward": reward_tag, "cost": cost_tag}


TENSORBOARD = Importer(
    name="tensorboard", reads="TensorBoard event files (events.out.tfevents.*), one run per folder: CleanRL-style "
    "per-episode tags, or OmniSafe/SafePO per-epoch tags", gives="episodes or means",
    gives_text="every episode logged at a tag (charts/episodic_return, charts/episodic_cost or named), several at "
    "one step kept, grouped into iterates by steps or an update tag: all metrics, tiers, CDFs; or OmniSafe/SafePO "
    "window means per epoch (R̄, C̄, D_norm), env steps, λ",
    cannot_text="costs where no cost tag was logged; V, D_norm+, tiers, CDFs from mean tags; labels or the bound "
    "where neither the folder names nor flags give them",
    read=_read, options=(
        Option("--reward-tag", "the tag of each episode's return (default: charts/episodic_return)", metavar="TAG"),
        Option("--cost-tag", "the tag of each episode's cost (default: charts/episodic_cost)", metavar="TAG"),
        STEPS_PER_ITERATE,
        Option("--iterate-tag", "a tag logged once per policy update: its steps end the iterates (default: "
               "charts/learning_rate or losses/value_loss where logged)", metavar="TAG"),
        Option("--means", "the named tags are means of several episodes (one per logged step), not episodes", None),
        Option("--window", "episodes in each mean's window (mean tags; default 50 for OmniSafe's/SafePO's)", int,
               metavar="N")),
    example="saferl import tensorboard runs/ --out cleanrl.zarr --bound 25")
