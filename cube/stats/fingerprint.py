"""Fingerprints of a store's chunk files, the key of its statistics cache (`cube.stats.cache`): per run, a hash
of the stat keys of its reward and cost chunk files (`RunChunks`), the tail of those changed lately too
(`_stat_key` says why that is enough); for stores not chunked one run per chunk, one hash of every file."""

from __future__ import annotations

import hashlib
import json
import os
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from cube.schema import RUN_DIMS
from cube.store.chunking import Observed, layout_of_document
from cube.store.grid import Sizes
from cube.store.locks import read_write_seqs

if TYPE_CHECKING:  # in type hints only
    import xarray as xr

UNKNOWN_FP = np.uint64(0)
"""The fingerprint of a run whose cached statistics are of no known data (never equal to a real one but
with odds of 2^-64): written for a run that changed while its statistics were computed."""


SETTLE_NS = 2_000_000_000
"""How long after its last change (its ctime) a chunk file counts as settled: longer than any file system's
time stamp step (a coarse clock tick on ext4/xfs, 1-2 s on old or network file systems)."""


def settled_cutoff() -> int:
    """The ctime (ns) before which a chunk file counts as settled for fingerprints taken from now on: now less
    SETTLE_NS; -1 where st_ctime is not the time of the last change (Windows: its creation time), so every
    file is read there."""
    return time.time_ns() - SETTLE_NS if os.name == "posix" else -1


def _tail(path: str) -> bytes:
    """The last 8 bytes of a file: its CRC-32C (stores written with checksums) or the end of its stream."""
    try:
        with open(path, "rb") as f:
            f.seek(max(os.fstat(f.fileno()).st_size - 8, 0))
            return f.read(8)
    except FileNotFoundError:
        return b"-"


def _stat_key(path: str | Path, settled: int = -1) -> bytes:
    """What a chunk file's fingerprint keeps of it: inode, size, mtime and ctime, and its tail (`_tail`) when it
    changed at or after `settled` (ns, `settled_cutoff`); b"-" when there is none.

    Why the stat alone is enough for a settled file (git's "racy" entries, the same way): every change of a file
    (a write, a rename into its place, a `touch -r`) sets its ctime to the time of the change, which no user
    call sets back, and the cutoff lies SETTLE_NS (more than a time stamp's step) before the fingerprint was
    taken; so a change after that moment gives a ctime later than the cutoff, never the old one, and a file
    whose key shows a ctime before the cutoff is unchanged while its key is. A file changed later than the
    cutoff may change again within one time stamp step keeping size, times and (written in place) inode:
    its tail (the chunk's checksum) is kept too, as every file's was before."""
    try:
        st = os.stat(path)
    except (FileNotFoundError, NotADirectoryError):
        return b"-"
    return _key_of(st, settled, lambda: _tail(str(path)))


def _key_of(st: os.stat_result, settled: int, tail: Callable[[], bytes]) -> bytes:
    """`_stat_key` of a file whose stat is `st`; `tail()` gives its last 8 bytes, asked only when it is needed."""
    key = f"{st.st_ino}:{st.st_size}:{st.st_mtime_ns}:{st.st_ctime_ns}".encode()
    return key if st.st_ctime_ns < settled else key + b"+" + tail()


class RunChunks:
    """Where a store keeps each run's reward and cost: one chunk file per run and array (stores before issue 37),
    or a chunk file per mode and block of iterates (`cube.store.chunking`; absent ones count as absent),
    located through the two arrays' metadata documents (their chunk grid and chunk-key encoding, as zarr reads
    them). The one place the cache looks at a store's chunk files (to fingerprint them); `run_chunks` makes one
    where every chunk holds one run."""

    def __init__(self, path: Path, keys: Mapping[str, Callable[[tuple[int, ...]], str]],
                 blocks: tuple[int, int] = (1, 1)) -> None:
        self.path, self.keys, self.blocks = Path(path), dict(keys), blocks
        within = [(k, 0, m) for k in range(blocks[0]) for m in range(blocks[1])]  # a run's chunks: (k, 0, m)
        self._names: dict[str, tuple[str, list[str]] | None] = {}  # name -> (folder + "c" + sep, [sep + k/0/m])
        for name, encode in self.keys.items():
            sep = _plain_separator(encode)
            self._names[name] = None if sep is None else (
                os.path.join(str(self.path), name, "c" + sep), [sep + sep.join(map(str, c)) for c in within])

    def files(self, index: tuple[int, ...]) -> list[Path]:
        """Every reward and cost chunk file the run at `index` (positions along the run dims) may have."""
        return [Path(f) for f in self._file_names(index)]

    def _file_names(self, index: tuple[int, ...]) -> list[str]:
        out = []
        for name in ("reward", "cost"):
            plain = self._names[name]
            if plain is None:  # another chunk-key encoding: zarr's own, chunk by chunk
                out += [os.path.join(str(self.path), name, self.keys[name]((*map(int, index), k, 0, m)))
                        for k in range(self.blocks[0]) for m in range(self.blocks[1])]
            else:  # zarr's default encoding, built here (one string per file)
                run = plain[0] + plain[0][-1].join(map(str, map(int, index)))
                out += [run + tail for tail in plain[1]]
        return out

    def fingerprint(self, index: tuple[int, ...], settled: int = -1) -> np.uint64:
        """The run's fingerprint: a hash of the `_stat_key` of every chunk file it may have (absent ones as
        absent), read whole (tail included) where a file changed at or after `settled` (`settled_cutoff`: the
        fingerprints kept beside statistics are taken with a cutoff before the moment they are taken)."""
        keys = [_stat_key(f, settled) for f in self._file_names(index)]
        return _hash_keys(keys)

    def observed_fingerprint(self, index: tuple[int, ...], settled: int, observed: Observed) -> np.uint64:
        """`fingerprint` of the run at `index` from what a pass saw while it read the run (`observed`: the
        folders it listed, the stat and tail of each file it opened, taken before the read), so the same hash
        as `fingerprint` taken at that moment; a file in no folder the pass listed is looked at now."""
        keys = []
        for f in self._file_names(index):
            folder, _, entry = f.rpartition("/")
            listing = observed.listings.get(folder)
            if listing is not None and entry not in listing:
                keys.append(b"-")
            elif f in observed.files:
                seen = observed.files[f]
                keys.append(b"-" if seen is None else _key_of(seen[0], settled, lambda s=seen: s[1]))
            else:
                keys.append(_stat_key(f, settled))
        return _hash_keys(keys)

    def fingerprints(self, shape: tuple[int, ...], settled: int = -1) -> np.ndarray:
        """Every run's fingerprint, (algo, task, bound, seed) uint64: one stat call per chunk file (`fingerprint`)."""
        out = np.empty(shape, dtype=np.uint64)
        for idx in np.ndindex(*shape):
            out[idx] = self.fingerprint(idx, settled)
        return out


def _hash_keys(keys: list[bytes]) -> np.uint64:
    """A run's fingerprint from its files' keys, in file order (`RunChunks.fingerprint`)."""
    return np.uint64(int.from_bytes(hashlib.blake2b(b"|".join(keys), digest_size=8).digest(), "little"))


def _plain_separator(encode: Callable[[tuple[int, ...]], str]) -> str | None:
    """The separator of zarr's default chunk-key encoding ("c/1/2/3"), when `encode` is that; else None."""
    probe = (1, 23, 4, 5, 6, 7, 8)
    for sep in ("/", "."):
        if encode(probe) == "c" + sep + sep.join(map(str, probe)):
            return sep
    return None


def run_chunks(path: Path, sizes: Mapping[str, int] | None = None) -> RunChunks | None:
    """The store's `RunChunks` when reward and cost are stored one run per chunk (unsharded, dims in the cube's
    order, each chunk holding all iterates, episodes and modes of the grid `sizes` (dim -> length; None: not
    checked), or all episode slots of one mode (`cube.store.chunking`)); None otherwise, or when the arrays'
    metadata does not read. Read from their ``zarr.json`` documents (no zarr: a cached report loads none)."""
    keys, blocks = {}, (1, 1)
    try:
        for name in ("reward", "cost"):
            meta = json.loads((Path(path) / name / "zarr.json").read_bytes())
            if meta.get("zarr_format") != 3 or meta.get("node_type") != "array" or \
                    meta["chunk_grid"].get("name") != "regular":
                return None
            shape = [int(n) for n in meta["chunk_grid"]["configuration"]["chunk_shape"]]
            full = [int(n) for n in meta["shape"][4:]] if sizes is None else \
                [int(sizes[d]) for d in ("iterate", "episode", "mode")]
            if layout_of_document(meta) is not None and shape[5] == full[1]:  # a chunk per mode and iterate block
                blocks = (-(-int(meta["shape"][4]) // shape[4]), int(meta["shape"][6]))
            elif shape[4:] != (full if sizes is not None else shape[4:]):
                return None
            sharded = any(c.get("name") == "sharding_indexed" for c in meta["codecs"])
            if (shape[:4] != [1, 1, 1, 1] or sharded
                    or tuple(meta.get("dimension_names") or ()) != (*RUN_DIMS, "iterate", "episode", "mode")):
                return None
            keys[name] = chunk_key_encoder(meta["chunk_key_encoding"])
    except Exception:  # noqa: BLE001 - no v3 arrays there (a netCDF file, a foreign store): not one run per chunk
        return None
    return RunChunks(Path(path), keys, blocks)


def chunk_key_encoder(encoding: Mapping[str, Any]) -> Callable[[tuple[int, ...]], str]:
    """A chunk's key from its grid position, as zarr encodes it for a v3 `chunk_key_encoding` ("default": c/1/2,
    "v2": 1.2); ValueError for another encoding."""
    name, separator = encoding["name"], (encoding.get("configuration") or {}).get("separator")
    if name == "default":
        sep = separator or "/"
        return lambda index: sep.join(("c", *map(str, index)))
    if name == "v2":
        sep = separator or "."
        return lambda index: sep.join(map(str, index)) if index else "0"
    raise ValueError(f"chunk key encoding {name!r}")


def run_fingerprints(path: Path, ds: xr.Dataset, settled: int = -1) -> np.ndarray | None:
    """Per run (algo, task, bound, seed): uint64 hash of the stat keys of its reward and cost chunk files (tails
    of those changed at or after `settled`: `RunChunks.fingerprint`); None when the store is not chunked one
    run per chunk (then the whole store is hashed)."""
    chunks = run_chunks(path, dict(ds.sizes))
    return None if chunks is None else chunks.fingerprints(tuple(ds.sizes[d] for d in RUN_DIMS), settled)


def fingerprint_cutoff(attrs: Mapping[str, object] | None) -> int:
    """The `settled` cutoff to take run fingerprints with against a cache whose attributes are `attrs` (None:
    no cache): the one its fingerprints were taken with (its `settled` attribute), so those of unchanged runs
    match, or now's (`settled_cutoff`) where it keeps none; never later than now's (a clock set back)."""
    now = settled_cutoff()
    try:
        return min(int(str((attrs or {})["settled"])), now)
    except (KeyError, ValueError):
        return now


def store_fingerprint(path: Path) -> str:
    """Hash of the names, sizes and mtimes of every file of the reward and cost arrays."""
    h = hashlib.sha256()
    for name in ("reward", "cost"):
        _hash_files(h, path, name)
    return h.hexdigest()[:32]


def files_fingerprint(path: Path, name: str) -> str:
    """Hash of the relative names, stat keys and tails of every file of the array `name` (`_stat_key`)."""
    h = hashlib.sha256()
    _hash_files(h, path, name)
    return h.hexdigest()[:32]


def _hash_files(h, path: Path, name: str) -> None:
    """Feed the relative names, sizes and mtimes of the files below path/name into the hash h."""
    for root, _dirs, files in sorted(os.walk(path / name)):
        for f in sorted(files):
            full = os.path.join(root, f)
            h.update(f"{os.path.relpath(full, path)}:".encode() + _stat_key(Path(full)) + b";")


def fingerprints_now(chunks: RunChunks, shape: tuple[int, ...], after: np.ndarray, sizes: Sizes, runs: np.ndarray,
                     fps: list, settled: int) -> np.ndarray:
    """Every run's fingerprint (`shape`: the run dims) for a cache write of statistics at write sequences `after`
    (all with the cutoff `settled`): those of `runs` as taken before they were read (`fps`); the others now,
    where their sequence still is `after` and even (so the statistics hold their data now), else UNKNOWN_FP."""
    out = chunks.fingerprints(shape, settled)
    still = read_write_seqs(chunks.path, sizes)
    if still is None or still.shape != after.shape:
        out[...] = UNKNOWN_FP
    else:
        out[(still != after) | (after % 2 == 1)] = UNKNOWN_FP
    for idx, fp in zip(map(tuple, runs), fps, strict=True):
        out[idx] = fp
    return out
