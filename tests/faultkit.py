"""Helpers of the fault-injection tests (tests/test_faults*.py): real writer processes, kills at chosen store
writes, flipped bits. Every wait is on a condition (an event, a counter, a process exit), never a sleep."""

from __future__ import annotations

import multiprocessing as mp
import os
import signal
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

CTX = mp.get_context("spawn")


def flip(chunk: Path, offset: int) -> None:
    """Flip one bit of the byte at `offset` (negative: from the end) of a file."""
    data = bytearray(chunk.read_bytes())
    data[offset] ^= 0x10
    chunk.write_bytes(bytes(data))


def torn_slots(reward: np.ndarray, cost: np.ndarray) -> int:
    """Episode slots holding a reward without its cost or the reverse (a reader's torn view of a write
    whose episodes always carry both)."""
    return int((np.isnan(np.asarray(reward)) != np.isnan(np.asarray(cost))).sum())


def kill_self_at_write(match: Callable[[str], bool], nth: int = 1) -> None:
    """From now on, SIGKILL this process just before its `nth` zarr store write whose key `match`es (a kill
    between two metadata or chunk writes, where a crash, OOM kill or lost node would land)."""
    from zarr.storage import LocalStore

    seen = {"n": 0}
    original = LocalStore.set

    async def set_or_die(self: Any, key: str, value: Any) -> None:
        if match(key):
            seen["n"] += 1
            if seen["n"] >= nth:
                os.kill(os.getpid(), signal.SIGKILL)
        await original(self, key, value)

    LocalStore.set = set_or_die  # type: ignore[method-assign]


def start(target: Callable[..., Any], *args: Any) -> mp.process.BaseProcess:
    proc = CTX.Process(target=target, args=args)
    proc.start()
    return proc


def stop(proc: mp.process.BaseProcess, timeout: float = 60) -> int | None:
    proc.join(timeout)
    if proc.is_alive():
        proc.kill()
        proc.join(10)
    return proc.exitcode


def write_forever(path: str, key: tuple, started: Any, stop_event: Any, iterates: int = 4) -> None:
    """Rewrite iterates of one run with a changing number of episodes (cost = |reward| + 1), as fast as
    possible, until `stop_event`."""
    from cube import CubeWriter, RunKey

    writer = CubeWriter(path)
    run = RunKey(*key)
    rng = np.random.default_rng(0)
    i = 0
    while not stop_event.is_set():
        n = int(rng.integers(1, 9))
        reward = rng.normal(size=n)
        writer.write_episodes(run, "train", i % iterates, reward, np.abs(reward) + 1.0)
        i += 1
        if i == 20:
            started.set()


def mount_tmpfs(mount: Path, size: str = "3m") -> str | None:
    """Mount a small tmpfs at `mount` (root only); the reason it could not be mounted, else None."""
    import subprocess

    mount.mkdir(exist_ok=True)
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(mount)], capture_output=True)
    return None if done.returncode == 0 else done.stderr.decode().strip()[:80] or "mount failed"


def remount(mount: Path, options: str) -> None:
    import subprocess

    subprocess.run(["mount", "-o", f"remount,{options}", str(mount)], check=True, capture_output=True)


def unmount(mount: Path) -> None:
    import subprocess

    subprocess.run(["umount", "-l", str(mount)], check=False, capture_output=True)


def fill_disk(folder: Path) -> None:
    """Write a ballast file in `folder` until its file system is full."""
    with open(folder / "ballast", "wb") as ballast:
        try:
            while True:
                ballast.write(b"\0" * 65536)
                ballast.flush()
        except OSError:
            pass


def forked_child() -> None:
    """Call first in a forked child that computes with dask: the parent's thread pool came along without its
    threads (work queued there would wait forever); the child makes its own."""
    import dask.threaded

    dask.threaded.default_pool = None
