"""Every run's conventions (cost discounting, window, evaluation, normalization, complete or sampled history):
recorded by `saferl import` from files, flags or 'unknown', read for older runs by their writer, and shown by
`saferl report` (one line when runs side by side differ; beside `--reference paper`) and the TUI's Runs view."""

from __future__ import annotations

import asyncio
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from cube import CubeError, Recorder, read_manifests
from cube.cli import main
from cube.io.conventions import (
    CONVENTIONS_KEY,
    TRAIN_CONVENTIONS,
    conventions_of,
    difference_line,
    note_convention,
    reference_line,
    settle_conventions,
)
from cube.io.sourcefiles import ImportedRun
from cube.schema import RunKey
from tests.tuiwait import until_quiet


def _table(path: Path, algo: str) -> Path:
    rows = [(algo, "goal", 10.0, 0, j, "train", 1.0, c) for j in range(2) for c in (5.0, 15.0)]
    pd.DataFrame(rows, columns=["algo", "task", "bound", "seed", "iterate", "mode", "reward", "cost"]).to_csv(
        path, index=False)
    return path


def _mixed_cube(tmp_path: Path) -> Path:
    """Two algorithms imported with different normalization flags."""
    out = tmp_path / "mixed.zarr"
    assert main(["import", "episodes", str(_table(tmp_path / "a.csv", "ppo_lag")), "--out", str(out),
                 "--normalization", "raw", "--cost-discount", "undiscounted"]) == 0
    assert main(["import", "episodes", str(_table(tmp_path / "b.csv", "focops")), "--into", str(out),
                 "--normalization", "normalized", "--cost-discount", "undiscounted"]) == 0
    return out


def test_flags_fill_what_files_do_not_say_and_unknown_otherwise(tmp_path: Path) -> None:
    out = _mixed_cube(tmp_path)
    rows = {r["algo"]: r for r in read_manifests(out) if r["status"] != "pending"}
    a, b = rows["ppo_lag"][CONVENTIONS_KEY], rows["focops"][CONVENTIONS_KEY]
    assert a["normalization"] == {"value": "raw", "from": "flag --normalization"}
    assert b["normalization"]["value"] == "normalized"
    assert a["window"] == {"value": "none", "from": "the stored data"}
    assert a["history"] == {"value": "unknown", "from": "nothing says"}
    assert a["evaluation"]["value"] == "none"


def test_report_shows_conventions_and_says_when_runs_differ(tmp_path: Path, capsys) -> None:
    out = _mixed_cube(tmp_path)
    capsys.readouterr()
    assert main(["report", str(out), "--boot", "20"]) == 0
    err = [ln for ln in capsys.readouterr().err.splitlines() if "conventions" in ln or "differ" in ln]
    assert err == ["note: the runs compared differ in normalization (normalized: 1 run(s), raw: 1 run(s)): their "
                   "numbers may not be comparable (each run's manifest says where its conventions come from)"]
    assert main(["report", str(out), "--boot", "20", "--algo", "ppo_lag", "--reference", "paper"]) == 0
    err = capsys.readouterr().err
    line = "note: conventions: cost undiscounted; window none; evaluation none; normalization raw; history unknown"
    assert line in err
    assert ("the cube's conventions differ from paper's (evaluation: paper deterministic and stochastic, cube none; "
            "history: paper complete, cube unknown): compare with care") in err


def test_a_flag_that_contradicts_a_file_is_refused_a_format_default_gives_way() -> None:
    run = ImportedRun(RunKey("a", "t", 1.0, 0), "x.csv")
    run.episodes[("train", 0)] = (np.array([1.0]), np.array([2.0]))
    note_convention(run, "normalization", "raw", "the file says so")
    with pytest.raises(CubeError, match="--normalization normalized contradicts the source, which says normali"):
        settle_conventions(run, {"normalization": "normalized"})
    run = ImportedRun(RunKey("a", "t", 1.0, 0), "x.csv")
    run.episodes[("greedy", 0)] = (np.array([1.0]), np.array([2.0]))
    note_convention(run, "evaluation", "deterministic", "the tool's default", default=True)
    settle_conventions(run, {"evaluation": "stochastic"})
    assert run.manifest[CONVENTIONS_KEY]["evaluation"] == {"value": "stochastic", "from": "flag --eval"}


def test_runs_written_before_the_key_are_read_by_their_writer(tmp_path: Path) -> None:
    assert conventions_of({"writer": "saferl train", "config": {}}) == TRAIN_CONVENTIONS
    assert conventions_of({"config": {"lr": 1}}) == TRAIN_CONVENTIONS  # manifests before the writer key
    old_import = conventions_of({"writer": "saferl import omnisafe", "means": {"train": {"kind": "sliding",
                                                                                         "window_episodes": 50}}})
    assert old_import["window"] == "sliding, 50 episodes" and old_import["cost_discount"] == "unknown"
    with Recorder(tmp_path / "r.zarr", algo="mine", task="t", bound=5.0, seed=0) as rec:
        rec.train_episodes(0, [1.0], [2.0])
    recorded = conventions_of(read_manifests(tmp_path / "r.zarr")[0])
    assert recorded["window"] == "none" and recorded["normalization"] == "unknown"
    assert difference_line([{"writer": "saferl train"}] * 2) is None
    assert reference_line([{"writer": "saferl train"}], TRAIN_CONVENTIONS, "paper") is None


def test_the_tui_runs_view_says_the_runs_differ(tmp_path: Path) -> None:
    from textual.widgets import Static

    from saferl_tui.app import build_app

    out = _mixed_cube(tmp_path)

    async def go() -> str:
        app = build_app(out, boot=20, export_dir=tmp_path)
        async with app.run_test(size=(120, 40)) as pilot:
            await until_quiet(pilot)
            await pilot.press("6")
            await until_quiet(pilot)
            return str(app.screen.query_one("#runs-title", Static).render())

    title = asyncio.run(go())
    assert "the runs compared differ in normalization (normalized: 1 run(s), raw: 1 run(s))" in title
