"""Rendering of the statistics tables: CSV/JSON round-trips, best-value marking, LaTeX structure."""

from __future__ import annotations

import csv
import io
import json

import numpy as np
import pytest
import xarray as xr

from cube import CubeError, export, stats


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


def test_aggregate_csv_round_trips_full_precision():
    ds = agg_fixture()
    ds["value"][1, 0, 0] = 1 / 3
    rows = list(csv.DictReader(io.StringIO(export.render(ds, "aggregate", "csv", baseline="ppo"))))
    assert len(rows) == 3 * 2 * 5
    row = next(r for r in rows if (r["algo"], r["setting"], r["metric"]) == ("lag", "train", "R"))
    assert float(row["value"]) == 1 / 3
    assert row["tier"] == "2" and row["baseline"] == "0" and float(row["tier_stability"]) == 0.834
    nan_row = next(r for r in rows if (r["algo"], r["setting"], r["metric"]) == ("p3o", "final_greedy", "V"))
    assert nan_row["value"] == ""


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


def test_latex_has_booktabs_bold_math_and_grey_baseline():
    tex = export.render(agg_fixture(), "aggregate", "latex", baseline="ppo")
    assert tex.startswith(r"\begin{tabular}{l" + "c" * 12 + "}") and r"\bottomrule" in tex
    assert r"\textcolor{gray}{ppo}" in tex and r"$\mathbf{2.00}$" in tex
    body = tex.split(r"\midrule")[1].split(r"\bottomrule")[0].strip().splitlines()
    assert len(body) == 3 and all(line.count("&") == 12 for line in body)


def test_conditions_and_cdf_render_from_real_tables(small_demo_cube):
    ss = stats.load_suffstats(small_demo_cube, cache=False)
    ct = stats.condition_table(ss, ["train"])
    rows = list(csv.DictReader(io.StringIO(export.render(ct, "conditions", "csv"))))
    assert len(rows) == 4 * 2 * 2
    r = next(r for r in rows if (r["algo"], r["task"], float(r["bound"])) == ("p3o", "circle", 25.0))
    want = ct.sel(algo="p3o", task="circle", bound=25.0, setting="train")
    assert float(r["Dnorm_mean"]) == pytest.approx(float(want["Dnorm_mean"]), rel=1e-9)
    assert "±" in export.render(ct, "conditions", "markdown")
    assert r"$\pm$" in export.render(ct, "conditions", "latex")

    cdf = stats.cdf_curves(ss, ["final_greedy"], boot=20)
    doc = json.loads(export.render(cdf, "cdf", "json"))
    assert doc["kappa"] == cdf["kappa"].values.tolist() and len(doc["curves"]) == 4
    lines = export.render(cdf, "cdf", "csv").splitlines()
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
