"""Waiting for the TUI by condition, never by a count of pauses: the suite must pass with busy CPUs."""

from __future__ import annotations

import time

from textual.pilot import Pilot
from textual.worker import WorkerState

QUIET_TIMEOUT_S = 300.0


def busy(app) -> list[str]:
    """What the app still waits for (empty when quiet): running workers, the cube load, view requests,
    a screen that is not mounted yet."""
    from saferl_tui.screens.main import MainScreen

    why = [f"worker {w.name}" for w in app.workers if w.state in (WorkerState.PENDING, WorkerState.RUNNING)]
    for screen in app.screen_stack:
        if isinstance(screen, MainScreen) and screen.busy:
            why.append("main screen waits for data")
    if not app.screen.is_mounted:
        why.append(f"{type(app.screen).__name__} not mounted")
    return why


async def until_quiet(pilot: Pilot, timeout: float = QUIET_TIMEOUT_S) -> None:
    """Wait until the app is quiet twice in a row (a handler may start new work), or fail saying what it
    still waits for after `timeout` seconds."""
    app = pilot.app
    deadline = time.monotonic() + timeout
    quiet = 0
    while quiet < 2:
        await app.workers.wait_for_complete()
        await pilot.pause()
        why = busy(app)
        quiet = 0 if why else quiet + 1
        if why and time.monotonic() > deadline:
            raise AssertionError(f"the TUI is still busy after {timeout:.0f} s: {', '.join(why)}")
