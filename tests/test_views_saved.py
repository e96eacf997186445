"""Saved views (issue 38): the view file, saving and opening views in the TUI, deep links, and `saferl render`
byte for byte equal to the TUI's export of the same view."""

from __future__ import annotations

import asyncio
import math
import shutil
from pathlib import Path

import pytest
from textual.pilot import Pilot

from cube.cli import main as saferl_main
from cube.errors import CubeError
from cube.render import views as views_module
from cube.render.viewfile import SUFFIX, VIEW_KINDS, ViewFile, parse_view, read_view, view_text
from cube.render.views import TABLE_VIEWS
from saferl_tui.app import build_app
from saferl_tui.cli import main as tui_main
from saferl_tui.screens.main import MainScreen
from tests.tuiwait import until_quiet

BOOT = 40
SIZE = (120, 40)

HAND_WRITTEN = """
# a view written by hand from docs/views.md
view = "cdf"
setting = "final_greedy"

[selection]
algos = ["ppo_lag", "focops"]
tasks = ["goal"]

[options]
boot = 40
"""


@pytest.fixture(scope="module")
def cube_path(small_demo_cube: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    dest = tmp_path_factory.mktemp("views") / "cube.zarr"
    shutil.copytree(small_demo_cube, dest)
    return dest


def run(app, scenario, size=SIZE):
    async def go():
        async with app.run_test(size=size) as pilot:
            await until_quiet(pilot)
            return await scenario(pilot, app.main_screen)

    return asyncio.run(go())


def record_notifications(app, monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Every message notified from now on, kept as it is posted: a notification expires after its timeout
    (seconds), which a busy CI can pass before the test reads the app's list."""
    said: list[str] = []
    notify = app.notify

    def recording(message: str, *args, **kwargs):
        said.append(message)
        return notify(message, *args, **kwargs)

    monkeypatch.setattr(app, "notify", recording)
    return said


async def press(pilot: Pilot, *keys: str) -> None:
    for k in keys:
        await pilot.press(k)
        await until_quiet(pilot)


# ------------------------------------------------------------------------------------------ the file
def test_a_view_round_trips_through_its_text() -> None:
    view = ViewFile("curves", setting="final_expl", algos=("ppo_lag",), bounds=(25.0,), seeds=(0, 2), iterates=(1, 3),
                    boot=300, ci=0.9, baseline="ppo", not_safe=("ppo",), window=3, curve_var="multiplier",
                    kappa_range=(-math.inf, math.inf), condition=("goal", 25.0), cube="x.zarr",
                    fingerprint="sha256:0123")
    assert parse_view(view_text(view)) == view
    hand = parse_view(HAND_WRITTEN)
    assert (hand.view, hand.setting, hand.algos, hand.tasks, hand.bounds, hand.boot) == (
        "cdf", "final_greedy", ("ppo_lag", "focops"), ("goal",), None, 40)


@pytest.mark.parametrize(("text", "says"), [
    ("view = 'cdf'\n[selection\n", "not valid TOML"),
    ("setting = 'train'\n", "no 'view = ...' line"),
    ("view = 'pie'\n", "view 'pie' is unknown"),
    ("view = 'cdf'\ncolour = 'red'\n", "unknown key 'colour'"),
    ("view = 'cdf'\n[selection]\nseeds = ['a']\n", "every entry must be a number"),
    ("view = 'cdf'\n[selection]\niterates = [5, 2]\n", "iterates must be"),
    ("view = 'cdf'\n[options]\nci = 2.0\n", "ci must lie strictly between 0 and 1"),
])
def test_a_malformed_view_is_one_line(text: str, says: str) -> None:
    with pytest.raises(CubeError, match=says) as err:
        parse_view(text)
    assert "\n" not in str(err.value)


def test_labels_the_cube_lacks_are_named_and_the_rest_kept() -> None:
    view = ViewFile("summary", algos=("ppo_lag", "sac"), tasks=("goal",), seeds=(0, 99), baseline="sac")
    fitted, line = view.against(("ppo", "ppo_lag"), ("goal", "push"), (25.0,), (0, 1))
    assert fitted.algos == ("ppo_lag",) and fitted.seeds == (0,) and fitted.bounds == (25.0,)
    assert fitted.baseline is None
    assert line == "the cube lacks algos sac; seeds 99: the view shows the labels it has"
    with pytest.raises(CubeError, match="none of the view's algos"):
        ViewFile("summary", algos=("sac",)).against(("ppo",), ("goal",), (25.0,), (0,))


# ------------------------------------------------------------------------------------------ the TUI
def test_a_saved_view_reopens_with_its_selection_and_options(cube_path: Path, tmp_path: Path) -> None:
    async def save(pilot: Pilot, screen: MainScreen) -> None:
        await press(pilot, "3", "t", "t", "p", "S")  # CDF, final greedy, all settings; save

    app = build_app(cube_path, boot=BOOT, export_dir=tmp_path)
    run(app, save)
    (saved,) = tmp_path.glob(f"*{SUFFIX}")
    view = read_view(saved)
    assert (view.view, view.setting, view.all_settings, view.boot) == ("cdf", "final_greedy", True, BOOT)
    assert view.fingerprint and view.fingerprint.startswith("sha256:")
    edited = view_text(view).replace('algos = ["ppo", "ppo_lag", "p3o", "focops"]', 'algos = ["focops", "sac"]')
    saved.write_text(edited)

    async def reopen(pilot: Pilot, screen: MainScreen) -> tuple:
        return screen.active_view().VIEW_ID, screen.selection, screen.view("cdf").all_panels, screen.view_notes

    app = build_app(cube_path, boot=BOOT, export_dir=tmp_path, view_file=read_view(saved))
    view_id, sel, all_panels, notes = run(app, reopen)
    assert view_id == "cdf" and sel.algos == ("focops",) and sel.setting == "final_greedy" and all_panels
    assert notes == ["the cube lacks algos sac: the view shows the labels it has"]


def test_a_hand_written_view_opens_and_renders_as_the_tui_exports_it(cube_path: Path, tmp_path: Path) -> None:
    hand = tmp_path / f"cdf_goal{SUFFIX}"
    hand.write_text(HAND_WRITTEN)

    async def scenario(pilot: Pilot, screen: MainScreen) -> tuple:
        await press(pilot, "e")
        sel = screen.selection
        return screen.active_view().VIEW_ID, sel.algos, sel.tasks, sel.setting, sel.not_safe, pilot.app.last_export

    app = build_app(cube_path, boot=BOOT, export_dir=tmp_path / "tui", view_file=read_view(hand))
    view_id, algos, tasks, setting, not_safe, exported = run(app, scenario)
    assert (view_id, algos, tasks, setting, not_safe) == ("cdf", ("ppo_lag", "focops"), ("goal",), "final_greedy",
                                                         ("ppo",))
    out = tmp_path / "cdf.csv"
    assert saferl_main(["render", str(hand), "--cube", str(cube_path), "--out", str(out)]) == 0
    (csv_file,) = [Path(p) for p in exported if p.endswith(".csv")]
    assert out.read_bytes() == csv_file.read_bytes()


def test_the_palette_lists_saved_views(cube_path: Path, tmp_path: Path) -> None:
    (tmp_path / f"front_goal{SUFFIX}").write_text('view = "front"\nfingerprint = "sha256:old"\n'
                                                  '[selection]\ntasks = ["goal"]\n')

    async def scenario(pilot: Pilot, screen: MainScreen) -> tuple:
        from saferl_tui.commands import SaferlCommands

        names = [c[0] for c in SaferlCommands(screen, None)._commands()]
        screen.open_view_file(tmp_path / f"front_goal{SUFFIX}")
        await until_quiet(pilot)
        return names, screen.active_view().VIEW_ID, screen.selection.tasks, screen.view_notes

    names, view_id, tasks, notes = run(build_app(cube_path, boot=BOOT, export_dir=tmp_path), scenario)
    assert "Save this view (view file)" in names and f"Open view: front_goal{SUFFIX}" in names
    assert view_id == "front" and tasks == ("goal",)
    assert len(notes) == 1 and notes[0].startswith(
        "the cube changed since the view was saved (fingerprint sha256:old, now sha256:")


def test_deep_link_and_bad_view_file_from_the_command_line(cube_path: Path, tmp_path: Path, capsys) -> None:
    bad = tmp_path / f"bad{SUFFIX}"
    bad.write_text("view = 'cdf'\n[selection\n")
    assert tui_main([str(cube_path), "--view", str(bad)]) == 2
    err = capsys.readouterr().err
    assert "not valid TOML" in err and "Traceback" not in err and len(err.strip().splitlines()) == 1
    assert tui_main([str(cube_path), "--open", "pie"]) == 2
    assert "--open pie: no such view" in capsys.readouterr().err

    from saferl_tui.cli import parser, view_from_args

    args = parser().parse_args([str(cube_path), "--open", "cdf", "--algos", "ppo_lag,focops", "--tasks", "goal",
                                "--setting", "final_greedy"])
    view = view_from_args(args)
    app = build_app(cube_path, boot=BOOT, export_dir=tmp_path, view_file=view)

    async def scenario(pilot: Pilot, screen: MainScreen) -> tuple:
        return screen.active_view().VIEW_ID, screen.selection.algos, screen.selection.tasks, screen.selection.setting

    assert run(app, scenario) == ("cdf", ("ppo_lag", "focops"), ("goal",), "final_greedy")


# ------------------------------------------------------------------------------------------ render == export
VIEW_KEYS = {"summary": "1", "conditions": "2", "cdf": "3", "curves": "4", "histograms": "5", "runs": "6",
             "learning": "7", "runstatus": "8", "profile": "9", "front": "0"}
NO_FIGURE = {"runstatus"}
"""Views without a figure: P says so in one line."""
AT = 1_790_000_000.0
"""The time the Status view is shown at, in the TUI (its clock) and headless (`render_time`)."""


def test_every_view_kind_has_a_key() -> None:
    assert set(VIEW_KEYS) == set(VIEW_KINDS) and set(VIEW_KINDS) <= set(TABLE_VIEWS)


@pytest.mark.parametrize("view_id", list(VIEW_KEYS))
def test_render_equals_the_tuis_export_for_every_view_and_format(view_id: str, cube_path: Path, tmp_path: Path,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    """Save the view (S), export its table (e: CSV + LaTeX), draw its figure (P: PDF) in the TUI; render the
    saved file headless; every file the same bytes. A view without a figure says so in one line."""
    exports = tmp_path / "tui"
    monkeypatch.setattr(views_module, "render_time", lambda: AT)

    async def scenario(pilot: Pilot, screen: MainScreen) -> tuple[list[str], list[str]]:
        await press(pilot, VIEW_KEYS[view_id], "S", "e")
        written = list(pilot.app.last_export)
        said = record_notifications(pilot.app, monkeypatch)
        await press(pilot, "P")
        if view_id not in NO_FIGURE:
            written += list(pilot.app.last_export)
        return written, said

    files, said = run(build_app(cube_path, boot=BOOT, export_dir=exports, clock=lambda: AT), scenario)
    (saved,) = exports.glob(f"{view_id}_*{SUFFIX}")
    tui_files = [Path(f) for f in files if not f.endswith(SUFFIX)]
    formats = {".csv", ".tex"} | (set() if view_id in NO_FIGURE else {".pdf"})
    assert {f.suffix for f in tui_files} == formats, said
    if view_id in NO_FIGURE:
        assert any(m.startswith(f"no figure for view {view_id!r}") and "\n" not in m for m in said), said
    out = tmp_path / "headless"
    assert saferl_main(["render", str(saved), "--cube", str(cube_path), "--out-dir", str(out)]) == 0
    stem = saved.name.removesuffix(SUFFIX)
    assert sorted(p.suffix for p in out.iterdir() if "_gap" not in p.name) == sorted(formats)
    for tui_file in tui_files:
        gap = "_gap" if "summary_gap" in tui_file.name else ""
        headless = out / f"{stem}{gap}{tui_file.suffix}"
        assert headless.read_bytes() == tui_file.read_bytes(), f"{tui_file.name} != {headless.name}"


def test_render_says_when_the_cube_changed_and_strict_refuses(cube_path: Path, tmp_path: Path, capsys) -> None:
    view = tmp_path / f"summary{SUFFIX}"
    view.write_text(view_text(ViewFile("summary", boot=BOOT, algos=("ppo_lag", "sac"), fingerprint="sha256:old")))
    out = tmp_path / "out"
    assert saferl_main(["render", str(view), "--cube", str(cube_path), "--out-dir", str(out),
                        "--formats", "md,json,txt"]) == 0
    err = capsys.readouterr().err
    assert "the cube changed since the view was saved (fingerprint sha256:old" in err
    assert "the cube lacks algos sac" in err
    assert sorted(p.name for p in out.iterdir()) == sorted(f"summary{g}.{e}" for g in ("", "_gap")
                                                           for e in ("md", "json", "txt"))
    assert "ppo_lag" in (out / "summary.md").read_text()
    assert saferl_main(["render", str(view), "--cube", str(cube_path), "--out", str(tmp_path / "x.csv"),
                        "--strict"]) != 0
    assert "--strict refuses" in capsys.readouterr().err and not (tmp_path / "x.csv").exists()


# ------------------------------------------------------------------------------------------ options saved
def test_the_options_a_user_changes_are_saved_and_reopened(cube_path: Path, tmp_path: Path) -> None:
    """Sort and filter (Runs, Status, Conditions), x axis, smoothing, condition and the plot shown alone
    (Curves, Learning), bins (Histograms), κ window (CDF): changed with keys, saved (S), reopened with
    --view: all restored."""
    from saferl_tui.cli import parser, view_from_args

    async def change_and_save(pilot: Pilot, screen: MainScreen) -> dict:
        await press(pilot, "6", ">", ">", "r", "slash", "f", "o", "c", "o", "p", "s", "enter", "S")
        await press(pilot, "8", ">", "S")
        await press(pilot, "2", ">", "r", "S")
        await press(pilot, "4", "x", "plus", "plus", "c", "p", "S")
        await press(pilot, "7", "p", "p", "S")
        await press(pilot, "5", "plus", "S")
        await press(pilot, "3", "right_square_bracket", "S")
        return {v: screen.view(v).view_options() for v in ("runs", "status", "conditions", "curves", "histograms",
                                                           "cdf", "learning")}

    changed = run(build_app(cube_path, boot=BOOT, export_dir=tmp_path), change_and_save)
    assert changed["runs"]["sort"] == "-iterates" and changed["runs"]["filter"] == "focops"
    assert changed["curves"]["x_axis"] == "env_steps" and changed["curves"]["window"] == 3
    assert changed["cdf"]["kappa_range"] == (-1.0, 4.0) and changed["histograms"]["bins"] > 20
    assert changed["curves"]["panel"] is not None and changed["learning"]["panel"] is not None

    for view_id, kind in (("runs", "runs"), ("status", "runstatus"), ("conditions", "conditions"),
                          ("curves", "curves"), ("histograms", "histograms"), ("cdf", "cdf"),
                          ("learning", "learning")):
        (saved,) = tmp_path.glob(f"{kind}_*{SUFFIX}")
        args = parser().parse_args([str(cube_path), "--view", str(saved), "--boot", str(BOOT)])

        async def reopen(pilot: Pilot, screen: MainScreen, view_id: str = view_id) -> tuple:
            view = screen.active_view()
            return view.VIEW_ID, view.view_options(), str(view.query_one(f"#{view_id}-title").render()) \
                if view_id in ("runs", "status") else ""

        shown_id, options, title = run(build_app(cube_path, boot=BOOT, export_dir=tmp_path / "re",
                                                 view_file=view_from_args(args)), reopen)
        assert shown_id == view_id and options == changed[view_id], view_id
        if view_id == "runs":
            assert "rows match /focops" in title


def test_a_hand_written_kappa_range_is_the_cdf_views(cube_path: Path, tmp_path: Path) -> None:
    hand = tmp_path / f"cdf_narrow{SUFFIX}"
    hand.write_text(HAND_WRITTEN.replace("boot = 40", "boot = 40\nkappa_range = [-0.25, 3.0]"))

    async def scenario(pilot: Pilot, screen: MainScreen) -> tuple:
        view = screen.view("cdf")
        window = view.xrange
        kappa = view.shown()["kappa"].values
        await press(pilot, "e")
        exported = list(pilot.app.last_export)
        await press(pilot, "right_square_bracket")
        return window, float(kappa.min()), float(kappa.max()), exported, view.xrange

    app = build_app(cube_path, boot=BOOT, export_dir=tmp_path / "tui", view_file=read_view(hand))
    window, kmin, kmax, exported, wider = run(app, scenario)
    assert window == (-0.25, 3.0) and -0.25 <= kmin < 0 and 2.5 < kmax <= 3.0
    assert wider == (-1.0, 4.0)  # ] steps to the next preset wider than the file's window
    out = tmp_path / "cdf.csv"
    assert saferl_main(["render", str(hand), "--cube", str(cube_path), "--out", str(out)]) == 0
    (csv_file,) = [Path(p) for p in exported if p.endswith(".csv")]
    assert out.read_bytes() == csv_file.read_bytes()
    # its figure with ppo (the not-safe algorithm) left out of the selection: drawn (it was refused)
    assert saferl_main(["render", str(hand), "--cube", str(cube_path), "--out", str(tmp_path / "cdf.svg")]) == 0
    assert "<svg" in (tmp_path / "cdf.svg").read_text()
