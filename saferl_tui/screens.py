"""Screens: the main explorer (coordinates selection, workers and views), help, and open-path."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any, ClassVar

from rich.text import Text
from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, Vertical
from textual.screen import ModalScreen, Screen
from textual.widgets import DataTable, Footer, Input, Label, TabbedContent, TabPane
from textual.worker import get_current_worker

from cube.errors import CubeError
from cube.metrics import SETTINGS
from saferl_tui.messages import (
    CubeLoaded,
    Exported,
    LoadFailed,
    LoadProgress,
    SelectionChanged,
    ViewFailed,
    ViewParamsChanged,
    ViewReady,
)
from saferl_tui.model import CubeModel, LoadCancelled, UISelection
from saferl_tui.views import VIEW_CLASSES, ResultView
from saferl_tui.widgets import InfoBar, LoadingPanel, PickList, SelectionPanel

DemoBuilder = Callable[[str, Callable[[int, int], None]], object]
"""``builder(path, progress(done, total))``: creates a cube at ``path`` (the bundled demo)."""


def display_path(path: str) -> str:
    """The path as shown in the header: relative to the working directory when below it."""
    try:
        return str(Path(path).resolve().relative_to(Path.cwd().resolve()))
    except ValueError:
        return str(path)


class MainScreen(Screen):
    """The explorer: info bar, selection panel, the six views in tabs, footer.

    What it needs comes in through the constructor (attributes down): the model of the cube, the
    directory ``e`` and ``s`` write to, the demo builder (called when the model's path does not exist)
    and the address of the dask scheduler the reductions run on (None: local threads; shown while
    loading). What it wrote goes up to the app as :class:`~saferl_tui.messages.Exported`.
    """

    BINDINGS: ClassVar[list[BindingType]] = [
        *[Binding(cls.KEY, f"show_view('{cls.VIEW_ID}')", cls.TITLE, id=f"view.{cls.VIEW_ID}")
          for cls in VIEW_CLASSES],
        Binding("f", "toggle_selection", "Selection", id="selection.toggle"),
        Binding("escape", "close_selection", "Close selection", show=False, id="selection.close"),
        Binding("t", "cycle_setting", "Setting", id="selection.setting"),
        Binding("b", "cycle_baseline", "Baseline", id="selection.baseline"),
        Binding("e", "export", "Export", id="export.data"),
        Binding("s", "screenshot", "Screenshot", id="export.screenshot"),
        Binding("o", "open_path", "Open", show=False, id="file.open"),
        Binding("question_mark", "help", "Help", id="help"),
    ]

    def __init__(self, model: CubeModel, *, export_dir: Path, demo_builder: DemoBuilder | None = None,
                 scheduler: str | None = None) -> None:
        super().__init__()
        self.model = model
        self.export_dir = export_dir
        self.demo_builder = demo_builder
        self.scheduler = scheduler
        self.selection: UISelection | None = None
        self._shown: dict[str, tuple] = {}
        self._pending: dict[str, tuple] = {}
        self._requested_at: dict[str, float] = {}
        self.render_times: dict[str, float] = {}
        """Seconds from request to rendered data, per view (last request; read by the benchmark)."""

    # ------------------------------------------------------------------ layout
    def compose(self) -> ComposeResult:
        yield InfoBar(id="infobar")
        with Horizontal(id="main"):
            yield SelectionPanel(id="selection-panel")
            with Vertical(id="content"):
                yield LoadingPanel(id="loading")
                with TabbedContent(id="tabs"):
                    for cls in VIEW_CLASSES:
                        with TabPane(f"{cls.KEY} {cls.TITLE}", id=f"tab-{cls.VIEW_ID}"):
                            yield cls()
        yield Footer()

    def on_mount(self) -> None:
        self.query_one("#tabs").display = False
        self.query_one("#selection-panel").display = False
        self._header()
        self.load_cube()

    def _header(self, note: str = "") -> None:
        info = self.model.info
        self.query_one(InfoBar).show(display_path(self.model.path), self.selection,
                                     bool(info and info.synthetic), note)

    # ------------------------------------------------------------------ loading
    @work(thread=True, exclusive=True, group="load")
    def load_cube(self) -> None:
        """Open the cube and its sufficient statistics (first pass on a new cube) in a thread."""
        worker = get_current_worker()

        def progress(fraction: float, text: str) -> None:
            if worker.is_cancelled:  # app closing or another cube opened: abort the pass
                raise LoadCancelled
            self.post_message(LoadProgress(fraction, text))

        where = f" on the dask scheduler at {self.scheduler}" if self.scheduler else ""
        try:
            builder = self.demo_builder
            if builder is not None and not Path(self.model.path).exists():
                self.post_message(LoadProgress(0.0, f"building the demo cube at {self.model.path}"))
                builder(self.model.path, lambda d, t: progress(d / max(t, 1), "building the demo cube"))
            info = self.model.load(lambda fraction, text: progress(fraction, text + where))
        except LoadCancelled:
            return
        except CubeError as exc:
            self.post_message(LoadFailed(str(exc)))
            return
        except Exception as exc:  # the app must not crash on any unreadable input
            self.post_message(LoadFailed(f"cannot open {self.model.path}: {type(exc).__name__}: {exc}"))
            return
        if not worker.is_cancelled:
            self.post_message(CubeLoaded(info))

    def on_load_progress(self, msg: LoadProgress) -> None:
        self.query_one(LoadingPanel).progress(msg.fraction, msg.text)

    def on_load_failed(self, msg: LoadFailed) -> None:
        self.query_one(LoadingPanel).display = True
        self.query_one(LoadingPanel).failed(msg.error)
        self.query_one("#tabs").display = False
        self.notify(msg.error, severity="error", title="Cannot open cube", timeout=10)

    def on_cube_loaded(self, msg: CubeLoaded) -> None:
        self.query_one(LoadingPanel).display = False
        self.query_one("#tabs").display = True
        self.selection = msg.info.default_selection()
        for view in self.query(ResultView):
            view.selection = self.selection
        self.query_one(SelectionPanel).populate(msg.info, self.selection)
        self._header()
        if msg.info.synthetic:
            self.notify("This cube holds SYNTHETIC DEMO DATA, not training results.", title="Demo cube",
                        severity="warning", timeout=4)
        self.request(self.active_view())
        self.active_view().focus_body()

    # ------------------------------------------------------------------ views and data
    def active_view(self) -> ResultView:
        active = self.query_one("#tabs", TabbedContent).active or "tab-summary"
        return self.query_one(f"#view-{active.removeprefix('tab-')}", ResultView)

    def view(self, view_id: str) -> ResultView:
        return self.query_one(f"#view-{view_id}", ResultView)

    def shown_selection(self, view_id: str) -> UISelection | None:
        """The selection whose data a view shows (None before its first data)."""
        token = self._shown.get(view_id)
        return None if token is None else token[1]

    def request(self, view: ResultView) -> None:
        """Make sure ``view`` shows data for the current selection and its parameters."""
        if self.model.info is None or self.selection is None:
            return
        view.selection = self.selection
        token = view.token()
        if self._shown.get(view.VIEW_ID) == token or self._pending.get(view.VIEW_ID) == token:
            return
        self._pending[view.VIEW_ID] = token
        self._requested_at[view.VIEW_ID] = time.perf_counter()
        view.set_status("computing …")
        self.compute(view.VIEW_ID, type(view).fetch, self.selection, view.params(), token)

    @work(thread=True, exclusive=True, group="compute")
    def compute(self, view_id: str, fetch: Any, sel: UISelection, params: tuple, token: tuple) -> None:
        """Run a view's blocking ``fetch`` (store reads, reductions, bootstrap) in a thread."""
        worker = get_current_worker()
        try:
            data = fetch(self.model, sel, params)
        except CubeError as exc:
            self.post_message(ViewFailed(view_id, token, str(exc)))
            return
        except Exception as exc:  # show, never crash
            self.post_message(ViewFailed(view_id, token, f"{type(exc).__name__}: {exc}"))
            return
        if not worker.is_cancelled:
            self.post_message(ViewReady(view_id, token, data))

    def on_view_ready(self, msg: ViewReady) -> None:
        if self._pending.get(msg.view_id) != msg.token:
            return
        view = self.view(msg.view_id)
        view.selection, view.data_token = msg.token[1], msg.token
        view.data = msg.data
        self._shown[msg.view_id] = msg.token
        self._pending.pop(msg.view_id, None)
        self.render_times[msg.view_id] = time.perf_counter() - self._requested_at.get(msg.view_id, 0.0)

    def on_view_failed(self, msg: ViewFailed) -> None:
        if self._pending.get(msg.view_id) != msg.token:
            return
        self._pending.pop(msg.view_id, None)
        self._shown.pop(msg.view_id, None)
        self.view(msg.view_id).set_status(f"⚠ {msg.error}", error=True)

    def on_view_params_changed(self, msg: ViewParamsChanged) -> None:
        self.request(self.view(msg.view_id))

    @on(TabbedContent.TabActivated)
    def _tab_activated(self, event: TabbedContent.TabActivated) -> None:
        self.request(self.active_view())

    # ------------------------------------------------------------------ selection
    def on_selection_changed(self, msg: SelectionChanged) -> None:
        self.set_selection(msg.selection, from_panel=True)

    def set_selection(self, sel: UISelection, from_panel: bool = False) -> None:
        """Adopt a new selection: header, panel, and the active view (others update when shown)."""
        if self.model.info is None:
            return
        self.selection = sel
        if not from_panel:
            self.query_one(SelectionPanel).apply(sel)
        self._header()
        self.request(self.active_view())

    # ------------------------------------------------------------------ actions
    def action_show_view(self, view_id: str) -> None:
        """Switch to a view."""
        self.query_one("#tabs", TabbedContent).active = f"tab-{view_id}"
        self.view(view_id).focus_body()

    def action_toggle_selection(self) -> None:
        """Show the selection panel and focus it, or hide it."""
        panel = self.query_one(SelectionPanel)
        panel.display = not panel.display
        if panel.display:
            self.query_one("#sel-algos", PickList).focus()
        else:
            self.active_view().focus_body()

    def action_close_selection(self) -> None:
        """Hide the selection panel."""
        panel = self.query_one(SelectionPanel)
        if panel.display:
            panel.display = False
            self.active_view().focus_body()

    def action_cycle_setting(self) -> None:
        """Cycle train → final expl → final greedy."""
        if self.selection is not None:
            i = SETTINGS.index(self.selection.setting)
            self.set_selection(replace(self.selection, setting=SETTINGS[(i + 1) % len(SETTINGS)]))

    def action_cycle_baseline(self) -> None:
        """Cycle the baseline through the cube's algorithms and none."""
        if self.selection is None or self.model.info is None:
            return
        options = [*self.model.info.algos, None]
        i = options.index(self.selection.baseline) if self.selection.baseline in options else -1
        self.set_selection(replace(self.selection, baseline=options[(i + 1) % len(options)]))

    def action_export(self) -> None:
        """Write the current view's data to CSV and LaTeX in the export directory."""
        view = self.active_view()
        if view.data is not None and not view.is_current():
            self.notify("The view is being updated for the new selection: export again when it shows.",
                        severity="warning", title="Export")
            return
        try:
            files = view.export_tables()
        except CubeError as exc:
            self.notify(str(exc), severity="error", title="Export")
            return
        if not files:
            self.notify("Nothing to export yet: wait for the view to show data.", severity="warning",
                        title="Export")
            return
        out_dir = self.export_dir
        written = []
        try:
            out_dir.mkdir(parents=True, exist_ok=True)
            for name, text in files:
                (out_dir / name).write_text(text)
                written.append(str(out_dir / name))
        except OSError as exc:
            self.notify(f"cannot write to {out_dir}: {exc.strerror or exc}", severity="error", title="Export")
            return
        self.post_message(Exported(tuple(written)))
        self.notify("\n".join(written), title=f"Exported {view.TITLE}", timeout=8)

    def action_screenshot(self) -> None:
        """Save an SVG screenshot of the screen in the export directory."""
        out_dir = self.export_dir
        try:
            out_dir.mkdir(parents=True, exist_ok=True)
            path = self.app.save_screenshot(filename=f"saferl_{self.active_view().VIEW_ID}.svg", path=str(out_dir))
        except OSError as exc:
            self.notify(f"cannot write to {out_dir}: {exc.strerror or exc}", severity="error", title="Screenshot")
            return
        self.post_message(Exported((path,)))
        self.notify(path, title="Screenshot saved", timeout=8)

    def action_help(self) -> None:
        """Show every key binding."""
        self.app.push_screen(HelpScreen(help_rows(self)))

    def action_open_path(self) -> None:
        """Open another cube (asks for a path; a missing path is an error, never a new demo cube)."""

        def opened(path: str | None) -> None:
            if path:
                model = CubeModel(path, boot=self.model.boot, rng_seed=self.model.rng_seed)
                self.app.switch_screen(MainScreen(model, export_dir=self.export_dir, scheduler=self.scheduler))

        self.app.push_screen(OpenScreen(self.model.path), opened)


def help_rows(screen: MainScreen) -> list[tuple[str, str, str]]:
    """(where, key, description) for every binding of the app, the screen, the views and widgets."""
    rows: list[tuple[str, str, str]] = []

    def add(where: str, bindings: list[BindingType]) -> None:
        for b in bindings:
            if isinstance(b, Binding):
                keys = ", ".join(screen.app.get_key_display(Binding(k, b.action)) for k in b.key.split(","))
                rows.append((where, keys, b.description or b.action))

    add("anywhere", list(screen.app.BINDINGS))
    rows.append(("anywhere", screen.app.get_key_display(Binding("ctrl+p", "command_palette")),
                 "Command palette (views, exports, selections)"))
    add("main", list(MainScreen.BINDINGS))
    for cls in VIEW_CLASSES:
        add(cls.TITLE, list(getattr(cls, "BINDINGS", [])))
    add("selection lists", list(PickList.BINDINGS))
    rows.append(("selection lists", "space / enter", "Toggle the highlighted entry"))
    rows.append(("tables", "↑ ↓ ← → pgup pgdn", "Move; click a Conditions header to sort by it"))
    return rows


class HelpScreen(ModalScreen[None]):
    """Every key binding, generated from the binding tables."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape,question_mark,q", "dismiss", "Close help", id="help.close"),
    ]

    def __init__(self, rows: list[tuple[str, str, str]]) -> None:
        super().__init__()
        self.rows = rows

    def compose(self) -> ComposeResult:
        with Vertical(id="help-box"):
            yield Label(Text("Key bindings  (esc / ? closes)", style="bold"))
            yield DataTable(id="help-table", cursor_type="row", zebra_stripes=True)

    def on_mount(self) -> None:
        table = self.query_one(DataTable)
        table.add_columns("Where", "Key", "Action")
        for row in self.rows:
            table.add_row(*row)
        table.focus()

    async def action_dismiss(self, result: None = None) -> None:
        self.dismiss(result)


class OpenScreen(ModalScreen[str | None]):
    """Ask for a cube path."""

    BINDINGS: ClassVar[list[BindingType]] = [Binding("escape", "cancel", "Cancel", id="open.cancel")]

    def __init__(self, current: str) -> None:
        super().__init__()
        self.current = current

    def compose(self) -> ComposeResult:
        with Vertical(id="open-box"):
            yield Label("Open a results cube (.zarr directory or .nc file), enter to open, esc to cancel")
            yield Input(value=self.current, id="open-path")

    def on_input_submitted(self, event: Input.Submitted) -> None:
        self.dismiss(event.value.strip() or None)

    def action_cancel(self) -> None:
        self.dismiss(None)
