"""The store's concurrency: the writers' seqlock (write sequences and what each write is writing), run and
grid lock files, and the one consistent re-read of a run (`RunReader`).

Every write into a run is a *bracket* (`publishing`): the writer holds the run's lock file exclusively,
records in it what it is about to write (an `Intent`: arrays, iterates, modes), bumps the run's write
sequence to odd, writes, and bumps it to even. A reader whose read of a run overlapped a bracket (the
sequence moved, or was odd) reads the run again while no bracket is open. A bracket whose writer died
(SIGKILL, a lost node) leaves the sequence odd with the lock free: readers holding the lock shared see
that, take the half-written slots named by the intent as missing (an *interrupted write* of that
iterate, the run partial), and the run's next writer blanks them for good before it writes.
"""

from __future__ import annotations

import json
import os
import socket
import time
import warnings
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

import numpy as np

from cube.errors import CubeError, CubeWarning, DamagedStoreError
from cube.schema import RUN_DIMS, RunKey
from cube.store.chunkfiles import read_file
from cube.store.damage import reading_store
from cube.store.fs import PathLike, side_folder, store_write_error
from cube.store.grid import Sizes, open_view, published_sizes

if TYPE_CHECKING:
    import zarr

# Per run, a sequence number (a seqlock): odd while a writer is inside a write bracket, bumped again when
# it is done. Writers also hold the run's lock file (`run_lock_path`) exclusively for the whole bracket, so
# a reader that keeps meeting writes (a writer that never pauses) can hold writers off for one read, and
# a reader holding the lock that still finds the sequence odd knows the bracket's writer died.
WRITE_SEQ = "write_seq"


# --------------------------------------------------------------------------------- write sequences
def read_write_seqs(source: PathLike | None, sizes: Sizes | None = None) -> np.ndarray | None:
    """Every run's write sequence (run dims; odd = a bracket open or interrupted), cut to the published
    grid (or the snapshot `sizes`); None for stores without one (foreign cubes, netCDF, stores written
    before the seqlock). CubeError naming the chunk when one is damaged (a checksum mismatch). Readers call
    this twice per pass, so the chunks (8 bytes each, one per run) are read straight from their files
    when they are in the codec chain this module writes; otherwise through zarr."""
    if source is None or not (Path(source) / WRITE_SEQ / "zarr.json").exists():
        return None
    folder = Path(source) / WRITE_SEQ
    sizes = sizes or published_sizes(source) or {}
    layout = _seq_layout(source, sizes)
    if layout is None:
        return None  # no readable sequence: the store's structure check reports the damage
    shape, fast = layout
    if fast:
        return _read_seq_files(folder, shape)
    return _read_seqs_zarr(source, sizes)


def _seq_layout(source: PathLike, sizes: Sizes) -> tuple[tuple[int, ...], bool] | None:
    """(shape cut to `sizes`, whether the chunks are one-element files of this module's codec chain), or
    None when the store has no readable sequence metadata."""
    try:
        meta = json.loads((Path(source) / WRITE_SEQ / "zarr.json").read_text())
        shape = tuple(min(int(n), sizes.get(d, int(n))) for d, n in zip(RUN_DIMS, meta["shape"], strict=True))
        fast = [c["name"] for c in meta["codecs"]] == ["bytes", "zstd", "crc32c"] and \
            meta["chunk_grid"]["configuration"]["chunk_shape"] == [1] * len(RUN_DIMS)
    except (OSError, ValueError, KeyError, TypeError):
        return None
    return shape, fast


def _read_seqs_zarr(source: PathLike, sizes: Sizes) -> np.ndarray:
    with reading_store(source, "read the store's write sequences"):
        return np.asarray(open_view(source, sizes)[WRITE_SEQ][...])


def _read_seq_files(folder: Path, shape: tuple[int, ...], out: np.ndarray | None = None,
                    prefixes: Sequence[tuple[int, ...]] | None = None) -> np.ndarray:
    """The int64 of each one-element chunk file (bytes -> zstd -> crc32c); 0 where none was written.
    With `prefixes` ((algo, task, bound) positions), only the runs below them are read into `out`.
    CubeError naming the chunk on a checksum mismatch or an undecodable chunk."""
    import google_crc32c
    from numcodecs import Zstd

    zstd = Zstd()
    decoded: dict[bytes, int] = {}  # frame -> value: runs share few sequences, each frame decoded once a call
    out = np.zeros(shape, dtype=np.int64) if out is None else out
    indices = np.ndindex(*shape) if prefixes is None else (
        (*p, s) for p in prefixes for s in range(shape[-1]))
    base = f"{folder}/c/"
    for index in indices:
        chunk = "/".join(map(str, index))
        try:
            data = read_file(base + chunk)  # 1,440 tiny files per call
        except (FileNotFoundError, NotADirectoryError):
            out[index] = 0
            continue
        except OSError:
            raise _damaged_seq(chunk, "not a readable file") from None
        body, crc = data[:-4], data[-4:]
        if google_crc32c.value(body).to_bytes(4, "little") != crc:
            raise _damaged_seq(chunk, "checksum mismatch")
        value = decoded.get(body)
        if value is None:
            try:
                value = decoded[body] = int(np.frombuffer(zstd.decode(body), dtype="<i8")[0])
            except Exception:  # noqa: BLE001 - a valid checksum over bytes zstd cannot decode
                raise _damaged_seq(chunk, "not a zstd frame") from None
        out[index] = value
    return out


class StoreGone(CubeError):
    """The store being followed was deleted or moved away (its root ``zarr.json`` is gone)."""


class SeqWatch:
    """Every run's write sequence, read again cheaply and often (the TUI's follow mode, `saferl status
    --watch`): `poll()` stats the store's root ``zarr.json`` (the published grid) and the folders of the
    sequence chunks (one per algo, task and bound: a chunk written into a folder renames a file there,
    which changes the folder's modification time) and reads only the chunks of folders that changed, or
    that changed within RACY_S seconds of the previous poll (a time stamp is coarser than two writes). Every
    FULL_EVERY_S seconds it reads all of them (file systems whose folder times lag, such as NFS attribute
    caches). Stores whose sequences are not one-element files of this module's codecs are read whole."""

    RACY_S = 2.0
    FULL_EVERY_S = 30.0

    def __init__(self, path: PathLike) -> None:
        self.path = Path(path)
        self.sizes: Sizes | None = None
        self.seqs: np.ndarray | None = None
        self._root: tuple[int, ...] | None = None
        self._layout: tuple[tuple[int, ...], bool] | None = None
        self._folders: dict[tuple[int, ...], tuple[int, int]] = {}
        self._racy: set[tuple[int, ...]] = set()
        self._full_at = 0.0

    def _stat_root(self) -> tuple[int, ...]:
        try:
            st = (self.path / "zarr.json").stat()
        except OSError:
            raise StoreGone(f"{self.path} is gone (deleted or moved away): nothing more to follow") from None
        return (st.st_ino, st.st_size, st.st_mtime_ns)

    def poll(self) -> tuple[Sizes | None, np.ndarray | None]:
        """(published sizes, every run's write sequence) now; StoreGone when the store is no longer there,
        CubeError for a damaged sequence chunk. Sequences are None for stores without them."""
        now = time.time()
        root = self._stat_root()
        if root != self._root:
            self._root, self.sizes = root, published_sizes(self.path)
            self._layout = _seq_layout(self.path, self.sizes or {}) if self.sizes else None
            self._full_at = 0.0
        if self._layout is None:
            self.seqs = None
            return self.sizes, None
        shape, fast = self._layout
        if not fast:
            self.seqs = _read_seqs_zarr(self.path, self.sizes or {})
            return self.sizes, self.seqs
        folders = self._stat_folders(shape[:-1])
        full = self.seqs is None or self.seqs.shape != shape or now - self._full_at >= self.FULL_EVERY_S
        if full:
            self.seqs = _read_seq_files(self.path / WRITE_SEQ, shape)
            self._full_at = now
        else:
            moved = {p for p, key in folders.items() if self._folders.get(p) != key} | self._racy
            if moved:
                _read_seq_files(self.path / WRITE_SEQ, shape, self.seqs, sorted(moved))
        racy_ns = int((now - self.RACY_S) * 1e9)
        self._racy = {p for p, (mtime, _) in folders.items() if mtime >= racy_ns}
        self._folders = folders
        return self.sizes, self.seqs

    def _stat_folders(self, shape: tuple[int, ...]) -> dict[tuple[int, ...], tuple[int, int]]:
        """(mtime ns, inode) of each (algo, task, bound) folder of sequence chunks; (0, 0) where none."""
        base = self.path / WRITE_SEQ / "c"
        out = {}
        for p in np.ndindex(*shape):
            try:
                st = os.stat(base.joinpath(*map(str, p)))
                out[p] = (st.st_mtime_ns, st.st_ino)
            except OSError:
                out[p] = (0, 0)
        return out


def _damaged_seq(chunk: str, why: str) -> DamagedStoreError:
    return DamagedStoreError.found("read the store's write sequences", f"chunk {WRITE_SEQ}/c/{chunk} is damaged "
                                   f"({why})", advice="the run's next write rewrites it")


def runs_written_since(before: np.ndarray, after: np.ndarray | None) -> list[tuple[int, ...]]:
    """Run positions whose write sequence moved between two `read_write_seqs`, or was odd (a bracket open
    or interrupted) at the first: their data read in between may mix two writes."""
    if after is None or after.shape != before.shape:
        return []
    return [tuple(int(i) for i in ix) for ix in np.argwhere((before != after) | (before % 2 == 1))]


class WrittenSince:
    """Picklable test for a statistics pass: was the run at a position written since `before` (the writers'
    seqlock read before the pass, `read_write_seqs`)?"""

    def __init__(self, path: Path, before: np.ndarray, sizes: Sizes | None = None) -> None:
        self.path, self.before, self.sizes = str(path), before, sizes

    def __call__(self, run: tuple[int, ...]) -> bool:
        now = read_write_seqs(self.path, self.sizes)
        return now is not None and bool(runs_written_since(self.before[run][None], now[run][None]))


# --------------------------------------------------------------------------------------- intents
@dataclass(frozen=True)
class Intent:
    """What one write bracket writes into a run: the arrays `names` (None: every array of the run), at
    iterates lo..hi (`iterates`; None: every iterate) and mode positions `modes` (None: every mode).
    Kept in the run's lock file while the bracket is open, so a half-written bracket can be undone."""

    names: tuple[str, ...] | None = None
    iterates: tuple[int, int] | None = None
    modes: tuple[int, ...] | None = None

    def union(self, other: Intent) -> Intent:
        """An intent covering both (used when a writer repairs a dead writer's bracket inside its own)."""
        names = None if self.names is None or other.names is None else tuple(dict.fromkeys(self.names + other.names))
        iterates = None if self.iterates is None or other.iterates is None else (
            min(self.iterates[0], other.iterates[0]), max(self.iterates[1], other.iterates[1]))
        modes = None if self.modes is None or other.modes is None else tuple(sorted({*self.modes, *other.modes}))
        return Intent(names, iterates, modes)

    def blank(self, arrays: dict[str, np.ndarray]) -> None:
        """Set the slots this intent covers to NaN, in place, in a run's float arrays ({name: array with
        the run dims removed}: (J, E, M) episodes, (J,) per-iterate variables); others are left alone."""
        its = slice(None) if self.iterates is None else slice(self.iterates[0], self.iterates[1] + 1)
        for name, values in arrays.items():
            if (self.names is not None and name not in self.names) or values.dtype.kind != "f" or values.ndim == 0:
                continue
            if values.ndim == 3:
                values[its, :, list(self.modes) if self.modes is not None else slice(None)] = np.nan
            elif values.ndim == 1:
                values[its] = np.nan

    def describe(self, modes: Sequence[str] = ()) -> str:
        """'iterate 5 (reward, cost of train)', 'iterates 0..9 (every array)'."""
        if self.iterates is None:
            where = "every iterate"
        elif self.iterates[0] == self.iterates[1]:
            where = f"iterate {self.iterates[0]}"
        else:
            where = f"iterates {self.iterates[0]}..{self.iterates[1]}"
        what = "every array" if self.names is None else ", ".join(self.names)
        if self.modes is not None and modes:
            what += " of " + ", ".join(str(modes[m]) for m in self.modes if m < len(modes))
        return f"{where} ({what})"

    def to_json(self) -> str:
        return json.dumps({"names": self.names, "iterates": self.iterates, "modes": self.modes,
                           "host": socket.gethostname(), "pid": os.getpid()})

    @classmethod
    def from_json(cls, text: str) -> Intent:
        """The intent a lock file holds; an unreadable one covers everything (the whole run is suspect)."""
        try:
            body = json.loads(text)
            names = body.get("names")
            iterates = body.get("iterates")
            modes = body.get("modes")
            return cls(tuple(str(n) for n in names) if names is not None else None,
                       (int(iterates[0]), int(iterates[1])) if iterates is not None else None,
                       tuple(int(m) for m in modes) if modes is not None else None)
        except (ValueError, TypeError, KeyError, IndexError, AttributeError):
            return cls()


EVERYTHING = Intent()
"""A bracket that may touch every array of the run (a whole-run write or replacement)."""


def run_lock_path(path: PathLike, index: tuple[int, ...]) -> Path:
    """The lock file of the run at `index` (its position along the run dims): writers of the run hold it
    exclusively and keep their `Intent` in it; a reader that keeps meeting their writes shares it."""
    return Path(path) / "_locks" / f"run-{'.'.join(str(int(i)) for i in index)}.lock"


def _read_intent(handle: IO[str]) -> Intent:
    handle.seek(0)
    return Intent.from_json(handle.read())


def _write_intent(handle: IO[str], intent: Intent) -> None:
    handle.seek(0)
    handle.truncate()
    handle.write(intent.to_json())
    handle.flush()


def read_seq(seq: zarr.Array, index: tuple[int, ...]) -> int:
    """A run's sequence as the writer sees it; a damaged chunk counts as an interrupted bracket (odd), so
    the write that follows both repairs the slots and rewrites the chunk."""
    try:
        return int(seq[index])
    except Exception:  # noqa: BLE001 - a codec error of a damaged chunk
        return 1


@contextmanager
def publishing(path: PathLike, seq: zarr.Array | None, index: tuple[int, ...],
               intent: Intent = EVERYTHING) -> Iterator[Intent | None]:
    """One write bracket of the run at `index` (see the module docstring), holding the run's lock file
    exclusively; yields the `Intent` of a dead writer's bracket that this one must repair first (its slots
    are half-written), else None. `seq` None (a store without one): nothing to bump, nothing to repair.
    The `_locks` folder must exist (`side_folder`)."""
    if seq is None:
        yield None
        return
    import fcntl

    with open(run_lock_path(path, index), "a+") as lock:  # one open file per write: sweeps of
        fcntl.flock(lock, fcntl.LOCK_EX)                   # thousands of runs stay under ulimit -n
        start = read_seq(seq, index)
        dead = _read_intent(lock) if start % 2 else None
        _write_intent(lock, intent if dead is None else intent.union(dead))
        seq[index] = start + 1 + start % 2  # odd: a bracket is open
        try:
            yield dead
        finally:
            seq[index] = start + 2 + start % 2


# ------------------------------------------------------------------------------ consistent reads
@dataclass
class RunRead:
    """One run's arrays ({name: values with the run dims removed}) as of one writer state; `interrupted`:
    the bracket a dead writer left open (its slots are blanked here), else None."""

    arrays: dict[str, np.ndarray]
    interrupted: Intent | None = None


class RunReader:
    """Reads runs' arrays straight from their chunks while their write sequence stands still and even: all
    arrays of one writer state, never one written and another not. `sizes`: the grid snapshot the caller
    read the rest of the store with (default: the published grid now)."""

    OPTIMISTIC_TRIES = 3
    """Reads tried without a lock before holding writers off (a writer pauses between iterates)."""

    def __init__(self, path: PathLike, names: Sequence[str] = ("reward", "cost"), sizes: Sizes | None = None) -> None:
        self.path = Path(path)
        group = open_view(self.path, sizes)
        self.names = tuple(names)
        self.arrays = {name: group[name] for name in (*self.names, WRITE_SEQ)}
        self.modes = [str(m) for m in np.asarray(group["mode"][:]).tolist()] if "mode" in group else []

    def read(self, index: tuple[int, ...], tries: int = 200) -> RunRead:
        """The run at `index` as of a moment no bracket was open: a few short waits first; then, against a
        writer that never pauses, with the run's lock shared (writers wait for the read, milliseconds).
        A bracket left open by a dead writer is found under the lock: its slots come back blank, named in
        `interrupted`. CubeError if the run was being written at every one of `tries` attempts (a live
        writer holding its lock that long is stuck); `DamagedStoreError` for a chunk that does not decode."""
        for attempt in range(tries):
            with reading_store(self.path, f"read {self.path}"):
                got = self._read_still(index)
                if got is None and attempt >= self.OPTIMISTIC_TRIES:
                    got = self._read_locked(index)
            if got is not None:
                return got
            time.sleep(0.001 * min(attempt + 1, 20))
        raise CubeError("a run was being written during every read of it; stop its writer or try again")

    def _values(self, index: tuple[int, ...]) -> dict[str, np.ndarray]:
        return {name: np.array(self.arrays[name][index]) for name in self.names}

    def _read_still(self, index: tuple[int, ...]) -> RunRead | None:
        seq_array = self.arrays[WRITE_SEQ]
        seq = int(seq_array[index])
        try:
            values = self._values(index)
        except Exception:  # a torn read (a shard rewritten between its index and its chunks) of a write meanwhile
            if int(seq_array[index]) != seq or seq % 2:
                return None
            raise
        if seq % 2 == 0 and int(seq_array[index]) == seq:
            return RunRead(values)
        return None

    def _read_locked(self, index: tuple[int, ...], spin_s: float = 0.05) -> RunRead | None:
        """One read holding the run's lock shared, taken within `spin_s` seconds (None otherwise: no lock
        file, as with writers from before the lock, or a writer kept it). The lock is polled, not waited
        for: a blocking wait could not be bounded, and a writer that never pauses still lets go of it for
        tens of microseconds between two writes, which polling catches. Under the lock no bracket can be
        open, so an odd sequence is a dead writer's: its intent (in the lock file) says what to blank."""
        import fcntl

        try:
            handle = open(run_lock_path(self.path, index))  # noqa: SIM115 - closed below
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
                if int(self.arrays[WRITE_SEQ][index]) % 2 == 0:
                    return self._read_still(index)
                intent = _read_intent(handle)
                values = self._values(index)
                intent.blank(values)
                return RunRead(values, intent)
            finally:
                fcntl.flock(handle, fcntl.LOCK_UN)

    def interrupted_text(self, key: Any, intent: Intent) -> str:
        """The one line naming an interrupted write: run, iterate(s), what to do."""
        return (f"run {key}: the write of {intent.describe(self.modes)} was interrupted (its writer died); "
                "those slots are left out and the run counts as partial: re-record that iterate or rerun the run")


class InterruptedWriteWarning(CubeWarning):
    """A run holds a write its writer died in the middle of: those slots are left out (module docstring)."""


def read_runs(path: PathLike, names: Sequence[str], runs: Iterable[tuple[int, ...]], labels: Mapping[str, Any],
              sizes: Sizes | None = None, *, tries: int = 200, notes: list[str] | None = None
              ) -> Iterator[tuple[tuple[int, ...], RunRead]]:
    """Each run at `runs` (positions along the run dims), its arrays `names` as one writer state (`RunReader`):
    yields (position, `RunRead`). A write its writer died in comes back blank and is named once, by the run's
    labels (`labels`: {dim: labels}, or a cube): appended to `notes` when given, else one
    `InterruptedWriteWarning`. The one consistent re-read of runs: every reader that settles runs written
    while it read goes through here."""
    runs = list(runs)
    if not runs:
        return
    reader = RunReader(path, names, sizes)
    for index in runs:
        got = reader.read(index, tries)
        if got.interrupted is not None:
            text = reader.interrupted_text(RunKey.at(labels, index), got.interrupted)
            if notes is None:
                warnings.warn(text, InterruptedWriteWarning, stacklevel=2)
            else:
                notes.append(text)
        yield index, got


class StillRunReader(RunReader):
    """`RunReader` of reward and cost returning the pair (blank where a dead writer left them half-written)."""

    def read(self, index: tuple[int, ...], tries: int = 200) -> tuple[np.ndarray, np.ndarray]:  # type: ignore[override]
        got = super().read(index, tries)
        return got.arrays["reward"], got.arrays["cost"]


@contextmanager
def grid_lock(path: PathLike) -> Iterator[None]:
    """Hold the store's grid lock (an exclusive flock on `<store>/_locks/grid.lock`) while the grid's
    labels or sizes change, so concurrent growers never lose each other's labels. CubeError (one line)
    where the store cannot be locked (read-only, not ours, a full disk)."""
    import fcntl

    from cube.store.mounts import check_store_locks

    check_store_locks(path)
    try:
        folder = side_folder(Path(path) / "_locks")
        handle = open(folder / "grid.lock", "a+")  # noqa: SIM115 - closed below
    except OSError as exc:
        raise store_write_error(exc, path, "lock the store to grow its grid") from None
    with handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)
