"""The statistics cache and the compiled kernel under faults (issue 36): a run written while a full cache write
was under way (the stale patch of the race), a process SIGKILLed while it patches the cache for one run,
flipped bits in a patched cache, a garbage numba cache folder. Each time the numbers are those of a fresh
pass over the episodes.

Before: a cache write that kept the old statistics of runs written meanwhile passed every test (the racing
tests compared counts only); no test killed a patch, flipped bits in a patched cache, or gave numba a damaged
cache folder (whose first read then failed the report as "the store may be corrupt")."""

from __future__ import annotations

import multiprocessing as mp
import os
import random
import shutil
import signal
import subprocess
import sys
import warnings
from pathlib import Path

import numpy as np
import pytest
from faultkit import flip, forked_child, kill_self_at_write

from cube import CubeWriter, RunKey, create_store, stats
from cube.stats.cache import CACHE_GROUP, STATS_VARS, CacheWarning

pytestmark = pytest.mark.faults

KEYS = [RunKey("a", "t", 10.0, s) for s in range(3)]


def _store(tmp_path: Path) -> Path:
    path = tmp_path / "c.zarr"
    create_store(path, algos=["a"], tasks=["t"], bounds=[10.0], seeds=[0, 1, 2], n_iterates=3, n_episodes=6)
    writer = CubeWriter(path)
    rng = np.random.default_rng(0)
    for key in KEYS:
        for j in range(2):
            writer.write_episodes(key, "train", j, rng.normal(size=6), rng.gamma(2.0, 5.0, size=6))
    return path


def _same_as_a_fresh_pass(path: Path) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        cached = stats.load_suffstats(path)
    fresh = stats.load_suffstats(path, cache=False)
    for v in STATS_VARS:
        np.testing.assert_array_equal(cached[v].values, fresh[v].values, err_msg=v)


def test_a_run_written_during_a_full_cache_write_is_never_cached_stale(tmp_path: Path,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    """A writer adds an iterate to run 1 after the pass read it and before its cache is written: the next
    read of the cache gives run 1's new statistics (before: a cache write keeping the old statistics of runs
    written meanwhile passed every test, which compared counts)."""
    import cube.stats.suffstats as suffstats

    path = _store(tmp_path)
    real = suffstats.write_cache

    def write_after_a_racing_writer(*args: object, **kwargs: object) -> None:
        CubeWriter(path).write_episodes(KEYS[1], "train", 2, [9.0, 9.0], [77.0, 1.5])
        real(*args, **kwargs)

    monkeypatch.setattr(suffstats, "write_cache", write_after_a_racing_writer)
    first = stats.load_suffstats(path)  # the pass (before the write) and the cache write (after it)
    monkeypatch.setattr(suffstats, "write_cache", real)
    cell = {"seed": 1, "iterate": 2, "mode": "train"}
    assert first["sum_c"].sel(cell).values.item() == 78.5  # the pass settles runs written meanwhile itself
    again = stats.load_suffstats(path)  # the cache written with the statistics of before the write
    assert again["sum_c"].sel(cell).values.item() == 78.5
    _same_as_a_fresh_pass(path)


def _patch_killed(path: str, nth: int) -> None:
    forked_child()
    kill_self_at_write(lambda key: True, nth)  # this process writes nothing but the cache
    stats.load_suffstats(path)
    os._exit(0)


def _patch_writes(path: Path) -> int:
    """How many store writes a patch of one run makes (a forked child counting)."""
    from zarr.storage import LocalStore

    here, there = mp.get_context("fork").Pipe(duplex=False)

    def count(conn: object) -> None:
        forked_child()
        seen = [0]
        original = LocalStore.set

        async def counting(self: object, key: str, value: object) -> None:
            seen[0] += 1
            await original(self, key, value)

        LocalStore.set = counting  # type: ignore[method-assign]
        stats.load_suffstats(path)
        conn.send(seen[0])  # type: ignore[attr-defined]
        os._exit(0)

    proc = mp.get_context("fork").Process(target=count, args=(there,))
    proc.start()
    n = here.recv()
    proc.join(60)
    return int(n)


def test_a_patch_killed_at_any_write_leaves_right_numbers(tmp_path: Path) -> None:
    """The cache holds every run; run 0 gets a new iterate; a report patching the cache for run 0 is SIGKILLed
    just before each of its cache writes (statistics first, fingerprints last): the next read gives a fresh
    pass's numbers, and the patch after it too."""
    base = _store(tmp_path)
    stats.load_suffstats(base)  # the full cache
    CubeWriter(base).write_episodes(KEYS[0], "train", 2, [1.0, 2.0, 3.0], [4.0, 5.0, 60.0])
    shutil.copytree(base, tmp_path / "count.zarr")
    n = _patch_writes(tmp_path / "count.zarr")  # on a copy: the count patches the cache it counts on
    assert n >= len(STATS_VARS)  # a chunk per statistic and the fingerprints
    for nth in sorted(random.Random(36).sample(range(1, n + 1), min(n, 5))):
        path = tmp_path / f"k{nth}.zarr"
        shutil.copytree(base, path)
        proc = mp.get_context("fork").Process(target=_patch_killed, args=(str(path), nth))
        proc.start()
        proc.join(60)
        assert proc.exitcode == -signal.SIGKILL, nth
        _same_as_a_fresh_pass(path)
        CubeWriter(path).write_episodes(KEYS[2], "train", 2, [1.0], [2.0])
        _same_as_a_fresh_pass(path)


def test_flipped_bits_in_a_patched_cache_never_change_a_number(tmp_path: Path) -> None:
    path = _store(tmp_path)
    stats.load_suffstats(path)
    CubeWriter(path).write_episodes(KEYS[0], "train", 2, [1.0, 2.0], [3.0, 40.0])
    patched = stats.load_suffstats(path)  # patches run 0's chunks
    chunks = sorted(p for p in (path / CACHE_GROUP).rglob("*") if p.is_file() and p.name != "zarr.json")
    assert chunks
    for i, chunk in enumerate(random.Random(36).sample(chunks, min(len(chunks), 6))):
        saved = chunk.read_bytes()
        flip(chunk, [len(saved) // 2, -1, 0][i % 3])
        with pytest.warns(CacheWarning):
            again = stats.load_suffstats(path)
        for v in STATS_VARS:
            np.testing.assert_array_equal(again[v].values, patched[v].values, err_msg=f"{v} after {chunk}")


_KERNEL = """
import sys
import numpy as np
from cube import stats
ss = stats.load_suffstats(sys.argv[1], cache=False)
np.save(sys.argv[2], np.concatenate([ss[v].values.ravel().astype(float) for v in sorted(ss.data_vars)]))
"""


def test_a_garbage_numba_cache_folder_is_compiled_around(tmp_path: Path) -> None:
    """numba's cache files of the fused kernel replaced by garbage: the pass compiles the loop again in the
    process and gives the numpy kernel's numbers (before: "the store may be corrupt", exit 2)."""
    from cube.stats import fused

    if not fused.available():
        pytest.skip("numba is not installed: there is no compiled kernel to cache")
    path = tmp_path / "big.zarr"
    create_store(path, algos=["a"], tasks=["t"], bounds=[10.0], seeds=[0, 1], n_iterates=2, n_episodes=4096)
    writer = CubeWriter(path)
    rng = np.random.default_rng(1)
    for seed in (0, 1):
        writer.write_episodes(RunKey("a", "t", 10.0, seed), "train", 0, rng.normal(size=4096),
                              rng.gamma(2.0, 5.0, size=4096))
    folder = tmp_path / "numba"

    def run(kernel: str, out: str) -> np.ndarray:
        env = {**os.environ, "NUMBA_CACHE_DIR": str(folder), "SAFERL_KERNEL": kernel}
        done = subprocess.run([sys.executable, "-c", _KERNEL, str(path), str(tmp_path / out)], env=env,
                              capture_output=True, text=True, timeout=300)
        assert done.returncode == 0, done.stderr[-2000:]
        return np.load(tmp_path / out)

    numpy_numbers = run("numpy", "numpy.npy")
    np.testing.assert_array_equal(run("fused", "clean.npy"), numpy_numbers)  # fills the cache folder
    cached = [p for p in folder.rglob("*") if p.is_file()]
    assert cached
    for p in cached:
        p.write_bytes(b"garbage\n")
    np.testing.assert_array_equal(run("fused", "garbage.npy"), numpy_numbers)
