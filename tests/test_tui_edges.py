"""The rough edges a new user met at 80x24 and 120x40 (issue 35), each checked on content: tick labels,
the header, the selection panel's labels, the Curves titles, the CDF at 80x24, the help, the demo toast,
and the Δ-to-baseline table with its probability of improvement."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from rich.cells import cell_len
from rich.text import Text
from textual.pilot import Pilot
from textual.widgets import DataTable, Label, Static

from cube import stats
from cube.selection import Selection
from saferl_tui.screens.help import HelpScreen
from saferl_tui.screens.main import MainScreen
from saferl_tui.views.format import nice_ticks, tick_label
from tests.conftest import svg_rows
from tests.test_tui_snapshots import snap_app, write_snapshot_cube
from tests.tuiwait import until_quiet

BOOT = 40


@pytest.fixture(scope="module")
def cube_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("edges")
    write_snapshot_cube(root / "cube.zarr")
    return root


@pytest.fixture
def cube_name(cube_dir: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    monkeypatch.chdir(cube_dir)
    return "cube.zarr"


def run(path: str, size: tuple[int, int], keys: tuple[str, ...],
        check: Callable[[Pilot, MainScreen], Awaitable[Any]]) -> Any:
    async def go() -> Any:
        app = snap_app(path)
        async with app.run_test(size=size) as pilot:
            await until_quiet(pilot)
            for k in keys:
                await pilot.press(k)
                await until_quiet(pilot)
            return await check(pilot, app.main_screen)

    return asyncio.run(go())


# ------------------------------------------------------------------------------------------ ticks
@pytest.mark.parametrize(("lo", "hi", "unit"), [(0, 4e6, "M"), (0, 1.2e12, "T"), (0, 3e9, "G"), (0, 2.5e4, "k"),
                                                (-2e6, 2e6, "M"), (0, 7e5, "k")])
def test_tick_labels_have_one_unit_per_axis(lo: float, hi: float, unit: str) -> None:
    """1e+06M was a tick at 1e12 env steps: every label of an axis now carries the same unit, no exponent,
    and the labels are distinct."""
    ticks = nice_ticks(lo, hi, 5)
    labels = [tick_label(t, ticks[1] - ticks[0], max(abs(t) for t in ticks)) for t in ticks]
    assert all("e" not in x for x in labels), labels
    assert all(x == "0" or x.endswith(unit) for x in labels), labels
    assert len(set(labels)) == len(labels)
    scale = {"k": 1e3, "M": 1e6, "G": 1e9, "T": 1e12}[unit]
    assert [0.0 if x == "0" else float(x[:-1]) * scale for x in labels] == pytest.approx(ticks)


# ------------------------------------------------------------------------------------------ header
def test_header_keeps_iterates_and_baseline_at_120(cube_name: str) -> None:
    async def check(pilot: Pilot, screen: MainScreen) -> None:
        from dataclasses import replace

        screen.set_selection(replace(screen.selection, iterates=(2, 5)))
        await until_quiet(pilot)
        line = screen.query_one("#infobar", Static).render()
        text = line.plain if isinstance(line, Text) else str(line)
        assert "2:5" in text and "ppo_lag" in text and "SYNTHETIC" in text  # a shorter form, nothing cut
        assert cell_len(text) <= 120 and not text.endswith("…")

    run(cube_name, (120, 40), ("b", "b"), check)


# ------------------------------------------------------------------------------------------ selection panel
def test_selection_panel_labels_wrap_instead_of_being_cut(cube_name: str) -> None:
    async def check(pilot: Pilot, screen: MainScreen) -> None:
        panel = screen.query_one("#selection-panel")
        labels = list(panel.query(".panel-label").results(Label))
        assert any("LO:HI" in str(lab.render()) for lab in labels)
        for lab in labels:
            text = str(lab.render())
            assert lab.size.width <= panel.scrollable_content_region.width
            assert lab.size.width * lab.size.height >= cell_len(text), text  # every character has a cell

    run(cube_name, (120, 40), ("f",), check)


# ------------------------------------------------------------------------------------------ curves
def test_every_curves_panel_has_its_title(cube_name: str) -> None:
    async def check(pilot: Pilot, screen: MainScreen) -> None:
        rows = svg_rows(pilot.app.export_screenshot())
        title_row = next(r for r in rows if "Reward" in r)
        assert "Cost" in title_row and "Multiplier λ/κ/ν (train)" in title_row

    run(cube_name, (120, 40), ("4",), check)


# ------------------------------------------------------------------------------------------ CDF
@pytest.mark.parametrize(("size", "panels"), [((80, 24), 1), ((120, 40), 3)])
def test_cdf_all_settings_shows_one_readable_panel_at_80x24(cube_name: str, size: tuple[int, int],
                                                            panels: int) -> None:
    """Three CDFs at 80x24 had 5 rows each (ppo_lag hidden under focops): there, the current setting alone."""
    async def check(pilot: Pilot, screen: MainScreen) -> None:
        shown = [w for w in screen.query(".cdf-plot") if w.display]
        assert len(shown) == panels
        assert all(w.size.height >= 12 for w in shown)
        note = str(screen.view("cdf").query_one(".plot-note", Static).render())
        assert ("too small for 3 plots" in note) == (panels == 1)
        assert cell_len(note) <= size[0] - 2  # the note itself is not cut

    run(cube_name, size, ("3", "p"), check)


# ------------------------------------------------------------------------------------------ help
def test_help_wraps_long_actions_at_80_columns(cube_name: str) -> None:
    async def check(pilot: Pilot, screen: MainScreen) -> None:
        help_screen = pilot.app.screen
        assert isinstance(help_screen, HelpScreen)
        table = help_screen.query_one(DataTable)
        assert table.virtual_size.width <= table.scrollable_content_region.width  # nothing off to the right
        palette = next(i for i in range(table.row_count) if "Command palette" in str(table.get_row_at(i)[2]))
        assert "not-safe algorithms" in str(table.get_row_at(palette)[2])
        assert table.rows[table.coordinate_to_cell_key((palette, 0)).row_key].height >= 2

    run(cube_name, (80, 24), ("question_mark",), check)


# ------------------------------------------------------------------------------------------ demo toast
@pytest.mark.parametrize(("size", "toast"), [((80, 24), False), ((120, 40), True)])
def test_demo_toast_only_where_it_covers_nothing(cube_name: str, monkeypatch: pytest.MonkeyPatch,
                                                 size: tuple[int, int], toast: bool) -> None:
    said: list[str] = []
    monkeypatch.setattr(MainScreen, "notify_text", lambda self, message, **kw: said.append(message))

    async def check(pilot: Pilot, screen: MainScreen) -> None:
        assert any("SYNTHETIC" in m for m in said) == toast
        assert "SYNTHETIC" in str(screen.query_one("#infobar", Static).render())  # the header always says so

    run(cube_name, size, (), check)


# ------------------------------------------------------------------------------------------ baseline
def test_baseline_at_80x24_shows_deltas_with_probability_of_improvement(cube_name: str) -> None:
    """b at 80x24: the Δ table comes into view, fits the width, and each Δ carries P(algo improves on the
    baseline), equal to `stats.probability_of_improvement` on the same runs."""
    async def check(pilot: Pilot, screen: MainScreen) -> None:
        assert screen.selection is not None and screen.selection.baseline == "ppo"
        title = screen.query_one("#summary-delta-title", Static)
        table = screen.query_one("#summary-delta", DataTable)
        assert 0 <= title.region.y < 24 and table.region.y < 24  # scrolled into view
        assert table.virtual_size.width <= table.scrollable_content_region.width  # no column off screen
        ss = stats.select(stats.load_suffstats(Path(cube_name)), Selection())
        poi = stats.probability_of_improvement(ss, "ppo_lag", "ppo", stats.SETTINGS, boot=BOOT, rng_seed=0)
        row = table.get_row_at(0)
        assert str(row[0]).startswith("ppo_lag") and str(row[1]) == "train"
        for j, m in enumerate(stats.METRICS):
            lines = str(row[2 + j]).split("\n")
            assert lines[1] == f"P {float(poi['value'].sel(setting='train', metric=m)):.2f}"
            lo = float(poi["ci_low"].sel(setting="train", metric=m))
            assert ("bold" in str(row[2 + j].spans)) == bool(np.isfinite(lo) and lo > 0.5) or lo <= 0.5

    run(cube_name, (80, 24), ("b",), check)
