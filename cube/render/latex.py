"""The statistics tables as LaTeX.

Two layouts of the aggregate table (`cube.stats.aggregate_table`):

* ``style="default"``: one row per algorithm and setting, one column per metric, the CI under each value
  in script size; a ``table*`` that fits ``\\textwidth`` of a two-column paper (469 pt) at ``\\footnotesize``
  without shrinking.
* ``style="paper"``: the paper's Table 2 exactly (13 columns: each metric Train | Final, tier Train |
  Final, ``\\cmidrule`` under each metric, display names, the not-safe baseline grey, bold = best
  excluding it, ``\\resizebox{\\textwidth}``) in a ``table*`` (both columns of a two-column paper, so it
  never runs into the other column), followed by the appendix table with the CIs as subscripts (a
  ``sidewaystable*``, a page of its own). Only the paper's metrics (`cube.stats.metrics.PAPER_METRICS`):
  no CVaR.

A table with a CVaR column says in its caption which alpha it is (`cube.render.style.table_cvar_note`);
a table of a synthetic cube says so at the start of every caption (`mark_synthetic`), on the page, not
only in a comment.

The not-safe rule is the one of every output (`cube.stats.metrics.not_safe`): such algorithms are grey and
never bold. The preamble comment lists the packages each needs.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence

import xarray as xr

from cube.errors import CubeError
from cube.render.choices import LATEX_STYLES
from cube.render.claims import FEW_MARK, claims, conditions_claim_note, few_note, few_seeds, tier_cell
from cube.render.style import algo_label, table_cvar_note
from cube.stats.metrics import METRIC, SETTING, best_label

STYLES = LATEX_STYLES
PACKAGES = {"default": "booktabs,multirow,xcolor,amsmath",
            "paper": "booktabs,multirow,xcolor,amsmath,bm,graphicx,rotating"}
PAPER_SETTINGS = ("train", "final_greedy")
"""The two settings of the paper's Table 2: Train (all training iterates) and Final (the greedy policy)."""


def preamble(style: str = "default") -> str:
    return f"% needs \\usepackage{{{PACKAGES[style]}}}\n"


def escape(text: str) -> str:
    """Escape LaTeX special characters in plain text."""
    table = {"\\": r"\textbackslash{}", "&": r"\&", "%": r"\%", "$": r"\$", "#": r"\#", "_": r"\_",
             "{": r"\{", "}": r"\}", "~": r"\textasciitilde{}", "^": r"\textasciicircum{}"}
    return "".join(table.get(c, c) for c in str(text))


def _num(x: float, digits: int) -> str:
    return "--" if x is None or (isinstance(x, float) and math.isnan(x)) else f"{float(x):.{digits}f}"


def _grey(cells: list[str]) -> list[str]:
    return [rf"\textcolor{{gray}}{{{c}}}" for c in cells]


def _best(agg: xr.Dataset, settings: Sequence[str], not_safe: Sequence[str]) -> dict[tuple[str, str], str | None]:
    return {(s, m): best_label({str(a): float(agg["value"].sel(algo=a, setting=s, metric=m))
                                for a in agg["algo"].values}, m, not_safe)
            for s in settings for m in agg["metric"].values}


def _metric_head(m: str) -> str:
    return rf"$\text{{IQM}}({METRIC[m].tex})$"


def _caption_words(agg: xr.Dataset, not_safe: Sequence[str]) -> str:
    excl = f", excluding {', '.join(algo_label(a) for a in not_safe)} (not safe RL, grey)" if not_safe else ""
    ci = 100 * float(agg.attrs.get("ci", 0.95))
    return (f"IQM over task--bound conditions of the seed means; {ci:g}\\% stratified-bootstrap CIs "
            f"($B={agg.attrs.get('boot', '?')}$). \\textbf{{Bold}}: best per column{excl}. Lower is better "
            r"for every metric except $\text{IQM}(\bar{R})$.")


def cvar_sentence(table: xr.Dataset) -> str:
    """' CVaR: ...' for the caption of a table with a CVaR column (which alpha, what it is), else ''."""
    note = table_cvar_note(table)
    return f" {escape(note)}." if note else ""


def math_text(text: str) -> str:
    """Plain text of a note as LaTeX: escaped, 'V ≤ 0.0015' as math, the marks as symbols (pdflatex has no ≤)."""
    out = re.sub(r"V ≤ ([0-9.eE+-]+)", r"$V \\le \1$", escape(text))
    return out.replace("→", r"$\to$").replace(FEW_MARK, r"$^\ddagger$")


def honest_sentence(table: xr.Dataset, conditions: bool = False) -> str:
    """' Tier $4\\to$3: ...' for a caption: the tiers that rest on V = 0 observed and the few-seeds mark."""
    if conditions:
        parts = [conditions_claim_note(table)]
    else:
        parts = [f"{algo_label(a)} ({SETTING[s].label if s in SETTING else s}): {c}" for a, s, c in claims(table)]
        if parts:
            level = 100 * float(table.attrs.get("ci", 0.95))
            parts = [f"Tier t→b: the tier b at V's honest {level:g}% upper bound where tier t rests on V = 0 "
                     f"observed ({'; '.join(parts)})"]
    parts.append(few_note(table))
    parts = [p for p in parts if p]
    return " " + math_text("; ".join(parts)) + "." if parts else ""


def stacked(value: float, lo: float, hi: float, digits: int, bold: bool = False) -> str:
    """A value with its CI under it in script size (one cell of a default-style table)."""
    num = _num(value, digits)
    num = rf"\mathbf{{{num}}}" if bold else num
    if _num(lo, digits) == "--" and _num(hi, digits) == "--":
        return f"${num}$"
    ci = f"[{_num(lo, digits)}, {_num(hi, digits)}]"
    return rf"\begin{{tabular}}[t]{{@{{}}c@{{}}}}${num}$\\[-1pt]{{\scriptsize ${ci}$}}\end{{tabular}}"


def float_table(colspec: str, header: Sequence[str], rows: Sequence[Sequence[str]], caption: str, label: str,
                grey: Sequence[bool] = ()) -> str:
    """A booktabs tabular in a ``table*`` (the page's \\textwidth in a two-column paper) at ``\\small``; rows
    flagged in `grey` are grey (the not-safe baseline)."""
    lines = [r"\begin{table*}[t]", r"\centering", r"\small", r"\setlength{\tabcolsep}{4pt}",
             rf"\caption{{{caption}}}", rf"\label{{{label}}}", rf"\begin{{tabular}}{{{colspec}}}", r"\toprule",
             " & ".join(header) + r" \\", r"\midrule"]
    for i, row in enumerate(rows):
        cells = list(row)
        lines.append(" & ".join(_grey(cells) if i < len(grey) and grey[i] else cells) + r" \\")
    lines += [r"\bottomrule", r"\end{tabular}", r"\end{table*}"]
    return "\n".join(lines) + "\n"


# ------------------------------------------------------------------------------------ aggregate
def aggregate(agg: xr.Dataset, not_safe: Sequence[str] = (), digits: int = 2, style: str = "default",
              unavailable=None) -> str:
    """The aggregate table in `style` (see the module docstring). `unavailable(algo, setting, metric)`:
    whether a cell is not available (means-only data; metric None = the tier)."""
    if style not in STYLES:
        raise CubeError(f"unknown LaTeX style {style!r}: use {' or '.join(STYLES)}")
    na = unavailable or (lambda a, s, m: False)
    if style == "paper":
        return _paper(agg, not_safe, digits, na)
    return _default(agg, not_safe, digits, na)


def _default(agg: xr.Dataset, not_safe: Sequence[str], digits: int, na) -> str:
    settings = [str(s) for s in agg["setting"].values]
    metrics = [str(m) for m in agg["metric"].values]
    best = _best(agg, settings, not_safe)
    # Six metrics (CVaR the sixth) and the tier fit \textwidth at \footnotesize, as the conditions table.
    lines = [r"\begin{table*}[t]", r"\centering", r"\footnotesize", r"\setlength{\tabcolsep}{3pt}",
             rf"\caption{{Safety and performance per algorithm and setting. {_caption_words(agg, not_safe)}"
             rf"{cvar_sentence(agg)}{honest_sentence(agg)}}}",
             r"\label{tab:saferl_aggregate}",
             rf"\begin{{tabular}}{{ll{'c' * (len(metrics) + 1)}}}", r"\toprule",
             " & ".join([r"\textbf{Algorithm}", "Setting", *[_metric_head(m) for m in metrics], "Tier"]) + r" \\",
             r"\midrule"]
    algos = [str(a) for a in agg["algo"].values]
    for i, a in enumerate(algos):
        for j, s in enumerate(settings):
            cells = []
            for m in metrics:
                if na(a, s, m):
                    cells.append("n/a")
                    continue
                v = agg.sel(algo=a, setting=s, metric=m)
                cells.append(stacked(float(v["value"]), float(v["ci_low"]), float(v["ci_high"]), digits,
                                     bold=best[(s, m)] == a))
            t = int(agg["tier"].sel(algo=a, setting=s))
            tier = "n/a" if na(a, s, None) else ("--" if t < 0 else tier_cell(agg, str(t), r"$\to$", algo=a, setting=s))
            name = escape(algo_label(a)) if j == 0 else ""
            mark = r"$^\ddagger$" if few_seeds(agg, algo=a, setting=s) else ""
            row = [name, (SETTING[s].tex if s in SETTING else escape(s)) + mark, *cells, tier]
            lines.append(" & ".join(_grey(row) if a in not_safe else row) + r" \\")
        if i < len(algos) - 1:
            lines.append(r"\midrule")
    lines += [r"\bottomrule", r"\end{tabular}", r"\end{table*}"]
    return "\n".join(lines) + "\n"


def _paper_settings(agg: xr.Dataset) -> list[str]:
    have = [str(s) for s in agg["setting"].values]
    pick = [s for s in PAPER_SETTINGS if s in have]
    if not pick:
        raise CubeError(f"--style paper lays out Train and Final (greedy); the table has {', '.join(have)}")
    return pick


def _paper_head(metrics: Sequence[str], settings: Sequence[str]) -> list[str]:
    ns = len(settings)
    groups = [*[_metric_head(m) for m in metrics], "Tier"]
    first = " & ".join([r"\multirow{2}{*}{\textbf{Algorithm}}",
                        *[rf"\multicolumn{{{ns}}}{{c}}{{{g}}}" for g in groups]]) + r" \\"
    rules = " ".join(rf"\cmidrule(lr){{{2 + k * ns}-{1 + (k + 1) * ns}}}" for k in range(len(groups)))
    names = {"train": "Train", "final_greedy": "Final", "final_expl": "Final (expl.)"}
    second = " & " + " & ".join(names.get(s, escape(s)) for _ in groups for s in settings) + r" \\"
    return [first, rules, second]


def _paper_metrics(agg: xr.Dataset) -> list[str]:
    """The paper's metrics among the table's (Table 2 has no CVaR)."""
    return [str(m) for m in agg["metric"].values if str(m) in METRIC and METRIC[str(m)].paper]


def _paper_rows(agg: xr.Dataset, not_safe: Sequence[str], digits: int, na, settings: Sequence[str],
                with_ci: bool) -> list[str]:
    metrics = _paper_metrics(agg)
    best = _best(agg, settings, not_safe)
    rows = []
    for a in (str(a) for a in agg["algo"].values):
        cells = []
        for m in metrics:
            for s in settings:
                if na(a, s, m):
                    cells.append("n/a")
                    continue
                v = agg.sel(algo=a, setting=s, metric=m)
                num = _num(float(v["value"]), digits)
                num = rf"\bm{{{num}}}" if best[(s, m)] == a and a not in not_safe else num
                if with_ci:
                    num += (rf"_{{\scriptscriptstyle[{_num(float(v['ci_low']), digits)},"
                            rf"{_num(float(v['ci_high']), digits)}]}}")
                cells.append(f"${num}$")
        for s in settings:
            t = int(agg["tier"].sel(algo=a, setting=s))
            cells.append("n/a" if na(a, s, None) else ("--" if t < 0 else str(t)))
        row = [escape(algo_label(a)), *cells]
        rows.append(" & ".join(_grey(row) if a in not_safe else row) + r" \\")
    return rows


def _paper(agg: xr.Dataset, not_safe: Sequence[str], digits: int, na) -> str:
    settings = _paper_settings(agg)
    metrics = _paper_metrics(agg)
    ncols = 1 + len(settings) * (len(metrics) + 1)
    head = _paper_head(metrics, settings)
    words = _caption_words(agg, not_safe)
    main = [r"\begin{table*}[t]", r"\centering", r"\small",
            rf"\caption{{Safety and performance evaluation across algorithms, aggregated over all $(m,d)$ pairs, for "
            rf"the course of all policy iterates (Train) and the final \textit{{greedy}} policy (Final). {words} "
            rf"CIs in Table~\ref{{tab:saferl_aggregate_ci}}.{honest_sentence(agg.sel(setting=settings))}}}",
            r"\resizebox{\textwidth}{!}{%", rf"\begin{{tabular}}{{l{'c' * (ncols - 1)}}}", r"\toprule", *head,
            r"\midrule", *_paper_rows(agg, not_safe, digits, na, settings, False),
            r"\bottomrule", r"\end{tabular}}", r"\label{tab:saferl_aggregate}", r"\end{table*}"]
    appendix = [r"\begin{sidewaystable*}[p]", r"\centering",
                rf"\caption{{The aggregate metrics of Table~\ref{{tab:saferl_aggregate}} with their CIs "
                rf"$[\text{{lower}},\text{{upper}}]$. {words}}}",
                r"\resizebox{\textwidth}{!}{%", rf"\begin{{tabular}}{{l{'c' * (ncols - 1)}}}", r"\toprule", *head,
                r"\midrule", *_paper_rows(agg, not_safe, digits, na, settings, True),
                r"\bottomrule", r"\end{tabular}}", r"\label{tab:saferl_aggregate_ci}", r"\end{sidewaystable*}"]
    return "\n".join(main) + "\n\n" + "\n".join(appendix) + "\n"


SYNTHETIC_CAPTION = r"\textbf{SYNTHETIC demo data, not training results.} "
"""What every caption of a table of a synthetic cube opens with."""


def mark_synthetic(text: str) -> str:
    """`text` (LaTeX tables) with every caption opening with SYNTHETIC_CAPTION."""
    return text.replace(r"\caption{", r"\caption{" + SYNTHETIC_CAPTION)


# ----------------------------------------------------------------------------------- conditions
def conditions(ct: xr.Dataset, not_safe: Sequence[str] = (), digits: int = 2, unavailable=None) -> str:
    """Per-condition seed mean ± std (the paper's tables 4-7): one row per algorithm, bound and setting
    of each task, grouped by task; `unavailable(algo, task, bound, setting, metric)` as in `aggregate`."""
    na = unavailable or (lambda a, t, b, s, m: False)
    metrics = [m for m in METRIC if f"{m}_mean" in ct]
    lines = [r"\begin{table*}[t]", r"\centering", r"\footnotesize", r"\setlength{\tabcolsep}{3pt}",
             rf"\caption{{Per condition: seed mean $\pm$ sample std over seeds; tier from the seed means."
             rf"{cvar_sentence(ct)}{honest_sentence(ct, conditions=True)}}}",
             r"\label{tab:saferl_conditions}",
             rf"\begin{{tabular}}{{llr{'c' * (len(metrics) + 1)}}}", r"\toprule",
             " & ".join([r"\textbf{Task}", r"\textbf{Algorithm}", "$d$", *[f"${METRIC[m].tex}$" for m in metrics],
                         "Tier"]) + r" \\"]
    settings = [str(s) for s in ct["setting"].values]
    for t in (str(t) for t in ct["task"].values):
        lines.append(r"\midrule")
        for s in settings:
            lines.append(rf"\multicolumn{{{len(metrics) + 4}}}{{l}}{{\textit{{{escape(t)}, "
                         rf"{SETTING[s].tex if s in SETTING else escape(s)}}}}} \\")
            for a in (str(a) for a in ct["algo"].values):
                for b in ct["bound"].values:
                    at = {"algo": a, "task": t, "bound": b, "setting": s}
                    cells = ["n/a" if na(a, t, float(b), s, m) else
                             f"${_num(float(ct[m + '_mean'].sel(at)), digits)} \\pm "
                             f"{_num(float(ct[m + '_std'].sel(at)), digits)}$" for m in metrics]
                    tier = int(ct["tier"].sel(at))
                    mark = r"$^\ddagger$" if few_seeds(ct, **at) else ""
                    row = ["", escape(algo_label(a)), f"{float(b):g}{mark}", *cells,
                           "n/a" if na(a, t, float(b), s, None) else
                           ("--" if tier < 0 else tier_cell(ct, str(tier), r"$\to$", **at))]
                    lines.append(" & ".join(_grey(row) if a in not_safe else row) + r" \\")
    lines += [r"\bottomrule", r"\end{tabular}", r"\end{table*}"]
    return "\n".join(lines) + "\n"
