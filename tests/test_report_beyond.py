"""The statistics beyond the paper from `saferl report` and `saferl plot`: honest intervals of V and the tier
claims where a tier rests on V = 0, the few-seeds mark, `--kind profile`, `--kind front`, `plot profile|front`;
every number checked against the statistics functions, on a small cube where one algorithm never violates."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

import numpy as np
import pytest
from statsdata import zero_violation_cube

from cube import stats
from cube.cli import main
from cube.stats.reasons import MARKS, REASONS

BOUNDS = (10.0, 20.0)


@pytest.fixture(scope="module")
def zero_cube(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """`statsdata.zero_violation_cube`: ppo (6 seeds) far over the bound, `safe` (3 seeds) never over it."""
    path = tmp_path_factory.mktemp("zero") / "zero.nc"
    zero_violation_cube(path, BOUNDS)
    return path


def report(capsys, *args: str) -> str:
    assert main(["report", *map(str, args)]) == 0
    return capsys.readouterr().out


def test_reason_codes_and_marks_have_one_meaning_each():
    assert not set(REASONS) & set(MARKS)
    assert "one-seed" in REASONS and "few-seeds" in MARKS and "fewer than 5" in MARKS["few-seeds"]


def test_claims_where_the_tier_rests_on_v_zero_in_every_format(zero_cube, capsys):
    honest = stats.honest_tables(stats.load_suffstats(zero_cube), boot=50).aggregate
    claim = str(honest["claim"].sel(algo="safe", setting="final_greedy").item())
    at_bound = int(honest["tier_at_bound"].sel(algo="safe", setting="final_greedy"))
    assert claim.startswith("tier 4 observed; V ≤ ") and bool(honest["rests_on_zero"].sel(algo="safe").all())
    table = report(capsys, zero_cube, "--boot", "50", "--width", "200")
    assert f"4 Strict → {at_bound}" in table and f"→ safe, Final (greedy): {claim}" in table
    assert "‡ few seeds (least: 3)" in table and "greedy‡" in table
    rows = list(csv.DictReader(io.StringIO(report(capsys, zero_cube, "--boot", "50", "--format", "csv"))))
    v = {(r["algo"], r["setting"]): r for r in rows if r["metric"] == "V"}
    safe = v["safe", "final_greedy"]
    assert safe["claim"] == claim and float(safe["value"]) == 0.0 == float(safe["ci_high"])  # the paper's CI: [0, 0]
    assert float(safe["honest_high"]) == float(honest["honest_high"].sel(algo="safe", setting="final_greedy")) > 0
    assert {r["few_seeds"] for r in rows if r["algo"] == "safe"} == {"1"}
    assert {r["few_seeds"] for r in rows if r["algo"] == "ppo"} == {"0"}
    doc = json.loads(report(capsys, zero_cube, "--boot", "50", "--format", "json"))
    row = next(r for r in doc["rows"] if r["algo"] == "safe" and r["setting"] == "final_greedy")
    assert row["claim"] == claim and row["rests_on_zero"] and row["tier_at_bound"] == at_bound and row["few_seeds"]
    assert row["metrics"]["V"]["honest_high"] == pytest.approx(float(safe["honest_high"]), rel=0, abs=0)
    assert doc["marks"] == {"few-seeds": MARKS["few-seeds"]}
    markdown = report(capsys, zero_cube, "--boot", "50", "--format", "markdown")
    assert f"→ safe, Final (greedy): {claim}" in markdown and f"4 (100%) →{at_bound}‡" in markdown
    latex = report(capsys, zero_cube, "--boot", "50", "--format", "latex")
    bound = claim.split("V ≤ ")[1].split(" ")[0]
    assert rf"$V \le {bound}$ at 95\%" in latex and rf"4$\to${at_bound}" in latex and "≤" not in latex
    paper = report(capsys, zero_cube, "--boot", "50", "--format", "latex", "--style", "paper")
    assert rf"$V \le {bound}$" in paper and r"$\to$" not in paper.split(r"\midrule")[1]  # Table 2's cells as ever


def test_per_condition_tables_mark_few_seeds_and_the_tier_at_the_bound(zero_cube, capsys):
    honest = stats.honest_tables(stats.load_suffstats(zero_cube), ["final_greedy"], boot=50).conditions
    rows = list(csv.DictReader(io.StringIO(report(capsys, zero_cube, "--per-condition", "--settings", "final_greedy",
                                                  "--boot", "50", "--format", "csv"))))
    assert rows and all(r["few_seeds"] == ("1" if r["algo"] == "safe" else "0") for r in rows)
    for r in (r for r in rows if r["metric"] == "V"):
        want = honest.sel(algo=r["algo"], task=r["task"], bound=float(r["bound"]), setting="final_greedy")
        assert float(r["honest_high"]) == float(want["honest_high"]) and r["claim"] == str(want["claim"].item())
    table = report(capsys, zero_cube, "--per-condition", "--settings", "final_greedy", "--boot", "50", "--width", "200")
    assert "3‡" in table and "4→" in table and "4→b: tier 4 rests on V = 0 observed" in table


def test_profile_report_is_the_profile_read_at_its_thresholds(zero_cube, capsys):
    prof = stats.performance_profiles(stats.load_suffstats(zero_cube), ["final_greedy"], boot=50)
    frame = stats.profile_frame(prof)
    rows = list(csv.DictReader(io.StringIO(report(capsys, zero_cube, "--kind", "profile", "--settings",
                                                  "final_greedy", "--boot", "50", "--format", "csv"))))
    assert len(rows) == len(frame) and list(rows[0]) == [*frame.columns[:-1], "not_safe", "reason"]
    assert [float(r["fraction"]) for r in rows] == frame["fraction"].tolist()
    md = report(capsys, zero_cube, "--kind", "profile", "--settings", "final_greedy", "--boot", "50",
                "--format", "markdown")
    head = next(line for line in md.splitlines() if line.startswith("| Algorithm"))
    cols = [c.strip() for c in head.strip("|").split("|")]
    for algo in ("ppo", "safe"):
        line = next(x for x in md.splitlines() if x.startswith("| ") and algo in x.split("|")[1])
        cell = [c.strip() for c in line.strip("|").split("|")][cols.index("V≤0.1")]
        one = frame[(frame["algo"] == algo) & (frame["metric"] == "V") & np.isclose(frame["tau"], 0.1)].iloc[0]
        assert cell == f"{one['fraction']:.2f} [{one['ci_low']:.2f}, {one['ci_high']:.2f}]"


def test_front_report_points_and_counts(zero_cube, capsys):
    ss = stats.load_suffstats(zero_cube)
    front = stats.reward_cost_front(ss, ["final_greedy"], cost="CVaR", boot=50)
    rows = list(csv.DictReader(io.StringIO(report(capsys, zero_cube, "--kind", "front", "--settings", "final_greedy",
                                                  "--front-cost", "CVaR", "--boot", "50", "--format", "csv"))))
    frame = stats.front_frame(front)
    assert len(rows) == len(frame) and {r["cost_metric"] for r in rows} == {"CVaR"}
    assert [float(r["p_front"]) if r["p_front"] else np.nan for r in rows] == pytest.approx(
        frame["p_front"].tolist(), nan_ok=True)
    assert {r["not_safe"] for r in rows if r["algo"] == "ppo"} == {"1"}
    doc = json.loads(report(capsys, zero_cube, "--kind", "front", "--settings", "final_greedy", "--front-cost", "CVaR",
                            "--boot", "50", "--format", "json"))
    counts = stats.front_counts_frame(front)
    assert [c["tasks_on_front"] for c in doc["counts"]] == counts["tasks_on_front"].tolist()
    assert doc["cost"] == "CVaR"
    table = report(capsys, zero_cube, "--kind", "front", "--settings", "final_greedy", "--boot", "50", "--width", "120")
    assert "Reward-cost front across bounds" in table and "●" in table and "P(front)" in table


def test_plot_profile_and_front(zero_cube, tmp_path, capsys):
    pytest.importorskip("matplotlib")
    for kind, extra in (("profile", ()), ("front", ("--front-cost", "CVaR"))):
        out = tmp_path / f"{kind}.png"
        assert main(["plot", str(zero_cube), kind, "--out", str(out), "--boot", "30", *extra]) == 0
        assert out.read_bytes()[:4] == b"\x89PNG" and out.stat().st_size > 10_000
    from cube.render.maker import FigureMaker, PlotOptions

    maker = FigureMaker(zero_cube, options=PlotOptions(boot=30, front_cost="CVaR"))
    assert maker.front_setting() == "final_greedy" and maker.front().attrs["cost"] == "CVaR"
    fig = maker.figure("front")
    assert "CVaR" in fig.axes[0].get_xlabel() and "0.1" in fig.axes[0].get_xlabel()
