"""The Summary view (key 1): paper Table 2 (IQM, train and final side by side, tiers) and the CIs of the
current setting."""

from __future__ import annotations

import numpy as np
import xarray as xr
from rich.text import Text
from textual.app import ComposeResult
from textual.containers import VerticalScroll
from textual.widgets import DataTable, Static

from cube.metrics import METRIC, METRICS, SETTING, best_label
from saferl_tui.model import CubeModel, UISelection
from saferl_tui.views.base import (
    Files,
    ResultView,
    add_columns,
    fmt,
    fmt_tier,
    iter_text,
    rendered_files,
    setting_title,
    tier_name,
)

HIGHER_TEXT = ", ".join(METRIC[m].label for m in METRICS if METRIC[m].higher_is_better)


class SummaryView(ResultView):
    """Paper Table 2 (IQM, train and final side by side, tiers) and the CIs of the current setting."""

    VIEW_ID = "summary"
    TITLE = "Summary"
    KEY = "1"
    NARROW = 110
    """Below this width (columns) the tables switch to a long layout: one row per algorithm and setting."""

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

    def render_data(self, agg: xr.Dataset) -> None:
        sel = self.selection
        assert sel is not None
        pair = self._pair()
        cube = _AggArrays(agg)
        exclude = [sel.baseline] if sel.baseline else []
        best = {(m, s): best_label({a: cube.get("value", a, s, m) for a in cube.algos}, m, exclude)
                for m in METRICS for s in pair}
        narrow = self.layout_narrow()
        table = self.query_one("#summary-table", DataTable)
        table.clear(columns=True)
        table.header_height = 1 if narrow else 2
        columns: list[tuple[str | Text, str]] = [("Algorithm", "algo")]
        if narrow:
            columns.append(("Setting", "setting"))
            columns += [(Text(f"IQM {METRIC[m].label}", justify="right"), m) for m in METRICS]
            columns.append(("Tier", "tier"))
        else:
            columns += [(Text(f"{METRIC[m].label}\n{SETTING[s].short}", justify="right"), f"{m}:{s}")
                        for m in METRICS for s in pair]
            columns += [(Text(f"Tier\n{SETTING[s].short}", justify="right"), f"tier:{s}") for s in pair]

        def cell(a: str, m: str, s: str) -> Text:
            style = "dim" if a == sel.baseline else ("bold" if best[(m, s)] == a else "")
            return Text(fmt(cube.get("value", a, s, m)), style=style, justify="right")

        rows: list[tuple[str, list[Text]]] = []
        for a in cube.algos:
            dim = "dim" if a == sel.baseline else ""
            if narrow:
                for i, s in enumerate(pair):
                    cells = [Text(a if i == 0 else "", style=dim or "bold"), Text(SETTING[s].short, style=dim)]
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
        self.query_one("#summary-title", Static).update(
            f"IQM over {len(sel.tasks) * len(sel.bounds)} task-bound pairs · Train{iter_text(sel)} | "
            f"{SETTING[pair[1]].label} · bold = best excl. baseline ({sel.baseline or 'none'}), lower is better "
            f"except {HIGHER_TEXT}")
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
            cells.append(Text(f"{fmt_tier(t)}\n{tier_name(t)}", style=dim))
            rows.append((a, cells))
        columns = [("Algorithm", "algo"), *[(f"IQM {METRIC[m].label}", m) for m in METRICS], ("Tier", "tier")]
        add_columns(table, columns, [c for _, c in rows])
        for a, cells in rows:
            table.add_row(*cells, key=a, height=3 if narrow else 2)
        layout = " (rows: IQM, CI low, CI high)" if narrow else ""
        self.query_one("#summary-ci-title", Static).update(
            f"{setting_title(sel, s)}: IQM with 95% stratified-bootstrap CI{layout}")

    def export_tables(self) -> Files:
        if self.data is None or self.selection is None:
            return []
        sub = self.data.sel(setting=list(dict.fromkeys([*self._pair(), self.selection.setting])))
        return rendered_files("saferl_summary", "aggregate", sub, self.selection.baseline)


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
