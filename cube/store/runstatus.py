"""The status of every run of a store being written: the one reader behind `saferl status` (and its
``--watch``) and the TUI's Status view, and the one text of a run's row that both show.

Per run it combines what the store says (the stored status and manifest, `cube.schema.run_facts`, and
the per-iterate ``env_steps``, read as one writer state), who holds it (its claim file,
`cube.store.claims`) and when it last wrote (the modification time of its write-sequence chunk, bumped
by every write bracket). Its *status* is one of:

* ``complete``: the stored status says so;
* ``running``: a live process holds its claim, or no claim is held but the process its manifest names
  runs on this host (executors on dask or SLURM claim nothing), or runs on another host where that
  cannot be checked (then the host is shown with a '?');
* ``failed``: the sweep gave up on it (its manifest holds the last attempt's ``error``, recorded by
  `saferl train` once its retries are spent), and nothing holds it now;
* ``stopped``: partial and nothing holds it (its process ended, was killed or is gone): the next sweep
  resumes it;
* ``pending``: nothing written yet.

A running run is *stalled* when it wrote nothing for `stall_s` seconds. What a running run does (its
*phase*: compiling, training, evaluating, writing), its steps per second and its ETA come from the progress
record its trainer keeps (`cube.store.progress`, the one model the trainer's own display reads too): env
steps per wall second over its last iterates, compile excluded, and no ETA while compiling or before its
second iterate. A run written by another writer (a `cube.Recorder`) has no record: its phase is 'running',
its rate the env steps a reader saw land since it first saw the run, until then those over the wall time of
the latest attempt.
"""

from __future__ import annotations

import math
import os
import socket
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

import numpy as np

from cube.schema import NARROW_FIELDS as NARROW_FIELDS  # re-exported: the fields `saferl status` shows
from cube.schema import ROW_FIELDS as ROW_FIELDS  # re-exported: the fields `row_text` gives
from cube.schema import RUN_DIMS, RUN_STATUS_NAMES, STALL_S, RunKey, final_iterate, run_facts
from cube.store.claims import ClaimState, claim_state
from cube.store.damage import reading_store
from cube.store.fs import PathLike, pid_alive
from cube.store.grid import published_sizes
from cube.store.layout import open_group, read_coords
from cube.store.location import is_remote, local_path
from cube.store.locks import WRITE_SEQ, read_runs, read_write_seqs, runs_written_since
from cube.store.progress import Progress, read_record, run_progress, run_seconds, sweep_eta
from cube.store.read import read_manifests

STATUSES = ("running", "stopped", "failed", "pending", "complete")
"""Run statuses in the order that needs attention first (`unknown`: a store without run status)."""
@dataclass
class RunStatus:
    """One run's status now. Times are POSIX seconds; `iterates` counts the iterates written (the last
    iterate with env steps + 1) of `n_iterates`; rates are env steps per second; None where unknown."""

    key: RunKey
    index: tuple[int, ...]
    status: str
    stored: str
    stalled: bool = False
    iterates: int | None = None
    n_iterates: int | None = None
    env_steps: float | None = None
    steps_per_s: float | None = None
    eta_s: float | None = None
    host: str | None = None
    host_checked: bool = True
    slurm_job_id: str | None = None
    last_write: float | None = None
    started: str | None = None
    wall_s: float = math.nan
    claim: ClaimState = field(default_factory=lambda: ClaimState("free"))
    error: str | None = None
    retries: int = 0
    notes: str = ""
    manifest: dict[str, Any] = field(default_factory=dict)
    phase: str = "pending"
    """What it does now: its status, or for a running run its trainer's phase ('running' without a record)."""
    progress: Progress | None = None
    """A running run's progress from its trainer's record (`cube.store.progress.run_progress`)."""
    run_s: float | None = None
    """Seconds a whole run takes (compile and every iterate), as measured on this one; None: not known."""

    def flags(self, now: float | None = None) -> str:
        """What needs attention, in words: 'stalled 12m', 'failed: ...', 'claim damaged (...)'; '' if nothing."""
        out = []
        if self.stalled:
            out.append("stalled" if self.last_write is None else
                       f"stalled {duration((now or time.time()) - self.last_write)}")
        if self.status == "failed" and self.error:
            out.append(f"failed: {self.error}")
        if self.claim.state == "damaged":
            out.append(f"claim {self.claim.describe()}")
        elif self.claim.state == "stale" and self.status != "complete":
            out.append(f"claim {self.claim.describe()}")
        return "; ".join(out)

    def host_text(self) -> str:
        """The host that writes (wrote) it; 'host?' where its process cannot be checked from here."""
        return "" if not self.host else self.host + ("" if self.host_checked else "?")


@dataclass
class _Facts:
    """What the store says of one run (re-read when its write sequence moves)."""

    stored: str
    manifest: dict[str, Any]
    iterates: int | None
    env_steps: float | None
    known: dict[str, Any] = field(default_factory=dict)  # run_facts(manifest)
    key: RunKey | None = None  # the run's labels (set by the reader)
    seq_file: str = ""  # its write-sequence chunk (set by the reader)


class RunStatusReader:
    """Reads every run's status (`read`), again and again: the stored facts of a run are read again
    only when its write sequence moved; claims and last-write times are read at every call (stat calls
    and small files). `stall_s`: seconds without a write after which a running run is stalled.
    `total_iterates(manifest row)`: the iterates a run has when complete (default: the store's iterates)."""

    def __init__(self, path: PathLike, stall_s: float = STALL_S,
                 total_iterates: Callable[[dict[str, Any]], int | None] | None = None) -> None:
        self.path = path if is_remote(path) else Path(local_path(path))
        self.stall_s = float(stall_s)
        self.total_iterates = total_iterates
        self._facts: dict[tuple[int, ...], _Facts] = {}
        self._seqs: np.ndarray | None = None
        self._sizes: dict[str, int] | None = None
        self._coords: dict[str, np.ndarray] = {}
        self._first_seen: dict[tuple[int, ...], tuple[str | None, float, float]] = {}
        self._shown: dict[tuple[int, ...], RunStatus] = {}

    def read(self, now: float | None = None, seqs: np.ndarray | None = None) -> list[RunStatus]:
        """Every run of the published grid, in store order. `seqs`: the write sequences just read by the
        caller (a `cube.store.locks.SeqWatch`), saving a read. CubeError (one line) for a store that
        cannot be read."""
        sizes = published_sizes(self.path)
        if sizes != self._sizes or not self._coords:
            self._sizes, self._facts, self._seqs = sizes, {}, None
            self._coords = read_coords(open_group(self.path, mode="r", sizes=sizes))
        seqs = read_write_seqs(self.path, sizes) if seqs is None else seqs
        if not self._facts or seqs is None or self._seqs is None or seqs.shape != self._seqs.shape:
            self._read_all(sizes)
            self._shown = {}
        else:
            moved = [tuple(int(i) for i in ix) for ix in np.argwhere(seqs != self._seqs)]
            self._read_runs(sizes, moved)
            for index in moved:
                self._shown.pop(index, None)
        self._seqs = None if seqs is None else seqs.copy()  # a SeqWatch updates its array in place
        now = time.time() if now is None else now
        if seqs is None:  # no sequences: nothing tells which runs are unchanged
            self._shown = {}
        out = []
        for index, facts in self._facts.items():
            run = self._unchanged(index, facts)
            if run is None:
                run = self._shown[index] = self._run_status(index, self._located(index, facts), now)
            out.append(run)
        return out

    def _unchanged(self, index: tuple[int, ...], facts: _Facts) -> RunStatus | None:
        """The run's status of the previous read when nothing it shows can have changed: its write sequence
        did not move (so neither its stored facts nor its last write time), it is not running (whose numbers
        move with the clock) and its claim is the same. Saves an idle reader of 1,440 runs most of its work."""
        prev = self._shown.get(index)
        if prev is None or prev.status in ("running", "unknown"):
            return None
        if facts.stored == "complete" and prev.status == "complete":
            return prev
        return prev if claim_state(self.path, prev.key) == prev.claim else None

    def _located(self, index: tuple[int, ...], facts: _Facts) -> _Facts:
        """`facts` with the run's labels and sequence chunk path (kept with its facts: one idle read of a
        paper-scale store costs stat calls, not labels and paths built again for 1,440 runs)."""
        if facts.key is None:
            facts.key = RunKey.at(self._coords, index)
            facts.seq_file = os.path.join(self.path, WRITE_SEQ, "c", *(str(int(i)) for i in index))
        return facts

    # ------------------------------------------------------------------ stored facts
    def _read_all(self, sizes: dict[str, int] | None) -> None:
        """Every run's facts: manifests and status of one writer state each (`read_manifests`), env steps
        read in one zarr call, runs written meanwhile read again."""
        before = read_write_seqs(self.path, sizes)
        group = open_group(self.path, mode="r", sizes=sizes)
        with reading_store(self.path, f"read the env steps of {self.path}"):
            steps = np.asarray(group["env_steps"][...], dtype=np.float64) if "env_steps" in group else None
        rows = read_manifests(self.path)
        shape = tuple(len(self._coords[d]) for d in RUN_DIMS)
        self._facts = {}
        for index, row in zip(np.ndindex(*shape), rows, strict=True):
            self._facts[index] = _facts(row.pop("status"), row, None if steps is None else steps[index])
        if before is not None:
            self._read_runs(sizes, runs_written_since(before, read_write_seqs(self.path, sizes)))

    def _read_runs(self, sizes: dict[str, int] | None, runs: Iterable[tuple[int, ...]]) -> None:
        """The facts of `runs` again, each of one writer state (`read_runs`; an interrupted write is not named
        here: the run shows as partial, and validate and report name it)."""
        runs = list(runs)
        if not runs:
            return
        group = open_group(self.path, mode="r", sizes=sizes)
        names = [n for n in ("run_status", "run_manifest", "env_steps") if n in group]
        if not names:
            return
        for index, read in read_runs(self.path, names, runs, self._coords, sizes, notes=[]):  # its status: partial
            got = read.arrays
            row = manifest_body(got.get("run_manifest"))
            code = got.get("run_status")
            stored = RUN_STATUS_NAMES.get(int(code), "unknown") if code is not None else "unknown"
            self._facts[index] = _facts(stored, row, got.get("env_steps"))

    # ------------------------------------------------------------------ one run now
    def _run_status(self, index: tuple[int, ...], facts: _Facts, now: float) -> RunStatus:
        key, row, known = facts.key or RunKey.at(self._coords, index), facts.manifest, facts.known
        claim = claim_state(self.path, key) if facts.stored != "complete" else ClaimState("free")
        last = _mtime(facts.seq_file)
        host, checked = _writer(row, claim)
        out = RunStatus(key, index, "pending", facts.stored, iterates=facts.iterates, env_steps=facts.env_steps,
                          host=host, host_checked=checked, slurm_job_id=_text(row.get("slurm_job_id")),
                          last_write=last, started=_text(known["started"]), claim=claim,
                          error=_text(row.get("error")), retries=int(row.get("retries") or 0),
                          notes=str(row.get("notes") or ""), manifest=row)
        total = self.total_iterates(row) if self.total_iterates is not None else None
        out.n_iterates = total or (self._sizes or {}).get("iterate") or len(self._coords.get("iterate", ()))
        out.status = _status(facts.stored, claim, row, known, checked, last, now, self.stall_s)
        out.stalled = out.status == "running" and last is not None and now - last > self.stall_s
        start = _seconds(known["started"])
        end = _seconds(known["finished"])
        if start is not None:
            out.wall_s = (end if end is not None else now if out.status == "running" else last or now) - start
        out.phase = out.status
        out.run_s = _run_seconds(row, out.n_iterates)
        record = read_record(self.path, key) if out.status == "running" else None
        if record is not None and record.get("started") == known["started"]:
            p = out.progress = run_progress(record, now)
            out.phase, out.steps_per_s, out.eta_s = p.phase, p.steps_per_s, p.eta_s
            out.iterates = p.iterates  # where the attempt stands (a resume rewrites the iterates after its point)
            out.env_steps = out.env_steps if p.env_steps is None else p.env_steps
            out.run_s = run_seconds(p) or out.run_s
            return out
        if out.status == "running":
            out.phase = "running"
        out.steps_per_s = self._rate(index, out, start)
        if out.status == "running" and out.steps_per_s and out.n_iterates and out.iterates and out.env_steps:
            total = out.env_steps / out.iterates * out.n_iterates
            out.eta_s = max(total - out.env_steps, 0.0) / out.steps_per_s
        return out

    def _rate(self, index: tuple[int, ...], run: RunStatus, start: float | None) -> float | None:
        """Env steps per second of the latest attempt: from this reader's first sight of the attempt when
        steps landed since, else the steps over the attempt's wall time (None when not running)."""
        if run.env_steps is None or run.last_write is None:
            return None
        seen = self._first_seen.get(index)
        if seen is None or seen[0] != run.started:
            seen = self._first_seen[index] = (run.started, run.env_steps, run.last_write)
        if run.status != "running":
            return None
        steps, at = run.env_steps - seen[1], run.last_write - seen[2]
        if steps > 0 and at > 0:
            return steps / at
        if start is not None and run.last_write > start:
            return run.env_steps / (run.last_write - start)
        return None


def _run_seconds(row: dict[str, Any], n_iterates: int | None) -> float | None:
    """A whole run's seconds from its manifest's timings (the first iterate with its compile, then the rest at
    their pace); None without them."""
    compile_s, train_s, done = (row.get(k) for k in ("compile_s", "train_s", "iterates_done"))
    if not (compile_s and train_s and done and n_iterates and done > 1):
        return None
    return float(compile_s) + float(train_s) / (done - 1) * (n_iterates - 1)


def _facts(stored: str, row: dict[str, Any], steps: np.ndarray | None) -> _Facts:
    """A run's stored facts; iterates and env steps from the per-iterate `env_steps` when written,
    else from the manifest."""
    known = run_facts(row)
    iterates, env = known["iterates_done"], known["env_steps"]
    if steps is not None:
        steps = np.asarray(steps, dtype=np.float64)
        last = int(final_iterate(np.isfinite(steps).astype(np.int64)))
        if last >= 0:
            iterates, env = last + 1, float(steps[last])
    return _Facts(stored, row, None if iterates is None else int(iterates), None if env is None else float(env),
                  known)


def _status(stored: str, claim: ClaimState, row: dict[str, Any], known: dict[str, Any], checked: bool,
            last: float | None, now: float, stall_s: float) -> str:
    """The run's status (module docstring) from its stored status, claim and manifest."""
    if stored == "complete":
        return "complete"
    if claim.state == "held":
        return "running"
    if row.get("error"):
        return "failed"
    if stored == "pending":
        return "pending"
    if stored == "unknown":
        return "unknown"
    if known["finished"] is None and claim.state == "free" and row.get("pid") is not None:
        if not checked:  # another host's process: running while it writes (stalled when it stops)
            return "running"
        if _alive(row.get("pid")):
            return "running"
    return "stopped"


def _writer(row: dict[str, Any], claim: ClaimState) -> tuple[str | None, bool]:
    """(host that writes the run, whether its process can be checked from here)."""
    host = claim.holder.get("host") if claim.holder else row.get("host")
    host = _text(host)
    return host, host is None or host == socket.gethostname()


def _alive(pid: Any) -> bool:
    return isinstance(pid, int) and not isinstance(pid, bool) and pid_alive(pid)


def _text(value: Any) -> str | None:
    return None if value is None or value == "" else str(value)


def _seconds(stamp: Any) -> float | None:
    """A manifest time ('2026-11-26T10:00:00Z') as POSIX seconds; None when absent or unreadable."""
    if not stamp:
        return None
    try:
        return datetime.fromisoformat(str(stamp).replace("Z", "+00:00")).timestamp()
    except ValueError:
        return None


def manifest_body(text: Any) -> dict[str, Any]:
    """A stored manifest (JSON text) as a dict ({} when empty; a note when it is not a JSON object)."""
    import json

    if text is None:
        return {}
    text = str(np.asarray(text).item()) if isinstance(text, np.ndarray) else str(text)
    if not text:
        return {}
    try:
        body = json.loads(text)
    except ValueError:
        body = None
    return body if isinstance(body, dict) else {"manifest_error": "the stored manifest is not a JSON object"}


def _mtime(file: str) -> float | None:
    try:
        return os.stat(file).st_mtime
    except OSError:
        return None


def last_write(path: PathLike, index: Sequence[int]) -> float | None:
    """When the run at `index` last wrote anything (mtime of its write-sequence chunk), or None."""
    try:
        return os.stat(Path(path) / WRITE_SEQ / "c" / "/".join(str(int(i)) for i in index)).st_mtime
    except OSError:
        return None


def read_run_status(path: PathLike, stall_s: float = STALL_S,
                  total_iterates: Callable[[dict[str, Any]], int | None] | None = None) -> list[RunStatus]:
    """Every run's status, once (`RunStatusReader` for repeated reads)."""
    return RunStatusReader(path, stall_s, total_iterates).read()


# ---------------------------------------------------------------------------------------- totals and text
def totals(runs: Sequence[RunStatus], by: tuple[str, ...] = ("algo", "task")) -> list[dict[str, Any]]:
    """Per group of `by` labels (first-seen order): runs, each status's count, stalled, env steps and their
    rate summed over running runs, and the ETA of the group (`cube.store.progress.sweep_eta`: the longest
    running ETA plus the pending runs, each a compile and all its iterates as measured on the group's runs;
    None where that cannot be known)."""
    groups: dict[tuple, dict[str, Any]] = {}
    members: dict[tuple, list[RunStatus]] = {}
    for r in runs:
        labels = tuple(getattr(r.key, d) for d in by)
        g = groups.setdefault(labels, {**dict(zip(by, labels, strict=True)), "runs": 0, "stalled": 0,
                                       **{s: 0 for s in STATUSES}, "env_steps": 0.0, "steps_per_s": 0.0,
                                       "eta_s": None})
        members.setdefault(labels, []).append(r)
        g["runs"] += 1
        g[r.status] = g.get(r.status, 0) + 1
        g["stalled"] += int(r.stalled)
        g["env_steps"] += r.env_steps or 0.0
        g["steps_per_s"] += r.steps_per_s or 0.0
    for labels, g in groups.items():
        runs_of = members[labels]
        running = [r.progress or Progress("running", eta_s=r.eta_s) for r in runs_of if r.status == "running"]
        measured = [r.run_s for r in runs_of if r.run_s is not None]
        g["eta_s"] = sweep_eta(running, g["pending"], max(measured) if measured else None)
    return list(groups.values())


def duration(seconds: float | None) -> str:
    """'45s', '12m', '3h05m', '2d04h'; '' for None or NaN."""
    if seconds is None or not math.isfinite(seconds):
        return ""
    s = max(int(round(seconds)), 0)
    if s < 60:
        return f"{s}s"
    if s < 3600:
        return f"{s // 60}m"
    if s < 86400:
        return f"{s // 3600}h{s % 3600 // 60:02d}m"
    return f"{s // 86400}d{s % 86400 // 3600:02d}h"


def steps_text(steps: float | None) -> str:
    """Env steps as shown: 1.2M from a million on, 12.3k from ten thousand, else with separators."""
    if steps is None or not math.isfinite(steps):
        return ""
    if steps >= 1e6:
        return f"{steps / 1e6:.1f}M"
    return f"{steps / 1e3:.1f}k" if steps >= 1e4 else f"{steps:,.0f}"


def rate_text(steps_per_s: float | None) -> str:
    """Env steps per second: '12,345' from a hundred on, '4.56' below; '' when unknown or zero."""
    if not steps_per_s or not math.isfinite(steps_per_s):
        return ""
    return f"{steps_per_s:,.0f}" if steps_per_s >= 100 else f"{steps_per_s:.3g}"


def wall_text(seconds: float) -> str:
    """Wall time as H:MM:SS ('' when unknown)."""
    if not math.isfinite(seconds):
        return ""
    s = max(int(round(seconds)), 0)
    return f"{s // 3600}:{s % 3600 // 60:02d}:{s % 60:02d}"


def row_text(r: RunStatus, now: float | None = None) -> dict[str, str]:
    """The one text of a run's row ({field of ROW_FIELDS: text}), shown by `saferl status` and the TUI's
    Status view alike: the status ('partial (running)' where the stored status and what runs now differ),
    iterates written of the total ('3/40'), env steps ('1.2M'), env steps per second of the latest attempt
    ('12,345'), the ETA ('4m'), the wall time of the latest attempt ('0:12:05'), the host ('host?' where its
    process cannot be checked from here), the SLURM job, the time since the last write ('15m ago') and what
    needs attention; and "phase", what the run does now in one word (its status alone, 'stalled' for a
    running run that stopped writing), the status of the narrow row. `now`: POSIX seconds (default: the
    time now)."""
    now = time.time() if now is None else now
    stored, status = r.stored, r.status
    shown = status if status == stored or stored in ("unknown", "pending") else f"{stored} ({status})"
    p = r.progress
    return {"algo": str(r.key.algo), "task": str(r.key.task), "bound": f"{r.key.bound:g}", "seed": str(r.key.seed),
            "status": shown, "phase": "stalled" if r.stalled else phase_text(r.phase, p and p.phase_s),
            "iterates": "" if r.iterates is None else f"{r.iterates}/{r.n_iterates or '?'}",
            "env steps": steps_text(r.env_steps), "steps/s": rate_text(r.steps_per_s),
            "ETA": eta_text(r.eta_s, p is not None),
            "wall": wall_text(r.wall_s), "host": r.host_text(), "job": r.slurm_job_id or "",
            "last write": "" if r.last_write is None else f"{duration(max(now - r.last_write, 0.0))} ago",
            "flags": r.flags(now)}


def phase_text(phase: str, seconds: float | None = None) -> str:
    """What a run does now, with the time it has done it for an active phase: 'compiling 2m', 'training'."""
    if phase in ("compiling", "evaluating", "writing") and seconds is not None:
        return f"{phase} {duration(seconds)}"
    return phase


def eta_text(eta_s: float | None, known: bool = False) -> str:
    """An ETA ('4m'); '—' where it cannot be known yet (`known`: the run has a progress record)."""
    return duration(eta_s) if eta_s is not None else "—" if known else ""


def totals_text(group: dict[str, Any]) -> dict[str, str]:
    """A group of `totals` as text: runs and each status's count, stalled, env steps, steps/s, ETA (the
    same formats as `row_text`), and "statuses", the counts in one line ('2 running (1 stalled), 1 pending':
    only the statuses some run has)."""
    return {**{k: str(group[k]) for k in ("runs", *STATUSES, "stalled")}, "env steps": steps_text(group["env_steps"]),
            "steps/s": rate_text(group["steps_per_s"]),
            "ETA": eta_text(group["eta_s"], bool(group.get("running") or group.get("pending"))),
            "statuses": statuses_text(group)}


def statuses_text(group: dict[str, Any]) -> str:
    """A group's runs per status in one line, attention first: '2 running (1 stalled), 1 pending'."""
    parts = []
    for s in STATUSES:
        if group.get(s):
            stalled = f" ({group['stalled']} stalled)" if s == "running" and group.get("stalled") else ""
            parts.append(f"{group[s]} {s}{stalled}")
    return ", ".join(parts)
