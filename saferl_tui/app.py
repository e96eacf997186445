"""The saferl-tui application and its one factory, :func:`build_app` (used by the CLI and the tests)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import ClassVar

from textual.app import App
from textual.binding import Binding, BindingType

from saferl_tui.commands import SaferlCommands
from saferl_tui.model import CubeModel
from saferl_tui.screens import MainScreen

DemoBuilder = Callable[[str, Callable[[int, int], None]], object]


class SaferlApp(App[None]):
    """Keyboard-driven explorer of a saferl results cube."""

    CSS_PATH = "saferl_tui.tcss"
    TITLE = "saferl-tui"
    COMMANDS = App.COMMANDS | {SaferlCommands}
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("q", "quit", "Quit", id="app.quit"),
    ]

    def __init__(self, path: str | Path, *, export_dir: str | Path | None = None, boot: int = 2000,
                 rng_seed: int = 0, demo_builder: DemoBuilder | None = None) -> None:
        super().__init__()
        self.model = CubeModel(path, boot=boot, rng_seed=rng_seed)
        self.export_dir = Path(export_dir) if export_dir is not None else Path.cwd()
        self.demo_builder = demo_builder
        self.last_export: list[str] = []

    def on_mount(self) -> None:
        self.push_screen(MainScreen(self.model))

    @property
    def main_screen(self) -> MainScreen:
        """The explorer screen (the bottom of the stack above the default screen)."""
        for screen in reversed(self.screen_stack):
            if isinstance(screen, MainScreen):
                return screen
        raise LookupError("the main screen is not mounted yet")


def build_app(path: str | Path, *, export_dir: str | Path | None = None, boot: int = 2000, rng_seed: int = 0,
              demo_builder: DemoBuilder | None = None) -> SaferlApp:
    """Create the app for a cube ``path``.

    ``boot``/``rng_seed``: bootstrap replicates and seed for CIs (paper: 2000). ``export_dir``: where
    ``e`` and ``s`` write (default: the working directory). ``demo_builder(path, progress)``: called in
    a worker to create the cube first when ``path`` does not exist (the bundled demo).
    """
    return SaferlApp(path, export_dir=export_dir, boot=boot, rng_seed=rng_seed, demo_builder=demo_builder)
