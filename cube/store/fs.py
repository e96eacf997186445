"""File-system helpers of the store: staged whole-store writes and their leftovers, saferl's side folders
(honouring the umask and the store's group, never through a planted link), OS errors as one line, live pids.
"""

from __future__ import annotations

import errno
import glob
import json
import os
import shutil
import socket
import stat
import tempfile
import uuid
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from cube.errors import CubeError, CubeWarning

PathLike = str | os.PathLike[str]


# --------------------------------------------------------------------------------------------------
# OS errors as one line


def store_write_error(exc: OSError, path: PathLike, what: str) -> CubeError:
    """The one line for an OS error while writing into a store: which store, what failed, what to do."""
    remedy = {errno.ENOSPC: "free some space and try again",
              errno.EDQUOT: "free some of your quota and try again",
              errno.EROFS: "the store is on a read-only file system: write to a writable copy",
              errno.EACCES: "the store (or a file in it) is not writable for you: check its permissions and group",
              errno.EPERM: "the store (or a file in it) is not writable for you: check its permissions and group",
              errno.ENOSYS: "this file system does not support file locks (a Lustre mount with noflock): "
                            "mount it with -o flock"}.get(exc.errno or 0, "check the store's folder and try again")
    where = f" ({exc.filename})" if exc.filename else ""
    return CubeError(f"cannot {what} in {path}: {exc.strerror or type(exc).__name__}{where}; {remedy}")


# --------------------------------------------------------------------------------------------------
# whole stores written beside their target


def staging_path(target: PathLike, kind: str) -> Path:
    """'.<name>.<kind>-<host>-<pid>-<hex>' beside `target`: a staging copy whose owner can be told apart
    (`remove_stale_staging`); kind: 'new' (being written), 'old' (being replaced), 'tmp' (`create_store`)."""
    target = Path(target)
    host = socket.gethostname().replace("-", "_")
    return target.with_name(f".{target.name}.{kind}-{host}-{os.getpid()}-{uuid.uuid4().hex[:8]}")


def _owner_gone(name: str) -> bool:
    """Whether the staging copy `name` (see `staging_path`) was left by a dead process of this host; copies
    named without host and pid (older versions) count as left over too."""
    parts = name.rsplit("-", 3)
    if len(parts) == 4 and parts[2].isdigit():
        return parts[1] == socket.gethostname().replace("-", "_") and not pid_alive(int(parts[2]))
    return True


def remove_stale_staging(target: PathLike) -> list[Path]:
    """Remove the staging copies of `target` that killed processes left beside it (full-size stores of
    `staged_store` and `create_store`); returns those kept because their owner may still run (a live pid,
    or another host: remove those yourself once that process is gone)."""
    target = Path(target)
    kept = []
    for kind in ("old", "new", "tmp"):
        for leftover in sorted(target.parent.glob(f".{glob.escape(target.name)}.{kind}-*")):
            if leftover.is_symlink():
                continue
            if not _owner_gone(leftover.name):
                kept.append(leftover)
            elif kind == "old" and not (target.exists() or target.is_symlink()):
                os.rename(leftover, target)  # killed between its two renames: the old store goes back
            else:
                shutil.rmtree(leftover, ignore_errors=True)
    return kept


@contextmanager
def staged_store(path: PathLike, *, force: bool = False) -> Iterator[Path]:
    """Yield a staging path beside `path` to write a whole store into; when the block ends without an
    exception the complete store replaces `path`, else it is removed and `path` is left as it was.

    An existing `path` is replaced only with `force`, and only if it is a Zarr store directory (never a
    file, a link or another folder). A full disk or Ctrl-C never loses the old store or leaves half a
    new one at `path`; copies that a killed run left beside it are removed first (`remove_stale_staging`)."""
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
    for kept in remove_stale_staging(target):
        warnings.warn(f"{kept} is a copy of {target.name} that another process is writing (or left on another "
                      "host); remove it once that process is gone", CubeWarning, stacklevel=3)
    staging = staging_path(target, "new")
    try:
        yield staging
        old = staging_path(target, "old")
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
# side folders


def _umask() -> int:
    """The process's umask, read without changing it (Linux: /proc/self/status; else set and restore)."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("Umask:"):
                return int(line.split()[1], 8)
    except (OSError, ValueError, IndexError):
        pass
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def _like_store(folder: Path, store: Path) -> None:
    """Give a folder made with mkdtemp (mode 0700) the mode a plain mkdir would have (0777 minus the umask)
    and the store's group, with the set-group-id bit where the store has it: in a store that a group
    shares, every member can then write into the folders any member's process created."""
    try:
        st = os.stat(store)
        mode = 0o777 & ~_umask()
        if st.st_mode & stat.S_ISGID:
            mode |= stat.S_ISGID
        if os.stat(folder).st_gid != st.st_gid:
            try:
                os.chown(folder, -1, st.st_gid)
            except OSError:
                pass  # not a member of the store's group: the folder keeps ours
        os.chmod(folder, mode)
    except OSError:
        pass


def refuse_links(store: PathLike, folder: PathLike) -> None:
    """CubeError when `folder` (inside `store`) or a folder between them is a symbolic link: saferl never
    follows a link planted inside a store (a link to elsewhere would make it write, or delete, there)."""
    store, folder = Path(store), Path(folder)
    try:
        parts = folder.relative_to(store).parts
    except ValueError:
        parts = (folder.name,)
        store = folder.parent
    here = store
    for part in parts:
        here = here / part
        if here.is_symlink():
            raise CubeError(f"{here} is a symbolic link inside the store; saferl never follows links there: "
                            "remove the link (and check where it points)")


def side_folder(path: PathLike, attributes: dict[str, Any] | None = None) -> Path:
    """Create (if needed) a folder inside a store for saferl's own files (derived statistics, locks, run
    claims, checkpoints), marked as an empty zarr group: zarr lists a store's members when xarray opens it,
    and warns about entries that are neither groups nor arrays. So the folder appears with its marker in
    one rename, built beside the store (a reader listing the store never sees it unmarked); where that
    folder is not writable, it is made in place. It gets the mode and group a plain folder of the store
    would (`_like_store`); a link in its place is refused (`refuse_links`). `attributes`: the marker's.
    Safe against concurrent callers."""
    folder = Path(path)
    refuse_links(folder.parent, folder)
    if (folder / "zarr.json").exists():
        return folder
    try:
        staging = Path(tempfile.mkdtemp(prefix=f".{folder.name}.new-", dir=folder.parent.parent))
    except OSError:
        staging = None
    if staging is not None:
        try:
            _like_store(staging, folder.parent)
            _write_group_marker(staging, attributes)
            os.rename(staging, folder)  # fails when another caller (or an unmarked folder) is there first
        except OSError:
            pass
        finally:
            shutil.rmtree(staging, ignore_errors=True)
    refuse_links(folder.parent, folder)
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
    """Whether a process of this host with this pid exists (to tell a dead writer's leftovers). Only
    positive pids name one process (0 and negative ones name groups): others are never alive."""
    if isinstance(pid, bool) or not isinstance(pid, int) or pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    except (OverflowError, OSError):
        return False
    return True


def process_start(pid: int) -> int | None:
    """When process `pid` of this host started, in clock ticks since boot (Linux /proc; None elsewhere or
    when it is gone): with the pid, it names one process even after the pid is reused."""
    try:
        text = Path(f"/proc/{int(pid)}/stat").read_text()
        return int(text[text.rindex(")") + 2:].split()[19])
    except (OSError, ValueError, IndexError):
        return None
