"""One truth about a run's progress: what it does now (its phase), how fast it trains and when it ends.

The trainer keeps a *progress record* per run (`ProgressLog`) and writes it, whole, to
``<store>/_progress/<run>.json`` each time it changes: at every phase change and after every iterate.
`saferl status`, the TUI's Status view and the trainer's own live display all turn a record into numbers
with the one function `run_progress`, so they show the same numbers at the same moment.

A record (JSON object)::

    {"started": manifest 'started' of the attempt, "phase": one of ACTIVE_PHASES, "since": POSIX seconds
     the phase began, "n_iterates": J, "first": the attempt's first iterate (its resume point + 1),
     "iterates": [[iterate, env steps after it, wall seconds of it], ...] (the last WINDOW + 1 of the attempt),
     "compile_s": seconds of the attempt's first iterate (compile included), "pid": int, "host": str}

*Steps per second*: the env steps over the wall seconds of the run's last `WINDOW` iterates of this attempt,
its first iterate left out (that one includes the compile); an iterate's wall time runs from the call of the
compiled iterate to the end of its writes, evaluation not included. *ETA*: the iterates left at the mean
wall time of those iterates (evaluations not included); unknown ('—') while compiling or evaluating (an
evaluation compiles its own program, minutes on a CPU, at no pace measured so far) and before the attempt's
second iterate.
A group of runs trained in one program: steps per second summed, the longest ETA (`combine`).
Numpy-free and jax-free: plain Python.
"""

from __future__ import annotations

import json
import math
import os
import socket
import time
import uuid
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cube.schema import RunKey
from cube.store.claims import run_file_name
from cube.store.fs import PathLike, side_folder

PROGRESS_DIR = "_progress"
WINDOW = 5
"""Iterates the steps per second are measured over (the last ones of the attempt, its first left out)."""
ACTIVE_PHASES = ("compiling", "training", "evaluating", "writing")
"""What a running run does (its record says which)."""
PHASES = ("pending", *ACTIVE_PHASES, "stopped", "failed", "complete")
RATE_OVER = f"env steps/s over each run's last {WINDOW} iterates (compile and evaluation excluded)"
"""What every shown steps/s is measured over, in words."""
ETA_NOTE = "ETA: — while compiling, evaluating or before a run's 2nd iterate"


@dataclass(frozen=True)
class Progress:
    """A run's (or group's) progress at one moment. `phase`: one of PHASES; `phase_s`: seconds in it (None:
    unknown); `iterates`: iterates written; `steps_per_s`: env steps per wall second over `over` iterates
    (None: not yet known); `eta_s`: seconds to the last iterate (None: not known)."""

    phase: str
    phase_s: float | None = None
    iterates: int | None = None
    n_iterates: int | None = None
    env_steps: float | None = None
    steps_per_s: float | None = None
    over: int = 0
    eta_s: float | None = None
    compile_s: float | None = None
    iterate_s: float | None = None
    """Mean wall seconds of one iterate over the measured window (None: not known)."""


def run_progress(record: dict[str, Any], now: float | None = None, window: int = WINDOW) -> Progress:
    """A progress record as numbers at POSIX time `now` (default: now); see the module docstring."""
    now = time.time() if now is None else now
    its = [tuple(x) for x in record.get("iterates") or ()]
    first = int(record.get("first") or 0)
    measured = [x for x in its if int(x[0]) > first][-window:]
    steps = _steps_of(its, measured)
    wall = sum(float(x[2]) for x in measured)
    rate = steps / wall if measured and wall > 0 and steps > 0 else None
    n = record.get("n_iterates")
    done = int(its[-1][0]) + 1 if its else first
    per = wall / len(measured) if rate is not None else None
    phase = str(record.get("phase") or "compiling")
    eta = None
    if per is not None and phase not in ("compiling", "evaluating") and n is not None:
        eta = max(int(n) - done, 0) * per
    since = record.get("since")
    return Progress(phase, None if since is None else max(now - float(since), 0.0), done, n,
                    float(its[-1][1]) if its else None, rate, len(measured) if rate is not None else 0, eta,
                    record.get("compile_s"), per)


def _steps_of(its: Sequence[tuple], measured: Sequence[tuple]) -> float:
    """Env steps of the `measured` iterates: the difference of the running totals across them."""
    if not measured:
        return 0.0
    at = its.index(measured[0])
    return float(measured[-1][1]) - float(its[at - 1][1]) if at > 0 else 0.0

def combine(runs: Sequence[Progress]) -> Progress:
    """The progress of runs trained together (one program): steps per second summed, the longest ETA, the
    phase of the first run, iterates of the furthest run. An empty sequence is pending."""
    if not runs:
        return Progress("pending")
    rates = [r.steps_per_s for r in runs if r.steps_per_s is not None]
    etas = [r.eta_s for r in runs if r.eta_s is not None]
    known = all(r.eta_s is not None for r in runs)
    return Progress(runs[0].phase, runs[0].phase_s, max((r.iterates or 0) for r in runs), runs[0].n_iterates,
                    sum(r.env_steps or 0.0 for r in runs), sum(rates) if rates else None,
                    min((r.over for r in runs), default=0), max(etas) if known and etas else None,
                    runs[0].compile_s, runs[0].iterate_s)


def sweep_eta(running: Sequence[Progress], n_pending: int, run_s: float | None) -> float | None:
    """Seconds until the runs of a sweep (or a group of it) are all done: the longest running ETA, plus the
    pending runs in batches as wide as the runs running now, each batch `run_s` (a compile and all iterates,
    as measured on the runs so far). None where it cannot be known: a running run without an ETA, or pending
    runs and no `run_s` measured yet."""
    if any(r.eta_s is None for r in running):
        return None
    now = max((r.eta_s or 0.0 for r in running), default=0.0)
    if n_pending == 0:
        return now if running else None
    if run_s is None:
        return None
    return now + math.ceil(n_pending / max(len(running), 1)) * run_s


def run_seconds(p: Progress) -> float | None:
    """A whole run's seconds estimated from one measured run: its compile plus every iterate at its pace."""
    if p.compile_s is None or p.iterate_s is None or p.n_iterates is None:
        return None
    return p.compile_s + p.n_iterates * p.iterate_s


# ------------------------------------------------------------------------------------------ the records
def progress_path(store: PathLike, key: RunKey) -> Path:
    """Where the progress record of run `key` lives."""
    return Path(store) / PROGRESS_DIR / run_file_name(key, ".json")


def read_record(store: PathLike, key: RunKey) -> dict[str, Any] | None:
    """The run's progress record, or None (none written, or not readable: a reader then knows no phase)."""
    try:
        body = json.loads(progress_path(store, key).read_text())
    except (OSError, ValueError):
        return None
    return body if isinstance(body, dict) else None


def write_record(store: PathLike, key: RunKey, record: dict[str, Any]) -> None:
    """Write the run's record whole (beside it, then renamed into place); a store that cannot take it loses
    only the record (progress is advice: training never fails for it)."""
    path = progress_path(store, key)
    tmp = path.with_name(f".{path.name}.{uuid.uuid4().hex[:8]}")
    try:
        if not path.parent.exists():
            side_folder(path.parent)
        tmp.write_text(json.dumps(record))
        os.replace(tmp, path)
    except OSError:
        tmp.unlink(missing_ok=True)


class ProgressLog:
    """The trainer's progress records of runs trained together (one program), kept here and written to the
    store at each change. `first`: the attempt's first iterate; `env_steps`: each run's env steps before it
    (a resume point's); `started`: the attempt's manifest stamp; `store` None keeps them in memory only."""

    def __init__(self, store: PathLike | None, keys: Iterable[RunKey], n_iterates: int, first: int,
                 env_steps: dict[RunKey, float], started: str, window: int = WINDOW) -> None:
        self.store, self.keys, self.window = store, list(keys), window
        base = {"started": started, "phase": "compiling", "since": time.time(), "n_iterates": int(n_iterates),
                "first": int(first), "compile_s": None, "pid": os.getpid(), "host": socket.gethostname()}
        self.records = {k: {**base, "iterates": [[first - 1, float(env_steps.get(k, 0.0)), 0.0]] if first > 0 else []}
                        for k in self.keys}
        self._write()

    def start_at(self, first: int, env_steps: dict[RunKey, float]) -> None:
        """The attempt starts at iterate `first` (a resume point's next; the log was made before it was known),
        with each run's env steps before it."""
        for k, r in self.records.items():
            r.update(first=int(first), iterates=[[first - 1, float(env_steps.get(k, 0.0)), 0.0]] if first > 0 else [])
        self._write()

    def phase(self, phase: str) -> None:
        """The runs now `phase` (one of ACTIVE_PHASES)."""
        now = time.time()
        for r in self.records.values():
            r.update(phase=phase, since=now)
        self._write()

    def iterate(self, j: int, env_steps: dict[RunKey, float], wall_s: float) -> None:
        """Iterate `j` ended after `wall_s` seconds (compile included for the attempt's first); `env_steps`:
        each run's env steps after it. The runs are training again."""
        now = time.time()
        for k, r in self.records.items():
            if j == r["first"]:
                r["compile_s"] = round(wall_s, 4)
            r["iterates"] = [*r["iterates"], [int(j), float(env_steps[k]), float(wall_s)]][-(self.window + 2):]
            r.update(phase="training", since=now)
        self._write()

    def progress(self, now: float | None = None) -> dict[RunKey, Progress]:
        """Each run's progress now (`run_progress`, what status and the TUI compute from the stored record)."""
        return {k: run_progress(r, now, self.window) for k, r in self.records.items()}

    def _write(self) -> None:
        if self.store is not None:
            for k, r in self.records.items():
                write_record(self.store, k, r)
