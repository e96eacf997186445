"""One damaged-store error (issue 32): a flipped bit in a chunk is the same `DamagedStoreError`, naming the
chunk, from every read path of cube and the TUI's model; the CLI prints it as one line."""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path

import pytest

from cube import RunKey, export_netcdf, open_cube, read_manifests, stats, validate
from cube.cli import main
from cube.errors import DamagedStoreError
from cube.store.layout import open_group, read_coords, run_index
from cube.store.locks import WRITE_SEQ, read_runs, read_write_seqs
from cube.store.runstatus import read_run_status
from saferl_tui.model import CubeModel
from tests.twostore import flip_run_chunk, write_two_runs

KEY = RunKey("ppo", "goal", 15.0, 1)


@pytest.fixture(scope="module")
def written(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Two runs of a 1 x 1 x 1 x 2 grid with episodes, env steps, a manifest and a status each."""
    return write_two_runs(tmp_path_factory.mktemp("damaged") / "w.zarr")


def damaged(written: Path, tmp_path: Path, array: str) -> Path:
    """A copy of `written` with one bit flipped in the chunk of `array` of run KEY (seed 1)."""
    path = tmp_path / "d.zarr"
    shutil.copytree(written, path, ignore=shutil.ignore_patterns("_derived"))
    flip_run_chunk(path, array, KEY)
    return path


def _reread(path: Path) -> object:
    index = run_index(read_coords(open_group(path, mode="r")), KEY)
    return list(read_runs(path, ("reward", "cost"), [index], read_coords(open_group(path, mode="r"))))


READS: dict[str, tuple[str, Callable[[Path], object]]] = {
    "load_consistent": ("cost", lambda p: open_cube(p).saferl.load()),
    "load_suffstats": ("cost", lambda p: stats.load_suffstats(p, cache=False)),
    "read_runs": ("cost", _reread),
    "export_netcdf": ("reward", lambda p: export_netcdf(p, p.parent / "out.nc")),
    "tui_model_load": ("cost", lambda p: CubeModel(p, boot=10).load()),
    "run_status_of_report": ("run_status", lambda p: stats.load_suffstats(p, cache=False)),
    "read_manifests": ("run_manifest", read_manifests),
    "read_run_status": ("env_steps", read_run_status),
    "read_write_seqs": (WRITE_SEQ, read_write_seqs),
}


@pytest.mark.parametrize("read", sorted(READS))
def test_every_read_path_raises_the_one_damaged_store_error(written: Path, tmp_path: Path, read: str) -> None:
    array, fn = READS[read]
    path = damaged(written, tmp_path, array)
    with pytest.raises(DamagedStoreError) as caught:
        fn(path)
    text = str(caught.value)
    assert f"{array}/c/" in text and "is damaged (checksum mismatch)" in text, text
    assert "\n" not in text
    assert not (tmp_path / "out.nc").exists()


def test_validate_lists_the_same_line_and_the_cli_prints_it_once(written: Path, tmp_path: Path,
                                                                  capsys: pytest.CaptureFixture[str]) -> None:
    path = damaged(written, tmp_path, "cost")
    with pytest.raises(DamagedStoreError) as caught:
        stats.load_suffstats(path, cache=False)
    damage = str(caught.value).split("the store is corrupt: ")[1]
    assert [line.split("the store is corrupt: ")[1] for line in validate(path)] == [damage]
    capsys.readouterr()
    assert main(["report", str(path), "--boot", "10", "--no-cache"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [f"error: {caught.value}"], err


def test_a_damaged_coordinate_fails_open_cube_with_the_same_error(written: Path, tmp_path: Path) -> None:
    path = tmp_path / "d.zarr"
    shutil.copytree(written, path, ignore=shutil.ignore_patterns("_derived"))
    chunk = sorted(p for p in (path / "seed" / "c").rglob("*") if p.is_file())[0]
    chunk.write_bytes(chunk.read_bytes()[:-1] + bytes([chunk.read_bytes()[-1] ^ 1]))
    with pytest.raises(DamagedStoreError, match=r"chunk seed/c/0 is damaged \(checksum mismatch\)"):
        open_cube(path)
