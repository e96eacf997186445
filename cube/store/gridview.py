"""`GridView`: a local Zarr store seen cut to its published grid (`cube.store.grid`). Apart from the grid's
sizes so that reading the sizes, the write sequences or a cached report loads no zarr."""

from __future__ import annotations

import json
from collections.abc import AsyncGenerator, Iterable
from pathlib import Path
from typing import Any

from zarr.abc.store import ByteRequest
from zarr.core.buffer import Buffer, BufferPrototype
from zarr.storage import LocalStore, WrapperStore

from cube.store.fs import PathLike

Sizes = dict[str, int]  # as `cube.store.grid.Sizes`, which imports this module where it opens a store


def cut_metadata(raw: bytes, sizes: Sizes) -> bytes:
    """An array's ``zarr.json`` with its shape cut to `sizes` along its named dims (other documents as
    they are). Arrays shorter than published are left alone: their own shape is the damage to report."""
    try:
        meta = json.loads(raw)
    except ValueError:
        return raw
    if not isinstance(meta, dict) or meta.get("node_type") != "array":
        return raw
    names, shape = meta.get("dimension_names") or (), meta.get("shape")
    if not isinstance(shape, list) or len(names) != len(shape):
        return raw
    cut = [min(int(n), sizes[d]) if d in sizes and isinstance(n, int) else n for d, n in zip(names, shape, strict=True)]
    if cut == shape:
        return raw
    meta["shape"] = cut
    return json.dumps(meta).encode()


class GridView(WrapperStore[LocalStore]):
    """A local Zarr store whose arrays look cut to the published grid `sizes` (reads of ``zarr.json``
    are rewritten; chunks and writes pass through). The grid itself changes only through
    `cube.store.layout`'s growers, which resize arrays through the plain store and publish last."""

    def __init__(self, store: LocalStore, sizes: Sizes | None = None) -> None:
        super().__init__(store)
        self.sizes: Sizes = dict(sizes or {})

    def _with_store(self, store: LocalStore) -> GridView:
        return GridView(store, self.sizes)

    def __eq__(self, value: object) -> bool:
        return isinstance(value, GridView) and value.sizes == self.sizes and self._store == value._store

    def __hash__(self) -> int:
        return hash((str(self._store), tuple(sorted(self.sizes.items()))))

    def __reduce__(self) -> tuple[Any, ...]:  # dask ships the view to workers
        return (GridView, (self._store, self.sizes))

    def _cut(self, key: str, buf: Buffer | None, prototype: BufferPrototype) -> Buffer | None:
        if buf is None or not self.sizes or not (key == "zarr.json" or key.endswith("/zarr.json")):
            return buf
        raw = buf.to_bytes()
        cut = cut_metadata(raw, self.sizes)
        return buf if cut is raw else prototype.buffer.from_bytes(cut)

    async def get(self, key: str, prototype: BufferPrototype, byte_range: ByteRequest | None = None
                  ) -> Buffer | None:
        buf = await self._store.get(key, prototype, byte_range)
        return buf if byte_range is not None else self._cut(key, buf, prototype)

    async def _get_many(self, requests: Iterable[tuple[str, BufferPrototype, ByteRequest | None]]
                        ) -> AsyncGenerator[tuple[str, Buffer | None], None]:
        for key, prototype, byte_range in requests:
            yield key, await self.get(key, prototype, byte_range)


def view_store(path: PathLike, sizes: Sizes, *, read_only: bool = True) -> GridView:
    """The store at `path` seen cut to the grid `sizes`."""
    return GridView(LocalStore(Path(path), read_only=read_only), sizes)
