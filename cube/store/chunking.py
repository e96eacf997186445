"""How reward and cost are chunked, and reading the chunks a store holds.

Stores written since issue 37 keep reward and cost in chunks ``(1, 1, 1, 1, I, E, 1)``: one run, one mode
and a block of I iterates each (about `BLOCK_BYTES` decoded), so writers of different runs never touch the
same chunk file. Zarr writes no chunk that is all fill (NaN), so the evaluation modes, recorded at the final
iterate only, cost one chunk per run instead of a whole iterate x episode block of NaN filler. Every chunk is
compressed (byte-shuffled Blosc-LZ4; zstd in the first stores of this layout) and carries its CRC-32C, and is
written whole by a rename (zarr's local store), so a reader never sees half of one. Older stores (one chunk
per run, every mode in it) read as they are; `saferl migrate` rewrites one.

`run_blocks` reads the chunks of some runs straight from their files (one read, CRC check and decode each,
the libraries zarr itself calls, into reused buffers), skipping the absent ones: the statistics pass then
never decodes or computes NaN filler.
"""

from __future__ import annotations

import math
import os
import threading
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from cube.store.chunkfiles import BLOSC_HEADER, read_file_stat, read_into, verify_and_decode

BLOCK_BYTES = 128 * 2**10
"""Decoded bytes of reward (or cost) per chunk of a new store: as many iterates as fill it, at least one
(16 iterates at 2,048 episode slots; every iterate of a run at 100 slots and up to 327 iterates). Smaller
chunks cost more per byte to list, open and decode (bench/pass_floor.py: see docs/performance.md); larger
ones make each iterate's write rewrite more."""


_FAST_CHAINS = {codec: [{"name": "bytes", "configuration": {"endian": "little"}}, {"name": codec}, {"name": "crc32c"}]
                for codec in ("blosc", "zstd")}
"""The codec chains `read_chunk_into` decodes itself: Blosc (new stores) or zstd (the first stores of this
layout), each followed by the CRC-32C; the compressor's own settings are in its frame header."""


def episode_chunking(n_iterates: int, n_episodes: int, chunk_iterates: int | None = None,
                     chunk_episodes: int | None = None) -> tuple[int, ...]:
    """The chunk shape of reward/cost in a new store: one run, one mode, the iterates of BLOCK_BYTES (at most
    `chunk_iterates`, default all) and `chunk_episodes` slots (default all)."""
    episodes = int(chunk_episodes or n_episodes)
    fill = max(1, BLOCK_BYTES // (4 * max(episodes, 1)))
    iterates = max(1, min(fill, int(chunk_iterates or n_iterates)))
    return (1, 1, 1, 1, iterates, episodes, 1)


def layout_of(meta: Any) -> dict[str, Any] | None:
    """The layout of an array's zarr metadata: {"chunk": shape, "fast": whether `read_chunk_into` reads its
    chunks, "separator": of its chunk keys, "codec": "blosc", "zstd" (`_FAST_CHAINS`) or None} when the array
    is chunked as this module lays it out (one run and one mode per chunk, unsharded); None for any other
    layout (an older store: every mode in a chunk)."""
    return layout_of_document(meta.to_dict())


def layout_of_document(described: Mapping[str, Any]) -> dict[str, Any] | None:
    """`layout_of` of an array's metadata document (its ``zarr.json`` as JSON): read without zarr."""
    shape = tuple(int(n) for n in described["chunk_grid"]["configuration"]["chunk_shape"])
    names = [c["name"] for c in described["codecs"]]
    if len(shape) != 7 or shape[:4] != (1, 1, 1, 1) or shape[6] != 1 or "sharding_indexed" in names:
        return None
    encoding = described.get("chunk_key_encoding") or {}
    separator = (encoding.get("configuration") or {}).get("separator", "/")
    chain = [{k: v for k, v in c.items() if c["name"] not in _FAST_CHAINS or k == "name"} for c in described["codecs"]]
    codec = next((name for name, fast_chain in _FAST_CHAINS.items() if chain == fast_chain), None)
    fast = (codec is not None and described["data_type"] == "float32" and encoding.get("name") == "default"
            and separator == "/")
    return {"chunk": shape, "fast": fast, "separator": separator, "codec": codec}


def chunk_file(path: Path, name: str, layout: Mapping[str, Any], index: tuple[int, ...]) -> Path:
    """The file of the chunk at `index` (chunk grid positions) of array `name` (default chunk-key encoding)."""
    sep = layout["separator"]
    return path / name / ("c" + sep + sep.join(str(int(i)) for i in index))


def run_chunk_files(path: Path, name: str, layout: Mapping[str, Any], run: tuple[int, ...], n_iterates: int,
                    n_modes: int) -> list[Path]:
    """Every chunk file a run may have in array `name` over `n_iterates` iterates, present or not."""
    blocks = -(-n_iterates // layout["chunk"][4])
    return [chunk_file(path, name, layout, (*run, k, 0, m)) for k in range(blocks) for m in range(n_modes)]


def fast_layouts(path: Path, sizes: Mapping[str, int]) -> dict[str, dict[str, Any]] | None:
    """{"reward"/"cost": layout} of a local store whose chunks `run_blocks` reads (this module's layout and
    codec chain, the same for both, all episode slots of the grid `sizes` in one chunk); None otherwise (then
    everything is read through zarr)."""
    import zarr

    try:
        group = zarr.open_group(str(path), mode="r")
        layouts = {name: layout_of(group[name].metadata) for name in ("reward", "cost")}
    except Exception:  # noqa: BLE001 - not a readable v3 store: the pass's own read reports it
        return None
    first = layouts["reward"]
    if first is None or not first["fast"] or layouts["cost"] != first or first["chunk"][5] < int(sizes["episode"]):
        return None
    return layouts  # type: ignore[return-value]


class Scratch:
    """Reusable float32 buffers for `run_blocks`, one per key, grown as needed: a pass reads block after block
    into the same memory instead of asking the allocator (and the kernel, through page faults) for fresh
    tens of MiB per block. Not shared between threads."""

    def __init__(self) -> None:
        self._buffers: dict[Any, np.ndarray] = {}

    def take(self, key: Any, shape: tuple[int, ...], dtype: type = np.float32) -> np.ndarray:
        """A C-contiguous array of `shape` (float32 unless `dtype`), uninitialised, valid until the next `take`
        of `key` (a key keeps one dtype)."""
        size = math.prod(shape)  # not np.prod: called for every chunk file, where numpy's 3-5 us add up
        buffer = self._buffers.get(key)
        if buffer is None or buffer.size < size:
            buffer = self._buffers[key] = np.empty(size, dtype=dtype)
        return buffer[:size].reshape(shape)


class PerThread:
    """A `Scratch` for each thread of one pass (dask's workers), dropped with the pass."""

    def __init__(self) -> None:
        self._scratch: dict[int, Scratch] = {}

    def get(self) -> Scratch:
        """The calling thread's Scratch."""
        return self._scratch.setdefault(threading.get_ident(), Scratch())

    def __dask_tokenize__(self) -> tuple[str, int]:  # dask names tasks by their arguments: never by the buffers
        return ("PerThread", id(self))


class Observed:
    """What one pass saw of a store's chunk files, for fingerprints taken without a second look
    (`cube.stats.fingerprint.RunChunks.observed_fingerprint`): each folder listed (its entries; none where it
    did not exist) and each chunk file opened (its fstat before the read and its last 8 bytes; None where it
    had gone). Each thread of a pass fills its own."""

    def __init__(self) -> None:
        self.listings: dict[str, frozenset[str]] = {}
        self.files: dict[str, tuple[os.stat_result, bytes] | None] = {}


def read_chunk_into(file: str | Path, dest: np.ndarray, shape: tuple[int, int], spare: Scratch,
                    codec: str = "blosc", observed: Observed | None = None) -> bool | None:
    """One chunk file of `shape` (iterates, episodes) read whole, its CRC-32C checked and its payload decoded
    into `dest` (float32 (rows, columns) <= `shape`: the chunk's leading rows and columns): True when done,
    None for an absent file (`dest` untouched), False for a damaged one (zarr's own read then reports it).
    A `dest` of the chunk's whole shape is decoded into directly; anything else goes through `spare`. `codec`:
    the compressor of the chunk's chain ("blosc" or "zstd", `layout_of`). `observed`: where to note the file's
    stat and tail (or None: gone)."""
    path = str(file)
    fits = 4 * shape[0] * shape[1] + BLOSC_HEADER + FILE_SLACK  # the largest file of a chunk that compresses
    try:
        data, st = read_into(path, spare.take("file", (fits + 1,), np.uint8))
        if data is None:  # larger than any such chunk: read as it is (zarr's read then judges it)
            data, st = read_file_stat(path)
    except FileNotFoundError:
        if observed is not None:
            observed.files[path] = None
        return None
    if observed is not None:
        observed.files[path] = (st, bytes(data[-8:]))
    whole = dest.shape == shape and dest.flags.c_contiguous
    out = dest if whole else spare.take("chunk", shape)
    if not verify_and_decode(data, codec, out):
        return False
    if not whole:
        dest[...] = out[: dest.shape[0], : dest.shape[1]]
    return True


FILE_SLACK = 64
"""Bytes beyond a chunk's decoded size and Blosc's header that `read_chunk_into`'s read buffer holds (the
CRC-32C's 4 and room to spare): a file that fills it is read again the ordinary way."""

EPISODE_NAMES = ("reward", "cost")


def run_blocks(path: Path, layouts: Mapping[str, Mapping[str, Any]], runs: list[tuple[int, ...]],
               sizes: Mapping[str, int], scratch: Scratch | None = None, observed: Observed | None = None
               ) -> dict[int, tuple[int, dict[str, np.ndarray]]]:
    """The episodes of `runs` (run positions) mode by mode, over the iterates from the first to the last chunk
    that some run holds in that mode: {mode: (first iterate, {"reward"/"cost": float32 (len(runs), iterates,
    episodes)})}, NaN where a run holds no chunk; modes no run holds are left out. The arrays live in
    `scratch` (valid until its next use; a new Scratch when None). A chunk that does not read is read
    through zarr, which raises for damage. `observed`: where to note the folders listed and files read."""
    scratch = Scratch() if scratch is None else scratch
    n_it, n_ep, n_modes = int(sizes["iterate"]), int(sizes["episode"]), int(sizes["mode"])
    block = layouts["reward"]["chunk"][4]
    shape = (block, layouts["reward"]["chunk"][5])
    held: dict[int, list[tuple[int, str, int, str]]] = {}  # mode -> [(run i, name, block k, file)]
    modes = {str(m): m for m in range(n_modes)}
    for i, run in enumerate(runs):
        for name in EPISODE_NAMES:
            run_folder = f"{path}/{name}/c/{run[0]}/{run[1]}/{run[2]}/{run[3]}"  # keys c/a/t/b/s/k/0/m
            for k in range(-(-n_it // block)):
                folder = f"{run_folder}/{k}/0"
                try:
                    stored = os.listdir(folder)  # one listing finds the modes stored: no open of absent files
                except FileNotFoundError:
                    stored = []
                if observed is not None:
                    observed.listings[folder] = frozenset(stored)
                for entry in stored:
                    if entry in modes:
                        held.setdefault(modes[entry], []).append((i, name, k, f"{folder}/{entry}"))
    out = {}
    for m in sorted(held):
        k0, k1 = min(k for _, _, k, _ in held[m]), max(k for _, _, k, _ in held[m]) + 1
        j0, j1 = k0 * block, min(k1 * block, n_it)
        arrays = {name: scratch.take((name, m), (len(runs), j1 - j0, n_ep)) for name in EPISODE_NAMES}
        filled = np.zeros((len(runs), len(EPISODE_NAMES), k1 - k0), dtype=bool)
        for i, name, k, file in held[m]:
            start, stop = k * block, min(k * block + block, j1)
            dest = arrays[name][i, start - j0: stop - j0]
            got = read_chunk_into(file, dest, shape, scratch, layouts[name]["codec"], observed)
            if got is False:
                dest[...] = _through_zarr(path, name, (*runs[i], slice(start, start + block), slice(0, shape[1]), m),
                                          shape)[: stop - start, :n_ep]
            filled[i, EPISODE_NAMES.index(name), k - k0] = got is not None
        for i, v, k in zip(*np.nonzero(~filled), strict=True):
            start = (k0 + int(k)) * block - j0
            arrays[EPISODE_NAMES[v]][i, start: start + block] = np.nan
        out[m] = (j0, arrays)
    return out


def _through_zarr(path: Path, name: str, where: tuple, shape: tuple[int, int]) -> np.ndarray:
    """A chunk's values read through zarr (raises for a damaged chunk), padded to the chunk's `shape`."""
    import zarr

    part = zarr.open_array(str(path / name), mode="r")[where]
    out = np.full(shape, np.nan, dtype=np.float32)
    out[: part.shape[0], : part.shape[1]] = part
    return out
