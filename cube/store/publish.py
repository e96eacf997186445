"""`saferl publish`: a consistent, immutable snapshot of a local cube in a local folder or at an S3/GCS URL.

The snapshot is the store's published grid (`cube.store.grid`) with complete runs only (all runs with
``partial``): the episode chunks (reward, cost) are copied byte for byte (their CRC-32C kept); the small
per-run arrays (status, manifest, per-iterate variables) are rewritten as one chunk each with the same
codecs, since no writer will ever write one run of a snapshot: a reader's one request instead of one per
run. Runs left out keep the fill values (no episodes, status pending). What only local writers need is
left behind (the seqlock, locks, claims, the statistics cache). Runs a writer wrote while they were copied
(their write sequence moved) are copied again until they hold still (else one error line). The root
``zarr.json`` is written last, carrying the snapshot's id (`cube.store.location.SNAPSHOT_ATTR`) and, with
``consolidate``, every array's metadata, so opening the snapshot is one request (HTTP cannot list folders)."""

from __future__ import annotations

import hashlib
import json
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from cube.errors import CubeError
from cube.schema import RUN_DIMS, RUN_STATUS, utc_stamp
from cube.store.damage import reading_store
from cube.store.fs import staged_store
from cube.store.grid import Sizes, published_sizes
from cube.store.gridview import cut_metadata
from cube.store.location import SNAPSHOT_ATTR, filesystem, is_remote, local_path, redact, remote_error, scheme_of
from cube.store.locks import WRITE_SEQ, read_write_seqs, runs_written_since
from cube.store.snapshot import chunk_keys

EPISODE_ARRAYS = ("reward", "cost")
"""Copied chunk by chunk, byte for byte; every other per-run array (status, manifest, per-iterate variables)
is small and rewritten as one chunk: a reader's one request instead of one per run."""

SINK_BATCH = 256
"""Files sent to a remote destination in one concurrent batch."""

COPY_TRIES = 10
"""Copies of a run a writer keeps writing before it is left out of the snapshot."""


@dataclass
class Published:
    """What `publish_store` wrote: the destination, runs kept / in the grid, the content id, notes."""

    dest: str
    runs: int
    total: int
    snapshot: str
    notes: list[str] = field(default_factory=list)


class _Sink:
    """Where the snapshot's files go: a local folder (`put` writes files) or a remote file system (puts are
    sent SINK_BATCH at a time, concurrently; `flush` sends what is left)."""

    def __init__(self, root: str, fs: Any = None) -> None:
        self.root, self.fs = root.rstrip("/"), fs
        self.pending: dict[str, bytes] = {}
        self.sent: list[str] = []  # remote paths whose writes were started (a failed publish removes them)

    def put(self, key: str, data: bytes) -> None:
        if self.fs is None:
            target = Path(self.root) / key
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(data)
            return
        self.pending[f"{self.root}/{key}"] = data
        if len(self.pending) >= SINK_BATCH:
            self.flush()

    def flush(self) -> None:
        if self.fs is not None and self.pending:
            self.sent += self.pending
            self.fs.pipe(self.pending)
            self.pending = {}

    def remove_sent(self) -> str:
        """Remove, best effort, what this sink has written remotely; a clause saying what became of it."""
        if not self.sent:
            return "nothing was written there"
        try:
            self.fs.rm(self.sent)
        except Exception as exc:  # noqa: BLE001 - each file system raises its own types
            first = (str(exc).strip().splitlines() or [type(exc).__name__])[0][:120]
            return (f"{len(self.sent)} object(s) it had written could not be removed ({first}): no zarr.json was "
                    "written, so readers refuse it; remove that prefix before publishing there again")
        return f"the {len(self.sent)} object(s) it had written were removed"


def publish_store(source: Any, dest: str, *, partial: bool = False, consolidate: bool = True,
                  progress: Callable[[int, int], None] | None = None) -> Published:
    """Write the snapshot of the local cube `source` to `dest` (a new local folder, or a URL where no store
    is yet). CubeError (one line) for a remote or missing source, an existing destination, a failed write."""
    if is_remote(source):
        raise CubeError(f"cannot publish {redact(source)}: publish a local store (it is already at a URL)")
    src = Path(local_path(source))
    if not (src / "zarr.json").is_file():
        raise CubeError(f"{src} is not a saferl Zarr store (no zarr.json); give the path of a results store")
    sizes = published_sizes(src)
    if sizes is None:
        raise CubeError(f"{src} has no readable coordinate arrays; restore it from a copy")
    dest = str(local_path(dest))
    if scheme_of(dest) and not is_remote(dest):
        raise CubeError(f"cannot publish to {redact(dest)}: give a local folder or an s3:// or gs:// URL")
    if scheme_of(dest) in ("http", "https"):
        raise CubeError(f"cannot publish to {redact(dest)}: HTTP is read-only; publish to a folder the server "
                        "serves, or to s3:// / gs://")
    if is_remote(dest):
        return _publish_remote(src, dest, sizes, partial, consolidate, progress)
    with staged_store(dest) as staging:
        out = _copy(src, _Sink(str(staging)), sizes, partial, consolidate, progress)
    return Published(str(Path(dest)), *out)


def _publish_remote(src: Path, dest: str, sizes: Sizes, partial: bool, consolidate: bool,
                    progress: Callable[[int, int], None] | None) -> Published:
    fs, root = filesystem(dest)
    root = root.rstrip("/")
    try:
        there = fs.exists(f"{root}/zarr.json")
        leftovers = not there and _holds_objects(fs, root)
    except Exception as exc:  # noqa: BLE001 - each file system raises its own types
        raise remote_error(exc, dest, "publish to") from None
    if there:
        raise CubeError(f"{redact(dest)} already holds a store; a snapshot is immutable: publish to a new URL")
    if leftovers:
        raise CubeError(f"{redact(dest)} holds objects but no zarr.json (an unfinished publish?); remove them or "
                        "publish to a new URL")
    sink = _Sink(root, fs)
    try:
        out = _copy(src, sink, sizes, partial, consolidate, progress)
    except KeyboardInterrupt:
        sink.remove_sent()
        raise
    except Exception as exc:  # noqa: BLE001 - each file system raises its own types
        error = remote_error(exc, dest, "publish to")
        raise CubeError(f"{error}; {sink.remove_sent()}") from None
    return Published(redact(dest), *out)


def _holds_objects(fs: Any, root: str) -> bool:
    """Whether anything is stored under `root` (a prefix of an object store: missing is empty)."""
    try:
        return bool(fs.ls(root, detail=False))
    except FileNotFoundError:
        return False


def _copy(src: Path, sink: _Sink, sizes: Sizes, partial: bool, consolidate: bool,
          progress: Callable[[int, int], None] | None) -> tuple[int, int, str, list[str]]:
    """Copy the snapshot into `sink`; returns (runs kept, runs in the grid, content id, notes)."""
    from cube.store.grid import open_view

    with reading_store(src, f"publish {src}"):
        group = open_view(src, sizes, mode="r")
        status = np.asarray(group["run_status"][...]) if "run_status" in group else None
    run_shape = tuple(sizes[d] for d in RUN_DIMS)
    keep = np.ones(run_shape, bool) if partial or status is None else status == RUN_STATUS["complete"]
    before = read_write_seqs(src, sizes)
    if before is not None:
        keep &= before % 2 == 0  # a writer inside: never half a write in a snapshot
    metas = _array_metas(src, sizes)
    digest = hashlib.sha256()
    total = sum(len(chunk_keys(m)) for n, m in metas.items() if n in EPISODE_ARRAYS)
    done = 0
    whole = [n for n, m in metas.items() if _is_run_array(m) and n not in EPISODE_ARRAYS]
    for name in whole:
        with reading_store(src, f"publish {src}"):
            metas[name] = _put_whole(group[name], name, keep, sink, digest)
    for name, meta in metas.items():
        if name in whole:
            continue
        sink.put(f"{name}/zarr.json", json.dumps(meta).encode())
        for coords, key in chunk_keys(meta):
            done += name in EPISODE_ARRAYS
            if _is_run_array(meta) and not keep[coords[: len(RUN_DIMS)]]:
                continue
            _copy_chunk(src, sink, f"{name}/{key}", digest)
            if progress is not None and done % 64 == 0:
                progress(done, total)
    notes = _recopy_moved(src, sink, sizes, metas, keep, before, group)
    root = json.loads((src / "zarr.json").read_bytes())
    root.pop("consolidated_metadata", None)
    digest.update(uuid.uuid4().bytes)  # runs copied again are not in the digest: each snapshot its own id
    ident = digest.hexdigest()[:32]
    root.setdefault("attributes", {})[SNAPSHOT_ATTR] = {
        "id": ident, "published": utc_stamp(), "runs": int(keep.sum()), "of": int(keep.size),
        "complete_only": not partial}
    if consolidate:
        root["consolidated_metadata"] = {"kind": "inline", "must_understand": False, "metadata": metas}
    sink.flush()
    sink.put("zarr.json", json.dumps(root).encode())  # last: before it, there is no store at the destination
    sink.flush()
    if progress is not None:
        progress(total, total)
    return int(keep.sum()), int(keep.size), ident, notes


def _put_whole(arr: Any, name: str, keep: np.ndarray, sink: _Sink, digest: Any) -> dict[str, Any]:
    """Write the per-run array `arr` (a zarr array of the source, cut to the grid) into `sink` as one chunk, the
    runs not kept at its fill value, with the source's codecs (CRC-32C); returns its new metadata."""
    import tempfile

    import zarr

    from cube.store.layout import CHUNK_COMPRESSORS

    values = np.asarray(arr[...])
    text = values.dtype.kind in "OTUS"
    fill = "" if text else arr.fill_value
    values[~keep] = fill
    with tempfile.TemporaryDirectory(prefix="saferl-publish-") as tmp:
        group = zarr.open_group(tmp, mode="w", zarr_format=3)
        out = group.create_array(name, shape=values.shape, chunks=values.shape, dtype=str if text else arr.dtype,
                                 fill_value=fill, dimension_names=arr.metadata.dimension_names,
                                 compressors=CHUNK_COMPRESSORS, attributes=dict(arr.attrs))
        out[...] = values.astype(object) if text else values
        for file in sorted(Path(tmp, name).rglob("*")):
            if file.is_file():
                data = file.read_bytes()
                key = file.relative_to(tmp).as_posix()
                if file.name != "zarr.json":
                    digest.update(key.encode() + b"\0" + hashlib.sha256(data).digest())
                sink.put(key, data)
        return json.loads(Path(tmp, name, "zarr.json").read_bytes())


def _array_metas(src: Path, sizes: Sizes) -> dict[str, dict[str, Any]]:
    """Every array of the store but the seqlock, its metadata cut to the published grid `sizes`."""
    metas = {}
    for entry in sorted(src.iterdir()):
        if entry.name.startswith((".", "_")) or entry.name == WRITE_SEQ or not (entry / "zarr.json").is_file():
            continue
        meta = json.loads(cut_metadata((entry / "zarr.json").read_bytes(), sizes))
        if meta.get("node_type") == "array":
            metas[entry.name] = meta
    return metas


def _is_run_array(meta: dict[str, Any]) -> bool:
    return tuple(meta.get("dimension_names") or ())[: len(RUN_DIMS)] == RUN_DIMS


def _copy_chunk(src: Path, sink: _Sink, key: str, digest: Any) -> None:
    """Copy one chunk file (absent: a fill-value chunk, nothing to copy), feeding its key and bytes to `digest`."""
    try:
        data = (src / key).read_bytes()
    except FileNotFoundError:
        return
    digest.update(key.encode() + b"\0" + hashlib.sha256(data).digest())
    sink.put(key, data)


def _recopy_moved(src: Path, sink: _Sink, sizes: Sizes, metas: dict[str, dict[str, Any]], keep: np.ndarray,
                  before: np.ndarray | None, group: Any) -> list[str]:
    """Copy again the kept runs a writer wrote while they were copied, until their write sequences hold
    still and even (at most COPY_TRIES times; CubeError when they never do). Notes name the runs copied again."""
    notes: list[str] = []
    moved: list[tuple[int, ...]] = []
    for _ in range(COPY_TRIES):
        after = read_write_seqs(src, sizes)
        if before is None or after is None:
            return notes
        moved = [run for run in runs_written_since(before, after) if keep[run]]
        if not moved:
            return notes
        notes.append(f"{len(moved)} run(s) written while copied were copied again")
        for name in metas:
            if name not in EPISODE_ARRAYS and _is_run_array(metas[name]):
                with reading_store(src, f"publish {src}"):
                    _put_whole(group[name], name, keep, sink, hashlib.sha256())
        for run in moved:
            for name, meta in metas.items():
                if name in EPISODE_ARRAYS:
                    for coords, key in chunk_keys(meta):
                        if coords[: len(RUN_DIMS)] == run:
                            _copy_chunk(src, sink, f"{name}/{key}", hashlib.sha256())
        before = after
    raise CubeError(f"a writer kept writing {len(moved)} run(s) of {src} while they were copied; publish again "
                    "when it has stopped (or publish without those runs' writer running)")
