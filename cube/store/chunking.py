"""How reward and cost are chunked, and reading the chunks a store holds.

Stores written since issue 37 keep reward and cost in chunks ``(1, 1, 1, 1, BLOCK_ITERATES, E, 1)``: one run,
one mode and a block of iterates each (so writers of different runs never touch the same chunk file). Zarr
writes no chunk that is all fill (NaN), so the evaluation modes, recorded at the final iterate only, cost one
chunk per run instead of a whole iterate x episode block of NaN filler. Every chunk is zstd-compressed and
carries its CRC-32C, and is written whole by a rename (zarr's local store), so a reader never sees half of
one. Older stores (one chunk per run, every mode in it) read as they are; `saferl migrate` rewrites one.

`run_blocks` reads the chunks of some runs straight from their files (one read, CRC check and zstd decode
each, the libraries zarr itself calls), skipping the absent ones: the statistics pass then never decodes or
computes NaN filler.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

BLOCK_ITERATES = 16
"""Iterates per chunk of a new store (bench/pass_floor.py: see docs/performance.md)."""

_FAST_CODECS = [{"name": "bytes", "configuration": {"endian": "little"}}, {"name": "zstd"}, {"name": "crc32c"}]


def episode_chunking(n_iterates: int, n_episodes: int, chunk_iterates: int | None = None,
                     chunk_episodes: int | None = None) -> tuple[int, ...]:
    """The chunk shape of reward/cost in a new store: one run, one mode, min(BLOCK_ITERATES, `chunk_iterates`
    (default all)) iterates and `chunk_episodes` slots (default all)."""
    iterates = min(BLOCK_ITERATES, int(chunk_iterates or n_iterates))
    return (1, 1, 1, 1, iterates, int(chunk_episodes or n_episodes), 1)


def layout_of(meta: Any) -> dict[str, Any] | None:
    """The layout of an array's zarr metadata: {"chunk": shape, "fast": whether `read_chunk` reads its chunks,
    "separator": of its chunk keys} when the array is chunked as this module lays it out (one run and one
    mode per chunk, unsharded); None for any other layout (an older store: every mode in a chunk)."""
    shape = tuple(int(n) for n in meta.chunk_grid.chunk_shape)
    described = meta.to_dict()
    names = [c["name"] for c in described["codecs"]]
    if len(shape) != 7 or shape[:4] != (1, 1, 1, 1) or shape[6] != 1 or "sharding_indexed" in names:
        return None
    encoding = described.get("chunk_key_encoding") or {}
    separator = (encoding.get("configuration") or {}).get("separator", "/")
    chain = [{k: v for k, v in c.items() if c["name"] != "zstd" or k == "name"} for c in described["codecs"]]
    fast = (chain == _FAST_CODECS and described["data_type"] == "float32" and encoding.get("name") == "default"
            and separator == "/")
    return {"chunk": shape, "fast": fast, "separator": separator}


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


def read_chunk(file: str | Path, shape: tuple[int, int]) -> np.ndarray | None:
    """One chunk file read whole, its CRC-32C checked and zstd-decoded: float32 `shape` (iterates, episodes);
    an empty (0, 0) array for an absent file; None for a damaged one (zarr's own read then reports it)."""
    import google_crc32c
    from numcodecs.zstd import Zstd

    try:
        with open(file, "rb") as fh:
            data = fh.read()
    except FileNotFoundError:
        return np.empty((0, 0), dtype=np.float32)
    raw = np.frombuffer(data, dtype=np.uint8)
    if raw.size < 4 or google_crc32c.value(raw[:-4]).to_bytes(4, "little") != data[-4:]:
        return None
    try:
        values = np.frombuffer(Zstd().decode(raw[:-4]), dtype="<f4")
    except Exception:  # noqa: BLE001 - a bad stream: zarr's read reports it
        return None
    return values.reshape(shape) if values.size == shape[0] * shape[1] else None


def run_blocks(path: Path, layouts: Mapping[str, Mapping[str, Any]], runs: list[tuple[int, ...]],
               sizes: Mapping[str, int]) -> dict[int, tuple[int, dict[str, np.ndarray]]]:
    """The episodes of `runs` (run positions) mode by mode, over the iterates from the first to the last chunk
    that some run holds in that mode: {mode: (first iterate, {"reward"/"cost": float32 (len(runs), iterates,
    episodes)})}, NaN where a run holds no chunk; modes no run holds are left out. A chunk that does not read
    is read through zarr, which raises for damage."""
    n_it, n_ep, n_modes = int(sizes["iterate"]), int(sizes["episode"]), int(sizes["mode"])
    block = layouts["reward"]["chunk"][4]
    shape = (block, layouts["reward"]["chunk"][5])
    got: dict[tuple[int, int, int], dict[str, np.ndarray]] = {}  # (run i, k, m) -> name -> (I, E)
    for i, run in enumerate(runs):
        for name in ("reward", "cost"):
            for k in range(-(-n_it // block)):
                folder = os.path.join(path, name, "c", *map(str, run), str(k), "0")  # keys c/a/t/b/s/k/0/m
                try:
                    held = os.listdir(folder)  # one listing finds the modes stored: no open of absent files
                except FileNotFoundError:
                    continue
                for m in range(n_modes):
                    if str(m) not in held:
                        continue
                    values = read_chunk(os.path.join(folder, str(m)), shape)
                    if values is None:
                        values = _through_zarr(path, name, (*run, slice(k * block, (k + 1) * block),
                                                            slice(0, shape[1]), m), shape)
                    if values.size:
                        got.setdefault((i, k, m), {})[name] = values
    out = {}
    for m in sorted({m for _, _, m in got}):
        ks = [k for _, k, mode in got if mode == m]
        j0, j1 = min(ks) * block, min((max(ks) + 1) * block, n_it)
        arrays = {name: np.full((len(runs), j1 - j0, n_ep), np.nan, dtype=np.float32) for name in ("reward", "cost")}
        for (i, k, mode), chunks in got.items():
            if mode == m:
                start, stop = k * block, min(k * block + block, j1)
                for name, values in chunks.items():
                    arrays[name][i, start - j0: stop - j0] = values[: stop - start, :n_ep]
        out[m] = (j0, arrays)
    return out


def _through_zarr(path: Path, name: str, where: tuple, shape: tuple[int, int]) -> np.ndarray:
    """A chunk's values read through zarr (raises for a damaged chunk), padded to the chunk's `shape`."""
    import zarr

    part = zarr.open_array(str(path / name), mode="r")[where]
    out = np.full(shape, np.nan, dtype=np.float32)
    out[: part.shape[0], : part.shape[1]] = part
    return out
