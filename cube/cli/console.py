"""What every `saferl` command prints through: the stderr console, the progress bar of long jobs, and
the one-line `error:` message of a failure.
"""

from __future__ import annotations

import gc
import logging
import os
import sys
import threading

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn
from rich.text import Text

from cube.errors import CubeError, CubeWarning

err_console = Console(stderr=True)


def progress_bar(console: Console | None = None) -> Progress:
    """The progress display used by every long CLI job."""
    console = console or err_console
    return Progress(
        TextColumn("{task.description}", style="bold", markup=False),  # descriptions name labels: never markup
        BarColumn(),
        MofNCompleteColumn(),
        TimeRemainingColumn(),
        console=console,
        transient=True,
        disable=not console.is_terminal,
    )


def error_line(exc: BaseException) -> str:
    """One line for a failure of a command: what went wrong, with which path, and what to do.

    CubeError already carries such a line; OS errors (permissions, a full disk, a missing folder) name
    the path and the remedy; anything else becomes its type and first line, so no traceback reaches the
    user (set SAFERL_DEBUG=1 to see it)."""
    if isinstance(exc, CubeError):
        return str(exc)
    if isinstance(exc, OSError):
        where = f"{exc.filename}: " if exc.filename else ""
        what = exc.strerror or str(exc) or type(exc).__name__
        remedy = {28: "free some space and run the command again",
                  13: "check the permissions of the path or choose another one",
                  30: "the file system is read-only: choose another path"}.get(exc.errno or 0,
                                                                                "check the path and try again")
        return f"{where}{what}; {remedy}"
    first = (str(exc).splitlines() or [""])[0][:200]
    return f"unexpected {type(exc).__name__}: {first} (run with SAFERL_DEBUG=1 for the traceback)"


def print_error(exc: BaseException) -> None:
    """`error: <one line>` on stderr, the message printed literally (no rich markup in user text).

    zarr's event loop may still hold read tasks that the error cut short: they are cancelled and awaited
    at exit while the loop still runs (`drain_zarr_io`), so no "Event loop is closed" or "coroutine ... was
    never awaited" follows our one line; asyncio's "Task was destroyed" log lines are silenced too."""
    logging.getLogger("asyncio").setLevel(logging.CRITICAL)
    drain_zarr_io_at_exit()
    err_console.print(Text.assemble(("error:", "bold red"), " ", error_line(exc)), highlight=False, soft_wrap=True)


def drain_zarr_io(timeout: float = 5.0) -> int:
    """Cancel the tasks left in zarr's event loop (reads that an error in another chunk cut short) and wait
    for them, while the loop still runs; returns how many there were. Without this, zarr's exit hook
    closes the loop under them and each prints a traceback ("Event loop is closed")."""
    import asyncio
    import sys

    sync = sys.modules.get("zarr.core.sync")
    loop = getattr(sync, "loop", [None])[0] if sync is not None else None
    if loop is None or loop.is_closed() or not loop.is_running():
        return 0

    async def cancel_all() -> int:
        me = asyncio.current_task()
        tasks = [t for t in asyncio.all_tasks() if t is not me]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        return len(tasks)

    try:
        return asyncio.run_coroutine_threadsafe(cancel_all(), loop).result(timeout)
    except Exception:  # noqa: BLE001 - a loop stopping meanwhile: nothing left to drain
        return 0


_DRAIN_REGISTERED: list[bool] = []


def drain_zarr_io_at_exit() -> None:
    """Run `drain_zarr_io` at exit, before zarr's own exit hook (registered after it: exit hooks run last
    registered first) and after the worker threads of dask's pools have been joined."""
    import atexit

    if not _DRAIN_REGISTERED:
        _DRAIN_REGISTERED.append(True)
        atexit.register(drain_zarr_io)


_WORK_DONE: list[bool] = []
_SCRIPT: list[bool] = []


def console_script_process() -> None:
    """Mark this process as the ``saferl`` console script's (`cube.cli.entry.console_main`): it ends with the
    command, so what a command keeps alive till then may be left out of the collector (`freeze_survivors`)."""
    _SCRIPT.append(True)


def freeze_survivors() -> None:
    """In the console script's process only (never in-process callers such as the tests or the TUI): move
    every object alive now out of the cyclic collector's reach (`gc.freeze`). A command that made its large,
    long-lived state (a cold report after its pass: about 80 ms of one full collection beside the tables,
    holding the GIL) spares every later full collection a scan of it."""
    if _SCRIPT:
        gc.freeze()


def work_done() -> None:
    """Say that the running command's work is all done, background writes included (a command calls it as it
    returns): the ``saferl`` console script may then end the process without the interpreter's teardown
    (`end_now`)."""
    _WORK_DONE.append(True)


def end_now(code: int) -> None:
    """End the process with `code` at once when the command said its work is done (`work_done`), it succeeded
    and no thread that exit would wait for is left: the interpreter's teardown (every object freed one by
    one, zarr's and dask's exit hooks) takes half a second after a paper-scale report and keeps nothing.
    Output is flushed first. Otherwise returns (a normal exit follows)."""
    if not _WORK_DONE or code != 0:
        return
    if any(t.is_alive() and not t.daemon for t in threading.enumerate() if t is not threading.current_thread()):
        return  # a thread exit would join (a background write): its work is not done
    try:
        sys.stdout.flush()
        sys.stderr.flush()
    except (OSError, ValueError):  # a closed pipe: what Python's own exit would meet, let it
        return
    logging.shutdown()
    os._exit(code)


def print_warning(message: str) -> None:
    """`warning: <one line>` on stderr, the message printed literally."""
    err_console.print(Text.assemble(("warning:", "bold yellow"), " ", " ".join(str(message).split())),
                      highlight=False, soft_wrap=True)


def print_recorded_warnings(caught: list) -> None:
    """The warnings a command recorded (`warnings.catch_warnings(record=True)`) that are saferl's own
    (`cube.errors.CubeWarning`, `cube.stats.StatsWarning`): each message once, one `warning:` line, printed
    literally (labels are data, never markup)."""
    from cube.stats.bootstrap import StatsWarning

    ours = (CubeWarning, StatsWarning)
    for message in dict.fromkeys(str(w.message) for w in caught if issubclass(w.category, ours)):
        print_warning(message)


def show_cube_warnings() -> None:
    """Print saferl's own warnings (`cube.errors.CubeWarning`: an interrupted write left out, a statistics
    cache that did not verify, node-local locks) as one `warning:` line each; others as Python does."""
    import warnings

    original = warnings.showwarning
    if getattr(original, "saferl", False):
        return

    def show(message, category, filename, lineno, file=None, line=None):  # noqa: ANN001 - warnings' signature
        if isinstance(category, type) and issubclass(category, CubeWarning):
            print_warning(str(message))
        else:
            original(message, category, filename, lineno, file, line)

    show.saferl = True  # type: ignore[attr-defined]
    warnings.showwarning = show
