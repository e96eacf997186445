"""The Conditions view (key 2): seed mean ± std per (algorithm, task, bound) with per-condition tiers
(paper tables 4-7; 4→b where the tier rests on V = 0 observed: b the tier at V's honest upper bound),
seeds marked ‡ below 5, sortable by any column, filterable (/), Enter opens a condition's curves.
"""

from __future__ import annotations

import math
from typing import ClassVar

import xarray as xr
from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.widgets import DataTable, Static

from cube.errors import CubeError
from cube.render.claims import ARROW, FEW_MARK
from cube.render.compare import Z_HIGHLIGHT
from cube.render.text import NOT_AVAILABLE
from cube.render.viewrows import row_matches
from cube.stats.metrics import METRIC, METRICS
from cube.stats.reasons import FEW_SEEDS
from saferl_tui.exports import Files, rendered_files
from saferl_tui.messages import ConditionChosen
from saferl_tui.model import CubeModel
from saferl_tui.selection import UISelection
from saferl_tui.views.base import ResultView
from saferl_tui.views.format import fmt, fmt_signed, fmt_tier, incomplete_note, rich_color, setting_title
from saferl_tui.views.table import SORT_BINDINGS, NavTable, SortableTable, add_columns


class ConditionsView(SortableTable, ResultView):
    """Seed mean ± std per (algorithm, task, bound) with per-condition tiers (paper tables 4-7)."""

    VIEW_ID = "conditions"
    TITLE = "Conditions"
    KEY = "2"
    FILTERABLE = True
    SORT_KEYS = ("algo", "task", "bound", *METRICS, "n_seeds", "tier")
    HEADS: ClassVar[dict[str, str]] = {"algo": "Algorithm", "task": "Task", "bound": "d", "n_seeds": "Seeds",
                                       "tier": "Tier"}
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("enter", "drill", "Curves of the row", id="conditions.drill"),
        *SORT_BINDINGS,
    ]
    NARROW = 112
    """Below this width (columns): mean and ± std on two lines, no seeds column (counts in the title)."""

    def __init__(self) -> None:
        super().__init__()
        self.sort_key = "algo"
        self.sort_desc = False
        self._shown_rows: list[dict] = []

    def compose_body(self) -> ComposeResult:
        yield Static("", id="conditions-title", classes="table-title")
        yield NavTable(id="conditions-table", zebra_stripes=True, cursor_type="row", header_height=2)

    @staticmethod
    def fetch(model: CubeModel, sel: UISelection, params: tuple) -> xr.Dataset:
        ct = model.conditions_honest(sel, sel.setting)
        if not sel.reference:
            return ct
        try:  # the reference's mean, std and z beside ours, as variables of the table
            cmp = model.reference_conditions(sel, sel.setting)
        except CubeError as exc:
            return ct.assign_attrs(reference_error=str(exc))
        cmp = cmp.drop_vars([c for c in cmp.coords if c not in cmp.dims])
        like = ct["R_mean"]
        extra = {f"{k}_{m}": cmp[k].sel(metric=m, drop=True).reindex_like(like) for k in ("ref_mean", "ref_std", "z")
                 for m in cmp["metric"].values}
        return ct.assign(extra).assign_attrs(reference=sel.reference)

    def describe_params(self) -> dict:
        return {"sort": self.sort_key, "descending": self.sort_desc, "filter": self.filter_text}

    def rows(self) -> list[dict]:
        """Rows of the current setting as plain values, in the current sort order (before the filter)."""
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
                           "n_seeds": int(p["n_seeds"]), "tier": float(p["tier"]),
                           "incomplete": self.incomplete.get((str(a), str(t), float(b)), 0),
                           "means_only": bool(p["means_only"]) if "means_only" in p else False,
                           "rests": bool(p["rests_on_zero"]) if "rests_on_zero" in p else False,
                           "at_bound": float(p["tier_at_bound"]) if "tier_at_bound" in p else -1.0,
                           "few": bool(p["few_seeds"]) if "few_seeds" in p else False}
                    for m in METRICS:
                        row[m] = float(p[f"{m}_mean"])
                        row[f"{m}_std"] = float(p[f"{m}_std"])
                        for k in ("ref_mean", "ref_std", "z"):
                            row[f"{m}_{k}"] = float(p[f"{k}_{m}"]) if f"{k}_{m}" in p else math.nan
                    rows.append(row)

        def key(r: dict) -> tuple:
            v = r[self.sort_key]
            if isinstance(v, float) and not math.isfinite(v):
                return (1, 0.0)
            return (0, v)

        rows.sort(key=key, reverse=self.sort_desc)
        return rows

    def render_data(self, ct: xr.Dataset) -> None:
        sel = self.selection
        assert sel is not None
        narrow = self.layout_narrow()
        table = self.query_one("#conditions-table", DataTable)
        cursor = table.cursor_row
        table.clear(columns=True)
        table.header_height = 1 if narrow else 2
        keys = [k for k in self.SORT_KEYS if not (narrow and k == "n_seeds")]
        labels = []
        for k in keys:
            head = "Algo" if narrow and k == "algo" else self.HEADS.get(k)  # narrow: room for CVaR and ◐ at 80
            label = head or (METRIC[k].label if narrow else f"{METRIC[k].label}\nmean ± std")
            labels.append(label + ((" ▼" if self.sort_desc else " ▲") if k == self.sort_key else ""))
        all_rows = self.rows()
        any_incomplete = any(r["incomplete"] for r in all_rows)
        if any_incomplete:
            keys.append("incomplete")
            labels.append("◐")
        colors = self.colors_of(sel.algos)
        sep = "\n±" if narrow else " ± "
        with_ref = "reference" in ct.attrs
        shown, all_cells = [], []
        for r in all_rows:
            cells = [Text(r["algo"], style=f"bold {rich_color(colors[r['algo']])}"), Text(r["task"]),
                     Text(f"{r['bound']:g}")]
            cells += [self._cell(r, m, sep, with_ref) for m in METRICS]
            if not narrow:
                cells.append(Text(str(r["n_seeds"]) + (FEW_MARK if r["few"] else ""), justify="right"))
            cells.append(Text(NOT_AVAILABLE if r["means_only"] else fmt_tier(r["tier"]) + self._at_bound(r),
                              justify="right"))
            if any_incomplete:
                k = r["incomplete"]
                cells.append(Text(f"◐{k}" if k else "", style="bold dark_orange"))
            plain = {"algo": r["algo"], "task": r["task"], "bound": f"{r['bound']:g}", "d": f"{r['bound']:g}",
                     "tier": fmt_tier(r["tier"]), "status": "incomplete" if r["incomplete"] else "complete"}
            if self.filter_text and not row_matches(plain, self.filter_text):
                continue
            shown.append(r)
            all_cells.append(cells)
        self._shown_rows = shown
        add_columns(table, list(zip(labels, keys, strict=True)), all_cells)
        for i, cells in enumerate(all_cells):
            table.add_row(*cells, key=str(i), height=(3 if narrow else 2) if with_ref else (2 if narrow else 1))
        if table.row_count:
            table.move_cursor(row=min(cursor, table.row_count - 1))
        seeds = sorted({r["n_seeds"] for r in all_rows})
        n_seeds = f" · seeds per condition: {seeds[0]}" + (f"–{seeds[-1]}" if len(seeds) > 1 else "") if seeds else ""
        title = Text(f"{setting_title(sel, sel.setting)}: seed mean ± std per condition{n_seeds if narrow else ''}"
                     f" · sorted by {self.sort_key} {'desc' if self.sort_desc else 'asc'} (> next, r reverse)"
                     f" · enter: curves{self.filter_suffix(len(shown), len(all_rows))}")
        title.append_text(incomplete_note(self.incomplete))
        if with_ref:
            name = ct.attrs["reference"]
            title.append(f" · second line: the {name}'s seed mean, z = (ours − {name}) / {name}'s seed std "
                         f"(|z| > {Z_HIGHLIGHT:g} red; R hides)", style="dim")
        if "not_available" in ct.attrs and any(r["means_only"] for r in all_rows):
            title.append(f" · {NOT_AVAILABLE} = {ct.attrs['not_available']}", style="italic")
        if any(self._at_bound(r) for r in all_rows):
            title.append(f" · 4{ARROW}b: tier 4 rests on V = 0 observed, b at V's honest 95% bound (e: claims in "
                         "the CSV)", style="italic")
        if any(r["few"] for r in all_rows):
            title.append(f" · {FEW_MARK if not narrow else ''}fewer than {FEW_SEEDS} seeds: wide intervals",
                         style="italic")
        if "reference_error" in ct.attrs:
            title.append(f" · beside the paper: not available ({ct.attrs['reference_error']})", style="italic")
        self.query_one("#conditions-title", Static).update(title)

    @staticmethod
    def _at_bound(r: dict) -> str:
        """'→3' where the row's tier rests on V = 0 observed (the tier at V's honest upper bound), else ''."""
        return f"{ARROW}{int(r['at_bound'])}" if r["rests"] and r["tier"] >= 0 and r["at_bound"] >= 0 else ""

    @staticmethod
    def _cell(r: dict, m: str, sep: str, with_ref: bool) -> Text:
        """Our seed mean ± std of metric `m`; with the reference, its mean and z on the next line."""
        if r["means_only"] and METRIC[m].needs_episodes:
            return Text(NOT_AVAILABLE, justify="right")
        text = Text(f"{fmt(r[m])}{sep}{fmt(r[m + '_std'])}", justify="right")
        if with_ref:
            z = r[f"{m}_z"]
            zs = f" z{fmt_signed(z, 1)}" if math.isfinite(z) else ""  # no z where the paper's std is 0
            text.append(f"\n{fmt(r[f'{m}_ref_mean'])}{zs}",
                        style="bold red" if math.isfinite(z) and abs(z) > Z_HIGHLIGHT else "dim")
        return text

    def action_drill(self) -> None:
        """Open the highlighted condition's curves and histograms."""
        table = self.query_one("#conditions-table", DataTable)
        if self._shown_rows and 0 <= table.cursor_row < len(self._shown_rows):
            r = self._shown_rows[table.cursor_row]
            self.post_message(ConditionChosen(r["task"], r["bound"]))

    def on_data_table_row_selected(self, event: DataTable.RowSelected) -> None:
        event.stop()
        self.action_drill()

    def figure_settings(self) -> tuple[str, ...] | None:
        return (self.selection.setting,) if self.selection is not None else None

    def export_tables(self) -> Files:
        if self.data is None or self.selection is None:
            return []
        s = self.selection.setting
        return rendered_files("conditions", "conditions", self.data.sel(setting=[s]), self.selection.not_safe)
