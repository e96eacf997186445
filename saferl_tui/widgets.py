"""Widgets around the views: the info bar (header), the key bar (footer), the loading panel, the selection
panel, and the path completion of the open box.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any, ClassVar

from rich.cells import cell_len
from rich.segment import Segment
from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Vertical, VerticalScroll
from textual.strip import Strip
from textual.suggester import Suggester
from textual.widgets import Input, Label, ProgressBar, RadioButton, RadioSet, Select, SelectionList, Static

from cube.errors import CubeError
from cube.selection import parse_iterates
from cube.stats.metrics import SETTING, SETTINGS
from saferl_tui.messages import SelectionChanged
from saferl_tui.selection import CubeInfo, UISelection


class InfoBar(Static):
    """Top line: app name, file, selection size, setting and iterates, baseline, and the SYNTHETIC DEMO
    DATA marker: the longest of its forms that fits the width (so the iterate range and the baseline are
    never cut off), ellipsis only where even the shortest does not fit."""

    def show(self, path: str, sel: UISelection | None, synthetic: bool, note: str = "", width: int = 120) -> None:
        forms = [self.line(path, sel, synthetic, note, level) for level in range(4)]
        fitting = [t for t in forms if t.cell_len <= width]
        self.update(fitting[0] if fitting else forms[-1])

    @staticmethod
    def line(path: str, sel: UISelection | None, synthetic: bool, note: str, level: int) -> Text:
        """The header at ``level`` 0 (every word long), 1 (short name and marker), 2 (also "base" for
        "baseline") or 3 (compact sizes: '4a×2t×2b×3s=48 · train · it all')."""
        text = Text(no_wrap=True, overflow="ellipsis")
        text.append(" saferl-tui " if level == 0 else " saferl ", style="bold reverse")
        text.append(f" {path} ", style="bold")
        if synthetic:
            text.append(" SYNTHETIC DEMO DATA " if level == 0 else " SYNTHETIC ", style="bold black on yellow")
            text.append(" ")
        if sel is not None:
            text.append(sel.describe() if level < 3 else sel.describe_short(), style="")
            if sel.baseline:
                text.append(f" · baseline {sel.baseline}" if level < 2 else f" · base {sel.baseline}", style="dim")
        if note:
            text.append(f" {note}", style="bold dark_orange")
        return text


KeyList = Sequence[tuple[str, str]]


class KeyBar(Static):
    """The footer: the keys a newcomer needs first (? help, f selection, e export, q quit), then the keys
    of what has focus, then the rest; only whole entries (a key with its label) that fit the width, so ``?``
    is always visible and no key stands at the right edge without its label."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._groups: tuple[KeyList, ...] = ()

    def show(self, first: KeyList, local: KeyList, rest: KeyList) -> None:
        self._groups = (first, local, rest)
        self.update(self.keys_text(self.size.width))

    def on_resize(self) -> None:
        if self._groups:
            self.update(self.keys_text(self.size.width))

    def keys_text(self, width: int) -> Text:
        """The entries that fit in `width` cells (all of them while the width is unknown: 0)."""
        text = Text(no_wrap=True, overflow="crop")
        for group_i, group in enumerate(self._groups):
            for entry_i, (key, label) in enumerate(group):
                sep = "│" if group_i and entry_i == 0 and text.cell_len else ""
                if width and text.cell_len + len(sep) + cell_len(key) + cell_len(label) + 4 > width:
                    return text
                text.append(sep, style="dim")
                text.append(f" {key} ", style="bold reverse")
                text.append(f" {label} ")
        return text


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
    """A checklist with select-all (a) and select-none (n), j / k to move; ticked entries show ✓, others
    an empty box (not only a colour)."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("a", "all", "Select all", id="selection.all"),
        Binding("n", "none", "Select none", id="selection.none"),
        Binding("j", "cursor_down", "Down", show=False, id="selection.down"),
        Binding("k", "cursor_up", "Up", show=False, id="selection.up"),
    ]

    def render_line(self, y: int) -> Strip:
        strip = super().render_line(y)
        segments = list(strip)
        if len(segments) > 3 and segments[1].text == "X":
            _, scroll_y = self.scroll_offset
            try:
                value = self.get_option_at_index(scroll_y + y).value
            except Exception:  # noqa: BLE001 - nothing to mark
                return strip
            mark = "✓" if value in self.selected else " "
            segments[1] = Segment(mark, segments[1].style)
            return Strip(segments, strip.cell_length)
        return strip

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
    """Checklists for algorithms, tasks, bounds and seeds; the setting; training iterates; baseline; the
    algorithms that are not safe RL (never "best").

    The screen pushes the current selection down with :meth:`apply`; user edits post
    :class:`SelectionChanged` up.
    """

    NONE = "(none)"

    def __init__(self, **kwargs: object) -> None:
        super().__init__(**kwargs)  # type: ignore[arg-type]
        self.info: CubeInfo | None = None
        self.selection: UISelection | None = None

    def compose(self) -> ComposeResult:
        yield Static("Selection: space toggles · a all · n none · tab next · esc closes", classes="panel-title")
        for key, title in (("algos", "Algorithms"), ("tasks", "Tasks"), ("bounds", "Bounds d"), ("seeds", "Seeds")):
            yield Label(title, classes="panel-label")
            yield PickList(id=f"sel-{key}", classes=f"pick pick-{key}")
        yield Label("Setting (t cycles)", classes="panel-label")
        with RadioSet(id="sel-setting"):
            for s in SETTINGS:
                yield RadioButton(SETTING[s].label, value=s == "train", id=f"setting-{s}")
        yield Label("Training iterates (all, J or LO:HI, enter)", classes="panel-label")
        yield Input(placeholder="all", id="sel-iterates")
        yield Static("", id="sel-iterates-error")
        yield Label("Baseline: Δ columns compare to it (b)", classes="panel-label")
        yield Select([(self.NONE, self.NONE)], allow_blank=False, id="sel-baseline")
        yield Label("Not safe RL: never best", classes="panel-label")
        yield PickList(id="sel-not_safe", classes="pick pick-not_safe")

    def populate(self, info: CubeInfo, sel: UISelection) -> None:
        """Fill the checklists with the cube's labels and show ``sel``."""
        self.info = info
        labels = {"algos": info.algos, "tasks": info.tasks, "bounds": info.bounds, "seeds": info.seeds}
        with self.prevent(SelectionList.SelectedChanged, Select.Changed):
            for key, values in labels.items():
                pick = self.query_one(f"#sel-{key}", PickList)
                pick.clear_options()
                # labels are data: shown as text, never markup (an algorithm may be called "[/x]")
                pick.add_options([(Text(f"{v:g}" if isinstance(v, float) else str(v)), str(v), True)
                                  for v in values])
            self.query_one("#sel-baseline", Select).set_options([(Text(a), a) for a in (self.NONE, *info.algos)])
            pick = self.query_one("#sel-not_safe", PickList)
            pick.clear_options()
            pick.add_options([(Text(a), a, a in sel.not_safe) for a in info.algos])
        self.apply(sel)

    def apply(self, sel: UISelection) -> None:
        """Show ``sel`` in the widgets without posting a change."""
        self.selection = sel
        current = {"algos": sel.algos, "tasks": sel.tasks, "bounds": sel.bounds, "seeds": sel.seeds,
                   "not_safe": sel.not_safe}
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
            not_safe=picked("not_safe", info.algos),
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
        error = self.query_one("#sel-iterates-error", Static)
        try:
            it = parse_iterates(event.value, self.info.n_iterates if self.info else None)
        except CubeError as exc:
            error.update(Text(str(exc), style="bold red"))  # wraps in the panel: never cut mid-word
            error.add_class("-visible")
            return
        error.update("")
        error.remove_class("-visible")
        self._post(replace(sel, iterates=it))


class PathSuggester(Suggester):
    """Completes a file-system path from what is typed: the first entry of its directory that starts with
    the last component (directories get a trailing '/')."""

    def __init__(self) -> None:
        super().__init__(use_cache=False, case_sensitive=True)

    async def get_suggestion(self, value: str) -> str | None:
        matches = path_matches(value)
        return matches[0] if matches else None


def path_matches(value: str, limit: int = 8) -> list[str]:
    """Paths that complete ``value`` (cubes first: *.zarr directories and *.nc files, then directories,
    then other files), each as ``value`` extended; at most ``limit``."""
    if not value:
        return []
    expanded = os.path.expanduser(value)
    head, _, prefix = expanded.rpartition(os.sep)
    folder = Path(head or ("/" if expanded.startswith(os.sep) else "."))
    try:
        entries = sorted(e for e in os.listdir(folder) if e.startswith(prefix) and not e.startswith(".")
                         or (prefix.startswith(".") and e.startswith(prefix)))
    except OSError:
        return []
    typed_head = value[: len(value) - len(prefix)]

    def rank(name: str) -> tuple[int, str]:
        p = folder / name
        cube = name.endswith((".zarr", ".nc"))
        return (0 if cube else 1 if p.is_dir() else 2, name)

    out = []
    for name in sorted(entries, key=rank):
        p = folder / name
        full = typed_head + name + ("/" if p.is_dir() and not name.endswith(".zarr") else "")
        if full != value:
            out.append(full)
        if len(out) >= limit:
            break
    return out
