"""Seed planning (cube.stats.planning) and `saferl plan` end to end: the projection against fresh draws from
known distributions, the resampling against the engine, the CLI's formats and one-line errors."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

import numpy as np
import pytest
from statsdata import random_cube

from cube import CubeError, stats
from cube.cli import main
from cube.stats.bootstrap import iqm_interval, stratified_bootstrap_weights
from cube.stats.planning import (
    halfwidth_targets,
    plan_footer,
    plan_frame,
    plan_poi,
    plan_seeds,
    poi_replicates,
    projected_halfwidth,
    resample_counts,
)
from cube.stats.profiles import profile_metrics

P = 12
A, B = np.linspace(0.5, 3.0, P), np.linspace(6.0, 2.0, P)  # V-like: Beta(a, b) per condition
MU, SD = np.linspace(-0.4, 0.3, P), np.linspace(0.05, 0.25, P)  # D_norm-like: normal
SCALE = np.linspace(0.05, 0.3, P)  # D_norm+-like: Gamma(2, scale), skewed


def known(k: int, rng: np.random.Generator) -> np.ndarray:
    """k seeds of 12 conditions from the known distributions: (P, k, 3)."""
    return np.stack([rng.beta(A[:, None], B[:, None], (P, k)), rng.normal(MU[:, None], SD[:, None], (P, k)),
                     rng.gamma(2.0, SCALE[:, None], (P, k))], -1)


def test_resampled_counts_are_the_engines_draws_at_the_observed_seeds():
    k = np.array([4, 4, 4])
    ours = resample_counts(k, 4, 4, 50, np.random.default_rng(3))
    engine = stratified_bootstrap_weights(k, 4, 50, np.random.default_rng(3))
    assert np.array_equal(ours, engine)
    more = resample_counts(np.array([2, 5]), 5, 9, 20, np.random.default_rng(0))
    assert (more.sum(-1) == 9).all() and not more[:, 0, 2:].any()  # only real seeds are drawn


def test_projection_at_todays_seeds_is_the_reports_interval():
    values = known(8, np.random.default_rng(1))
    k = np.full(P, 8)
    hw = projected_halfwidth(values, k, 8, 500, np.random.default_rng(9))
    _, lo, hi, _, _ = iqm_interval(values, np.ones((P, 8), bool), 500, np.random.default_rng(9), 0.95, "t")
    assert hw == pytest.approx((hi - lo) / 2, rel=1e-9)


def test_projected_halfwidth_is_within_15_percent_of_fresh_seeds():
    """The issue's check: on known distributions, the half-width projected from a cube of 30 seeds per
    condition at K' seeds against the CI half-width of K' fresh seeds (mean of 40 fresh experiments); the
    projection is averaged over 3 observed cubes, so the check is on the method, not on one cube's luck."""
    rng = np.random.default_rng(2026)
    cubes = [known(30, rng) for _ in range(3)]
    k = np.full(P, 30)
    for draws in (5, 10, 30):
        projected = np.mean([projected_halfwidth(c, k, draws, 1000, np.random.default_rng(i))
                             for i, c in enumerate(cubes)], 0)
        fresh = []
        for r in range(40):
            _, lo, hi, _, _ = iqm_interval(known(draws, rng), np.ones((P, draws), bool), 1000,
                                           np.random.default_rng(100 + r), 0.95, "fresh")
            fresh.append((hi - lo) / 2)
        ratio = projected / np.mean(fresh, 0)
        assert np.all(np.abs(ratio - 1) <= 0.15), (draws, ratio)


def test_poi_replicates_at_todays_seeds_center_on_the_reports_poi():
    ds = random_cube(np.random.default_rng(4), shape=(2, 2, 2, 5, 2, 6))
    ss = stats.load_suffstats(ds)
    plan = plan_poi(ss, "alg0", "alg1", "final_greedy", boot=400)
    poi = stats.probability_of_improvement(ss, "alg0", "alg1", "final_greedy", boot=10)
    for m in plan["metric"].values:
        assert float(plan["value"].sel(setting="final_greedy", metric=m)) == pytest.approx(
            float(poi["value"].sel(setting="final_greedy", metric=m)), abs=1e-12)
    x = np.ones((1, 3, 1))
    y = np.zeros((1, 3, 1))
    reps = poi_replicates(x, np.array([3]), y, np.array([3]), 5, 30, np.random.default_rng(0), np.array([True]))
    assert np.all(reps == 1.0)  # every x beats every y whatever is drawn


def test_plan_seeds_needs_more_seeds_for_a_tighter_target():
    ss = stats.load_suffstats(random_cube(np.random.default_rng(5), shape=(1, 2, 2, 6, 2, 8)))
    loose = plan_seeds(ss, "final_greedy", halfwidth=0.2, boot=300)
    tight = plan_seeds(ss, "final_greedy", halfwidth={"V": 0.02}, boot=300, max_seeds=60)
    agg = stats.aggregate_table(ss, "final_greedy", boot=2000)
    for m in ("V", "Dnorm", "Dplus"):
        now = float(loose["halfwidth_now"].sel(algo="alg0", setting="final_greedy", metric=m))
        ci = agg.sel(algo="alg0", setting="final_greedy", metric=m)
        assert now == pytest.approx(float(ci["ci_high"] - ci["ci_low"]) / 2, rel=0.15)
    v_loose = int(loose["seeds_needed"].sel(algo="alg0", setting="final_greedy", metric="V"))
    v_tight = int(tight["seeds_needed"].sel(algo="alg0", setting="final_greedy", metric="V"))
    assert 5 <= v_loose and (v_tight == -1 or v_tight > v_loose)
    assert float(tight["target"].sel(metric="Dnorm")) == 0.05  # metrics not named keep the default
    df = plan_frame(loose)
    assert list(df.columns)[-1] == "reason" and set(df["goal"]) == {"halfwidth"}
    assert plan_footer(loose).startswith("seeds per condition for IQM ±0.2 (final_greedy): D_norm ")


def test_bad_targets_are_one_clear_error():
    with pytest.raises(CubeError, match="positive"):
        halfwidth_targets(-0.1, ("V",))
    with pytest.raises(CubeError, match="not planned"):
        halfwidth_targets({"R": 1.0}, ("V",))


# ------------------------------------------------------------------------------------------------ CLI
def test_plan_cli_on_the_demo_cube(small_demo_cube: Path, capsys):
    assert main(["plan", str(small_demo_cube), "--no-cache", "--boot", "100", "--settings", "final_greedy", "--poi",
                 "ppo_lag,ppo"]) == 0
    out, err = capsys.readouterr()
    assert out.startswith("SYNTHETIC DEMO DATA") and "seeds needed" in out and "power now" in out
    assert "SYNTHETIC" in err and "Traceback" not in err
    rows = [line for line in out.splitlines() if line.startswith("│ ")]
    n_metrics = len(profile_metrics())  # V, D_norm, D_norm+ and CVaR: any cost-like record joins
    assert n_metrics == 4 and len(rows) == 4 * n_metrics + n_metrics  # algo x metric, then the PoI per metric


@pytest.mark.parametrize("fmt", ["csv", "json", "markdown"])
def test_plan_cli_formats_on_a_toy_cube(tmp_path: Path, capsys, fmt):
    path = tmp_path / "toy.nc"
    random_cube(np.random.default_rng(6), shape=(2, 2, 2, 5, 3, 8)).to_netcdf(path)
    out_file = tmp_path / f"plan.{ {'markdown': 'md'}.get(fmt, fmt) }"
    assert main(["plan", str(path), "--boot", "100", "--halfwidth", "V=0.1", "--out", str(out_file),
                 "--settings", "final_expl"]) == 0
    text = out_file.read_text()
    if fmt == "csv":
        rows = list(csv.DictReader(io.StringIO(text)))
        assert len(rows) == 2 * len(profile_metrics()) and {r["setting"] for r in rows} == {"final_expl"}
        v = [r for r in rows if r["metric"] == "V"]
        assert all(r["target"] == "0.1" for r in v) and all((r["seeds_needed"] == "") != (r["more_than"] == "")
                                                             for r in rows)
    elif fmt == "json":
        doc = json.loads(text)
        assert doc["synthetic"] is False and len(doc["halfwidth"]) == 2 * len(profile_metrics())
        assert doc["meta"]["boot"] == 100
    else:
        assert text.startswith("**Seeds per condition") and "| algo | setting | metric |" in text
    assert capsys.readouterr().out.strip() == f"wrote {out_file}"


@pytest.mark.parametrize("args, message", [
    (["--halfwidth", "V=x"], "cannot read --halfwidth"),
    (["--halfwidth", "-1"], "positive"),
    (["--metrics", "VaR"], "unknown metric VaR"),
    (["--power", "1.5"], "--power"),
    (["--poi", "ppo"], "--poi"),
    (["--poi", "ppo,nobody"], "unknown algo nobody"),
    (["--out", "plan.txt"], "cannot tell the format"),
])
def test_plan_cli_bad_input_is_one_line(small_demo_cube: Path, capsys, args, message):
    assert main(["plan", str(small_demo_cube), "--no-cache", "--boot", "20", *args]) == 2
    out, err = capsys.readouterr()
    lines = [line for line in err.splitlines() if line.startswith("error:")]
    assert len(lines) == 1 and message in lines[0] and "Traceback" not in err
