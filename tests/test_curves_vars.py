"""Per-iterate variables beyond the multiplier (PID state, Saute budget, CRPO regime, SAC temperature) as curves:
`cube.stats.curves.iterate_var_names` / `multiplier_curves(var=)`, `saferl plot curves --var`, the TUI's `v`."""

from __future__ import annotations

import asyncio
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from textual.pilot import Pilot

from cube import CubeWriter, RunKey, create_store, open_cube
from cube.stats import curves
from saferl_tui.app import build_app
from saferl_tui.views.curves import CurvesView
from tests.tuiwait import until_quiet

ALGOS = ("ppo_pid", "crpo")
SEEDS = (0, 1, 2)
J, E = 6, 4


@pytest.fixture(scope="module")
def var_cube(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict]:
    """A small cube where ppo_pid writes a multiplier and a signed PID error and crpo writes its regime."""
    path = tmp_path_factory.mktemp("vars") / "vars.zarr"
    create_store(path, algos=ALGOS, tasks=("goal",), bounds=(25.0,), seeds=SEEDS, n_iterates=J, n_episodes=E,
                 iterate_vars=("env_steps", "multiplier", "pid_error", "crpo_regime", "alpha"))
    writer = CubeWriter(path)
    rng = np.random.default_rng(7)
    written: dict = {}
    for algo in ALGOS:
        for seed in SEEDS:
            key = RunKey(algo, "goal", 25.0, seed)
            reward = rng.normal(10, 1, (J, E, 3)).astype(np.float32)
            cost = rng.uniform(0, 40, (J, E, 3)).astype(np.float32)
            writer.write_run(key, reward, cost)
            values = {"env_steps": np.arange(1, J + 1) * 1000.0}
            if algo == "ppo_pid":
                values["multiplier"] = rng.uniform(0, 2, J)
                values["pid_error"] = rng.normal(0, 0.01, J)  # signed: its band must not stop at 0
            else:
                values["crpo_regime"] = rng.integers(0, 2, J).astype(float)
            writer.write_iterate_vars(key, 0, values)
            written[(algo, seed)] = values
    return path, written


def test_names_multiplier_first_then_by_name(var_cube: tuple[Path, dict]) -> None:
    ds = open_cube(var_cube[0])
    assert curves.iterate_var_names(ds) == ("multiplier", "alpha", "crpo_regime", "pid_error")
    assert curves.iterate_var_names(ds, with_values=True) == ("multiplier", "crpo_regime", "pid_error")
    only_crpo = ds.sel(algo=["crpo"])
    assert curves.iterate_var_names(only_crpo, with_values=True) == ("crpo_regime",)


def test_var_curves_match_numpy(var_cube: tuple[Path, dict]) -> None:
    path, written = var_cube
    ds = open_cube(path)
    out = curves.multiplier_curves(ds, window=1, var="pid_error")
    assert out is not None and out.attrs == {"var": "pid_error", "nonnegative": 0}
    raw = np.stack([written[("ppo_pid", s)]["pid_error"] for s in SEEDS])  # (seeds, J)
    pid = out.sel(algo="ppo_pid", task="goal", bound=25.0)
    np.testing.assert_allclose(pid["mult_mean"].values, raw.mean(axis=0))
    np.testing.assert_allclose(pid["mult_std"].values, raw.std(axis=0, ddof=1))
    assert np.isnan(out["mult_mean"].sel(algo="crpo").values).all()
    regime = curves.multiplier_curves(ds, window=2, var="crpo_regime")
    assert regime is not None and regime.attrs["nonnegative"] == 1
    raw = np.stack([written[("crpo", s)]["crpo_regime"] for s in SEEDS])
    smooth = curves.moving_average(raw, 2)
    np.testing.assert_allclose(regime["mult_mean"].sel(algo="crpo", task="goal", bound=25.0).values,
                               smooth.mean(axis=0))
    assert curves.multiplier_curves(ds, var="saute_budget") is None


def _saferl(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "cube.cli", *args], capture_output=True, text=True, timeout=300)


def test_plot_var_list_and_figure(var_cube: tuple[Path, dict], tmp_path: Path) -> None:
    path = var_cube[0]
    listed = _saferl("plot", str(path), "curves", "--var", "list")
    assert listed.returncode == 0, listed.stderr
    lines = listed.stdout.splitlines()
    assert [line.split()[0] for line in lines] == ["multiplier", "crpo_regime", "pid_error"]
    assert "(crpo)" in lines[1] and "(ppo_pid)" in lines[2]
    pytest.importorskip("matplotlib")
    out = tmp_path / "pid.svg"
    done = _saferl("plot", str(path), "curves", "--var", "pid_error", "--out", str(out), "--window", "1")
    assert done.returncode == 0, done.stderr
    assert "PID error" in out.read_text()


@pytest.mark.parametrize("var", ["saute_budget", "alpha"])
def test_plot_var_without_values_is_one_line(var_cube: tuple[Path, dict], tmp_path: Path, var: str) -> None:
    pytest.importorskip("matplotlib")
    out = tmp_path / "x.svg"
    done = _saferl("plot", str(var_cube[0]), "curves", "--var", var, "--out", str(out))
    assert done.returncode == 2 and not out.exists()
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and var in lines[0] and "multiplier, crpo_regime, pid_error" in lines[0]
    assert "Traceback" not in done.stderr


def test_tui_v_cycles_the_third_plot(var_cube: tuple[Path, dict]) -> None:
    path, written = var_cube

    async def go() -> list[str]:
        seen = []
        async with build_app(path, boot=20).run_test(size=(120, 40)) as pilot:
            await until_quiet(pilot)
            await _press(pilot, "4")
            view = pilot.app.main_screen.query_one(CurvesView)  # type: ignore[attr-defined]
            for press in range(4):
                if press:
                    await _press(pilot, "v")
                _cur, mult, _cond = view.shown()  # type: ignore[misc]
                assert mult is not None and mult.attrs["var"] == view.var
                seen.append(view.var)
        raw = np.stack([written[("ppo_pid", s)]["multiplier"] for s in SEEDS])
        assert view.var == "multiplier"
        np.testing.assert_allclose(mult["mult_mean"].sel(algo="ppo_pid").values, raw.mean(axis=0))
        return seen

    assert asyncio.run(go()) == ["multiplier", "crpo_regime", "pid_error", "multiplier"]


async def _press(pilot: Pilot, key: str) -> None:
    await pilot.press(key)
    await until_quiet(pilot)
