"""Units of work of a sweep: runs alone, or vmapped groups; a started run goes back into the group it was
started in (its manifest's `group`), so that its numbers are the uninterrupted sweep's (no jax here)."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Collection, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from cube.schema import RunKey

if TYPE_CHECKING:
    from train.executors import RunOutcome

Unit = RunKey | tuple[RunKey, ...]
"""A unit of work: one run, or a vmapped group of runs of one task in program order."""


def make_units(keys: Sequence[RunKey], out: str | Path, size: int, regroup: bool = False,
               report: Callable[[str], None] = print) -> list[Unit]:
    """Units of work for `keys`: RunKeys (one run) and tuples of RunKeys (one vmapped group, in program order).

    A run started before (a partial run: an interrupted or failed attempt) goes back into the group it was
    started in, as its manifest records it (`group`; none recorded: it ran alone), whatever `size` is now:
    a vmapped program's floats depend on its members and their number, and training is chaotic, so only
    the same group reproduces the numbers an uninterrupted sweep would have given. Members of that group
    outside `keys` (complete or not selected) ride along unwritten. With `regroup`, or when the members'
    records disagree (one was trained in another group since; a line is reported), started runs are
    grouped like new ones. New runs: keys of one task and algorithm with the same resume iterate, in
    chunks of `size` (size 1 gives plain RunKeys).
    """
    from cube import read_manifests
    from train import checkpoint

    rows = {RunKey.from_dict(r): r for r in read_manifests(out)}
    units: list[Unit] = []
    fresh: list[RunKey] = []
    placed: set[RunKey] = set()
    for k in keys:
        if k in placed:
            continue
        group = None if regroup else started_group(rows.get(k))
        if group is not None and not all(m in rows and started_group(rows[m]) in (group, ()) for m in group):
            report(f"{k}: cannot rebuild the group it was started in (a member was trained in another group "
                   "since); it is trained in a new group, so its numbers may differ from an uninterrupted "
                   "run's by float noise")
            group = None
        if group is None:
            fresh.append(k)
            continue
        units.append(group if len(group) > 1 else group[0])
        placed.update(group)
    if size <= 1:
        return units + fresh
    by_start: dict[tuple[str, str, int], list[RunKey]] = {}
    for k in fresh:
        its = checkpoint.resume_iterates(out, k)
        by_start.setdefault((k.task, k.algo, its[-1] if its else -1), []).append(k)
    for members in by_start.values():
        units.extend(tuple(members[i:i + size]) for i in range(0, len(members), size))
    return units


def started_group(row: dict[str, Any] | None) -> tuple[RunKey, ...] | None:
    """The group a run was started in, in program order, from its manifest row: its recorded `group`, or
    the run alone for a partial run without one; `()` for a complete run without one (it may ride along
    in any group); None for a run never started (or no row)."""
    if row is None or row.get("status") not in ("partial", "complete"):
        return None
    members = row.get("group")
    if not members:
        return (RunKey.from_dict(row),) if row["status"] == "partial" else ()
    return tuple(RunKey.from_dict(m) if isinstance(m, dict) else parse_run_label(m) for m in members)


def parse_run_label(text: str) -> RunKey:
    """The RunKey of `str(key)` ("algo/task/d=25/seed=3"), as manifests written before 2026-11-26 record
    group members."""
    algo, task, bound, seed = str(text).rsplit("/", 3)
    return RunKey(algo, task, float(bound.removeprefix("d=")), int(seed.removeprefix("seed=")))


def split_outcome(outcome: RunOutcome, written: Collection[RunKey] | None = None) -> list[RunOutcome]:
    """Per-run RunOutcomes from the outcome of a unit (a RunKey, or a tuple of them run as a group), for
    the runs in `written` (None: all; members that rode along have no outcome of their own)."""
    if isinstance(outcome.key, RunKey):
        return [outcome]
    results = outcome.result or {}
    return [dataclasses.replace(outcome, key=k, result=results.get(str(k))) for k in outcome.key
            if written is None or k in written]
