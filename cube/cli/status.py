"""`saferl status`: every run of a results store with its status, and totals per algorithm and task.

    saferl status results.zarr [--all] [--wide] [--format table|json] [--stall-after S]
    saferl status results.zarr --watch [--interval S] [--stall-after S]

Per run (`cube.store.runstatus.RunStatusReader`, each row in the text the TUI's Status view shows,
`row_text`), in 80 columns: algo, task, bound d, seed, what it does now (running / stalled / stopped /
failed / pending / complete), iterates written of its total (it/J), steps per second, ETA and the time
since its last write. Then per algorithm and task: runs per status, their steps per second, the longest
ETA. Without --all, complete runs are left out of the run table.

--wide adds the rest: the stored status ('partial (running)' and so on), env steps, wall time, host,
SLURM job, retries, the formulation it was trained with (`variant`) and what needs attention (stalled,
failed with its error, damaged claim); and a column per status and env steps in the totals.
Tables are plain columns (no box lines); a label wider than its column wraps, a number never does.
--wide printed once is as wide as its columns need; --wide --watch is cut to the terminal.

--format json prints every run (complete ones too) and the totals as one JSON object: the numbers the
tables show, unrounded (phase, iterates, steps_per_s and what it is measured over, eta_s; None unknown).

Steps/s, in every tool (the trainer's display, this command, the TUI): env steps per wall second over the
run's last 5 iterates, compile and evaluation excluded (`cube.store.progress`); no ETA ('—') while a run
compiles or before its second iterate; a group's ETA counts its pending runs' compiles.

--watch redraws the tables whenever a run writes (a `cube.store.locks.SeqWatch` polled every --interval
seconds: stat calls, and only the sequence chunks of folders that changed) and at least every --interval
seconds for the clocks; Ctrl-C (or SIGTERM) ends it after the poll under way (exit 0); a store deleted
meanwhile ends it with one line (exit 1).
On a console that is not a terminal every redraw is printed below the previous one.

The trainer (an installed ``saferl.commands`` plugin) may add hooks with `set_status_hooks`: the total
iterates of a run and the name of its formulation, both from its manifest row.
"""

from __future__ import annotations

import argparse
import json
import math
import signal
import threading
import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from rich import box
from rich.console import Console, Group
from rich.table import Table
from rich.text import Text

from cube.cli.console import err_console
from cube.schema import NARROW_FIELDS, ROW_FIELDS, STALL_S
from cube.store.progress import ETA_NOTE, RATE_OVER

if TYPE_CHECKING:  # the store's readers load when the command runs (`saferl --help` stays fast)
    from cube.store.runstatus import RunStatus, RunStatusReader

Hook = Callable[[dict[str, Any]], Any]
MAX_INTERVAL_S = 86400.0
"""The longest --interval of --watch (a day): longer sleeps overflow the clock and watch nothing."""


def register(sub: argparse._SubParsersAction) -> None:
    """Add the `status` subcommand."""
    p = sub.add_parser("status", help="status of a results store's runs (--watch: follow it live)",
                       description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("path", help="results store (Zarr directory)")
    p.add_argument("--all", action="store_true", help="list complete runs too (default: only unfinished ones)")
    p.add_argument("--wide", action="store_true",
                   help="every column (stored status, env steps, wall, host, job, retries, variant, flags); "
                        "the default fits 80 columns")
    p.add_argument("--format", choices=("table", "json"), default="table",
                   help="table (default) or json: every run and the totals as one JSON object")
    p.add_argument("--watch", action="store_true", help="redraw as runs write, until Ctrl-C")
    p.add_argument("--interval", type=float, default=1.0, metavar="S",
                   help="seconds between looks at the store with --watch (default 1)")
    p.add_argument("--stall-after", type=float, default=STALL_S, metavar="S",
                   help=f"a running run that wrote nothing for S seconds is stalled (default {STALL_S:g})")
    p.set_defaults(func=run, status_total_iterates=None, status_variant=None)


def set_status_hooks(sub: argparse._SubParsersAction, total_iterates: Hook | None = None,
                     variant: Hook | None = None) -> None:
    """Give `saferl status` (once registered) the total iterates and the formulation name of a run, each
    from its manifest row; called by a plugin that knows them (the trainer)."""
    parser = sub.choices.get("status")
    if parser is not None:
        parser.set_defaults(status_total_iterates=total_iterates, status_variant=variant)


def run(args: argparse.Namespace) -> int:
    """Entry of `saferl status`: 0; 1 when a followed store is deleted; CubeError (one line) for bad input."""
    from cube.errors import CubeError
    from cube.store.location import is_remote, redact
    from cube.store.runstatus import RunStatusReader

    if not 0 < args.interval <= MAX_INTERVAL_S:
        raise CubeError(f"--interval must be a number of seconds above 0 and at most {MAX_INTERVAL_S:g} (a day), "
                        f"got {args.interval:g}")
    if not (math.isfinite(args.stall_after) and args.stall_after > 0):
        raise CubeError(f"--stall-after must be a positive number of seconds, got {args.stall_after:g}")
    if args.watch and is_remote(args.path):
        raise CubeError(f"{redact(args.path)} is a published snapshot (it never changes): --watch has nothing to "
                        "follow; watch the local store being written instead")
    reader = RunStatusReader(args.path, args.stall_after, _total_hook(args.status_total_iterates))
    if getattr(args, "format", "table") == "json":
        if args.watch:
            raise CubeError("--format json prints once; leave out --watch")
        print(json.dumps(as_json(args.path, reader.read()), indent=1))
        return 0
    console = _console(args.wide and not args.watch)
    if not args.watch:
        console.print(render(args.path, reader.read(), args.all, args.status_variant, wide=args.wide))
        return 0
    return watch(args, reader, console)


def _console(unbounded: bool = False) -> Console:
    """The console: the terminal's width, 200 columns for a pipe; `unbounded` (--wide printed once): as
    wide as the tables need (a terminal narrower than that wraps their lines: `less -S` scrolls them)."""
    console = Console()
    if unbounded:
        return Console(width=max(console.width, 1000))
    return console if console.is_terminal else Console(width=200)


def _total_hook(hook: Hook | None) -> Callable[[dict[str, Any]], int | None] | None:
    """A total-iterates hook that answers None (the store's iterates) where it cannot tell."""
    if hook is None:
        return None

    def total(row: dict[str, Any]) -> int | None:
        try:
            return hook(row)
        except Exception:  # noqa: BLE001 - a manifest the hook cannot read: the store's iterates
            return None

    return total


def watch(args: argparse.Namespace, reader: RunStatusReader, console: Console) -> int:
    """Follow the store until Ctrl-C or SIGTERM (0) or until it is deleted (1, one line).

    Ctrl-C only asks the loop to stop (`StopRequest`): the poll under way ends normally, so no read of the
    store (a zarr call, a lock file) is cut in the middle, and the command returns within one poll, however
    busy the machine; a second Ctrl-C interrupts at once."""
    from rich.live import Live

    from cube.store.locks import SeqWatch, StoreGone

    seq_watch = SeqWatch(args.path)
    live = Live(console=console, auto_refresh=False, transient=False) if console.is_terminal else None
    shown: tuple | None = None
    with StopRequest() as stop:
        try:
            if live is not None:
                live.start()
            while not stop.requested():
                _, seqs = seq_watch.poll()  # cheap: stat calls, and the sequence chunks of folders that moved
                runs = reader.read(seqs=seqs)  # stored facts read again only for runs whose sequence moved
                view = render(args.path, runs, args.all, args.status_variant, wide=args.wide)
                if live is not None:
                    live.update(view, refresh=True)
                elif state(runs) != shown:  # a log, not a screen: a new snapshot when a run's state changed
                    console.print(view)
                    console.file.flush()
                shown = state(runs)
                stop.wait(args.interval)
            return 0
        except KeyboardInterrupt:  # the second Ctrl-C
            return 0
        except StoreGone as exc:
            if live is not None:
                live.stop()
                live = None
            err_console.print(f"error: {exc}", highlight=False, markup=False, soft_wrap=True)
            return 1
        finally:
            if live is not None:
                live.stop()


class StopRequest:
    """While entered (in the main thread): SIGINT and SIGTERM set a flag instead of raising, and the first
    one puts the previous handlers back (a second Ctrl-C raises KeyboardInterrupt as usual). `wait(s)`
    sleeps until then or for `s` seconds."""

    SIGNALS = (signal.SIGINT, signal.SIGTERM)

    def __init__(self) -> None:
        self._event = threading.Event()
        self._previous: dict[int, Any] = {}

    def __enter__(self) -> StopRequest:
        if threading.current_thread() is threading.main_thread():
            for sig in self.SIGNALS:
                self._previous[sig] = signal.signal(sig, self._handle)
        return self

    def __exit__(self, *exc: object) -> None:
        self._restore()

    def _handle(self, signum: int, frame: Any) -> None:
        self._event.set()
        self._restore()

    def _restore(self) -> None:
        for sig, handler in self._previous.items():
            signal.signal(sig, handler)
        self._previous = {}

    def requested(self) -> bool:
        return self._event.is_set()

    def wait(self, seconds: float) -> bool:
        return self._event.wait(seconds)


def state(runs: Sequence[RunStatus]) -> tuple:
    """What a log of `--watch` prints a new snapshot for: each run's status, iterates, env steps, stall,
    claim and error (not its clocks)."""
    return tuple((r.status, r.stored, r.iterates, r.env_steps, r.stalled, r.claim.state, r.error) for r in runs)


def as_json(path: Any, runs: Sequence[RunStatus], now: float | None = None) -> dict[str, Any]:
    """Every run and the totals per algorithm and task as plain JSON values (what --format json prints)."""
    from cube.store.runstatus import row_text, totals

    now = time.time() if now is None else now
    out = []
    for r in runs:
        p = r.progress
        out.append({**r.key.as_dict(), "status": r.status, "stored": r.stored, "phase": r.phase,
                    "phase_s": None if p is None else p.phase_s, "stalled": r.stalled, "iterates": r.iterates,
                    "n_iterates": r.n_iterates, "env_steps": r.env_steps, "steps_per_s": r.steps_per_s,
                    "rate_over_iterates": None if p is None else p.over, "eta_s": r.eta_s,
                    "last_write_s_ago": None if r.last_write is None else max(now - r.last_write, 0.0),
                    "host": r.host_text() or None, "slurm_job_id": r.slurm_job_id, "error": r.error,
                    "text": row_text(r, now)})
    from cube.store.location import redact

    return {"store": redact(path), "steps_per_s_over": RATE_OVER, "runs": out, "totals": totals(runs)}


# ------------------------------------------------------------------------------------------ rendering
def render(path: Any, runs: Sequence[RunStatus], show_all: bool = False, variant: Hook | None = None,
           now: float | None = None, wide: bool = False) -> Group:
    """The summary line, the run table (complete runs only with `show_all`) and the totals table; the
    columns of 80 columns, or all of them with `wide`."""
    now = time.time() if now is None else now
    parts: list[Any] = [Text(summary(path, runs), overflow="fold")]
    table = run_table(runs, show_all, variant, now, wide)
    if table.row_count:
        parts.append(table)
    parts.append(totals_table(runs, wide))
    parts.append(Text(f"steps/s: {RATE_OVER}; {ETA_NOTE}; a group's ETA counts its pending runs' compiles",
                      style="dim", overflow="fold"))
    return Group(*parts)


def summary(path: Any, runs: Sequence[RunStatus]) -> str:
    """'PATH: N runs: a complete, b partial, c pending; ...' (stored statuses, then what runs now)."""
    from cube.store.location import redact

    path = redact(path)
    stored = {s: sum(r.stored == s for r in runs) for s in ("complete", "partial", "pending")}
    now = {s: sum(r.status == s for r in runs) for s in ("running", "stopped", "failed")}
    stalled = sum(r.stalled for r in runs)
    text = (f"{path}: {len(runs)} runs: {stored['complete']} complete, {stored['partial']} partial, "
            f"{stored['pending']} pending; {now['running']} running" + (f" ({stalled} stalled)" if stalled else "")
            + (f", {now['failed']} failed" if now["failed"] else ""))
    if now["stopped"]:
        text += f"; {now['stopped']} partial run(s) stopped (no live process): rerun the sweep to resume them"
    return text


RUN_COLUMNS = (*ROW_FIELDS[:-1], "retries", "variant", "flags")
"""The run table's columns with --wide: a run's row (`cube.store.runstatus.row_text`, as the TUI shows it),
its retries and the formulation it was trained with."""
NARROW_COLUMNS = NARROW_FIELDS
"""The run table's columns by default (80 columns)."""
HEADING = {"bound": "d", "phase": "status", "iterates": "it/J", "statuses": "status"}
"""Short headings of the narrow tables."""
LABELS = {"algo", "task", "status", "host", "job", "variant", "flags", "statuses"}
"""Columns of labels and words, which wrap where too wide; every other column (a number, or one word) is
never cut."""
MIN_LABEL = {"algo": 7, "task": 8}
"""The narrowest a label column gets before the tables are wider than the console."""
TOTAL_COLUMNS = ("runs", "running", "stalled", "stopped", "failed", "pending", "complete", "env steps", "steps/s",
                 "ETA")
NARROW_TOTAL_COLUMNS = ("runs", "statuses", "steps/s", "ETA")


def _table(columns: Sequence[str], wide: bool, title: str | None = None) -> Table:
    """A table of plain columns (a line under the heading, no box lines to break when a terminal is narrow):
    word columns fold, number columns keep their width."""
    table = Table(box=box.SIMPLE_HEAD, padding=(0, 1, 0, 0), pad_edge=False, show_edge=False, title=title,
                  title_justify="left")
    for c in columns:
        if c in LABELS:
            table.add_column(c if wide else HEADING.get(c, c), overflow="fold", min_width=MIN_LABEL.get(c))
        else:
            table.add_column(c if wide else HEADING.get(c, c), no_wrap=True, justify="right")
    return table


def run_table(runs: Sequence[RunStatus], show_all: bool = False, variant: Hook | None = None,
              now: float | None = None, wide: bool = False) -> Table:
    """One row per run (complete ones only with `show_all`), columns NARROW_COLUMNS (RUN_COLUMNS with `wide`)."""
    table = _table(RUN_COLUMNS if wide else NARROW_COLUMNS, wide)
    for r in runs:
        if r.status == "complete" and not show_all:
            continue
        table.add_row(*(Text(cell) for cell in run_cells(r, variant, now, wide)))  # labels are data, never markup
    return table


def run_cells(r: RunStatus, variant: Hook | None = None, now: float | None = None, wide: bool = True) -> list[str]:
    """The cells of one run's row (RUN_COLUMNS; NARROW_COLUMNS unless `wide`)."""
    from cube.store.runstatus import row_text

    text = row_text(r, now)
    if not wide:
        return [text[c] for c in NARROW_COLUMNS]
    text = {**text, "retries": str(r.retries or 0), "variant": _variant({**r.manifest, "algo": r.key.algo}, variant)}
    return [text[c] for c in RUN_COLUMNS]


def _variant(row: dict[str, Any], hook: Hook | None) -> str:
    """The formulation a run was trained with (`row`: its manifest and its `algo`): the hook's name for it,
    else the manifest's `variant`."""
    if hook is not None:
        try:
            return str(hook(row) or row.get("variant") or "")
        except Exception:  # noqa: BLE001 - a config the hook cannot read: the recorded name, if any
            pass
    return str(row.get("variant") or "")


def totals_table(runs: Sequence[RunStatus], wide: bool = True) -> Table:
    """Per algorithm and task: runs, the runs per status in one cell, steps/s and the longest ETA; with
    `wide` a column per status, stalled and env steps."""
    from cube.store.runstatus import totals, totals_text

    columns = TOTAL_COLUMNS if wide else NARROW_TOTAL_COLUMNS
    table = _table(("algo", "task", *columns), wide, title="totals")
    for g in totals(runs):
        text = totals_text(g)
        table.add_row(*(Text(str(cell)) for cell in (g["algo"], g["task"], *(text[k] for k in columns))))
    return table
