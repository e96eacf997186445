"""The statistics loop compiled ahead of time (`cube.stats.prebuilt`): found by its build key, never trusted
with arguments it was not compiled for, built once in a detached child, a failed build noted and not retried;
a process with the module computes a pass without importing numba, to the numpy kernel's numbers."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from cube import RunKey, create_store
from cube.stats import fused, prebuilt
from cube.store.writer import CubeWriter

pytestmark = pytest.mark.skipif(not fused.available(), reason="numba is not installed")


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An empty saferl cache folder, prebuilt modules on."""
    monkeypatch.setenv("SAFERL_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("SAFERL_PREBUILT", "on")
    return tmp_path / "cache"


class Spawned:
    """subprocess.Popen stand-in that records what would have been started."""

    def __init__(self) -> None:
        self.calls: list[tuple[list[str], dict]] = []

    def __call__(self, argv: list[str], **kwargs) -> None:
        self.calls.append((argv, kwargs))


@pytest.fixture
def spawned(monkeypatch: pytest.MonkeyPatch) -> Spawned:
    record = Spawned()
    monkeypatch.setattr(prebuilt.subprocess, "Popen", record)
    return record


def test_the_first_process_without_a_module_starts_one_detached_build(cache, spawned):
    assert prebuilt.load() is None
    assert prebuilt.build_in_background()
    (argv, kwargs), = spawned.calls
    assert argv[1:] == ["-m", "cube.stats.prebuilt", "--background"]
    assert kwargs["start_new_session"] and kwargs["stdout"] == kwargs["stderr"] == subprocess.DEVNULL


@pytest.mark.parametrize("state", ["off", "built", "failed", "building"])
def test_no_build_starts_when_off_built_failed_or_being_built(cache, spawned, monkeypatch, state):
    key = prebuilt.key()
    prebuilt.folder().mkdir(parents=True, exist_ok=True)
    if state == "off":
        monkeypatch.setenv("SAFERL_PREBUILT", "off")
    elif state == "built":
        prebuilt.module_path(key).write_bytes(b"")
    else:
        prebuilt.marker(key, state).write_text("")
    assert not prebuilt.build_in_background()
    assert spawned.calls == []


def test_a_stale_build_lock_of_a_killed_build_is_built_over(cache, spawned):
    lock = prebuilt.marker(prebuilt.key(), "building")
    lock.parent.mkdir(parents=True, exist_ok=True)
    lock.write_text("")
    old = time.time() - prebuilt.STALE_BUILD_S - 1
    os.utime(lock, (old, old))
    assert prebuilt.build_in_background()
    assert len(spawned.calls) == 1


def test_a_failed_build_is_noted_once_and_not_retried(cache, spawned, monkeypatch, capsys):
    def no_compiler(key: str) -> Path:
        raise OSError("gcc: command not found")

    monkeypatch.setattr(prebuilt, "build", no_compiler)
    assert prebuilt.main([]) == 1
    assert prebuilt.marker(prebuilt.key(), "failed").read_text() == "OSError: gcc: command not found\n"
    assert not prebuilt.marker(prebuilt.key(), "building").exists()
    assert capsys.readouterr().err.count("\n") == 1
    assert not prebuilt.build_in_background()
    assert spawned.calls == []


def test_the_build_key_names_the_cpu(cache, monkeypatch):
    import llvmlite.binding as llvm

    here = prebuilt.full_key()
    prebuilt.full_key.cache_clear()
    monkeypatch.setattr(llvm, "get_host_cpu_name", lambda: "some-other-cpu")
    try:
        assert prebuilt.full_key() != here
    finally:
        prebuilt.full_key.cache_clear()


@pytest.mark.skipif(not prebuilt.CPUINFO.exists(), reason="no /proc/cpuinfo: the key is computed each time")
def test_the_key_is_remembered_by_the_cpu_and_installs_and_found_without_llvmlite(cache, tmp_path, monkeypatch):
    """`key` remembers `full_key` under `quick_facts`: the CPU's name and flags as /proc/cpuinfo gives them
    (not its clock), numba's and llvmlite's installs, the Python and the loop; a fresh process finds its key
    there without importing llvmlite; a memo that is not a key is computed again and rewritten."""
    facts = prebuilt.quick_facts()
    first = prebuilt.CPUINFO.read_text().split("\n\n", 1)[0]
    fake = tmp_path / "cpuinfo"
    fake.write_text(first.replace("cpu MHz", "cpu MHz\t: 1.0\nx") + "\n\nprocessor\t: 1\n")
    monkeypatch.setattr(prebuilt, "CPUINFO", fake)
    assert prebuilt.quick_facts() == facts  # another clock, another second processor: the same CPU
    named = next(line for line in first.splitlines() if line.split(":", 1)[0].strip() in prebuilt.CPU_FIELDS)
    fake.write_text(first.replace(named, named + " another"))
    assert prebuilt.quick_facts() != facts
    monkeypatch.undo()
    monkeypatch.setenv("SAFERL_CACHE_DIR", str(cache))
    memo = cache / "kernel" / f"key-{facts}.txt"
    probe = ("import sys; from cube.stats import prebuilt; k = prebuilt.key(); "
             "print(k, 'llvmlite' in sys.modules)")
    env = {**os.environ, "SAFERL_CACHE_DIR": str(cache)}

    def run() -> list[str]:
        done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, env=env, timeout=120)
        assert done.returncode == 0, done.stderr
        return done.stdout.split()

    assert run() == [prebuilt.full_key(), "True"] and memo.read_text().strip() == prebuilt.full_key()
    assert run() == [prebuilt.full_key(), "False"]
    memo.write_text("not a key\n")
    assert run() == [prebuilt.full_key(), "True"] and memo.read_text().strip() == prebuilt.full_key()


@pytest.mark.parametrize("content", [b"", b"garbage\n" * 100])
def test_a_damaged_module_is_not_loaded(cache, content):
    path = prebuilt.module_path(prebuilt.key())
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(content)
    assert prebuilt.load() is None


def test_the_module_is_never_called_with_arrays_it_was_not_compiled_for():
    calls = []
    checked = prebuilt.Checked(lambda *a: calls.append(a) or False, "f4")
    f4, f8, b1, i4, i8 = (np.zeros(3, t) for t in (np.float32, np.float64, bool, np.int32, np.int64))
    good = [np.zeros((1, 3, 1), np.float32), np.zeros((1, 3, 1), np.float32), b1, 1.0, np.float32(1), f4,
            np.float32(0), np.float32(1), i4, f4, False, np.zeros((1, 6)), np.zeros((1, 3), np.int64), b1, i8,
            np.zeros((2, 4), np.int64), np.zeros((2, 4)), np.zeros((1, 2))]
    assert checked(*good) is False and len(calls) == 1
    bad = {0: np.zeros((1, 3, 1), np.float64),  # another dtype
           1: np.zeros((1, 6, 1), np.float32)[:, ::2],  # strided
           5: np.zeros((3, 1), np.float32),  # another rank
           8: i8, 12: np.zeros((1, 3)), 2: f8}
    for index, value in bad.items():
        with pytest.raises(TypeError):
            checked(*good[:index], value, *good[index + 1:])
    with pytest.raises(TypeError):
        checked(*good[:-1])
    assert len(calls) == 1


_PASS = r"""
import sys
import numpy as np
from cube.stats import fused
from cube.stats.suffstats import load_suffstats
ss = load_suffstats(sys.argv[1], cache=False, kernel=sys.argv[3])
np.save(sys.argv[2], np.concatenate([ss[v].values.ravel().astype(float) for v in sorted(ss.data_vars)]))
print(type(fused.compiled()).__name__ if fused.loaded() else "-", "numba" in sys.modules)
"""


def test_a_process_with_the_module_computes_a_pass_without_numba_to_numpys_numbers(tmp_path, prebuilt_cache):
    path = tmp_path / "big.zarr"
    create_store(path, algos=["a"], tasks=["t"], bounds=[10.0], seeds=[0, 1], n_iterates=2, n_episodes=4096)
    writer = CubeWriter(path)
    rng = np.random.default_rng(3)
    for seed in (0, 1):
        for iterate in (0, 1):
            n = 4096 - 1500 * iterate  # the second iterate's last slots stay empty
            writer.write_episodes(RunKey("a", "t", 10.0, seed), "train", iterate, rng.normal(size=n),
                                  rng.gamma(2.0, 5.0, size=n).astype(np.float32))

    def run(kernel: str, out: str) -> tuple[np.ndarray, str]:
        env = {**os.environ, "SAFERL_CACHE_DIR": str(prebuilt_cache), "SAFERL_PREBUILT": "on"}
        done = subprocess.run([sys.executable, "-c", _PASS, str(path), str(tmp_path / out), kernel], env=env,
                              capture_output=True, text=True, timeout=300)
        assert done.returncode == 0, done.stderr[-2000:]
        return np.load(tmp_path / out), done.stdout.strip()

    numpy_numbers, _ = run("numpy", "numpy.npy")
    fused_numbers, seen = run("fused", "fused.npy")
    assert seen == "Prebuilt False"  # the prebuilt module ran the pass; numba was never imported
    np.testing.assert_array_equal(fused_numbers, numpy_numbers)
