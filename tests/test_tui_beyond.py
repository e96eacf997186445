"""The TUI's views of the statistics beyond the paper, by content (Pilot): the tier claims where a tier rests
on V = 0 and the few-seeds mark (Summary, Conditions), the Summary's seeds-needed footer, the Profiles (9) and
Front (0) views and their exports; every number against the statistics functions."""

from __future__ import annotations

import asyncio
import csv
import io
from pathlib import Path

import numpy as np
import pytest
from rich.console import Console
from statsdata import zero_violation_cube
from textual.widgets import DataTable, Static

from cube import stats
from saferl_tui.app import build_app
from saferl_tui.views import FrontView, ProfileView
from tests.tuiwait import until_quiet

BOOT = 40


@pytest.fixture(scope="module")
def zero_cube(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("tui_zero") / "zero.zarr"  # zarr: the app reads it from threads
    zero_violation_cube(path)
    return path


def text_of(widget: Static) -> str:
    """What a Static shows, as plain text (rich renderables included)."""
    console = Console(width=400, file=io.StringIO(), color_system=None)
    with console.capture() as cap:
        console.print(widget.content)
    return cap.get()


def run(app, scenario) -> None:
    async def go() -> None:
        async with app.run_test(size=(120, 40)) as pilot:
            await until_quiet(pilot)
            await scenario(pilot, app.main_screen)

    asyncio.run(go())


async def press(pilot, *keys: str) -> None:
    for k in keys:
        await pilot.press(k)
        await until_quiet(pilot)


def test_claims_few_seeds_and_the_seeds_footer(zero_cube: Path) -> None:
    ss = stats.load_suffstats(zero_cube)
    honest = stats.honest_tables(ss, ["train"], boot=BOOT).aggregate.sel(algo="safe", setting="train")
    b = int(honest["tier_at_bound"])
    plan = stats.plan_seeds(ss.sel(algo=["safe"]), ["train"], boot=BOOT)
    cond = stats.honest_tables(ss, ["train"], boot=BOOT).conditions

    async def scenario(pilot, screen) -> None:
        table = screen.query_one("#summary-table", DataTable)
        tiers = {str(table.get_row_at(i)[0]).strip("†") or None: str(table.get_row_at(i)[-1])
                 for i in range(0, table.row_count, 3)}
        assert tiers["safe"].startswith(f"4→{b} ") and "→" not in tiers["ppo"]
        claims = text_of(screen.query_one("#summary-claims", Static))
        assert f"→ safe, Train: {honest['claim'].item()}" in claims
        assert "few seeds: 3 in a condition" in text_of(screen.query_one("#summary-title", Static))
        footer = text_of(screen.query_one("#summary-plan", Static)).strip()
        assert footer == stats.plan_footer(plan, "train")  # the safe-RL algorithms' seeds, ppo left out
        await press(pilot, "2")
        rows = screen.query_one("#conditions-table", DataTable)
        for i in range(rows.row_count):
            algo, task, bound, *cells = (str(c) for c in rows.get_row_at(i))
            seeds, tier = cells[len(stats.METRICS):len(stats.METRICS) + 2]  # then ◐: safe's seeds 3-5 pending
            want = cond.sel(algo=algo, task=task, bound=float(bound), setting="train")
            assert seeds == ("3‡" if algo == "safe" else "6")
            assert tier == ("4→" + str(int(want["tier_at_bound"])) if algo == "safe" else str(int(want["tier"])))

    run(build_app(str(zero_cube), boot=BOOT, follow=False), scenario)


def test_profiles_and_front_views_and_their_exports(zero_cube: Path, tmp_path: Path) -> None:
    ss = stats.load_suffstats(zero_cube)

    async def scenario(pilot, screen) -> None:
        await press(pilot, "9")
        view = screen.query_one(ProfileView)
        want = stats.performance_profiles(ss, ["train"], boot=BOOT)
        np.testing.assert_array_equal(view.data["fraction"].values, want["fraction"].values)
        assert [w.display for w in view.query(".plot-panel")] == [True] * 4
        await press(pilot, "e")
        (path,) = tmp_path.glob("saferl_profile_*.csv")
        lines = path.read_text().splitlines()
        assert lines[0].startswith("# saferl-tui selection:")
        assert len(list(csv.DictReader(io.StringIO("\n".join(lines[1:]))))) == len(stats.profile_frame(want))
        await press(pilot, "0")
        front = screen.query_one(FrontView)
        expect = stats.reward_cost_front(ss, ["train"], boot=BOOT)
        np.testing.assert_array_equal(front.data["p_front"].values, expect["p_front"].values)
        side = text_of(screen.query_one("#front-side", Static))
        one = expect.sel(setting="train", task="goal", algo="safe", bound=10.0)
        assert f"{float(one['p_front']):.2f}" in side and "ppo†" in side and "D_norm" in side
        assert "Front goal (1/2" in text_of(screen.query_one("#view-front .plot-title", Static))
        await press(pilot, "c")
        assert "Front circle (2/2" in text_of(screen.query_one("#view-front .plot-title", Static))
        await press(pilot, "x")
        assert front.data.attrs["cost"] == "CVaR" and "CVaR" in text_of(screen.query_one("#front-side", Static))
        await press(pilot, "e")
        (path,) = tmp_path.glob("saferl_front_*.csv")
        rows = list(csv.DictReader(io.StringIO("\n".join(path.read_text().splitlines()[1:]))))
        assert {r["cost_metric"] for r in rows} == {"CVaR"} and {r["task"] for r in rows} == {"goal", "circle"}

    run(build_app(str(zero_cube), boot=BOOT, follow=False, export_dir=tmp_path), scenario)
