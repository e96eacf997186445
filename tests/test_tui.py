"""Pilot tests of saferl-tui: every view driven by key presses, content checked against cube.stats."""

from __future__ import annotations

import asyncio
import csv
import io
import json
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

from cube import curves, stats
from cube.cli import main as saferl_main
from cube.metrics import SETTING
from cube.selection import Selection, parse_iterates
from saferl_tui.app import SaferlApp, build_app
from saferl_tui.screens import MainScreen
from saferl_tui.views import CdfView, ConditionsView, CurvesView, HistogramsView
from saferl_tui.widgets import LoadingPanel

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
    """Wait until every worker has finished and the resulting messages are handled."""
    app = pilot.app
    for _ in range(4):
        await app.workers.wait_for_complete()
        await pilot.pause()


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
    return "–" if not np.isfinite(x) else f"{x:.2f}"


def check_summary(table: DataTable, agg: Any, final: str) -> None:
    """The IQM table shows ``agg`` (wide layout: one row per algorithm; narrow: one per algorithm and
    setting, the algorithm named on its first row)."""
    rows = cells(table)
    if len(table.columns) == 8:  # narrow layout
        assert [r[0] for r in rows[::2]] == [str(a) for a in agg["algo"].values]
        for i, r in enumerate(rows):
            a, s = str(agg["algo"].values[i // 2]), ("train", final)[i % 2]
            assert r[1] == SETTING[s].short  # train / expl / greedy
            expect = [f2(float(agg["value"].sel(algo=a, setting=s, metric=m))) for m in stats.METRICS]
            assert r[2:7] == expect and r[7] == str(int(agg["tier"].sel(algo=a, setting=s)))
        return
    assert [r[0] for r in rows] == [str(a) for a in agg["algo"].values]
    for r in rows:
        a = r[0]
        expect = []
        for m in stats.METRICS:
            for s in ("train", final):
                expect.append(f2(float(agg["value"].sel(algo=a, setting=s, metric=m))))
        expect += [str(int(agg["tier"].sel(algo=a, setting=s))) for s in ("train", final)]
        assert r[1:] == expect


def algo_rows(table: DataTable) -> list[str]:
    return [r[0] for r in cells(table) if r[0]]


# ----------------------------------------------------------------------------------------- summary
def test_summary_equals_aggregate_table(cube_path: Path) -> None:
    async def scenario(pilot: Pilot, screen: MainScreen) -> None:
        agg = agg_for(cube_path, Selection())
        check_summary(screen.query_one("#summary-table", DataTable), agg, "final_greedy")
        ci = cells(screen.query_one("#summary-ci", DataTable))
        for r in ci:
            for m, cell in zip(stats.METRICS, r[1:6], strict=True):
                p = agg.sel(algo=r[0], setting="train", metric=m)
                assert cell == f"{f2(p['value'])}\n[{f2(p['ci_low'])}, {f2(p['ci_high'])}]"
        assert "Train" in static_text(screen, "#summary-ci-title")

    run_app(build_app(cube_path, boot=BOOT), scenario)


def test_summary_equals_saferl_report_json(cube_path: Path, tmp_path: Path) -> None:
    out = tmp_path / "report.json"
    assert saferl_main(["report", str(cube_path), "--format", "json", "--boot", str(BOOT), "--algos",
                        "ppo_lag,p3o,focops", "--baseline", "ppo_lag", "-o", str(out)]) == 0
    report = json.loads(out.read_text())

    async def scenario(pilot: Pilot, screen: MainScreen) -> None:
        # deselect ppo with the keyboard: open the panel, toggle the first algorithm, close the panel
        await press(pilot, "f", "space", "escape")
        rows = {r[0]: r for r in cells(screen.query_one("#summary-table", DataTable))}
        assert set(rows) == {"ppo_lag", "p3o", "focops"}
        for row in report["rows"]:
            if row["setting"] not in ("train", "final_greedy"):
                continue
            col = 1 + 2 * stats.METRICS.index("R") + (row["setting"] != "train")
            for i, m in enumerate(stats.METRICS):
                col = 1 + 2 * i + (row["setting"] != "train")
                assert rows[row["algo"]][col] == f2(row["metrics"][m]["value"])
            assert rows[row["algo"]][11 + (row["setting"] != "train")] == str(row["tier"])

    run_app(build_app(cube_path, boot=BOOT), scenario)


def test_deselecting_an_algorithm_removes_its_row(cube_path: Path) -> None:
    async def scenario(pilot: Pilot, screen: MainScreen) -> None:
        table = screen.query_one("#summary-table", DataTable)
        assert "ppo_lag" in algo_rows(table)
        await press(pilot, "f", "down", "space")
        assert algo_rows(table) == ["ppo", "p3o", "focops"]
        assert "3 algos" in str(screen.query_one("#infobar", Static).render())
        check_summary(table, agg_for(cube_path, Selection(algos=("ppo", "p3o", "focops"))), "final_greedy")
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
            assert r[1].split("\n")[0] == f2(agg["value"].sel(algo=r[0], setting="final_expl", metric="R"))
        check_summary(screen.query_one("#summary-table", DataTable), agg, "final_expl")
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
        check_summary(screen.query_one("#summary-table", DataTable), agg, "final_greedy")
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
            assert r[8] == str(int(p["n_seeds"]))
        assert [r[0] for r in rows] == sorted(r[0] for r in rows)
        view = screen.query_one(ConditionsView)
        await press(pilot, *["o"] * 4)  # algo -> task -> bound -> R -> C
        assert view.sort_key == "C"
        costs = [float(r[4].split(" ± ")[0]) for r in cells(table)]
        assert costs == sorted(costs)
        await press(pilot, "O")
        costs = [float(r[4].split(" ± ")[0]) for r in cells(table)]
        assert costs == sorted(costs, reverse=True)

    run_app(build_app(cube_path, boot=BOOT), scenario)


def test_cdf_view_toggles_and_x_range(cube_path: Path) -> None:
    async def scenario(pilot: Pilot, screen: MainScreen) -> None:
        await press(pilot, "3")
        view = screen.query_one(CdfView)
        assert view.data is not None and view.xmax == 2.0
        assert [w.display for w in view.query(".cdf-plot")] == [True, False, False]
        assert "x ≤ 2" in static_text(screen, "#cdf-title")
        await press(pilot, "right_square_bracket")
        assert view.xmax == 4.0 and "x ≤ 4" in static_text(screen, "#cdf-title")
        await press(pilot, "left_square_bracket", "left_square_bracket")
        assert view.xmax == 1.0
        await press(pilot, "p")
        assert [w.display for w in view.query(".cdf-plot")] == [True, True, True]
        shown = view.shown()
        assert float(shown["kappa"].max()) <= 1.0 and list(shown["setting"].values) == list(stats.SETTINGS)
        ref = stats.cdf_curves(stats.load_suffstats(cube_path), stats.SETTINGS, boot=BOOT, rng_seed=0)
        np.testing.assert_allclose(shown["cdf"].values, ref["cdf"].sel(kappa=shown["kappa"]).values)

    run_app(build_app(cube_path, boot=BOOT), scenario)


def test_curves_view_condition_and_window(cube_path: Path) -> None:
    async def scenario(pilot: Pilot, screen: MainScreen) -> None:
        await press(pilot, "4")
        view = screen.query_one(CurvesView)
        assert "goal d=15 (1/4" in static_text(screen, "#curves-title")
        await press(pilot, "c")
        assert "goal d=25 (2/4" in static_text(screen, "#curves-title")
        await press(pilot, "plus", "plus")
        assert view.window == 3 and "moving average 3 iterates" in static_text(screen, "#curves-title")
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
        (task, bound), (hists, costs) = view.data
        assert (task, bound) == ("goal", 15.0)
        assert len(view.query(".hist-plot")) == 4
        for algo, (_edges, counts) in hists.items():
            assert counts["expl"].sum() == counts["greedy"].sum() == 3 * 10  # 3 seeds x 10 final episodes
            assert costs[algo]["expl"].size == 30
        await press(pilot, "C")  # previous wraps to the last condition
        assert view.data[0] == ("circle", 25.0)
        await press(pilot, "plus")
        assert view.bins == 25
        edges, _ = view.data[1][0]["ppo"]
        assert edges.size == 26
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

    run_app(build_app(cube_path, boot=BOOT), scenario)


# ----------------------------------------------------------------------------------------- export
def test_export_summary_matches_screen(cube_path: Path, tmp_path: Path) -> None:
    async def scenario(pilot: Pilot, screen: MainScreen) -> list[list[str]]:
        await press(pilot, "e")
        return cells(screen.query_one("#summary-table", DataTable))

    app = build_app(cube_path, boot=BOOT, export_dir=tmp_path)
    shown = run_app(app, scenario)
    assert sorted(Path(p).name for p in app.last_export) == ["saferl_summary.csv", "saferl_summary.tex"]
    rows = list(csv.DictReader(io.StringIO((tmp_path / "saferl_summary.csv").read_text())))
    by = {(r["algo"], r["setting"], r["metric"]): r for r in rows}

    def tier(algo: str, setting: str) -> str:
        """The tier as written by cube.export (a tier column, or a row with metric 'tier')."""
        if (algo, setting, "tier") in by:
            return str(int(float(by[(algo, setting, "tier")]["value"])))
        return by[(algo, setting, "R")]["tier"]

    assert {r["setting"] for r in rows} == {"train", "final_greedy"}  # what the screen shows
    for row in shown:
        for i, m in enumerate(stats.METRICS):
            for j, s in enumerate(("train", "final_greedy")):
                assert row[1 + 2 * i + j] == f2(float(by[(row[0], s, m)]["value"]))
        assert [row[11], row[12]] == [tier(row[0], "train"), tier(row[0], "final_greedy")]
    tex = (tmp_path / "saferl_summary.tex").read_text()
    assert "\\begin{tabular}" in tex and shown[1][1] in tex


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
    assert names == sorted(["saferl_conditions_train.csv", "saferl_conditions_train.tex", "saferl_cdf.csv",
                            "saferl_cdf.tex", "saferl_curves_goal_d15.csv", "saferl_curves_goal_d15.tex",
                            "saferl_hist_goal_d15.csv", "saferl_hist_goal_d15.tex", "saferl_runs.csv",
                            "saferl_runs.tex"])
    cond = list(csv.DictReader(io.StringIO((tmp_path / "saferl_conditions_train.csv").read_text())))
    assert {r["setting"] for r in cond} == {"train"}
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
    cdf = list(csv.DictReader(io.StringIO((tmp_path / "saferl_cdf.csv").read_text())))
    assert max(float(r["kappa"]) for r in cdf) <= 2.0 and {r["setting"] for r in cdf} == {"train"}
    curves = list(csv.DictReader(io.StringIO((tmp_path / "saferl_curves_goal_d15.csv").read_text())))
    cur = shown["curves"][0]
    assert len(curves) == cur.sizes["algo"] * cur.sizes["iterate"]
    assert float(curves[0]["R_mean"]) == pytest.approx(float(cur["R_mean"].isel(algo=0, iterate=0)))
    hist = list(csv.DictReader(io.StringIO((tmp_path / "saferl_hist_goal_d15.csv").read_text())))
    (_, _), (hists, _) = shown["hist"]
    assert sum(int(r["expl"]) for r in hist if r["algo"] == "ppo") == hists["ppo"][1]["expl"].sum()
    runs = list(csv.DictReader(io.StringIO((tmp_path / "saferl_runs.csv").read_text())))
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
    svg = tmp_path / "saferl_summary.svg"
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


def test_baseline_cycle_dims_and_excludes(cube_path: Path) -> None:
    async def scenario(pilot: Pilot, screen: MainScreen) -> None:
        assert screen.selection is not None and screen.selection.baseline == "ppo"
        await press(pilot, "b")
        assert screen.selection.baseline == "ppo_lag"
        table = screen.query_one("#summary-table", DataTable)
        row = table.get_row_at([r[0] for r in cells(table)].index("ppo_lag"))
        assert all("dim" in str(c.style) for c in row)
        assert "baseline ppo_lag" in str(screen.query_one("#infobar", Static).render())

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
        assert main.query_one("#summary-table", DataTable).row_count == 4

    run_app(build_app(tmp_path / "missing.zarr", boot=BOOT), scenario)


def test_screen_gets_settings_from_the_app_and_passes_them_on(tmp_path: Path) -> None:
    """export_dir and scheduler go down into every main screen; the demo builder only into the first."""
    built: list[str] = []

    def builder(path: str, progress: Callable[[int, int], None]) -> None:
        built.append(path)
        raise RuntimeError("no demo here")

    async def scenario(pilot: Pilot, screen: MainScreen) -> None:
        assert (screen.export_dir, screen.scheduler) == (tmp_path, "tcp://sched:8786")
        assert screen.demo_builder is builder and built == [str(tmp_path / "first.zarr")]
        await press(pilot, "o")
        pilot.app.screen.query_one("#open-path").value = str(tmp_path / "other.zarr")  # type: ignore[attr-defined]
        await press(pilot, "enter")
        main = pilot.app.main_screen  # type: ignore[attr-defined]
        assert main is not screen and (main.export_dir, main.scheduler) == (tmp_path, "tcp://sched:8786")
        assert main.demo_builder is None and built == [str(tmp_path / "first.zarr")]
        assert main.query_one(LoadingPanel).has_class("-error")

    run_app(build_app(tmp_path / "first.zarr", boot=BOOT, export_dir=tmp_path, demo_builder=builder,
                      scheduler="tcp://sched:8786"), scenario)


def test_demo_builder_runs_when_path_is_missing(tmp_path: Path) -> None:
    from cube.demo import make_demo_cube

    def builder(path: str, progress: Callable[[int, int], None]) -> None:
        make_demo_cube(path, tasks=("goal",), bounds=(25.0,), n_seeds=2, n_iterates=3, n_train_episodes=8,
                       n_eval_episodes=5, progress=progress)

    async def scenario(pilot: Pilot, screen: MainScreen) -> None:
        assert screen.model.info is not None and screen.model.info.synthetic
        assert "SYNTHETIC DEMO DATA" in str(screen.query_one("#infobar", Static).render())
        assert screen.query_one("#summary-table", DataTable).row_count == 4

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
    from saferl_tui.model import UISelection

    sel = UISelection(("a", "b"), ("t",), (15.0, 25.0), (0, 1, 2), iterates=(2, 4))
    assert sel.n_runs == 12
    assert sel.describe().startswith("2 algos × 1 tasks × 2 bounds × 3 seeds = 12 runs · Train · iterates 2:4")
    assert replace(sel, setting="final_expl").final_setting == "final_expl"
    assert sel.final_setting == "final_greedy"
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

    monkeypatch.setattr("cube.demo.make_demo_cube", failing)
    target = tmp_path / "cache" / "demo.zarr"
    with pytest.raises(RuntimeError):
        cli.build_demo(str(target), lambda d, t: None)
    assert not target.exists() and (tmp_path / "cache" / "demo.zarr.partial").exists()
    monkeypatch.setattr("cube.demo.make_demo_cube", lambda path, **kw: Path(path).mkdir())
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
        check_summary(screen.query_one("#summary-table", DataTable), agg_for(cube_path, Selection()), "final_greedy")
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
