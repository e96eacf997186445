"""What reads remember in `_derived` (issue 37, `cube.store.remembered`): the manifests and statuses kept by
`read_manifests(cache=True)` and the arrays `verify_run_arrays(cache=True)` vouched for are used only while
their files are unchanged: a changed manifest is seen, a damaged chunk is still the one-line error."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from cube import CubeWriter, RunKey, create_store, read_manifests
from cube.errors import DamagedStoreError
from cube.store import remembered
from cube.store.layout import open_group, read_coords, run_index
from cube.store.read import verify_run_arrays
from tests.twostore import flip_run_chunk, write_two_runs

KEY = RunKey("ppo", "goal", 15.0, 1)


@pytest.fixture(scope="module")
def written(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_two_runs(tmp_path_factory.mktemp("remembered") / "w.zarr", note=True)


@pytest.fixture
def store(written: Path, tmp_path: Path) -> Path:
    path = tmp_path / "s.zarr"
    shutil.copytree(written, path, ignore=shutil.ignore_patterns("_derived"))
    return path


def _flip(path: Path, array: str) -> None:
    flip_run_chunk(path, array, KEY)


def test_cached_manifests_equal_a_fresh_read_and_come_from_the_cache(store: Path, monkeypatch) -> None:
    fresh = read_manifests(store)
    assert not (store / remembered.MANIFESTS_FILE).exists()  # only asked for: cache=True
    assert read_manifests(store, cache=True) == fresh
    assert (store / remembered.MANIFESTS_FILE).exists()
    monkeypatch.setattr("cube.store.read.read_write_seqs", lambda *a: pytest.fail("read the store again"))
    assert read_manifests(store, cache=True) == fresh


def test_runs_written_while_read_are_read_again_into_the_same_rows(store: Path, monkeypatch) -> None:
    """A run whose write sequence moved during the read is read again (`read_runs`) into the arrays read from
    the chunk files: the rows are those of a quiet read, and nothing is kept (the files changed meanwhile)."""
    import cube.store.read as read

    fresh = read_manifests(store)
    index = run_index(read_coords(open_group(store, mode="r")), KEY)
    monkeypatch.setattr(read, "runs_written_since", lambda before, after: [index])
    rows = read_manifests(store, cache=True)
    assert rows == fresh
    assert not (store / remembered.MANIFESTS_FILE).exists()


def test_a_manifest_changed_after_caching_is_seen(store: Path) -> None:
    read_manifests(store, cache=True)
    CubeWriter(store).set_run_manifest(KEY, status="partial", manifest={"iterates_done": 1, "note": "changed"})
    row = next(r for r in read_manifests(store, cache=True) if r["seed"] == 1)
    assert (row["status"], row["note"], row["iterates_done"]) == ("partial", "changed", 1)
    assert read_manifests(store, cache=True) == read_manifests(store)


@pytest.mark.parametrize("array", ["run_manifest", "run_status"])
def test_a_chunk_damaged_after_caching_is_still_one_line(store: Path, array: str) -> None:
    read_manifests(store, cache=True)
    _flip(store, array)
    with pytest.raises(DamagedStoreError) as caught:
        read_manifests(store, cache=True)
    text = str(caught.value)
    assert f"{array}/c/" in text and "is damaged (checksum mismatch)" in text and "\n" not in text, text


def test_a_cache_file_that_does_not_verify_is_not_used(store: Path) -> None:
    fresh = read_manifests(store)
    read_manifests(store, cache=True)
    kept = store / remembered.MANIFESTS_FILE
    kept.write_bytes(kept.read_bytes().replace(b"seed 1", b"seed 9"))
    assert read_manifests(store, cache=True) == fresh


def test_verify_skips_unchanged_arrays_and_names_a_chunk_damaged_since(store: Path, monkeypatch) -> None:
    verify_run_arrays(store, ("env_steps",), cache=True)
    key = remembered.arrays_key(store, ("env_steps",))
    assert remembered.verified(store, "env_steps", key)
    _flip(store, "env_steps")
    assert not remembered.verified(store, "env_steps", remembered.arrays_key(store, ("env_steps",)))
    with pytest.raises(DamagedStoreError, match=r"env_steps/c/.* is damaged \(checksum mismatch\)"):
        verify_run_arrays(store, ("env_steps",), cache=True)


def test_the_report_uses_both_and_no_cache_leaves_them(store: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from cube.cli import main

    assert main(["report", str(store), "--boot", "10", "--no-cache"]) == 0
    first = capsys.readouterr()
    assert not (store / remembered.MANIFESTS_FILE).exists() and not (store / remembered.VERIFIED_FILE).exists()
    for _ in range(2):  # the first fills both caches, the second reads them: the same output
        assert main(["report", str(store), "--boot", "10"]) == 0
        assert capsys.readouterr() == first
    assert (store / remembered.MANIFESTS_FILE).exists() and (store / remembered.VERIFIED_FILE).exists()


# ------------------------------------------------------------------------------- chunk files read directly
@pytest.mark.parametrize("name", ["run_manifest", "run_status", "env_steps", "write_seq"])
def test_chunk_files_read_directly_equal_zarr_unwritten_runs_and_a_cut_grid_included(written: Path, tmp_path: Path,
                                                                                      name: str) -> None:
    import numpy as np
    import zarr

    from cube.store.chunkfiles import read_run_array

    path = tmp_path / "g.zarr"  # one more seed, never written: its chunks are absent (the fill value)
    create_store(path, algos=["ppo"], tasks=["goal"], bounds=[15.0], seeds=[0, 1, 2], n_iterates=2, n_episodes=3,
                 iterate_vars=("env_steps",))
    writer = CubeWriter(path)
    for seed in (0, 1):
        key = RunKey("ppo", "goal", 15.0, seed)
        writer.write_iterate_vars(key, 1, {"env_steps": 7.0 + seed})
        writer.set_run_manifest(key, status="complete", manifest={"note": f"é {seed}"})
    stored = np.asarray(zarr.open_group(str(path), mode="r")[name][...])
    for sizes, want in ((None, stored), ({"seed": 2, "iterate": 1}, stored[:, :, :, :2, ..., :1] if stored.ndim > 4
                                        else stored[:, :, :, :2])):
        got = read_run_array(path, name, sizes)
        assert got is not None and got.shape == want.shape
        assert [str(v) for v in got.ravel()] == [str(v) for v in want.ravel()]


def test_a_damaged_or_foreign_chunk_is_left_to_zarr(store: Path) -> None:
    from cube.store.chunkfiles import read_run_array

    assert read_run_array(store, "run_manifest") is not None
    _flip(store, "run_manifest")
    assert read_run_array(store, "run_manifest") is None  # zarr reads it and names the chunk (tests above)
    assert read_run_array(store, "seed") is None  # not a per-run array: not read here
    assert read_run_array(store, "no_such_array") is None
