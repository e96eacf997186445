"""Every scalar of a TensorBoard event file, read without TensorFlow: a streaming reader of the TFRecord
framing and the few fields of the `Event` protobuf that scalars use, compiled with numba.

A TFRecord file is a sequence of records: u64 length (little-endian), the masked CRC-32C of those 8
bytes (u32), the data, the masked CRC-32C of the data (u32). Each record's data is a serialized
`tensorflow.Event` (`tensorboard/compat/proto/event.proto`): wall_time (1, double), step (2, int64),
summary (5, `Summary`: repeated value (1, `Summary.Value`: tag (1, string), simple_value (2, float),
tensor (8, `TensorProto`)). A scalar is a `simple_value` (tensorboardX, PyTorch's and TF1's writers) or a
one-element numeric `tensor` (TF2's `tf.summary.scalar`, PyTorch's `new_style=True`): dtype (1), shape (2:
repeated dim (2) with size (1)), tensor_content (4, raw little-endian), float_val (5), double_val (6),
int_val (7), int64_val (10), half_val (13). Other values (histograms, images, text) are skipped.

Unlike TensorBoard's `EventAccumulator` (which keeps 10,000 scalars per tag by default, by reservoir
sampling), nothing is dropped: `scalars` yields every scalar, in file order, a block at a time, so memory
stays bounded by the block (8 MiB of file) whatever the file's size. Both CRCs of every record are
checked; a truncated file or a failed check is one `CubeError` line naming the byte.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import numba
import numpy as np

from cube.errors import CubeError

BLOCK = 1 << 23
"""Bytes read from the file at a time."""
CAPACITY = 1 << 18
"""Scalars decoded per call of the compiled loop (the output arrays' length)."""
OK, NEED_MORE, LENGTH_CRC, DATA_CRC, MALFORMED, FULL = 0, 1, 2, 3, 4, 5
"""Status of the compiled loop: every record parsed / a record runs past the buffer / a length's CRC
failed / a data CRC failed / an Event that is not a valid protobuf / the outputs are full."""
_MASK_DELTA = 0xA282EAD8
_DT_FLOAT, _DT_DOUBLE, _DT_INT32, _DT_INT64, _DT_HALF, _DT_BFLOAT16 = 1, 2, 3, 9, 19, 14


def _crc_table() -> np.ndarray:
    """The 256-entry table of CRC-32C (Castagnoli, reflected polynomial 0x82F63B78)."""
    table = np.zeros(256, dtype=np.uint32)
    for i in range(256):
        c = i
        for _ in range(8):
            c = (c >> 1) ^ 0x82F63B78 if c & 1 else c >> 1
        table[i] = c
    return table


CRC_TABLE = _crc_table()


@numba.njit(cache=True, nogil=True)
def _masked_crc(buf: np.ndarray, start: int, n: int, table: np.ndarray) -> np.uint32:
    crc = np.uint32(0xFFFFFFFF)
    for i in range(start, start + n):
        crc = table[(crc ^ buf[i]) & 0xFF] ^ (crc >> np.uint32(8))
    crc = crc ^ np.uint32(0xFFFFFFFF)
    rotated = (crc >> np.uint32(15)) | (crc << np.uint32(17))
    return np.uint32((np.uint64(rotated) + np.uint64(_MASK_DELTA)) & np.uint64(0xFFFFFFFF))


@numba.njit(cache=True, nogil=True)
def _u32(buf: np.ndarray, pos: int) -> np.uint32:
    return (np.uint32(buf[pos]) | (np.uint32(buf[pos + 1]) << np.uint32(8)) | (np.uint32(buf[pos + 2]) << np.uint32(16))
            | (np.uint32(buf[pos + 3]) << np.uint32(24)))


@numba.njit(cache=True, nogil=True)
def _u64(buf: np.ndarray, pos: int) -> np.uint64:
    return np.uint64(_u32(buf, pos)) | (np.uint64(_u32(buf, pos + 4)) << np.uint64(32))


@numba.njit(cache=True, nogil=True)
def _varint(buf: np.ndarray, pos: int, end: int) -> tuple[np.uint64, int]:
    """(value, position after it); position -1 when the varint runs past `end` or over 10 bytes."""
    value = np.uint64(0)
    shift = np.uint64(0)
    while pos < end and shift < 64:
        b = buf[pos]
        pos += 1
        value |= np.uint64(b & 0x7F) << shift
        if b < 0x80:
            return value, pos
        shift += np.uint64(7)
    return np.uint64(0), -1


@numba.njit(cache=True, nogil=True)
def _skip(buf: np.ndarray, pos: int, end: int, wire: int) -> int:
    """Position after a field's value of wire type `wire`; -1 when malformed."""
    if wire == 0:
        return _varint(buf, pos, end)[1]
    if wire == 1:
        return pos + 8 if pos + 8 <= end else -1
    if wire == 5:
        return pos + 4 if pos + 4 <= end else -1
    if wire == 2:
        n, pos = _varint(buf, pos, end)
        if pos < 0 or np.uint64(end - pos) < n:
            return -1
        return pos + np.int64(n)
    return -1


@numba.njit(cache=True, nogil=True)
def _half(bits: np.uint64) -> float:
    """An IEEE half (the low 16 bits) as a float."""
    h = np.int64(bits & np.uint64(0xFFFF))
    sign = -1.0 if h & 0x8000 else 1.0
    exp = (h >> 10) & 0x1F
    frac = h & 0x3FF
    if exp == 0:
        return sign * frac * 2.0 ** -24
    if exp == 31:
        return sign * np.inf if frac == 0 else np.nan
    return sign * (1.0 + frac / 1024.0) * 2.0 ** (exp - 15)


@numba.njit(cache=True, nogil=True)
def _number(buf: np.ndarray, pos: int, size: int, dtype: int, f32: np.ndarray, f64: np.ndarray) -> float:
    """One little-endian element of `dtype` at `pos` (`size` bytes)."""
    if dtype == _DT_FLOAT:
        f32.view(np.uint32)[0] = _u32(buf, pos)
        return np.float64(f32[0])
    if dtype == _DT_DOUBLE:
        f64.view(np.uint64)[0] = _u64(buf, pos)
        return f64[0]
    if dtype == _DT_INT32:
        return np.float64(np.int32(_u32(buf, pos)))
    if dtype == _DT_INT64:
        return np.float64(np.int64(_u64(buf, pos)))
    if dtype == _DT_HALF:
        return _half(np.uint64(buf[pos]) | (np.uint64(buf[pos + 1]) << np.uint64(8)))
    if dtype == _DT_BFLOAT16:
        f32.view(np.uint32)[0] = (np.uint32(buf[pos]) | (np.uint32(buf[pos + 1]) << np.uint32(8))) << np.uint32(16)
        return np.float64(f32[0])
    return np.nan


@numba.njit(cache=True, nogil=True)
def _element_size(dtype: int) -> int:
    if dtype == _DT_DOUBLE or dtype == _DT_INT64:
        return 8
    if dtype == _DT_FLOAT or dtype == _DT_INT32:
        return 4
    if dtype == _DT_HALF or dtype == _DT_BFLOAT16:
        return 2
    return 0


@numba.njit(cache=True, nogil=True)
def _shape_elements(buf: np.ndarray, pos: int, end: int) -> int:
    """Elements of a TensorShapeProto (1 for a scalar, the product of its dims' sizes); -1 if malformed."""
    count = 1
    while pos < end:
        key, pos = _varint(buf, pos, end)
        if pos < 0:
            return -1
        field, wire = np.int64(key >> np.uint64(3)), np.int64(key & np.uint64(7))
        if field == 2 and wire == 2:  # dim { size = 1 }
            n, pos = _varint(buf, pos, end)
            if pos < 0 or np.uint64(end - pos) < n:
                return -1
            dim_end = pos + np.int64(n)
            size = 1
            while pos < dim_end:
                k2, pos = _varint(buf, pos, dim_end)
                if pos < 0:
                    return -1
                if np.int64(k2 >> np.uint64(3)) == 1 and np.int64(k2 & np.uint64(7)) == 0:
                    s, pos = _varint(buf, pos, dim_end)
                    size = np.int64(s)
                else:
                    pos = _skip(buf, pos, dim_end, np.int64(k2 & np.uint64(7)))
                if pos < 0:
                    return -1
            count *= size
        else:
            pos = _skip(buf, pos, end, wire)
            if pos < 0:
                return -1
    return count


@numba.njit(cache=True, nogil=True)
def _tensor(buf: np.ndarray, pos: int, end: int, f32: np.ndarray, f64: np.ndarray) -> tuple[int, float]:
    """(1, value) for a one-element numeric TensorProto, (0, nan) for another tensor, (-1, nan) if malformed."""
    dtype = 0
    elements = 1
    found = 0  # values in the *_val fields
    content_start, content_stop = -1, -1  # tensor_content's bytes (read after the loop: dtype may follow)
    value = np.nan
    while pos < end:
        key, pos = _varint(buf, pos, end)
        if pos < 0:
            return -1, np.nan
        field, wire = np.int64(key >> np.uint64(3)), np.int64(key & np.uint64(7))
        if field == 1 and wire == 0:
            d, pos = _varint(buf, pos, end)
            dtype = np.int64(d)
        elif field == 2 and wire == 2:
            n, pos = _varint(buf, pos, end)
            if pos < 0 or np.uint64(end - pos) < n:
                return -1, np.nan
            elements = _shape_elements(buf, pos, pos + np.int64(n))
            pos += np.int64(n)
        elif field in (4, 5, 6, 7, 10, 13):
            start = pos
            if wire == 2:
                n, start = _varint(buf, pos, end)
                if start < 0 or np.uint64(end - start) < n:
                    return -1, np.nan
                stop = start + np.int64(n)
            else:
                stop = _skip(buf, pos, end, wire)
                if stop < 0:
                    return -1, np.nan
            pos = stop
            if field == 4:
                content_start, content_stop = start, stop
                continue
            p = start
            while p < stop:  # packed or single values of one field
                if field == 5:
                    f32.view(np.uint32)[0] = _u32(buf, p)
                    value = np.float64(f32[0])
                    p += 4
                elif field == 6:
                    f64.view(np.uint64)[0] = _u64(buf, p)
                    value = f64[0]
                    p += 8
                else:
                    v, p = _varint(buf, p, stop)
                    if p < 0:
                        return -1, np.nan
                    if field == 13:
                        value = _half(v)
                    elif field == 7:
                        value = np.float64(np.int32(np.uint32(v & np.uint64(0xFFFFFFFF))))
                    else:
                        value = np.float64(np.int64(v))
                found += 1
            if p != stop:
                return -1, np.nan
        else:
            pos = _skip(buf, pos, end, wire)
        if pos < 0:
            return -1, np.nan
    size = _element_size(dtype)
    if size == 0 or elements != 1:
        return 0, np.nan
    if content_start >= 0:
        if found or content_stop - content_start != size:
            return 0, np.nan
        return 1, _number(buf, content_start, size, dtype, f32, f64)
    return (1, value) if found == 1 else (0, np.nan)


@numba.njit(cache=True, nogil=True)
def _event(buf: np.ndarray, pos: int, end: int, n: int, cap: int, step_out: np.ndarray, wall_out: np.ndarray,
           value_out: np.ndarray, hash_out: np.ndarray, tag_out: np.ndarray, f32: np.ndarray,
           f64: np.ndarray) -> int:
    """Append the scalars of one Event (buf[pos:end]); returns the new count, -1 if malformed, -2 if the
    outputs cannot hold them (nothing of the event is kept then)."""
    wall = np.nan
    step = np.int64(0)
    summary_start = np.zeros(8, dtype=np.int64)
    summary_end = np.zeros(8, dtype=np.int64)
    n_summaries = 0
    while pos < end:
        key, pos = _varint(buf, pos, end)
        if pos < 0:
            return -1
        field, wire = np.int64(key >> np.uint64(3)), np.int64(key & np.uint64(7))
        if field == 1 and wire == 1:
            if pos + 8 > end:
                return -1
            f64.view(np.uint64)[0] = _u64(buf, pos)
            wall = f64[0]
            pos += 8
        elif field == 2 and wire == 0:
            s, pos = _varint(buf, pos, end)
            step = np.int64(s)
        elif field == 5 and wire == 2:
            m, pos = _varint(buf, pos, end)
            if pos < 0 or np.uint64(end - pos) < m or n_summaries == 8:
                return -1
            summary_start[n_summaries] = pos
            summary_end[n_summaries] = pos + np.int64(m)
            n_summaries += 1
            pos += np.int64(m)
        else:
            pos = _skip(buf, pos, end, wire)
        if pos < 0:
            return -1
    for k in range(n_summaries):
        p, stop = summary_start[k], summary_end[k]
        while p < stop:
            key, p = _varint(buf, p, stop)
            if p < 0:
                return -1
            if np.int64(key >> np.uint64(3)) != 1 or np.int64(key & np.uint64(7)) != 2:
                p = _skip(buf, p, stop, np.int64(key & np.uint64(7)))
                if p < 0:
                    return -1
                continue
            m, p = _varint(buf, p, stop)
            if p < 0 or np.uint64(stop - p) < m:
                return -1
            v_end = p + np.int64(m)
            tag_at, tag_len, got, value = -1, 0, 0, np.nan
            while p < v_end:  # one Summary.Value
                key, p = _varint(buf, p, v_end)
                if p < 0:
                    return -1
                field, wire = np.int64(key >> np.uint64(3)), np.int64(key & np.uint64(7))
                if field == 1 and wire == 2:
                    t, p = _varint(buf, p, v_end)
                    if p < 0 or np.uint64(v_end - p) < t:
                        return -1
                    tag_at, tag_len = p, np.int64(t)
                    p += tag_len
                elif field == 2 and wire == 5:
                    if p + 4 > v_end:
                        return -1
                    f32.view(np.uint32)[0] = _u32(buf, p)
                    value = np.float64(f32[0])
                    got = 1
                    p += 4
                elif field == 8 and wire == 2:
                    t, p = _varint(buf, p, v_end)
                    if p < 0 or np.uint64(v_end - p) < t:
                        return -1
                    got, value = _tensor(buf, p, p + np.int64(t), f32, f64)
                    if got < 0:
                        return -1
                    p += np.int64(t)
                else:
                    p = _skip(buf, p, v_end, wire)
                    if p < 0:
                        return -1
            if got == 1 and tag_at >= 0:
                if n == cap:
                    return -2
                h = np.uint64(14695981039346656037)  # FNV-1a of the tag's bytes
                for i in range(tag_at, tag_at + tag_len):
                    h = (h ^ np.uint64(buf[i])) * np.uint64(1099511628211)
                step_out[n] = step
                wall_out[n] = wall
                value_out[n] = value
                hash_out[n] = h
                tag_out[n, 0] = tag_at
                tag_out[n, 1] = tag_len
                n += 1
    return n


@numba.njit(cache=True, nogil=True)
def _records(buf: np.ndarray, pos: int, table: np.ndarray, step_out: np.ndarray, wall_out: np.ndarray,
             value_out: np.ndarray, hash_out: np.ndarray, tag_out: np.ndarray) -> tuple[int, int, int, int]:
    """Parse whole records of buf[pos:]: (status, position after the last whole record parsed, scalars
    written, records parsed). On an error the position is the failing record's start."""
    f32 = np.zeros(1, dtype=np.float32)
    f64 = np.zeros(1, dtype=np.float64)
    end = buf.size
    n = 0
    records = 0
    cap = step_out.size
    while pos < end:
        if end - pos < 12:
            return NEED_MORE, pos, n, records
        length = _u64(buf, pos)
        if _masked_crc(buf, pos, 8, table) != _u32(buf, pos + 8):
            return LENGTH_CRC, pos, n, records
        if end - pos < 16 or np.uint64(end - pos - 16) < length:
            return NEED_MORE, pos, n, records
        data = pos + 12
        size = np.int64(length)
        if _masked_crc(buf, data, size, table) != _u32(buf, data + size):
            return DATA_CRC, pos, n, records
        got = _event(buf, data, data + size, n, cap, step_out, wall_out, value_out, hash_out, tag_out, f32, f64)
        if got == -2:
            return FULL, pos, n, records
        if got < 0:
            return MALFORMED, pos, n, records
        n = got
        records += 1
        pos = data + size + 4
    return OK, pos, n, records


@dataclass
class TagTable:
    """Tag names by id, shared by the blocks of one or more files: names[id] (ids from 0 in first-seen order)."""

    names: list[str] = field(default_factory=list)
    by_hash: dict[int, int] = field(default_factory=dict)

    def ids(self, buf: np.ndarray, hashes: np.ndarray, spans: np.ndarray) -> np.ndarray:
        """The tag id of every scalar (n,) int32, from its tag's hash; the first occurrence's bytes name it."""
        unique, first, inverse = np.unique(hashes, return_index=True, return_inverse=True)
        ids = np.empty(unique.size, dtype=np.int32)
        for k, (h, i) in enumerate(zip(unique.tolist(), first.tolist(), strict=True)):
            if h not in self.by_hash:
                at, n = spans[i]
                self.by_hash[h] = len(self.names)
                self.names.append(bytes(buf[at:at + n]).decode("utf-8", errors="replace"))
            ids[k] = self.by_hash[h]
        return ids[inverse.ravel()]

    def id_of(self, name: str) -> int | None:
        return self.names.index(name) if name in self.names else None


@dataclass
class ScalarBlock:
    """Scalars of consecutive records, in file order: tag_ids (n,) int32 (names in the `TagTable`), steps
    (n,) int64, wall_times (n,) float64 (POSIX seconds), values (n,) float64. `records`: the records
    (events) they came from."""

    tag_ids: np.ndarray
    steps: np.ndarray
    wall_times: np.ndarray
    values: np.ndarray
    records: int


def scalars(path: str | Path, tags: TagTable, block: int = BLOCK) -> Iterator[ScalarBlock]:
    """Every scalar of the event file `path`, in file order, a block at a time (see the module's doc);
    `tags` names their tag ids (and gains the new tags). CubeError when a record is truncated, fails a
    CRC check or is not an Event."""
    path = Path(path)
    out = (np.empty(CAPACITY, np.int64), np.empty(CAPACITY, np.float64), np.empty(CAPACITY, np.float64),
           np.empty(CAPACITY, np.uint64), np.empty((CAPACITY, 2), np.int64))
    rest = np.empty(0, dtype=np.uint8)
    offset = 0  # file offset of rest[0]
    try:
        f = path.open("rb")
    except OSError as exc:
        raise CubeError(f"cannot read {path} ({exc.strerror or type(exc).__name__})") from None
    with f:
        while True:
            chunk = f.read(block)
            buf = np.concatenate([rest, np.frombuffer(chunk, dtype=np.uint8)])  # writable: one compiled signature
            pos = 0
            while True:
                status, pos, n, records = _records(buf, pos, CRC_TABLE, *out)
                if n or records:
                    yield ScalarBlock(tags.ids(buf, out[3][:n], out[4][:n]), out[0][:n].copy(),
                                      out[1][:n].copy(), out[2][:n].copy(), records)
                if status != FULL:
                    break
                if not (n or records):
                    raise CubeError(f"{path}: an event at byte {offset + pos:,} holds more than {CAPACITY:,} scalars")
            if status in (LENGTH_CRC, DATA_CRC, MALFORMED):
                what = {LENGTH_CRC: "its length fails its CRC-32C check", DATA_CRC: "its data fail their CRC-32C check",
                        MALFORMED: "it is not a TensorBoard Event"}[status]
                raise CubeError(f"{path}: the record at byte {offset + pos:,} is damaged: {what}; the file is "
                                "corrupt: import a good copy")
            rest = buf[pos:]
            offset += pos
            if not chunk:
                if rest.size:
                    raise CubeError(f"{path} is truncated: its last record, at byte {offset:,}, ends "
                                    f"{rest.size:,} bytes in (was the writer stopped mid-write?); import a complete "
                                    "copy")
                return
