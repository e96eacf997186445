"""Every file saferl writes for a user (tables, figures, netCDF, exports) goes through here.

A target is written to a temporary file in the same folder and renamed over the target only when
complete, so a failure (full disk, Ctrl-C) never leaves half a file; a file it replaces keeps its mode
and group; and a target that exists but is not a regular file (a symlink, a FIFO, a device such as
/dev/stdout, a folder) is refused, never replaced. With ``replace=False`` (the TUI's exports) an existing
target of any kind is refused: the complete file is linked in under a name that must still be free.
"""

from __future__ import annotations

import os
import stat
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from cube.errors import CubeError


def check_output_path(path: str | os.PathLike[str]) -> Path:
    """The target as a Path; CubeError if it exists as anything but a regular file or its folder is missing."""
    target = Path(path)
    try:
        mode = os.lstat(target).st_mode
    except FileNotFoundError:
        mode = None
    if mode is not None and not stat.S_ISREG(mode):
        kind = ("a symbolic link" if stat.S_ISLNK(mode) else "a folder" if stat.S_ISDIR(mode)
                else "a FIFO" if stat.S_ISFIFO(mode) else "a device" if stat.S_ISCHR(mode) or stat.S_ISBLK(mode)
                else "not a regular file")
        raise CubeError(f"{target} exists and is {kind}; refusing to replace it: give the path of a file")
    if not target.parent.is_dir():
        raise CubeError(f"the folder {target.parent} does not exist; create it or write elsewhere")
    return target


@contextmanager
def atomic_output(path: str | os.PathLike[str], *, replace: bool = True) -> Iterator[Path]:
    """Yield a temporary path beside `path`; on success it replaces `path` (with `replace=False` it takes the
    name only while nothing has it: CubeError otherwise), on failure it is removed. An OS error (full disk,
    no permission) becomes one CubeError line naming the path."""
    target = check_output_path(path)
    tmp = target.with_name(f".{target.name}.tmp-{uuid.uuid4().hex[:8]}")
    try:
        yield tmp
        if replace:
            _keep_mode(tmp, target)
            os.replace(tmp, target)
        else:
            _take_name(tmp, target)
    except FileExistsError:
        raise CubeError(f"{target} exists; refusing to replace it: choose another name") from None
    except OSError as exc:
        raise CubeError(f"cannot write {target} ({exc.strerror or type(exc).__name__}): "
                        "free some space or choose another path") from None
    finally:
        if tmp.exists() or tmp.is_symlink():
            tmp.unlink()


def _take_name(tmp: Path, target: Path) -> None:
    """Give the complete file `tmp` the name `target` only if nothing has that name (FileExistsError
    otherwise, whatever holds it: a file, a link, a FIFO): a hard link, atomic; where the file system has
    none, the name is reserved empty first (O_EXCL) and the file renamed over it."""
    try:
        os.link(tmp, target)
        return
    except FileExistsError:
        raise
    except OSError:  # no hard links here (some network and FUSE file systems)
        pass
    os.close(os.open(target, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o666))
    try:
        os.replace(tmp, target)
    except OSError:
        target.unlink(missing_ok=True)
        raise


def _keep_mode(tmp: Path, target: Path) -> None:
    """Give the new file the mode (and group) of the file it replaces: a private (0600) table stays private."""
    try:
        st = os.stat(target)
    except FileNotFoundError:
        return
    os.chmod(tmp, stat.S_IMODE(st.st_mode))
    try:
        os.chown(tmp, -1, st.st_gid)
    except OSError:
        pass


def write_text(path: str | os.PathLike[str], text: str, *, replace: bool = True) -> Path:
    """Write `text` (UTF-8) to `path` atomically; returns the path written. `replace=False`: never over an
    existing file (CubeError)."""
    with atomic_output(path, replace=replace) as tmp:
        tmp.write_text(text, encoding="utf-8")
    return Path(path)


def write_bytes(path: str | os.PathLike[str], data: bytes) -> Path:
    """Write `data` to `path` atomically; returns the path written."""
    with atomic_output(path) as tmp:
        tmp.write_bytes(data)
    return Path(path)


def figures_folder(cube: str | os.PathLike[str]) -> Path:
    """Where figures of a cube go by default: `<cube>-figures/` next to it (`results.zarr` ->
    `results-figures/`; a cube at a URL: in the current folder). Not created here."""
    text = str(cube)
    if "://" in text:  # a URL (s3://, https://): the store's last name, without a query string
        text = text.split("?", 1)[0].rstrip("/").rsplit("/", 1)[-1] or "cube"
    src = Path(text)
    return src.parent / f"{src.name.removesuffix('.zarr').removesuffix('.nc')}-figures"
