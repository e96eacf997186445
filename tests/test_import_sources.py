"""`saferl import` on files in the real tools' formats (tests/import_fixtures.py says where each detail
comes from): what the numbers are, empty lists, reward means, manifests, --into, and bad input refused
before anything is written (issue 24; issue 26 item 13)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from cube import Recorder, open_cube, read_manifests, stats, validate
from cube.cli import main
from cube.schema import MAX_SEED, run_facts
from cube.stats.reasons import reason_codes
from cube.stats.runs import not_available_text
from cube.store.layout import MAX_ITERATES
from tests.import_fixtures import omnisafe_config, omnisafe_run, safepo_run, saferl_eval_run

GOAL = "SafetyPointGoal1-v0"
# The issue's real run: 3 epochs of 2,000 steps (2 episodes of 1,000 steps each), d = 20. OmniSafe logged
# C = 105.2 on average where the epochs' own means give 69.9 (D_norm 4.26 vs 2.50).
ISSUE_EPOCHS = [[(1.0, 140.0), (2.0, 160.0)], [(3.0, 40.0), (3.0, 42.8)], [(4.0, 18.3), (4.0, 18.3)]]


def _err(capsys: pytest.CaptureFixture[str]) -> str:
    lines = [ln for ln in capsys.readouterr().err.splitlines() if ln.startswith("error:")]
    assert len(lines) == 1, lines
    return lines[0]


def _tree(root: Path) -> set[Path]:
    return {p for p in root.rglob("*")}


def _train(ss, algo: str, **labels) -> dict[str, float]:
    rm = stats.run_metrics(ss, "train").sel(algo=algo, **labels)
    return {m: float(rm[m].squeeze()) for m in stats.METRICS}


# ------------------------------------------------------------------------- 1. what the means are
def test_omnisafe_numbers_are_said_to_be_sliding_windows(tmp_path: Path, capsys) -> None:
    runs = tmp_path / "runs"
    omnisafe_run(runs, "PPOLag", GOAL, 0, ISSUE_EPOCHS, cost_limit=20.0)
    omnisafe_run(runs, "CPO", GOAL, 0, ISSUE_EPOCHS, cost_limit=20.0)
    out = tmp_path / "omni.zarr"
    assert main(["import", "omnisafe", str(runs), "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    assert validate(out) == []
    ss = stats.load_suffstats(out, cache=False)
    for algo in ("PPOLag", "CPO"):  # stored as OmniSafe logged them: window means, not epoch means
        m = _train(ss, algo)
        assert m["C"] == pytest.approx(105.2, abs=1e-4) and m["Dnorm"] == pytest.approx(4.26, abs=1e-5)
        assert np.isnan(m["V"]) and np.isnan(m["Dplus"])
    assert np.mean([np.mean([c for _, c in ep]) for ep in ISSUE_EPOCHS]) == pytest.approx(69.9)
    rows = {r["algo"]: r for r in read_manifests(out)}
    means = rows["PPOLag"]["means"]["train"]
    assert (means["kind"], means["window_episodes"], means["episodes_per_epoch"], means["window_epochs"],
            means["partial_windows"]) == ("sliding", 50, 2, 25, 24)
    text = means["text"]
    for part in ("sliding window of the last 50 episodes, kept across epochs", "OmniSafe <= 0.5.0 fixes 50",
                 "a full window spans 25 epochs", "epochs 0-23 hold every episode so far (2 to 48)",
                 "logger_cfgs.window_lens = 100", "--window 100"):
        assert part in text
    assert "per-epoch mean" not in text
    assert open_cube(out).attrs["means_notes"] == {"omnisafe": text}  # the store says it too
    assert not_available_text(open_cube(out).attrs).endswith(text)  # the report's and the TUI's note
    assert f"note: {text}" in printed and printed.count("note:") == 1  # the same window: said once
    assert rows["PPOLag"]["bound"] == rows["CPO"]["bound"] == 20.0  # lagrange_cfgs / algo_cfgs cost_limit
    ds = open_cube(out)
    lam = ds.multiplier.sel(algo="PPOLag", task=GOAL, bound=20.0, seed=0).values
    np.testing.assert_allclose(lam, [0.001, 0.101, 0.201])
    assert np.isnan(ds.multiplier.sel(algo="CPO", task=GOAL, bound=20.0, seed=0).values).all()


def test_window_from_the_command_line_and_unknown_episodes_per_epoch(tmp_path: Path) -> None:
    runs = tmp_path / "runs"
    cfg = omnisafe_config("PPOLag", GOAL, 0, steps_per_epoch=2000)
    del cfg["algo_cfgs"]["steps_per_epoch"]
    omnisafe_run(runs, "PPOLag", GOAL, 0, ISSUE_EPOCHS[:1], config=cfg)  # one epoch: no step difference either
    out = tmp_path / "o.zarr"
    assert main(["import", "omnisafe", str(runs), "--out", str(out), "--window", "100"]) == 0
    means = read_manifests(out)[0]["means"]["train"]
    assert means["window_episodes"] == 100 and means["window_from"] == "--window"
    assert "last 100 episodes" in means["text"] and "episodes per epoch are unknown" in means["text"]
    assert "--window 100" not in means["text"]


def test_safepo_numbers_are_epoch_means_of_running_means(tmp_path: Path) -> None:
    rng = np.random.default_rng(0)
    epochs = [[(float(r), float(c)) for r, c in zip(rng.normal(5, 1, 4), rng.gamma(2, 10, 4), strict=True)]
              for _ in range(3)]
    safepo_run(tmp_path / "runs", "ppo_lag", "SafetyCarGoal1-v0", 3, epochs)
    out = tmp_path / "p.zarr"
    assert main(["import", "safepo", str(tmp_path / "runs"), "--out", str(out)]) == 0
    row = read_manifests(out)[0]
    assert (row["algo"], row["task"], row["seed"], row["bound"]) == ("ppo_lag", "SafetyCarGoal1-v0", 3, 25.0)
    means = row["means"]["train"]
    assert (means["kind"], means["window_episodes"], means["episodes_per_epoch"], means["window_epochs"]) == (
        "running", 50, 4, 13)
    assert "per-epoch means, over the epoch's finished episodes, of a running mean of the last 50" in means["text"]
    assert run_facts(row)["wall_s"] == pytest.approx(90.0)  # SafePO's Time/Total is per epoch: summed
    # stored as SafePO logged them (the epoch mean of running means), never re-labelled as episodes
    logged = pd.read_csv(next((tmp_path / "runs").rglob("progress.csv")))["Metrics/EpCost"].mean()
    assert _train(stats.load_suffstats(out, cache=False), "ppo_lag")["C"] == pytest.approx(logged, rel=1e-6)


def test_reason_sentence_without_notes_does_not_claim_epoch_means() -> None:
    text = not_available_text({"imported_from": "omnisafe"})
    assert "omnisafe" in text and "per-epoch" not in text


# ------------------------------------------------------ 2, 3, 7. SafeRLEval: [], reward means, D_norm+
def test_saferl_eval_empty_list_reward_means_and_the_dplus_difference(tmp_path: Path, capsys) -> None:
    src = tmp_path / "results"
    src.mkdir()
    # seed 0: no exploration evaluation ("[]", test_* empty), greedy with 2 of 4 episodes over d = 25
    saferl_eval_run(src, 0, greedy=[10.0, 30.0, 20.0, 50.0], greedy_reward=7.5,
                    history=[(1000, 10.0, 40.0, 0.5), (2000, 20.0, 30.0, 1.0)])
    # seed 1: both evaluations, no violating episode in either
    saferl_eval_run(src, 1, greedy=[20.0, 24.0], greedy_reward=9.0, expl=[5.0, 5.0], expl_reward=2.0)
    out = tmp_path / "paper.zarr"
    assert main(["import", "saferl-eval", str(src), "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    assert validate(out) == []
    ss = stats.load_suffstats(out, cache=False)
    at = {"algo": "ppo_lag", "task": "circle", "bound": 25.0}
    assert stats.runs_without(ss, "final_expl") == ["ppo_lag/circle/d=25/seed=0"]
    greedy = stats.run_metrics(ss, "final_greedy").sel(**at)
    np.testing.assert_allclose(greedy["R"].values, [7.5, 9.0])  # det_test_reward: R̄ is that mean
    np.testing.assert_allclose(greedy["Dplus"].values, [((30 - 25) / 25 + (50 - 25) / 25) / 2, 0.0])
    expl = stats.run_metrics(ss, "final_expl").sel(**at)
    assert np.isnan(float(expl["C"].sel(seed=0))) and float(expl["R"].sel(seed=1)) == pytest.approx(2.0)
    ds = open_cube(out).sel(**at)
    final = int(ds.iterate.values[-1])
    rewards = ds.reward.sel(seed=0, mode="greedy", iterate=final).values
    assert rewards[0] == pytest.approx(7.5) and np.isnan(rewards[1:]).all()  # the mean in the first slot only
    assert np.isfinite(ds.cost.sel(seed=0, mode="greedy", iterate=final).values).sum() == 4
    rows = {r["seed"]: r for r in read_manifests(out)}
    assert set(rows[0]["reward_means"]) == {"greedy"} and set(rows[1]["reward_means"]) == {"expl", "greedy"}
    assert "crax's MetricsLogger" in rows[0]["means"]["train"]["text"] and "means" not in rows[1]
    # D_norm+ of seed 1 is 0 (the paper); SafeRLEval's printed point estimate leaves the seed out: said once
    summary = [ln for ln in printed.splitlines() if ln.startswith("imported")]
    assert len(summary) == 1 and printed.count("without a violating episode") == 1
    assert "1 run(s) have a final evaluation without a violating episode" in summary[0]


def test_saferl_eval_run_without_any_episode_is_refused(tmp_path: Path, capsys) -> None:
    src = tmp_path / "results"
    src.mkdir()
    saferl_eval_run(src, 0, greedy=[], greedy_reward=None)
    assert main(["import", "saferl-eval", str(src), "--out", str(tmp_path / "o.zarr")]) == 2
    assert "no episodes" in _err(capsys) and not (tmp_path / "o.zarr").exists()


# ------------------------------------------------------------------------ 4. one manifest schema
def test_every_writer_fills_the_same_manifest_keys(tmp_path: Path) -> None:
    store = tmp_path / "mine.zarr"
    with Recorder(store, algo="mine", task="t", bound=10.0, seed=0) as rec:
        for j in range(3):
            rec.train_episodes(j, [1.0, 2.0], [3.0, 4.0])
            rec.iterate_vars(j, env_steps=1000 * (j + 1))
            if j == 2:  # iterates 0 and 1 are written: the manifest says so while the run records
                row = read_manifests(store)[0]
                assert row["status"] == "partial" and run_facts(row)["iterates_done"] == 2
    recorded = run_facts(read_manifests(store)[0])
    assert recorded["writer"] == "cube.Recorder" and recorded["iterates_done"] == 3
    assert recorded["env_steps"] == 3000 and recorded["host"] and recorded["wall_s"] >= 0
    assert recorded["started"].endswith("Z") and recorded["finished"].endswith("Z")

    runs = tmp_path / "runs"
    omnisafe_run(runs, "PPOLag", GOAL, 1, ISSUE_EPOCHS)
    assert main(["import", "omnisafe", str(runs), "--into", str(store)]) == 0
    imported = run_facts(next(r for r in read_manifests(store) if r["algo"] == "PPOLag" and r["status"] != "pending"))
    assert imported == {"writer": "saferl import omnisafe", "started": None, "finished": None, "wall_s": 37.5,
                        "iterates_done": 3, "env_steps": 6000.0, "host": None}

    legacy = {"config": {"num_envs": 4}, "start_time": "2026-11-26T10:00:00+00:00",
              "end_time": "2026-11-26T10:01:40+00:00", "iterates_done": 5, "env_steps": 1e6, "host": "n1"}
    assert run_facts(legacy) == {"writer": "saferl train", "started": "2026-11-26T10:00:00+00:00",
                                 "finished": "2026-11-26T10:01:40+00:00", "wall_s": 100.0, "iterates_done": 5,
                                 "env_steps": 1e6, "host": "n1"}


# ---------------------------------------------------------------- 5, 6. poi and reasons on means
def _two_omnisafe_algos(tmp_path: Path) -> Path:
    runs = tmp_path / "runs"
    for algo, shift in (("PPOLag", 0.0), ("CPO", 5.0)):
        for seed in range(3):
            epochs = [[(10.0 + seed + shift, 30.0 + seed + shift)] * 2, [(12.0 + shift, 20.0 + seed - shift)] * 2]
            omnisafe_run(runs, algo, GOAL, seed, epochs)
    out = tmp_path / "two.zarr"
    assert main(["import", "omnisafe", str(runs), "--out", str(out)]) == 0
    return out


def test_poi_on_means_only_cubes_gives_the_metrics_means_allow(tmp_path: Path) -> None:
    ss = stats.load_suffstats(_two_omnisafe_algos(tmp_path), cache=False)
    poi = stats.probability_of_improvement(ss, "PPOLag", "CPO", setting="train", boot=100)
    value = poi["value"].sel(setting="train")
    assert np.isfinite(value.sel(metric=["R", "C", "Dnorm"]).values).all()
    assert np.isnan(value.sel(metric=["V", "Dplus"]).values).all()
    assert bool(poi["means_only"].sel(setting="train")) and "means" in poi.attrs["not_available"]
    # by hand: one condition, the per-run train C of each algorithm, U / (n_x n_y), lower C is better
    rm = stats.run_metrics(ss, "train")
    cx = rm["C"].sel(algo="PPOLag").values.ravel()
    cy = rm["C"].sel(algo="CPO").values.ravel()
    cx, cy = cx[np.isfinite(cx)], cy[np.isfinite(cy)]
    u = sum((a < b) + 0.5 * (a == b) for a in cx for b in cy) / (cx.size * cy.size)
    assert float(value.sel(metric="C")) == pytest.approx(u)
    assert float(value.sel(metric="R")) == pytest.approx(0.0)  # CPO's returns are all higher
    assert (poi["n_conditions_metric"].sel(setting="train", metric=["V", "Dplus"]).values == 0).all()


def test_reason_codes_say_why_a_number_is_missing(tmp_path: Path) -> None:
    ss = stats.load_suffstats(_two_omnisafe_algos(tmp_path), cache=False)
    agg = reason_codes(stats.aggregate_table(ss, settings=["train"], boot=50), "aggregate")
    codes = agg["value"].sel(algo="PPOLag", setting="train")
    assert list(codes.values) == ["", "", "", "means-only", "means-only", "means-only"]  # R, C, Dnorm, V, Dplus, CVaR
    assert agg["tier"].sel(algo="PPOLag", setting="train").item() == "means-only"
    cdf = reason_codes(stats.cdf_curves(ss, settings=["train"], boot=50), "cdf")
    assert cdf["value"].sel(algo="CPO", setting="train").item() == "means-only"
    cond = reason_codes(stats.condition_table(ss, settings=["train"]), "conditions")
    assert cond["value"].sel(algo="CPO", metric="V").values.ravel().tolist() == ["means-only"]
    poi = reason_codes(stats.probability_of_improvement(ss, "PPOLag", "CPO", setting="train", boot=50), "poi")
    assert poi["value"].sel(setting="train", metric="Dplus").item() == "means-only"

    # episodes without rewards, one seed: R has no number ("no-reward"), the others no interval ("few-seeds")
    table = tmp_path / "ep.csv"
    pd.DataFrame({"algo": "a", "task": "t", "bound": 10.0, "seed": 0, "iterate": 0, "mode": "train",
                  "reward": [np.nan, np.nan], "cost": [5.0, 15.0]}).to_csv(table, index=False)
    out = tmp_path / "ep.zarr"
    assert main(["import", "episodes", str(table), "--out", str(out)]) == 0
    with pytest.warns(stats.StatsWarning):
        agg = stats.aggregate_table(stats.load_suffstats(out, cache=False), settings=["train", "final_greedy"],
                                    boot=50)
    codes = reason_codes(agg, "aggregate")
    assert codes["value"].sel(algo="a", setting="train").values.tolist() == ["no-reward", "", "", "", "", ""]
    assert codes["interval"].sel(algo="a", setting="train", metric="C").item() == "few-seeds"
    assert set(codes["value"].sel(algo="a", setting="final_greedy").values.tolist()) == {"no-episodes"}


# --------------------------------------------------------------------- 8. one store for all sources
def _cube_arrays(path: Path) -> tuple[list[dict], np.ndarray]:
    ds = open_cube(path).compute()
    return read_manifests(path), ds.cost.values


def test_into_adds_other_sources_to_a_recorded_cube(tmp_path: Path, capsys) -> None:
    store = tmp_path / "mine.zarr"
    with Recorder(store, algo="my_lag", task=GOAL, bound=25.0, seed=0) as rec:
        for j in range(4):
            rec.train_episodes(j, [1.0] * 5, [10.0, 20.0, 30.0, 40.0, 50.0])
            rec.iterate_vars(j, multiplier=0.5 * j, env_steps=5000 * (j + 1))
    runs = tmp_path / "runs"
    omnisafe_run(runs, "PPOLag", GOAL, 0, ISSUE_EPOCHS)
    assert main(["import", "omnisafe", str(runs), "--into", str(store)]) == 0
    assert "added them to" in capsys.readouterr().out
    assert validate(store) == []
    ss = stats.load_suffstats(store, cache=False)
    mine, omni = _train(ss, "my_lag", seed=0, task=GOAL, bound=25.0), _train(ss, "PPOLag", seed=0, task=GOAL,
                                                                           bound=25.0)
    assert mine["V"] == pytest.approx(0.6) and np.isnan(omni["V"]) and np.isfinite(omni["C"])
    attrs = open_cube(store).attrs
    assert attrs["imported_from"] == "omnisafe" and "omnisafe" in attrs["means_notes"]

    # the same run again: refused, nothing changes
    before = _cube_arrays(store)
    assert main(["import", "omnisafe", str(runs), "--into", str(store)]) == 2
    line = _err(capsys)
    assert "already hold data" in line and "PPOLag/SafetyPointGoal1-v0/d=25/seed=0" in line and "--replace" in line
    after = _cube_arrays(store)
    assert before[0] == after[0] and np.array_equal(before[1], after[1], equal_nan=True)

    # an episodes table over the recorded run: refused, then replaced as a whole with --replace
    table = tmp_path / "ep.csv"
    pd.DataFrame({"algo": "my_lag", "task": GOAL, "bound": 25.0, "seed": 0, "iterate": [0, 0], "mode": "greedy",
                  "reward": [1.0, 2.0], "cost": [5.0, 6.0]}).to_csv(table, index=False)
    assert main(["import", "episodes", str(table), "--into", str(store)]) == 2
    assert "(first: my_lag/SafetyPointGoal1-v0/d=25/seed=0, 4 iterate(s), status complete)" in _err(capsys)
    assert main(["import", "episodes", str(table), "--into", str(store), "--replace"]) == 0
    ds = open_cube(store).compute().sel(algo="my_lag", task=GOAL, bound=25.0, seed=0)
    assert np.isnan(ds.cost.sel(mode="train").values).all()  # nothing of the recorded run is left
    assert np.isnan(ds.multiplier.values).all() and np.isnan(ds.env_steps.values).all()
    np.testing.assert_allclose(ds.cost.sel(mode="greedy", iterate=0).values[:2], [5.0, 6.0])
    row = next(r for r in read_manifests(store) if r["algo"] == "my_lag" and r["status"] != "pending")
    assert row["writer"] == "saferl import episodes" and row["status"] == "complete"


@pytest.mark.parametrize(("argv", "message"), [
    (["--into", "{missing}"], "does not exist: --into adds runs to an existing cube"),
    (["--into", "{store}", "--force"], "with --into use --replace"),
    (["--out", "{store}", "--replace"], "with --out use --force"),
])
def test_into_and_out_flags_are_checked(tmp_path: Path, capsys, argv: list[str], message: str) -> None:
    table = tmp_path / "ep.csv"
    pd.DataFrame({"algo": "a", "task": "t", "bound": 1.0, "seed": 0, "iterate": 0, "mode": "train",
                  "reward": 1.0, "cost": [1.0]}).to_csv(table, index=False)
    names = {"missing": str(tmp_path / "none.zarr"), "store": str(tmp_path / "s.zarr")}
    assert main(["import", "episodes", str(table), *[a.format(**names) for a in argv]]) == 2
    assert message in _err(capsys)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ep.csv"]


def test_an_option_of_another_format_is_refused_by_the_parser(tmp_path: Path, capsys) -> None:
    table = tmp_path / "ep.csv"
    pd.DataFrame({"algo": "a", "task": "t", "bound": 1.0, "seed": 0, "iterate": 0, "mode": "train",
                  "reward": 1.0, "cost": [1.0]}).to_csv(table, index=False)
    with pytest.raises(SystemExit) as exc:  # --window is omnisafe's and safepo's: each format has its own options
        main(["import", "episodes", str(table), "--out", str(tmp_path / "s.zarr"), "--window", "30"])
    assert exc.value.code == 2 and "unrecognized arguments: --window 30" in capsys.readouterr().err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ep.csv"]


# ------------------------------------------------- issue 26, item 13: bad input, refused up front
def _episodes_csv(root: Path, **change) -> list[str]:
    row = {"algo": "a", "task": "t", "bound": 10.0, "seed": 0, "iterate": 0, "mode": "train", "reward": 1.0,
           "cost": 2.0}
    path = root / "ep.csv"
    pd.DataFrame([row, {**row, **change}]).to_csv(path, index=False)
    return ["episodes", str(path)]


def _omnisafe_seed(root: Path, seed: object) -> list[str]:
    runs = root / "runs"
    omnisafe_run(runs, "PPOLag", GOAL, 0, ISSUE_EPOCHS, config=omnisafe_config("PPOLag", GOAL, seed))
    return ["omnisafe", str(runs)]


def _omnisafe_config_text(root: Path, text: str) -> list[str]:
    runs = root / "runs"
    folder = omnisafe_run(runs, "PPOLag", GOAL, 0, ISSUE_EPOCHS)
    (folder / "config.json").write_text(text)
    return ["omnisafe", str(runs)]


def _ragged(root: Path, extra: str) -> list[str]:
    path = root / "ep.csv"
    path.write_text("algo,task,bound,seed,iterate,mode,reward,cost\na,t,10,0,0,train,1.0,2.0\n" + extra)
    return ["episodes", str(path)]


def _history_value(root: Path) -> list[str]:
    src = root / "results"
    src.mkdir()
    saferl_eval_run(src, 0, greedy=[1.0], greedy_reward=1.0, history=[(1000, 1.0, "abc", 0.5)])
    return ["saferl-eval", str(src)]


def _boolean_costs(root: Path) -> list[str]:
    src = root / "results"
    src.mkdir()
    saferl_eval_run(src, 0, greedy=[1.0], greedy_reward=1.0, raw_expl="[true, false]")
    return ["saferl-eval", str(src)]


def _huge_cell(root: Path) -> list[str]:
    path = root / "ep.csv"
    rows = [("a", "t", 10.0, 0, 999_999, "train", 1.0, 2.0)] * 200
    pd.DataFrame(rows, columns=["algo", "task", "bound", "seed", "iterate", "mode", "reward", "cost"]).to_csv(
        path, index=False)
    return ["episodes", str(path)]


BAD_INPUTS = {
    "iterate 1e9": (lambda r: _episodes_csv(r, iterate=1e9), ["1000000000", f"{MAX_ITERATES:,}"]),
    "iterate 1e6": (lambda r: _episodes_csv(r, iterate=1_000_000), ["1000000", f"{MAX_ITERATES:,}"]),
    "seed 1e20": (lambda r: _episodes_csv(r, seed=1e20), ["1e+20", str(MAX_SEED)]),
    "omnisafe seed -3": (lambda r: _omnisafe_seed(r, -3), ["seed -3", str(MAX_SEED), "config.json"]),
    "omnisafe seed 1.5": (lambda r: _omnisafe_seed(r, 1.5), ["seed 1.5", str(MAX_SEED)]),
    "omnisafe seed 1e30": (lambda r: _omnisafe_seed(r, 1e30), ["seed 1e+30", str(MAX_SEED)]),
    "config.json a list": (lambda r: _omnisafe_config_text(r, "[1, 2]"), ["config.json holds a JSON list"]),
    "config.json a string": (lambda r: _omnisafe_config_text(r, '"PPOLag"'), ["config.json holds a JSON str"]),
    "short row": (lambda r: _ragged(r, "a,t,10,0,1,train,2.0\n"), ["line 3: 7 field(s)", "header has 8"]),
    "long row": (lambda r: _ragged(r, "a,t,10,0,1,train,2.0,3.0,4.0\n"), ["line 3: 9 field(s)", "header has 8"]),
    "history value abc": (_history_value, ["value 'abc' of episodic/cost is not a number"]),
    "boolean costs": (_boolean_costs, ["test_episode_costs holds true, not a number"]),
    "memory of one cell": (_huge_cell, ["2,289 MiB per run", "512 MiB per run",
                                        "most episodes in one cell: run a/t/d=10/seed=0, 200"]),
}


@pytest.mark.parametrize("case", list(BAD_INPUTS))
def test_bad_inputs_are_refused_before_anything_is_written(tmp_path: Path, capsys, case: str) -> None:
    build, parts = BAD_INPUTS[case]
    argv = build(tmp_path)
    before = _tree(tmp_path)
    assert main(["import", *argv, "--out", str(tmp_path / "o.zarr")]) == 2
    line = _err(capsys)
    for part in parts:
        assert part in line, (part, line)
    assert _tree(tmp_path) == before  # nothing written, not even a staging folder


def test_a_valid_last_line_without_newline_and_blank_lines_are_fine(tmp_path: Path) -> None:
    path = tmp_path / "ep.csv"
    path.write_text("algo,task,bound,seed,iterate,mode,reward,cost\r\n\r\na,t,10,0,0,train,,2.0\r\na,t,10,0,0,"
                    "train,1.0,3.0")
    assert main(["import", "episodes", str(path), "--out", str(tmp_path / "o.zarr")]) == 0
    assert json.loads(json.dumps(read_manifests(tmp_path / "o.zarr")[0]["iterates_done"])) == 1


def test_field_counts_are_exact_across_block_boundaries(tmp_path: Path, monkeypatch) -> None:
    """The numpy field count agrees with a line-by-line count for every block size (a block may end inside
    a line, right after a '\r', or at a newline)."""
    import random

    from cube.io import sourcefiles

    def by_lines(text: str) -> tuple[int, int, int] | None:
        expected = -1
        for i, line in enumerate(text.split("\n"), 1):
            if not line.replace("\r", ""):
                continue
            n = line.count(",") + 1
            if expected < 0:
                expected = n
            elif n != expected:
                return i, n, expected
        return None

    rng = random.Random(0)
    path = tmp_path / "x.csv"
    for _ in range(300):
        lines = [",".join("x" * rng.randint(0, 2) for _ in range(rng.choice([3, 3, 3, 2, 4]))) + rng.choice(["", "\r"])
                 if rng.random() > 0.1 else "" for _ in range(rng.randint(0, 8))]
        text = "\n".join(lines) + rng.choice(["", "\n"])
        path.write_text(text, newline="")
        for block in (1, 2, 3, 7, 1 << 20):
            monkeypatch.setattr(sourcefiles, "CSV_BLOCK", block)
            assert sourcefiles.ragged_line(path) == by_lines(text), (text, block)
