"""Issue 37's layout: absent evaluation episodes are not stored (a chunk per run, mode and block of iterates),
the pass reads only the stored chunks with the same numbers bit for bit, and `saferl migrate` rewrites a store
of the previous layout (one plain chunk per run, every mode in it) atomically."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import socket
from pathlib import Path

import numpy as np
import pytest
import zarr

from cube.cli import main
from cube.schema import RunKey
from cube.stats.cache import run_chunks, run_fingerprints
from cube.stats.suffstats import compute_suffstats, load_suffstats
from cube.store import chunkfiles, chunking
from cube.store.chunking import chunk_file, episode_chunking, fast_layouts, layout_of
from cube.store.layout import CHUNK_COMPRESSORS, create_store
from cube.store.migrate import migrate_store, needs_migration
from cube.store.read import open_cube
from cube.store.writer import CubeWriter

J, E = 40, 12  # 40 iterates: three chunks of 16 along iterates (BLOCK_BYTES made small), the final iterate in the third


def _write_new(path: Path) -> Path:
    create_store(path, algos=["ppo", "p3o"], tasks=["goal"], bounds=[15.0, 25.0], seeds=[0, 1, 2],
                 n_iterates=J, n_episodes=E)
    rng = np.random.default_rng(3)
    writer = CubeWriter(path)
    for algo in ("ppo", "p3o"):
        for bound in (15.0, 25.0):
            for seed in (0, 1, 2):
                key = RunKey(algo, "goal", bound, seed)
                reward = np.full((J, E, 3), np.nan, dtype=np.float32)
                cost = np.full((J, E, 3), np.nan, dtype=np.float32)
                n = 9 + seed  # fewer episodes than slots: NaN filler inside stored chunks too
                reward[:, :n, 0] = rng.normal(10, 3, (J, n))
                cost[:, :n, 0] = rng.choice([0.0, 10.0, 15.0, 30.0], (J, n))
                reward[-1, :8, 1:] = rng.normal(12, 2, (8, 2))
                cost[-1, :8, 1:] = rng.choice([0.0, 25.0, 40.0], (8, 2))
                writer.write_run(key, reward, cost)
                writer.set_run_manifest(key, status="complete")
    return path


def _to_old_layout(src: Path, dst: Path, chunks: tuple[int, ...] | None = None) -> Path:
    """A copy of `src` in the previous layout: reward and cost zstd-compressed, one plain chunk per run with
    every mode in it (or `chunks`: the first stores of the current layout, zstd-compressed)."""
    shutil.copytree(src, dst)
    old, group = zarr.open_group(str(src), mode="r"), zarr.open_group(str(dst), mode="r+")
    for name in ("reward", "cost"):
        arr = old[name]
        shutil.rmtree(dst / name)
        out = group.create_array(name, shape=arr.shape, chunks=chunks or (1, 1, 1, 1, *arr.shape[4:]), dtype="float32",
                                 fill_value=np.nan, dimension_names=arr.metadata.dimension_names,
                                 compressors=CHUNK_COMPRESSORS)
        out.attrs.update(dict(arr.attrs))
        out[...] = arr[...]
    layout = layout_of(zarr.open_group(str(dst), mode="r")["cost"].metadata)
    assert layout is None if chunks is None else layout["codec"] == "zstd"
    return dst


@pytest.fixture(scope="module")
def stores(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    root = tmp_path_factory.mktemp("layout")
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(chunking, "BLOCK_BYTES", 16 * E * 4)  # blocks of 16 iterates, as 2,048 slots get
        new = _write_new(root / "new.zarr")
    return new, _to_old_layout(new, root / "old.zarr")


def _same_stats(a, b) -> None:
    assert sorted(a.data_vars) == sorted(b.data_vars)
    for name in a.data_vars:
        x, y = a[name].values, b[name].values
        assert x.dtype == y.dtype and x.shape == y.shape and x.tobytes() == y.tobytes(), name


def _digest(path: Path) -> str:
    h = hashlib.sha256()
    for p in sorted(path.rglob("*")):
        if p.is_file() and "_derived" not in p.parts and "_locks" not in p.parts:  # lock files hold no data
            h.update(str(p.relative_to(path)).encode() + p.read_bytes())
    return h.hexdigest()


def test_absent_evaluation_chunks_are_not_written(stores) -> None:
    new, _ = stores
    layout = layout_of(zarr.open_group(str(new), mode="r")["cost"].metadata)
    assert layout is not None and layout["fast"] and layout["chunk"][4:] == (16, E, 1)
    for name in ("reward", "cost"):
        held = [(k, m) for k in range(3) for m in range(3)
                if chunk_file(new, name, layout, (1, 0, 1, 2, k, 0, m)).is_file()]
        assert held == [(0, 0), (1, 0), (2, 0), (2, 1), (2, 2)]  # train everywhere, evaluation at the end only


def test_chunks_hold_a_block_of_iterates_sized_in_bytes() -> None:
    assert episode_chunking(122, 2048)[4:] == (16, 2048, 1)  # paper scale: 128 KiB per chunk
    assert episode_chunking(122, 100)[4:] == (122, 100, 1)  # small E: every iterate of a run in one chunk
    assert episode_chunking(1000, 100)[4] == chunking.BLOCK_BYTES // 400
    assert episode_chunking(122, 10**6)[4] == 1 and episode_chunking(5, 10)[4] == 5
    assert episode_chunking(122, 100, chunk_iterates=8)[4] == 8  # a writer's own block is kept when smaller


def test_old_and_new_layout_give_the_same_statistics_bit_for_bit(stores) -> None:
    new, old = stores
    from_new, from_old = load_suffstats(new, cache=False), load_suffstats(old, cache=False)
    _same_stats(from_new, from_old)
    in_memory = compute_suffstats(open_cube(old).load())  # numpy-backed, through the dask-array pass
    _same_stats(from_new.drop_vars("run_status"), in_memory)
    assert int(from_new["n"].sel(mode="expl").sum()) == 12 * 8 and int(from_new["n"].sel(mode="train").sum()) > 0
    for kernel in ("numpy", "fused"):
        _same_stats(load_suffstats(new, cache=False, kernel=kernel), from_old)


def test_blosc_through_ctypes_and_through_numcodecs_give_the_same_statistics(stores, monkeypatch) -> None:
    """The pass decodes Blosc chunks by calling numcodecs' library directly (`blosc_decompress_ctx`); where that
    is not found, through numcodecs' `decompress`: the same numbers either way."""
    new, old = stores
    assert chunkfiles.blosc_decompress_ctx() is not None  # the direct call is what runs here
    direct = load_suffstats(new, cache=False)
    monkeypatch.setattr(chunkfiles, "blosc_decompress_ctx", lambda: None)
    _same_stats(direct, load_suffstats(new, cache=False))


def _frame(values: np.ndarray) -> bytes:
    """A chunk file as zarr writes it: the Blosc frame of `values`, then its CRC-32C."""
    import google_crc32c
    from numcodecs import Blosc

    body = Blosc(cname="lz4", clevel=5, shuffle=Blosc.SHUFFLE).encode(values)
    return bytes(body) + google_crc32c.value(bytes(body)).to_bytes(4, "little")


def test_a_chunk_file_verifies_only_whole_and_of_its_own_size(tmp_path) -> None:
    values = np.arange(64, dtype=np.float32).reshape(4, 16)
    data = _frame(values)
    out = np.empty_like(values)
    assert chunkfiles.verify_and_decode(data, "blosc", out) and np.array_equal(out, values)
    assert chunkfiles.verify_and_decode(np.frombuffer(data, np.uint8), "blosc", out)  # a read buffer's view
    assert not chunkfiles.verify_and_decode(data, "blosc", np.empty(32, np.float32))  # another decoded size
    frame = bytearray(data[:-4])
    frame[12:16] = (len(frame) + 8).to_bytes(4, "little")  # a frame claiming more bytes than it has
    import google_crc32c

    forged = bytes(frame) + google_crc32c.value(bytes(frame)).to_bytes(4, "little")
    assert not chunkfiles.verify_and_decode(forged, "blosc", out)
    assert not chunkfiles.verify_and_decode(data[:-1] + bytes([data[-1] ^ 1]), "blosc", out)  # CRC
    file = tmp_path / "chunk"
    file.write_bytes(data)
    filled, st = chunkfiles.read_into(str(file), np.empty(len(data) + 1, np.uint8))
    assert filled is not None and filled.tobytes() == data and st.st_size == len(data)
    assert chunkfiles.read_into(str(file), np.empty(len(data), np.uint8))[0] is None  # might not be all of it
    with pytest.raises(FileNotFoundError):
        chunkfiles.read_into(str(tmp_path / "absent"), np.empty(8, np.uint8))


def test_old_and_new_layout_give_the_same_report(stores, capsys) -> None:
    outputs = []
    for path in stores:
        assert main(["report", str(path), "--cdf", "--format", "csv", "--boot", "30"]) == 0
        outputs.append(capsys.readouterr().out)
    assert outputs[0] == outputs[1] and outputs[0].count("\n") > 3


def test_a_zstd_store_of_this_layout_reads_alike_and_migrates_to_blosc(stores, tmp_path) -> None:
    new, old = stores
    chunks = zarr.open_group(str(new), mode="r")["cost"].chunks
    first = _to_old_layout(new, tmp_path / "zstd.zarr", chunks)  # as the first stores of this layout were written
    assert fast_layouts(first, dict(open_cube(first).sizes)) is not None  # read from its chunk files too
    _same_stats(load_suffstats(first, cache=False), load_suffstats(old, cache=False))
    assert needs_migration(first) and not needs_migration(new)
    assert migrate_store(first).runs == 12
    assert layout_of(zarr.open_group(str(first), mode="r")["cost"].metadata)["codec"] == "blosc"
    _same_stats(load_suffstats(first, cache=False), load_suffstats(old, cache=False))


def test_run_fingerprints_see_each_runs_shard(stores, tmp_path) -> None:
    new = shutil.copytree(stores[0], tmp_path / "fp.zarr")
    ds = open_cube(new)
    before = run_fingerprints(new, ds)
    assert before is not None and run_chunks(new) is not None
    CubeWriter(new).write_episodes(RunKey("ppo", "goal", 25.0, 1), "greedy", J - 1, np.ones(3), np.zeros(3))
    after = run_fingerprints(new, ds)
    assert (before != after).sum() == 1 and before[0, 0, 1, 1] != after[0, 0, 1, 1]


def test_migrate_rewrites_an_old_store_with_identical_reports(stores, tmp_path, capsys) -> None:
    new, old = stores
    path = shutil.copytree(old, tmp_path / "m.zarr")
    assert main(["report", str(path), "--cdf", "--format", "csv", "--boot", "30"]) == 0
    before = capsys.readouterr().out
    stats_before = load_suffstats(path, cache=False)
    assert main(["migrate", str(path)]) == 0
    assert "migrated" in capsys.readouterr().out
    assert layout_of(zarr.open_group(str(path), mode="r")["reward"].metadata) is not None
    assert not list(tmp_path.glob(".m.zarr*")) and sorted(os.listdir(tmp_path)) == ["m.zarr"]  # no staging left
    assert main(["report", str(path), "--cdf", "--format", "csv", "--boot", "30"]) == 0
    assert capsys.readouterr().out == before
    _same_stats(load_suffstats(path, cache=False), stats_before)
    for name in ("reward", "cost", "run_status", "run_manifest", "env_steps"):
        a, b = zarr.open_group(str(path), mode="r")[name][...], zarr.open_group(str(old), mode="r")[name][...]
        assert np.array_equal(a, b, equal_nan=a.dtype.kind == "f"), name
    assert zarr.open_group(str(path), mode="r").attrs.asdict() == zarr.open_group(str(old), mode="r").attrs.asdict()
    assert main(["migrate", str(path)]) == 0
    assert capsys.readouterr().out.strip().endswith("already in the current layout; nothing to do")


@pytest.mark.parametrize("case", ["url", "missing", "live claim", "open write"])
def test_migrate_refuses_bad_input_in_one_line_and_changes_nothing(stores, tmp_path, capsys, case) -> None:
    path = shutil.copytree(stores[1], tmp_path / "old.zarr")
    target = str(path)
    if case == "url":
        target = "https://example.org/results.zarr"
    elif case == "missing":
        target = str(tmp_path / "nowhere.zarr")
    elif case == "live claim":
        claim = path / "_claims" / "ppo" / "goal" / "15" / "0.claim"
        claim.parent.mkdir(parents=True)
        claim.write_text(json.dumps({"host": socket.gethostname(), "pid": os.getpid()}))
    else:
        zarr.open_group(str(path), mode="r+")["write_seq"][0, 0, 0, 0] = 3  # a bracket left open
    digest = _digest(path)
    assert main(["migrate", target]) != 0
    err = capsys.readouterr().err.strip()
    assert err and "\n" not in err and "Traceback" not in err, err
    assert _digest(path) == digest
    assert not list(tmp_path.glob(".old.zarr*"))


def test_migrate_refuses_a_write_that_lands_during_the_copy(stores, tmp_path, monkeypatch) -> None:
    from cube.errors import CubeError
    from cube.store import migrate as mig

    path = shutil.copytree(stores[1], tmp_path / "old.zarr")
    real = mig._rewrite_episodes

    def with_a_writer(*args, **kwargs):
        got = real(*args, **kwargs)
        zarr.open_group(str(path), mode="r+")["write_seq"][1, 0, 0, 2] = 2  # a writer finished a write meanwhile
        return got

    monkeypatch.setattr(mig, "_rewrite_episodes", with_a_writer)
    with pytest.raises(CubeError, match="while it was being migrated"):
        migrate_store(path)
    assert layout_of(zarr.open_group(str(path), mode="r")["cost"].metadata) is None
    assert sorted(os.listdir(tmp_path)) == ["old.zarr"]
