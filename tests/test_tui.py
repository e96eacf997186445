"""Pilot tests of saferl-tui: every view driven by key presses, content checked against cube.stats."""

from __future__ import annotations

import asyncio
import csv
import io
import json
import re
import shutil
from collections.abc import Awaitable, Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from rich.text import Text
from textual.pilot import Pilot
from textual.widgets import DataTable, Static

from cube import stats
from cube.cli import main as saferl_main
from cube.selection import Selection, parse_iterates
from cube.stats import curves
from cube.stats.metrics import SETTING
from saferl_tui.app import SaferlApp, build_app
from saferl_tui.screens.main import MainScreen
from saferl_tui.views import CdfView, ConditionsView, CurvesView, HistogramsView
from saferl_tui.widgets import LoadingPanel
from tests.tuiwait import until_quiet

BOOT = 40
SIZE = (120, 40)


# ----------------------------------------------------------------------------------------- helpers
@pytest.fixture(scope="module")
def cube_path(small_demo_cube: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A private copy of the session's small demo cube (the app may write its suffstats cache)."""
    dest = tmp_path_factory.mktemp("tui") / "cube.zarr"
    shutil.copytree(small_demo_cube, dest)
    return dest


async def settle(pilot: Pilot) -> None:
    """Wait until every worker has finished, the views show their data and the messages are handled."""
    await until_quiet(pilot)


async def loaded(pilot: Pilot) -> MainScreen:
    await settle(pilot)
    screen = pilot.app.main_screen  # type: ignore[attr-defined]
    return screen


def run_app(app: SaferlApp, scenario: Callable[[Pilot, MainScreen], Awaitable[Any]], size=SIZE) -> Any:
    async def go() -> Any:
        async with app.run_test(size=size) as pilot:
            screen = await loaded(pilot)
            return await scenario(pilot, screen)

    return asyncio.run(go())


async def press(pilot: Pilot, *keys: str) -> None:
    for k in keys:
        await pilot.press(k)
        await settle(pilot)


def cells(table: DataTable) -> list[list[str]]:
    """Plain text of every cell, row by row."""
    return [[c.plain if isinstance(c, Text) else str(c) for c in table.get_row_at(i)] for i in range(table.row_count)]


def static_text(screen: MainScreen, selector: str) -> str:
    return str(screen.query_one(selector, Static).render())


def agg_for(path: Path, sel: Selection) -> Any:
    ss = stats.select(stats.load_suffstats(path), sel)
    return stats.aggregate_table(ss, stats.SETTINGS, boot=BOOT, rng_seed=0)


def f2(x: float) -> str:
    """A value as the TUI shows it: 2 decimals, a zero unsigned (never -0.00)."""
    return "–" if not np.isfinite(x) else "0.00" if abs(x) < 0.005 else f"{x:.2f}"


def f2_signed(x: float) -> str:
    """A difference as the TUI shows it: signed with the ASCII minus, a zero unsigned."""
    return "0.00" if abs(x) < 0.005 else f"{x:+.2f}"


N_METRICS = len(stats.METRICS)  # the Summary's and Conditions' metric columns: the paper's five and CVaR


def name(cell: str) -> str:
    """An algorithm cell without the not-safe mark."""
    return cell.rstrip("†")


def check_summary(table: DataTable, agg: Any) -> None:
    """The IQM table shows ``agg``: one row per algorithm and setting (train, expl, greedy), the algorithm
    named on its first row, then the metrics (the paper's five and CVaR) and the tier."""
    rows = cells(table)
    assert [name(r[0]) for r in rows[::3]] == [str(a) for a in agg["algo"].values]
    for i, r in enumerate(rows):
        a, s = str(agg["algo"].values[i // 3]), stats.SETTINGS[i % 3]
        assert r[1] == SETTING[s].short  # train / expl / greedy
        expect = [f2(float(agg["value"].sel(algo=a, setting=s, metric=m))) for m in stats.METRICS]
        assert r[2:2 + N_METRICS] == expect
        assert r[2 + N_METRICS].split()[0] == str(int(agg["tier"].sel(algo=a, setting=s)))


def algo_rows(table: DataTable) -> list[str]:
    return [name(r[0]) for r in cells(table) if r[0]]


# ----------------------------------------------------------------------------------------- summary
def test_summary_equals_aggregate_table(cube_path: Path) -> None:
    async def scenario(pilot: Pilot, screen: MainScreen) -> None:
        agg = agg_for(cube_path, Selection())
        check_summary(screen.query_one("#summary-table", DataTable), agg)
        ci = cells(screen.query_one("#summary-ci", DataTable))
        for r in ci:
            for m, cell in zip(stats.METRICS, r[1:1 + N_METRICS], strict=True):
                p = agg.sel(algo=name(r[0]), setting="train", metric=m)
                assert cell == f"{f2(p['value'])}\n[{f2(p['ci_low'])}, {f2(p['ci_high'])}]"
        assert "Train" in static_text(screen, "#summary-ci-title")

    run_app(build_app(cube_path, boot=BOOT), scenario)


def test_summary_equals_saferl_report_json(cube_path: Path, tmp_path: Path) -> None:
    """The three settings of the Summary (and the greedy-expl gap) are what ``saferl report`` writes."""
    out = tmp_path / "report.json"
    assert saferl_main(["report", str(cube_path), "--format", "json", "--boot", str(BOOT), "--algos",
                        "ppo_lag,p3o,focops", "-o", str(out)]) == 0
    report = json.loads(out.read_text())
    gap_out = tmp_path / "gap.json"
    assert saferl_main(["report", str(cube_path), "--format", "json", "--boot", str(BOOT), "--algos",
                        "ppo_lag,p3o,focops", "--kind", "gap", "-o", str(gap_out)]) == 0
    gap = json.loads(gap_out.read_text())

    async def scenario(pilot: Pilot, screen: MainScreen) -> None:
        # deselect ppo with the keyboard: open the panel, toggle the first algorithm, close the panel
        await press(pilot, "f", "space", "escape")
        rows = cells(screen.query_one("#summary-table", DataTable))
        by = {}
        for i, r in enumerate(rows):
            by[(algo_rows(screen.query_one("#summary-table", DataTable))[i // 3], stats.SETTINGS[i % 3])] = r
        assert {a for a, _ in by} == {"ppo_lag", "p3o", "focops"}
        seen = set()
        for row in report["rows"]:
            r = by[(row["algo"], row["setting"])]
            seen.add(row["setting"])
            for i, m in enumerate(stats.METRICS):
                assert r[2 + i] == f2(row["metrics"][m]["value"])
            assert r[2 + N_METRICS].split()[0] == str(row["tier"])
        assert seen == set(stats.SETTINGS)
        gap_rows = {name(r[0]): r for r in cells(screen.query_one("#summary-gap", DataTable))}
        for row in gap["rows"]:
            v = row["value"] if "value" in row else row["metrics"][row["metric"]]["value"]
            cell = gap_rows[row["algo"]][1 + stats.METRICS.index(row["metric"])]
            assert cell.split()[0] == f2_signed(v)

    run_app(build_app(cube_path, boot=BOOT), scenario)


def test_deselecting_an_algorithm_removes_its_row(cube_path: Path) -> None:
    async def scenario(pilot: Pilot, screen: MainScreen) -> None:
        table = screen.query_one("#summary-table", DataTable)
        assert "ppo_lag" in algo_rows(table)
        await press(pilot, "f", "down", "space")
        assert algo_rows(table) == ["ppo", "p3o", "focops"]
        assert re.search(r"3 algos|3a×", str(screen.query_one("#infobar", Static).render()))  # the form that fits
        check_summary(table, agg_for(cube_path, Selection(algos=("ppo", "p3o", "focops"))))
        await press(pilot, "a")  # select all again
        assert algo_rows(table) == ["ppo", "ppo_lag", "p3o", "focops"]

    run_app(build_app(cube_path, boot=BOOT), scenario)


def test_switching_setting_changes_the_tables(cube_path: Path) -> None:
    async def scenario(pilot: Pilot, screen: MainScreen) -> None:
        agg = agg_for(cube_path, Selection())
        ci = screen.query_one("#summary-ci", DataTable)
        before = cells(ci)
        await press(pilot, "t")  # train -> final expl
        assert screen.selection is not None and screen.selection.setting == "final_expl"
        after = cells(ci)
        assert after != before
        for r in after:
            assert r[1].split("\n")[0] == f2(agg["value"].sel(algo=name(r[0]), setting="final_expl", metric="R"))
        check_summary(screen.query_one("#summary-table", DataTable), agg)
        assert "Final (expl)" in static_text(screen, "#summary-ci-title")
        await press(pilot, "2")
        title = static_text(screen, "#conditions-title")
        assert title.startswith("Final (expl)")

    run_app(build_app(cube_path, boot=BOOT), scenario)


def test_training_iterates_restrict_the_train_columns(cube_path: Path) -> None:
    async def scenario(pilot: Pilot, screen: MainScreen) -> None:
        await press(pilot, "f")
        screen.query_one("#sel-iterates").focus()
        await pilot.press(*"1:3")
        await press(pilot, "enter")
        assert screen.selection is not None and screen.selection.iterates == (1, 3)
        agg = agg_for(cube_path, Selection(iterates=(1, 3)))
        check_summary(screen.query_one("#summary-table", DataTable), agg)
        assert "iterates 1..3" in static_text(screen, "#summary-title")

    run_app(build_app(cube_path, boot=BOOT), scenario)


def test_empty_selection_shows_message_and_recovers(cube_path: Path) -> None:
    async def scenario(pilot: Pilot, screen: MainScreen) -> None:
        await press(pilot, "f", "n")
        view = screen.query_one("#view-summary")
        status = str(view.query_one(".view-status", Static).render())
        assert "selection is empty" in status
        assert view.has_class("-failed")
        await press(pilot, "a")
        assert not view.has_class("-failed")
        assert algo_rows(screen.query_one("#summary-table", DataTable)) == ["ppo", "ppo_lag", "p3o", "focops"]

    run_app(build_app(cube_path, boot=BOOT), scenario)


# ----------------------------------------------------------------------------------------- other views
def test_conditions_view_values_and_sorting(cube_path: Path) -> None:
    async def scenario(pilot: Pilot, screen: MainScreen) -> None:
        await press(pilot, "2")
        table = screen.query_one("#conditions-table", DataTable)
        ct = stats.condition_table(stats.load_suffstats(cube_path), stats.SETTINGS).sel(setting="train")
        rows = cells(table)
        assert len(rows) == ct.sizes["algo"] * ct.sizes["task"] * ct.sizes["bound"]
        for r in rows:
            p = ct.sel(algo=r[0], task=r[1], bound=float(r[2]))
            for i, m in enumerate(stats.METRICS):
                assert r[3 + i] == f"{f2(p[f'{m}_mean'])} ± {f2(p[f'{m}_std'])}"
            assert r[3 + N_METRICS] == str(int(p["n_seeds"])) + "‡"  # 3 seeds: fewer than 5, marked
        assert [r[0] for r in rows] == sorted(r[0] for r in rows)
        view = screen.query_one(ConditionsView)
        await press(pilot, *["greater_than_sign"] * 4)  # algo -> task -> bound -> R -> C
        assert view.sort_key == "C"
        costs = [float(r[4].split(" ± ")[0]) for r in cells(table)]
        assert costs == sorted(costs)
        await press(pilot, "r")
        costs = [float(r[4].split(" ± ")[0]) for r in cells(table)]
        assert costs == sorted(costs, reverse=True)

    run_app(build_app(cube_path, boot=BOOT), scenario)


def test_cdf_view_toggles_and_x_range(cube_path: Path) -> None:
    async def scenario(pilot: Pilot, screen: MainScreen) -> None:
        await press(pilot, "3")
        view = screen.query_one(CdfView)
        assert view.data is not None and view.xrange == (-1.0, 2.0)
        assert [w.display for w in view.query(".cdf-plot")] == [True, False, False]
        assert "κ -1..2" in static_text(screen, "#view-cdf .plot-title")
        await press(pilot, "right_square_bracket")
        assert view.xrange == (-1.0, 4.0) and "κ -1..4" in static_text(screen, "#view-cdf .plot-title")
        await press(pilot, "left_square_bracket", "left_square_bracket", "left_square_bracket")
        assert view.xrange == (-0.5, 0.5)  # both ends move
        await press(pilot, "p")
        assert [w.display for w in view.query(".cdf-plot")] == [True, True, True]
        shown = view.shown()
        assert float(shown["kappa"].max()) <= 0.5 and float(shown["kappa"].min()) >= -0.5
        assert list(shown["setting"].values) == list(stats.SETTINGS)
        ref = stats.cdf_curves(stats.load_suffstats(cube_path), stats.SETTINGS, boot=BOOT, rng_seed=0)
        np.testing.assert_allclose(shown["cdf"].values, ref["cdf"].sel(kappa=shown["kappa"]).values)

    run_app(build_app(cube_path, boot=BOOT), scenario)


def test_curves_view_condition_and_window(cube_path: Path) -> None:
    async def scenario(pilot: Pilot, screen: MainScreen) -> None:
        await press(pilot, "4")
        view = screen.query_one(CurvesView)
        title = "#view-curves .plot-title"
        assert "goal d=15 (1/4" in static_text(screen, title)
        await press(pilot, "c")
        assert "goal d=25 (2/4" in static_text(screen, title)
        await press(pilot, "j", "k")  # vim keys: next, previous
        assert "goal d=25 (2/4" in static_text(screen, title)
        await press(pilot, "plus", "plus")
        assert view.window == 3 and "smoothed over 3 iterates" in static_text(screen, title)
        cur, mult, cond = view.shown()  # type: ignore[misc]
        assert cond == ("goal", 25.0)
        im = stats.iterate_metrics(stats.load_suffstats(cube_path))
        r = im["R"].sel(task="goal", bound=25.0).transpose("algo", "seed", "iterate").values
        smooth = curves.moving_average(r, 3)
        np.testing.assert_allclose(cur["R_mean"].values, smooth.mean(axis=1), rtol=1e-9)
        np.testing.assert_allclose(cur["R_std"].values, smooth.std(axis=1, ddof=1), rtol=1e-9)
        assert mult is not None and np.isnan(mult["mult_mean"].sel(algo="ppo").values).all()
        await press(pilot, "minus", "minus", "minus")
        assert view.window == 1

    run_app(build_app(cube_path, boot=BOOT), scenario)


def test_histograms_view_counts(cube_path: Path) -> None:
    async def scenario(pilot: Pilot, screen: MainScreen) -> None:
        await press(pilot, "5")
        view = screen.query_one(HistogramsView)
        (task, bound), panels = view.data
        assert (task, bound) == ("goal", 15.0)
        assert len(view.query(".hist-plot")) == 4
        for p in panels.values():
            assert p.counts["expl"].sum() == p.counts["greedy"].sum() == 3 * 10  # 3 seeds x 10 final episodes
            assert p.n_episodes["expl"] == 30
        safe = [p.edges for a, p in panels.items() if a != "ppo"]  # one x scale for the safe algorithms
        assert all(np.array_equal(e, safe[0]) for e in safe)
        await press(pilot, "C")  # previous wraps to the last condition
        assert view.data[0] == ("circle", 25.0)
        await press(pilot, "plus")
        assert view.bins == 25
        assert view.data[1]["ppo"].edges.size == 26
        # fewer algorithms -> fewer plots
        await press(pilot, "f", "space", "escape", "5")
        assert len(view.query(".hist-plot")) == 3

    run_app(build_app(cube_path, boot=BOOT), scenario)


def test_runs_view(cube_path: Path) -> None:
    async def scenario(pilot: Pilot, screen: MainScreen) -> None:
        await press(pilot, "6")
        rows = cells(screen.query_one("#runs-table", DataTable))
        assert len(rows) == 4 * 2 * 2 * 3
        assert {r[4] for r in rows} == {"complete"}
        assert rows[0][:4] == ["ppo", "goal", "15", "0"]
        assert "48 runs · complete: 48" in static_text(screen, "#runs-title")
        await press(pilot, "greater_than_sign")
        assert screen.query_one("#view-runs").sort_key == "steps"

    run_app(build_app(cube_path, boot=BOOT), scenario)


# ----------------------------------------------------------------------------------------- export
def read_csv(path: Path) -> tuple[dict, list[dict]]:
    """(selection recorded in the first comment line, rows) of an exported CSV."""
    first, _, rest = path.read_text().partition("\n")
    assert first.startswith("# saferl-tui selection: ")
    return json.loads(first.removeprefix("# saferl-tui selection: ")), list(csv.DictReader(io.StringIO(rest)))


def test_export_summary_matches_screen(cube_path: Path, tmp_path: Path) -> None:
    async def scenario(pilot: Pilot, screen: MainScreen) -> list[list[str]]:
        await press(pilot, "e")
        return cells(screen.query_one("#summary-table", DataTable))

    app = build_app(cube_path, boot=BOOT, export_dir=tmp_path)
    shown = run_app(app, scenario)
    assert sorted(Path(p).name for p in app.last_export) == [
        "saferl_summary_gap_train_4a2t2b3s.csv", "saferl_summary_gap_train_4a2t2b3s.tex",
        "saferl_summary_train_4a2t2b3s.csv", "saferl_summary_train_4a2t2b3s.tex"]
    meta, rows = read_csv(tmp_path / "saferl_summary_train_4a2t2b3s.csv")
    assert meta["view"] == "summary" and meta["algos"] == ["ppo", "ppo_lag", "p3o", "focops"]
    assert meta["setting"] == "train" and meta["not_safe"] == ["ppo"] and meta["boot"] == BOOT
    by = {(r["algo"], r["setting"], r["metric"]): r for r in rows}

    def tier(algo: str, setting: str) -> str:
        """The tier as written by cube.render.text (a tier column, or a row with metric 'tier')."""
        if (algo, setting, "tier") in by:
            return str(int(float(by[(algo, setting, "tier")]["value"])))
        return by[(algo, setting, "R")]["tier"]

    assert {r["setting"] for r in rows} == set(stats.SETTINGS)  # what the screen shows
    algos = [name(r[0]) for r in shown if r[0]]
    for i, row in enumerate(shown):
        a, s = algos[i // 3], stats.SETTINGS[i % 3]
        for j, m in enumerate(stats.METRICS):
            assert row[2 + j] == f2(float(by[(a, s, m)]["value"]))
        assert row[2 + N_METRICS].split()[0] == tier(a, s)
    tex = (tmp_path / "saferl_summary_train_4a2t2b3s.tex").read_text()
    assert tex.startswith("% saferl-tui selection: {") and "\\begin{tabular}" in tex and shown[1][2] in tex


def test_exports_never_overwrite_and_carry_the_selection(cube_path: Path, tmp_path: Path) -> None:
    async def scenario(pilot: Pilot, screen: MainScreen) -> None:
        await press(pilot, "6", "e", "e", "s", "s")
        await press(pilot, "f", "space", "escape", "t", "e")  # another selection: another tag

    app = build_app(cube_path, boot=BOOT, export_dir=tmp_path)
    run_app(app, scenario)
    names = sorted(p.name for p in tmp_path.iterdir())
    full = [n for n in names if "_train_4a2t2b3s" in n]
    assert full == sorted(f"saferl_runs_train_4a2t2b3s{k}.{e}" for k in ("", "-2") for e in ("csv", "tex", "svg"))
    other = [n for n in names if n.startswith("saferl_runs_expl_3a2t2b3s-")]
    assert len(other) == 2, names  # CSV and LaTeX, tagged with setting, sizes and a hash
    meta, rows = read_csv(tmp_path / [n for n in other if n.endswith(".csv")][0])
    assert meta["algos"] == ["ppo_lag", "p3o", "focops"] and meta["setting"] == "final_expl"
    assert meta["view_params"]["sort"] == "status" and len(rows) == 36
    svg = (tmp_path / "saferl_runs_train_4a2t2b3s.svg").read_text()
    assert svg.lstrip().startswith("<svg") and "<!-- saferl-tui selection: {" in svg


def test_exports_go_through_the_atomic_writer_and_step_over_planted_links(cube_path: Path, tmp_path: Path) -> None:
    """A dangling link planted under the export's name is never followed nor replaced: the export takes the
    next free name, whole, and leaves no temporary file."""
    (tmp_path / "saferl_runs_train_4a2t2b3s.csv").symlink_to(tmp_path / "elsewhere.csv")

    async def scenario(pilot: Pilot, screen: MainScreen) -> None:
        await press(pilot, "6", "e")

    run_app(build_app(cube_path, boot=BOOT, export_dir=tmp_path), scenario)
    assert not (tmp_path / "elsewhere.csv").exists()
    names = sorted(p.name for p in tmp_path.iterdir())
    assert names == ["saferl_runs_train_4a2t2b3s-2.csv", "saferl_runs_train_4a2t2b3s-2.tex",
                     "saferl_runs_train_4a2t2b3s.csv"], names
    meta, rows = read_csv(tmp_path / "saferl_runs_train_4a2t2b3s-2.csv")
    assert meta["view"] == "runs" and len(rows) == 48


def test_export_conditions_curves_histograms_runs(cube_path: Path, tmp_path: Path) -> None:
    async def scenario(pilot: Pilot, screen: MainScreen) -> dict:
        out = {}
        await press(pilot, "2", "e")
        out["conditions"] = cells(screen.query_one("#conditions-table", DataTable))
        await press(pilot, "3", "e", "4", "e", "5", "e", "6", "e")
        out["curves"] = screen.query_one(CurvesView).shown()
        out["hist"] = screen.query_one(HistogramsView).data
        return out

    app = build_app(cube_path, boot=BOOT, export_dir=tmp_path)
    shown = run_app(app, scenario)
    names = sorted(p.name for p in tmp_path.iterdir())
    tag = "train_4a2t2b3s"
    assert names == sorted(f"saferl_{w}_{tag}.{e}" for w in ("conditions", "cdf", "curves_goal_d15", "hist_goal_d15",
                                                            "runs") for e in ("csv", "tex"))
    meta, cond = read_csv(tmp_path / f"saferl_conditions_{tag}.csv")
    assert {r["setting"] for r in cond} == {"train"} and meta["view"] == "conditions"
    for row in shown["conditions"]:
        here = [r for r in cond if (r["algo"], r["task"], float(r["bound"])) == (row[0], row[1], float(row[2]))]
        for i, m in enumerate(stats.METRICS):
            if "metric" in cond[0]:  # long format: one row per metric with mean and std
                (hit,) = [r for r in here if r["metric"] == m]
                mean, std = float(hit["mean"]), float(hit["std"])
            else:  # wide format: {m}_mean, {m}_std columns
                (hit,) = here
                mean, std = float(hit[f"{m}_mean"]), float(hit[f"{m}_std"])
            assert row[3 + i] == f"{f2(mean)} ± {f2(std)}"
    meta, cdf = read_csv(tmp_path / f"saferl_cdf_{tag}.csv")
    assert max(float(r["kappa"]) for r in cdf) <= 2.0 and {r["setting"] for r in cdf} == {"train"}
    assert meta["view_params"]["kappa_range"] == [-1.0, 2.0]
    meta, curves = read_csv(tmp_path / f"saferl_curves_goal_d15_{tag}.csv")
    assert meta["view_params"]["condition"] == {"task": "goal", "bound": 15.0}
    cur = shown["curves"][0]
    assert len(curves) == cur.sizes["algo"] * cur.sizes["iterate"]
    assert float(curves[0]["R_mean"]) == pytest.approx(float(cur["R_mean"].isel(algo=0, iterate=0)))
    _, hist = read_csv(tmp_path / f"saferl_hist_goal_d15_{tag}.csv")
    (_, _), panels = shown["hist"]
    assert sum(int(r["expl"]) for r in hist if r["algo"] == "ppo") == panels["ppo"].counts["expl"].sum()
    _, runs = read_csv(tmp_path / f"saferl_runs_{tag}.csv")
    assert len(runs) == 48 and runs[0]["status"] == "complete"


def test_screenshot_and_help(cube_path: Path, tmp_path: Path) -> None:
    async def scenario(pilot: Pilot, screen: MainScreen) -> list[list[str]]:
        await press(pilot, "s")
        await press(pilot, "question_mark")
        rows = cells(pilot.app.screen.query_one("#help-table", DataTable))
        await press(pilot, "escape")
        assert pilot.app.screen is screen
        return rows

    app = build_app(cube_path, boot=BOOT, export_dir=tmp_path)
    rows = run_app(app, scenario)
    svg = tmp_path / "saferl_summary_train_4a2t2b3s.svg"
    assert svg.exists() and svg.read_text().lstrip().startswith("<svg")
    actions = {r[2] for r in rows}
    from saferl_tui.views import VIEW_CLASSES
    from saferl_tui.widgets import PickList

    every = list(MainScreen.BINDINGS) + list(PickList.BINDINGS) + list(SaferlApp.BINDINGS)
    for cls in VIEW_CLASSES:
        every += list(getattr(cls, "BINDINGS", []))
    for b in every:
        assert b.description in actions  # type: ignore[union-attr]
    assert len(rows) >= len(every)


def test_command_palette_switches_view(cube_path: Path) -> None:
    async def scenario(pilot: Pilot, screen: MainScreen) -> None:
        await press(pilot, "ctrl+p")
        await pilot.press(*"Runs")
        await settle(pilot)
        await press(pilot, "enter")
        assert screen.active_view().VIEW_ID == "runs"
        assert screen.query_one("#runs-table", DataTable).row_count == 48

    run_app(build_app(cube_path, boot=BOOT), scenario)


def test_baseline_gives_deltas_and_best_skips_not_safe(cube_path: Path) -> None:
    """b sets the baseline (Δ columns against it); "best" never picks a not-safe algorithm (PPO by
    default: it has no multiplier), whatever the baseline; the not-safe set can be changed."""

    def bold(table: DataTable) -> dict[tuple[str, int], str]:
        """(setting, metric column) -> the algorithm whose cell is bold."""
        out = {}
        algos = algo_rows(table)
        for i in range(table.row_count):
            for j, c in enumerate(table.get_row_at(i)[2:2 + N_METRICS]):
                if "bold" in str(c.style):
                    out[(stats.SETTINGS[i % 3], j)] = algos[i // 3]
        return out

    async def scenario(pilot: Pilot, screen: MainScreen) -> None:
        assert screen.selection is not None and screen.selection.baseline is None
        assert screen.selection.not_safe == ("ppo",)
        table = screen.query_one("#summary-table", DataTable)
        agg = agg_for(cube_path, Selection())
        best = bold(table)
        assert "ppo" not in best.values() and len(best) == 3 * N_METRICS
        for (s, j), a in best.items():
            m = stats.METRICS[j]
            vals = {x: float(agg["value"].sel(algo=x, setting=s, metric=m)) for x in ("ppo_lag", "p3o", "focops")}
            assert vals[a] == (max if m == "R" else min)(vals.values())
        await press(pilot, "b", "b")
        assert screen.selection.baseline == "ppo_lag"
        assert re.search(r"base(line)? ppo_lag", str(screen.query_one("#infobar", Static).render()))  # as fits
        assert "ppo" not in bold(table).values()  # the baseline does not change "best"
        delta = cells(screen.query_one("#summary-delta", DataTable))  # its own table, never beside the IQMs
        assert [name(r[0]) for r in delta if r[0]] == ["ppo", "p3o", "focops"]
        d = float(agg["value"].sel(algo="ppo", setting="train", metric="R") -
                  agg["value"].sel(algo="ppo_lag", setting="train", metric="R"))
        assert delta[0][2].split("\n")[0] == f2_signed(d)
        # mark ppo safe in the selection panel: it may now be best
        await press(pilot, "f")
        screen.query_one("#sel-not_safe").focus()
        await press(pilot, "space", "escape")
        assert screen.selection.not_safe == ()
        assert bold(table)[("train", 0)] == "ppo"  # the demo's PPO has the highest reward

    run_app(build_app(cube_path, boot=BOOT), scenario)


# ----------------------------------------------------------------------------------------- robustness
def _failed_text(path: Path) -> str:
    async def scenario(pilot: Pilot, screen: MainScreen) -> str:
        panel = screen.query_one(LoadingPanel)
        assert panel.display and panel.has_class("-error")
        assert not screen.query_one("#tabs").display
        await press(pilot, "1", "e", "t")  # keys do nothing harmful
        assert pilot.app.is_running
        return str(panel.query_one("#loading-text").render())

    return run_app(build_app(path, boot=BOOT), scenario)


def test_missing_path_shows_message(tmp_path: Path) -> None:
    assert "does not exist" in _failed_text(tmp_path / "nope.zarr")


def test_not_a_cube_shows_message(tmp_path: Path) -> None:
    (tmp_path / "dir").mkdir()
    assert "not a Zarr store" in _failed_text(tmp_path / "dir")


def test_corrupt_store_shows_message(cube_path: Path, tmp_path: Path) -> None:
    bad = tmp_path / "bad.zarr"
    shutil.copytree(cube_path, bad)
    (bad / "zarr.json").write_text("{ this is not json")
    text = _failed_text(bad)
    assert "Cannot open the cube" in text and "bad.zarr" in text


def test_open_another_path_after_failure(cube_path: Path, tmp_path: Path) -> None:
    async def scenario(pilot: Pilot, screen: MainScreen) -> None:
        await press(pilot, "o")
        field = pilot.app.screen.query_one("#open-path")
        field.value = str(cube_path)  # type: ignore[attr-defined]
        await press(pilot, "enter")
        await settle(pilot)
        main = pilot.app.main_screen  # type: ignore[attr-defined]
        assert main is not screen and main.model.info is not None
        assert main.query_one("#summary-table", DataTable).row_count == 12

    run_app(build_app(tmp_path / "missing.zarr", boot=BOOT), scenario)


def test_screen_gets_settings_from_the_app_and_passes_them_on(cube_path: Path, tmp_path: Path) -> None:
    """export_dir and scheduler go down into every main screen; the demo builder only into the first."""
    built: list[str] = []

    def builder(path: str, progress: Callable[[int, int], None]) -> None:
        built.append(path)
        raise RuntimeError("no demo here")

    async def scenario(pilot: Pilot, screen: MainScreen) -> None:
        assert (screen.export_dir, screen.scheduler) == (tmp_path, "tcp://sched:8786")
        assert screen.demo_builder is builder and built == [str(tmp_path / "first.zarr")]
        await press(pilot, "o")
        pilot.app.screen.query_one("#open-path").value = str(cube_path)  # type: ignore[attr-defined]
        await press(pilot, "enter")
        main = pilot.app.main_screen  # type: ignore[attr-defined]
        assert main is not screen and (main.export_dir, main.scheduler) == (tmp_path, "tcp://sched:8786")
        assert main.demo_builder is None and built == [str(tmp_path / "first.zarr")]
        assert main.query_one("#summary-table", DataTable).row_count == 12

    run_app(build_app(tmp_path / "first.zarr", boot=BOOT, export_dir=tmp_path, demo_builder=builder,
                      scheduler="tcp://sched:8786"), scenario)


def test_open_failing_keeps_the_cube_and_selection(cube_path: Path, tmp_path: Path) -> None:
    (tmp_path / "other.zarr").mkdir()
    (tmp_path / "notes.txt").write_text("x")

    async def scenario(pilot: Pilot, screen: MainScreen) -> None:
        await press(pilot, "f", "space", "escape", "t")  # a selection worth keeping
        sel = screen.selection
        await press(pilot, "o")
        box = pilot.app.screen
        field = box.query_one("#open-path")
        field.value = str(tmp_path / "missng.zarr")  # type: ignore[attr-defined]
        await press(pilot, "enter")
        assert pilot.app.screen is box  # the box stays, with the error and the path to correct
        assert "does not exist" in str(box.query_one("#open-status").render())
        assert field.value == str(tmp_path / "missng.zarr")  # type: ignore[attr-defined]
        field.value = str(tmp_path / "ot")  # type: ignore[attr-defined]
        await press(pilot, "tab")  # completion
        assert field.value == str(tmp_path / "other.zarr")  # type: ignore[attr-defined]
        await press(pilot, "enter")  # an empty directory: not a cube
        assert pilot.app.screen is box and "Cannot open" in str(box.query_one("#open-status").render())
        await press(pilot, "escape")
        assert pilot.app.main_screen is screen and screen.selection == sel  # type: ignore[attr-defined]
        assert screen.model.path == str(cube_path) and len(algo_rows(screen.query_one("#summary-table"))) == 3

    run_app(build_app(cube_path, boot=BOOT), scenario)


def partial_cube(cube_path: Path, dest: Path) -> Path:
    """A copy of the cube with ppo_lag goal d=15 seed 1 partial and p3o circle d=25 seed 0 pending."""
    from cube import CubeWriter, RunKey

    shutil.copytree(cube_path, dest)
    writer = CubeWriter(dest)
    writer.set_run_manifest(RunKey("ppo_lag", "goal", 15.0, 1), status="partial", manifest={"config": {}})
    writer.set_run_manifest(RunKey("p3o", "circle", 25.0, 0), status="pending", manifest={"config": {}})
    return dest


def test_incomplete_runs_are_flagged_and_filterable(cube_path: Path, tmp_path: Path) -> None:
    path = partial_cube(cube_path, tmp_path / "partial.zarr")

    async def scenario(pilot: Pilot, screen: MainScreen) -> None:
        assert "◐ 2 incomplete runs included, latest iterate as final (6 Runs)" in static_text(screen, "#summary-title")
        await press(pilot, "2")
        assert "◐ 2 incomplete runs" in static_text(screen, "#conditions-title")
        rows = cells(screen.query_one("#conditions-table", DataTable))
        marked = {(r[0], r[1], r[2]) for r in rows if r[-1].startswith("◐")}
        assert marked == {("ppo_lag", "goal", "15"), ("p3o", "circle", "25")}
        await press(pilot, "3")
        assert "◐ 2 incomplete" in static_text(screen, "#view-cdf .plot-title")
        await press(pilot, "4")
        assert "◐ 1 incomplete run" in static_text(screen, "#view-curves .plot-title")  # goal d=15
        await press(pilot, "6")
        table = screen.query_one("#runs-table", DataTable)
        rows = cells(table)
        assert [r[4] for r in rows[:2]] == ["pending", "partial"]  # incomplete first
        await press(pilot, "slash")
        await pilot.press(*"status:part")
        await settle(pilot)
        assert [r[:5] for r in cells(table)] == [["ppo_lag", "goal", "15", "1", "partial"]]
        await press(pilot, "enter")  # keep the filter, back to the table
        assert isinstance(pilot.app.focused, DataTable)
        await press(pilot, "slash")
        await pilot.press("ctrl+u", *"algo:p3o circle")  # several terms: all must match
        await settle(pilot)
        assert len(cells(table)) == 6 and "6 of 48 rows" in static_text(screen, "#runs-title")
        await press(pilot, "escape")  # clears the filter
        assert len(cells(table)) == 48

    run_app(build_app(path, boot=BOOT), scenario)


def test_enter_on_a_conditions_row_opens_its_curves(cube_path: Path) -> None:
    async def scenario(pilot: Pilot, screen: MainScreen) -> None:
        await press(pilot, "2", "j", "j", "j", "enter")  # rows sorted by algo: focops goal 15, 25, circle 15, 25
        assert screen.active_view().VIEW_ID == "curves"
        row = cells(screen.query_one("#conditions-table", DataTable))[3]
        assert screen.query_one(CurvesView).condition() == (row[1], float(row[2]))
        await press(pilot, "5")
        assert screen.query_one(HistogramsView).data[0] == (row[1], float(row[2]))

    run_app(build_app(cube_path, boot=BOOT), scenario)


def test_enter_on_a_conditions_row_never_leaves_curves_computing(cube_path: Path) -> None:
    """Enter asks Curves and Histograms for data at once (Curves not shown before): both requests are
    answered; one never cancels the other (the Curves view used to say "computing ..." forever)."""
    async def scenario(pilot: Pilot, screen: MainScreen) -> None:
        await press(pilot, "2", "enter")
        assert screen.active_view().VIEW_ID == "curves"
        curves, hists = screen.query_one(CurvesView), screen.query_one(HistogramsView)
        assert curves.is_current() and curves.shown() is not None
        assert hists.is_current() and hists.data[0] == hists.condition() == curves.condition()
        assert not screen.busy

    run_app(build_app(cube_path, boot=BOOT), scenario)


def test_curves_follow_the_setting_and_env_steps(cube_path: Path) -> None:
    async def scenario(pilot: Pilot, screen: MainScreen) -> None:
        await press(pilot, "4")
        view = screen.query_one(CurvesView)
        assert view.mode() == "train"
        await press(pilot, "t")  # final expl: the expl evaluations per evaluated iterate
        assert view.mode() == "expl" and view.is_current()
        cur = view.shown()[0]
        im = stats.iterate_metrics(stats.load_suffstats(cube_path), mode="expl")
        evaluated = [int(j) for j in im["iterate"].values if np.isfinite(im["R"].sel(iterate=j).values).any()]
        assert [int(j) for j in cur["iterate"].values] == evaluated
        assert "expl evaluations at" in static_text(screen, "#view-curves .plot-title")
        await press(pilot, "t", "t", "x")
        assert view.by_steps and "x: env steps (x)" in static_text(screen, "#view-curves .plot-title")
        steps = view.data[2]
        assert steps is not None and float(steps.isel(iterate=0).mean()) > 0

    run_app(build_app(cube_path, boot=BOOT), scenario)


def test_each_key_has_one_meaning() -> None:
    """No key is bound to two actions across the app, the main screen and the views (a view's key may
    only repeat another view's key with the same action)."""
    from saferl_tui.views import VIEW_CLASSES
    from saferl_tui.views.table import NAV_BINDINGS

    meaning: dict[str, set[str]] = {}
    for bindings in [SaferlApp.BINDINGS, MainScreen.BINDINGS, NAV_BINDINGS,
                     *[getattr(cls, "BINDINGS", []) for cls in VIEW_CLASSES]]:
        for b in bindings:
            for key in b.key.split(","):  # type: ignore[union-attr]
                meaning.setdefault(key, set()).add(b.action.split("(")[0])  # type: ignore[union-attr]
    clashes = {k: v for k, v in meaning.items() if len(v) > 1}
    # j/k: move down/up (a table row, or the condition of a plot view)
    allowed = {"j": {"cursor_down", "next_condition"}, "k": {"cursor_up", "prev_condition"},
               "down": {"next_condition"}, "up": {"prev_condition"}}
    assert all(v <= allowed.get(k, set()) for k, v in clashes.items()), clashes
    assert "o" in meaning and meaning["o"] == {"open_path"}


@pytest.mark.parametrize("size", [(80, 24), (60, 20)])
def test_key_bar_puts_help_first(cube_path: Path, size: tuple[int, int]) -> None:
    async def scenario(pilot: Pilot, screen: MainScreen) -> None:
        for key in "123456":
            await press(pilot, key)
            text = str(screen.query_one("#keybar").render())
            assert text.lstrip().startswith("?  Help") and " f " in text and " e " in text and " q " in text
            # only whole entries: the bar never ends in a key without its label (a bare `b` at 80x24)
            assert len(text.rstrip()) <= size[0] and len(text.split()[-1]) > 2, text

    run_app(build_app(cube_path, boot=BOOT), scenario, size=size)


def test_narrow_terminal_shows_one_plot_at_a_time(cube_path: Path) -> None:
    async def scenario(pilot: Pilot, screen: MainScreen) -> None:
        await press(pilot, "4")
        view = screen.query_one(CurvesView)
        shown = [w.id for w in view.panels() if w.display]
        assert shown == ["curves-reward"]
        assert "too small for all 3 plots" in static_text(screen, "#view-curves .plot-note")
        await press(pilot, "p")
        assert [w.id for w in view.panels() if w.display] == ["curves-cost"]
        await press(pilot, "5")
        hist = screen.query_one(HistogramsView)
        assert sum(w.display for w in hist.panels()) == 1
        await pilot.resize_terminal(120, 40)
        await settle(pilot)
        assert sum(w.display for w in hist.panels()) == 4
        await press(pilot, "4")
        assert view.panel == 1  # p chose the cost plot alone; p again goes on to the next
        await press(pilot, "p", "p")
        assert all(w.display for w in view.panels())

    run_app(build_app(cube_path, boot=BOOT), scenario, size=(60, 20))


def test_demo_builder_runs_when_path_is_missing(tmp_path: Path) -> None:
    from cube.io.demo import make_demo_cube

    def builder(path: str, progress: Callable[[int, int], None]) -> None:
        make_demo_cube(path, tasks=("goal",), bounds=(25.0,), n_seeds=2, n_iterates=3, n_train_episodes=8,
                       n_eval_episodes=5, progress=progress)

    async def scenario(pilot: Pilot, screen: MainScreen) -> None:
        assert screen.model.info is not None and screen.model.info.synthetic
        assert "SYNTHETIC" in str(screen.query_one("#infobar", Static).render())
        assert screen.query_one("#summary-table", DataTable).row_count == 12

    run_app(build_app(tmp_path / "demo.zarr", boot=BOOT, demo_builder=builder), scenario)


def test_small_terminal_80x24(cube_path: Path) -> None:
    async def scenario(pilot: Pilot, screen: MainScreen) -> None:
        for key in "123456":
            await press(pilot, key)
            assert screen.active_view().data is not None
        assert pilot.app.size == (80, 24)

    run_app(build_app(cube_path, boot=BOOT), scenario, size=(80, 24))


@pytest.mark.parametrize(("text", "expect"), [("", None), ("all", None), ("7", 7), ("2:5", (2, 5)),
                                              (" 1-3 ", (1, 3))])
def test_parse_iterates(text: str, expect: object) -> None:
    assert parse_iterates(text, 10) == expect


@pytest.mark.parametrize("text", ["x", "5:2", "-1", "3:", "12"])
def test_parse_iterates_rejects(text: str) -> None:
    from cube.errors import CubeError

    with pytest.raises(CubeError):
        parse_iterates(text, 10)


def test_selection_model_describe() -> None:
    from saferl_tui.selection import UISelection

    sel = UISelection(("a", "b"), ("t",), (15.0, 25.0), (0, 1, 2), iterates=(2, 4))
    assert sel.n_runs == 12
    assert sel.describe().startswith("2 algos × 1 tasks × 2 bounds × 3 seeds = 12 runs · Train · iterates 2:4")
    assert sel.describe_short() == "2a×1t×2b×3s=12 · train · it 2:4"
    assert sel.tag() .startswith("train_it2-4_2a1t2b3s-") and len(sel.tag()) == len("train_it2-4_2a1t2b3s-") + 6
    assert replace(sel, setting="final_expl").final_setting == "final_expl"
    assert sel.cube_selection() == Selection(("a", "b"), ("t",), (15.0, 25.0), (0, 1, 2), (2, 4))


def test_cli_help_and_bad_boot(capsys: pytest.CaptureFixture[str]) -> None:
    from saferl_tui.cli import main, parser

    assert "demo cube" in parser().format_help()
    assert main(["x.zarr", "--boot", "0"]) == 2
    assert "--boot" in capsys.readouterr().err


def test_load_can_be_cancelled_during_the_first_pass(cube_path: Path, tmp_path: Path) -> None:
    from saferl_tui.model import CubeModel, LoadCancelled

    fresh = tmp_path / "fresh.zarr"
    shutil.copytree(cube_path, fresh)
    shutil.rmtree(fresh / "_derived", ignore_errors=True)  # force the first pass

    def cancel(fraction: float, text: str) -> None:
        raise LoadCancelled

    with pytest.raises(LoadCancelled):
        CubeModel(fresh).load(cancel)
    assert not (fresh / "_derived" / "suffstats").exists()
    seen: list[float] = []
    info = CubeModel(fresh).load(lambda f, t: seen.append(f))
    assert info.algos == ("ppo", "ppo_lag", "p3o", "focops") and seen and seen[-1] == 1.0


def test_build_demo_is_atomic(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from saferl_tui import cli

    def failing(path: Path, **kwargs: object) -> None:
        Path(path).mkdir()
        raise RuntimeError("interrupted")

    monkeypatch.setattr("cube.io.demo.make_demo_cube", failing)
    target = tmp_path / "cache" / "demo.zarr"
    with pytest.raises(RuntimeError):
        cli.build_demo(str(target), lambda d, t: None)
    assert not target.exists() and (tmp_path / "cache" / "demo.zarr.partial").exists()
    monkeypatch.setattr("cube.io.demo.make_demo_cube", lambda path, **kw: Path(path).mkdir())
    cli.build_demo(str(target), lambda d, t: None)
    assert target.is_dir() and not (tmp_path / "cache" / "demo.zarr.partial").exists()


def test_demo_path_prefers_local_demo(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from saferl_tui import cli

    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert cli.demo_path() == tmp_path / "xdg" / "saferl" / "demo.zarr"
    (tmp_path / "demo" / "results.zarr").mkdir(parents=True)
    assert cli.demo_path() == Path("demo") / "results.zarr"


def test_netcdf_cube_every_view(cube_path: Path, tmp_path: Path) -> None:
    from cube import export_netcdf

    nc = export_netcdf(cube_path, tmp_path / "cube.nc")

    async def scenario(pilot: Pilot, screen: MainScreen) -> None:
        check_summary(screen.query_one("#summary-table", DataTable), agg_for(cube_path, Selection()))
        for key in "23456":
            await press(pilot, key)
            view = screen.active_view()
            assert view.data is not None and not view.has_class("-failed"), key
        assert len(cells(screen.query_one("#runs-table", DataTable))) == 48

    run_app(build_app(nc, boot=BOOT), scenario)


def test_stale_data_is_never_redrawn_or_exported(cube_path: Path, tmp_path: Path) -> None:
    async def scenario(pilot: Pilot, screen: MainScreen) -> None:
        await press(pilot, "3")
        view = screen.query_one(CdfView)
        assert view.is_current()
        view.all_panels = True  # a parameter change whose data has not arrived yet
        assert not view.is_current()
        view.action_wider()  # must not draw the one-setting data as three panels
        assert view.xmax == 4.0
        await pilot.press("e")
        await pilot.pause()
        assert pilot.app.last_export == []  # type: ignore[attr-defined]
        view.request_data()
        await settle(pilot)
        assert view.is_current() and list(view.data["setting"].values) == list(stats.SETTINGS)

    run_app(build_app(cube_path, boot=BOOT, export_dir=tmp_path), scenario)


# ------------------------------------------------------------------------------------------ figures
def test_figure_key_writes_a_pdf_next_to_the_cube_never_overwriting(small_demo_cube: Path, tmp_path: Path) -> None:
    """`P` (and the palette command) writes the current view's paper figure as a PDF into the export
    folder (where `e` and `s` write; beside the cube by default), says where, and a second press writes a
    second file."""
    pytest.importorskip("matplotlib")
    cube = tmp_path / "mine.zarr"
    shutil.copytree(small_demo_cube, cube)

    async def scenario(pilot: Pilot, screen: MainScreen) -> list[str]:
        written = []
        for view in ("1", "3", "4"):
            await press(pilot, view, "P")
            written += list(pilot.app.last_export)  # type: ignore[attr-defined]
        await press(pilot, "P")
        written += list(pilot.app.last_export)  # type: ignore[attr-defined]
        return written

    written = run_app(build_app(cube, boot=BOOT, export_dir=tmp_path / "exports"), scenario)
    names = [Path(p).name for p in written]
    folder = tmp_path / "exports"
    assert all(Path(p).parent == folder and Path(p).read_bytes().startswith(b"%PDF") for p in written)
    assert names[0].startswith("intervals_") and names[1].startswith("cdf_") and names[2].startswith("curves_")
    assert len(set(names)) == 4 and names[3].startswith("curves_") and names[3].endswith("-2.pdf")


def test_learning_view_equals_the_stats_function(cube_path: Path) -> None:
    """View 7 draws `stats.aggregate_learning_curve` of the selection (the numbers behind the plots)."""
    async def scenario(pilot: Pilot, screen: MainScreen) -> Any:
        await press(pilot, "7")
        return screen.active_view().data

    shown = run_app(build_app(cube_path, boot=BOOT), scenario)
    expect = stats.aggregate_learning_curve(stats.load_suffstats(cube_path), boot=BOOT)
    np.testing.assert_allclose(shown["value"].values, expect["value"].values, equal_nan=True)
    np.testing.assert_allclose(shown["ci_low"].values, expect["ci_low"].values, equal_nan=True)


def test_every_output_of_the_tui_lands_next_to_the_cube_and_shows_what_the_view_shows(cube_path: Path) -> None:
    """`e`, `s` and `P` write to one folder, `<cube>-figures/` (as `saferl plot`), unless --export-dir;
    `P` draws the settings and the condition on screen (one CDF setting; the highlighted run's curves)."""
    from cube.outputs import figures_folder

    async def scenario(pilot: Pilot, screen: MainScreen) -> None:
        assert screen.output_dir == figures_folder(cube_path)
        await press(pilot, "s")
        shots = list(figures_folder(cube_path).glob("saferl_summary_*.svg"))
        assert len(shots) == 1
        await press(pilot, "3")
        assert screen.active_view().figure_settings() == (screen.selection.setting,)
        await press(pilot, "6", "j", "j", "j")
        view = screen.active_view()
        row = view.shown_rows()[3]
        assert view.figure_condition() == (row["task"], float(row["bound"]))
        assert screen.view("summary").figure_settings() is None  # the Summary shows every setting
        for shot in shots:
            shot.unlink()

    run_app(build_app(cube_path, boot=BOOT), scenario)


def test_r_shows_the_papers_numbers_beside_the_cube(cube_path: Path) -> None:
    """R: the Summary gets a section with our IQM beside the paper's (its Table 2 / CI tables) and the
    Conditions a second line per cell with the paper's seed mean and z in units of the paper's seed std."""
    from cube.io.reference import load_reference

    ref = load_reference("paper")

    async def scenario(pilot: Pilot, screen: MainScreen) -> None:
        await press(pilot, "R")
        assert screen.selection.reference == "paper"
        rows = cells(screen.query_one("#summary-ref", DataTable))
        lag = next(r for r in rows if name(r[0]) == "ppo_lag")
        want = float(ref.aggregate["value"].sel(algo="ppo_lag", setting="train", metric="R"))
        assert lag[1] == "train" and f"{want:.2f}" in lag[2]
        await press(pilot, "2")
        view = screen.query_one(ConditionsView)
        row = next(r for r in view.rows() if (r["algo"], r["task"], r["bound"]) == ("ppo_lag", "goal", 15.0))
        paper = ref.conditions.sel(algo="ppo_lag", task="goal", bound=15.0, setting="train")
        assert row["C_ref_mean"] == pytest.approx(float(paper["C_mean"]))
        assert row["C_z"] == pytest.approx((row["C"] - float(paper["C_mean"])) / float(paper["C_std"]))
        text = " ".join(" ".join(r) for r in cells(screen.query_one("#conditions-table", DataTable)))
        assert f"{float(paper['C_mean']):.2f}" in text
        await press(pilot, "R", "1")
        assert screen.selection.reference is None and not screen.query_one("#summary-ref", DataTable).display

    run_app(build_app(cube_path, boot=BOOT), scenario)


def test_labels_that_look_like_markup_are_shown_as_they_are(tmp_path: Path) -> None:
    """An algorithm called `[/x]` or `ppo[lag]`, a task `[bold red]a` and a path with brackets: every view
    opens and shows them literally (labels and paths are data, never markup)."""
    from cube import CubeWriter, RunKey, create_store

    path = tmp_path / "x[b].zarr"
    algos, task = ["[/x]", "ppo[lag]"], "[bold red]a"
    create_store(path, algos=algos, tasks=[task], bounds=[5.0], seeds=[0, 1], n_iterates=2, n_episodes=4)
    writer, rng = CubeWriter(path), np.random.default_rng(0)
    for a in algos:
        for s in (0, 1):
            key = RunKey(a, task, 5.0, s)
            for j in range(2):
                writer.write_episodes(key, "train", j, rng.normal(size=4), rng.gamma(2.0, 3.0, size=4))
            writer.set_run_manifest(key, status="complete")

    async def scenario(pilot: Pilot, screen: MainScreen) -> None:
        assert screen.model.info is not None and not screen.load_failed
        await press(pilot, "2")
        rows = cells(screen.query_one("#conditions-table", DataTable))
        assert {name(r[0]) for r in rows} == set(algos) and {r[1] for r in rows} == {task}
        for key in ("3", "4", "5", "6", "7", "f"):
            await press(pilot, key)  # no view may raise on a label

    run_app(build_app(path, boot=BOOT), scenario)


def test_derived_cache_never_keeps_a_result_of_older_statistics() -> None:
    """`DerivedCache.renew` swaps the statistics and forgets in one step: a result a worker computed from the
    statistics before it is returned but not stored; `keep` spares the keys it names."""
    from saferl_tui.derived import DerivedCache

    cache, stats_now = DerivedCache(), {"gen": 0}
    cache.get(("reference", "paper"), lambda: "published")

    def slow() -> int:
        seen = stats_now["gen"]
        cache.renew(lambda: stats_now.update(gen=1), keep=lambda key: key[0] == "reference")  # lands meanwhile
        return seen

    assert cache.get(("table",), slow) == 0 and ("table",) not in cache
    assert cache.get(("table",), lambda: stats_now["gen"]) == 1 and ("table",) in cache
    assert ("reference", "paper") in cache


def test_numbers_on_screen_have_no_negative_zero_and_one_minus_sign() -> None:
    """A value or difference that rounds to zero shows as 0.00 (never -0.00); differences use the ASCII
    minus of every other number on screen, so one row never mixes '-' and '−'."""
    from saferl_tui.views.format import fmt, fmt_signed

    assert (fmt(-0.001), fmt(-0.006), fmt(0.0), fmt(-1e-9, 3)) == ("0.00", "-0.01", "0.00", "0.000")
    assert (fmt_signed(-0.001), fmt_signed(-0.3), fmt_signed(1.2), fmt_signed(-0.04, 1)) == \
        ("0.00", "-0.30", "+1.20", "0.0")
    assert fmt(float("nan")) == fmt_signed(float("inf")) == "–"
