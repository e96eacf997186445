"""Numeric arrays written straight to their chunk files: what zarr writes for a chain of the `bytes` codec,
Blosc and the CRC-32C, file for file, without zarr's per-chunk machinery. zarr writes the array's metadata
(`write_metadata`); each chunk is compressed by the Blosc library zarr itself calls (numcodecs), its CRC-32C
appended, and written under the default chunk key (`write_chunks`), before or after the metadata. The
statistics cache's numbers go this way (`cube.stats.cache`): 0.85 s of CPU through xarray and zarr at paper
scale, 0.3-0.4 s straight (docs/performance.md, sixth round).

A writer of a whole array into a new group of its own (every chunk written, nothing read back), so there is
no partial chunk to merge and no other writer to race: the group is moved into place whole afterwards.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import zarr
from zarr.codecs import BloscCodec, Crc32cCodec

SHUFFLES = {"noshuffle": 0, "shuffle": 1, "bitshuffle": 2}
"""numcodecs' Blosc shuffle codes by the names of zarr's `BloscCodec`."""


class CodecMismatch(ValueError):
    """zarr stores a Blosc codec other than the one `write_chunks` compresses with: the chunk files written
    straight would not read back (a zarr or numcodecs version that changed how it records the codec)."""


def writes_straight(compressors: Sequence[Any], values: np.ndarray) -> bool:
    """Whether `write_metadata` and `write_chunks` write an array of `values` with `compressors`: Blosc then the
    CRC-32C, a numeric little-endian dtype (anything else goes through zarr)."""
    return (len(compressors) == 2 and isinstance(compressors[0], BloscCodec)
            and isinstance(compressors[1], Crc32cCodec) and values.dtype.kind in "biuf"
            and values.dtype.byteorder in "=<|" and values.ndim > 0)


def write_metadata(group: zarr.Group, name: str, values: np.ndarray, *, dims: Sequence[str], chunks: Sequence[int],
                   compressors: Sequence[Any], fill_value: Any, attributes: Mapping[str, Any],
                   separator: str = "/") -> None:
    """The metadata (``zarr.json``) of array `name` of `values`' shape and dtype in the local v3 `group`, written
    by zarr; its chunk files are `write_chunks`'s, before or after. Raises CodecMismatch where zarr stores a Blosc
    codec other than the one `write_chunks` compresses with (`blosc_codec`)."""
    array = group.create_array(name, shape=values.shape, chunks=tuple(chunks), dtype=values.dtype,
                               fill_value=fill_value, dimension_names=tuple(dims), compressors=compressors,
                               attributes=dict(attributes),
                               chunk_key_encoding={"name": "default", "separator": separator})
    stored = next(c for c in array.metadata.codecs if isinstance(c, BloscCodec))
    if _numcodecs_blosc(stored, stored.typesize).get_config() != blosc_codec(compressors, values.dtype).get_config():
        raise CodecMismatch(f"zarr stores {name} with {stored}, not the codec its chunks were written with")


def blosc_codec(compressors: Sequence[Any], dtype: np.dtype) -> Any:
    """numcodecs' Blosc of the chain's `BloscCodec` as zarr stores it for `dtype`: its typesize the item size."""
    blosc = compressors[0]
    return _numcodecs_blosc(blosc, blosc.typesize or np.dtype(dtype).itemsize)


def _numcodecs_blosc(blosc: BloscCodec, typesize: int) -> Any:
    from numcodecs import Blosc

    return Blosc(cname=blosc.cname.value, clevel=blosc.clevel, shuffle=SHUFFLES[blosc.shuffle.value],
                 blocksize=blosc.blocksize, typesize=typesize)


def write_chunks(folder: Path, name: str, values: np.ndarray, *, chunks: Sequence[int], compressors: Sequence[Any],
                 fill_value: Any, separator: str = "/") -> None:
    """Every chunk of `values` (C order, the last chunk of a dim cut short as zarr cuts it) compressed with
    `compressors` (`writes_straight`; Blosc releases the GIL) into its file under ``folder/name``: zarr's
    default chunk key with `separator`, ``c/i/j/...`` (a folder per level) or ``c.i.j...`` (every file in the
    array's folder)."""
    from google_crc32c import value as crc32c

    codec = blosc_codec(compressors, values.dtype)
    made = set()
    for index in itertools.product(*(range(-(-n // c)) for n, c in zip(values.shape, chunks, strict=True))):
        part = values[tuple(slice(i * c, (i + 1) * c) for i, c in zip(index, chunks, strict=True))]
        if part.shape != tuple(chunks):  # zarr writes an edge chunk whole, the fill value beyond the array
            whole = np.full(tuple(chunks), fill_value, dtype=values.dtype)
            whole[tuple(slice(0, n) for n in part.shape)] = part
            part = whole
        body = codec.encode(np.ascontiguousarray(part))
        file = folder / name / separator.join(("c", *map(str, index)))
        if file.parent not in made:
            file.parent.mkdir(parents=True, exist_ok=True)
            made.add(file.parent)
        with open(file, "wb") as fh:
            fh.write(body)
            fh.write(crc32c(body).to_bytes(4, "little"))
