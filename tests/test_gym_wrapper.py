"""Recorder.step, the Gymnasium-style wrapper `cube.io.gym.RecordEpisodes`, float() of any scalar, and
README's dependency-free episodes-table writer (issue 24, item 9 and "Also")."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest

from cube import CubeError, Recorder, open_cube, read_manifests
from cube.cli import main
from cube.io.gym import RecordEpisodes

README = Path(__file__).resolve().parents[1] / "README.md"


class FakeTensor:
    """Quacks like a torch tensor on a GPU: float() and .item() work, numpy conversion does not until
    .detach().cpu()."""

    def __init__(self, values, on_gpu: bool = True) -> None:
        self.values, self.on_gpu = np.asarray(values, dtype=np.float64), on_gpu

    def __float__(self) -> float:
        if self.values.size != 1:
            raise RuntimeError("a Tensor with 2 elements cannot be converted to Scalar")
        return float(self.values.reshape(()))

    def __array__(self, dtype=None, copy=None):
        if self.on_gpu:
            raise TypeError("can't convert cuda:0 device type tensor to numpy. Use Tensor.cpu() first.")
        return self.values.astype(dtype or np.float64)

    def detach(self) -> FakeTensor:
        return self

    def cpu(self) -> FakeTensor:
        return FakeTensor(self.values, on_gpu=False)

    def __or__(self, other: FakeTensor) -> FakeTensor:
        return FakeTensor(np.logical_or(self.values, other.values))


class CostlyVectorEnv:
    """A tiny vector env in Gymnasium's shape: env i's episodes last lengths[i] steps (then truncated, and
    reset in the same step as gymnasium 0.28 / Safety-Gymnasium do); reward 1 per step, cost = the step's
    index in its episode. `six`: return Safety-Gymnasium's 6-tuple, else the cost in info["cost"]."""

    def __init__(self, lengths: tuple[int, ...], six: bool = False) -> None:
        self.lengths, self.six = np.asarray(lengths), six
        self.num_envs = len(lengths)
        self.t = np.zeros(self.num_envs, dtype=int)
        self.finished: list[tuple[int, float, float]] = []  # (env, return, cost) of every finished episode
        self._sums = np.zeros((2, self.num_envs))

    def reset(self, seed: int | None = None):
        self.t[:] = 0
        self._sums[:] = 0
        return np.zeros((self.num_envs, 2)), {}

    def step(self, actions):
        reward = np.ones(self.num_envs)
        cost = self.t.astype(float)
        self._sums += [reward, cost]
        self.t += 1
        truncated = self.t >= self.lengths
        terminated = np.zeros(self.num_envs, dtype=bool)
        for i in np.flatnonzero(truncated):
            self.finished.append((int(i), float(self._sums[0, i]), float(self._sums[1, i])))
            self._sums[:, i] = 0
            self.t[i] = 0
        obs = np.zeros((self.num_envs, 2))
        if self.six:
            return obs, reward, cost, terminated, truncated, {}
        return obs, reward, terminated, truncated, {"cost": cost}


def _episodes(path: Path, iterate: int, mode: str = "train") -> tuple[np.ndarray, np.ndarray]:
    ds = open_cube(path).compute().squeeze(["algo", "task", "bound", "seed"])
    cost = ds.cost.sel(iterate=iterate, mode=mode).values
    keep = np.isfinite(cost)
    return ds.reward.sel(iterate=iterate, mode=mode).values[keep], cost[keep]


def test_step_sums_episodes_and_carries_unfinished_ones_into_the_next_iterate(tmp_path: Path) -> None:
    path = tmp_path / "s.zarr"
    with Recorder(path, algo="a", task="t", bound=5.0, seed=0) as rec:
        dones = [[0, 0], [1, 0], [0, 0], [0, 1], [1, 0], [0, 0]]  # env 0: 2-step episodes, env 1: 4 steps
        for step, done in enumerate(dones):
            iterate = 0 if step < 3 else 1  # the iterate changes while env 1's episode runs
            rec.step([1.0, 2.0], [step, 10.0], np.array(done, dtype=bool), iterate=iterate)
    r0, c0 = _episodes(path, 0)
    r1, c1 = _episodes(path, 1)
    assert (r0.tolist(), c0.tolist()) == ([2.0], [0.0 + 1.0])  # env 0, steps 0-1
    # iterate 1: env 1's episode of steps 0-3 (finished there), env 0's of steps 2-4; steps 5 dropped at close
    assert sorted(zip(r1.tolist(), c1.tolist(), strict=True)) == [(3.0, 2.0 + 3.0 + 4.0), (8.0, 40.0)]
    assert read_manifests(path)[0]["iterates_done"] == 2


@pytest.mark.parametrize(("call", "message"), [
    (lambda rec: rec.step([1.0, 2.0], [0.0], [True, False], iterate=0), "one length"),
    (lambda rec: (rec.step([1.0], [0.0], [False], iterate=0), rec.step([1.0, 1.0], [0.0, 0.0], [0, 0], iterate=0)),
     "keep the number of envs"),
    (lambda rec: rec.step([1.0], ["x"], [True], iterate=0), "costs are not numbers"),
    (lambda rec: rec.step([1.0], [0.0], [True], iterate=0, mode="eval"), "unknown mode"),
    (lambda rec: rec.iterate_vars(0, multiplier=FakeTensor([1.0, 2.0])), "multiplier: FakeTensor"),
])
def test_bad_steps_are_one_line_errors(tmp_path: Path, call, message: str) -> None:
    with pytest.raises(CubeError, match=message), Recorder(tmp_path / "x.zarr", algo="a", task="t", bound=1.0,
                                                           seed=0) as rec:
        call(rec)


def test_any_one_number_array_is_an_iterate_variable_and_tensors_are_steps(tmp_path: Path) -> None:
    path = tmp_path / "t.zarr"
    with Recorder(path, algo="a", task="t", bound=5.0, seed=0) as rec:
        rec.step(FakeTensor([1.0, 2.0]), FakeTensor([3.0, 4.0]), FakeTensor([True, True]), iterate=0)
        rec.iterate_vars(0, multiplier=FakeTensor(0.25), env_steps=np.array([2]), entropy=np.float32(0.5))
    ds = open_cube(path).compute().squeeze(["algo", "task", "bound", "seed"])
    assert float(ds.multiplier.sel(iterate=0)) == 0.25 and float(ds.env_steps.sel(iterate=0)) == 2.0
    assert float(ds.entropy.sel(iterate=0)) == 0.5
    assert sorted(_episodes(path, 0)[1].tolist()) == [3.0, 4.0]


@pytest.mark.parametrize("six", [False, True], ids=["info-cost", "safety-gymnasium-6-tuple"])
def test_wrapper_records_every_finished_episode(tmp_path: Path, six: bool) -> None:
    path = tmp_path / "g.zarr"
    inner = CostlyVectorEnv((2, 3, 5), six=six)
    with Recorder(path, algo="a", task="t", bound=5.0, seed=0) as rec:
        env = RecordEpisodes(inner, rec)
        env.reset(seed=0)
        assert env.num_envs == 3  # other attributes pass through
        for iterate in range(3):
            env.iterate = iterate
            for _ in range(4):
                out = env.step(np.zeros((3, 2)))
                assert len(out) == (6 if six else 5)  # returned exactly as the env returned it
    recorded = sorted((r, c) for j in range(3) for r, c in zip(*_episodes(path, j), strict=True))
    assert recorded == sorted((r, c) for _, r, c in inner.finished)  # and nothing else (unfinished dropped)
    assert len(recorded) == 6 + 4 + 2  # 12 steps: env 0 six episodes, env 1 four, env 2 two


def test_wrapper_reset_drops_running_episodes_and_needs_a_cost(tmp_path: Path) -> None:
    path = tmp_path / "r.zarr"
    inner = CostlyVectorEnv((3,))
    with Recorder(path, algo="a", task="t", bound=5.0, seed=0) as rec:
        env = RecordEpisodes(inner, rec)
        env.reset()
        env.step(None)
        env.step(None)
        env.reset()  # the episode of 2 steps never finishes
        for _ in range(3):
            env.step(None)
    assert _episodes(path, 0)[1].tolist() == [0.0 + 1.0 + 2.0]

    class NoCost(CostlyVectorEnv):
        def step(self, actions):
            obs, reward, terminated, truncated, _ = super().step(actions)
            return obs, reward, terminated, truncated, {}

    with pytest.raises(CubeError, match=r"no cost.*cost_key"), Recorder(tmp_path / "n.zarr", algo="a", task="t",
                                                                         bound=5.0, seed=0) as rec:
        RecordEpisodes(NoCost((2,)), rec).step(None)


def test_readme_episodes_writer_needs_nothing_and_imports(tmp_path: Path) -> None:
    """README's dependency-free writer, run as written: its CSV imports with the right episodes."""
    section = README.read_text().split("**Training in another environment.**", 1)[1]
    code = re.search(r"```python\n(.*?)```", section, re.S).group(1)
    assert "import csv, os" in code and "cube" not in code and len(code.strip().splitlines()) <= 16
    namespace: dict = {}
    exec(compile(code, "README EpisodeLog", "exec"), namespace)  # noqa: S102 - our own README
    path = tmp_path / "episodes.csv"
    log = namespace["EpisodeLog"](str(path), "PPOLag", "SafetyPointGoal1-v0", 25.0, 3)
    log.episode(0, 1.5, 30.0)
    log.episode(0, np.float32(2.5), 10.0)
    log.file.close()
    log = namespace["EpisodeLog"](str(path), "PPOLag", "SafetyPointGoal1-v0", 25.0, 3)  # appends, one header
    log.episode(1, None, 5.0, mode="greedy")
    log.file.close()
    assert path.read_text().count("algo,task") == 1
    out = tmp_path / "mine.zarr"
    assert main(["import", "episodes", str(path), "--out", str(out)]) == 0
    ds = open_cube(out).compute().squeeze(["algo", "task", "bound", "seed"])
    np.testing.assert_allclose(np.sort(_episodes(out, 0)[1]), [10.0, 30.0])
    assert np.isnan(ds.reward.sel(iterate=1, mode="greedy").values[0])
    assert float(ds.cost.sel(iterate=1, mode="greedy").values[0]) == 5.0
