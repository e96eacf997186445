"""`saferl import`: other tools' result files into a cube, metrics checked by hand, means never episodes."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from cube import open_cube, read_manifests, stats, validate
from cube.cli import main
from cube.stats.runs import not_available_text
from tests.tuiwait import until_quiet


def _report_json(path: Path, tmp_path: Path, *extra: str) -> dict:
    out = tmp_path / f"report-{len(list(tmp_path.iterdir()))}.json"
    assert main(["report", str(path), "--format", "json", "--boot", "50", "--out", str(out), *extra]) == 0
    return json.loads(out.read_text())


def _err(capsys: pytest.CaptureFixture[str]) -> str:
    lines = [ln for ln in capsys.readouterr().err.splitlines() if ln.startswith("error:")]
    assert len(lines) == 1
    return lines[0]


# ------------------------------------------------------------------------------------------ episodes
def _episode_rows() -> pd.DataFrame:
    rows = []
    # run A: d = 10; iterate 0 train costs 5, 15 (V = 1/2), iterate 1 train costs 20 (V = 1); greedy at 1: 8, 12
    for it, costs in ((0, [5.0, 15.0]), (1, [20.0])):
        rows += [("lag", "goal", 10.0, 0, it, "train", 1.0 + c, c) for c in costs]
    rows += [("lag", "goal", 10.0, 0, 1, "greedy", np.nan, c) for c in (8.0, 12.0)]
    rows += [("lag", "goal", 10.0, 1, 0, "train", 2.0, 4.0)]
    return pd.DataFrame(rows, columns=["algo", "task", "bound", "seed", "iterate", "mode", "reward", "cost"])


@pytest.mark.parametrize("suffix", [".csv", ".parquet"])
def test_episodes_table_round_trip_and_hand_metrics(tmp_path: Path, suffix: str) -> None:
    src = tmp_path / f"episodes{suffix}"
    df = _episode_rows()
    df.to_csv(src, index=False) if suffix == ".csv" else df.to_parquet(src)
    out = tmp_path / "cube.zarr"
    assert main(["import", "episodes", str(src), "--out", str(out)]) == 0
    assert validate(out) == []
    ds = open_cube(out).compute()
    run = ds.sel(algo="lag", task="goal", bound=10.0, seed=0)
    np.testing.assert_array_equal(run.cost.sel(mode="train", iterate=0).values[:2], [5.0, 15.0])
    assert np.isnan(run.reward.sel(mode="greedy", iterate=1).values[:2]).all()
    ss = stats.load_suffstats(out, cache=False)
    rm = stats.run_metrics(ss, "train").sel(algo="lag", task="goal", bound=10.0, seed=0)
    # eq. 5: the mean over iterates of each iterate's metric
    assert float(rm["V"]) == pytest.approx((0.5 + 1.0) / 2)
    assert float(rm["C"]) == pytest.approx((10.0 + 20.0) / 2)
    assert float(rm["Dplus"]) == pytest.approx((0.5 + 1.0) / 2)  # (15-10)/10 and (20-10)/10
    greedy = stats.run_metrics(ss, "final_greedy").sel(algo="lag", task="goal", bound=10.0, seed=0)
    assert float(greedy["V"]) == pytest.approx(0.5) and np.isnan(float(greedy["R"]))


@pytest.mark.parametrize(("change", "message"), [
    (lambda df: df.drop(columns=["cost"]), "lacks the column(s) cost"),
    (lambda df: df.assign(cost=df["cost"].where(df.index != 2, -1.0)), "data row 3: cost must be a finite number >= 0"),
    (lambda df: df.assign(mode=df["mode"].where(df.index != 0, "test")), "data row 1: mode must be one of"),
    (lambda df: df.assign(bound=0.0), "bound d must be a finite number > 0"),
    (lambda df: df.assign(seed=df["seed"].astype(float) + 0.5), "seed must be a non-negative integer"),
    (lambda df: df.assign(iterate="x"), "iterate is empty or not a number"),
])
def test_bad_episode_tables_are_one_line_and_write_nothing(tmp_path: Path, capsys, change, message: str) -> None:
    src = tmp_path / "bad.csv"
    change(_episode_rows()).to_csv(src, index=False)
    out = tmp_path / "cube.zarr"
    assert main(["import", "episodes", str(src), "--out", str(out)]) == 2
    assert message in _err(capsys)
    assert not out.exists() and sorted(p.name for p in tmp_path.iterdir()) == ["bad.csv"]


def test_existing_output_needs_force_and_is_kept_on_failure(tmp_path: Path, capsys) -> None:
    src = tmp_path / "ep.csv"
    _episode_rows().to_csv(src, index=False)
    out = tmp_path / "cube.zarr"
    assert main(["import", "episodes", str(src), "--out", str(out)]) == 0
    assert main(["import", "episodes", str(src), "--out", str(out)]) == 2
    assert "already exists; pass --force" in _err(capsys)
    (tmp_path / "bad.csv").write_text("algo,task\nx,y\n")
    assert main(["import", "episodes", str(tmp_path / "bad.csv"), "--out", str(out), "--force"]) == 2
    assert validate(out) == []


# ---------------------------------------------------------------------------------------- saferl-eval
def _saferl_eval_files(folder: Path, seed: int, expl: list[float], greedy: list[float], history: bool = True) -> None:
    prefix = f"safe_circle_point_Level_1_ppo_lag_bound25_seed{seed}_20261126-101010"
    row = {"run_name": prefix, "env": "safe_circle_point", "algo": "ppo_lag", "bound": 25, "seed": seed, "level": 1,
           "train_reward": 1.0, "train_cost": 2.0, "test_episode_costs": json.dumps(expl),
           "det_test_episode_costs": json.dumps(greedy), "det_test_cost": float(np.mean(greedy))}
    pd.DataFrame([row]).to_csv(folder / f"{prefix}_summary.csv", index=False)
    if history:
        hist = []
        for step, (r, c, lam) in enumerate(((10.0, 40.0, 0.5), (20.0, 30.0, 1.0), (30.0, 20.0, 1.5))):
            hist += [(1000 * (step + 1), "episodic/reward", r), (1000 * (step + 1), "episodic/cost", c),
                     (1000 * (step + 1), "training/lambda_lagr", lam), (1000 * (step + 1), "eval/episode_cost", 1.0)]
        pd.DataFrame(hist, columns=["step", "metric", "value"]).to_csv(folder / f"{prefix}_history.csv", index=False)


def test_saferl_eval_final_episodes_are_episodes_training_is_means(tmp_path: Path, capsys) -> None:
    src = tmp_path / "results"
    src.mkdir()
    _saferl_eval_files(src, 0, expl=[10.0, 30.0, 20.0, 50.0], greedy=[26.0, 24.0])
    _saferl_eval_files(src, 1, expl=[0.0, 0.0], greedy=[30.0, 30.0], history=False)
    out = tmp_path / "paper.zarr"
    assert main(["import", "saferl-eval", str(src), "--out", str(out)]) == 0
    assert validate(out) == []
    ds = open_cube(out)
    assert list(ds.task.values) == ["circle"] and list(ds.seed.values) == [0, 1]
    # the finals sit at the iterate of the last logged training step (2 of 0..2), not one after it
    assert ds.sizes["iterate"] == 3
    at = ds["cost"].sel(algo="ppo_lag", task="circle", bound=25.0).notnull().any("episode")
    assert at.sel(seed=0, mode="expl").values.tolist() == [False, False, True]
    assert at.sel(seed=0, mode="train").values.tolist() == [True, True, True]
    assert at.sel(seed=1, mode="greedy").values.tolist() == [True, False, False]  # no history: iterate 0
    rows = {r["seed"]: r for r in read_manifests(out)}
    assert (rows[0]["iterates_done"], rows[1]["iterates_done"]) == (3, 1)
    ss = stats.load_suffstats(out, cache=False)
    expl = stats.run_metrics(ss, "final_expl").sel(algo="ppo_lag", task="circle", bound=25.0)
    np.testing.assert_allclose(expl["V"].values, [2 / 4, 0.0])  # 30 and 50 exceed 25; strict cost > d
    np.testing.assert_allclose(expl["Dplus"].values, [((30 - 25) / 25 + (50 - 25) / 25) / 2, 0.0])
    train = stats.run_metrics(ss, "train").sel(algo="ppo_lag", task="circle", bound=25.0, seed=0)
    assert float(train["C"]) == pytest.approx(30.0) and float(train["R"]) == pytest.approx(20.0)
    assert np.isnan(float(train["V"])) and np.isnan(float(train["Dplus"]))  # means: no violation rate
    np.testing.assert_allclose(ds.multiplier.sel(seed=0, algo="ppo_lag", task="circle", bound=25.0).values[:3],
                               [0.5, 1.0, 1.5])
    report = _report_json(out, tmp_path)
    notes = [ln for ln in capsys.readouterr().err.splitlines()
             if "V, D_norm+, CVaR, tiers and CDFs are not available" in ln]
    assert len(notes) == 1
    assert report


def test_aggregate_only_never_yields_v_dplus_tier_or_cdf(tmp_path: Path) -> None:
    runs = tmp_path / "runs"
    for seed in (0, 1, 2):
        run_dir = runs / "PPOLag-{SafetyPointGoal1-v0}" / f"seed-00{seed}-2026-11-26-10-00-00"
        run_dir.mkdir(parents=True)
        (run_dir / "config.json").write_text(json.dumps({"seed": seed, "algo": "PPOLag",
                                                         "env_id": "SafetyPointGoal1-v0",
                                                         "lagrange_cfgs": {"cost_limit": 25.0}}))
        pd.DataFrame({"Metrics/EpRet": [1.0, 2.0, np.nan], "Metrics/EpCost": [50.0, 20.0 + seed, np.nan],
                      "TotalEnvSteps": [2000, 4000, 6000], "Metrics/LagrangeMultiplier": [0.1, 0.2, 0.3]}
                     ).to_csv(run_dir / "progress.csv", index=False)
    out = tmp_path / "omni.zarr"
    assert main(["import", "omnisafe", str(runs), "--out", str(out)]) == 0
    assert validate(out) == []
    ss = stats.load_suffstats(out, cache=False)
    agg = stats.aggregate_table(ss, settings=["train"], boot=50)
    row = agg.sel(algo="PPOLag", setting="train")
    c_by_hand = np.mean([(50.0 + 20.0 + s) / 2 for s in (0, 1, 2)])  # IQM of 3 = middle seed's condition mean
    assert float(row["value"].sel(metric="C")) == pytest.approx(c_by_hand)
    assert float(row["value"].sel(metric="Dnorm")) == pytest.approx((c_by_hand - 25) / 25)
    assert np.isnan(row["value"].sel(metric=["V", "Dplus"]).values).all()
    assert int(row["tier"]) == -1
    cdf = stats.cdf_curves(ss, settings=["train"], boot=50)
    assert np.isnan(cdf["cdf"].values).all()
    ct = stats.condition_table(ss, settings=["train"])
    assert (ct["tier"].values == -1).all() and np.isnan(ct["V_mean"].values).all()
    assert [r["status"] for r in read_manifests(out)] == ["complete"] * 3


def test_safepo_needs_a_bound_when_config_has_none(tmp_path: Path, capsys) -> None:
    run_dir = tmp_path / "SafetyCarGoal1" / "ppo_lag" / "seed-003-2026"
    run_dir.mkdir(parents=True)
    (run_dir / "config.json").write_text("{}")
    pd.DataFrame({"Metrics/EpRet": [3.0], "Metrics/EpCost": [12.0], "Train/TotalSteps": [1000],
                  "Train/LagragianMultiplier": [0.7]}).to_csv(run_dir / "progress.csv", index=False)
    out = tmp_path / "safepo.zarr"
    assert main(["import", "safepo", str(tmp_path / "SafetyCarGoal1"), "--out", str(out)]) == 2
    assert "no bound in config.json" in _err(capsys)
    assert main(["import", "safepo", str(tmp_path / "SafetyCarGoal1"), "--out", str(out), "--bound", "25"]) == 0
    ds = open_cube(out)
    assert (list(ds.algo.values), list(ds.task.values), list(ds.seed.values)) == (["ppo_lag"], ["SafetyCarGoal1"], [3])
    assert float(ds.multiplier.squeeze()) == pytest.approx(0.7)


def test_overrides_and_collisions(tmp_path: Path, capsys) -> None:
    src = tmp_path / "results"
    src.mkdir()
    _saferl_eval_files(src, 0, expl=[1.0], greedy=[2.0], history=False)
    _saferl_eval_files(src, 1, expl=[1.0], greedy=[2.0], history=False)
    out = tmp_path / "x.zarr"
    assert main(["import", "saferl-eval", str(src), "--out", str(out), "--seed", "4"]) == 2
    assert "are both run ppo_lag/circle/d=25/seed=4" in _err(capsys)
    assert main(["import", "saferl-eval", str(src), "--out", str(out), "--algo", "mine"]) == 0
    assert list(open_cube(out).algo.values) == ["mine"]


@pytest.mark.parametrize(("fmt", "message"), [("omnisafe", "no omnisafe progress.csv found"),
                                               ("saferl-eval", "no SafeRLEval summary")])
def test_empty_sources(tmp_path: Path, capsys, fmt: str, message: str) -> None:
    assert main(["import", fmt, str(tmp_path), "--out", str(tmp_path / "o.zarr")]) == 2
    assert message in _err(capsys)


def _omnisafe_cube(tmp_path: Path) -> Path:
    runs = tmp_path / "runs"
    for seed in (0, 1):
        run_dir = runs / "PPOLag-{SafetyPointGoal1-v0}" / f"seed-00{seed}-2026"
        run_dir.mkdir(parents=True)
        (run_dir / "config.json").write_text(json.dumps({"seed": seed, "algo": "PPOLag", "env_id": "Goal",
                                                         "algo_cfgs": {"cost_limit": 25.0}}))
        pd.DataFrame({"Metrics/EpRet": [1.0, 2.0], "Metrics/EpCost": [30.0, 20.0 + seed],
                      "TotalEnvSteps": [2000, 4000]}).to_csv(run_dir / "progress.csv", index=False)
    out = tmp_path / "omni.zarr"
    assert main(["import", "omnisafe", str(runs), "--out", str(out)]) == 0
    return out


@pytest.mark.parametrize("fmt", ["csv", "json", "markdown", "latex", "table"])
@pytest.mark.parametrize("kind", ["aggregate", "conditions"])
def test_every_output_says_not_available_for_means(tmp_path: Path, fmt: str, kind: str,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    """V, D_norm+ and the tier of means-only runs are missing with their reason in every format, never a
    number (docs/statistics.md, "Numbers not available": an empty CSV cell and a `reason` column, JSON null
    and `reason`, `n/a` and a note in human tables); R̄, C̄ and D_norm are numbers."""
    out = _omnisafe_cube(tmp_path)
    capsys.readouterr()
    target = tmp_path / f"t.{ {'csv': 'csv', 'json': 'json', 'markdown': 'md', 'latex': 'tex', 'table': 'txt'}[fmt]}"
    args = ["report", str(out), "--kind", kind, "--format", fmt, "--boot", "20", "--settings", "train"]
    assert main([*args, "--out", str(target)]) == 0
    text = target.read_text()
    why = not_available_text(stats.load_suffstats(out).attrs)  # what the stored means are, never "per-epoch"
    assert "means of several episodes" in why and "per-epoch" not in why
    if fmt == "json":
        doc = json.loads(text)
        row = doc["rows"][0]
        assert doc["reasons"]["means-only"] == why
        if kind == "aggregate":
            assert row["metrics"]["V"] == {"value": None, "ci_low": None, "ci_high": None, "honest_low": None,
                                           "honest_high": None, "reason": "means-only"}
            assert row["tier_reason"] == "means-only"
            assert row["metrics"]["C"]["value"] == pytest.approx(25.25)
        else:
            assert row["reason"]["V"] == row["reason"]["Dplus"] == row["reason"]["tier"] == "means-only"
            assert row["V_mean"] is None and row["C_mean"] == pytest.approx(25.25)
        return
    if fmt == "csv":
        rows = {r["metric"]: r for r in csv.DictReader(io.StringIO(text))}
        value = "value" if kind == "aggregate" else "mean"
        assert rows["V"][value] == rows["Dplus"][value] == rows["tier"][value] == ""
        assert rows["V"]["reason"] == rows["Dplus"]["reason"] == rows["tier"]["reason"] == "means-only"
        assert float(rows["C"][value]) == pytest.approx(25.25) and "n/a" not in text
        return
    flat = " ".join(text.split())  # a rich title may wrap
    assert "n/a" in text and " ".join(why.split()) in flat
    assert "nan" not in text.lower().replace("n/a", "")


def test_tui_summary_says_not_available(tmp_path: Path) -> None:
    import asyncio

    from saferl_tui.app import build_app

    out = _omnisafe_cube(tmp_path)

    async def go() -> tuple[str, str]:
        app = build_app(out, boot=20, export_dir=tmp_path)
        async with app.run_test(size=(120, 40)) as pilot:
            await until_quiet(pilot)
            from textual.widgets import DataTable

            def text(table: DataTable) -> str:
                return " ".join(str(c) for row in range(table.row_count) for c in table.get_row_at(row))

            summary = text(app.screen.query_one("#summary-table", DataTable))
            await pilot.press("2")
            await until_quiet(pilot)
            conditions = " ".join(text(t) for t in app.screen.query(DataTable) if t.display)
            return summary, conditions

    summary, conditions = asyncio.run(go())
    assert "n/a" in summary and "n/a" in conditions


@pytest.mark.parametrize("damage", ["truncated parquet", "malformed json", "truncated csv"])
def test_damaged_sources_are_one_line(tmp_path: Path, capsys, damage: str) -> None:
    if damage == "truncated parquet":
        src = tmp_path / "ep.parquet"
        _episode_rows().to_parquet(src)
        src.write_bytes(src.read_bytes()[: src.stat().st_size // 2])
        argv = ["import", "episodes", str(src)]
    elif damage == "truncated csv":
        src = tmp_path / "ep.csv"
        src.write_text("algo,task,bound,seed,iterate,mode,reward,cost\nlag,goal,10,0,0,train,1.0,")
        argv = ["import", "episodes", str(src)]
    else:
        src = tmp_path / "results"
        src.mkdir()
        _saferl_eval_files(src, 0, expl=[1.0], greedy=[2.0], history=False)
        summary = next(src.glob("*_summary.csv"))
        summary.write_text(summary.read_text().replace("[1.0]", "[1.0,"))
        argv = ["import", "saferl-eval", str(src)]
    out = tmp_path / "o.zarr"
    assert main([*argv, "--out", str(out)]) == 2
    line = _err(capsys)
    assert str(src.name) in line or "JSON" in line or "cost" in line
    assert not out.exists()


def test_validate_counts_an_imports_means_as_means_not_episodes(tmp_path: Path,
                                                                capsys: pytest.CaptureFixture[str]) -> None:
    out = _omnisafe_cube(tmp_path)
    capsys.readouterr()
    assert main(["validate", str(out)]) == 0
    text = capsys.readouterr().out
    assert "means (train)" in text and "episodes (train)" not in text
