"""The main explorer screen: coordinates the selection, the workers and the views."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import replace
from functools import partial
from pathlib import Path
from typing import Any, ClassVar

from textual import events, on, work
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, Vertical
from textual.screen import Screen
from textual.widgets import DataTable, Input, TabbedContent, TabPane
from textual.worker import get_current_worker

from cube.compute import FractionProgress, Progress
from cube.errors import CubeError
from cube.outputs import figures_folder, write_text
from cube.render.viewfile import ViewFile
from cube.render.views import TABLE_VIEWS, export_meta, view_params, view_tables
from cube.stats.metrics import SETTINGS
from saferl_tui.exports import free_names, with_selection
from saferl_tui.follow import DEFAULT_INTERVAL_S, Follower, FollowUpdate
from saferl_tui.messages import (
    ConditionChosen,
    CubeLoaded,
    Exported,
    FooterReady,
    LoadFailed,
    LoadProgress,
    SelectionChanged,
    ViewFailed,
    ViewParamsChanged,
    ViewReady,
    ViewShown,
)
from saferl_tui.model import CubeModel, load_model
from saferl_tui.screens.following import FollowMode
from saferl_tui.screens.help import HelpScreen, help_rows, key_text
from saferl_tui.screens.open import OpenScreen
from saferl_tui.screens.saved import SavedViews
from saferl_tui.selection import UISelection
from saferl_tui.views import VIEW_CLASSES, ResultView
from saferl_tui.views.format import algo_palette
from saferl_tui.views.plot import ConditionCycler
from saferl_tui.widgets import (
    InfoBar,
    KeyBar,
    LoadingPanel,
    PickList,
    SelectionPanel,
)

DemoBuilder = Callable[[str, Progress], object]
"""``builder(path, progress(done, total))``: creates a cube at ``path`` (the bundled demo)."""

MIN_SIZE = (60, 20)
"""Below this terminal size the header says the views cannot all be readable."""
FIRST_KEYS = (("?", "Help"), ("f", "Selection"), ("e", "Export"), ("q", "Quit"))
"""What a newcomer needs first: always at the left of the key bar."""
REST_KEYS = (("t", "Setting"), ("b", "Baseline"), ("w", "Follow"), ("R", "Paper"), ("s", "Screenshot"),
             ("o", "Open"), ("^p", "Palette"))


def display_path(path: str) -> str:
    """The path as shown in the header: relative to the working directory when below it; a URL without
    its secrets (`cube.store.location.redact`)."""
    if "://" in str(path):
        from cube.store.location import redact

        return redact(path)
    try:
        return str(Path(path).resolve().relative_to(Path.cwd().resolve()))
    except ValueError:
        return str(path)


def display_cube(path: str) -> str:
    """The cube as recorded in an export: its path, or its URL without user info or query (no secrets)."""
    from cube.store.location import redact

    return redact(path)


TOAST_MIN_WIDTH = 120
"""Below this width the demo cube's toast is left out: it covered the gap table at 80x24."""


class MainScreen(SavedViews, FollowMode, Screen):
    """The explorer: info bar, selection panel, the views in tabs, key bar.

    What it needs comes in through the constructor (attributes down): the model of the cube (loaded
    already when it comes from the open box), the directory ``e`` and ``s`` write to, the demo builder
    (called when the model's path does not exist) and the address of the dask scheduler the reductions
    run on (None: local threads; shown while loading). What it wrote goes up to the app as
    :class:`~saferl_tui.messages.Exported`.
    """

    BINDINGS: ClassVar[list[BindingType]] = [
        *[Binding(cls.KEY, f"show_view('{cls.VIEW_ID}')", cls.TITLE, show=False, id=f"view.{cls.VIEW_ID}")
          for cls in VIEW_CLASSES],
        Binding("question_mark", "help", "Help", id="help"),
        Binding("f", "toggle_selection", "Selection panel", id="selection.toggle"),
        Binding("e", "export", "Export view (CSV + LaTeX)", id="export.data"),
        Binding("escape", "close_selection", "Close selection panel", show=False, id="selection.close"),
        Binding("t", "cycle_setting", "Setting: train → final expl → final greedy", id="selection.setting"),
        Binding("b", "cycle_baseline", "Baseline for Δ columns", id="selection.baseline"),
        Binding("s", "screenshot", "Screenshot (SVG)", id="export.screenshot"),
        Binding("P", "figure", "Figure of this view (PDF next to the cube)", id="export.figure"),
        Binding("o", "open_path", "Open another cube", id="file.open"),
        Binding("R", "toggle_reference", "The paper's numbers beside the cube's (Summary, Conditions)",
                id="selection.reference"),
        Binding("slash", "filter", "Filter the table (Conditions, Runs, Status)", id="table.filter"),
        Binding("w", "toggle_follow", "Follow the store being written on/off", id="follow.toggle"),
        Binding("S", "save_view", "Save this view (.saferl-view.toml)", id="file.save_view"),
    ]

    def __init__(self, model: CubeModel, *, export_dir: Path | None, demo_builder: DemoBuilder | None = None,
                 scheduler: str | None = None, follow: bool | None = None,
                 follow_interval: float = DEFAULT_INTERVAL_S, view_file: ViewFile | None = None) -> None:
        super().__init__()
        self.pending_view = view_file
        self.view_notes = []
        self.follow_choice = follow
        """Follow mode as asked (None: on when some run is partial or pending)."""
        self.follow_interval = float(follow_interval)
        self.following = False
        self.follower: Follower | None = None
        self.last_update: FollowUpdate | None = None
        """The last poll that found runs written (the header shows its time and count)."""
        self._polling = False
        self.follow_log: list[str] = []
        """Every line follow mode showed (failures, interrupted writes, growth, errors), oldest first."""
        self.model = model
        self.export_dir = export_dir
        self.demo_builder = demo_builder
        self.scheduler = scheduler
        self.selection: UISelection | None = None
        self._shown: dict[str, tuple] = {}
        self._pending: dict[str, tuple] = {}
        self._pending_footer: dict[str, tuple] = {}
        self._requested_at: dict[str, float] = {}
        self.render_times: dict[str, float] = {}
        """Seconds from request to rendered data, per view (last request; read by the benchmark)."""
        self.load_failed = False
        self._refreshing: set[str] = set()

    def notify_text(self, message: str, **kwargs: Any) -> None:
        """A notification whose text is shown as it is: paths, labels and errors are data, never markup
        (a hint like `pip install 'saferl[plot]'` keeps its brackets)."""
        self.notify(message, markup=False, **kwargs)

    @property
    def output_dir(self) -> Path:
        """Where `e`, `s` and `P` write: --export-dir, else `<cube>-figures/` next to the cube (the folder
        `saferl plot` writes to), so every output of a cube lands in one place."""
        return self.export_dir if self.export_dir is not None else figures_folder(self.model.path)

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
        yield KeyBar(id="keybar")

    def on_mount(self) -> None:
        self.query_one("#tabs").display = False
        self.query_one("#selection-panel").display = False
        self._header()
        self._keys()
        if self.model.info is not None:  # opened (and loaded) from the open box
            self.post_message(CubeLoaded(self.model.info))
        else:
            self.load_cube()

    def _header(self, note: str = "") -> None:
        info = self.model.info
        width, height = self.app.size
        if width < MIN_SIZE[0] or height < MIN_SIZE[1]:
            note = (note + " " if note else "") + f"terminal {width}x{height} < 60x20: enlarge it"
        follow = self._follow_text()
        note = f"{follow} {note}" if note and follow else (follow or note)
        self.query_one(InfoBar).show(display_path(self.model.path), self.selection,
                                     bool(info and info.synthetic), note, width=width)

    def _keys(self) -> None:
        """Refill the key bar for what has focus now."""
        focused = self.focused
        panel = self.query_one(SelectionPanel)
        if focused is not None and panel in focused.ancestors_with_self:
            local = [("space", "Toggle"), ("a", "All"), ("n", "None"), ("tab", "Next list"), ("esc", "Close")]
        elif isinstance(focused, Input):
            local = [("enter", "Apply"), ("esc", "Clear")]
        elif self.model.info is None:
            local = [("o", "Open")]
        else:
            view = self.active_view()
            local = [(key_text(b), b.description) for b in getattr(type(view), "BINDINGS", [])
                     if isinstance(b, Binding) and b.show]
            if view.FILTERABLE:
                local.insert(0, ("/", "Filter"))
            local.append(("0-9" if len(VIEW_CLASSES) == 10 else f"1-{len(VIEW_CLASSES)}", "Views"))
        self.query_one(KeyBar).show(FIRST_KEYS, local, REST_KEYS)

    def on_descendant_focus(self, event: events.DescendantFocus) -> None:
        self._keys()

    def on_resize(self, event: events.Resize) -> None:
        self._header()

    # ------------------------------------------------------------------ loading
    @work(thread=True, exclusive=True, group="load")
    def load_cube(self) -> None:
        """Open the cube and its sufficient statistics (first pass on a new cube) in a thread."""
        worker = get_current_worker()
        where = f" on the dask scheduler at {self.scheduler}" if self.scheduler else ""
        builder = self.demo_builder

        def build_demo(progress: FractionProgress) -> None:
            if builder is not None and not Path(self.model.path).exists():
                progress(0.0, f"building the demo cube at {self.model.path}")
                builder(self.model.path, lambda d, t: progress(d / max(t, 1), "building the demo cube"))

        info, error = load_model(self.model, lambda: worker.is_cancelled,
                                 lambda fraction, text: self.post_message(LoadProgress(fraction, text + where)),
                                 build_demo)
        if error is not None:
            self.post_message(LoadFailed(error))
        elif info is not None:
            self.post_message(CubeLoaded(info))

    def on_load_progress(self, msg: LoadProgress) -> None:
        self.query_one(LoadingPanel).progress(msg.fraction, msg.text)

    def on_load_failed(self, msg: LoadFailed) -> None:
        self.load_failed = True
        self.query_one(LoadingPanel).display = True
        self.query_one(LoadingPanel).failed(msg.error)
        self.query_one("#tabs").display = False
        self.notify_text(msg.error, severity="error", title="Cannot open cube", timeout=10)

    def on_cube_loaded(self, msg: CubeLoaded) -> None:
        self.query_one(LoadingPanel).display = False
        self.query_one("#tabs").display = True
        self.selection = msg.info.default_selection()
        colors = algo_palette(msg.info.algos)
        for view in self.query(ResultView):
            view.selection = self.selection
            view.algo_colors = colors
        self.query_one(SelectionPanel).populate(msg.info, self.selection)
        self._header()
        if msg.info.synthetic and self.app.size.width >= TOAST_MIN_WIDTH:  # the header says SYNTHETIC too;
            # below 120 columns the toast would cover the Summary's tables for its 4 seconds
            self.notify_text("This cube holds SYNTHETIC DEMO DATA, not training results.", title="Demo cube",
                        severity="warning", timeout=4)
        if self.pending_view is not None:
            self.apply_view_file(self.pending_view)
        else:
            self.request(self.active_view())
            self.active_view().focus_body()
        self._keys()
        self._start_following()

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
        # One worker group per view: a newer request of the same view replaces its older one, and never
        # cancels another view's (Enter on Conditions asks Curves and Histograms at once).
        self.run_worker(partial(self.compute, view.VIEW_ID, type(view).fetch, self.selection, view.params(), token),
                        name=f"compute:{view.VIEW_ID}", group=f"compute:{view.VIEW_ID}", exclusive=True, thread=True)

    @property
    def busy(self) -> bool:
        """Whether the screen still waits for something: the cube (until it loaded or failed) or the data
        of a view it asked for. Tests and scripts wait for this to turn False."""
        loading = self.model.info is None and not self.load_failed
        return loading or bool(self._pending) or bool(self._pending_footer)

    def compute(self, view_id: str, fetch: Any, sel: UISelection, params: tuple, token: tuple) -> None:
        """Run a view's blocking ``fetch`` (store reads, reductions, bootstrap) in a worker thread."""
        worker = get_current_worker()
        try:
            data = fetch(self.model, sel, params)
            incomplete = self.model.incomplete(sel)
        except CubeError as exc:
            self.post_message(ViewFailed(view_id, token, str(exc)))
            return
        except Exception as exc:  # show, never crash
            self.post_message(ViewFailed(view_id, token, f"{type(exc).__name__}: {exc}"))
            return
        if not worker.is_cancelled:
            self.post_message(ViewReady(view_id, token, data, incomplete))

    def on_view_ready(self, msg: ViewReady) -> None:
        if self._pending.get(msg.view_id) != msg.token:
            return
        view = self.view(msg.view_id)
        view.selection, view.data_token = msg.token[1], msg.token
        view.incomplete = msg.incomplete or {}
        kept = [(t, t.cursor_coordinate, t.scroll_offset) for t in view.query(DataTable)] \
            if msg.view_id in self._refreshing else []
        self._refreshing.discard(msg.view_id)
        view.data = msg.data
        for table, cursor, offset in kept:  # a follow refresh keeps the place in every table
            if table.row_count:
                table.move_cursor(row=min(cursor.row, table.row_count - 1), column=cursor.column, scroll=False)
            self.call_after_refresh(table.scroll_to, offset.x, offset.y, animate=False)
        self._shown[msg.view_id] = msg.token
        self._pending.pop(msg.view_id, None)
        self.render_times[msg.view_id] = time.perf_counter() - self._requested_at.get(msg.view_id, 0.0)
        if view.FOOTER:
            self.request_footer(view, msg.token)
        self.post_message(ViewShown(msg.view_id))

    def request_footer(self, view: ResultView, token: tuple) -> None:
        """Compute the view's footer line for the data it shows, in a worker of its own (one per view)."""
        self._pending_footer[view.VIEW_ID] = token
        view.show_footer("")
        self.run_worker(partial(self.compute_footer, view.VIEW_ID, type(view).fetch_footer, token),
                        name=f"footer:{view.VIEW_ID}", group=f"footer:{view.VIEW_ID}", exclusive=True, thread=True)

    def compute_footer(self, view_id: str, fetch: Any, token: tuple) -> None:
        """Run a view's blocking ``fetch_footer`` in a worker thread; errors become the footer's text."""
        worker = get_current_worker()
        try:
            text, error = fetch(self.model, token[1], token[2]), False
        except CubeError as exc:
            text, error = str(exc), True
        except Exception as exc:  # show, never crash
            text, error = f"{type(exc).__name__}: {exc}", True
        if not worker.is_cancelled:
            self.post_message(FooterReady(view_id, token, text, error))

    def on_footer_ready(self, msg: FooterReady) -> None:
        if self._pending_footer.get(msg.view_id) != msg.token:
            return
        self._pending_footer.pop(msg.view_id, None)
        view = self.view(msg.view_id)
        if view.data_token == msg.token:
            view.show_footer(msg.text, msg.error)

    def on_view_failed(self, msg: ViewFailed) -> None:
        if self._pending.get(msg.view_id) != msg.token:
            return
        self._pending.pop(msg.view_id, None)
        self._shown.pop(msg.view_id, None)
        self.view(msg.view_id).set_status(f"⚠ {msg.error}", error=True)

    def on_view_params_changed(self, msg: ViewParamsChanged) -> None:
        self.request(self.view(msg.view_id))

    def on_condition_chosen(self, msg: ConditionChosen) -> None:
        """Enter on a Conditions row: that condition in Curves and Histograms; show Curves."""
        for view in self.query(ConditionCycler):
            view.selection = self.selection
            view.show_condition(msg.task, msg.bound)
        self.action_show_view("curves")

    @on(TabbedContent.TabActivated)
    def _tab_activated(self, event: TabbedContent.TabActivated) -> None:
        self.request(self.active_view())
        self._keys()

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
        self._keys()

    def action_toggle_selection(self) -> None:
        """Show the selection panel and focus it, or hide it."""
        panel = self.query_one(SelectionPanel)
        panel.display = not panel.display
        if panel.display:
            self.query_one("#sel-algos", PickList).focus()
        else:
            self.active_view().focus_body()
        self._keys()

    def action_close_selection(self) -> None:
        """Hide the selection panel."""
        panel = self.query_one(SelectionPanel)
        if panel.display:
            panel.display = False
            self.active_view().focus_body()
            self._keys()

    def action_filter(self) -> None:
        """Filter the rows of the view's table (Conditions, Runs)."""
        if self.model.info is None:
            return
        if not self.active_view().start_filter():
            self.notify_text("/ filters the tables of 2 Conditions and 6 Runs.", title="Filter", timeout=4)
        self._keys()

    def action_cycle_setting(self) -> None:
        """Cycle train → final expl → final greedy."""
        if self.selection is not None:
            i = SETTINGS.index(self.selection.setting)
            self.set_selection(replace(self.selection, setting=SETTINGS[(i + 1) % len(SETTINGS)]))

    def action_cycle_baseline(self) -> None:
        """Cycle the baseline (what the Δ columns compare to) through the cube's algorithms and none."""
        if self.selection is None or self.model.info is None:
            return
        options = [*self.model.info.algos, None]
        i = options.index(self.selection.baseline) if self.selection.baseline in options else -1
        self.set_selection(replace(self.selection, baseline=options[(i + 1) % len(options)]))

    def action_toggle_reference(self) -> None:
        """Show the paper's published numbers beside the cube's in Summary and Conditions, or hide them."""
        if self.selection is not None:
            self.set_selection(replace(self.selection, reference=None if self.selection.reference else "paper"))

    def export_meta(self, view: ResultView) -> dict:
        """What an export records: the cube, view, selection, bootstrap settings and view parameters."""
        vf = self.current_view_file()
        assert vf is not None
        params = view_params(vf) if vf.view in TABLE_VIEWS else view.describe_params()
        return export_meta(vf, display_cube(self.model.path), params)

    def action_export(self) -> None:
        """Write the current view's data to CSV and LaTeX in the export directory (never overwriting;
        the selection recorded in each file)."""
        view = self.active_view()
        if view.data is not None and not view.is_current():
            self.notify_text("The view is being updated for the new selection: export again when it shows.",
                        severity="warning", title="Export")
            return
        try:
            vf = self.current_view_file()
            files = (view_tables(vf, view.table_data()) if vf is not None and vf.view in TABLE_VIEWS
                     and view.data is not None else view.export_tables())
        except CubeError as exc:
            self.notify_text(str(exc), severity="error", title="Export")
            return
        if not files or view.selection is None:
            self.notify_text("Nothing to export yet: wait for the view to show data.", severity="warning",
                        title="Export")
            return
        out_dir = self.output_dir
        tag = view.selection.tag(self.model.info)
        meta = self.export_meta(view)
        names = []
        for name, _ in files:
            what, _, ext = name.rpartition(".")
            names.append(f"saferl_{what}_{tag}.{ext}")
        written = []
        try:
            out_dir.mkdir(parents=True, exist_ok=True)
            for path, (name, text) in zip(free_names(out_dir, names), files, strict=True):
                write_text(path, with_selection(name, text, meta), replace=False)  # atomic, never overwrites
                written.append(str(path))
        except CubeError as exc:
            self.notify_text(str(exc), severity="error", title="Export")
            return
        except OSError as exc:
            self.notify_text(f"cannot write to {out_dir}: {exc.strerror or exc}", severity="error", title="Export")
            return
        self.post_message(Exported(tuple(written)))
        self.notify_text("\n".join(written), title=f"Exported {view.TITLE}", timeout=8)

    def action_screenshot(self) -> None:
        """Save an SVG screenshot of the screen in the export directory (never overwriting; the
        selection recorded in an XML comment)."""
        out_dir = self.output_dir
        view = self.active_view()
        tag = view.selection.tag(self.model.info) if view.selection is not None else "nocube"
        try:
            out_dir.mkdir(parents=True, exist_ok=True)
            (path,) = free_names(out_dir, [f"saferl_{view.VIEW_ID}_{tag}.svg"])
            svg = self.app.export_screenshot(title=f"saferl-tui {view.TITLE}")
            meta = self.export_meta(view) if view.selection is not None else {"cube": display_cube(self.model.path)}
            write_text(path, with_selection(path.name, svg, meta), replace=False)  # atomic, never overwrites
        except CubeError as exc:
            self.notify_text(str(exc), severity="error", title="Screenshot")
            return
        except OSError as exc:
            self.notify_text(f"cannot write to {out_dir}: {exc.strerror or exc}", severity="error", title="Screenshot")
            return
        self.post_message(Exported((str(path),)))
        self.notify_text(str(path), title="Screenshot saved", timeout=8)

    def action_figure(self) -> None:
        """Write the paper-style figure of the current view and selection as a PDF next to the cube
        (`<cube>-figures/` unless --export-dir, never overwriting), of what the view shows (its settings, its
        condition), in a worker: matplotlib takes a moment."""
        view = self.active_view()
        if view.selection is None or self.model.ss is None:
            self.notify_text("Nothing to draw yet: wait for the view to show data.", severity="warning", title="Figure")
            return
        self.notify_text("Drawing the figure …", title="Figure", timeout=3)
        vf = self.current_view_file()
        if vf is not None:
            self._write_figure(replace(vf, condition=view.figure_condition()), view.selection)

    @work(thread=True, exclusive=True, group="figure")
    def _write_figure(self, vf: ViewFile, sel: UISelection) -> None:
        """The figure of the view ``vf`` (`cube.render.views.view_figure`: what `saferl render` draws)."""
        from cube.render.views import figure_kind, view_figure

        condition, view_id = vf.condition, vf.view
        cube_path = self.model.path if self.model.remote else Path(self.model.path)
        folder = self.output_dir
        suffix = (f"_{condition[0]}_d{condition[1]:g}"
                  if condition and figure_kind(view_id) in ("curves", "hist") else "")
        try:
            folder.mkdir(parents=True, exist_ok=True)
            (out,) = free_names(folder,
                                [f"{figure_kind(view_id).replace('-', '_')}{suffix}_{sel.tag(self.model.info)}.pdf"])
            path = view_figure(vf, cube_path, out, ss=self.model.ss)
        except (CubeError, OSError) as exc:
            self.app.call_from_thread(self.notify, str(exc), severity="error", title="Figure")
            return
        self.app.call_from_thread(self.post_message, Exported((str(path),)))
        self.app.call_from_thread(self.notify, str(path), title="Figure written", timeout=8)

    def action_help(self) -> None:
        """Show every key binding."""
        self.app.push_screen(HelpScreen(help_rows(self)))

    def action_open_path(self) -> None:
        """Open another cube: the open box loads it and only then replaces this one (a bad path leaves
        the current cube and selection as they are)."""

        def opened(model: CubeModel | None) -> None:
            if model is not None:
                self.app.switch_screen(MainScreen(model, export_dir=self.export_dir, scheduler=self.scheduler,
                                                  follow=self.follow_choice, follow_interval=self.follow_interval))

        def make(path: str) -> CubeModel:
            return CubeModel(path, boot=self.model.boot, rng_seed=self.model.rng_seed, stall_s=self.model.stall_s,
                             clock=self.model.clock)

        self.app.push_screen(OpenScreen(self.model.path, make), opened)
