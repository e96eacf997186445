"""What reads of a store's per-run arrays remember in `_derived` (issue 37), keyed by the arrays' files.

A report reads every run's manifest and status (`cube.store.read.read_manifests`: one small chunk per run and
array, seconds at 1,440 runs through zarr) and checks that every chunk of the env steps decodes
(`verify_run_arrays`). Both are the same as last time when the files are: so the values read (manifest texts
and statuses) and the fact that an array verified are kept in `_derived/run_manifests.json` and
`_derived/verified.json`, keyed by a hash of every file of those arrays (name, inode, size, mtime and ctime:
stat calls only, and no rewrite keeps the ctime).

A key is taken before and after a read, and the result is kept only when both agree (no file changed while
it was read) and no write bracket was open: a later key equal to it means the files hold what was read then
(each file unchanged from its first look until its last, so all of them at once). A changed or damaged
chunk changes the key and is read (and named) again. Best effort: a read-only store, a link in `_derived`'s
place or a cache file that does not verify (its digest) is simply not used. Local stores only.
"""

from __future__ import annotations

import hashlib
import json
import os
import uuid
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import numpy as np

from cube.errors import CubeError
from cube.store.fs import PathLike, refuse_links, side_folder

MANIFESTS_FILE = "_derived/run_manifests.json"
VERIFIED_FILE = "_derived/verified.json"
FORMAT = 1  # of both files; another one is not read


def file_key(st: os.stat_result) -> bytes:
    """Inode, size, mtime and ctime of one file: a write, a rename into place or a copy changes the ctime,
    which no `touch -r` restores (so a rewrite that keeps the size and the mtime still changes the key)."""
    return f"{st.st_ino}:{st.st_size}:{st.st_mtime_ns}:{st.st_ctime_ns}".encode()


def arrays_key(store: PathLike, names: Iterable[str]) -> str:
    """Hash of the store's root metadata (its published grid) and of every file below the folders `names`
    (relative name and `file_key` each, in sorted order): one stat call per file, nothing read."""
    root = Path(store)
    h = hashlib.sha256(f"v{FORMAT}".encode())
    try:
        h.update(b"zarr.json:" + file_key(os.stat(root / "zarr.json")) + b";")
    except OSError:
        h.update(b"zarr.json:-;")
    for name in names:
        _hash_folder(h, str(root / name), name)
    return h.hexdigest()


def _hash_folder(h: Any, folder: str, rel: str) -> None:
    """Feed every file below `folder` (named `rel` from the store), sorted, into the hash `h`."""
    try:
        entries = sorted(os.scandir(folder), key=lambda e: e.name)
    except (FileNotFoundError, NotADirectoryError):
        h.update(f"{rel}:-;".encode())
        return
    for entry in entries:
        name = f"{rel}/{entry.name}"
        if entry.is_dir(follow_symlinks=False):
            _hash_folder(h, entry.path, name)
            continue
        try:
            h.update(name.encode() + b":" + file_key(entry.stat(follow_symlinks=False)) + b";")
        except FileNotFoundError:
            h.update(f"{name}:-;".encode())


def _usable(store: PathLike) -> bool:
    """A local store folder whose `_derived` is no link (then nothing is read from or written there)."""
    root = Path(store)
    try:
        refuse_links(root, root / "_derived")
    except CubeError:
        return False
    return root.is_dir()


def _load(store: PathLike, name: str) -> dict[str, Any] | None:
    """The JSON object kept in `name` when its digest verifies; None otherwise."""
    if not _usable(store):
        return None
    try:
        digest, _, body = (Path(store) / name).read_bytes().partition(b"\n")
        if hashlib.sha256(body).hexdigest().encode() != digest:
            return None
        out = json.loads(body)
    except (OSError, ValueError):
        return None
    return out if isinstance(out, dict) and out.get("format") == FORMAT else None


def _save(store: PathLike, name: str, content: dict[str, Any]) -> None:
    """Write `content` with its digest to a temporary file, then rename it into place; best effort."""
    if not _usable(store):
        return
    target = Path(store) / name
    tmp = target.with_name(f".{target.stem}.{uuid.uuid4().hex[:8]}.tmp")
    try:
        body = json.dumps({**content, "format": FORMAT}, separators=(",", ":")).encode()
    except (TypeError, ValueError):  # a value JSON cannot hold: simply not kept
        return
    try:
        side_folder(target.parent)
        tmp.write_bytes(hashlib.sha256(body).hexdigest().encode() + b"\n" + body)
        os.replace(tmp, target)
    except (OSError, CubeError):
        tmp.unlink(missing_ok=True)


# ---------------------------------------------------------------------------------------- manifests
def cached_run_arrays(store: PathLike, key: str, sizes: Mapping[str, int] | None
                      ) -> dict[str, np.ndarray] | None:
    """The per-run arrays kept under `key` for the grid `sizes` ({name: array}, strings as object arrays);
    None when nothing is kept for them."""
    got = _load(store, MANIFESTS_FILE)
    if got is None or got.get("key") != key or got.get("sizes") != (dict(sizes) if sizes else None):
        return None
    try:
        return {name: np.array(a["values"], dtype=a["dtype"]).reshape(a["shape"])
                for name, a in got["arrays"].items()}
    except (KeyError, TypeError, ValueError):
        return None


def keep_run_arrays(store: PathLike, key: str, sizes: Mapping[str, int] | None,
                    arrays: Mapping[str, np.ndarray]) -> None:
    """Keep `arrays` (numbers or strings, run dims) read from the files `key` names, for the grid `sizes`."""
    content = {"key": key, "sizes": dict(sizes) if sizes else None, "arrays": {
        name: {"dtype": "object" if a.dtype.kind in "OUT" else a.dtype.str, "shape": list(a.shape),
               "values": [str(v) for v in a.ravel()] if a.dtype.kind in "OUT" else a.ravel().tolist()}
        for name, a in arrays.items()}}
    _save(store, MANIFESTS_FILE, content)


# ---------------------------------------------------------------------------------------- verified
def verified(store: PathLike, name: str, key: str) -> bool:
    """Whether the array `name` was read whole and decoded when its files were as `key` says."""
    got = _load(store, VERIFIED_FILE)
    return got is not None and isinstance(got.get("arrays"), dict) and got["arrays"].get(name) == key


def keep_verified(store: PathLike, name: str, key: str) -> None:
    """Remember that every chunk of the array `name` decoded when its files were as `key` says."""
    got = _load(store, VERIFIED_FILE) or {}
    arrays = got.get("arrays") if isinstance(got.get("arrays"), dict) else {}
    _save(store, VERIFIED_FILE, {"arrays": {**arrays, name: key}})
