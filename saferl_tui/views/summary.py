"""The Summary view (key 1): paper Table 2 for all three settings (train, final expl, final greedy) side by
side with the tier per setting (4→3 where a tier rests on V = 0 observed: the tier at V's honest upper bound,
its claim under the table), the greedy-minus-expl gap with its CI, the differences to the baseline, the CIs
of the current setting (t), and a footer line: the seeds per condition a CI half-width of 0.05 needs.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import xarray as xr
from rich.text import Text
from textual.app import ComposeResult
from textual.containers import VerticalScroll
from textual.widgets import Static

from cube.errors import CubeError
from cube.render.claims import ARROW, claim_notes
from cube.render.text import NOT_AVAILABLE
from cube.stats.metrics import METRIC, METRICS, SETTING, SETTINGS, best_label, directions
from cube.stats.reasons import FEW_SEEDS
from saferl_tui.exports import Files, rendered_files
from saferl_tui.model import CubeModel
from saferl_tui.selection import UISelection
from saferl_tui.views.base import ResultView
from saferl_tui.views.format import (
    fmt,
    fmt_signed,
    fmt_tier,
    incomplete_note,
    iter_text,
    rich_color,
    setting_title,
    tier_name,
)
from saferl_tui.views.table import NavTable, add_columns

BEST = "bold underline"
NOT_SAFE_MARK = "†"


class SummaryView(ResultView):
    """Table 2 for the three settings (IQM, tiers), the greedy-expl gap, Δ to the baseline, and CIs."""

    VIEW_ID = "summary"
    TITLE = "Summary"
    KEY = "1"
    FOOTER = True
    NARROW = 110
    """Below this width: the gap and CIs on several lines."""
    WIDE_GAP = 150
    _shown_base: str | None = None
    """The baseline the Δ table shows (a new one scrolls the table into view)."""
    """From this width the gap's CIs sit beside its values; below, under them (no number is cut)."""

    def compose_body(self) -> ComposeResult:
        with VerticalScroll(classes="view-body"):
            yield Static("", id="summary-title", classes="table-title")
            yield NavTable(id="summary-table", zebra_stripes=True, cursor_type="row")
            yield Static("", id="summary-claims", classes="table-title")
            yield Static("", id="summary-gap-title", classes="table-title section-title")
            yield NavTable(id="summary-gap", zebra_stripes=True, cursor_type="row")
            yield Static("", id="summary-delta-title", classes="table-title section-title")
            yield NavTable(id="summary-delta", zebra_stripes=True, cursor_type="row")
            yield Static("", id="summary-ref-title", classes="table-title section-title")
            yield NavTable(id="summary-ref", zebra_stripes=True, cursor_type="row")
            yield Static("", id="summary-ci-title", classes="table-title section-title")
            yield NavTable(id="summary-ci", zebra_stripes=True, cursor_type="row")
        yield Static("", id="summary-plan", classes="view-footer")

    @staticmethod
    def fetch(model: CubeModel, sel: UISelection, params: tuple) -> tuple[xr.Dataset, Any, Any, Any]:
        agg = model.aggregate_honest(sel, SETTINGS)
        try:
            gap: Any = model.gap(sel)
        except CubeError as exc:  # e.g. no final evaluations: the rest of the Summary still shows
            gap = str(exc)
        ref: Any = None
        if sel.reference:
            try:
                ref = model.reference_aggregate(sel)
            except CubeError as exc:  # the reference has none of these labels: say so in its section
                ref = str(exc)
        poi: Any = None
        if sel.baseline in sel.algos:
            try:
                poi = model.improvement(sel, sel.baseline)
            except CubeError as exc:  # e.g. the baseline alone is selected: the Δ table says so
                poi = str(exc)
        return agg, gap, ref, poi

    @staticmethod
    def fetch_footer(model: CubeModel, sel: UISelection, params: tuple) -> str:
        return model.plan_line(sel, sel.setting)

    def show_footer(self, text: str, error: bool = False) -> None:
        footer = self.query_one("#summary-plan", Static)
        if not text:
            footer.update(Text("seeds per condition for a CI half-width of 0.05: computing …", style="italic"))
        elif error:
            footer.update(Text(f"seeds per condition: not available ({text})", style="italic"))
        else:
            footer.update(Text(text))

    def algo_cell(self, a: str, sel: UISelection, first: bool = True) -> Text:
        """The algorithm's name in its colour, † when it is not safe RL ('' on follow-up rows)."""
        if not first:
            return Text("")
        color = self.colors_of(sel.algos).get(a)
        text = Text(a, style=f"bold {rich_color(color)}" if color else "bold")
        if a in sel.not_safe:
            text.append(NOT_SAFE_MARK, style="bold")
        return text

    def render_data(self, data: tuple[xr.Dataset, Any, Any, Any]) -> None:
        sel = self.selection
        assert sel is not None
        agg, gap, ref, poi = data
        cube = _AggArrays(agg)
        narrow = self.layout_narrow()
        exclude = [a for a in cube.algos if a in sel.not_safe]
        best = {(m, s): best_label({a: cube.get("value", a, s, m) for a in cube.algos}, m, exclude)
                for m in METRICS for s in SETTINGS}
        base = sel.baseline if sel.baseline in cube.algos else None
        table = self.query_one("#summary-table", NavTable)
        cursor = table.cursor_row
        table.clear(columns=True)
        columns: list[tuple[str | Text, str]] = [("Algorithm", "algo"), ("Setting", "setting")]
        # narrow: bare labels (the title says IQM), so the tier still fits 80 columns beside CVaR
        columns += [(Text(METRIC[m].label if narrow else f"IQM {METRIC[m].label}", justify="right"), m)
                    for m in METRICS]
        columns.append(("Tier", "tier"))
        rows: list[tuple[str, list[Text]]] = []
        for a in cube.algos:
            for i, s in enumerate(SETTINGS):
                cells = [self.algo_cell(a, sel, i == 0), Text(SETTING[s].short, style="bold" if s == sel.setting
                                                              else "")]
                cells += [Text(NOT_AVAILABLE if cube.na(a, s, m) else fmt(cube.get("value", a, s, m)),
                               style=BEST if best[(m, s)] == a else "", justify="right") for m in METRICS]
                t = cube.tier(a, s)
                at_bound = f"{ARROW}{int(cube.at_bound(a, s))}" if cube.rests_on_zero(a, s) else ""
                cells.append(Text(NOT_AVAILABLE if cube.na(a, s) else fmt_tier(t) + at_bound if narrow else
                                  f"{fmt_tier(t)}{at_bound} {tier_name(t)}".strip()))
                rows.append((f"{a}:{s}", cells))
        add_columns(table, columns, [c for _, c in rows])
        for key, cells in rows:
            table.add_row(*cells, key=key)
        if table.row_count:
            table.move_cursor(row=min(cursor, table.row_count - 1))
        n_cond = len(sel.tasks) * len(sel.bounds)
        ns = ", ".join(exclude) or "none"
        pairs = "1 task-bound pair" if n_cond == 1 else f"{n_cond} task-bound pairs"
        title = Text(f"IQM over {pairs} · bold underlined: best of safe RL "
                     f"({NOT_SAFE_MARK} not safe: {ns}) · {directions()}" + (f" · train{iter_text(sel)}"
                                                                            if sel.iterates is not None else ""))
        title.append_text(incomplete_note(self.incomplete))
        if cube.not_available:
            title.append(f" · {NOT_AVAILABLE} = {cube.not_available}", style="italic")
        if cube.least_seeds is not None:
            title.append(f" · few seeds: {cube.least_seeds} in a condition (< {FEW_SEEDS}: wide intervals)",
                         style="italic")
        self.query_one("#summary-title", Static).update(title)
        claims = self.query_one("#summary-claims", Static)
        notes = claim_notes(agg)
        claims.update(Text("\n".join(notes)))
        claims.display = bool(notes)
        self._render_gap(gap, cube.algos, narrow or self.size.width < self.WIDE_GAP)
        self._render_delta(cube, base, poi, narrow)
        self._render_reference(ref, cube.algos, narrow)
        self._render_ci(cube, narrow)

    @staticmethod
    def _delta(cube: _AggArrays, a: str, base: str, s: str, m: str, poi: Any, narrow: bool) -> Text:
        """The IQM difference to the baseline (green: better), under it P(a improves on base) over seeds:
        bold where its 95% CI excludes 0.5; its CI on a third line unless ``narrow``."""
        d = cube.get("value", a, s, m) - cube.get("value", base, s, m)
        better = METRIC[m].better(np.float64(d), np.float64(0.0)) if np.isfinite(d) else False
        text = Text(fmt_signed(d), style="green" if better else ("red" if np.isfinite(d) and d != 0 else ""),
                    justify="right")
        if isinstance(poi, xr.Dataset) and a in poi["algo"].values:
            p = poi.sel(algo=a, setting=s, metric=m)
            v, lo, hi = float(p["value"]), float(p["ci_low"]), float(p["ci_high"])
            sig = np.isfinite(lo) and np.isfinite(hi) and (lo > 0.5 or hi < 0.5)
            text.append(f"\nP {fmt(v)}", style="bold" if sig else "dim")
            if not narrow:
                text.append(f"\n[{fmt(lo)}, {fmt(hi)}]", style="bold" if sig else "dim")
        return text

    def _render_gap(self, gap: Any, algos: list[str], narrow: bool) -> None:
        sel = self.selection
        assert sel is not None
        table = self.query_one("#summary-gap", NavTable)
        table.clear(columns=True)
        title = self.query_one("#summary-gap-title", Static)
        if isinstance(gap, str):
            title.update(Text(f"Final greedy − final expl gap: not available ({gap})", style="italic"))
            table.display = False
            return
        table.display = True
        g = gap.transpose("algo", "metric")
        rows = []
        for a in algos:
            cells = [self.algo_cell(a, sel)]
            for m in METRICS:
                p = g.sel(algo=a, metric=m)
                v, lo, hi = float(p["value"]), float(p["ci_low"]), float(p["ci_high"])
                sig = np.isfinite(lo) and np.isfinite(hi) and (lo > 0 or hi < 0)
                sep = "\n" if narrow else " "
                cells.append(Text(f"{fmt_signed(v)}{sep}[{fmt_signed(lo)}, {fmt_signed(hi)}]",
                                  style="bold" if sig else "", justify="right"))
            rows.append((a, cells))
        columns = [("Algorithm", "algo"), *[(f"Δ {METRIC[m].label}", m) for m in METRICS]]
        add_columns(table, columns, [c for _, c in rows])
        for a, cells in rows:
            table.add_row(*cells, key=a, height=2 if narrow else 1)
        title.update(Text("Greedy − expl gap of the final policy (paired per run): IQM [95% CI]; bold: CI excludes 0"))

    def _render_delta(self, cube: _AggArrays, base: str | None, poi: Any, narrow: bool) -> None:
        """The Δ-to-baseline table (b): per algorithm and setting the IQM difference to the baseline and the
        probability of improvement on it with its CI; brought into view when the baseline changes."""
        sel = self.selection
        assert sel is not None
        table = self.query_one("#summary-delta", NavTable)
        title = self.query_one("#summary-delta-title", Static)
        table.clear(columns=True)
        table.display = title.display = base is not None
        changed, self._shown_base = base != self._shown_base, base
        if base is None:
            return
        rows = []
        for a in cube.algos:
            if a == base:
                continue
            for i, s in enumerate(SETTINGS):
                cells = [self.algo_cell(a, sel, i == 0), Text(SETTING[s].short)]
                cells += [self._delta(cube, a, base, s, m, poi, narrow) for m in METRICS]
                rows.append((f"{a}:{s}", cells))
        columns = [("Algorithm", "algo"), ("Setting", "setting"),
                   *[(Text(f"Δ{METRIC[m].label}", justify="right"), m) for m in METRICS]]
        add_columns(table, columns, [c for _, c in rows])
        height = 1 if not isinstance(poi, xr.Dataset) else (2 if narrow else 3)
        for key, cells in rows:
            table.add_row(*cells, key=key, height=height)
        text = Text(f"Δ to baseline {base} (b changes it): IQM difference (green: better); under it P = "
                    f"P(algorithm improves on {base}) over seeds" + ("" if narrow else " [95% CI]") +
                    ", bold: its 95% CI excludes 0.5")
        if isinstance(poi, str):
            text = Text(f"Δ to baseline {base} (b changes it): IQM difference (green: better); "
                        f"probability of improvement not available ({poi})")
        title.update(text)
        if changed:  # b pressed: show the table it filled (below the fold at 80x24)
            self.call_after_refresh(title.scroll_visible, top=True, animate=False)

    def _render_reference(self, ref: Any, algos: list[str], narrow: bool) -> None:
        """Our IQM beside the reference's (R toggles): per metric ours, then theirs; ✓ / ✗ whether ours lies
        inside the reference's CI."""
        sel = self.selection
        assert sel is not None
        table = self.query_one("#summary-ref", NavTable)
        title = self.query_one("#summary-ref-title", Static)
        table.clear(columns=True)
        table.display = title.display = ref is not None
        if ref is None:
            return
        if isinstance(ref, str):
            title.update(Text(f"Beside the paper: not available ({ref})", style="italic"))
            table.display = False
            return
        name = str(ref.attrs.get("reference", "reference"))
        metrics = [m for m in METRICS if m in ref["metric"].values]  # the reference's (the paper has no CVaR)
        rows = []
        for a in (x for x in algos if x in ref["algo"].values):
            for i, s in enumerate(x for x in SETTINGS if x in ref["setting"].values):
                cells = [self.algo_cell(a, sel, i == 0), Text(SETTING[s].short)]
                for m in metrics:
                    p = ref.sel(algo=a, setting=s, metric=m)
                    inside = float(p["inside_ref_ci"])
                    mark = "" if not np.isfinite(inside) else ("✓" if inside else "✗")
                    text = Text(fmt(float(p["value"])))
                    text.append(f" {mark}" if mark else "", style="green" if mark == "✓" else "red")
                    text.append(("\n" if narrow else " ") + fmt(float(p["ref_value"])), style="dim")
                    text.justify = "right"
                    cells.append(text)
                tier = Text(fmt_tier(float(ref["tier"].sel(algo=a, setting=s))))
                tier.append(("\n" if narrow else "/") + fmt_tier(float(ref["ref_tier"].sel(algo=a, setting=s))),
                            style="dim")
                cells.append(tier)
                rows.append((f"{a}:{s}", cells))
        columns = [("Algorithm", "algo"), ("Setting", "setting"),
                   *[(Text(f"{METRIC[m].label} ours {name}", justify="right"), m) for m in metrics],
                   ("Tier", "tier")]
        add_columns(table, columns, [c for _, c in rows])
        for key, cells in rows:
            table.add_row(*cells, key=key, height=2 if narrow else 1)
        title.update(Text(f"Beside the {name} (R hides): our IQM, then the {name}'s (dim); ✓/✗: ours inside / "
                          f"outside the {name}'s 95% CI · matching algorithms, tasks and bounds only"))

    def _render_ci(self, cube: _AggArrays, narrow: bool) -> None:
        sel = self.selection
        assert sel is not None
        s = sel.setting
        table = self.query_one("#summary-ci", NavTable)
        table.clear(columns=True)
        rows = []
        for a in cube.algos:
            cells = [self.algo_cell(a, sel)]
            for m in METRICS:
                v, lo, hi = (fmt(cube.get(k, a, s, m)) for k in ("value", "ci_low", "ci_high"))
                text = f"{v}\n{lo}\n{hi}" if narrow else f"{v}\n[{lo}, {hi}]"
                cells.append(Text(NOT_AVAILABLE if cube.na(a, s, m) else text, justify="right"))
            t = cube.tier(a, s)
            at_bound = f"{ARROW}{int(cube.at_bound(a, s))}" if cube.rests_on_zero(a, s) else ""
            cells.append(Text(NOT_AVAILABLE if cube.na(a, s) else f"{fmt_tier(t)}{at_bound}\n{tier_name(t)}"))
            rows.append((a, cells))
        columns = [("Algorithm", "algo"), *[(f"IQM {METRIC[m].label}", m) for m in METRICS], ("Tier", "tier")]
        add_columns(table, columns, [c for _, c in rows])
        for a, cells in rows:
            table.add_row(*cells, key=a, height=3 if narrow else 2)
        layout = " (rows: IQM, CI low, CI high)" if narrow else ""
        self.query_one("#summary-ci-title", Static).update(
            Text(f"{setting_title(sel, s)} (t changes): IQM with 95% stratified-bootstrap CI{layout}"))

    def export_tables(self) -> Files:
        if self.data is None or self.selection is None:
            return []
        agg, gap, _reference, _poi = self.data
        files = rendered_files("summary", "aggregate", agg, self.selection.not_safe)
        if not isinstance(gap, str):
            files += rendered_files("summary_gap", "gap", gap, self.selection.not_safe)
        return files


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
        self._means_only = (np.asarray(agg["means_only"].transpose("algo", "setting").values, dtype=bool)
                            if "means_only" in agg else None)
        self.not_available = str(agg.attrs.get("not_available", ""))
        honest = "rests_on_zero" in agg
        self._rests = (np.asarray(agg["rests_on_zero"].transpose("algo", "setting").values, dtype=bool)
                       if honest else np.zeros(self._t.shape, dtype=bool))
        self._at_bound = (np.asarray(agg["tier_at_bound"].transpose("algo", "setting").values, dtype=np.float64)
                          if honest else np.full(self._t.shape, -1.0))
        few = honest and bool(agg["few_seeds"].any())
        self.least_seeds = int(agg["min_seeds"].where(agg["few_seeds"]).min()) if few else None
        """The fewest seeds of a condition where some (algo, setting) has fewer than FEW_SEEDS; else None."""

    def na(self, algo: str, setting: str, metric: str | None = None) -> bool:
        """Whether the metric (None: the tier) needs every episode but the runs hold only window means."""
        if self._means_only is None or (metric is not None and not METRIC[metric].needs_episodes):
            return False
        return bool(self._means_only[self._a[algo], self._s[setting]])

    def get(self, var: str, algo: str, setting: str, metric: str) -> float:
        return float(self._v[var][self._a[algo], self._s[setting], self._m[metric]])

    def tier(self, algo: str, setting: str) -> float:
        return float(self._t[self._a[algo], self._s[setting]])

    def rests_on_zero(self, algo: str, setting: str) -> bool:
        """Whether the tier rests on V = 0 observed (and V has an honest bound to give the tier there)."""
        i = (self._a[algo], self._s[setting])
        return bool(self._rests[i]) and self._t[i] >= 0 and self._at_bound[i] >= 0

    def at_bound(self, algo: str, setting: str) -> float:
        """The tier at V's honest upper bound (-1: none)."""
        return float(self._at_bound[self._a[algo], self._s[setting]])
