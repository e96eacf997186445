"""SVG snapshots (pytest-textual-snapshot) of every view on a small deterministic cube.

Update after an intended change with ``pytest tests/test_tui_snapshots.py --snapshot-update`` and look at
the SVGs in ``tests/__snapshots__/test_tui_snapshots/``.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import partial
from pathlib import Path

import pytest
from textual.pilot import Pilot

from cube.demo import make_demo_cube
from saferl_tui.app import build_app

BOOT = 40


@pytest.fixture(scope="module")
def snap_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Directory holding ``cube.zarr``: 4 algos x 2 tasks x 2 bounds x 3 seeds x 6 iterates (seed 3)."""
    root = tmp_path_factory.mktemp("snap")
    make_demo_cube(root / "cube.zarr", seed=3, tasks=("goal", "circle"), bounds=(15.0, 25.0), n_seeds=3,
                   n_iterates=6, n_train_episodes=16, n_eval_episodes=10)
    return root


@pytest.fixture
def cube_name(snap_dir: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    """Run from the cube's directory so the header shows the same relative path on every machine."""
    monkeypatch.chdir(snap_dir)
    return "cube.zarr"


async def drive(keys: Sequence[str], pilot: Pilot) -> None:
    """Let the cube load, press ``keys`` one by one (each followed by its workers), clear toasts."""
    app = pilot.app
    for key in ("", *keys):
        if key:
            await pilot.press(key)
        for _ in range(4):
            await app.workers.wait_for_complete()
            await pilot.pause()
    app.clear_notifications()
    await pilot.pause()


VIEWS = [
    ("summary", ()),
    ("summary_final_expl", ("t",)),
    ("conditions", ("2",)),
    ("cdf", ("3",)),
    ("cdf_all_settings", ("3", "p", "right_square_bracket")),
    ("curves", ("4", "c", "plus")),
    ("histograms", ("5",)),
    ("runs", ("6",)),
    ("selection_panel", ("f", "down", "space")),
    ("help", ("question_mark",)),
    ("empty_selection", ("f", "n", "escape")),
]


@pytest.mark.parametrize(("name", "keys"), VIEWS, ids=[v[0] for v in VIEWS])
def test_view_120x40(snap_compare, cube_name: str, name: str, keys: Sequence[str]) -> None:
    app = build_app(cube_name, boot=BOOT)
    assert snap_compare(app, terminal_size=(120, 40), run_before=partial(drive, keys))


@pytest.mark.parametrize("key", ["1", "3", "4", "5"])
def test_view_80x24(snap_compare, cube_name: str, key: str) -> None:
    app = build_app(cube_name, boot=BOOT)
    assert snap_compare(app, terminal_size=(80, 24), run_before=partial(drive, (key,)))


def test_missing_path(snap_compare, cube_name: str) -> None:
    app = build_app("missing.zarr", boot=BOOT)
    assert snap_compare(app, terminal_size=(100, 30), run_before=partial(drive, ()))
