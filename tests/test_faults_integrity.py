"""Fault injection, issue 26 items 7 and 8: damaged bytes anywhere in a store or its statistics cache.

Before: single-bit flips in `_derived` chunks silently changed `saferl report`'s numbers (the cache had no
checksums); flipped bits in `run_manifest`, `write_seq` or `env_steps` chunks, a missing coordinate array or
a folder where a chunk should be passed `saferl validate` and `saferl export`."""

from __future__ import annotations

import json
import shutil
import warnings
from pathlib import Path

import numpy as np
import pytest
import xarray as xr
from faultkit import flip

import cube
from cube import stats
from cube.cli import main
from cube.stats.cache import CacheWarning

pytestmark = pytest.mark.faults


@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("integrity") / "d.zarr"
    assert main(["demo", str(path), "--seeds", "2", "--iterates", "3", "--episodes", "8",
                 "--eval-episodes", "4"]) == 0
    return path


def _copy(demo: Path, tmp_path: Path) -> Path:
    path = tmp_path / "c.zarr"
    shutil.copytree(demo, path, ignore=shutil.ignore_patterns("_derived", "_locks"))
    return path


def _arrays(root: Path) -> list[Path]:
    return sorted(p.parent for p in root.rglob("zarr.json") if json.loads(p.read_text())["node_type"] == "array")


def test_every_array_the_store_writes_carries_a_checksum(demo: Path, tmp_path: Path) -> None:
    """The arrays of a demo store, a recorded store (grown, with extra variables) and the statistics cache."""
    path = _copy(demo, tmp_path)
    stats.load_suffstats(path)
    recorded = tmp_path / "r.zarr"
    with cube.Recorder(recorded, algo="a", task="t", bound=1.0, seed=0) as rec:
        rec.train_episodes(0, [1.0], [2.0])
        rec.iterate_vars(0, kl=0.1)
        rec.train_episodes(30, np.ones(80), np.ones(80))
    arrays = _arrays(path) + _arrays(recorded)
    assert any("_derived" in a.parts for a in arrays) and len(arrays) > 20
    for array in arrays:
        codecs = [c["name"] for c in json.loads((array / "zarr.json").read_text())["codecs"]]
        assert codecs[-1] == "crc32c", (array, codecs)


def test_flipped_bits_in_the_statistics_cache_never_change_a_number(demo: Path, tmp_path: Path,
                                                                    capsys: pytest.CaptureFixture[str]) -> None:
    """A bit flipped in any chunk of the cache (data, coordinates, fingerprints): the statistics are those
    of the episodes, with one warning that the cache did not verify; `saferl report` prints the same table."""
    path = _copy(demo, tmp_path)
    expected = stats.load_suffstats(path, cache=False)
    stats.load_suffstats(path)  # writes the cache
    capsys.readouterr()
    assert main(["report", str(path), "--boot", "10", "--format", "csv"]) == 0
    table = capsys.readouterr().out
    rng = np.random.default_rng(3)
    cache = path / "_derived" / "suffstats"
    chunks = sorted(p.relative_to(cache) for p in cache.rglob("*")  # flat keys (c.0.1...) and nested (c/0)
                    if p.is_file() and p.name != "zarr.json" and p.relative_to(cache).parts[1][0] == "c")
    assert len(chunks) >= 10
    for trial, chunk in enumerate(chunks[:: max(1, len(chunks) // 8)]):  # 8 of them, data and labels
        target = cache / chunk  # the cache is rewritten after each detected flip: the same names again
        flip(target, int(rng.integers(0, target.stat().st_size)))
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            got = stats.load_suffstats(path)
        assert any(issubclass(w.category, CacheWarning) for w in caught), f"flip {trial} in {chunk} not noticed"
        for name in expected.data_vars:
            np.testing.assert_array_equal(got[name].values, expected[name].values, err_msg=f"flip in {chunk}")
    flip(cache / chunks[0], 0)
    assert main(["report", str(path), "--boot", "10", "--format", "csv"]) == 0
    out, err = capsys.readouterr()
    assert out == table
    lines = [ln for ln in err.splitlines() if "cache" in ln]
    assert len(lines) == 1 and lines[0].startswith("warning:") and "does not verify" in lines[0]


def test_a_flipped_status_cache_is_not_trusted(demo: Path, tmp_path: Path) -> None:
    path = _copy(demo, tmp_path)
    want = stats.load_suffstats(path, cache=False)["run_status"].values
    stats.load_suffstats(path)
    npz = path / "_derived" / "run_status.npz"
    for offset in range(60, npz.stat().st_size - 30, max(1, npz.stat().st_size // 12)):
        data = npz.read_bytes()
        flip(npz, offset)
        np.testing.assert_array_equal(stats.load_suffstats(path)["run_status"].values, want)
        npz.write_bytes(data)


@pytest.mark.parametrize("array", ["run_manifest", "write_seq", "env_steps", "multiplier", "run_status", "seed",
                                   "iterate"])
def test_flipped_bits_in_any_array_fail_validate_and_export(demo: Path, tmp_path: Path, array: str,
                                                            capsys: pytest.CaptureFixture[str]) -> None:
    path = _copy(demo, tmp_path)
    chunk = sorted(p for p in (path / array / "c").rglob("*") if p.is_file())[-1]
    flip(chunk, len(chunk.read_bytes()) // 2)
    capsys.readouterr()
    assert main(["validate", str(path)]) == 1
    err = capsys.readouterr().err
    assert f"{array}" in err and "damaged (checksum mismatch)" in err and "Traceback" not in err
    assert main(["export", str(path), str(tmp_path / "out.nc")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error:") and ("corrupt" in err[0] or "damaged" in err[0]), err
    assert not (tmp_path / "out.nc").exists()


@pytest.mark.parametrize("damage", ["no episode coordinate", "folder for a cost chunk", "link for a reward chunk"])
def test_damaged_layout_fails_validate_and_export(demo: Path, tmp_path: Path, damage: str,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    path = _copy(demo, tmp_path)
    if damage == "no episode coordinate":
        shutil.rmtree(path / "episode")
    else:
        name = "cost" if "cost" in damage else "reward"
        chunk = sorted(p for p in (path / name / "c").rglob("*") if p.is_file())[-1]
        chunk.unlink()
        if "folder" in damage:
            chunk.mkdir()
        else:
            (tmp_path / "elsewhere").write_bytes(b"x")
            chunk.symlink_to(tmp_path / "elsewhere")
    capsys.readouterr()
    assert main(["validate", str(path)]) == 1
    err = capsys.readouterr().err
    assert ("no 'episode' coordinate array" in err if "coordinate" in damage else
            ("is a folder where a chunk" in err or "symbolic link" in err)), err
    assert main(["export", str(path), str(tmp_path / "out.nc")]) == 2
    assert not (tmp_path / "out.nc").exists()


def test_export_of_a_whole_store_round_trips(demo: Path, tmp_path: Path) -> None:
    path = _copy(demo, tmp_path)
    assert main(["export", str(path), str(tmp_path / "out.nc")]) == 0
    with xr.open_dataset(tmp_path / "out.nc") as nc:
        np.testing.assert_array_equal(nc["cost"].values, cube.open_cube(path)["cost"].values)
        assert "saferl_grid" not in nc.attrs
