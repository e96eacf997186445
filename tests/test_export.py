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
        coords={"algo": algos, "setting": settings, "metric": list(stats.METRICS)},
    )
    ds.attrs.update({"boot": 2000, "ci": 0.95, "rng_seed": 0, "selection": '{"algos":null}'})
    return ds


def test_aggregate_csv_is_long_and_tidy_with_exact_columns_and_full_precision():
    ds = agg_fixture()
    ds["value"][1, 0, 0] = 1 / 3
    text = export.render(ds, "aggregate", "csv", baseline="ppo")
    assert text.splitlines()[0] == "algo,setting,metric,value,ci_low,ci_high"
    rows = list(csv.DictReader(io.StringIO(text)))
    assert len(rows) == 3 * 2 * 6
    assert [r["metric"] for r in rows[:6]] == ["R", "C", "Dnorm", "V", "Dplus", "tier"]
    row = next(r for r in rows if (r["algo"], r["setting"], r["metric"]) == ("lag", "train", "R"))
    assert float(row["value"]) == 1 / 3 and float(row["ci_low"]) == 0.5
    tier = next(r for r in rows if (r["algo"], r["setting"], r["metric"]) == ("lag", "final_greedy", "tier"))
    assert tier == {"algo": "lag", "setting": "final_greedy", "metric": "tier", "value": "4",
                    "ci_low": "", "ci_high": ""}
    nan_row = next(r for r in rows if (r["algo"], r["setting"], r["metric"]) == ("p3o", "final_greedy", "V"))
    assert nan_row["value"] == ""
    no_tier = next(r for r in rows if (r["algo"], r["setting"], r["metric"]) == ("p3o", "train", "tier"))
    assert no_tier["value"] == ""  # tier -1 = no data


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
    assert "*ppo (baseline)*" in md[2] and "**" not in md[2]
    # R: higher is better -> p3o (2.0 > 1.0); C: lower is better -> lag (1.1 < 2.1).
    assert "**2.00 [1.50, 2.50]**" in p3o and "**1.10 [0.60, 1.60]**" in lag
    assert "**1.00" not in lag and "**2.10" not in p3o
    assert p3o.rstrip(" |").endswith("– | 1 (25%)")  # tier -1 (no data) shows as a dash
    assert lag.rstrip(" |").endswith("2 (83%) | 4 (50%)")


def test_latex_has_booktabs_bold_math_subscript_cis_and_grey_baseline():
    tex = export.render(agg_fixture(), "aggregate", "latex", baseline="ppo")
    lines = tex.splitlines()
    assert lines[0].startswith("% needs") and "booktabs" in lines[0]
    assert lines[1] == r"\begin{tabular}{l" + "c" * 12 + "}" and r"\bottomrule" in tex
    assert r"\textcolor{gray}{ppo}" in tex
    assert r"$\mathbf{2.00}_{[1.50, 2.50]}$" in tex  # p3o's R: best excl. baseline, CI as a subscript
    assert r"$1.00_{[0.50, 1.50]}$" in tex  # lag's R: not bold
    assert r"\mathbf{9" not in tex  # the baseline (99.0 everywhere) is never bold
    body = tex.split(r"\midrule")[1].split(r"\bottomrule")[0].strip().splitlines()
    assert len(body) == 3 and all(line.count("&") == 12 for line in body)
    assert all(cell.startswith(r"\textcolor{gray}") for cell in body[0].rstrip(" \\").split(" & "))


def test_table_format_is_the_paper_table_2_layout():
    text = export.render(agg_fixture(), "aggregate", "table", baseline="ppo")
    assert "IQM(R̄) [CI]" in text and "IQM(D_norm+) [CI]" in text and "Tier" in text
    lag_rows = [line for line in text.splitlines() if "│ lag " in line]
    assert len(lag_rows) == 2 and "Train" in lag_rows[0] and "Final (greedy)" in lag_rows[1]
    assert "4 Strict" in lag_rows[1] and "1.10 [0.60, 1.60]" in lag_rows[0]
    assert "ppo (baseline)" in text
    table = export.rich_table(agg_fixture(), "aggregate", baseline="ppo")
    assert len(table.rows) == 6 and len(table.columns) == 2 + 5 + 1


def test_conditions_and_cdf_render_from_real_tables(small_demo_cube):
    ss = stats.load_suffstats(small_demo_cube, cache=False)
    ct = stats.condition_table(ss, ["train"])
    text = export.render(ct, "conditions", "csv")
    assert text.splitlines()[0] == "algo,task,bound,setting,metric,mean,std,n_seeds"
    rows = list(csv.DictReader(io.StringIO(text)))
    assert len(rows) == 4 * 2 * 2 * 6
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
    assert lines[0] == "algo,setting,kappa,cdf,ci_low,ci_high" and len(lines) == 1 + 4 * cdf.sizes["kappa"]
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
    assert list(rows[0]) == ["x", "y", "setting", "metric", "value", "ci_low", "ci_high"]
    r = next(r for r in rows if (r["setting"], r["metric"]) == ("final_greedy", "V"))
    assert float(r["value"]) == float(poi["value"].sel(setting="final_greedy", metric="V"))
    rows = list(csv.DictReader(io.StringIO(export.render(gap, "gap", "csv"))))
    assert list(rows[0]) == ["algo", "metric", "value", "ci_low", "ci_high"] and len(rows) == 4 * 5
    assert json.loads(export.render(poi, "poi", "json"))["x"] == "p3o"
    assert len(json.loads(export.render(gap, "gap", "json"))["rows"]) == 20
    for obj, kind in ((poi, "poi"), (gap, "gap")):
        assert r"\toprule" in export.render(obj, kind, "latex", baseline="ppo" if kind == "gap" else None)
        assert "|" in export.render(obj, kind, "markdown") and "┃" in export.render(obj, kind, "table")


LATEX_DOC = r"""\documentclass{article}
\usepackage[T1]{fontenc}
\usepackage{booktabs,multirow,xcolor,amsmath}
\begin{document}
%s
\end{document}
"""


@pytest.mark.skipif(shutil.which("pdflatex") is None, reason="pdflatex is not installed")
def test_latex_tables_compile_with_booktabs(small_demo_cube, tmp_path):
    ss = stats.load_suffstats(small_demo_cube, cache=False)
    tables = {"aggregate": stats.aggregate_table(ss, boot=20), "conditions": stats.condition_table(ss),
              "cdf": stats.cdf_curves(ss, boot=20), "poi": stats.probability_of_improvement(ss, "p3o", "ppo", boot=20),
              "gap": stats.greedy_expl_gap(ss, boot=20)}
    body = "\n".join(export.render(t, k, "latex", baseline="ppo" if k != "poi" else None) for k, t in tables.items())
    (tmp_path / "t.tex").write_text(LATEX_DOC % body)
    done = subprocess.run(["pdflatex", "-interaction=nonstopmode", "-halt-on-error", "t.tex"], cwd=tmp_path,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout[-2000:]
    assert (tmp_path / "t.pdf").exists()


def test_not_best_is_apart_from_the_baseline():
    """Algorithms that are not safe RL are never bold, and they are neither greyed nor labelled baseline;
    without them (and without a baseline) PPO's 99.0 would be best for R."""
    plain = export.render(agg_fixture(), "aggregate", "markdown").splitlines()
    assert "**99.00" in next(line for line in plain if line.startswith("| ppo"))
    md = export.render(agg_fixture(), "aggregate", "markdown", not_best=["ppo", "not_there"]).splitlines()
    ppo = next(line for line in md if line.startswith("| ppo"))
    p3o = next(line for line in md if line.startswith("| p3o"))
    assert "**" not in ppo and "(baseline)" not in ppo
    assert "**2.00 [1.50, 2.50]**" in p3o  # best R among the rest
