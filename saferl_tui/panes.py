"""The six result views (Summary, Conditions, CDF, Curves, Histograms, Runs).

Each view is a widget with a reactive ``data`` attribute that the screen sets when a worker has
computed it (attributes down); a view that needs new data because one of its own parameters changed
posts :class:`~saferl_tui.messages.ViewParamsChanged` (messages up). ``fetch`` is the blocking
computation the screen runs in a thread worker; it only touches the model, never widgets.
"""

from __future__ import annotations

import math
from typing import Any, ClassVar

import numpy as np
import xarray as xr
from rich.cells import cell_len
from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Grid, Horizontal, Vertical, VerticalScroll
from textual.reactive import reactive
from textual.widgets import DataTable, Static
from textual_plotext import PlotextPlot

from cube import export as cube_export
from saferl_tui.messages import ViewParamsChanged
from saferl_tui.model import (
    HIGHER_IS_BETTER,
    METRIC_LABELS,
    METRICS,
    SETTING_LABELS,
    SETTINGS,
    CubeModel,
    UISelection,
    export_text,
)

TIER_LABELS = {0: "Unsafe", 1: "Minimal", 2: "Moderate", 3: "Substantial", 4: "Strict"}
PALETTE = ("blue", "red", "green", "orange", "magenta", "cyan", "yellow", "white")


def fmt(v: float, digits: int = 2) -> str:
    """A number as shown on screen (fixed decimals; "–" for NaN)."""
    v = float(v)
    return "–" if not math.isfinite(v) else f"{v:.{digits}f}"


def fmt_tier(t: float) -> str:
    """A tier as shown on screen (integer, "–" when undefined)."""
    t = float(t)
    return "–" if not math.isfinite(t) or t < 0 else str(int(t))


def algo_colors(algos: tuple[str, ...], baseline: str | None) -> dict[str, str]:
    """A stable plotext colour per algorithm (the baseline is gray)."""
    out, i = {}, 0
    for a in algos:
        if a == baseline:
            out[a] = "gray"
        else:
            out[a] = PALETTE[i % len(PALETTE)]
            i += 1
    return out


def condition_label(task: str, bound: float) -> str:
    """'goal d=25' style label of a (task, bound) condition."""
    return f"{task} d={bound:g}"


def add_columns(table: DataTable, columns: list[tuple[str | Text, str]], rows: list[list[Text]]) -> None:
    """Add columns sized to their widest line: DataTable's own measure under-sizes multi-line cells and
    labels (and not always the same way), which would truncate numbers."""
    for i, (label, key) in enumerate(columns):
        plain = label.plain if isinstance(label, Text) else label
        lines = [line for r in rows for line in r[i].plain.split("\n")] + plain.split("\n")
        table.add_column(label, key=key, width=max(cell_len(line) for line in lines))


class ResultView(Vertical):
    """Base class of a view: a status line, a body and the data it shows."""

    VIEW_ID: ClassVar[str] = ""
    TITLE: ClassVar[str] = ""
    KEY: ClassVar[str] = ""
    data: reactive[Any] = reactive(None, always_update=True, init=False)

    can_focus = True

    def __init__(self) -> None:
        super().__init__(id=f"view-{self.VIEW_ID}", classes="result-view")
        self.selection: UISelection | None = None
        """The selection the view shows or is waiting for (set by the screen when it asks for data)."""
        self.data_token: tuple | None = None
        """(view id, selection, params) ``data`` was computed for (set by the screen with ``data``)."""

    def token(self) -> tuple:
        """What the view needs now: (view id, selection, params)."""
        return (self.VIEW_ID, self.selection, self.params())

    def is_current(self) -> bool:
        """Whether ``data`` matches the current selection and parameters (false while new data is
        being computed, when redrawing would mix old data with new settings)."""
        return self.data is not None and self.selection is not None and self.data_token == self.token()

    def focus_body(self) -> None:
        """Focus the view's main table, or the view itself (so its key bindings apply)."""
        tables = self.query(DataTable)
        (tables.first() if tables else self).focus()

    def compose(self) -> ComposeResult:
        yield Static("", classes="view-status")
        yield from self.compose_body()

    def compose_body(self) -> ComposeResult:  # pragma: no cover - overridden
        yield from ()

    # ---------------------------------------------------------------- contract with the screen
    def params(self) -> tuple:
        """View-specific parameters that change the data it needs (part of the request token)."""
        return ()

    @staticmethod
    def fetch(model: CubeModel, sel: UISelection, params: tuple) -> Any:  # pragma: no cover
        """Blocking computation of the view's data (runs in a thread worker)."""
        raise NotImplementedError

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

    def export_tables(self) -> list[tuple[str, str]]:
        """(file name, text) pairs holding exactly what the view shows, in CSV and LaTeX."""
        return []

    def request_data(self) -> None:
        """Ask the screen for new data after a view parameter changed."""
        self.post_message(ViewParamsChanged(self.VIEW_ID))


# ======================================================================== Summary
class SummaryView(ResultView):
    """Paper Table 2 (IQM, train and final side by side, tiers) and the CIs of the current setting."""

    VIEW_ID = "summary"
    TITLE = "Summary"
    KEY = "1"

    def compose_body(self) -> ComposeResult:
        with VerticalScroll(classes="view-body"):
            yield Static("", id="summary-title", classes="table-title")
            yield DataTable(id="summary-table", zebra_stripes=True, cursor_type="row", header_height=2)
            yield Static("", id="summary-ci-title", classes="table-title")
            yield DataTable(id="summary-ci", zebra_stripes=True, cursor_type="row")

    @staticmethod
    def fetch(model: CubeModel, sel: UISelection, params: tuple) -> xr.Dataset:
        return model.aggregate(sel, tuple(dict.fromkeys(("train", sel.final_setting, sel.setting))))

    def _pair(self) -> tuple[str, str]:
        assert self.selection is not None
        return "train", self.selection.final_setting

    NARROW = 110
    """Below this width (columns) the tables switch to a long layout: one row per algorithm and setting."""

    def __init__(self) -> None:
        super().__init__()
        self._narrow_layout: bool | None = None

    def narrow(self) -> bool:
        """Whether the view is too narrow for train and final side by side."""
        return 0 < self.size.width < self.NARROW

    def on_resize(self) -> None:
        if self._narrow_layout is not None and self.narrow() != self._narrow_layout and self.is_current():
            self.render_data(self.data)

    def render_data(self, agg: xr.Dataset) -> None:
        sel = self.selection
        assert sel is not None
        pair = self._pair()
        cube = _AggArrays(agg)
        best = _best_per_column(cube, pair, sel.baseline)
        self._narrow_layout = narrow = self.narrow()
        table = self.query_one("#summary-table", DataTable)
        table.clear(columns=True)
        table.header_height = 1 if narrow else 2
        columns: list[tuple[str | Text, str]] = [("Algorithm", "algo")]
        if narrow:
            columns.append(("Setting", "setting"))
            columns += [(Text(f"IQM {METRIC_LABELS[m]}", justify="right"), m) for m in METRICS]
            columns.append(("Tier", "tier"))
        else:
            columns += [(Text(f"{METRIC_LABELS[m]}\n{_short(s)}", justify="right"), f"{m}:{s}")
                        for m in METRICS for s in pair]
            columns += [(Text(f"Tier\n{_short(s)}", justify="right"), f"tier:{s}") for s in pair]

        def cell(a: str, m: str, s: str) -> Text:
            style = "dim" if a == sel.baseline else ("bold" if best.get((m, s)) == a else "")
            return Text(fmt(cube.get("value", a, s, m)), style=style, justify="right")

        rows: list[tuple[str, list[Text]]] = []
        for a in cube.algos:
            dim = "dim" if a == sel.baseline else ""
            if narrow:
                for i, s in enumerate(pair):
                    cells = [Text(a if i == 0 else "", style=dim or "bold"), Text(_short(s), style=dim)]
                    cells += [cell(a, m, s) for m in METRICS]
                    cells.append(Text(fmt_tier(cube.tier(a, s)), style=dim, justify="right"))
                    rows.append((f"{a}:{s}", cells))
                continue
            cells = [Text(a, style=dim or "bold")] + [cell(a, m, s) for m in METRICS for s in pair]
            cells += [Text(fmt_tier(cube.tier(a, s)), style=dim, justify="right") for s in pair]
            rows.append((a, cells))
        add_columns(table, columns, [c for _, c in rows])
        for key, cells in rows:
            table.add_row(*cells, key=key)
        it = _iter_text(sel)
        self.query_one("#summary-title", Static).update(
            f"IQM over {len(sel.tasks) * len(sel.bounds)} task-bound pairs · Train{it} | {SETTING_LABELS[pair[1]]}"
            f" · bold = best excl. baseline ({sel.baseline or 'none'}), lower is better except R̄")
        self._render_ci(cube, narrow)

    def _render_ci(self, cube: _AggArrays, narrow: bool) -> None:
        sel = self.selection
        assert sel is not None
        s = sel.setting
        table = self.query_one("#summary-ci", DataTable)
        table.clear(columns=True)
        rows = []
        for a in cube.algos:
            dim = "dim" if a == sel.baseline else ""
            cells = [Text(a, style=dim)]
            for m in METRICS:
                v, lo, hi = (fmt(cube.get(k, a, s, m)) for k in ("value", "ci_low", "ci_high"))
                text = f"{v}\n{lo}\n{hi}" if narrow else f"{v}\n[{lo}, {hi}]"
                cells.append(Text(text, style=dim, justify="right"))
            t = cube.tier(a, s)
            cells.append(Text(f"{fmt_tier(t)}\n{TIER_LABELS.get(int(t), '')}", style=dim))
            rows.append((a, cells))
        columns = [("Algorithm", "algo"), *[(f"IQM {METRIC_LABELS[m]}", m) for m in METRICS], ("Tier", "tier")]
        add_columns(table, columns, [c for _, c in rows])
        for a, cells in rows:
            table.add_row(*cells, key=a, height=3 if narrow else 2)
        layout = " (rows: IQM, CI low, CI high)" if narrow else ""
        self.query_one("#summary-ci-title", Static).update(
            f"{SETTING_LABELS[s]}{_iter_text(sel) if s == 'train' else ''}: IQM with 95% stratified-bootstrap CI"
            f"{layout}")

    def export_tables(self) -> list[tuple[str, str]]:
        if self.data is None or self.selection is None:
            return []
        sub = self.data.sel(setting=list(dict.fromkeys([*self._pair(), self.selection.setting])))
        return [(f"saferl_summary.{ext}", export_text("aggregate", sub, fmt, self.selection.baseline))
                for ext, fmt in (("csv", "csv"), ("tex", "latex"))]


def _short(setting: str) -> str:
    return "train" if setting == "train" else "final"


def _iter_text(sel: UISelection) -> str:
    if sel.iterates is None:
        return ""
    if isinstance(sel.iterates, int):
        return f" (iterate {sel.iterates})"
    return f" (iterates {sel.iterates[0]}..{sel.iterates[1]})"


class _AggArrays:
    """Plain-numpy lookups into a ``stats.aggregate_table`` result (fast enough for every redraw)."""

    def __init__(self, agg: xr.Dataset) -> None:
        agg = agg.transpose("algo", "setting", "metric")
        self.algos = [str(a) for a in agg["algo"].values]
        self._a = {a: i for i, a in enumerate(self.algos)}
        self._s = {str(s): i for i, s in enumerate(agg["setting"].values)}
        self._m = {str(m): i for i, m in enumerate(agg["metric"].values)}
        self._v = {k: np.asarray(agg[k].values, dtype=np.float64) for k in ("value", "ci_low", "ci_high")}
        self._t = np.asarray(agg["tier"].transpose("algo", "setting").values, dtype=np.float64)

    def get(self, var: str, algo: str, setting: str, metric: str) -> float:
        return float(self._v[var][self._a[algo], self._s[setting], self._m[metric]])

    def tier(self, algo: str, setting: str) -> float:
        return float(self._t[self._a[algo], self._s[setting]])


def _best_per_column(cube: _AggArrays, settings: tuple[str, ...], baseline: str | None) -> dict:
    """{(metric, setting): algo} of the best finite value per column, the baseline excluded."""
    out = {}
    algos = [a for a in cube.algos if a != baseline]
    for m in METRICS:
        for s in settings:
            vals = {a: cube.get("value", a, s, m) for a in algos}
            vals = {a: v for a, v in vals.items() if math.isfinite(v)}
            if vals:
                pick = max if m in HIGHER_IS_BETTER else min
                out[(m, s)] = pick(vals, key=vals.__getitem__)
    return out


# ======================================================================== Conditions
class ConditionsView(ResultView):
    """Seed mean ± std per (algorithm, task, bound) with per-condition tiers (paper tables 4-7)."""

    VIEW_ID = "conditions"
    TITLE = "Conditions"
    KEY = "2"
    SORT_KEYS = ("algo", "task", "bound", *METRICS, "n_seeds", "tier")
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("o", "sort_next", "Sort column", id="conditions.sort"),
        Binding("O", "sort_reverse", "Reverse sort", id="conditions.reverse"),
    ]

    def __init__(self) -> None:
        super().__init__()
        self.sort_key = "algo"
        self.sort_desc = False
        self._narrow_layout: bool | None = None

    def compose_body(self) -> ComposeResult:
        yield Static("", id="conditions-title", classes="table-title")
        yield DataTable(id="conditions-table", zebra_stripes=True, cursor_type="row", header_height=2)

    @staticmethod
    def fetch(model: CubeModel, sel: UISelection, params: tuple) -> xr.Dataset:
        return model.conditions(sel, (sel.setting,))

    def rows(self) -> list[dict]:
        """Rows of the current setting as plain values, in the current sort order."""
        ct = self.data
        sel = self.selection
        assert ct is not None and sel is not None
        sub = ct.sel(setting=sel.setting)
        rows = []
        for a in sub["algo"].values:
            for t in sub["task"].values:
                for b in sub["bound"].values:
                    p = sub.sel(algo=a, task=t, bound=b)
                    row = {"algo": str(a), "task": str(t), "bound": float(b),
                           "n_seeds": int(p["n_seeds"]), "tier": float(p["tier"])}
                    for m in METRICS:
                        row[m] = float(p[f"{m}_mean"])
                        row[f"{m}_std"] = float(p[f"{m}_std"])
                    rows.append(row)

        def key(r: dict) -> tuple:
            v = r[self.sort_key]
            if isinstance(v, float) and not math.isfinite(v):
                return (1, 0.0)
            return (0, v)

        rows.sort(key=key, reverse=self.sort_desc)
        return rows

    NARROW = 112
    """Below this width (columns): mean and ± std on two lines, no seeds column (counts in the title)."""

    def on_resize(self) -> None:
        if self._narrow_layout is not None and (0 < self.size.width < self.NARROW) != self._narrow_layout:
            self._resort()

    def render_data(self, ct: xr.Dataset) -> None:
        sel = self.selection
        assert sel is not None
        self._narrow_layout = narrow = 0 < self.size.width < self.NARROW
        table = self.query_one("#conditions-table", DataTable)
        cursor = table.cursor_row
        table.clear(columns=True)
        table.header_height = 1 if narrow else 2
        heads = {"algo": "Algorithm", "task": "Task", "bound": "d", "n_seeds": "Seeds", "tier": "Tier"}
        keys = [k for k in self.SORT_KEYS if not (narrow and k == "n_seeds")]
        labels = []
        for k in keys:
            label = heads.get(k) or (METRIC_LABELS[k] if narrow else f"{METRIC_LABELS[k]}\nmean ± std")
            labels.append(label + ((" ▼" if self.sort_desc else " ▲") if k == self.sort_key else ""))
        rows = self.rows()
        sep = "\n±" if narrow else " ± "
        all_cells = []
        for r in rows:
            dim = "dim" if r["algo"] == sel.baseline else ""
            cells = [Text(r["algo"], style=dim), Text(r["task"], style=dim), Text(f"{r['bound']:g}", style=dim)]
            cells += [Text(f"{fmt(r[m])}{sep}{fmt(r[m + '_std'])}", style=dim, justify="right") for m in METRICS]
            if not narrow:
                cells.append(Text(str(r["n_seeds"]), style=dim, justify="right"))
            cells.append(Text(fmt_tier(r["tier"]), style=dim, justify="right"))
            all_cells.append(cells)
        add_columns(table, list(zip(labels, keys, strict=True)), all_cells)
        for i, cells in enumerate(all_cells):
            table.add_row(*cells, key=str(i), height=2 if narrow else 1)
        if table.row_count:
            table.move_cursor(row=min(cursor, table.row_count - 1))
        seeds = sorted({r["n_seeds"] for r in rows})
        n_seeds = f" · seeds per condition: {seeds[0]}" + (f"–{seeds[-1]}" if len(seeds) > 1 else "") if seeds else ""
        self.query_one("#conditions-title", Static).update(
            f"{SETTING_LABELS[sel.setting]}{_iter_text(sel) if sel.setting == 'train' else ''}: seed mean ± std"
            f" per condition{n_seeds if narrow else ''} · sorted by {self.sort_key}"
            f" {'desc' if self.sort_desc else 'asc'} (o / O, or click a header)")

    def _resort(self) -> None:
        if self.is_current():
            self.render_data(self.data)

    def action_sort_next(self) -> None:
        """Sort by the next column."""
        i = self.SORT_KEYS.index(self.sort_key)
        self.sort_key = self.SORT_KEYS[(i + 1) % len(self.SORT_KEYS)]
        self._resort()

    def action_sort_reverse(self) -> None:
        """Reverse the sort order."""
        self.sort_desc = not self.sort_desc
        self._resort()

    def on_data_table_header_selected(self, event: DataTable.HeaderSelected) -> None:
        key = str(event.column_key.value)
        if key == self.sort_key:
            self.sort_desc = not self.sort_desc
        else:
            self.sort_key, self.sort_desc = key, False
        self._resort()

    def export_tables(self) -> list[tuple[str, str]]:
        if self.data is None or self.selection is None:
            return []
        sub = self.data.sel(setting=[self.selection.setting])
        return [(f"saferl_conditions_{self.selection.setting}.{ext}",
                 export_text("conditions", sub, fmt, self.selection.baseline))
                for ext, fmt in (("csv", "csv"), ("tex", "latex"))]


# ======================================================================== CDF
XMAX_STEPS = (0.5, 1.0, 2.0, 4.0, 8.0, math.inf)
WINDOWS = (1, 2, 3, 5, 10, 20, 50)


class CdfView(ResultView):
    """Empirical CDF of the normalized episodic cost deviation with bootstrap band edges."""

    VIEW_ID = "cdf"
    TITLE = "CDF"
    KEY = "3"
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("p", "toggle_panels", "All settings / one", id="cdf.panels"),
        Binding("right_square_bracket", "wider", "x-range +", id="cdf.wider"),
        Binding("left_square_bracket", "narrower", "x-range −", id="cdf.narrower"),
    ]

    def __init__(self) -> None:
        super().__init__()
        self.all_panels = False
        self.xmax = 2.0

    def compose_body(self) -> ComposeResult:
        yield Static("", id="cdf-title", classes="table-title")
        with Horizontal(id="cdf-plots"):
            for s in SETTINGS:
                yield PlotextPlot(id=f"cdf-{s}", classes="cdf-plot")

    def params(self) -> tuple:
        return (self.all_panels,)

    @staticmethod
    def fetch(model: CubeModel, sel: UISelection, params: tuple) -> xr.Dataset:
        return model.cdf(sel, SETTINGS if params[0] else (sel.setting,))

    def shown_settings(self) -> tuple[str, ...]:
        """The settings drawn: all three, or the current one."""
        assert self.selection is not None
        return SETTINGS if self.all_panels else (self.selection.setting,)

    def shown(self) -> xr.Dataset:
        """The CDF data on screen: shown settings, kappa within the x-range."""
        cdf = self.data
        assert cdf is not None
        k = cdf["kappa"].values
        keep = k <= self.xmax if math.isfinite(self.xmax) else np.ones(k.shape, bool)
        return cdf.sel(setting=list(self.shown_settings())).isel(kappa=np.flatnonzero(keep))

    def render_data(self, cdf: xr.Dataset) -> None:
        sel = self.selection
        assert sel is not None
        shown = self.shown()
        colors = algo_colors(tuple(str(a) for a in shown["algo"].values), sel.baseline)
        kappa = shown["kappa"].values.astype(float)
        for s in SETTINGS:
            widget = self.query_one(f"#cdf-{s}", PlotextPlot)
            widget.display = s in self.shown_settings()
            if not widget.display:
                continue
            plt = widget.plt
            plt.clear_figure()
            for a, c in colors.items():  # band edges first, so the curves are drawn over them
                p = shown.sel(algo=a, setting=s)
                plt.plot(kappa, _nan_none(p["ci_low"].values), color=c, marker="·")
                plt.plot(kappa, _nan_none(p["ci_high"].values), color=c, marker="·")
            for a, c in colors.items():
                plt.plot(kappa, _nan_none(shown["cdf"].sel(algo=a, setting=s).values), color=c, label=a,
                         marker="braille")
            plt.vline(0.0, "gray")
            plt.title(f"{SETTING_LABELS[s]}{_iter_text(sel) if s == 'train' else ''}")
            plt.xlabel("κ = (c − d)/d")
            plt.ylim(0, 1)
            if kappa.size:
                plt.xlim(float(kappa.min()), float(kappa.max()))
            widget.refresh()
        xr_txt = "full" if not math.isfinite(self.xmax) else f"≤ {self.xmax:g}"
        self.query_one("#cdf-title", Static).update(
            f"CDF of normalized cost deviation · lines: CDF, dots: 95% CI band edges · gray: κ=0 · x {xr_txt}"
            " ([ / ]) · p: all settings / one")

    def _redraw(self) -> None:
        if self.is_current():
            self.render_data(self.data)

    def action_toggle_panels(self) -> None:
        """Show all three settings side by side, or only the current one."""
        self.all_panels = not self.all_panels
        self.request_data()

    def action_wider(self) -> None:
        """Extend the x-range (0.5, 1, 2, 4, 8, full)."""
        i = XMAX_STEPS.index(self.xmax)
        self.xmax = XMAX_STEPS[min(i + 1, len(XMAX_STEPS) - 1)]
        self._redraw()

    def action_narrower(self) -> None:
        """Shrink the x-range."""
        i = XMAX_STEPS.index(self.xmax)
        self.xmax = XMAX_STEPS[max(i - 1, 0)]
        self._redraw()

    def export_tables(self) -> list[tuple[str, str]]:
        if self.data is None or self.selection is None:
            return []
        return [(f"saferl_cdf.{ext}", export_text("cdf", self.shown(), fmt, self.selection.baseline))
                for ext, fmt in (("csv", "csv"), ("tex", "latex"))]


# ======================================================================== condition cycling
class ConditionCycler:
    """Mixin: the (task, bound) condition a view shows, cycled with c / C."""

    cond_index: int = 0

    def conditions(self) -> list[tuple[str, float]]:
        sel: UISelection | None = self.selection  # type: ignore[attr-defined]
        if sel is None:
            return []
        return [(t, b) for t in sel.tasks for b in sel.bounds]

    def condition(self) -> tuple[str, float] | None:
        conds = self.conditions()
        return conds[self.cond_index % len(conds)] if conds else None

    def step_condition(self, step: int) -> None:
        n = len(self.conditions())
        if n:
            self.cond_index = (self.cond_index + step) % n
            self.condition_changed()

    def condition_changed(self) -> None:
        """New data is needed for the new condition (overridden where the data holds every condition)."""
        self.request_data()  # type: ignore[attr-defined]


# ======================================================================== Curves
class CurvesView(ConditionCycler, ResultView):
    """Reward, cost (bound drawn) and multiplier per iterate: seed mean ± std, moving average."""

    VIEW_ID = "curves"
    TITLE = "Curves"
    KEY = "4"
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("c", "next_condition", "Next condition", id="curves.next"),
        Binding("C", "prev_condition", "Prev condition", id="curves.prev"),
        Binding("plus,equals_sign", "window(1)", "Window +", id="curves.window_up"),
        Binding("minus", "window(-1)", "Window −", id="curves.window_down"),
    ]

    def __init__(self) -> None:
        super().__init__()
        self.window = 1

    def compose_body(self) -> ComposeResult:
        yield Static("", id="curves-title", classes="table-title")
        with Grid(id="curves-grid"):
            yield PlotextPlot(id="curves-reward")
            yield PlotextPlot(id="curves-cost")
            yield PlotextPlot(id="curves-mult")

    def params(self) -> tuple:
        return (self.window,)

    @staticmethod
    def fetch(model: CubeModel, sel: UISelection, params: tuple) -> tuple:
        return model.curves(sel, params[0])

    def shown(self) -> tuple[xr.Dataset, xr.Dataset | None, tuple[str, float]] | None:
        """(curves, multiplier) of the condition on screen."""
        cond = self.condition()
        if self.data is None or cond is None:
            return None
        curves, mult = self.data
        t, b = cond
        return curves.sel(task=t, bound=b), (mult.sel(task=t, bound=b) if mult is not None else None), cond

    def render_data(self, data: tuple) -> None:
        sel = self.selection
        assert sel is not None
        shown = self.shown()
        if shown is None:
            return
        cur, mult, (task, bound) = shown
        colors = algo_colors(tuple(str(a) for a in cur["algo"].values), sel.baseline)
        x = cur["iterate"].values.astype(float).tolist()
        for wid, var, title in (("curves-reward", "R", "Reward R̄"), ("curves-cost", "C", f"Cost C̄ (d={bound:g})")):
            plt = self.query_one(f"#{wid}", PlotextPlot).plt
            plt.clear_figure()
            for a, c in colors.items():
                _band(plt, x, cur[f"{var}_mean"].sel(algo=a).values, cur[f"{var}_std"].sel(algo=a).values, c, a)
            if var == "C":
                plt.hline(bound, "gray")
            plt.title(title)
            plt.xlabel("iterate")
            _int_ticks(plt, x)
            self.query_one(f"#{wid}", PlotextPlot).refresh()
        mplot = self.query_one("#curves-mult", PlotextPlot)
        plt = mplot.plt
        plt.clear_figure()
        if mult is not None:
            for a, c in colors.items():
                m = mult["mult_mean"].sel(algo=a).values
                if np.isfinite(m).any():
                    _band(plt, x, m, mult["mult_std"].sel(algo=a).values, c, a)
        plt.title("Multiplier (λ / κ / ν)" if mult is not None else "no multiplier in this cube")
        plt.xlabel("iterate")
        _int_ticks(plt, x)
        mplot.refresh()
        n = len(self.conditions())
        self.query_one("#curves-title", Static).update(
            f"{condition_label(task, bound)} ({self.cond_index % n + 1}/{n}, c / C) · train episodes · "
            f"seed mean ± std (dots) · moving average {self.window} iterate{'s' if self.window > 1 else ''} (+ / −)")

    def action_next_condition(self) -> None:
        """Show the next (task, bound) condition."""
        self.step_condition(1)

    def condition_changed(self) -> None:
        if self.is_current():
            self.render_data(self.data)

    def action_prev_condition(self) -> None:
        """Show the previous (task, bound) condition."""
        self.step_condition(-1)

    def action_window(self, step: int) -> None:
        """Grow or shrink the moving-average window along 1, 2, 3, 5, 10, 20, 50 iterates."""
        i = WINDOWS.index(self.window) if self.window in WINDOWS else 0
        new = WINDOWS[max(0, min(len(WINDOWS) - 1, i + step))]
        if new != self.window:
            self.window = new
            self.request_data()

    def export_tables(self) -> list[tuple[str, str]]:
        shown = self.shown()
        if shown is None:
            return []
        cur, mult, (task, bound) = shown
        header = ["algo", "task", "bound", "iterate", "window", "R_mean", "R_std", "C_mean", "C_std",
                  "mult_mean", "mult_std"]
        rows = []
        for a in cur["algo"].values:
            for j in cur["iterate"].values:
                p = cur.sel(algo=a, iterate=j)
                mm = mult.sel(algo=a, iterate=j) if mult is not None else None
                rows.append([str(a), task, bound, int(j), self.window, float(p["R_mean"]), float(p["R_std"]),
                             float(p["C_mean"]), float(p["C_std"]),
                             float(mm["mult_mean"]) if mm is not None else math.nan,
                             float(mm["mult_std"]) if mm is not None else math.nan])
        stem = f"saferl_curves_{task}_d{bound:g}"
        caption = f"Training curves, {condition_label(task, bound)}, moving average {self.window}"
        return [(f"{stem}.csv", cube_export.table_csv(header, rows)),
                (f"{stem}.tex", cube_export.table_latex(header, rows, caption))]


def _band(plt: Any, x: list[float], mean: np.ndarray, std: np.ndarray, color: str, label: str) -> None:
    """Plot a mean line (labelled) and mean ± std as dotted lines of the same colour."""
    plt.plot(x, _nan_none(mean - std), color=color, marker="·")
    plt.plot(x, _nan_none(mean + std), color=color, marker="·")
    plt.plot(x, _nan_none(mean), color=color, label=label, marker="braille")


def _int_ticks(plt: Any, x: list[float], n: int = 6) -> None:
    """Integer x ticks (iterates) spread over the axis."""
    if x:
        ticks = sorted({int(round(t)) for t in np.linspace(min(x), max(x), min(n, len(x)))})
        plt.xticks(ticks, [str(t) for t in ticks])


def _nan_none(a: np.ndarray) -> list[float]:
    """plotext cannot skip NaN: carry the nearest previous finite value (0 if none)."""
    out, last = [], None
    arr = np.asarray(a, float)
    first = arr[np.isfinite(arr)][0] if np.isfinite(arr).any() else 0.0
    for v in arr:
        if math.isfinite(v):
            last = float(v)
        out.append(last if last is not None else float(first))
    return out


# ======================================================================== Histograms
class HistogramsView(ConditionCycler, ResultView):
    """Final episodic cost distribution, expl vs greedy, per algorithm, for one condition; d marked."""

    VIEW_ID = "histograms"
    TITLE = "Histograms"
    KEY = "5"
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("c", "next_condition", "Next condition", id="histograms.next"),
        Binding("C", "prev_condition", "Prev condition", id="histograms.prev"),
        Binding("plus,equals_sign", "bins(5)", "Bins +", id="histograms.bins_up"),
        Binding("minus", "bins(-5)", "Bins −", id="histograms.bins_down"),
    ]

    def __init__(self) -> None:
        super().__init__()
        self.bins = 20
        self._plots: list[str] = []

    def compose_body(self) -> ComposeResult:
        yield Static("", id="hist-title", classes="table-title")
        yield Grid(id="hist-grid")

    def params(self) -> tuple:
        cond = self.condition()
        return (cond, self.bins)

    @staticmethod
    def fetch(model: CubeModel, sel: UISelection, params: tuple) -> Any:
        cond, bins = params
        if cond is None:
            return None
        return (cond, model.histograms(sel, cond[0], cond[1], bins))

    async def _ensure_plots(self, algos: list[str]) -> None:
        if self._plots == algos:
            return
        grid = self.query_one("#hist-grid", Grid)
        await grid.remove_children()
        await grid.mount_all([PlotextPlot(classes="hist-plot") for _ in algos])
        self._plots = list(algos)

    def watch_data(self, data: Any) -> None:
        if data is not None and self.selection is not None:
            self.set_status("")
            self.run_worker(self._render_async(data), exclusive=True, group="hist-render")

    async def _render_async(self, data: Any) -> None:
        _cond, (hists, _costs) = data
        await self._ensure_plots(list(hists))
        self.render_data(data)

    def render_data(self, data: Any) -> None:
        sel = self.selection
        assert sel is not None
        (task, bound), (hists, costs) = data
        for widget, a in zip(self.query(".hist-plot").results(PlotextPlot), hists, strict=False):
            edges, counts = hists[a]
            centers = 0.5 * (edges[:-1] + edges[1:])
            width = float(edges[1] - edges[0])
            plt = widget.plt
            plt.clear_figure()
            plt.bar((centers - width / 4).tolist(), counts["expl"].tolist(), color="blue", label="expl", width=0.4)
            plt.bar((centers + width / 4).tolist(), counts["greedy"].tolist(), color="orange", label="greedy",
                    width=0.4)
            plt.vline(bound, "red")
            ticks = np.linspace(edges[0], edges[-1], 5)
            plt.xticks(ticks.tolist(), [f"{t:.3g}" for t in ticks])
            plt.xlim(float(edges[0]), float(edges[-1]))
            n_e, n_g = costs[a]["expl"].size, costs[a]["greedy"].size
            plt.title(f"{a}  (expl n={n_e}, greedy n={n_g})")
            plt.xlabel("final episodic cost (red: d)")
            widget.refresh()
        n = len(self.conditions())
        self.query_one("#hist-title", Static).update(
            f"{condition_label(task, bound)} ({self.cond_index % n + 1}/{n}, c / C) · final policy episodic cost,"
            f" selected seeds pooled · blue expl, orange greedy · {self.bins} bins (+ / −) · red line: d")

    def action_next_condition(self) -> None:
        """Show the next (task, bound) condition."""
        self.step_condition(1)

    def action_prev_condition(self) -> None:
        """Show the previous (task, bound) condition."""
        self.step_condition(-1)

    def action_bins(self, step: int) -> None:
        """More or fewer histogram bins (5..100)."""
        new = max(5, min(100, self.bins + step))
        if new != self.bins:
            self.bins = new
            self.request_data()

    def export_tables(self) -> list[tuple[str, str]]:
        if self.data is None:
            return []
        (task, bound), (hists, _costs) = self.data
        header = ["algo", "bin_low", "bin_high", "expl", "greedy"]
        rows = [[a, float(edges[i]), float(edges[i + 1]), int(counts["expl"][i]), int(counts["greedy"][i])]
                for a, (edges, counts) in hists.items() for i in range(len(edges) - 1)]
        stem = f"saferl_hist_{task}_d{bound:g}"
        caption = f"Final episodic cost histogram, {condition_label(task, bound)} (counts)"
        return [(f"{stem}.csv", cube_export.table_csv(header, rows)),
                (f"{stem}.tex", cube_export.table_latex(header, rows, caption))]


# ======================================================================== Runs
class RunsView(ResultView):
    """The run manifest: status, env steps, iterates and config of every selected run."""

    VIEW_ID = "runs"
    TITLE = "Runs"
    KEY = "6"
    HEADER = ("algo", "task", "bound", "seed", "status", "steps", "iterates", "config")

    def compose_body(self) -> ComposeResult:
        yield Static("", id="runs-title", classes="table-title")
        yield DataTable(id="runs-table", zebra_stripes=True, cursor_type="row")

    @staticmethod
    def fetch(model: CubeModel, sel: UISelection, params: tuple) -> list[dict]:
        return model.runs(sel)

    def render_data(self, rows: list[dict]) -> None:
        table = self.query_one("#runs-table", DataTable)
        table.clear(columns=True)
        style = {"complete": "green", "partial": "yellow", "pending": "red"}
        all_cells = [[Text(r["algo"]), Text(r["task"]), Text(f"{r['bound']:g}"), Text(str(r["seed"])),
                      Text(r["status"], style=style.get(r["status"], "")),
                      Text(_steps(r["steps"]), justify="right"), Text(str(r["iterates"]), justify="right"),
                      Text(r["config"])] for r in rows]
        add_columns(table, [(h, h) for h in self.HEADER], all_cells)
        for i, cells in enumerate(all_cells):
            table.add_row(*cells, key=str(i))
        counts: dict[str, int] = {}
        for r in rows:
            counts[r["status"]] = counts.get(r["status"], 0) + 1
        self.query_one("#runs-title", Static).update(
            f"{len(rows)} runs · " + ", ".join(f"{k}: {v}" for k, v in sorted(counts.items())))

    def export_tables(self) -> list[tuple[str, str]]:
        if self.data is None:
            return []
        rows = [[r[h] for h in self.HEADER] for r in self.data]
        return [("saferl_runs.csv", cube_export.table_csv(self.HEADER, rows)),
                ("saferl_runs.tex", cube_export.table_latex(self.HEADER, rows, "Run manifest"))]


def _steps(v: float) -> str:
    if not math.isfinite(v):
        return "–"
    return f"{v / 1e6:.1f}M" if v >= 1e6 else f"{v:,.0f}"


VIEW_CLASSES: tuple[type[ResultView], ...] = (SummaryView, ConditionsView, CdfView, CurvesView, HistogramsView,
                                              RunsView)
