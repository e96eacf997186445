"""Shared fixtures: tiny stores built from each other, from the smallest grid up."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from cube import RunKey, create_store
from cube.io.demo import make_demo_cube

TINY_GRID = {
    "algos": ["ppo", "ppo_lag"],
    "tasks": ["goal", "circle"],
    "bounds": [15.0, 25.0],
    "seeds": [0, 1, 2],
    "n_iterates": 4,
    "n_episodes": 6,
}


@pytest.fixture
def tiny_store(tmp_path: Path) -> Path:
    """An empty store of the tiny grid (2 algos x 2 tasks x 2 bounds x 3 seeds x 4 iterates x 6 slots)."""
    path = tmp_path / "tiny.zarr"
    create_store(path, **TINY_GRID)
    return path


@pytest.fixture
def tiny_key() -> RunKey:
    return RunKey("ppo_lag", "circle", 25.0, 1)


@pytest.fixture(scope="session")
def small_demo_cube(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A small deterministic synthetic cube: 4 algos x 2 tasks x 2 bounds x 3 seeds x 5 iterates.

    16 training episodes per iterate, 10 final expl/greedy episodes. Shared by the whole session.
    """
    path = tmp_path_factory.mktemp("demo") / "small.zarr"
    make_demo_cube(
        path,
        seed=7,
        tasks=("goal", "circle"),
        bounds=(15.0, 25.0),
        n_seeds=3,
        n_iterates=5,
        n_train_episodes=16,
        n_eval_episodes=10,
    )
    return path


def ragged_episodes(rng: np.random.Generator, n: int, scale: float = 30.0) -> tuple[np.ndarray, np.ndarray]:
    """``n`` episodes of (reward, cost) with non-negative costs."""
    return rng.normal(10.0, 3.0, n), rng.gamma(2.0, scale / 2.0, n)
