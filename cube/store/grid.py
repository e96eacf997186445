"""The published grid: the sizes of the seven dimensions that every reader and writer of a store sees.

A store's arrays are resized one metadata file at a time, so while its grid grows (new labels, more
iterates or episode slots) some arrays are already longer than others. Growers therefore resize every
array first and *publish* the new sizes last, in one atomic rename of the store's root ``zarr.json``
(attribute ``saferl_grid``: {dim: size}). Every saferl reader and writer opens the store through
`GridView`, which presents each array cut to the published sizes: a reader sees the grid before or
after a growth, never between, and a grower killed half-way leaves arrays longer than published, which
nobody sees and the next grower cuts back or grows on (`cube.store.layout`).

Stores written before the attribute existed (and foreign Zarr stores) publish nothing: their sizes are
the lengths of their coordinate arrays.
"""

from __future__ import annotations

import json
import os
import uuid
from collections.abc import AsyncGenerator, Callable, Iterable
from pathlib import Path
from typing import Any

import zarr
from zarr.abc.store import ByteRequest
from zarr.core.buffer import Buffer, BufferPrototype
from zarr.storage import LocalStore, WrapperStore

from cube.errors import DamagedStoreError
from cube.schema import DIMS
from cube.store.fs import PathLike, side_folder

GRID_ATTR = "saferl_grid"
"""Root attribute holding the published size of each dimension ({dim: int})."""

Sizes = dict[str, int]


def published_sizes(path: PathLike) -> Sizes | None:
    """The sizes readers see ({dim: n} for the seven dims): the published ones, else (stores without them)
    the coordinate arrays' lengths; None when `path` is no Zarr v3 store. Reads metadata files only."""
    root = Path(path)
    try:
        meta = json.loads((root / "zarr.json").read_bytes())
    except (OSError, ValueError):
        return None
    sizes = (meta.get("attributes") or {}).get(GRID_ATTR) if isinstance(meta, dict) else None
    if isinstance(sizes, dict) and all(isinstance(sizes.get(d), int) and sizes[d] >= 0 for d in DIMS):
        published = {d: int(sizes[d]) for d in DIMS}
        check_published(root, published)
        return published
    return coordinate_sizes(root)


def check_published(path: PathLike, published: Sizes) -> None:
    """`DamagedStoreError` when the published grid promises more than an array holds along one of its
    dimensions: growers resize every array before they publish, so no state of a healthy store has that (the
    root ``zarr.json`` or an array's metadata was edited or damaged). Reads the arrays' metadata files only;
    one that does not parse is left to the readers, which name it."""
    root = Path(path)
    try:
        entries = sorted(e.name for e in os.scandir(root) if not e.name.startswith((".", "_")) and e.is_dir())
    except OSError:
        return
    for name in entries:
        try:
            meta = json.loads((root / name / "zarr.json").read_bytes())
            dims, shape = meta.get("dimension_names") or (), meta["shape"]
            pairs = [(d, int(n)) for d, n in zip(dims, shape, strict=True) if d in published]
        except (OSError, ValueError, KeyError, TypeError, AttributeError):
            continue
        for dim, have in pairs:
            if have < published[dim]:
                raise DamagedStoreError.found(
                    f"read {path}", f"its zarr.json publishes {published[dim]} {dim} label(s) but the array "
                    f"'{name}' holds {have}: the metadata disagree with the data",
                    advice="restore the store's metadata (zarr.json files) from a copy")


def coordinate_sizes(path: PathLike) -> Sizes | None:
    """Each dimension's size as the length of its coordinate array (None if one is unreadable or missing)."""
    out: Sizes = {}
    for dim in DIMS:
        try:
            shape = json.loads((Path(path) / dim / "zarr.json").read_bytes())["shape"]
            out[dim] = int(shape[0])
        except (OSError, ValueError, KeyError, IndexError, TypeError):
            return None
    return out


def publish(path: PathLike, sizes: Sizes) -> None:
    """Make `sizes` the store's published grid, in one atomic rewrite of the root attributes
    (`update_root_attrs`), so a reader reads the old sizes or the new, never half a file. Call it only
    under the grid lock, after every array has been resized."""
    update_root_attrs(path, lambda old: {GRID_ATTR: {d: int(sizes[d]) for d in DIMS}})


def update_root_attrs(path: PathLike, update: Callable[[dict[str, Any]], dict[str, Any]]) -> None:
    """Merge `update(old attributes)` into the store's root attributes: the root ``zarr.json`` is rewritten
    beside the store (in ``_locks``) and renamed over the old one, so readers see the old file or the new.
    Call it under the grid lock."""
    root = Path(path)
    meta = json.loads((root / "zarr.json").read_bytes())
    attrs = meta.setdefault("attributes", {})
    attrs.update(update(dict(attrs)))
    folder = side_folder(root / "_locks")
    tmp = folder / f".zarr.json.{os.getpid()}.{uuid.uuid4().hex[:8]}"
    try:
        tmp.write_text(json.dumps(meta, indent=2))
        os.replace(tmp, root / "zarr.json")
    finally:
        tmp.unlink(missing_ok=True)


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

def view_store(path: PathLike, sizes: Sizes | None = None, *, read_only: bool = True) -> GridView:
    """The store at `path` seen through its published grid (or `sizes`, a snapshot taken earlier)."""
    if sizes is None:
        sizes = published_sizes(path) or {}
    return GridView(LocalStore(Path(path), read_only=read_only), sizes)


def open_view(path: PathLike, sizes: Sizes | None = None, mode: str = "r") -> zarr.Group:
    """The store's root group through `GridView` (mode "r" or "r+")."""
    store = view_store(path, sizes, read_only=mode == "r")
    return zarr.open_group(store, mode=mode)
