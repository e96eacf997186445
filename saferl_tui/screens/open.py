"""The open box: ask for a cube path, load it in a worker, and only then replace the current cube."""

from __future__ import annotations

from collections.abc import Callable
from typing import ClassVar

from rich.text import Text
from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import Input, Label, Static
from textual.worker import get_current_worker

from saferl_tui.messages import (
    OpenFailed,
    OpenProgress,
    OpenSucceeded,
)
from saferl_tui.model import CubeModel, load_model
from saferl_tui.widgets import (
    PathSuggester,
    path_matches,
)


class OpenScreen(ModalScreen["CubeModel | None"]):
    """Ask for a cube path (tab completes), open and load it in a worker, and only then close with the
    loaded model; a failure is shown in the box, which stays open with the path to correct."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape", "cancel", "Cancel", id="open.cancel"),
        Binding("tab", "complete", "Complete path", priority=True, id="open.complete"),
    ]

    def __init__(self, current: str, make_model: Callable[[str], CubeModel]) -> None:
        super().__init__()
        self.current = current
        self.make_model = make_model

    def compose(self) -> ComposeResult:
        with Vertical(id="open-box"):
            yield Label("Open a results cube (.zarr directory or .nc file): tab completes, enter opens, "
                        "esc cancels (the current cube stays)")
            yield Input(value=self.current, id="open-path", suggester=PathSuggester())
            yield Static("", id="open-matches")
            yield Static("", id="open-status")

    def on_mount(self) -> None:
        self._matches(self.current)

    def _matches(self, value: str) -> None:
        found = path_matches(value, limit=6)
        self.query_one("#open-matches", Static).update(
            Text("\n".join(found), style="dim") if found else "")

    @on(Input.Changed, "#open-path")
    def _changed(self, event: Input.Changed) -> None:
        self._matches(event.value)

    def action_complete(self) -> None:
        """Complete the path to the first match (a cube first, then a directory)."""
        field = self.query_one("#open-path", Input)
        found = path_matches(field.value, limit=1)
        if found:
            field.value = found[0]
            field.cursor_position = len(field.value)

    def on_input_submitted(self, event: Input.Submitted) -> None:
        path = event.value.strip()
        if path:
            self.query_one("#open-status", Static).update(Text(f"opening {path} …", style="italic"))
            self.open_cube(path)

    @work(thread=True, exclusive=True, group="open")
    def open_cube(self, path: str) -> None:
        """Load the cube (and its sufficient statistics) in a thread; the screen closes only on success."""
        worker = get_current_worker()
        model = self.make_model(path)
        info, error = load_model(model, lambda: worker.is_cancelled,
                                 lambda fraction, text: self.post_message(
                                     OpenProgress(f"{text} {100 * fraction:.0f}%")))
        if error is not None:
            self.post_message(OpenFailed(error))
        elif info is not None:
            self.post_message(OpenSucceeded(model))

    def on_open_progress(self, msg: OpenProgress) -> None:
        self.query_one("#open-status", Static).update(Text(msg.text, style="italic"))

    def on_open_failed(self, msg: OpenFailed) -> None:
        self.query_one("#open-status", Static).update(
            Text.assemble(("Cannot open: ", "bold red"), (msg.error, "red"),
                          ("\nThe current cube is still open: correct the path or press esc.", "dim")))
        self.query_one("#open-path", Input).focus()

    def on_open_succeeded(self, msg: OpenSucceeded) -> None:
        self.dismiss(msg.model)

    def action_cancel(self) -> None:
        self.workers.cancel_group(self, "open")
        self.dismiss(None)
