"""`saferl report` end to end on the small demo cube: outputs, files, and one-line errors."""

from __future__ import annotations

import csv
import io
import json
import shutil
from pathlib import Path

import numpy as np
import pytest

from cube import stats
from cube.cli import main


@pytest.fixture
def cube(small_demo_cube: Path, tmp_path: Path) -> Path:
    path = tmp_path / "demo.zarr"
    shutil.copytree(small_demo_cube, path)
    return path


def test_default_report_is_the_rich_aggregate_table(cube, capsys):
    assert main(["report", str(cube), "--boot", "50", "--baseline", "ppo"]) == 0
    out, err = capsys.readouterr()
    lines = out.splitlines()
    assert lines[0] == "SYNTHETIC DEMO DATA, not training results"
    assert "IQM(R̄) [CI]" in out and "IQM(D_norm+) [CI]" in out and "ppo †" in out and "† not safe RL" in out
    rows = [line for line in lines if line.startswith("│ ")]
    assert len(rows) == 4 * 3  # one row per algorithm and setting
    assert "SYNTHETIC" in err


def test_markdown_format_is_still_available(cube, capsys):
    assert main(["report", str(cube), "--boot", "50", "--format", "markdown"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert (lines[0] == "> SYNTHETIC DEMO DATA, not training results"
            and lines[2].startswith("| Algorithm | IQM(R) train"))


def test_csv_report_matches_the_api(cube, capsys):
    args = ["report", str(cube), "--format", "csv", "--boot", "40", "--settings", "final_greedy",
            "--algos", "p3o,focops", "--seeds", "0-1", "--rng-seed", "3"]
    assert main(args) == 0
    out = capsys.readouterr().out
    assert out.splitlines()[0] == "algo,setting,metric,value,ci_low,ci_high,not_safe,reason"
    rows = list(csv.DictReader(io.StringIO(out)))
    assert {r["algo"] for r in rows} == {"p3o", "focops"} and {r["setting"] for r in rows} == {"final_greedy"}
    ss = stats.select(stats.load_suffstats(cube), stats.Selection(algos=("p3o", "focops"), seeds=(0, 1)))
    agg = stats.aggregate_table(ss, ["final_greedy"], boot=40, rng_seed=3)
    assert len(rows) == 2 * (len(stats.METRICS) + 1)
    assert [r["metric"] for r in rows[: len(stats.METRICS) + 1]] == [*stats.METRICS, "tier"]
    for r in rows:
        if r["metric"] == "tier":
            assert r["value"] == str(int(agg["tier"].sel(algo=r["algo"], setting="final_greedy")))
            assert r["ci_low"] == r["ci_high"] == ""
            continue
        want = agg.sel(algo=r["algo"], setting="final_greedy", metric=r["metric"])
        for k in ("value", "ci_low", "ci_high"):  # full precision: the same float, not just close
            assert float(r[k]) == float(want[k]), (r, k)
    # the singular spellings and --out are aliases: the same file, byte for byte
    alias = ["report", str(cube), "--format", "csv", "--boot", "40", "--settings", "final_greedy",
             "--algo", "p3o,focops", "--seed", "0-1", "--rng-seed", "3", "--out", str(cube.parent / "a.csv")]
    assert main(alias) == 0
    assert (cube.parent / "a.csv").read_text() == out


def test_scheduler_flag_reaches_the_pass_over_the_episodes(cube, capsys, monkeypatch):
    """--scheduler (and $DASK_SCHEDULER_ADDRESS through it) is handed to cube.compute.scheduler_context."""
    import contextlib

    from cube import compute as cluster

    seen = []

    @contextlib.contextmanager
    def fake_context(address, *args, **kwargs):
        seen.append(address)
        yield None

    common = ["report", str(cube), "--format", "csv", "--boot", "10", "--no-cache"]
    assert main(common) == 0
    local = capsys.readouterr().out
    monkeypatch.setattr(cluster, "scheduler_context", fake_context)
    assert main([*common, "--scheduler", "tcp://127.0.0.1:8786"]) == 0
    assert seen == ["tcp://127.0.0.1:8786"] and capsys.readouterr().out == local
    assert main(common) == 0
    assert seen == ["tcp://127.0.0.1:8786", None]  # no flag: the environment variable decides (in cluster)


def test_singular_selection_aliases_and_flags(cube, capsys):
    assert main(["report", str(cube), "--per-condition", "--format", "csv", "--boot", "10",
                 "--task", "goal", "--bound", "15", "--algo", "p3o"]) == 0
    text = capsys.readouterr().out
    assert text.splitlines()[0] == "algo,task,bound,setting,metric,mean,std,n_seeds,not_safe,reason"
    rows = list(csv.DictReader(io.StringIO(text)))
    assert {(r["algo"], r["task"], float(r["bound"])) for r in rows} == {("p3o", "goal", 15.0)}
    assert main(["report", str(cube), "--cdf", "--format", "csv", "--boot", "10", "--algo", "p3o",
                 "--settings", "train"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == "algo,setting,kappa,cdf,ci_low,ci_high,not_safe,reason"
    assert all(x.startswith("p3o,train,") for x in lines[1:])


def test_poi_and_gap_from_the_cli_match_the_api(cube, capsys):
    assert main(["report", str(cube), "--poi", "p3o,ppo", "--format", "csv", "--boot", "30", "--rng-seed", "2"]) == 0
    rows = list(csv.DictReader(io.StringIO(capsys.readouterr().out)))
    poi = stats.probability_of_improvement(stats.load_suffstats(cube), "p3o", "ppo", boot=30, rng_seed=2)
    assert len(rows) == poi["value"].size
    for r in rows:
        want = poi.sel(setting=r["setting"], metric=r["metric"])
        assert float(r["value"]) == float(want["value"]) and float(r["ci_high"]) == float(want["ci_high"])
    assert main(["report", str(cube), "--gap", "--format", "json", "--boot", "30"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["kind"] == "gap" and len(doc["rows"]) == 4 * len(stats.METRICS)
    assert main(["report", str(cube), "--gap", "--boot", "30"]) == 0
    assert "ΔC̄" in capsys.readouterr().out


@pytest.mark.parametrize("fmt", ["table", "csv", "json", "markdown", "latex"])
def test_every_format_of_every_table(cube, tmp_path, fmt):
    out = tmp_path / "all"
    assert main(["report", str(cube), "--kind", "all", "--poi", "ppo_lag,ppo", "--gap", "--format", fmt,
                 "--boot", "10",
                 "--out", str(out if fmt not in ("table", "markdown") else out.with_suffix(".txt"))]) == 0
    if fmt in ("table", "markdown"):
        text = out.with_suffix(".txt").read_text()
        assert text.count("## ") == 5
    else:
        names = sorted(p.name for p in out.iterdir())
        assert names == sorted(f"{k}.{ {'csv': 'csv', 'json': 'json', 'latex': 'tex'}[fmt]}"
                               for k in ("aggregate", "conditions", "cdf", "poi", "gap"))


def test_one_seed_gives_nan_std_and_ci_with_a_one_line_warning(cube, capsys):
    assert main(["report", str(cube), "--seed", "1", "--format", "csv", "--boot", "10"]) == 0
    out, err = capsys.readouterr()
    rows = list(csv.DictReader(io.StringIO(out)))
    assert all(r["ci_low"] == "" for r in rows) and all(r["value"] != "" for r in rows)
    warn = [line for line in err.splitlines() if line.startswith("warning:")]
    assert warn and all("fewer than 2 seeds, CI reported as NaN" in w for w in warn)
    assert "Traceback" not in err


def test_output_suffix_picks_the_format(cube, tmp_path, capsys):
    out = tmp_path / "cdf.json"
    assert main(["report", str(cube), "--kind", "cdf", "--boot", "20", "--out", str(out)]) == 0
    doc = json.loads(out.read_text())
    assert doc["kind"] == "cdf" and doc["boot"] == 20 and doc["synthetic"] is True
    assert f"wrote {out}" in capsys.readouterr().out


def test_kind_all_writes_one_file_per_table(cube, tmp_path):
    out = tmp_path / "tables"
    assert main(["report", str(cube), "--kind", "all", "--format", "latex", "--boot", "20", "-o", str(out)]) == 0
    assert sorted(p.name for p in out.iterdir()) == ["aggregate.tex", "cdf.tex", "conditions.tex"]


def test_kind_all_markdown_goes_to_stdout_with_sections(cube, capsys):
    assert main(["report", str(cube), "--kind", "all", "--boot", "20", "--iterates", "2:4",
                 "--format", "markdown"]) == 0
    out = capsys.readouterr().out
    assert out.count("## ") == 3 and "Per-condition metrics" in out


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--algos", "trpo"], "unknown algo trpo"),
        (["--settings", "final"], "unknown setting 'final'"),
        (["--iterates", "9:12"], "reaches past the cube's last iterate"),
        (["--boot", "0"], "--boot must be >= 1"),
        (["--baseline", "ppo", "--algos", "p3o"], "--baseline ppo is not among the selected algorithms (p3o)"),
        (["--digits", "-1"], "--digits must be between 0 and 12"),
        (["--kind", "all", "--format", "csv"], "give --out DIR"),
        (["--poi", "ppo"], "cannot read --poi 'ppo'"),
        (["--poi", "ppo,trpo"], "unknown algo trpo"),
        (["--kind", "poi"], "--kind poi needs --poi X,Y"),
        (["--cvar-alpha", "1.5"], "CVaR alpha 1.5 is not in (0, 1]"),
    ],
)
def test_user_errors_are_one_line_exit_2(cube, capsys, extra, message):
    assert main(["report", str(cube), *extra]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error:") and message in err and "Traceback" not in err
    assert len(err.splitlines()) == 1


def test_cvar_alpha_is_chosen_on_the_command_line(cube, capsys):
    """`--cvar-alpha`: 0.05 comes from the cache the default report wrote; 0.2 is computed (and cached)."""
    assert main(["report", str(cube), "--format", "json", "--boot", "30", "--settings", "train"]) == 0
    default = json.loads(capsys.readouterr().out)
    assert default["cvar_alpha"] == 0.1
    for alpha in (0.05, 0.2):
        assert main(["report", str(cube), "--format", "json", "--boot", "30", "--settings", "train",
                     "--cvar-alpha", str(alpha)]) == 0
        doc = json.loads(capsys.readouterr().out)
        ss = stats.with_cvar_alpha(stats.load_suffstats(cube, cvar_alphas=(alpha,)), alpha)
        want = stats.aggregate_table(ss, ["train"], boot=30)
        for row in doc["rows"]:
            got = row["metrics"]["CVaR"]["value"]
            assert got == pytest.approx(want["value"].sel(algo=row["algo"], setting="train", metric="CVaR").item())
            assert row["metrics"]["V"] == next(r for r in default["rows"] if r["algo"] == row["algo"])["metrics"]["V"]
        assert doc["cvar_alpha"] == alpha
    assert main(["report", str(cube), "--per-condition", "--format", "markdown", "--cvar-alpha", "0.05"]) == 0
    assert "worst 5% of a run's episodes" in capsys.readouterr().out


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
    err = capsys.readouterr().err
    assert "no 'greedy' episodes in the selection" in err and "selected runs lack them: ppo/" in err
    assert len(err.strip().splitlines()) == 1
    assert main(["report", str(tiny_store), "--gap"]) == 2
    assert "the greedy-expl gap needs 'expl' episodes" in capsys.readouterr().err


def test_unwritable_outputs_are_one_line_errors(cube, tmp_path, capsys):
    afile = tmp_path / "afile"
    afile.write_text("x")
    assert main(["report", str(cube), "--kind", "all", "--format", "csv", "--boot", "5", "-o", str(afile)]) == 2
    assert "is a file" in capsys.readouterr().err
    assert main(["report", str(cube), "--boot", "5", "-o", str(tmp_path / "no" / "such" / "t.md")]) == 2
    assert "does not exist" in capsys.readouterr().err


def test_invalid_costs_and_corrupt_chunks_are_one_line_errors(tiny_store, tiny_key, capsys):
    import zarr

    from cube import write_episodes

    write_episodes(tiny_store, tiny_key, "train", 0, [1.0, 2.0], [10.0, 3.0])
    cost = zarr.open_array(tiny_store / "cost", mode="r+")
    idx = (1, 1, 1, 1, 0)  # ppo_lag, circle, 25, seed 1, iterate 0 (the writer itself rejects bad costs)
    for bad, what in ((-3.0, "1 negative cost(s)"), (np.inf, "1 infinite cost(s)"),
                      (np.nan, "1 NaN cost(s) of episodes with a reward")):
        cost[(*idx, 1, 0)] = bad
        assert main(["report", str(tiny_store), "--boot", "5", "--no-cache"]) == 2
        err = capsys.readouterr().err.strip()
        assert err.startswith(f"error: invalid cube: {what} (first at algo=ppo_lag task=circle bound=25.0 seed=1 "
                              "iterate=0 mode=train)") and len(err.splitlines()) == 1
    cost[(*idx, 1, 0)] = 3.0
    assert main(["report", str(tiny_store), "--boot", "5"]) == 0
    capsys.readouterr()
    chunk = next(p for p in sorted((tiny_store / "cost" / "c").rglob("*")) if p.is_file())
    chunk.write_bytes(b"not a zstd frame" * 8)
    assert main(["report", str(tiny_store), "--boot", "5", "--no-cache"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: cannot read the cube's episodes") and "Traceback" not in err
    assert len(err.splitlines()) == 1


@pytest.mark.parametrize("width", [80, 120])
def test_report_fits_the_terminal_and_cuts_no_number(cube, capsys, width):
    """At 80 and 120 columns (a terminal's width, or --width) every line fits and every IQM is whole:
    CIs move under the values or are left out, with a line saying how to see them."""
    assert main(["report", str(cube), "--boot", "50", "--width", str(width)]) == 0
    out = capsys.readouterr().out
    assert max(len(line.rstrip()) for line in out.splitlines()) <= width
    table = stats.aggregate_table(stats.load_suffstats(cube), boot=50)
    words = out.split()
    for v in table["value"].values.ravel():
        if np.isfinite(v):
            assert f"{v:.2f}" in words
    assert "…" not in out
    assert main(["report", str(cube), "--boot", "50", "--width", str(width), "--no-ci"]) == 0
    assert "[" not in capsys.readouterr().out.split("IQM over", 1)[1].split("\n", 2)[2]  # no CI anywhere
