"""A report whose statistics are cached loads no zarr (issue 37, ninth round): the store's labels, metadata and
cached manifests are read straight from their files (`cube.store.direct`), the runs' fingerprints from the arrays'
documents. Every shortcut here is checked against the long way through zarr."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import xarray as xr
import zarr

from cube.stats.fingerprint import RunChunks, chunk_key_encoder, run_chunks
from cube.store import direct
from cube.store.grid import published_sizes, view_store
from cube.store.read import open_cube, read_manifests


@pytest.fixture
def demo_copy(small_demo_cube: Path, tmp_path: Path) -> Path:
    path = tmp_path / "c.zarr"
    shutil.copytree(small_demo_cube, path, ignore=shutil.ignore_patterns("_derived"))
    return path


def test_the_store_opened_without_zarr_is_what_xarray_opens_through_zarr(demo_copy: Path) -> None:
    sizes = published_sizes(demo_copy)
    mine = direct.open_direct(demo_copy, sizes)
    theirs = xr.open_zarr(view_store(demo_copy, sizes), consolidated=False, chunks=None)
    assert mine is not None
    xr.testing.assert_identical(mine, theirs)
    for name in mine.variables:  # values read lazily (through zarr, on the first read) and their dtypes
        assert mine[name].dtype == theirs[name].dtype, name
        assert mine[name].identical(theirs[name]), name
        for key in ("chunks", "preferred_chunks"):
            assert mine[name].encoding[key] == theirs[name].encoding[key], (name, key)


def test_the_store_opened_without_zarr_pickles_and_reads_after(demo_copy: Path) -> None:
    import pickle

    sizes = published_sizes(demo_copy)
    again = pickle.loads(pickle.dumps(direct.open_direct(demo_copy, sizes)))
    theirs = xr.open_zarr(view_store(demo_copy, sizes), consolidated=False, chunks=None)
    xr.testing.assert_identical(again.load(), theirs.load())


def test_the_store_opened_without_zarr_is_cut_to_the_grid_it_is_given(demo_copy: Path) -> None:
    sizes = dict(published_sizes(demo_copy))
    sizes.update(iterate=sizes["iterate"] - 1, seed=sizes["seed"] - 1)  # a snapshot taken before a growth
    mine = direct.open_direct(demo_copy, sizes)
    theirs = xr.open_zarr(view_store(demo_copy, sizes), consolidated=False, chunks=None)
    assert mine is not None and dict(mine.sizes) == dict(theirs.sizes)
    xr.testing.assert_identical(mine.load(), theirs.load())


def test_a_store_not_of_this_layout_is_left_to_zarr(demo_copy: Path) -> None:
    from zarr.codecs import ZstdCodec

    group = zarr.open_group(str(demo_copy), mode="r+")
    labels = np.asarray(group["algo"][:])
    del group["algo"]
    # zstd without a checksum: a chain zarr reads and `cube.store.chunkfiles.read_array` does not
    group.create_array("algo", shape=labels.shape, dtype=str, dimension_names=["algo"],
                       compressors=[ZstdCodec()])[:] = labels
    assert direct.open_direct(demo_copy, published_sizes(demo_copy)) is None
    assert list(open_cube(demo_copy, lazy=False)["algo"].values) == [str(v) for v in labels]  # zarr opens it


def test_run_chunks_from_the_documents_are_zarrs(demo_copy: Path) -> None:
    chunks = run_chunks(demo_copy)
    group = zarr.open_group(str(demo_copy), mode="r")
    theirs = RunChunks(demo_copy, {n: group[n].metadata.encode_chunk_key for n in ("reward", "cost")}, chunks.blocks)
    shape = tuple(open_cube(demo_copy).sizes[d] for d in ("algo", "task", "bound", "seed"))
    np.testing.assert_array_equal(chunks.fingerprints(shape), theirs.fingerprints(shape), strict=True)
    assert chunks.files((0, 0, 0, 1)) == theirs.files((0, 0, 0, 1))


@pytest.mark.parametrize("encoding", [{"name": "default", "configuration": {"separator": "/"}},
                                      {"name": "default", "configuration": {"separator": "."}}, {"name": "default"},
                                      {"name": "v2", "configuration": {"separator": "/"}}, {"name": "v2"}])
def test_chunk_keys_are_encoded_as_zarr_encodes_them(encoding: dict) -> None:
    from zarr.core.chunk_key_encodings import parse_chunk_key_encoding

    theirs = parse_chunk_key_encoding(encoding)
    for index in [(1, 23, 4, 5, 6, 7, 8), (0,), ()]:
        assert chunk_key_encoder(encoding)(index) == theirs.encode_chunk_key(index)


def test_kept_manifests_are_read_without_zarr_as_zarr_reads_them(demo_copy: Path) -> None:
    through_zarr = read_manifests(demo_copy, cache=False)
    read_manifests(demo_copy, cache=True)  # keeps them
    assert (demo_copy / "_derived" / "run_manifests.json").exists()
    assert read_manifests(demo_copy, cache=True) == through_zarr


WARM_PROBE = """
import contextlib, io, sys
from cube.cli.entry import main
out = io.StringIO()
with contextlib.redirect_stdout(out), contextlib.redirect_stderr(io.StringIO()):
    code = main(["report", {path!r}, "--cdf", "--format", "csv", "--boot", "200"])
print(code)
print("zarr" in sys.modules, "dask" in sys.modules)
print(out.getvalue())
"""


def test_a_warm_report_loads_no_zarr_and_prints_what_a_cold_one_prints(demo_copy: Path) -> None:
    def report() -> list[str]:
        run = subprocess.run([sys.executable, "-c", WARM_PROBE.format(path=str(demo_copy))], capture_output=True,
                             text=True, check=True, timeout=300)
        return run.stdout.splitlines()

    cold = report()  # computes and writes the cache (zarr writes its metadata)
    warm = report()
    assert cold[0] == warm[0] == "0"
    assert warm[1] == "False False", "a cached report loaded zarr or dask"
    assert warm[2:] == cold[2:] and len(warm) > 4
