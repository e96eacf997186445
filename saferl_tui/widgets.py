"""Widgets around the views: the info bar (header), the loading panel and the selection panel."""

from __future__ import annotations

from dataclasses import replace
from typing import ClassVar

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Vertical, VerticalScroll
from textual.widgets import Input, Label, ProgressBar, RadioButton, RadioSet, Select, SelectionList, Static

from cube.errors import CubeError
from cube.metrics import SETTING, SETTINGS
from cube.selection import parse_iterates
from saferl_tui.messages import SelectionChanged
from saferl_tui.model import CubeInfo, UISelection


class InfoBar(Static):
    """Top line: app name, file, selection size and setting, and the SYNTHETIC DEMO DATA marker."""

    def show(self, path: str, sel: UISelection | None, synthetic: bool, note: str = "") -> None:
        text = Text()
        text.append(" saferl-tui ", style="bold reverse")
        text.append(f" {path} ", style="bold")
        if synthetic:
            text.append(" SYNTHETIC DEMO DATA ", style="bold black on yellow")
            text.append(" ")
        if sel is not None:
            text.append(sel.describe(), style="")
            text.append(f" · baseline {sel.baseline or 'none'}", style="dim")
        if note:
            text.append(f" {note}", style="italic")
        self.update(text)


class LoadingPanel(Vertical):
    """Shown while the cube opens and the first pass runs; shows the error if opening fails."""

    def compose(self) -> ComposeResult:
        yield Label("Opening cube …", id="loading-text")
        yield ProgressBar(total=100, show_eta=False, id="loading-bar")

    def progress(self, fraction: float, text: str) -> None:
        self.query_one("#loading-text", Label).update(f"{text} …")
        self.query_one("#loading-bar", ProgressBar).update(total=100, progress=100 * fraction)

    def failed(self, error: str) -> None:
        self.add_class("-error")
        self.query_one("#loading-text", Label).update(
            Text.assemble(("Cannot open the cube\n\n", "bold"), error,
                          ("\n\nPress o to open another path, q to quit.", "dim")))
        self.query_one("#loading-bar", ProgressBar).display = False


class PickList(SelectionList[str]):
    """A checklist with select-all (a) and select-none (n)."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("a", "all", "Select all", id="selection.all"),
        Binding("n", "none", "Select none", id="selection.none"),
    ]

    def _on_focus(self, event: object) -> None:
        super()._on_focus(event)  # type: ignore[arg-type]
        if self.highlighted is None and self.option_count:
            self.highlighted = 0

    def action_all(self) -> None:
        """Select every entry."""
        self.select_all()

    def action_none(self) -> None:
        """Deselect every entry."""
        self.deselect_all()


class SelectionPanel(VerticalScroll):
    """Checklists for algorithms, tasks, bounds and seeds; the setting; training iterates; baseline.

    The screen pushes the current selection down with :meth:`apply`; user edits post
    :class:`SelectionChanged` up.
    """

    NONE = "(none)"

    def __init__(self, **kwargs: object) -> None:
        super().__init__(**kwargs)  # type: ignore[arg-type]
        self.info: CubeInfo | None = None
        self.selection: UISelection | None = None

    def compose(self) -> ComposeResult:
        yield Static("Selection  (a all · n none · space toggles · esc closes)", classes="panel-title")
        for key, title in (("algos", "Algorithms"), ("tasks", "Tasks"), ("bounds", "Bounds d"), ("seeds", "Seeds")):
            yield Label(title, classes="panel-label")
            yield PickList(id=f"sel-{key}", classes=f"pick pick-{key}")
        yield Label("Setting", classes="panel-label")
        with RadioSet(id="sel-setting"):
            for s in SETTINGS:
                yield RadioButton(SETTING[s].label, value=s == "train", id=f"setting-{s}")
        yield Label("Training iterates (all, J or LO:HI, enter)", classes="panel-label")
        yield Input(placeholder="all", id="sel-iterates")
        yield Label("Baseline (dim, excluded from bold)", classes="panel-label")
        yield Select([(self.NONE, self.NONE)], allow_blank=False, id="sel-baseline")

    def populate(self, info: CubeInfo, sel: UISelection) -> None:
        """Fill the checklists with the cube's labels and show ``sel``."""
        self.info = info
        labels = {"algos": info.algos, "tasks": info.tasks, "bounds": info.bounds, "seeds": info.seeds}
        with self.prevent(SelectionList.SelectedChanged, Select.Changed):
            for key, values in labels.items():
                pick = self.query_one(f"#sel-{key}", PickList)
                pick.clear_options()
                pick.add_options([(f"{v:g}" if isinstance(v, float) else str(v), str(v), True) for v in values])
            self.query_one("#sel-baseline", Select).set_options([(a, a) for a in (self.NONE, *info.algos)])
        self.apply(sel)

    def apply(self, sel: UISelection) -> None:
        """Show ``sel`` in the widgets without posting a change."""
        self.selection = sel
        current = {"algos": sel.algos, "tasks": sel.tasks, "bounds": sel.bounds, "seeds": sel.seeds}
        with self.prevent(SelectionList.SelectedChanged, RadioSet.Changed, Select.Changed):
            for key, values in current.items():
                pick = self.query_one(f"#sel-{key}", PickList)
                wanted = {str(v) for v in values}
                for opt in list(pick.options):
                    if (opt.value in wanted) != (opt.value in pick.selected):
                        pick.toggle(opt.value)
            self.query_one(f"#setting-{sel.setting}", RadioButton).value = True
            self.query_one("#sel-baseline", Select).value = sel.baseline or self.NONE
            it = sel.iterates
            self.query_one("#sel-iterates", Input).value = (
                "" if it is None else str(it) if isinstance(it, int) else f"{it[0]}:{it[1]}")

    def _current(self) -> UISelection | None:
        if self.info is None or self.selection is None:
            return None
        info = self.info

        def picked(key: str, values: tuple) -> tuple:
            chosen = set(self.query_one(f"#sel-{key}", PickList).selected)
            return tuple(v for v in values if str(v) in chosen)

        baseline = self.query_one("#sel-baseline", Select).value
        return UISelection(
            algos=picked("algos", info.algos), tasks=picked("tasks", info.tasks),
            bounds=picked("bounds", info.bounds), seeds=picked("seeds", info.seeds),
            setting=self.selection.setting, iterates=self.selection.iterates,
            baseline=None if baseline in (self.NONE, Select.BLANK) else str(baseline),
        )

    def _post(self, sel: UISelection | None) -> None:
        if sel is not None and sel != self.selection:
            self.selection = sel
            self.post_message(SelectionChanged(sel))

    def on_selection_list_selected_changed(self, event: SelectionList.SelectedChanged) -> None:
        event.stop()
        self._post(self._current())

    def on_select_changed(self, event: Select.Changed) -> None:
        event.stop()
        self._post(self._current())

    def on_radio_set_changed(self, event: RadioSet.Changed) -> None:
        event.stop()
        sel = self._current()
        if sel is not None and event.pressed.id:
            self._post(replace(sel, setting=event.pressed.id.removeprefix("setting-")))

    def on_input_submitted(self, event: Input.Submitted) -> None:
        event.stop()
        sel = self._current()
        if sel is None:
            return
        try:
            it = parse_iterates(event.value, self.info.n_iterates if self.info else None)
        except CubeError as exc:
            self.notify(str(exc), severity="error", title="Iterates")
            return
        self._post(replace(sel, iterates=it))
