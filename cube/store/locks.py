"""The store's concurrency: the writers' seqlock (write sequences), run and grid lock files, and the
one consistent re-read of a run (`StillRunReader`).
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import numpy as np
import zarr

from cube.errors import CubeError
from cube.schema import (
    RUN_DIMS,
)
from cube.store.fs import PathLike, side_folder

# Per run, a sequence number (a seqlock): odd while a writer is between its reward and cost chunk writes,
# bumped again when both are written. A reader that sees it change or odd around its read of a run reads
# that run again, so nobody ever sees the rewards of an iterate without its costs. Writers also hold the
# run's lock file (`run_lock_path`) exclusively while they write, so a reader that keeps meeting writes
# (a writer that never pauses) can hold writers off for one read instead of retrying forever.
WRITE_SEQ = "write_seq"


def read_write_seqs(source: PathLike | None) -> np.ndarray | None:
    """Every run's write sequence (run dims; odd = a write in progress); None for stores without one
    (foreign cubes, netCDF, stores written before the seqlock). Readers call this twice per pass, so
    the chunks (8 bytes each, one per run) are read straight from their files when they are in the
    codec chain this module writes; otherwise through zarr."""
    if source is None or not (Path(source) / WRITE_SEQ / "zarr.json").exists():
        return None
    folder = Path(source) / WRITE_SEQ
    try:
        meta = json.loads((folder / "zarr.json").read_text())
        if [c["name"] for c in meta["codecs"]] == ["bytes", "zstd", "crc32c"] and \
                meta["chunk_grid"]["configuration"]["chunk_shape"] == [1] * len(RUN_DIMS):
            return _read_seq_files(folder, tuple(meta["shape"]))
        return np.asarray(zarr.open_array(folder, mode="r")[...])
    except Exception:  # noqa: BLE001 - an unreadable sequence is reported by the data read it guards
        return None


def _read_seq_files(folder: Path, shape: tuple[int, ...]) -> np.ndarray:
    """The int64 of each one-element chunk file (bytes -> zstd -> crc32c); 0 where none was written.
    ValueError on a checksum mismatch."""
    import google_crc32c
    from numcodecs import Zstd

    zstd = Zstd()
    out = np.zeros(shape, dtype=np.int64)
    for index in np.ndindex(*shape):
        try:
            data = (folder / "c" / "/".join(map(str, index))).read_bytes()
        except FileNotFoundError:
            continue
        body, crc = data[:-4], data[-4:]
        if google_crc32c.value(body).to_bytes(4, "little") != crc:
            raise ValueError(f"checksum mismatch in {folder.name} chunk {index}")
        out[index] = np.frombuffer(zstd.decode(body), dtype="<i8")[0]
    return out


def runs_written_since(before: np.ndarray, after: np.ndarray | None) -> list[tuple[int, ...]]:
    """Run positions whose write sequence moved between two `read_write_seqs`, or was odd (a write in
    progress) at the first: their data read in between may mix two writes."""
    if after is None or after.shape != before.shape:
        return []
    return [tuple(int(i) for i in ix) for ix in np.argwhere((before != after) | (before % 2 == 1))]


def run_lock_path(path: PathLike, index: tuple[int, ...]) -> Path:
    """The lock file of the run at `index` (its position along the run dims): writers of its episodes
    hold it exclusively, a reader that keeps meeting their writes shares it for one read."""
    return Path(path) / "_locks" / f"run-{'.'.join(str(int(i)) for i in index)}.lock"


@contextmanager
def publishing(path: PathLike, seq: zarr.Array | None, index: tuple[int, ...]) -> Iterator[None]:
    """Bracket the chunk writes of the run at `index` by its write sequence `seq` (odd inside, even
    after), holding the run's lock file exclusively; `seq` None (a store without one): nothing to bump.
    The `_locks` folder must exist (`side_folder`)."""
    if seq is None:
        yield
        return
    import fcntl

    with open(run_lock_path(path, index), "a+") as lock:  # one open file per write: sweeps of
        fcntl.flock(lock, fcntl.LOCK_EX)                   # thousands of runs stay under ulimit -n
        start = int(seq[index])
        seq[index] = start + 1 + start % 2  # odd: a write is in progress
        try:
            yield
        finally:
            seq[index] = start + 2 + start % 2


class StillRunReader:
    """Reads one run's reward and cost (iterate, episode, mode) straight from its chunks while its write
    sequence stands still and even: both variables of the same write, never one without the other."""

    OPTIMISTIC_TRIES = 3
    """Reads tried without a lock before holding writers off (a writer pauses between iterates)."""

    def __init__(self, path: PathLike) -> None:
        self.path = Path(path)
        self.arrays = {name: zarr.open_array(self.path / name, mode="r") for name in ("reward", "cost", WRITE_SEQ)}

    def read(self, index: tuple[int, ...], tries: int = 200) -> tuple[np.ndarray, np.ndarray]:
        """Read while no write is in progress: a few short waits first; then, against a writer that never
        pauses, with the run's lock shared (writers wait for the read, milliseconds). CubeError if the run
        was being written at every one of `tries` attempts (a writer holding its lock that long is stuck)."""
        for attempt in range(tries):
            got = self._read_still(index)
            if got is None and attempt >= self.OPTIMISTIC_TRIES:
                got = self._read_locked(index)
            if got is not None:
                return got
            time.sleep(0.001 * min(attempt + 1, 20))
        raise CubeError("a run was being written during every read of it; stop its writer or try again")

    def _read_still(self, index: tuple[int, ...]) -> tuple[np.ndarray, np.ndarray] | None:
        seq_array = self.arrays[WRITE_SEQ]
        seq = int(seq_array[index])
        reward, cost = self.arrays["reward"][index], self.arrays["cost"][index]
        if seq % 2 == 0 and int(seq_array[index]) == seq:
            return reward, cost
        return None

    def _read_locked(self, index: tuple[int, ...], spin_s: float = 0.05) -> tuple[np.ndarray, np.ndarray] | None:
        """One read holding the run's lock shared, taken within `spin_s` seconds (None otherwise: no lock
        file, as with writers from before the lock, or a writer kept it). The lock is polled, not waited
        for: a blocking wait could not be bounded, and a writer that never pauses still lets go of it for
        tens of microseconds between two writes, which polling catches."""
        import fcntl

        try:
            handle = open(run_lock_path(self.path, index), "rb")  # noqa: SIM115 - closed below
        except OSError:
            return None
        with handle:
            deadline = time.perf_counter() + spin_s
            while True:
                try:
                    fcntl.flock(handle, fcntl.LOCK_SH | fcntl.LOCK_NB)
                    break
                except BlockingIOError:
                    if time.perf_counter() > deadline:
                        return None
                    time.sleep(0)
            try:
                return self._read_still(index)
            finally:
                fcntl.flock(handle, fcntl.LOCK_UN)


@contextmanager
def grid_lock(path: PathLike) -> Iterator[None]:
    """Hold the store's grid lock (an exclusive flock on `<store>/_locks/grid.lock`) while the grid's
    labels or sizes change, so concurrent growers never lose each other's labels."""
    import fcntl

    folder = side_folder(Path(path) / "_locks")
    with open(folder / "grid.lock", "a+") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)
