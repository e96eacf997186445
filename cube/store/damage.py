"""A store's damage, found and named once: the one `DamagedStoreError` of every read of chunks.

Readers read chunks inside `reading_store(source, what)`: a decode error there (a checksum mismatch, a chunk
zstd cannot decode, a chunk key that is a folder, metadata zarr cannot parse) leaves as one
`cube.errors.DamagedStoreError` line naming the damaged chunk and its run (`damaged_chunks` finds it);
a `CubeError` (already one line) and a `cube.compute.Cancelled` pass unchanged. `damaged_chunks` is also
what `saferl validate` lists.
"""

from __future__ import annotations

import stat
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import numpy as np

from cube.compute import Cancelled
from cube.errors import CubeError, DamagedStoreError
from cube.schema import RUN_DIMS, RunKey
from cube.store.grid import open_view
from cube.store.location import is_remote, open_remote_group


@contextmanager
def reading_store(source: str | Path | None, what: str) -> Iterator[None]:
    """Reads of the store `source` inside: any decode error leaves as the one `DamagedStoreError`
    ('cannot <what>, the store is corrupt: chunk cost/c/0/1/0/2/0/0/0 of run ... is damaged ...')."""
    try:
        yield
    except Exception as exc:  # codecs, zarr and xarray raise many types for damaged bytes
        raise damaged_store_error(exc, source, what) from None


def damaged_store_error(exc: BaseException, source: str | Path | None, what: str = "read the cube's episodes"
                        ) -> Exception:
    """The one error for data of a store that could not be read (`reading_store` raises it): a
    `DamagedStoreError` naming the damaged chunk and its run when `source` is a store where one is found,
    else the decode error's type and first line. A `CubeError` or a `Cancelled` is returned as it is."""
    if isinstance(exc, CubeError | Cancelled):
        return exc
    try:
        meta = metadata_problems(source)
        where = None if meta else unreadable_chunk(source)
    except Exception:  # noqa: BLE001 - the original error is the one to report then
        meta, where = [], None
    if meta:
        return DamagedStoreError.found(what, meta[0], advice="restore that file from a copy")
    if where:
        return DamagedStoreError.found(what, where)
    return DamagedStoreError.unexplained(what, exc)


def metadata_problems(source: str | Path | None) -> list[str]:
    """The metadata files of a Zarr v3 store that zarr cannot read, one line each naming the file and why:
    the root ``zarr.json``, then each array's (a dtype its fill value does not fit, a missing codec, not JSON)."""
    import json

    import zarr
    from zarr.storage import LocalStore

    if source is None or not (Path(source) / "zarr.json").is_file():
        return []
    root = Path(source)
    try:
        json.loads((root / "zarr.json").read_bytes())
    except (OSError, ValueError) as exc:
        return [f"the store's zarr.json cannot be read ({_why(exc)})"]
    store = LocalStore(root, read_only=True)
    problems = []
    for entry in sorted(p for p in root.iterdir() if not p.name.startswith((".", "_")) and (p / "zarr.json").is_file()):
        try:
            zarr.open_array(store, path=entry.name, mode="r")
        except Exception as exc:  # noqa: BLE001 - zarr raises many types for metadata it cannot read
            problems.append(f"the metadata of array '{entry.name}' ({entry.name}/zarr.json) cannot be read "
                            f"({_why(exc)})")
    return problems


def _why(exc: BaseException) -> str:
    first = (str(exc).strip().splitlines() or [""])[0][:120]
    return f"{type(exc).__name__}: {first}" if first else type(exc).__name__


def unreadable_chunk(source: str | Path | None) -> str | None:
    """Name the first chunk of a Zarr store that cannot be read (checksum mismatch, bad compression):
    'chunk cost/c/0/1/0/2/0/0/0 of run ppo/goal/15.0/2 is damaged (checksum mismatch)'; None if every chunk reads or the
    source is not a Zarr directory. Reads the store chunk by chunk: for error messages, not hot paths."""
    problems = damaged_chunks(source, first_only=True)
    return problems[0] if problems else None


def damaged_chunks(source: str | Path | None, first_only: bool = False, skip: tuple[str, ...] = ()) -> list[str]:
    """Every chunk of a Zarr store's arrays (coordinates included; the arrays `skip` only for their files)
    that cannot be read, one line each ('chunk cost/c/0/1/0/2/0/0/0 of run ppo/goal/d=15/seed=2 is damaged (checksum
    mismatch)'), and chunk keys that are not plain files (a folder or a link where a chunk should be).
    Reads every chunk: for validate and error messages, not hot paths."""
    remote = is_remote(source)
    if source is None or not (remote or (Path(source) / "zarr.json").exists()):
        return []
    broken = [] if remote else [f"{line}; restore that file from a copy" for line in metadata_problems(source)]
    if broken:
        return broken[:1] if first_only else broken
    group = open_remote_group(str(source)) if remote else open_view(source)
    try:
        labels = {d: np.asarray(group[d][:]) for d in RUN_DIMS}
    except Exception:  # noqa: BLE001 - a damaged coordinate is reported below
        labels = None
    problems: list[str] = []
    for name, arr in sorted(group.arrays(), key=lambda item: item[0]):
        if not remote:
            problems.extend(odd_chunk_files(Path(source), name, arr.ndim))
        if name in skip:
            continue
        try:
            arr[...]  # one concurrent read of every chunk: the usual case, where all of them decode
            continue
        except Exception:  # noqa: BLE001 - find which chunk it was, run by run
            pass
        run_dims = tuple(arr.metadata.dimension_names or ())[:4] == RUN_DIMS and arr.ndim >= len(RUN_DIMS)
        if run_dims:
            blocks = [(index, index) for index in np.ndindex(*arr.shape[: len(RUN_DIMS)])]
        elif arr.ndim == 1:
            size = arr.chunks[0]
            blocks = [((k,), (slice(k * size, (k + 1) * size),)) for k in range(-(-arr.shape[0] // size))]
        else:
            blocks = [((), (Ellipsis,))]
        for key, index in blocks:
            try:
                arr[index]
            except Exception as exc:  # noqa: BLE001 - any decode failure is what we are looking for
                kind = "checksum mismatch" if "checksum" in str(exc).lower() else type(exc).__name__
                chunk = "/".join(["c", *map(str, key), *["0"] * (arr.ndim - len(key))])
                run = f" of run {RunKey.at(labels, key)}" if run_dims and labels is not None else ""
                problems.append(f"chunk {name}/{chunk}{run} is damaged ({kind})")
            if problems and first_only:
                return problems[:1]
    return problems


def odd_chunk_files(root: Path, name: str, ndim: int) -> list[str]:
    """Entries of an array's chunk tree (`name/c/...`, '/'-separated keys, `ndim` levels) that are not what
    zarr would write there: links, folders where chunk files belong, files where folders belong."""
    problems = []
    base = root / name / "c"
    if base.is_symlink():
        return [f"{name}/c is a symbolic link, not a folder of chunks; remove it"]
    if not base.exists():
        return []
    stack = [(base, 0)]
    while stack:
        folder, depth = stack.pop()
        try:
            entries = list(folder.iterdir())
        except OSError as exc:
            problems.append(f"{name}/{folder.relative_to(root / name)} cannot be listed ({exc.strerror})")
            continue
        for entry in entries:
            rel = f"{name}/{entry.relative_to(root / name)}"
            if entry.name.endswith(".partial"):
                continue  # a chunk write a kill cut short (zarr writes a temporary file, then renames it)
            mode = entry.lstat().st_mode
            if stat.S_ISLNK(mode):
                problems.append(f"{rel} is a symbolic link where a chunk should be; remove it")
            elif depth == ndim - 1 and not stat.S_ISREG(mode):
                problems.append(f"{rel} is {'a folder' if stat.S_ISDIR(mode) else 'not a file'} where a chunk "
                                "file should be; remove it and rewrite that run")
            elif depth < ndim - 1 and not stat.S_ISDIR(mode):
                problems.append(f"{rel} is a file where a folder of chunks should be; remove it")
            elif depth < ndim - 1:
                stack.append((entry, depth + 1))
    return sorted(problems)
