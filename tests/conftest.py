"""Shared fixtures: tiny stores built from each other, from the smallest grid up."""

from __future__ import annotations

import difflib
import html
import os
import re
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest

from cube import RunKey, create_store
from cube.io.demo import make_demo_cube

# No process of the suite loads or builds the prebuilt statistics loop (`cube.stats.prebuilt`) unless a test
# asks for it (`prebuilt_cache`): the JIT stays the loop under test, and no test leaves a background build.
os.environ.setdefault("SAFERL_PREBUILT", "off")

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


SVG_TEXT = re.compile(r'<text class="[^"]*" x="([0-9.]+)" y="([0-9.]+)"[^>]*>([^<]*)</text>')


def svg_rows(svg: str) -> list[str]:
    """The text of a Textual SVG screenshot, one string per terminal row (top to bottom)."""
    rows: dict[float, list[tuple[float, str]]] = {}
    for x, y, text in SVG_TEXT.findall(svg):
        rows.setdefault(float(y), []).append((float(x), html.unescape(text).replace("\xa0", " ")))
    return ["".join(t for _x, t in sorted(cells)).rstrip() for _y, cells in sorted(rows.items())]


@pytest.fixture
def snap_compare(snap_compare: Callable[..., bool], request: pytest.FixtureRequest) -> Callable[..., bool]:
    """pytest-textual-snapshot's comparison that, on a mismatch, fails with the rows whose text differs (CI
    shows only the failure line; colours alone differing says so)."""
    import pickle

    from pytest_textual_snapshot import node_to_report_path

    def compare(*args: object, **kwargs: object) -> bool:
        if snap_compare(*args, **kwargs):
            return True
        _ok, expected, actual, *_rest = pickle.loads(node_to_report_path(request.node).read_bytes())
        diff = list(difflib.unified_diff(svg_rows(expected), svg_rows(actual), "snapshot", "now", n=0, lineterm=""))
        raise AssertionError("snapshot differs: " + (" | ".join(diff[2:12]) if diff else "same text, other styles"))

    return compare


@pytest.fixture(scope="session")
def prebuilt_cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A saferl cache folder holding the prebuilt statistics loop of this machine (`python -m
    cube.stats.prebuilt`, 12-25 s), built once for all xdist workers (their base folders share a parent):
    the first worker builds it, the others wait for the module. Skips where numba cannot build it."""
    from cube.stats import fused, prebuilt

    if not fused.available():
        pytest.skip("numba is not installed: there is no compiled loop to build")
    shared = tmp_path_factory.getbasetemp()
    folder = (shared.parent if os.environ.get("PYTEST_XDIST_WORKER") else shared) / "prebuilt-cache"
    env = {**os.environ, "SAFERL_CACHE_DIR": str(folder), "SAFERL_PREBUILT": "on"}
    done = subprocess.run([sys.executable, "-m", "cube.stats.prebuilt"], env=env, capture_output=True, text=True,
                          timeout=600)
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("SAFERL_CACHE_DIR", str(folder))
        module, failed = prebuilt.module_path(prebuilt.key()), prebuilt.marker(prebuilt.key(), "failed")
    deadline = time.monotonic() + 600
    while not module.exists() and not failed.exists() and time.monotonic() < deadline:
        time.sleep(0.2)  # another worker's build: wait for its module (a condition, not a guess)
    if not module.exists():
        reason = failed.read_text().strip() if failed.exists() else done.stderr[-500:]
        pytest.skip(f"the prebuilt loop could not be built here: {reason}")
    return folder
