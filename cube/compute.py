"""Run cube's dask computations on an existing dask.distributed cluster, or locally.

    with scheduler_context(args.scheduler):          # None -> $DASK_SCHEDULER_ADDRESS -> local threads
        ss = stats.load_suffstats(path)              # the one dask pass runs on the cluster's workers

With an address (argument, else the environment variable ``DASK_SCHEDULER_ADDRESS``) a
``distributed.Client`` is connected for the duration of the block and configured as dask's scheduler, so
every dask computation inside runs on that cluster; cube's own passes call :func:`compute`, which keeps
that cluster and otherwise uses the local threaded scheduler. Workers read the episodes straight from the
store, so the store's path must be the same on every worker (a shared filesystem).

``distributed`` is imported only inside the functions that need it, never when ``cube`` is imported.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from contextlib import contextmanager, nullcontext
from typing import Any

from cube.errors import CubeError

KEEP_FREED_BYTES = 1 << 31
"""How much freed memory a command process keeps for reuse (`keep_freed_memory`)."""


def keep_freed_memory() -> bool:
    """Let this process reuse the memory of freed large arrays instead of giving it back to the OS (glibc's
    mallopt: allocations up to 1 GiB from the heap, up to KEEP_FREED_BYTES kept after free). The statistics
    pass allocates and frees temporaries of ~64-128 MiB per block of runs; by default glibc maps and unmaps
    each, and the page faults of mapping them again cost the pass a third of its CPU time in the kernel
    (paper scale: ~9 s of system time, ~10% of the wall time; bench/follow_speed.py). For command-line
    processes only (`saferl ...`), whose memory goes back at exit. Returns whether it took effect (False
    on systems without glibc)."""
    import ctypes
    import ctypes.util

    m_trim_threshold, m_mmap_threshold = -1, -3
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        mallopt = libc.mallopt
    except (OSError, AttributeError):
        return False
    return bool(mallopt(m_mmap_threshold, 1 << 30)) and bool(mallopt(m_trim_threshold, KEEP_FREED_BYTES))


BLAS_THREAD_VARS = ("OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")
"""The variables that size the BLAS thread pool of numpy's wheels (OpenBLAS) and of conda's numpy (MKL)."""


def one_blas_thread() -> bool:
    """BLAS on one thread in this process unless the user chose a number ($OPENBLAS_NUM_THREADS,
    $MKL_NUM_THREADS): a command's parallel work is its own threads (the pass's dask workers, the cache
    write), and the only BLAS call of a report, the bootstrap's matmul, is small. OpenBLAS's idle threads
    spin on a core for milliseconds after each call: in a cold paper-scale report about 0.6 s of CPU beside
    the cache write, the bootstrap 0.2 s slower in wall time (bench: docs/performance.md, sixth round).
    Takes effect only before numpy is imported (the variables are read when its BLAS loads): returns
    whether it could."""
    import sys

    if "numpy" in sys.modules:
        return False
    for name in BLAS_THREAD_VARS:
        os.environ.setdefault(name, "1")
    return True


ENV_VAR = "DASK_SCHEDULER_ADDRESS"
CONNECT_TIMEOUT_S = 5.0
Progress = Callable[[int, int], None]
"""`progress(done, total)`: the one shape of a progress callback of one long step (units: tasks, runs,
replicates; total may grow)."""
StepProgress = Callable[[str, int, int], None]
"""`progress(step, done, total)`: a job of several named steps (a figure set, a sweep)."""
FractionProgress = Callable[[float, str], None]
"""`progress(fraction, text)`: how a screen shows progress (0..1 and what is being done)."""


class Cancelled(Exception):  # noqa: N818 - a signal, not an error
    """Raised by a progress callback to stop the long work it watches (a screen closing): cube's readers let
    it through as it is, never as a damaged store."""

__all__ = ["ENV_VAR", "CONNECT_TIMEOUT_S", "Progress", "StepProgress", "FractionProgress", "Cancelled",
           "resolve_address", "connect", "scheduler_context", "active_client", "compute", "step_progress",
           "fraction_progress", "available_memory", "check_memory"]

MEMORY_SHARE = 0.5
"""A job may plan to use at most this share of the memory available when it starts."""


def available_memory() -> int | None:
    """Bytes of memory available to a new allocation now (Linux: MemAvailable), None where unknown."""
    try:
        for line in open("/proc/meminfo").read().splitlines():
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    try:
        return int(os.sysconf("SC_AVPHYS_PAGES")) * int(os.sysconf("SC_PAGE_SIZE"))
    except (ValueError, OSError, AttributeError):
        return None


def _size(n: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB", "TiB", "PiB"):
        if n < 1024 or unit == "PiB":
            return f"{n:,.0f} {unit}" if unit == "B" else f"{n:,.1f} {unit}"
        n /= 1024
    return f"{n:,.1f} PiB"


def check_memory(nbytes: float, what: str, hint: str = "ask for less") -> None:
    """CubeError before any work when `what` (e.g. "--episodes 1,000,000,000") would need about `nbytes`
    of memory, more than MEMORY_SHARE of what is available: one line naming the value, the estimate and
    the limit."""
    available = available_memory()
    if available is None or nbytes <= MEMORY_SHARE * available:
        return
    raise CubeError(f"{what} would need about {_size(nbytes)} of memory, more than {MEMORY_SHARE:.0%} of the "
                    f"{_size(available)} available: {hint}")


def step_progress(progress: StepProgress | None, step: str) -> Progress | None:
    """The `Progress` of one named step of a `StepProgress` (None stays None)."""
    if progress is None:
        return None
    return lambda done, total: progress(step, done, total)


def fraction_progress(progress: FractionProgress | None, text: str) -> Progress | None:
    """A `Progress` that reports `done / total` (clipped to 0..1) and `text` to a `FractionProgress`."""
    if progress is None:
        return None

    def call(done: int, total: int) -> None:
        frac = float(done) / float(total) if total else 0.0
        progress(min(max(frac, 0.0), 1.0), text)

    return call


def resolve_address(address: str | None) -> str | None:
    """The scheduler address to use: `address`, else $DASK_SCHEDULER_ADDRESS, else None (local)."""
    for value in (address, os.environ.get(ENV_VAR)):
        if value is not None and value.strip():
            return value.strip()
    return None


def _import_client() -> type:
    try:
        from distributed import Client
    except ImportError:
        raise CubeError("a dask scheduler address needs the 'distributed' package: pip install distributed") from None
    return Client


def _unreachable(address: str, timeout: float, exc: BaseException) -> CubeError:
    reason = " ".join(str(exc).split())[:160] or type(exc).__name__
    return CubeError(f"cannot reach the dask scheduler at {address!r} within {timeout:g}s ({reason}): start it "
                     f"(`dask scheduler`) or fix --scheduler / ${ENV_VAR}")


def _probe(address: str, timeout: float) -> None:
    """Open and close one comm to `address` (in a fresh thread, so a running event loop is no obstacle)."""
    import asyncio
    from concurrent.futures import ThreadPoolExecutor

    from distributed.comm import connect as comm_connect

    async def once() -> None:
        comm = await comm_connect(address, timeout=timeout)
        await comm.close()

    with ThreadPoolExecutor(1) as pool:
        pool.submit(asyncio.run, once()).result()


def connect(address: str, timeout: float = CONNECT_TIMEOUT_S) -> Any:
    """A `distributed.Client` connected to `address` (not made the default); CubeError if unreachable."""
    client_cls = _import_client()
    try:
        _probe(address, timeout)
        return client_cls(address, timeout=timeout, set_as_default=False)
    except Exception as exc:  # unreachable, refused, not a dask scheduler, bad address: all one line
        raise _unreachable(address, timeout, exc) from None


@contextmanager
def scheduler_context(address: str | None = None, timeout: float = CONNECT_TIMEOUT_S) -> Iterator[Any]:
    """Run the dask computations of the block on the scheduler at `address` (see module docstring).

    Yields the connected `distributed.Client`, or None when no address is given (local threaded
    scheduler). The client is closed when the block ends; the cluster itself is left running.
    """
    address = resolve_address(address)
    if address is None:
        yield None
        return
    import dask

    client = connect(address, timeout)
    try:
        with dask.config.set(scheduler=client), client.as_current():
            yield client
    finally:
        client.close()


def active_client() -> Any | None:
    """The distributed Client dask is configured to use (scheduler_context or a default Client), or None."""
    import dask

    scheduler = dask.config.get("scheduler", None)
    if scheduler is None:
        return None
    if type(scheduler).__name__ == "Client" and hasattr(scheduler, "get"):
        return scheduler
    if scheduler in ("dask.distributed", "distributed"):
        from distributed import default_client

        try:
            return default_client()
        except ValueError:
            return None
    return None


def _local_progress(progress: Progress) -> Any:
    """A dask callback that reports finished tasks of the local scheduler to `progress(done, total)` (the class
    is made here, not at import: this module loads without dask, so commands that compute nothing start fast)."""
    from dask.callbacks import Callback

    class LocalProgress(Callback):
        def __init__(self) -> None:
            super().__init__()
            self._done = 0
            self._total = 0

        def _start_state(self, dsk, state) -> None:
            self._total = sum(len(state[k]) for k in ("ready", "waiting", "running", "finished"))
            progress(0, self._total)

        def _posttask(self, key, result, dsk, state, worker_id) -> None:
            self._done += 1
            progress(self._done, self._total)

    return LocalProgress()


def compute(thing: Any, progress: Progress | None = None) -> Any:
    """`dask.compute(thing)[0]` on the active cluster (if any), else on the local threaded scheduler.

    `thing`: a dask collection or a list/tuple of them. `progress(done, total)` is called as work
    finishes: per task locally, per output chunk on a cluster.
    """
    import dask
    import dask.threaded

    client = active_client()
    if client is None:
        # the function, not the name "threads": a named scheduler makes dask import distributed (0.6 s) to
        # look for a Client, and active_client() has just looked
        with dask.config.set(scheduler=dask.threaded.get), _local_progress(progress) if progress else nullcontext():
            return dask.compute(thing)[0]
    return _compute_on(client, thing, progress)


def _compute_on(client: Any, thing: Any, progress: Progress | None) -> Any:
    import dask
    from distributed import as_completed, futures_of

    with client.as_current():
        persisted = client.persist(thing)
        if progress is not None:
            futures = futures_of(persisted)
            progress(0, len(futures))
            for done, _ in enumerate(as_completed(futures), start=1):
                progress(done, len(futures))
        return dask.compute(persisted, scheduler=client)[0]
