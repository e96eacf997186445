"""The codec sweep behind the episode chunks' codec (issue 37): size and speed of candidate codecs on real chunks.

    nice -n 19 .venv/bin/python bench/codec_sweep.py [--cube bench/out/paper.zarr] [--chunks 400] [--rounds 5]

Takes --chunks reward and cost chunks of --cube (any layout or codec; every chunk decoded through its own
codec first, so each candidate sees the same float32 values), spread over its runs, and for each candidate
codec (zstd levels, LZ4, Blosc with and without a byte or bit shuffle) prints: the stored size against the
raw float32 bytes, the encode time per chunk (one thread: what a writer pays per chunk it writes) and the
decode time per chunk with one and with two threads, each into a reused buffer as the statistics pass
decodes (fastest of --rounds, wall clock per chunk; the candidates alternate within each round, so a busy
machine slows them alike). The CRC-32C every chunk also carries costs the same for every candidate and is
printed once. The choice and its numbers: docs/performance.md.
"""

from __future__ import annotations

import argparse
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]


def candidates() -> dict[str, object]:
    from numcodecs import LZ4, Blosc, Zstd

    return {
        "zstd level 0 (3)": Zstd(0),
        "zstd level 1": Zstd(1),
        "zstd level -3": Zstd(-3),
        "lz4": LZ4(),
        "blosc lz4 shuffle 5": Blosc("lz4", 5, Blosc.SHUFFLE),
        "blosc lz4 bitshuffle 5": Blosc("lz4", 5, Blosc.BITSHUFFLE),
        "blosc lz4hc shuffle 5": Blosc("lz4hc", 5, Blosc.SHUFFLE),
        "blosc zstd1 shuffle": Blosc("zstd", 1, Blosc.SHUFFLE),
        "blosc zstd3 shuffle": Blosc("zstd", 3, Blosc.SHUFFLE),
    }


def sample_chunks(cube: Path, count: int) -> list[np.ndarray]:
    """`count` chunks' float32 values (flat), half reward, half cost, spread evenly over the stored chunks of
    the training mode (the bulk of a store)."""
    import zarr

    group = zarr.open_group(str(cube), mode="r")
    out = []
    for name in ("reward", "cost"):
        arr = group[name]
        grid = [-(-n // c) for n, c in zip(arr.shape, arr.chunks, strict=True)]
        grid[-1] = 1  # the training mode
        picks = np.linspace(0, int(np.prod(grid)) - 1, count // 2).astype(int)
        for flat in picks:
            index = np.unravel_index(flat, grid)
            where = tuple(slice(i * c, (i + 1) * c) for i, c in zip(index, arr.chunks, strict=True))
            out.append(np.ascontiguousarray(arr[where], dtype=np.float32).ravel())
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cube", default=str(ROOT / "bench" / "out" / "paper.zarr"))
    parser.add_argument("--chunks", type=int, default=400)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    import google_crc32c

    chunks = sample_chunks(Path(args.cube), args.chunks)
    raw = sum(c.nbytes for c in chunks)
    print(f"{len(chunks)} chunks of {args.cube}, {raw / 2**20:.1f} MiB raw float32, {chunks[0].size} values each")
    codecs = candidates()
    encoded, encode_us = {}, {}
    for name, codec in codecs.items():
        t0 = time.perf_counter()
        encoded[name] = [codec.encode(c) for c in chunks]
        encode_us[name] = (time.perf_counter() - t0) / len(chunks) * 1e6
        back = codec.decode(encoded[name][0])
        assert np.frombuffer(back, dtype=np.float32).tobytes() == chunks[0].tobytes(), name
    best = {(name, threads): float("inf") for name in codecs for threads in (1, 2)}
    for _ in range(args.rounds):
        for name, codec in codecs.items():
            for threads in (1, 2):
                buffers: dict[int, np.ndarray] = {}

                def decode(data: bytes, codec=codec, buffers=buffers) -> None:
                    out = buffers.setdefault(threading.get_ident(), np.empty(chunks[0].size, dtype=np.float32))
                    codec.decode(data, out=out)

                t0 = time.perf_counter()
                with ThreadPoolExecutor(threads) as pool:
                    list(pool.map(decode, encoded[name]))
                best[name, threads] = min(best[name, threads], (time.perf_counter() - t0) / len(chunks) * 1e6)
    t0 = time.perf_counter()
    for name in codecs:
        for data in encoded[name]:
            google_crc32c.value(data)
    crc_us = (time.perf_counter() - t0) / (len(chunks) * len(codecs)) * 1e6
    print(f"{'codec':26s} {'size/raw':>8s} {'encode':>9s} {'decode 1 thread':>16s} {'decode 2 threads':>17s}")
    for name in codecs:
        size = sum(len(d) for d in encoded[name]) / raw
        print(f"{name:26s} {size:8.3f} {encode_us[name]:7.0f}us {best[name, 1]:14.0f}us {best[name, 2]:15.0f}us")
    print(f"CRC-32C of a chunk: {crc_us:.0f} us (every codec)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
