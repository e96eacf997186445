"""Where a store lives: the one place that tells a local path from a URL (`s3://`, `gs://`, `http(s)://`,
`file://`) and opens a remote store, read-only, through fsspec (the optional extra ``saferl[remote]``).

A remote store is a published snapshot (`saferl publish`): immutable, so its readers skip what only local
writers need (the published-grid view, the writers' seqlock, locks and claims), and every writer refuses it
(`refuse_url`). Credentials come from the environment and the usual config files of each file system
(``AWS_ACCESS_KEY_ID``, ``AWS_ENDPOINT_URL``, ``~/.aws``, ``GOOGLE_APPLICATION_CREDENTIALS``, ...); a URL is
shown only through `redact`, which drops user info and query strings.
"""

from __future__ import annotations

import functools
import json
import os
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from cube.errors import CubeError

REMOTE_SCHEMES = ("s3", "gs", "gcs", "http", "https")
"""URL schemes read through fsspec; `file://` is read as the local path it names."""

SNAPSHOT_ATTR = "saferl_snapshot"
"""Root attribute of a published snapshot: {"id": content hash, "published": UTC stamp, "runs": n}."""

REMOTE_CONCURRENCY = 64
"""Chunk requests one zarr read keeps in flight against a remote store (zarr's default, 10, suits disks: at
100 ms a round trip, 64 make a demo cube's report a few seconds instead of a minute and a half)."""

REMOTE_BLOCK_RUNS = 30
"""Runs per dask block of a pass over a remote store: one task's chunks are one concurrent zarr read."""

REMOTE_WORKERS = 16
"""Dask threads of a pass over a remote store: while some tasks wait for their chunks, others compute."""

EXTRA_HINT = "install the remote extra: pip install 'saferl[remote]'"


def scheme_of(source: Any) -> str:
    """The URL scheme of `source` in lower case ('' for a plain path or a non-string)."""
    if not isinstance(source, str) or "://" not in source:
        return ""
    return source.split("://", 1)[0].lower()


def is_remote(source: Any) -> bool:
    """Whether `source` is a URL read through fsspec (not a local path, not `file://`)."""
    return scheme_of(source) in REMOTE_SCHEMES


def local_path(source: Any) -> Any:
    """`file://` URLs as the local path they name; everything else unchanged."""
    if scheme_of(source) == "file":
        return urlsplit(source).path
    return source


def redact(source: Any) -> str:
    """`source` as text safe to print or save: a URL without its user info (``key:secret@``), query string
    and fragment (presigned signatures, tokens)."""
    text = str(source)
    if "://" not in text:
        return text
    parts = urlsplit(text)
    host = parts.hostname or ""
    if parts.port:
        host = f"{host}:{parts.port}"
    return urlunsplit((parts.scheme, host, parts.path, "", ""))


def refuse_url(source: Any, what: str) -> None:
    """CubeError (one line) when a writer is given a URL: remote stores are read-only published snapshots."""
    if scheme_of(source) and scheme_of(source) != "file":
        raise CubeError(f"cannot {what} {redact(source)}: a store at a URL is read-only (it cannot hold the locks "
                        "that make concurrent writes safe); write to a local store, then `saferl publish` it there")


def storage_options(url: str) -> dict[str, Any]:
    """fsspec options for `url` from the environment: an S3-compatible endpoint (``AWS_ENDPOINT_URL``). The
    credentials themselves are found by each file system in the environment and its config files."""
    if scheme_of(url) == "s3" and os.environ.get("AWS_ENDPOINT_URL"):
        return {"client_kwargs": {"endpoint_url": os.environ["AWS_ENDPOINT_URL"]}}
    return {}


def _missing_package(url: str) -> CubeError:
    package = {"s3": "s3fs", "gs": "gcsfs", "gcs": "gcsfs"}.get(scheme_of(url), "aiohttp")
    return CubeError(f"cannot read {redact(url)}: {package} is not installed; {EXTRA_HINT}")


def filesystem(url: str) -> tuple[Any, str]:
    """(fsspec file system, path inside it) for a remote URL; CubeError when its package is missing."""
    try:
        import fsspec
    except ImportError:
        raise CubeError(f"cannot read {redact(url)}: fsspec is not installed; {EXTRA_HINT}") from None
    try:
        return fsspec.core.url_to_fs(url, **storage_options(url))
    except ImportError:
        raise _missing_package(url) from None


def remote_error(exc: BaseException, url: str, what: str = "read") -> CubeError:
    """The one line for a failed remote request: missing, forbidden, unreachable or other."""
    if isinstance(exc, CubeError):
        return exc
    text = f"{type(exc).__name__} {exc}".lower()
    where = redact(url)
    if isinstance(exc, FileNotFoundError) or "404" in text or "nosuchbucket" in text or "not found" in text:
        return CubeError(f"cannot {what} {where}: it does not exist (no zarr.json there); check the URL")
    if isinstance(exc, PermissionError) or "403" in text or "accessdenied" in text or "forbidden" in text:
        return CubeError(f"cannot {what} {where}: access denied; check the credentials in your environment "
                         "(AWS_ACCESS_KEY_ID / AWS_PROFILE, GOOGLE_APPLICATION_CREDENTIALS)")
    first = (str(exc).strip().splitlines() or [type(exc).__name__])[0][:160]
    return CubeError(f"cannot {what} {where}: {type(exc).__name__}: {first}")


def open_remote_store(url: str) -> Any:
    """A read-only zarr store over the URL `url` (fsspec, asynchronous: the chunk requests of one read go
    out concurrently)."""
    import zarr
    from zarr.storage import FsspecStore

    if zarr.config.get("async.concurrency") < REMOTE_CONCURRENCY:
        zarr.config.set({"async.concurrency": REMOTE_CONCURRENCY})  # requests wait on the network, not the CPU
    try:
        store = FsspecStore.from_url(url.rstrip("/"), storage_options=storage_options(url) or None, read_only=True)
    except ImportError:
        raise _missing_package(url) from None
    return SnapshotStore(store, url)


SMALL_OBJECT_BYTES = 1 << 20
"""Objects of a remote snapshot up to this size are kept in memory once read (metadata, coordinates, the
one-chunk per-run arrays): a snapshot never changes, and each later open or read of them costs no request."""

_KEPT: dict[tuple[str, str], bytes] = {}


def _snapshot_store_class() -> type:
    from zarr.storage import WrapperStore

    class Snapshot(WrapperStore):
        """A remote snapshot's store: small objects kept once read (`SMALL_OBJECT_BYTES`)."""

        def __init__(self, store: Any, url: str) -> None:
            super().__init__(store)
            self.url = url

        def _with_store(self, store: Any) -> Any:
            return type(self)(store, self.url)

        def __reduce__(self) -> tuple[Any, ...]:  # dask ships the store to its workers
            return (SnapshotStore, (self._store, self.url))

        async def get(self, key: str, prototype: Any, byte_range: Any = None) -> Any:
            if byte_range is None and (self.url, key) in _KEPT:
                return prototype.buffer.from_bytes(_KEPT[(self.url, key)])
            buf = await self._store.get(key, prototype, byte_range)
            if buf is not None and byte_range is None and len(buf) <= SMALL_OBJECT_BYTES:
                _KEPT[(self.url, key)] = buf.to_bytes()
            return buf

    return Snapshot


def SnapshotStore(store: Any, url: str) -> Any:  # noqa: N802 - a class made on first use (zarr imported late)
    """`store` (an FsspecStore of the snapshot at `url`) keeping its small objects once read."""
    global _SNAPSHOT_CLASS
    if _SNAPSHOT_CLASS is None:
        _SNAPSHOT_CLASS = _snapshot_store_class()
    return _SNAPSHOT_CLASS(store, url)


_SNAPSHOT_CLASS: type | None = None


def prefetch_small(url: str, store: Any, meta: dict[str, Any]) -> None:
    """Read, concurrently in one batch, every one-chunk array of the snapshot (coordinates, per-run arrays
    written whole by `saferl publish`) named in its consolidated metadata `meta`: opening it then costs one
    round trip for them all instead of one per array."""
    import asyncio

    from zarr.core.buffer import default_buffer_prototype
    from zarr.core.sync import sync

    keys = []
    for name, array in ((meta.get("consolidated_metadata") or {}).get("metadata") or {}).items():
        try:
            shape, chunks = array["shape"], array["chunk_grid"]["configuration"]["chunk_shape"]
            one = all(int(c) >= int(n) for n, c in zip(shape, chunks, strict=True))
            default = (array.get("chunk_key_encoding") or {}).get("name") == "default"
        except (KeyError, TypeError, ValueError):
            continue
        key = f"{name}/" + "/".join(["c", *["0"] * len(shape)])
        if one and default and (url, key) not in _KEPT:
            keys.append(key)

    async def fetch() -> None:  # inside zarr's event loop, where the store's session lives
        prototype = default_buffer_prototype()
        await asyncio.gather(*(store.get(key, prototype) for key in keys), return_exceptions=True)

    if keys:
        sync(fetch())


@functools.lru_cache(maxsize=32)
def remote_root_meta(url: str) -> dict[str, Any]:
    """The root ``zarr.json`` of the store at `url` as a dict; CubeError (one line) when it cannot be read.
    Kept once read (a published snapshot never changes; a failed read is not kept)."""
    fs, path = filesystem(url)
    try:
        raw = fs.cat_file(f"{path.rstrip('/')}/zarr.json")
    except Exception as exc:  # noqa: BLE001 - each file system raises its own types
        raise remote_error(exc, url) from None
    try:
        meta = json.loads(raw)
    except ValueError:
        raise CubeError(f"cannot read {redact(url)}: its zarr.json is not JSON; is it a Zarr v3 store?") from None
    if not isinstance(meta, dict) or meta.get("node_type") != "group":
        raise CubeError(f"cannot read {redact(url)}: its zarr.json is not a Zarr v3 group; give a results store")
    return meta


def snapshot_id(url: str) -> str | None:
    """The content id a `saferl publish` snapshot carries (None for other stores: not known immutable)."""
    snap = (remote_root_meta(url).get("attributes") or {}).get(SNAPSHOT_ATTR)
    return str(snap["id"]) if isinstance(snap, dict) and snap.get("id") else None


def cache_home() -> Path:
    """saferl's local cache folder (``$SAFERL_CACHE_DIR``, else ``$XDG_CACHE_HOME/saferl``)."""
    if os.environ.get("SAFERL_CACHE_DIR"):
        return Path(os.environ["SAFERL_CACHE_DIR"])
    return Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "saferl"


def remote_cache_folder(url: str) -> Path | None:
    """The local folder that keeps the statistics of the remote store `url`, keyed by its snapshot id (a
    store that is no saferl snapshot is not known immutable: None, never cached)."""
    ident = snapshot_id(url)
    if ident is None:
        return None
    folder = cache_home() / "remote" / ident
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError:
        return None
    return folder


@contextmanager
def quiet_consolidated() -> Iterator[None]:
    """Inside, zarr's note that consolidated metadata is not in the v3 spec yet stays silent (a published
    snapshot is consolidated once, on purpose: opening it is one request)."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=".*[Cc]onsolidated metadata.*")
        yield


def open_remote_dataset(url: str, chunks: dict[str, int], lazy: bool = True) -> Any:
    """The cube at `url` as a lazy xarray Dataset (dask `chunks` per dim; `lazy=False`: no dask). A published
    snapshot has consolidated metadata: opening it is one request (HTTP cannot list a folder, so a store
    there must have it). CubeError (one line) for a URL that is missing, forbidden or no Zarr v3 store."""
    import xarray as xr

    meta = remote_root_meta(url)
    consolidated = meta.get("consolidated_metadata") is not None
    if not consolidated and scheme_of(url) in ("http", "https"):
        raise CubeError(f"cannot read {redact(url)}: a store served over HTTP needs consolidated metadata (HTTP "
                        "cannot list folders); publish it with `saferl publish CUBE DEST --consolidate`")
    store = open_remote_store(url)
    prefetch_small(url, store, meta)
    try:
        with quiet_consolidated():
            return xr.open_zarr(store, consolidated=consolidated, chunks=chunks if lazy else None, zarr_format=3)
    except Exception as exc:  # noqa: BLE001 - fsspec, zarr and xarray raise many types for remote failures
        raise remote_error(exc, url) from None


def open_remote_group(url: str) -> Any:
    """The root zarr group of the store at `url`, read-only (consolidated metadata where it has it)."""
    import zarr

    meta = remote_root_meta(url)
    consolidated = meta.get("consolidated_metadata") is not None
    try:
        with quiet_consolidated():
            return zarr.open_group(open_remote_store(url), mode="r", use_consolidated=consolidated or None,
                                   zarr_format=3)
    except Exception as exc:  # noqa: BLE001 - fsspec and zarr raise many types for remote failures
        raise remote_error(exc, url) from None


def remote_blocks(sizes: dict[str, int], runs: int) -> dict[str, int]:
    """Dask chunk sizes along the run dims (seed first, then bound, task, algo) holding at most `runs` runs:
    each task of a pass over a remote store then fetches its many one-run chunks in one concurrent read."""
    out: dict[str, int] = {}
    for dim in ("seed", "bound", "task", "algo"):
        take = max(1, min(sizes[dim], runs))
        out[dim] = take
        runs //= take
    return out
