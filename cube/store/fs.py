"""File-system helpers of the store: staged whole-store writes, saferl's side folders, live pids."""

from __future__ import annotations

import json
import os
import shutil
import tempfile
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from cube.errors import CubeError

PathLike = str | os.PathLike[str]


@contextmanager
def staged_store(path: PathLike, *, force: bool = False) -> Iterator[Path]:
    """Yield a staging path beside `path` to write a whole store into; when the block ends without an
    exception the complete store replaces `path`, else it is removed and `path` is left as it was.

    An existing `path` is replaced only with `force`, and only if it is a Zarr store directory (never a
    file, a link or another folder). A full disk or Ctrl-C never loses the old store or leaves half a
    new one at `path`."""
    target = Path(path)
    if target.exists() or target.is_symlink():
        if not force:
            raise CubeError(f"{target} already exists; pass --force to replace it or choose another path")
        if target.is_symlink() or not target.is_dir():
            raise CubeError(f"{target} exists and is not a Zarr store directory; refusing to replace it: "
                            "remove it yourself or choose another path")
        if not (target / "zarr.json").exists():
            raise CubeError(f"{target} is a directory that is not a Zarr store; refusing to delete it")
    if not target.parent.is_dir():
        raise CubeError(f"the folder {target.parent} does not exist; create it or write elsewhere")
    staging = target.with_name(f".{target.name}.new-{uuid.uuid4().hex[:8]}")
    try:
        yield staging
        old = target.with_name(f".{target.name}.old-{uuid.uuid4().hex[:8]}")
        had_old = target.exists()
        if had_old:
            os.rename(target, old)
        try:
            os.rename(staging, target)
        except OSError:
            if had_old:
                os.rename(old, target)  # put the old store back
            raise
        shutil.rmtree(old, ignore_errors=True)
    finally:
        shutil.rmtree(staging, ignore_errors=True)


# --------------------------------------------------------------------------------------------------
# opening the group and locating runs


def side_folder(path: PathLike, attributes: dict[str, Any] | None = None) -> Path:
    """Create (if needed) a folder inside a store for saferl's own files (derived statistics, locks, run
    claims, checkpoints), marked as an empty zarr group: zarr lists a store's members when xarray opens it,
    and warns about entries that are neither groups nor arrays. So the folder appears with its marker in
    one rename, built beside the store (a reader listing the store never sees it unmarked); where that
    folder is not writable, it is made in place. `attributes`: the marker's. Safe against concurrent
    callers."""
    folder = Path(path)
    if (folder / "zarr.json").exists():
        return folder
    try:
        staging = Path(tempfile.mkdtemp(prefix=f".{folder.name}.new-", dir=folder.parent.parent))
    except OSError:
        staging = None
    if staging is not None:
        try:
            _write_group_marker(staging, attributes)
            os.rename(staging, folder)  # fails when another caller (or an unmarked folder) is there first
        except OSError:
            pass
        finally:
            shutil.rmtree(staging, ignore_errors=True)
    folder.mkdir(parents=True, exist_ok=True)
    if not (folder / "zarr.json").exists():
        _write_group_marker(folder, attributes)
    return folder


def _write_group_marker(folder: Path, attributes: dict[str, Any] | None) -> None:
    """Write `folder/zarr.json` (an empty zarr group) via a temporary file: never half a file."""
    tmp = folder / f".zarr.json.{uuid.uuid4().hex[:8]}"
    try:
        tmp.write_text(json.dumps({"zarr_format": 3, "node_type": "group", "attributes": attributes or {}}))
        os.replace(tmp, folder / "zarr.json")
    finally:
        tmp.unlink(missing_ok=True)  # a full disk must not leave an empty temporary file behind


def pid_alive(pid: int) -> bool:
    """Whether a process of this host with this pid exists (to tell a dead writer's leftovers)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
