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
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from cube.errors import CubeError
from cube.store.snapshot import SnapshotStore, kept_object, prefetch_chunks, prefetch_small

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


S3_CONNECTIONS = 100
"""Connections an S3 client keeps open (botocore's default, 10, would hold a prefetch to 10 requests in flight)."""


def storage_options(url: str) -> dict[str, Any]:
    """fsspec options for `url` from the environment: an S3-compatible endpoint (``AWS_ENDPOINT_URL``), and for
    S3 a connection pool as large as the requests a read keeps in flight. The credentials themselves are found
    by each file system in the environment and its config files."""
    if scheme_of(url) != "s3":
        return {}
    options: dict[str, Any] = {"config_kwargs": {"max_pool_connections": S3_CONNECTIONS}}
    if os.environ.get("AWS_ENDPOINT_URL"):
        options["client_kwargs"] = {"endpoint_url": os.environ["AWS_ENDPOINT_URL"]}
    return options


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
    out concurrently), keeping small objects and taking prefetched chunks (`cube.store.snapshot`)."""
    return SnapshotStore(fsspec_store(url), url)


def fsspec_store(url: str) -> Any:
    """The plain read-only fsspec zarr store over the URL `url` (every read a request)."""
    import zarr
    from zarr.storage import FsspecStore

    if zarr.config.get("async.concurrency") < REMOTE_CONCURRENCY:
        zarr.config.set({"async.concurrency": REMOTE_CONCURRENCY})  # requests wait on the network, not the CPU
    try:
        store = FsspecStore.from_url(url.rstrip("/"), storage_options=storage_options(url) or None, read_only=True)
    except ImportError:
        raise _missing_package(url) from None
    return store


def prefetch_pass(url: str, names: Sequence[str] = ("reward", "cost")) -> int:
    """Start fetching, concurrently and in the background, every chunk of the arrays `names` of the snapshot at
    `url`, for a statistics pass about to read them all (`cube.store.snapshot.prefetch_chunks`); returns how
    many requests were started (0 for a store without consolidated metadata or too large to hold)."""
    meta = remote_root_meta(url)
    if meta.get("consolidated_metadata") is None:
        return 0
    return prefetch_chunks(url, fsspec_store(url), meta, names)  # not the snapshot store: it awaits the prefetch


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
    kept_object(url, "zarr.json", raw)  # zarr's open of the store then asks for it no more
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
        with quiet_consolidated(), warnings.catch_warnings():
            # the per-run arrays of a snapshot are one chunk each, read once and kept (`cube.store.snapshot`):
            # dask blocks of a few runs splitting them cost no request
            warnings.filterwarnings("ignore", message=".*separate the stored chunks.*")
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
