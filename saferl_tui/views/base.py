"""The view contract: :class:`ResultView`, the base class of every view.

A view is a widget with a reactive ``data`` attribute that the screen sets when a worker has computed
it (attributes down); a view that needs new data because one of its own parameters changed posts
:class:`~saferl_tui.messages.ViewParamsChanged` (messages up). ``fetch`` is the blocking computation the
screen runs in a thread worker; it only touches the model, never widgets. Formatting lives in
:mod:`saferl_tui.views.format`, tables in :mod:`saferl_tui.views.table`, plot layout in
:mod:`saferl_tui.views.plot`, exports in :mod:`saferl_tui.exports`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, ClassVar

from textual import on
from textual.app import ComposeResult
from textual.containers import Vertical
from textual.reactive import reactive
from textual.widgets import DataTable, Input, Static

from saferl_tui.exports import Files
from saferl_tui.messages import ViewParamsChanged
from saferl_tui.model import CubeModel
from saferl_tui.selection import UISelection
from saferl_tui.views.format import algo_palette
from saferl_tui.views.table import FilterInput


# ======================================================================== base class
class ResultView(Vertical):
    """Base class of a view: a status line, a body and the data it shows."""

    VIEW_ID: ClassVar[str] = ""
    TITLE: ClassVar[str] = ""
    KEY: ClassVar[str] = ""
    NARROW: ClassVar[int] = 0
    """Below this width (columns) the view draws its narrow layout (0: the view has one layout)."""
    FILTERABLE: ClassVar[bool] = False
    """Whether ``/`` filters the view's table."""
    FOOTER: ClassVar[bool] = False
    """Whether the view has a footer line that the screen computes after its data, in a worker of its own
    (`fetch_footer`; slow work that must not hold the view back)."""
    data: reactive[Any] = reactive(None, always_update=True, init=False)

    can_focus = True

    def __init__(self) -> None:
        super().__init__(id=f"view-{self.VIEW_ID}", classes="result-view")
        self.selection: UISelection | None = None
        """The selection the view shows or is waiting for (set by the screen when it asks for data)."""
        self.data_token: tuple | None = None
        """(view id, selection, params) ``data`` was computed for (set by the screen with ``data``)."""
        self.algo_colors: dict[str, tuple[int, int, int]] = {}
        """Colour per algorithm of the cube (set by the screen when the cube is loaded)."""
        self.incomplete: dict[tuple[str, str, float], int] = {}
        """Incomplete (partial or pending) runs per (algo, task, bound) of the shown selection."""
        self.filter_text = ""
        self._narrow_layout: bool | None = None

    def token(self) -> tuple:
        """What the view needs now: (view id, selection, params)."""
        return (self.VIEW_ID, self.selection, self.params())

    def is_current(self) -> bool:
        """Whether ``data`` matches the current selection and parameters (false while new data is
        being computed, when redrawing would mix old data with new settings)."""
        return self.data is not None and self.selection is not None and self.data_token == self.token()

    def redraw(self) -> None:
        """Draw ``data`` again after a change that needs no new data (layout, sort, x-range), if current."""
        if self.is_current():
            self.render_data(self.data)

    def narrow(self) -> bool:
        """Whether the view is now narrower than ``NARROW``."""
        return 0 < self.size.width < self.NARROW

    def layout_narrow(self) -> bool:
        """Whether to draw the narrow layout now (remembered: a resize across ``NARROW`` redraws)."""
        self._narrow_layout = self.narrow()
        return self._narrow_layout

    def on_resize(self) -> None:
        if self._narrow_layout is not None and self.narrow() != self._narrow_layout:
            self.redraw()

    def focus_body(self) -> None:
        """Focus the view's main table, or the view itself (so its key bindings apply)."""
        tables = self.query(DataTable)
        (tables.first() if tables else self).focus()

    def colors_of(self, algos: Sequence[str]) -> dict[str, tuple[int, int, int]]:
        """The fixed colours of ``algos`` (a fallback palette for algorithms the screen did not colour)."""
        fallback = algo_palette(algos)
        return {str(a): self.algo_colors.get(str(a), fallback[str(a)]) for a in algos}

    def compose(self) -> ComposeResult:
        yield Static("", classes="view-status")
        yield from self.compose_body()
        if self.FILTERABLE:
            yield FilterInput(placeholder="filter: words, or col:value (status:partial algo:ppo task:goal)",
                              id=f"{self.VIEW_ID}-filter", classes="table-filter")

    def compose_body(self) -> ComposeResult:  # pragma: no cover - overridden
        yield from ()

    # ---------------------------------------------------------------- filter (/)
    def start_filter(self) -> bool:
        """Show and focus the filter line (False when the view has no table to filter)."""
        if not self.FILTERABLE:
            return False
        field = self.query_one(FilterInput)
        field.add_class("-visible")
        field.value = self.filter_text
        field.focus()
        return True

    @on(Input.Changed, ".table-filter")
    def _filter_changed(self, event: Input.Changed) -> None:
        event.stop()
        self.filter_text = event.value.strip()
        self.redraw()

    @on(Input.Submitted, ".table-filter")
    def _filter_submitted(self, event: Input.Submitted) -> None:
        event.stop()
        self.filter_text = event.value.strip()
        field = self.query_one(FilterInput)
        field.set_class(bool(self.filter_text), "-visible")
        self.redraw()
        self.focus_body()

    def filter_suffix(self, shown: int, total: int) -> str:
        """' · 12 of 480 rows match /partial' when a filter is set."""
        if not self.filter_text:
            return ""
        return f" · {shown} of {total} rows match /{self.filter_text} (/ edits, esc in it clears)"

    # ---------------------------------------------------------------- contract with the screen
    def params(self) -> tuple:
        """View-specific parameters that change the data it needs (part of the request token)."""
        return ()

    def describe_params(self) -> dict:
        """The view's own parameters, for the selection recorded in exports."""
        return {}

    @staticmethod
    def fetch(model: CubeModel, sel: UISelection, params: tuple) -> Any:  # pragma: no cover
        """Blocking computation of the view's data (runs in a thread worker)."""
        raise NotImplementedError

    @staticmethod
    def fetch_footer(model: CubeModel, sel: UISelection, params: tuple) -> str:  # pragma: no cover
        """Blocking computation of the footer line (runs in a thread worker after the data are shown)."""
        raise NotImplementedError

    def show_footer(self, text: str, error: bool = False) -> None:  # pragma: no cover - views with FOOTER
        """Show the footer line ("" while it is computed)."""

    def watch_data(self, data: Any) -> None:
        if data is not None and self.selection is not None:
            self.set_status("")
            self.render_data(data)

    def render_data(self, data: Any) -> None:  # pragma: no cover - overridden
        raise NotImplementedError

    def set_status(self, text: str, error: bool = False) -> None:
        """Show a one-line status (computing..., or an error) above the body."""
        status = self.query_one(".view-status", Static)
        status.update(text)
        status.set_class(bool(text), "-visible")
        status.set_class(error, "-error")
        self.set_class(error, "-failed")

    def figure_condition(self) -> tuple[str, float] | None:
        """The (task, bound) a figure of this view draws (`P`); None: every condition of the selection."""
        return None

    def figure_settings(self) -> tuple[str, ...] | None:
        """The settings a figure of this view draws (`P`): the ones on screen; None: all with episodes."""
        return None

    def view_options(self) -> dict:
        """The view's own options as `cube.render.viewfile.ViewFile` fields (saved with the view)."""
        return {}

    def apply_view_options(self, options: dict) -> None:
        """Take the options of a saved view (`view_options`' keys; a None value keeps the view's own)."""

    def table_data(self) -> Any:
        """The view's data as `cube.render.views.view_tables` takes it (what `view_data` derives headless)."""
        return self.data

    def export_tables(self) -> Files:
        """(file name, text) pairs holding exactly what the view shows, in CSV and LaTeX."""
        return []

    def request_data(self) -> None:
        """Ask the screen for new data after a view parameter changed."""
        self.post_message(ViewParamsChanged(self.VIEW_ID))
