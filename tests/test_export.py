"""Rendering of the statistics tables: CSV/JSON round-trips, best-value marking, LaTeX structure."""

from __future__ import annotations

import csv
import io
import json
import shutil
import subprocess

import numpy as np
import pytest
import xarray as xr

from cube import CubeError, stats
from cube.render import text as export


def agg_fixture() -> xr.Dataset:
    """Hand-made aggregate table: 3 algos x 2 settings, known values, one NaN."""
    algos, settings = ["ppo", "lag", "p3o"], ["train", "final_greedy"]
    value = np.arange(30, dtype=float).reshape(3, 2, 5) / 10.0
    value[0] = 99.0  # the baseline is best at everything except lower-is-better metrics
    value[2, 1, 3] = np.nan
    ds = xr.Dataset(
        {"value": (("algo", "setting", "metric"), value),
         "ci_low": (("algo", "setting", "metric"), value - 0.5),
         "ci_high": (("algo", "setting", "metric"), value + 0.5),
         "tier": (("algo", "setting"), np.array([[0, 0], [2, 4], [-1, 1]])),
         "tier_stability": (("algo", "setting"), np.array([[1.0, 1.0], [0.834, 0.5], [np.nan, 0.25]])),
         "n_conditions": (("algo", "setting"), np.full((3, 2), 12))},
        coords={"algo": algos, "setting": settings, "metric": list(stats.PAPER_METRICS)},
    )
    ds.attrs.update({"boot": 2000, "ci": 0.95, "rng_seed": 0, "selection": '{"algos":null}'})
    return ds


def test_aggregate_csv_is_long_and_tidy_with_exact_columns_and_full_precision():
    ds = agg_fixture()
    ds["value"][1, 0, 0] = 1 / 3
    text = export.render(ds, "aggregate", "csv", baseline="ppo")
    assert text.splitlines()[0] == "algo,setting,metric,value,ci_low,ci_high,not_safe,reason"
    rows = list(csv.DictReader(io.StringIO(text)))
    assert {r["not_safe"] for r in rows if r["algo"] == "ppo"} == {"1"}  # the baseline is marked in CSV too
    assert {r["not_safe"] for r in rows if r["algo"] != "ppo"} == {"0"}
    assert len(rows) == 3 * 2 * 6
    assert [r["metric"] for r in rows[:6]] == ["R", "C", "Dnorm", "V", "Dplus", "tier"]
    row = next(r for r in rows if (r["algo"], r["setting"], r["metric"]) == ("lag", "train", "R"))
    assert float(row["value"]) == 1 / 3 and float(row["ci_low"]) == 0.5
    tier = next(r for r in rows if (r["algo"], r["setting"], r["metric"]) == ("lag", "final_greedy", "tier"))
    assert tier == {"algo": "lag", "setting": "final_greedy", "metric": "tier", "value": "4",
                    "ci_low": "", "ci_high": "", "not_safe": "0", "reason": ""}
    nan_row = next(r for r in rows if (r["algo"], r["setting"], r["metric"]) == ("p3o", "final_greedy", "V"))
    assert nan_row["value"] == "" and nan_row["reason"] == "no-episodes"  # empty, and why
    no_tier = next(r for r in rows if (r["algo"], r["setting"], r["metric"]) == ("p3o", "train", "tier"))
    assert no_tier["value"] == "" and no_tier["reason"] == "no-episodes"  # tier -1 = no data


def test_aggregate_json_has_values_tiers_and_meta():
    doc = json.loads(export.render(agg_fixture(), "aggregate", "json", baseline="ppo"))
    assert doc["boot"] == 2000 and doc["selection"] == {"algos": None}
    row = next(r for r in doc["rows"] if r["algo"] == "lag" and r["setting"] == "final_greedy")
    assert row["tier"] == 4 and row["tier_label"] == "Strict" and row["baseline"] is False
    assert row["tier_stability"] == 0.5
    assert row["metrics"]["V"] == {"value": 1.8, "ci_low": 1.3, "ci_high": 2.3}
    p3o = next(r for r in doc["rows"] if r["algo"] == "p3o" and r["setting"] == "final_greedy")
    assert p3o["metrics"]["V"]["value"] is None and p3o["tier_label"] == "Minimal"


def test_markdown_bolds_best_excluding_baseline():
    md = export.render(agg_fixture(), "aggregate", "markdown", baseline="ppo").splitlines()
    lag = next(line for line in md if line.startswith("| lag"))
    p3o = next(line for line in md if line.startswith("| p3o"))
    assert "*ppo †*" in md[2] and "**" not in md[2] and any("† not safe RL" in line for line in md)
    # R: higher is better -> p3o (2.0 > 1.0); C: lower is better -> lag (1.1 < 2.1).
    assert "**2.00 [1.50, 2.50]**" in p3o and "**1.10 [0.60, 1.60]**" in lag
    assert "**1.00" not in lag and "**2.10" not in p3o
    assert p3o.rstrip(" |").endswith("– | 1 (25%)")  # tier -1 (no data) shows as a dash
    assert lag.rstrip(" |").endswith("2 (83%) | 4 (50%)")


def test_latex_default_has_booktabs_bold_stacked_cis_and_grey_baseline():
    tex = export.render(agg_fixture(), "aggregate", "latex", baseline="ppo")
    lines = tex.splitlines()
    assert lines[0].startswith("% needs") and "booktabs" in lines[0]
    assert r"\begin{table*}" in tex and r"\begin{tabular}{ll" + "c" * 6 + "}" in tex and r"\bottomrule" in tex
    assert r"\textcolor{gray}{PPO}" in tex  # display names; the not-safe baseline grey
    assert r"$\mathbf{2.00}$\\[-1pt]{\scriptsize $[1.50, 2.50]$}" in tex  # p3o's R: best excl. baseline
    assert r"$1.00$\\[-1pt]" in tex  # lag's R: not bold
    assert r"\mathbf{9" not in tex  # the baseline (99.0 everywhere) is never bold
    body = tex.split(r"\midrule", 1)[1].split(r"\bottomrule")[0]
    rows = [line for line in body.splitlines() if line.endswith(r"\\") and "&" in line]
    assert len(rows) == 6 and all(line.count(" & ") == 7 for line in rows)
    assert all(cell.startswith(r"\textcolor{gray}") for cell in rows[0].rstrip(" \\").split(" & "))


def test_latex_paper_style_is_table_2_and_its_ci_table():
    tex = export.render(agg_fixture(), "aggregate", "latex", baseline="ppo", style="paper")
    main, appendix = tex.split(r"\end{table*}")
    assert r"\begin{table*}[t]" in main  # both columns of a two-column paper (a `table` runs into the other)
    assert r"\resizebox{\textwidth}{!}{%" in main and r"\begin{tabular}{l" + "c" * 12 + "}" in main
    assert r"\cmidrule(lr){2-3} \cmidrule(lr){4-5}" in main and r"\cmidrule(lr){12-13}" in main
    assert " & Train & Final & Train & Final" in main and "PPO-Lag" not in main  # lag is not a known name
    rows = [line for line in main.splitlines() if line.startswith(("lag", r"\textcolor{gray}{PPO}", "P3O"))]
    assert len(rows) == 3 and all(line.count(" & ") == 12 for line in rows)
    assert r"$\bm{2.00}$" in main and r"\bm{9" not in main and "scriptscriptstyle" not in main  # no CIs
    assert r"\begin{sidewaystable*}" in appendix and r"$\bm{2.00}_{\scriptscriptstyle[1.50,2.50]}$" in appendix
    assert "bm" in tex.splitlines()[0] and "rotating" in tex.splitlines()[0]


@pytest.mark.parametrize("style", ["default", "paper"])
def test_latex_of_a_synthetic_cube_says_so_in_every_caption(style):
    """SYNTHETIC on the page (each caption opens with it), not only in a `%` comment; never for real data."""
    real = export.render(agg_fixture(), "aggregate", "latex", baseline="ppo", style=style)
    fake = export.render(agg_fixture().assign_attrs(synthetic=True), "aggregate", "latex", baseline="ppo",
                         style=style)
    captions = [line for line in fake.splitlines() if r"\caption{" in line]
    assert len(captions) == (2 if style == "paper" else 1)
    assert all(r"\caption{\textbf{SYNTHETIC demo data, not training results.} " in c for c in captions), captions
    assert "SYNTHETIC" not in real
    assert fake.startswith("% SYNTHETIC")


def cvar_fixture(alpha: float = 0.05) -> xr.Dataset:
    """`agg_fixture` with a CVaR column (its values 7.x) at `alpha`."""
    ds = agg_fixture()
    cvar = ds.isel(metric=[0]).assign_coords(metric=["CVaR"])
    cvar["value"][:] = np.array([[7.1, 7.2], [7.3, 7.4], [7.5, 7.6]])[..., None]
    cvar["ci_low"][:], cvar["ci_high"][:] = cvar["value"] - 0.5, cvar["value"] + 0.5
    out = xr.concat([ds[["value", "ci_low", "ci_high"]], cvar[["value", "ci_low", "ci_high"]]], dim="metric")
    for v in ("tier", "tier_stability", "n_conditions"):
        out[v] = ds[v]
    return out.assign_attrs(ds.attrs, cvar_alpha=alpha)


def test_cvar_is_a_column_after_dplus_everywhere_but_the_papers_table_2():
    ds = cvar_fixture()
    md = export.render(ds, "aggregate", "markdown", baseline="ppo")
    header = md.splitlines()[0]
    assert header.index("IQM(Dplus) final_greedy") < header.index("IQM(CVaR) train") < header.index("Tier train")
    assert "CVaR at alpha = 0.05 of (c - d)/d, the mean over the worst 5% of a run's episodes" in md
    assert "**7.30 [6.80, 7.80]**" in md  # lower is better: lag is best (ppo is the baseline)
    doc = json.loads(export.render(ds, "aggregate", "json", baseline="ppo"))
    assert doc["cvar_alpha"] == 0.05 and doc["rows"][2]["metrics"]["CVaR"]["value"] == 7.3
    assert "cvar_alpha" not in json.loads(export.render(agg_fixture(), "aggregate", "json"))
    rows = list(csv.DictReader(io.StringIO(export.render(ds, "aggregate", "csv"))))
    assert [r["metric"] for r in rows[:7]] == [*stats.METRICS, "tier"]
    default = export.render(ds, "aggregate", "latex", baseline="ppo")
    assert r"$\text{IQM}(\text{CVaR}_{\alpha})$" in default and "worst 5\\% of" in default
    paper = export.render(ds, "aggregate", "latex", baseline="ppo", style="paper")
    assert "CVaR" not in paper and r"\begin{tabular}{l" + "c" * 12 + "}" in paper
    text = export.render(ds, "aggregate", "table", baseline="ppo")
    assert "IQM(CVaR) [CI]" in text and "the worst 5% of a" in text


def test_table_format_is_the_paper_table_2_layout():
    text = export.render(agg_fixture(), "aggregate", "table", baseline="ppo")
    assert "IQM(R̄) [CI]" in text and "IQM(D_norm+) [CI]" in text and "Tier" in text
    lines = text.splitlines()
    first = next(i for i, line in enumerate(lines) if line.startswith("│ lag "))
    assert "train" in lines[first] and "greedy" in lines[first + 1]
    assert "4 Strict" in lines[first + 1] and "1.10 [0.60, 1.60]" in lines[first]
    assert "ppo †" in text and "† not safe RL" in text
    table = export.rich_table(agg_fixture(), "aggregate", baseline="ppo")
    assert len(table.rows) == 6 and len(table.columns) == 2 + 5 + 1


@pytest.mark.parametrize("width", [80, 120])
def test_terminal_table_fits_the_width_and_cuts_no_number(small_demo_cube, width):
    """The aggregate and per-condition tables drawn at 80 and 120 columns: no line is wider, and every
    IQM (or seed mean) of the table appears whole in the text."""
    from rich.console import Console

    ss = stats.load_suffstats(small_demo_cube, cache=False)
    tables = {"aggregate": stats.aggregate_table(ss, boot=20), "conditions": stats.condition_table(ss)}
    for kind, table in tables.items():
        console = Console(width=width, record=True, file=io.StringIO(), color_system=None)
        console.print(export.rich_table(table, kind, not_best=["ppo"], width=width))
        text = console.export_text(styles=False)
        assert max(len(line.rstrip()) for line in text.splitlines()) <= width, kind
        cells = [t for line in text.splitlines() for t in line.split()]
        shown = stats.PAPER_METRICS if "CVaR left out to fit the terminal" in text else stats.METRICS
        assert width < 100 or shown == stats.METRICS  # CVaR goes only where the paper's columns barely fit
        values = (table["value"].sel(metric=list(shown)).values if kind == "aggregate" else
                  np.stack([table[f"{m}_mean"].values for m in shown]))
        for v in values.ravel()[np.isfinite(values.ravel())]:
            assert f"{v:.2f}" in cells, (kind, v)
        assert "…" not in text


def test_conditions_and_cdf_render_from_real_tables(small_demo_cube):
    ss = stats.load_suffstats(small_demo_cube, cache=False)
    ct = stats.condition_table(ss, ["train"])
    text = export.render(ct, "conditions", "csv")
    assert text.splitlines()[0] == "algo,task,bound,setting,metric,mean,std,n_seeds,not_safe,reason"
    rows = list(csv.DictReader(io.StringIO(text)))
    assert len(rows) == 4 * 2 * 2 * (len(stats.METRICS) + 1)
    key = ("p3o", "circle", 25.0)
    mine = {r["metric"]: r for r in rows if (r["algo"], r["task"], float(r["bound"])) == key}
    want = ct.sel(algo="p3o", task="circle", bound=25.0, setting="train")
    assert float(mine["Dnorm"]["mean"]) == pytest.approx(float(want["Dnorm_mean"]), rel=1e-9)
    assert float(mine["V"]["std"]) == pytest.approx(float(want["V_std"]), rel=1e-9)
    assert mine["tier"]["mean"] == str(int(want["tier"])) and mine["tier"]["std"] == ""
    assert {r["n_seeds"] for r in mine.values()} == {"3"}
    assert "±" in export.render(ct, "conditions", "markdown")
    assert r"$\pm$" in export.render(ct, "conditions", "latex")

    cdf = stats.cdf_curves(ss, ["final_greedy"], boot=20)
    doc = json.loads(export.render(cdf, "cdf", "json"))
    assert doc["kappa"] == cdf["kappa"].values.tolist() and len(doc["curves"]) == 4
    lines = export.render(cdf, "cdf", "csv").splitlines()
    assert lines[0] == "algo,setting,kappa,cdf,ci_low,ci_high,not_safe,reason"
    assert len(lines) == 1 + 4 * cdf.sizes["kappa"]
    md = export.render(cdf, "cdf", "markdown")
    assert "CDF(κ=0)" in md and "CDF(κ=2)" in md


def test_bad_kind_format_or_baseline_are_cube_errors():
    ds = agg_fixture()
    with pytest.raises(CubeError, match="unknown table kind"):
        export.render(ds, "tiers", "csv")
    with pytest.raises(CubeError, match="unknown format"):
        export.render(ds, "aggregate", "xlsx")
    with pytest.raises(CubeError, match="baseline 'trpo'"):
        export.render(ds, "aggregate", "csv", baseline="trpo")


def test_poi_and_gap_render_in_every_format(small_demo_cube):
    ss = stats.load_suffstats(small_demo_cube, cache=False)
    poi = stats.probability_of_improvement(ss, "p3o", "ppo", boot=20)
    gap = stats.greedy_expl_gap(ss, boot=20)
    rows = list(csv.DictReader(io.StringIO(export.render(poi, "poi", "csv"))))
    assert list(rows[0]) == ["x", "y", "setting", "metric", "value", "ci_low", "ci_high", "reason"]
    r = next(r for r in rows if (r["setting"], r["metric"]) == ("final_greedy", "V"))
    assert float(r["value"]) == float(poi["value"].sel(setting="final_greedy", metric="V"))
    rows = list(csv.DictReader(io.StringIO(export.render(gap, "gap", "csv"))))
    assert list(rows[0]) == ["algo", "metric", "value", "ci_low", "ci_high", "not_safe", "reason"]
    assert len(rows) == 4 * len(stats.METRICS)
    assert json.loads(export.render(poi, "poi", "json"))["x"] == "p3o"
    assert len(json.loads(export.render(gap, "gap", "json"))["rows"]) == 4 * len(stats.METRICS)
    for obj, kind in ((poi, "poi"), (gap, "gap")):
        assert r"\toprule" in export.render(obj, kind, "latex", baseline="ppo" if kind == "gap" else None)
        assert "|" in export.render(obj, kind, "markdown") and "┃" in export.render(obj, kind, "table")


LATEX_DOC = r"""\documentclass[%s]{article}
\usepackage[T1]{fontenc}
\usepackage{booktabs,multirow,xcolor,amsmath,bm,graphicx,rotating}
\begin{document}
%s
\end{document}
"""


def _compile(tmp_path, body: str, columns: str = "twocolumn") -> str:
    """pdflatex the body in an article (two columns by default); its log (fails the test on an error)."""
    (tmp_path / "t.tex").write_text(LATEX_DOC % (columns, body))
    done = subprocess.run(["pdflatex", "-interaction=nonstopmode", "-halt-on-error", "t.tex"], cwd=tmp_path,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout[-2000:]
    assert (tmp_path / "t.pdf").exists()
    return (tmp_path / "t.log").read_text(errors="replace")


@pytest.mark.skipif(shutil.which("pdflatex") is None, reason="pdflatex is not installed")
def test_latex_tables_compile_and_fit_the_page(small_demo_cube, tmp_path):
    """Every table in both styles compiles in a two-column paper with no overfull box: the default
    layouts fit \\textwidth at their font size, the paper's Table 2 and CI table are resized to it."""
    ss = stats.load_suffstats(small_demo_cube, cache=False)
    tables = {"aggregate": stats.aggregate_table(ss, boot=20), "conditions": stats.condition_table(ss),
              "cdf": stats.cdf_curves(ss, boot=20), "poi": stats.probability_of_improvement(ss, "p3o", "ppo", boot=20),
              "gap": stats.greedy_expl_gap(ss, boot=20)}
    body = "\n".join(export.render(t, k, "latex", baseline="ppo" if k != "poi" else None) for k, t in tables.items())
    log = _compile(tmp_path, body)
    assert "Overfull \\hbox" not in log, [line for line in log.splitlines() if "Overfull" in line]
    paper = export.render(tables["aggregate"], "aggregate", "latex", baseline="ppo", style="paper")
    for columns in ("onecolumn", "twocolumn"):  # the paper's own layout, and a two-column paper's page width
        log = _compile(tmp_path, paper, columns=columns)
        assert "Overfull \\hbox" not in log, (columns, [line for line in log.splitlines() if "Overfull" in line])
    assert "SYNTHETIC demo data" in (tmp_path / "t.aux").read_text()  # in the caption, on the page


def test_not_safe_algorithms_are_one_rule_with_the_baseline():
    """Algorithms that are not safe RL (`not_best`, e.g. PPO found by `stats.not_safe`) are treated like the
    baseline: marked, never bold; without them (and without a baseline) PPO's 99.0 would be best for R."""
    plain = export.render(agg_fixture(), "aggregate", "markdown").splitlines()
    assert "**99.00" in next(line for line in plain if line.startswith("| ppo"))
    md = export.render(agg_fixture(), "aggregate", "markdown", not_best=["ppo", "not_there"]).splitlines()
    ppo = next(line for line in md if line.startswith("| *ppo"))
    p3o = next(line for line in md if line.startswith("| p3o"))
    assert "**" not in ppo and "†" in ppo
    assert "**2.00 [1.50, 2.50]**" in p3o  # best R among the rest
    assert stats.not_safe(["ppo", "lag", "p3o"]) == ("ppo",)
    assert stats.not_safe(["ppo", "lag"], "none") == () and stats.not_safe(["ppo", "lag"], "lag") == ("lag",)
    with pytest.raises(CubeError, match="--baseline trpo is not among"):
        stats.not_safe(["ppo", "lag"], "trpo")
