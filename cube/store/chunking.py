"""How reward and cost are chunked, and which of their chunks a store holds.

Stores written since issue 37 keep each run's reward (and cost) in one shard file ``(1, 1, 1, 1, I, E, M)``
(one run per file, so writers of different runs never touch the same file) made of inner chunks
``(1, 1, 1, 1, INNER_ITERATES, E, 1)``: the modes apart and the iterates in blocks. Zarr writes no inner chunk
that is all fill (NaN), so the evaluation modes, recorded at the final iterate only, cost one inner chunk per
run instead of a whole iterate x episode block of NaN filler. Each inner chunk is zstd-compressed and carries
its CRC-32C; the shard's index (its last bytes) carries its own. Older stores (one plain chunk per run, all
modes in it) read as they are; `saferl migrate` rewrites one into this layout.

`stored_blocks` reads the shard indexes of a store in this layout: which (run, iterate block, mode) inner
chunks exist, so the statistics pass skips the absent ones (no episodes: what NaN filler gives).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np

INNER_ITERATES = 16
"""Iterates per inner chunk of a new store (bench/pass_floor.py: see docs/performance.md)."""

_ABSENT = np.uint64(2**64 - 1)


def episode_chunking(n_iterates: int, n_episodes: int, n_modes: int, chunk_iterates: int | None = None,
                     chunk_episodes: int | None = None) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """(shard shape, inner chunk shape) of reward/cost for a new store: a shard spans one run and
    `chunk_iterates` iterates (default all, rounded up to whole inner chunks), `chunk_episodes` slots (default
    all) and every mode; an inner chunk spans min(INNER_ITERATES, shard iterates) iterates of one mode."""
    iterates = int(chunk_iterates or n_iterates)
    inner = min(INNER_ITERATES, iterates)
    shard_iterates = -(-iterates // inner) * inner
    episodes = int(chunk_episodes or n_episodes)
    return (1, 1, 1, 1, shard_iterates, episodes, n_modes), (1, 1, 1, 1, inner, episodes, 1)


_FAST_CODECS = ([{"name": "bytes", "configuration": {"endian": "little"}}, {"name": "zstd"}, {"name": "crc32c"}],
                [{"name": "bytes", "configuration": {"endian": "little"}}, {"name": "crc32c"}])


def layout_of(meta: Any) -> dict[str, Any] | None:
    """The sharded layout of an array's zarr metadata: {"shard": shape, "inner": shape} when the array is
    stored as this module lays it out (one shard per run, an index at the end, inner chunks of one mode);
    None for any other layout (an older store: one plain chunk per run)."""
    from zarr.codecs import ShardingCodec

    codecs = list(getattr(meta, "codecs", ()) or ())
    if len(codecs) != 1 or not isinstance(codecs[0], ShardingCodec):
        return None
    codec = codecs[0]
    shard = tuple(int(n) for n in meta.chunk_grid.chunk_shape)
    inner = tuple(int(n) for n in codec.chunk_shape)
    location = getattr(codec.index_location, "value", codec.index_location)
    if shard[:4] != (1, 1, 1, 1) or inner[4 + 2] != 1 or location != "end" or len(shard) != 7:
        return None
    encoding = meta.to_dict().get("chunk_key_encoding") or {}
    separator = (encoding.get("configuration") or {}).get("separator", "/")
    config = meta.to_dict()["codecs"][0]["configuration"]
    inner_names = [{k: v for k, v in c.items() if c["name"] != "zstd" or k == "name"} for c in config["codecs"]]
    dtype = meta.to_dict()["data_type"]
    fast = ((list(inner_names), list(config["index_codecs"])) == _FAST_CODECS and dtype == "float32"
            and encoding.get("name") == "default" and separator in ("/", "."))
    return {"shard": shard, "inner": inner, "fast": fast, "separator": separator}


def chunks_per_shard(layout: Mapping[str, Any]) -> tuple[int, int, int]:
    """(iterate blocks, episode blocks, modes) of inner chunks in one shard."""
    shard, inner = layout["shard"], layout["inner"]
    return shard[4] // inner[4], shard[5] // inner[5], shard[6] // inner[6]


def read_shard_presence(path: Path, per_shard: tuple[int, int, int]) -> np.ndarray | None:
    """Which inner chunks of one shard file exist: bool (iterate blocks, episode blocks, modes); all False
    for an absent file; None when its index does not read (a damaged file: let zarr's read say so)."""
    n = int(np.prod(per_shard))
    try:
        with open(path, "rb") as fh:
            size = os.fstat(fh.fileno()).st_size
            if size < n * 16 + 4:
                return None
            fh.seek(size - n * 16 - 4)
            raw = fh.read(n * 16)
    except FileNotFoundError:
        return np.zeros(per_shard, dtype=bool)
    offsets = np.frombuffer(raw, dtype="<u8").reshape(n, 2)[:, 0]
    return (offsets != _ABSENT).reshape(per_shard)


def stored_blocks(path: Path, names: tuple[str, ...], meta: Mapping[str, Any], run_shape: tuple[int, ...],
                  n_iterates: int, encode: Mapping[str, Any], threads: int = 2) -> np.ndarray | None:
    """Which (run, iterate block, mode) inner chunks hold episodes in any of the arrays `names`: bool
    (A, T, B, S, iterate blocks over `n_iterates`, M), from the shards' indexes; None when one does not read
    (the pass then reads everything through zarr, which reports the damage). `meta`: name -> layout
    (`layout_of`), `encode`: name -> the array's chunk-key encoder."""
    layout = meta[names[0]]
    per = chunks_per_shard(layout)
    if per[1] != 1 or any((meta[n]["shard"], meta[n]["inner"]) != (layout["shard"], layout["inner"]) for n in names):
        return None
    shard_it = layout["shard"][4]
    n_shards = -(-n_iterates // shard_it)
    blocks = -(-n_iterates // layout["inner"][4])
    out = np.zeros((*run_shape, n_shards * per[0], per[2]), dtype=bool)
    jobs = [(name, run, s) for name in names for run in np.ndindex(*run_shape) for s in range(n_shards)]

    def one(job: tuple[str, tuple[int, ...], int]) -> np.ndarray | None:
        name, run, s = job
        return read_shard_presence(path / name / encode[name]((*run, s, 0, 0)), per)

    with ThreadPoolExecutor(threads) as pool:
        for (_, run, s), got in zip(jobs, pool.map(one, jobs), strict=True):
            if got is None:
                return None
            out[(*run, slice(s * per[0], (s + 1) * per[0]))] |= got[:, 0, :]
    return out[..., :blocks, :]


def sharded_layouts(path: Path, sizes: Mapping[str, int]) -> dict[str, dict[str, Any]] | None:
    """{"reward"/"cost": layout} of a local store whose episodes `shard_blocks` reads (this module's sharded
    layout and codec chain, the same for both, episode slots of the grid `sizes` in one shard); None
    otherwise (an older layout: read through zarr)."""
    import zarr

    try:
        group = zarr.open_group(str(path), mode="r")
        layouts = {name: layout_of(group[name].metadata) for name in ("reward", "cost")}
    except Exception:  # noqa: BLE001 - not a readable v3 store: the pass's own read reports it
        return None
    first = layouts["reward"]
    if any(lay is None or not lay["fast"] for lay in layouts.values()) or layouts["cost"] != first:
        return None
    if first["shard"][5] < int(sizes["episode"]) or first["shard"][6] != int(sizes["mode"]):
        return None  # episode slots over several shards (a grown recorder store)
    return layouts  # type: ignore[return-value]


def read_shard(path: Path, layout: Mapping[str, Any]) -> dict[tuple[int, int], np.ndarray] | None:
    """The inner chunks of one shard file that exist, decoded: {(iterate block, mode): float32 (I, E)}, {} for
    an absent file. Read in one go, every CRC-32C checked and every chunk zstd-decoded by the libraries zarr
    itself calls, with no zarr in between; None for a shard this reader does not take (another codec chain,
    several episode blocks, a damaged file: a CRC mismatch, a bad index or a bad stream), which the caller
    then reads through zarr (which reports the damage)."""
    import google_crc32c
    from numcodecs.zstd import Zstd

    per = chunks_per_shard(layout)
    if not layout.get("fast") or per[1] != 1:
        return None
    n = per[0] * per[2]
    try:
        with open(path, "rb") as fh:
            data = fh.read()
    except FileNotFoundError:
        return {}
    if len(data) < n * 16 + 4:
        return None
    view = np.frombuffer(data, dtype=np.uint8)  # slices without copies, as zarr's codecs take them
    index_bytes = view[len(data) - n * 16 - 4: len(data) - 4]
    if google_crc32c.value(index_bytes).to_bytes(4, "little") != data[len(data) - 4:]:
        return None
    index = np.frombuffer(index_bytes, dtype="<u8").reshape(per[0], per[2], 2)
    shape = (layout["inner"][4], layout["inner"][5])
    zstd, out = Zstd(), {}
    for k, m in zip(*np.nonzero(index[..., 0] != _ABSENT), strict=True):
        start, size = int(index[k, m, 0]), int(index[k, m, 1])
        if size < 4 or start + size > len(data) - n * 16 - 4:
            return None
        payload = view[start: start + size - 4]
        if google_crc32c.value(payload).to_bytes(4, "little") != data[start + size - 4: start + size]:
            return None
        try:
            values = np.frombuffer(zstd.decode(payload), dtype="<f4")
        except Exception:  # noqa: BLE001 - a bad stream: zarr's read reports it
            return None
        if values.size != shape[0] * shape[1]:
            return None
        out[int(k), int(m)] = values.reshape(shape)
    return out


def shard_file(path: Path, name: str, layout: Mapping[str, Any], index: tuple[int, ...]) -> Path:
    """The file of the shard at `index` (shard grid positions) of array `name` (default chunk-key encoding)."""
    sep = layout["separator"]
    return path / name / ("c" + sep + sep.join(str(int(i)) for i in index))


def shard_blocks(path: Path, layouts: Mapping[str, Mapping[str, Any]], runs: list[tuple[int, ...]],
                 n_iterates: int, n_episodes: int) -> dict[int, tuple[int, dict[str, np.ndarray]]]:
    """The episodes of `runs` (run positions) mode by mode, over the iterates from the first to the last
    inner chunk that some run holds in that mode: {mode: (first iterate, {"reward"/"cost": float32
    (len(runs), iterates, n_episodes)})}, NaN where a run holds no chunk; modes no run holds are left out.
    Shards this module cannot read (`read_shard` None: damage, another codec chain) are read through zarr,
    which raises for damage."""
    lay = layouts["reward"]
    per, inner, shard_it = chunks_per_shard(lay), lay["inner"][4], lay["shard"][4]
    n_shards = -(-n_iterates // shard_it)
    decoded = {name: [_run_chunks(path, name, layouts[name], run, n_shards, per) for run in runs]
               for name in ("reward", "cost")}
    spans: dict[int, list[int]] = {}
    for name in decoded:
        for got in decoded[name]:
            for k, m in got:
                if k * inner < n_iterates:
                    spans.setdefault(m, []).append(k)
    out = {}
    for m, ks in sorted(spans.items()):
        j0, j1 = min(ks) * inner, min((max(ks) + 1) * inner, n_iterates)
        arrays = {}
        for name in ("reward", "cost"):
            block = np.full((len(runs), j1 - j0, n_episodes), np.nan, dtype=np.float32)
            for i, got in enumerate(decoded[name]):
                for (k, mode), values in got.items():
                    start, stop = k * inner, min(k * inner + inner, j1)
                    if mode == m and j0 <= start < j1:
                        block[i, start - j0: stop - j0] = values[: stop - start, :n_episodes]
            arrays[name] = block
        out[m] = (j0, arrays)
    return out


def _run_chunks(path: Path, name: str, layout: Mapping[str, Any], run: tuple[int, ...], n_shards: int,
                per: tuple[int, int, int]) -> dict[tuple[int, int], np.ndarray]:
    """{(iterate block over the whole run, mode): (I, E)} of one run's shards along iterates."""
    out: dict[tuple[int, int], np.ndarray] = {}
    for s in range(n_shards):
        got = read_shard(shard_file(path, name, layout, (*run, s, 0, 0)), layout)
        if got is None:
            return _through_zarr(path, name, layout, run)
        out.update({(s * per[0] + k, m): v for (k, m), v in got.items()})
    return out


def _through_zarr(path: Path, name: str, layout: Mapping[str, Any], run: tuple[int, ...]
                  ) -> dict[tuple[int, int], np.ndarray]:
    """A run's blocks read through zarr (every block, filler included): zarr raises for a damaged shard."""
    import zarr

    values = zarr.open_array(str(path / name), mode="r")[run]  # (J, E, M)
    inner = layout["inner"][4]
    out = {}
    for k in range(-(-values.shape[0] // inner)):
        for m in range(values.shape[2]):
            block = np.full((inner, values.shape[1]), np.nan, dtype=np.float32)
            part = values[k * inner: (k + 1) * inner, :, m]
            block[: part.shape[0]] = part
            out[k, m] = block
    return out
