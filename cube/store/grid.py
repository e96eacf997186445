"""The published grid: the sizes of the seven dimensions that every reader and writer of a store sees.

A store's arrays are resized one metadata file at a time, so while its grid grows (new labels, more
iterates or episode slots) some arrays are already longer than others. Growers therefore resize every
array first and *publish* the new sizes last, in one atomic rename of the store's root ``zarr.json``
(attribute ``saferl_grid``: {dim: size}). Every saferl reader and writer opens the store through
`GridView` (`cube.store.gridview`), which presents each array cut to the published sizes: a reader sees the
grid before or after a growth, never between, and a grower killed half-way leaves arrays longer than published, which
nobody sees and the next grower cuts back or grows on (`cube.store.layout`).

Stores written before the attribute existed (and foreign Zarr stores) publish nothing: their sizes are
the lengths of their coordinate arrays.
"""

from __future__ import annotations

import json
import os
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from cube.errors import DamagedStoreError
from cube.schema import DIMS
from cube.store.fs import PathLike, side_folder

if TYPE_CHECKING:  # zarr loads with the first store opened through it (`cube.store.gridview`), not with the sizes
    import zarr

    from cube.store.gridview import GridView

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


def view_store(path: PathLike, sizes: Sizes | None = None, *, read_only: bool = True) -> GridView:
    """The store at `path` seen through its published grid (or `sizes`, a snapshot taken earlier):
    `cube.store.gridview.view_store`."""
    from cube.store.gridview import view_store as grid_view_store

    return grid_view_store(path, sizes if sizes is not None else published_sizes(path) or {}, read_only=read_only)


def open_view(path: PathLike, sizes: Sizes | None = None, mode: str = "r") -> zarr.Group:
    """The store's root group through `GridView` (mode "r" or "r+")."""
    import zarr

    return zarr.open_group(view_store(path, sizes, read_only=mode == "r"), mode=mode)
