"""The warm (statistics cached) report's shortcuts (issue 37): run fingerprints by stat calls, with the tails of
recently changed chunk files (`cube.stats.fingerprint`), the cutoff kept with the cache; the cache read straight
from its chunk files; no dask import for a cache hit. Every shortcut gives what the long way gives."""

from __future__ import annotations

import shutil
import subprocess
import sys
import time
import warnings
from pathlib import Path

import numpy as np
import pytest

from cube import stats
from cube.stats import cache, fingerprint
from cube.stats import suffstats as sfs
from cube.store import chunkwrite
from cube.store.read import open_cube


@pytest.fixture
def demo_copy(small_demo_cube: Path, tmp_path: Path) -> Path:
    path = tmp_path / "c.zarr"
    shutil.copytree(small_demo_cube, path, ignore=shutil.ignore_patterns("_derived"))
    return path


def _same(a, b) -> None:
    """The same statistics, bit for bit (NaN where NaN), whatever attributes say where they came from."""
    assert sorted(a.data_vars) == sorted(b.data_vars)
    for name in a.data_vars:
        assert a[name].dtype == b[name].dtype, name
        np.testing.assert_array_equal(a[name].values, b[name].values, err_msg=name, strict=True)


def _count_passes(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    passes: list[int] = []
    full, some = sfs._full_pass, sfs._update_runs
    monkeypatch.setattr(sfs, "_full_pass", lambda *a, **k: passes.append(1) or full(*a, **k))
    monkeypatch.setattr(sfs, "_update_runs", lambda *a, **k: passes.append(2) or some(*a, **k))
    return passes


def test_a_settled_file_is_keyed_by_its_stat_a_recent_one_by_its_tail_too(tmp_path: Path) -> None:
    chunk = tmp_path / "0"
    chunk.write_bytes(b"0123456789abcdef-the-checksum")
    now = time.time_ns()
    settled, recent = fingerprint._stat_key(chunk, now + 10**12), fingerprint._stat_key(chunk, -1)
    st = chunk.stat()
    assert settled == f"{st.st_ino}:{st.st_size}:{st.st_mtime_ns}:{st.st_ctime_ns}".encode()
    assert recent == settled + b"+checksum"  # its last 8 bytes
    assert fingerprint._stat_key(tmp_path / "absent", -1) == b"-"
    assert fingerprint.settled_cutoff() <= time.time_ns() - fingerprint.SETTLE_NS


def test_the_cache_keeps_its_cutoff_so_a_warm_read_matches_whenever_it_runs(demo_copy: Path,
                                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    """The fingerprints of a warm read are taken with the cutoff the cache's were: files written lately (tails
    read) match the same way later, when a fresh cutoff would call them settled; a changed run is still seen."""
    first = stats.load_suffstats(demo_copy)
    kept = int(cache.cache_attrs(demo_copy)["settled"])
    assert kept <= time.time_ns() - fingerprint.SETTLE_NS
    monkeypatch.setattr(fingerprint, "settled_cutoff", lambda: time.time_ns() + 3600 * 10**9)  # an hour later
    passes = _count_passes(monkeypatch)
    _same(stats.load_suffstats(demo_copy), first)
    assert passes == []  # a hit
    ds = open_cube(demo_copy)
    from cube import CubeWriter, RunKey

    run = RunKey(str(ds.algo.values[1]), str(ds.task.values[0]), float(ds.bound.values[1]), int(ds.seed.values[2]))
    CubeWriter(demo_copy).write_episodes(run, "train", 0, np.ones(16), np.full(16, 3.0))
    again = stats.load_suffstats(demo_copy)
    assert passes == [2]  # that run alone, computed again
    _same(again, stats.load_suffstats(demo_copy, cache=False))


def test_a_run_rewritten_after_settling_is_seen_by_its_stat_alone(demo_copy: Path,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    """With every file settled (a cutoff an hour ahead: no tail read), a run rewritten (a new file in its chunk's
    place, any size and times) still changes its fingerprint, and only its own."""
    from cube import CubeWriter, RunKey

    ds = open_cube(demo_copy)
    future = time.time_ns() + 3600 * 10**9
    monkeypatch.setattr(fingerprint, "_tail", lambda path: pytest.fail(f"read the tail of {path}"))
    before = cache.run_fingerprints(demo_copy, ds, future)
    run = RunKey(str(ds.algo.values[0]), str(ds.task.values[1]), float(ds.bound.values[0]), int(ds.seed.values[1]))
    CubeWriter(demo_copy).write_episodes(run, "train", 1, np.ones(16), np.ones(16))
    after = cache.run_fingerprints(demo_copy, ds, future)
    assert np.argwhere(before != after).tolist() == [[0, 1, 0, 1]]


@pytest.mark.parametrize("threads", [1, 2], ids=["one-thread", "two-threads"])
def test_the_cache_read_from_its_files_equals_xarrays_read(demo_copy: Path, monkeypatch: pytest.MonkeyPatch,
                                                          threads: int) -> None:
    """Chunk by chunk, or two threads decoding an array's chunks (large arrays: the paper-scale CDF counts)."""
    from cube.store import chunkfiles

    monkeypatch.setattr(chunkfiles, "PARALLEL_READ_BYTES", 2**62 if threads == 1 else 0)
    stats.load_suffstats(demo_copy)
    direct = cache._cache_from_files(demo_copy / cache.CACHE_GROUP)
    assert direct is not None
    monkeypatch.setattr(cache, "_cache_from_files", lambda folder, files=None: None)
    slow = cache.read_cache(demo_copy)
    assert direct.identical(slow)
    assert all(direct[v].dtype == slow[v].dtype for v in slow.variables)


def _files(folder: Path) -> dict[str, object]:
    """Every file under `folder`: zarr.json parsed (its key order is not its meaning), chunks as bytes."""
    import json

    return {str(p.relative_to(folder)): json.loads(p.read_text()) if p.name == "zarr.json" else p.read_bytes()
            for p in sorted(folder.rglob("*")) if p.is_file()}


def test_the_cache_written_straight_is_what_xarray_writes_file_for_file(demo_copy: Path,
                                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    """The cache's numbers written straight to their chunk files (`cube.store.chunkwrite`): the same metadata
    and the same chunk bytes as xarray and zarr write, array by array."""
    stats.load_suffstats(demo_copy)
    straight = _files(demo_copy / cache.CACHE_GROUP)
    assert sum(name.startswith("le/c.") for name in straight) > 1  # CDF counts, sums, counts, CVaRs: all chunks
    shutil.rmtree(demo_copy / "_derived")
    monkeypatch.setattr(chunkwrite, "writes_straight", lambda compressors, values: False)  # everything through xarray
    stats.load_suffstats(demo_copy)
    through_xarray = _files(demo_copy / cache.CACHE_GROUP)
    assert straight.keys() == through_xarray.keys()
    for files in (straight, through_xarray):
        files["zarr.json"]["attributes"].pop("settled")  # when each pass took its fingerprints: not the same
    for name, content in through_xarray.items():
        assert straight[name] == content or _same_blosc_chunk(straight[name], content), name


def test_a_codec_zarr_records_otherwise_leaves_no_cache_and_the_same_statistics(demo_copy: Path,
                                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    """Where zarr would record another Blosc codec than the chunks are written with (`CodecMismatch`), the
    report's statistics are the same and no cache is left behind, half written or not."""
    import zarr
    from numcodecs import Blosc

    from cube.store import chunkwrite

    want = stats.load_suffstats(demo_copy)
    shutil.rmtree(demo_copy / "_derived")
    monkeypatch.setattr(chunkwrite, "blosc_codec", lambda compressors, dtype: Blosc(cname="lz4", clevel=9))
    with pytest.raises(chunkwrite.CodecMismatch):
        chunkwrite.write_metadata(zarr.open_group(str(demo_copy / "probe"), mode="w", zarr_format=3), "x",
                                  np.zeros(3), dims=("i",), chunks=(3,), compressors=cache.cache_compressors(),
                                  fill_value=0, attributes={})
    got = stats.load_suffstats(demo_copy)
    cache.wait_for_cache_writes(demo_copy)
    _same(got.drop_vars("run_status"), want.drop_vars("run_status"))
    derived = demo_copy / cache.CACHE_GROUP
    assert not derived.exists()
    assert not [p.name for p in derived.parent.glob("*") if ".tmp-" in p.name]


def _same_blosc_chunk(a: object, b: object) -> bool:
    """Two chunk files of the same values: each a Blosc frame with its CRC-32C, decoding to the same bytes. Blosc
    splits a frame's blocks or not by the call zarr's codec takes, which depends on the calling thread (numcodecs
    uses Blosc's global context only in the main thread): both forms decode alike, in zarr too."""
    from google_crc32c import value as crc32c
    from numcodecs import blosc

    if not (isinstance(a, bytes) and isinstance(b, bytes)):
        return False
    for data in (a, b):
        if crc32c(data[:-4]) != int.from_bytes(data[-4:], "little"):
            return False
    return blosc.decompress(a[:-4]) == blosc.decompress(b[:-4])


def test_the_caches_chunk_files_lie_flat_in_each_arrays_folder(demo_copy: Path) -> None:
    """One file per condition beside the array's metadata, no folder per key level (`cache.CACHE_KEYS`)."""
    ss = stats.load_suffstats(demo_copy)
    conditions = ss.sizes["algo"] * ss.sizes["task"] * ss.sizes["bound"]
    for name in ("le", "sum_c", "n", "cvar_c", "run_fp"):
        folder = demo_copy / cache.CACHE_GROUP / name
        assert not [p for p in folder.iterdir() if p.is_dir()], name
        assert len(list(folder.glob("c.*"))) == conditions, name


def test_a_cache_written_with_nested_keys_reads_straight_the_same(demo_copy: Path,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    """Caches written before the flat keys (``c/0/1/2/...``, zarr's default) still read from their files."""
    flat = stats.load_suffstats(demo_copy)
    shutil.rmtree(demo_copy / cache.CACHE_GROUP)
    monkeypatch.setattr(cache, "CACHE_KEYS", {"name": "default", "separator": "/"})
    stats.load_suffstats(demo_copy)
    assert (demo_copy / cache.CACHE_GROUP / "le" / "c").is_dir()
    nested = cache._cache_from_files(demo_copy / cache.CACHE_GROUP)
    assert nested is not None
    _same(nested.drop_vars("run_fp"), flat.drop_vars("run_status"))


@pytest.mark.parametrize("threads", [1, 2], ids=["one-thread", "two-threads"])
def test_a_damaged_cache_chunk_is_left_to_the_slow_read_which_warns_and_recomputes(
        demo_copy: Path, monkeypatch: pytest.MonkeyPatch, threads: int) -> None:
    from cube.store import chunkfiles

    good = stats.load_suffstats(demo_copy)
    chunk = sorted((demo_copy / cache.CACHE_GROUP / "sum_c").glob("c.*"))[-1]
    data = bytearray(chunk.read_bytes())
    data[len(data) // 2] ^= 0x08
    chunk.write_bytes(bytes(data))
    monkeypatch.setattr(chunkfiles, "PARALLEL_READ_BYTES", 2**62 if threads == 1 else 0)
    assert cache._cache_from_files(demo_copy / cache.CACHE_GROUP) is None
    monkeypatch.undo()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        again = stats.load_suffstats(demo_copy)
    assert any(issubclass(w.category, cache.CacheWarning) for w in caught)
    _same(again, good)


HIT = """
import sys
from cube import stats
ss = stats.load_suffstats(sys.argv[1])
print("dask" in sys.modules, "dask.array" in sys.modules, "scipy" in sys.modules)
import dask.array as da
import xarray as xr
print(xr.DataArray(da.zeros(4, chunks=2), dims="x").chunks is not None, xr.DataArray(ss["n"].values).chunks)
"""


def test_a_cache_hit_imports_no_dask_and_dask_arrays_still_work_after(demo_copy: Path) -> None:
    stats.load_suffstats(demo_copy)
    run = subprocess.run([sys.executable, "-c", HIT, str(demo_copy)], capture_output=True, text=True, check=True,
                         timeout=120)
    assert run.stdout.split() == ["False", "False", "False", "True", "None"], run.stdout + run.stderr


@pytest.mark.parametrize("settled", [-1, 2**62], ids=["tails-read", "stat-only"])
def test_a_full_pass_takes_each_runs_fingerprint_as_it_reads_the_same_as_stat_calls(demo_copy: Path,
                                                                                     settled: int) -> None:
    """A cold pass keys the cache with what it saw of each chunk file as it read it (fstat before the read, the
    tail from the bytes read, absent files from its folder listings), no stat call per possible file: the same
    fingerprint `RunChunks.fingerprints` takes by stat calls, for files kept whole, files absent (the evaluation
    modes before the final iterate) and a run without any file."""
    from cube.stats.kernel import kappa_grid
    from cube.store.chunking import fast_layouts

    ds = open_cube(demo_copy)
    shutil.rmtree(demo_copy / "reward" / "c" / "0" / "0" / "0" / "1")  # a run with rewards of no iterate
    chunks = fingerprint.run_chunks(demo_copy, dict(ds.sizes))
    assert chunks is not None and fast_layouts(demo_copy, dict(ds.sizes)) is not None
    _, seen = sfs._full_pass(demo_copy, ds, kappa_grid(None), None, None, None, None, (chunks, settled))
    looked = chunks.fingerprints(seen.shape, settled)
    np.testing.assert_array_equal(seen, looked, strict=True)
    assert len(set(seen.ravel().tolist())) == seen.size  # every run its own key
    (demo_copy / "cost" / "c" / "0" / "0" / "0" / "0" / "0" / "0" / "0").write_bytes(b"changed")
    assert chunks.fingerprints(seen.shape, settled)[0, 0, 0, 0] != seen[0, 0, 0, 0]


def test_a_late_cache_write_looks_again_only_at_runs_written_since_and_keeps_their_newer_cache(
        demo_copy: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A whole-cache write of statistics read a while ago (a cold report's background write) takes again the
    fingerprints of the runs whose write sequence moved since the pass began, not of every run's files: a run
    written meanwhile keeps the newer statistics another reader patched into the cache, the others stand."""
    from cube import CubeWriter, RunKey
    from cube.store.locks import read_write_seqs

    old = stats.load_suffstats(demo_copy)
    seqs = read_write_seqs(demo_copy)
    attrs = {k: str(v) for k, v in cache.cache_attrs(demo_copy).items() if k in ("grid", "store", "settled")}
    chunks = fingerprint.run_chunks(demo_copy)
    old_fp = chunks.fingerprints(seqs.shape, int(attrs["settled"]))
    ds = open_cube(demo_copy)
    run = RunKey(str(ds.algo.values[0]), str(ds.task.values[1]), float(ds.bound.values[0]), int(ds.seed.values[1]))
    CubeWriter(demo_copy).write_episodes(run, "train", 0, np.ones(16), np.full(16, 3.0))
    newer = stats.load_suffstats(demo_copy)  # patches that run into the cache
    moved = (0, 1, 0, 1)
    assert newer["sum_c"].values[moved].sum() != old["sum_c"].values[moved].sum()

    def every_run(*_args, **_kwargs):
        raise AssertionError("every run's files looked at again")

    monkeypatch.setattr(fingerprint.RunChunks, "fingerprints", every_run)
    cache.write_cache(demo_copy, old, attrs, old_fp, seqs)
    monkeypatch.undo()
    kept = cache.read_cache(demo_copy)
    np.testing.assert_array_equal(kept["sum_c"].values[moved], newer["sum_c"].values[moved])
    now_fp = chunks.fingerprints(seqs.shape, int(attrs["settled"]))
    np.testing.assert_array_equal(kept["run_fp"].values, now_fp)  # the moved run's is its fingerprint now
    passes = _count_passes(monkeypatch)
    _same(stats.load_suffstats(demo_copy), stats.load_suffstats(demo_copy, cache=False))
    assert passes == [1]  # the hit, then the full pass asked for (cache=False)
