"""Per-run arrays read straight from their chunk files (issue 37): one small chunk per run (a manifest, a
status, a run's env steps) costs zarr half a millisecond of per-chunk machinery, seconds at 1,440 runs, for a
few bytes of zstd. Arrays in the codec chains this package writes (`bytes` or `vlen-utf8`, then `zstd`, then
`crc32c`; a regular grid of one run per chunk, each chunk holding the rest of its dims whole; default chunk
keys) are read here: every file read, its CRC-32C checked, zstd-decoded and its length checked.

Anything else, and any chunk that does not verify, gives None: the caller reads the array through zarr then,
which names a damaged chunk (`cube.store.damage`) exactly as before. So this is a faster way to the same
values, never a second judge of damage.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from functools import cache
from pathlib import Path
from typing import Any

import numpy as np

from cube.schema import RUN_DIMS

CHAINS = (["bytes", "zstd", "crc32c"], ["vlen-utf8", "zstd", "crc32c"])
ARRAY_CHAINS = (*CHAINS, ["bytes", "blosc", "crc32c"])
"""The chains `read_array` reads: CHAINS and Blosc's (the statistics cache's numbers)."""


def read_run_array(store: Path, name: str, sizes: Mapping[str, int] | None = None) -> np.ndarray | None:
    """The array `name` of the local Zarr store `store`, cut to the grid `sizes` (dim -> length; None: its
    whole shape), as zarr reads it (the fill value where no chunk was written; strings as an object array);
    None where the array is not in a layout this module reads, or a chunk does not verify."""
    layout = _layout(store / name, sizes)
    if layout is None:
        return None
    shape, chunk, dtype, fill, strings = layout
    out = np.full(shape, fill, dtype=object if strings else dtype)
    per_chunk = int(np.prod(chunk, dtype=np.int64))
    cut = tuple(slice(0, n) for n in shape[len(RUN_DIMS):])
    folder, inner = f"{store}/{name}/c/", "/0" * (len(chunk) - len(RUN_DIMS))
    for index in np.ndindex(*shape[:len(RUN_DIMS)]):
        try:
            data = read_file(folder + "/".join(map(str, index)) + inner)  # a file per run
        except (FileNotFoundError, NotADirectoryError):
            continue  # never written: the fill value
        except OSError:
            return None
        values = _decode(data, "zstd", dtype, per_chunk, strings)
        if values is None:
            return None
        out[index] = values.reshape(chunk[len(RUN_DIMS):])[cut]
    return out


def _layout(folder: Path, sizes: Mapping[str, int] | None
            ) -> tuple[tuple[int, ...], tuple[int, ...], np.dtype, Any, bool] | None:
    """(shape cut to `sizes`, chunk shape, dtype, fill value, whether strings) of a readable array, else None."""
    try:
        meta = json.loads((folder / "zarr.json").read_text())
        names = [c["name"] for c in meta["codecs"]]
        dims = tuple(meta.get("dimension_names") or ())
        full = [int(n) for n in meta["shape"]]
        chunk = tuple(int(n) for n in meta["chunk_grid"]["configuration"]["chunk_shape"])
        keys = meta["chunk_key_encoding"]
        strings = meta["data_type"] == "string"
        dtype = np.dtype(object) if strings else np.dtype(meta["data_type"]).newbyteorder("<")
        endian = next(c for c in meta["codecs"] if c["name"] in ("bytes", "vlen-utf8")).get("configuration") or {}
    except (OSError, ValueError, KeyError, TypeError, StopIteration):
        return None
    n = len(RUN_DIMS)
    if (names not in CHAINS or dims[:n] != RUN_DIMS or len(chunk) != len(full) or chunk[:n] != (1,) * n
            or list(chunk[n:]) != full[n:] or meta["chunk_grid"].get("name") != "regular"
            or keys.get("name") != "default" or (keys.get("configuration") or {}).get("separator", "/") != "/"
            or endian.get("endian", "little") != "little" or (names[0] == "vlen-utf8") != strings
            or meta.get("storage_transformers")):
        return None
    sizes = sizes or {}
    shape = tuple(min(length, int(sizes.get(d, length))) for d, length in zip(dims, full, strict=True))
    fill = meta.get("fill_value")
    if strings:
        fill = "" if fill is None else str(fill)
    elif isinstance(fill, str):  # "NaN", "Infinity", "-Infinity"
        fill = float(fill)
    elif fill is None:
        return None
    return shape, chunk, dtype, fill, strings


def read_file(path: str) -> bytes:
    """A chunk file's bytes in one unbuffered read (thousands per pass: no Path, no buffer object)."""
    with open(path, "rb", buffering=0) as fh:
        return fh.readall()


def read_file_stat(path: str) -> tuple[bytes, os.stat_result]:
    """`read_file`, and the file's stat taken (fstat of the open file) before its bytes are read: the inode,
    size and times of what was read, even where a writer renames a new file into its place meanwhile."""
    with open(path, "rb", buffering=0) as fh:
        st = os.fstat(fh.fileno())
        return fh.readall(), st


def read_into(path: str, buffer: np.ndarray) -> tuple[np.ndarray | None, os.stat_result]:
    """`read_file_stat` into a reused `buffer` (uint8, C-contiguous) instead of a new bytes object: (the filled
    part of `buffer`, or None where the file does not fit in it or was not read whole: read it with
    `read_file_stat` then; the fstat taken before the read). Raises FileNotFoundError for an absent file."""
    fd = os.open(path, os.O_RDONLY)
    try:
        st = os.fstat(fd)
        n = os.readv(fd, [buffer])
    finally:
        os.close(fd)
    return (buffer[:n] if n == st.st_size < buffer.size else None), st


def verify_and_decode(data: bytes | np.ndarray, codec: str, out: np.ndarray) -> bool:
    """Check a chunk file's CRC-32C and decode its `codec` ("zstd" or "blosc") payload straight into `out`
    (C-contiguous, exactly the chunk's decoded size): whether both verified (`out` then holds the values).
    `data`: the file's bytes, or a uint8 array of them (`read_into`). Blosc fills a larger buffer silently,
    so its header's decoded size must be `out`'s (and its compressed size the payload's)."""
    from google_crc32c import value as crc32c

    raw = np.frombuffer(data, dtype=np.uint8)  # views: no copy of the payload
    body = raw[:-4]
    if raw.size < 4 or crc32c(body) != int.from_bytes(raw[-4:], "little"):
        return False
    try:
        if codec == "blosc":
            return _blosc_into(body, out)
        from numcodecs.zstd import Zstd

        Zstd().decode(body, out=out)  # the exact size or an error: a short or long chunk does not verify
    except Exception:  # noqa: BLE001 - not a frame of that codec: zarr names it
        return False
    return True


BLOSC_HEADER = 16
"""Bytes of a Blosc frame's header: version, flags, typesize (4), then the decoded, block and frame sizes."""


def _blosc_into(frame: np.ndarray, out: np.ndarray) -> bool:
    """Decode a Blosc frame (uint8 array) into `out` (C-contiguous) when its header gives `out`'s size and the
    frame's own length: whether it did."""
    if (frame.size < BLOSC_HEADER or int.from_bytes(frame[4:8], "little") != out.nbytes
            or int.from_bytes(frame[12:16], "little") != frame.size):
        return False
    decompress = blosc_decompress_ctx()
    if decompress is None:
        from numcodecs.blosc import decompress as numcodecs_decompress

        numcodecs_decompress(frame, out)
        return True
    return decompress(frame.ctypes.data, out.ctypes.data, out.nbytes, 1) == out.nbytes


@cache
def blosc_decompress_ctx() -> Any:
    """`blosc_decompress_ctx(src, dest, destsize, threads)` of the Blosc library inside numcodecs (the one zarr
    decodes with), called through ctypes: without the GIL, as numcodecs calls it from a thread, and without
    numcodecs' per-call argument handling (7 us of Python a chunk, about 0.2 s of CPU in a paper-scale pass:
    docs/performance.md, sixth round). It keeps no state between calls, so threads may call it at once.
    None where that library does not export it (numcodecs' own `decompress` then)."""
    import ctypes

    try:
        import numcodecs.blosc

        function = ctypes.CDLL(numcodecs.blosc.__file__).blosc_decompress_ctx
    except (ImportError, OSError, AttributeError):
        return None
    function.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
    function.restype = ctypes.c_int
    return function


def _decode(data: bytes, codec: str, dtype: np.dtype, count: int, strings: bool,
            into: np.ndarray | None = None) -> np.ndarray | None:
    """One chunk file's values (flat), or None when its checksum, frame or length does not verify; decoded
    straight into `into` (C-contiguous, `count` values of `dtype`) when given, and that returned. `codec`: the
    compressor of the chain ("zstd" or "blosc")."""
    if into is not None:
        return into if verify_and_decode(data, codec, into) else None
    import google_crc32c
    from numcodecs import Blosc, Zstd

    body, crc = np.frombuffer(data, dtype=np.uint8)[:-4], data[-4:]
    if len(data) < 4 or google_crc32c.value(body).to_bytes(4, "little") != crc:
        return None
    try:
        raw = bytes((Blosc() if codec == "blosc" else Zstd()).decode(body))
    except Exception:  # noqa: BLE001 - not a frame of that codec: zarr names it
        return None
    if not strings:
        return np.frombuffer(raw, dtype=dtype) if len(raw) == count * dtype.itemsize else None
    return _vlen_utf8(raw, count)


def _vlen_utf8(raw: bytes, count: int) -> np.ndarray | None:
    """The strings of a vlen-utf8 chunk (a little-endian uint32 count, then each item's uint32 length and bytes)."""
    if len(raw) < 4 or int.from_bytes(raw[:4], "little") != count:
        return None
    out = np.empty(count, dtype=object)
    at = 4
    try:
        for i in range(count):
            length = int.from_bytes(raw[at:at + 4], "little")
            item = raw[at + 4:at + 4 + length]
            if len(item) != length or at + 4 > len(raw):
                return None
            out[i] = item.decode("utf-8")
            at += 4 + length
    except UnicodeDecodeError:
        return None
    return out if at == len(raw) else None


def read_array(folder: Path) -> tuple[np.ndarray, tuple[str, ...], dict[str, Any]] | None:
    """A whole array of a local Zarr v3 store read straight from its chunk files: (values as zarr reads them,
    strings as an object array; its dimension names; its attributes). Any regular chunk grid with default keys
    ("/" or "." between their parts) and a codec chain of CHAINS, every chunk written (a store of this package's
    own, such as the statistics cache); None otherwise, or where a chunk is missing or does not verify (read it
    through zarr then)."""
    try:
        meta = json.loads((folder / "zarr.json").read_text())
        names = [c["name"] for c in meta["codecs"]]
        shape = tuple(int(n) for n in meta["shape"])
        chunk = tuple(int(n) for n in meta["chunk_grid"]["configuration"]["chunk_shape"])
        dims = tuple(str(d) for d in meta.get("dimension_names") or ())
        keys = meta["chunk_key_encoding"]
        separator = (keys.get("configuration") or {}).get("separator", "/")
        strings = meta["data_type"] == "string"
        dtype = np.dtype(object) if strings else np.dtype(meta["data_type"]).newbyteorder("<")
        endian = next(c for c in meta["codecs"] if c["name"] in ("bytes", "vlen-utf8")).get("configuration") or {}
        attrs = dict(meta.get("attributes") or {})
    except (OSError, ValueError, KeyError, TypeError, StopIteration):
        return None
    if (names not in ARRAY_CHAINS or (names[0] == "vlen-utf8") != strings or not shape or len(dims) != len(shape)
            or len(chunk) != len(shape) or min(chunk) < 1 or meta["chunk_grid"].get("name") != "regular"
            or keys.get("name") != "default" or separator not in ("/", ".")
            or endian.get("endian", "little") != "little" or meta.get("storage_transformers")):
        return None
    out = np.empty(shape, dtype=dtype)
    per_chunk = int(np.prod(chunk, dtype=np.int64))

    def read_chunk(index: tuple[int, ...]) -> bool:
        try:
            data = (folder / separator.join(("c", *map(str, index)))).read_bytes()
        except OSError:
            return False
        place = tuple(slice(i * c, min((i + 1) * c, n)) for i, c, n in zip(index, chunk, shape, strict=True))
        dest = out[place]
        direct = not strings and dest.size == per_chunk and dest.flags.c_contiguous  # a whole chunk, in one piece
        values = _decode(data, names[1], dtype, per_chunk, strings, dest.reshape(-1) if direct else None)
        if values is None:
            return False
        if not direct:
            out[place] = values.reshape(chunk)[tuple(slice(0, p.stop - p.start) for p in place)]
        return True

    indices = list(np.ndindex(*(-(-n // c) for n, c in zip(shape, chunk, strict=True))))
    if strings or len(indices) < 2 or out.nbytes < PARALLEL_READ_BYTES:
        return (out, dims, attrs) if all(map(read_chunk, indices)) else None
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(2, thread_name_prefix="saferl-read-array") as pool:  # the codecs release the GIL
        return (out, dims, attrs) if all(pool.map(read_chunk, indices)) else None


PARALLEL_READ_BYTES = 8 * 2**20
"""`read_array` decodes the chunks of an array this large (decoded) on two threads (the statistics cache's CDF
counts: about 170 MB at paper scale)."""
