"""Reading a published snapshot at a URL with few round trips: a zarr store wrapper that keeps small objects once
read, and prefetches (concurrently, in one batch) what a reader is about to read.

A snapshot never changes (`saferl publish`), so what was read once stays true: metadata, coordinates and the
one-chunk per-run arrays are kept in memory (`SMALL_OBJECT_BYTES`), and fetched in one concurrent batch on open
(`prefetch_small`). A statistics pass over the episode arrays starts, with `prefetch_chunks`, every chunk
request at once (`PREFETCH_CONCURRENCY` in flight): at 100 ms a round trip, a thousand chunks arrive in about a
second while the pass computes, instead of each dask task waiting for its own. A prefetched chunk is handed to
the first read of it and then dropped (the pass reads each chunk once), so memory holds only the chunks
fetched and not yet read; a cube whose episode arrays are larger than `PREFETCH_BYTES` is not prefetched.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from typing import Any

SMALL_OBJECT_BYTES = 1 << 20
"""Objects of a remote snapshot up to this size are kept in memory once read (metadata, coordinates, the
one-chunk per-run arrays): a snapshot never changes, and each later open or read of them costs no request."""

PREFETCH_BYTES = 2 << 30
"""Largest uncompressed size of the arrays a pass prefetches (the chunks in memory are at most their compressed
size: a few hundred MB); a larger cube is read as the pass goes, its tasks' requests concurrent."""

PREFETCH_CONCURRENCY = 96
"""Chunk requests of a prefetch in flight at once (below aiohttp's 100 connections a session)."""

KEPT: dict[tuple[str, str], bytes] = {}
"""Small objects of snapshots read so far, by (URL, key)."""

PENDING: dict[tuple[str, str], Any] = {}
"""Prefetched chunks not read yet, by (URL, key): asyncio tasks on zarr's event loop giving bytes, None (no such
chunk: the fill value) or the exception the request raised (the reader then asks again, and reports it)."""


def kept_object(url: str, key: str, data: bytes) -> None:
    """Keep `data` as the object `key` of the snapshot at `url` (read by other means, e.g. the root metadata)."""
    KEPT[(url, key)] = data


def chunk_keys(meta: dict[str, Any]) -> list[tuple[tuple[int, ...], str]]:
    """Every chunk of the array whose zarr.json is `meta`: (chunk coordinates, key below the array)."""
    shape = meta["shape"]
    chunks = meta["chunk_grid"]["configuration"]["chunk_shape"]
    encoding = meta.get("chunk_key_encoding") or {"name": "default"}
    sep = (encoding.get("configuration") or {}).get("separator", "/" if encoding["name"] == "default" else ".")
    counts = [-(-int(n) // int(c)) for n, c in zip(shape, chunks, strict=True)]
    out = []
    for coords in itertools.product(*(range(n) for n in counts)):
        text = sep.join(map(str, coords)) if coords else "0"
        out.append((coords, f"c{sep}{text}" if encoding["name"] == "default" else text))
    return out


def _snapshot_store_class() -> type:
    from zarr.storage import WrapperStore

    class Snapshot(WrapperStore):
        """A remote snapshot's store: small objects kept once read, prefetched chunks handed over."""

        def __init__(self, store: Any, url: str) -> None:
            super().__init__(store)
            self.url = url

        def _with_store(self, store: Any) -> Any:
            return type(self)(store, self.url)

        def __reduce__(self) -> tuple[Any, ...]:  # dask ships the store to its workers
            return (SnapshotStore, (self._store, self.url))

        async def get(self, key: str, prototype: Any, byte_range: Any = None) -> Any:
            if byte_range is None:
                if (self.url, key) in KEPT:
                    return prototype.buffer.from_bytes(KEPT[(self.url, key)])
                pending = PENDING.pop((self.url, key), None)
                if pending is not None:
                    data = await pending
                    if not isinstance(data, BaseException):
                        return None if data is None else prototype.buffer.from_bytes(data)
            buf = await self._store.get(key, prototype, byte_range)
            if buf is not None and byte_range is None and len(buf) <= SMALL_OBJECT_BYTES:
                KEPT[(self.url, key)] = buf.to_bytes()
            return buf

    return Snapshot


_SNAPSHOT_CLASS: list[type] = []


def SnapshotStore(store: Any, url: str) -> Any:  # noqa: N802 - a class made on first use (zarr imported late)
    """`store` (an FsspecStore of the snapshot at `url`) keeping its small objects once read."""
    if not _SNAPSHOT_CLASS:
        _SNAPSHOT_CLASS.append(_snapshot_store_class())
    return _SNAPSHOT_CLASS[0](store, url)


def _array_metas(meta: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return (meta.get("consolidated_metadata") or {}).get("metadata") or {}


def prefetch_small(url: str, store: Any, meta: dict[str, Any]) -> None:
    """Read, concurrently in one batch, every one-chunk array of the snapshot (coordinates, per-run arrays
    written whole by `saferl publish`) named in its consolidated root metadata `meta`: opening it then costs
    one round trip for them all instead of one per array."""
    import asyncio  # with zarr, here: `saferl --help` loads neither

    from zarr.core.buffer import default_buffer_prototype
    from zarr.core.sync import sync

    keys = []
    for name, array in _array_metas(meta).items():
        try:
            shape, chunks = array["shape"], array["chunk_grid"]["configuration"]["chunk_shape"]
            one = all(int(c) >= int(n) for n, c in zip(shape, chunks, strict=True))
            default = (array.get("chunk_key_encoding") or {}).get("name") == "default"
        except (KeyError, TypeError, ValueError):
            continue
        key = f"{name}/" + "/".join(["c", *["0"] * len(shape)])
        if one and default and (url, key) not in KEPT:
            keys.append(key)

    async def fetch() -> None:  # inside zarr's event loop, where the store's session lives
        prototype = default_buffer_prototype()
        await asyncio.gather(*(store.get(key, prototype) for key in keys), return_exceptions=True)

    if keys:
        sync(fetch())


def prefetch_chunks(url: str, store: Any, meta: dict[str, Any], names: Sequence[str]) -> int:
    """Start fetching, through the plain fsspec `store`, every chunk of the arrays `names` of the snapshot at
    `url` (its consolidated root metadata `meta`), `PREFETCH_CONCURRENCY` at a time, in the background on zarr's
    event loop; the reads of a pass then find them fetched or in flight. Returns how many were started (0: no
    consolidated metadata, or more than `PREFETCH_BYTES`)."""
    import asyncio

    import numpy as np
    from zarr.core.buffer import default_buffer_prototype
    from zarr.core.sync import sync

    metas = _array_metas(meta)
    keys: list[str] = []
    raw = 0
    for name in names:
        array = metas.get(name)
        if array is None:
            continue
        try:
            raw += math.prod(int(n) for n in array["shape"]) * np.dtype(array["data_type"]).itemsize
            keys += [f"{name}/{key}" for _, key in chunk_keys(array)]
        except (KeyError, TypeError, ValueError):
            return 0
    keys = [key for key in keys if (url, key) not in PENDING and (url, key) not in KEPT]
    if not keys or raw > PREFETCH_BYTES:
        return 0

    async def start() -> None:  # creates the tasks on zarr's loop and returns: they run on after it
        limit = asyncio.Semaphore(PREFETCH_CONCURRENCY)
        prototype = default_buffer_prototype()

        async def one(key: str) -> bytes | None | BaseException:
            async with limit:
                try:
                    buf = await store.get(key, prototype)
                except Exception as exc:  # noqa: BLE001 - handed to the reader, which asks again
                    return exc
                return None if buf is None else buf.to_bytes()

        for key in keys:
            PENDING[(url, key)] = asyncio.ensure_future(one(key))

    sync(start())
    return len(keys)
