"""The saferl-tui application and its one factory, :func:`build_app` (used by the CLI and the tests)."""

from __future__ import annotations

import time
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import ClassVar

from textual.app import App
from textual.binding import Binding, BindingType
from textual.widgets import DataTable

from cube.render.viewfile import ViewFile
from cube.store.runstatus import STALL_S
from saferl_tui.commands import SaferlCommands
from saferl_tui.follow import DEFAULT_INTERVAL_S
from saferl_tui.messages import Exported, ViewShown
from saferl_tui.model import CubeModel
from saferl_tui.screens.main import DemoBuilder, MainScreen


class SaferlApp(App[str]):
    """Keyboard-driven explorer of a saferl results cube.

    The app only starts the first :class:`MainScreen`, handing it what it needs, and records what the
    screens report back (:class:`Exported` -> :attr:`last_export`).
    """

    CSS_PATH = "saferl_tui.tcss"
    TITLE = "saferl-tui"
    COMMANDS = App.COMMANDS | {SaferlCommands}
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("q", "quit", "Quit", id="app.quit"),
    ]

    def __init__(self, model: CubeModel, *, export_dir: Path | None, demo_builder: DemoBuilder | None = None,
                 scheduler: str | None = None, exit_after_load: bool = False, follow: bool | None = None,
                 follow_interval: float = DEFAULT_INTERVAL_S, view_file: ViewFile | None = None) -> None:
        super().__init__()
        self.exit_after_load = exit_after_load
        """Exit once the first Summary is on screen (README's commands run non-interactively in CI)."""
        self.model = model
        self._first_screen = partial(MainScreen, model, export_dir=export_dir, demo_builder=demo_builder,
                                     scheduler=scheduler, follow=follow, follow_interval=follow_interval,
                                     view_file=view_file)
        self.last_export: list[str] = []
        """The files the last export (``e``) or screenshot (``s``) wrote."""

    def on_mount(self) -> None:
        self.push_screen(self._first_screen())

    def on_exported(self, msg: Exported) -> None:
        self.last_export = list(msg.paths)

    def on_view_shown(self, msg: ViewShown) -> None:
        if self.exit_after_load and msg.view_id == "summary":
            table = self.main_screen.view("summary").query_one("#summary-table", DataTable)
            self.exit(result=f"Summary of {self.model.path} shown: {table.row_count} rows")

    @property
    def main_screen(self) -> MainScreen:
        """The explorer screen (the bottom of the stack above the default screen)."""
        for screen in reversed(self.screen_stack):
            if isinstance(screen, MainScreen):
                return screen
        raise LookupError("the main screen is not mounted yet")


def build_app(path: str | Path, *, export_dir: str | Path | None = None, boot: int = 2000, rng_seed: int = 0,
              demo_builder: DemoBuilder | None = None, scheduler: str | None = None,
              exit_after_load: bool = False, follow: bool | None = None,
              follow_interval: float = DEFAULT_INTERVAL_S, stall_s: float = STALL_S,
              clock: Callable[[], float] = time.time, view_file: ViewFile | None = None) -> SaferlApp:
    """Create the app for a cube ``path``.

    ``boot``/``rng_seed``: bootstrap replicates and seed for CIs (paper: 2000). ``export_dir``: where
    ``e``, ``s`` and ``P`` write (default: ``<cube>-figures/`` next to the cube).
    ``demo_builder(path, progress)``: called in a worker to create the cube first when ``path`` does not
    exist (the bundled demo). ``scheduler``:
    the address of the dask scheduler the caller runs the app under (see ``cube.compute``), shown while
    the cube loads; None for local threads. ``exit_after_load``: exit once the first Summary is shown
    (``app.run()`` then returns a line saying so). ``follow``: follow the store as it is written (None: on
    when some run is partial or pending), polling every ``follow_interval`` seconds. ``stall_s``: seconds
    without a write after which the Status view flags a running run stalled. ``clock()``: the time now
    (POSIX seconds; tests inject a fixed one). ``view_file``: a saved view (`cube.render.viewfile`) to
    open once the cube is loaded (``--view``, ``--open``).
    """
    model = CubeModel(path, boot=boot, rng_seed=rng_seed, stall_s=stall_s, clock=clock)
    out = Path(export_dir) if export_dir is not None else None
    return SaferlApp(model, export_dir=out, demo_builder=demo_builder, scheduler=scheduler,
                     exit_after_load=exit_after_load, follow=follow, follow_interval=follow_interval,
                     view_file=view_file)
