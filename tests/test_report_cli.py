"""`saferl report` end to end on the small demo cube: outputs, files, and one-line errors."""

from __future__ import annotations

import csv
import io
import json
import shutil
from pathlib import Path

import pytest

from cube import stats
from cube.cli import main


@pytest.fixture
def cube(small_demo_cube: Path, tmp_path: Path) -> Path:
    path = tmp_path / "demo.zarr"
    shutil.copytree(small_demo_cube, path)
    return path


def test_default_report_is_the_aggregate_markdown_table(cube, capsys):
    assert main(["report", str(cube), "--boot", "50", "--baseline", "ppo"]) == 0
    out, err = capsys.readouterr()
    lines = out.splitlines()
    assert lines[0] == "> SYNTHETIC DEMO DATA, not training results" and lines[1] == ""
    assert lines[2].startswith("| Algorithm | IQM(R) train") and len(lines) == 2 + 2 + 4
    assert "SYNTHETIC" in err


def test_csv_report_matches_the_api(cube, capsys):
    args = ["report", str(cube), "--format", "csv", "--boot", "40", "--settings", "final_greedy",
            "--algos", "p3o,focops", "--seeds", "0-1", "--rng-seed", "3"]
    assert main(args) == 0
    rows = list(csv.DictReader(io.StringIO(capsys.readouterr().out)))
    assert {r["algo"] for r in rows} == {"p3o", "focops"} and {r["setting"] for r in rows} == {"final_greedy"}
    ss = stats.select(stats.load_suffstats(cube), stats.Selection(algos=("p3o", "focops"), seeds=(0, 1)))
    agg = stats.aggregate_table(ss, ["final_greedy"], boot=40, rng_seed=3)
    for r in rows:
        want = agg.sel(algo=r["algo"], setting="final_greedy", metric=r["metric"])
        assert float(r["ci_low"]) == pytest.approx(float(want["ci_low"]), rel=1e-9)


def test_output_suffix_picks_the_format(cube, tmp_path, capsys):
    out = tmp_path / "cdf.json"
    assert main(["report", str(cube), "--kind", "cdf", "--boot", "20", "-o", str(out)]) == 0
    doc = json.loads(out.read_text())
    assert doc["kind"] == "cdf" and doc["boot"] == 20 and doc["synthetic"] is True
    assert f"wrote {out}" in capsys.readouterr().out


def test_kind_all_writes_one_file_per_table(cube, tmp_path):
    out = tmp_path / "tables"
    assert main(["report", str(cube), "--kind", "all", "--format", "latex", "--boot", "20", "-o", str(out)]) == 0
    assert sorted(p.name for p in out.iterdir()) == ["aggregate.tex", "cdf.tex", "conditions.tex"]


def test_kind_all_markdown_goes_to_stdout_with_sections(cube, capsys):
    assert main(["report", str(cube), "--kind", "all", "--boot", "20", "--iterates", "2:4"]) == 0
    out = capsys.readouterr().out
    assert out.count("## ") == 3 and "Per-condition metrics" in out


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--algos", "trpo"], "unknown algo trpo"),
        (["--settings", "final"], "unknown setting 'final'"),
        (["--iterates", "9:12"], "no iterates in 9..12"),
        (["--boot", "0"], "--boot must be >= 1"),
        (["--baseline", "ppo", "--algos", "p3o"], "--baseline ppo is not among the selected algorithms (p3o)"),
        (["--digits", "-1"], "--digits must be between 0 and 12"),
        (["--kind", "all", "--format", "csv"], "give --output DIR"),
    ],
)
def test_user_errors_are_one_line_exit_2(cube, capsys, extra, message):
    assert main(["report", str(cube), *extra]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error:") and message in err and "Traceback" not in err
    assert len(err.splitlines()) == 1


def test_missing_cube_is_an_error(tmp_path, capsys):
    assert main(["report", str(tmp_path / "nope.zarr")]) == 2
    assert "does not exist" in capsys.readouterr().err


def test_cube_still_training_reports_train_only(tiny_store, tiny_key, capsys):
    from cube import write_episodes

    write_episodes(tiny_store, tiny_key, "train", 0, [[1.0, 2.0], [3.0, 4.0]], [[10.0, 30.0], [20.0, 26.0]])
    assert main(["report", str(tiny_store), "--boot", "10", "--format", "json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert {r["setting"] for r in doc["rows"]} == {"train"}
    lag = next(r for r in doc["rows"] if r["algo"] == "ppo_lag")
    # one run, d = 25: iterate 0 costs (10, 30) and iterate 1 costs (20, 26) -> V = mean(1/2, 1/2)
    assert lag["metrics"]["V"]["value"] == 0.5 and lag["metrics"]["C"]["value"] == pytest.approx(21.5)
    assert lag["metrics"]["Dplus"]["value"] == pytest.approx((5 / 25 + 1 / 25) / 2)
    assert main(["report", str(tiny_store), "--settings", "final_greedy"]) == 2
    assert "no 'greedy' episodes in the selection" in capsys.readouterr().err


def test_unwritable_outputs_are_one_line_errors(cube, tmp_path, capsys):
    afile = tmp_path / "afile"
    afile.write_text("x")
    assert main(["report", str(cube), "--kind", "all", "--format", "csv", "--boot", "5", "-o", str(afile)]) == 2
    assert "is a file" in capsys.readouterr().err
    assert main(["report", str(cube), "--boot", "5", "-o", str(tmp_path / "no" / "such" / "t.md")]) == 2
    assert "does not exist" in capsys.readouterr().err
