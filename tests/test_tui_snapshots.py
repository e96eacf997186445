"""SVG snapshots (pytest-textual-snapshot) of every view on a small deterministic cube.

Update after an intended change with ``pytest tests/test_tui_snapshots.py --snapshot-update`` and look at
the SVGs in ``tests/__snapshots__/test_tui_snapshots/``.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from functools import partial
from pathlib import Path

import numpy as np
import pytest
from textual.pilot import Pilot

from cube import MODES, CubeWriter, RunKey, create_store
from cube.store.locks import WRITE_SEQ
from saferl_tui.app import SaferlApp, build_app
from tests.tuiwait import until_quiet

BOOT = 40


COST_RATIO = {"ppo": 4.0, "ppo_lag": 1.05, "p3o": 0.8, "focops": 1.1}  # final mean cost / d
INCOMPLETE = {("ppo_lag", "goal", 15.0, 1): "partial", ("p3o", "circle", 25.0, 2): "pending"}
"""Runs flagged incomplete (their data is complete: the flag alone must show in every view)."""


def write_snapshot_cube(path: Path, seed: int = 3, n_seeds: int = 3, n_iter: int = 6, n_train: int = 16,
                        n_eval: int = 10) -> None:
    """A small deterministic cube written through the store API, independent of ``cube.io.demo`` (whose
    tuning may change) so that the snapshots change only when the TUI or the statistics do."""
    algos, tasks, bounds = tuple(COST_RATIO), ("goal", "circle"), (15.0, 25.0)
    create_store(path, algos=algos, tasks=tasks, bounds=bounds, seeds=range(n_seeds), n_iterates=n_iter,
                 n_episodes=max(n_train, n_eval), attrs={"synthetic": True, "description": "snapshot cube"})
    writer = CubeWriter(path)
    modes = list(MODES)
    j = np.arange(n_iter, dtype=np.float64)
    for a, algo in enumerate(algos):
        for t, task in enumerate(tasks):
            for b, d in enumerate(bounds):
                rng = np.random.default_rng([seed, a, t, b])
                for k in range(n_seeds):
                    mean = d * COST_RATIO[algo] * (1.0 + 0.8 * np.exp(-j / 2.0)) * rng.uniform(0.9, 1.1)
                    reward = np.full((n_iter, max(n_train, n_eval), 3), np.nan)
                    cost = np.full_like(reward, np.nan)
                    cost[:, :n_train, modes.index("train")] = rng.gamma(2.0, mean[:, None] / 2.0, (n_iter, n_train))
                    reward[:, :n_train, modes.index("train")] = rng.normal(10.0 + j[:, None] + a, 2.0,
                                                                            (n_iter, n_train))
                    for m, scale in (("expl", 0.9), ("greedy", 1.1)):
                        cost[-1, :n_eval, modes.index(m)] = rng.gamma(6.0, scale * mean[-1] / 6.0, n_eval)
                        reward[-1, :n_eval, modes.index(m)] = rng.normal(16.0 + a, 1.0, n_eval)
                    key = RunKey(algo, task, d, k)
                    writer.write_run(key, reward, cost)
                    mult = np.full(n_iter, np.nan) if algo == "ppo" else np.cumsum(rng.uniform(0, 0.5, n_iter))
                    writer.write_iterate_vars(key, 0, {"env_steps": (j + 1) * n_train * 1000, "multiplier": mult})
                    status = INCOMPLETE.get((algo, task, d, k), "complete")
                    writer.set_run_manifest(key, status=status, manifest={"config": {"lr": 0.0005}})


@pytest.fixture(scope="module")
def snap_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Directory holding ``cube.zarr``: 4 algos x 2 tasks x 2 bounds x 3 seeds x 6 iterates (seed 3)."""
    root = tmp_path_factory.mktemp("snap")
    write_snapshot_cube(root / "cube.zarr")
    for folder, _dirs, files in os.walk(root / "cube.zarr" / WRITE_SEQ / "c"):  # the Status view's last writes
        for name in files:
            os.utime(Path(folder) / name, (T0, T0))
    return root


T0 = 1_900_000_000.0
"""Every run's last write; the app's clock says T0 + 90 s (no wall-clock text in a snapshot)."""


def snap_app(path: str) -> SaferlApp:
    """The app as the snapshots see it: follow mode off (its header shows a time), a fixed clock."""
    return build_app(path, boot=BOOT, follow=False, clock=lambda: T0 + 90.0)


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
        await until_quiet(pilot)
    app.clear_notifications()
    await pilot.pause()


VIEWS = [
    ("summary", ()),
    ("summary_baseline", ("b", "b")),
    ("conditions", ("2",)),
    ("conditions_filter", ("2", "slash", "g", "o", "a", "l", "enter")),
    ("cdf", ("3",)),
    ("cdf_all_settings", ("3", "p", "right_square_bracket")),
    ("curves", ("4", "c", "plus")),
    ("curves_greedy_env_steps", ("4", "t", "t", "x")),
    ("histograms", ("5",)),
    ("runs", ("6",)),
    ("learning", ("7",)),
    ("status", ("8",)),
    ("profile", ("9",)),
    ("front", ("0", "c")),
    ("selection_panel", ("f", "down", "space")),
    ("help", ("question_mark",)),
    ("empty_selection", ("f", "n", "escape")),
]
SMALL = ["summary", "conditions", "cdf", "cdf_all_settings", "curves", "histograms", "runs", "learning", "status",
         "profile", "front", "selection_panel", "help"]


@pytest.mark.parametrize(("name", "keys"), VIEWS, ids=[v[0] for v in VIEWS])
def test_view_120x40(snap_compare, cube_name: str, name: str, keys: Sequence[str]) -> None:
    app = snap_app(cube_name)
    assert snap_compare(app, terminal_size=(120, 40), run_before=partial(drive, keys))


@pytest.mark.parametrize(("name", "keys"), [v for v in VIEWS if v[0] in SMALL], ids=SMALL)
def test_view_80x24(snap_compare, cube_name: str, name: str, keys: Sequence[str]) -> None:
    app = snap_app(cube_name)
    assert snap_compare(app, terminal_size=(80, 24), run_before=partial(drive, keys))


NARROW = [("summary", ()), ("cdf_all_settings", ("3", "p")), ("curves", ("4",)), ("curves_next_plot", ("4", "p")),
          ("histograms", ("5",)), ("runs", ("6",)), ("learning", ("7",))]


@pytest.mark.parametrize(("name", "keys"), NARROW, ids=[v[0] for v in NARROW])
def test_view_60x20(snap_compare, cube_name: str, name: str, keys: Sequence[str]) -> None:
    """The narrow fallback: one plot at a time (p cycles) and a note saying so."""
    app = snap_app(cube_name)
    assert snap_compare(app, terminal_size=(60, 20), run_before=partial(drive, keys))


def test_missing_path(snap_compare, cube_name: str) -> None:
    app = snap_app("missing.zarr")
    assert snap_compare(app, terminal_size=(100, 30), run_before=partial(drive, ()))
