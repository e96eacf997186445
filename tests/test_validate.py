"""Every bad input gets a clear one-line problem from `validate`, `open_cube` and the CLI."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import xarray as xr
import zarr

from cube import CubeError, open_cube, validate
from cube.cli import main
from cube.schema import DIMS


def _foreign(tmp_path: Path, name: str = "c.zarr", **changes) -> Path:
    """A valid minimal cube written by plain xarray, with ``changes`` applied to its parts."""
    shape = (1, 1, 2, 2, 2, 3, 2)
    coords = {
        "algo": ["a"], "task": ["goal"], "bound": [10.0, 20.0], "seed": [0, 1], "iterate": [0, 1],
        "episode": [0, 1, 2], "mode": ["expl", "greedy"],
    }
    data = {"reward": np.ones(shape, np.float32), "cost": np.full(shape, 5.0, np.float32)}
    coords.update(changes.pop("coords", {}))
    # object dtype: zarr 3 stores it as variable-length strings (fixed-width unicode warns)
    coords = {k: np.array(v, dtype=object) if isinstance(v[0], str) else v for k, v in coords.items()}
    data.update(changes.pop("data", {}))
    ds = xr.Dataset({k: (DIMS, v) for k, v in data.items()}, coords=coords)
    for name_ in changes.pop("drop", []):
        ds = ds.drop_vars(name_)
    path = tmp_path / name
    if name.endswith(".nc"):
        ds.to_netcdf(path)
    else:
        ds.to_zarr(path, zarr_format=3, consolidated=False)
    return path


def test_valid_foreign_cube(tmp_path: Path) -> None:
    assert validate(_foreign(tmp_path)) == []


def _cost_with(value: float) -> np.ndarray:
    cost = np.full((1, 1, 2, 2, 2, 3, 2), 5.0, np.float32)
    cost[0, 0, 1, 0, 1, 2, 0] = value
    return cost


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"data": {"cost": _cost_with(-1.0)}}, "negative cost"),
        ({"data": {"cost": _cost_with(np.inf)}}, "infinite cost"),
        ({"data": {"cost": _cost_with(np.nan)}}, "cost NaN where reward present"),
        ({"coords": {"bound": [10.0, 0.0]}}, "bound 0.0 is not a finite number > 0"),
        ({"coords": {"bound": [10.0, -3.0]}}, "bound -3.0 is not a finite number > 0"),
        ({"coords": {"seed": [1, 1]}}, "duplicate labels"),
        ({"coords": {"mode": ["expl", "eval"]}}, "mode labels \\['eval'\\] are unknown"),
        ({"data": {"cost": np.full((1, 1, 2, 2, 2, 3, 2), 5, np.int32)}}, "dtype int32, expected a float"),
        ({"drop": ["cost"]}, "variable 'cost' is missing"),
        ({"coords": {"bound": ["x", "y"]}}, "coordinate 'bound' has dtype"),
    ],
)
def test_each_bad_input_is_reported(tmp_path: Path, changes: dict, message: str) -> None:
    path = _foreign(tmp_path, **changes)
    problems = validate(path)
    assert problems and any(__import__("re").search(message, p) for p in problems), problems
    assert all("\n" not in p for p in problems)


def test_missing_dimension(tmp_path: Path) -> None:
    ds = xr.open_zarr(_foreign(tmp_path), consolidated=False).isel(mode=0, drop=True).load()
    path = tmp_path / "nomode.zarr"
    ds.to_zarr(path, zarr_format=3, consolidated=False)
    problems = validate(path)
    assert any("dimension 'mode' is missing" in p for p in problems)
    with pytest.raises(CubeError, match="not a valid saferl cube: dimension 'mode' is missing"):
        open_cube(path)


def test_missing_path_and_non_store_directory(tmp_path: Path) -> None:
    assert "does not exist" in validate(tmp_path / "nope.zarr")[0]
    (tmp_path / "plain").mkdir()
    assert "not a Zarr store" in validate(tmp_path / "plain")[0]
    (tmp_path / "junk.nc").write_text("not netcdf")
    assert "cannot read" in validate(tmp_path / "junk.nc")[0]


def test_corrupt_store(tmp_path: Path) -> None:
    path = _foreign(tmp_path)
    (path / "cost" / "zarr.json").write_text("{ broken")
    problems = validate(path)
    assert len(problems) == 1 and "cannot read" in problems[0]


def test_corrupt_chunk_is_reported_not_raised(tmp_path: Path) -> None:
    path = _foreign(tmp_path)
    chunk = next(p for p in (path / "cost" / "c").rglob("*") if p.is_file())
    chunk.write_bytes(b"garbage")
    problems = validate(path)
    assert len(problems) == 1 and "corrupt" in problems[0]


def test_cli_validate_exit_codes_and_one_line_errors(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    good = _foreign(tmp_path)
    assert main(["validate", str(good)]) == 0
    bad = _foreign(tmp_path, "bad.zarr", coords={"bound": [10.0, 0.0]})
    assert main(["validate", str(bad)]) == 1
    err = capsys.readouterr().err
    assert "bound 0.0" in err and "Traceback" not in err


def test_cli_subprocess_prints_no_traceback(tmp_path: Path) -> None:
    result = subprocess.run(
        [sys.executable, "-m", "cube.cli", "export", str(tmp_path / "missing.zarr"), str(tmp_path / "o.nc")],
        capture_output=True, text=True, check=False,
    )
    assert result.returncode == 2
    assert result.stderr.strip().startswith("error:") and "Traceback" not in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1


def test_store_missing_a_variable_array(tmp_path: Path) -> None:
    path = _foreign(tmp_path)
    shutil.rmtree(path / "reward")
    group = zarr.open_group(path)
    assert "reward" not in group
    assert any("'reward' is missing" in p for p in validate(path))


def test_run_marked_complete_without_episodes_is_a_problem(tiny_store: Path, tiny_key) -> None:
    from cube import set_run_manifest, write_episodes

    other = type(tiny_key)("ppo", "goal", 15.0, 0)
    write_episodes(tiny_store, other, "train", 0, [1.0], [2.0])
    set_run_manifest(tiny_store, other, status="complete")
    assert validate(tiny_store) == []
    set_run_manifest(tiny_store, tiny_key, status="complete")  # no episode was ever written for it
    problems = validate(tiny_store)
    assert (len(problems) == 1
            and "1 run(s) marked complete hold no episodes (first: ppo_lag/circle/d=25/seed=1)" in problems[0])


def test_fresh_training_store_without_episodes_yet_is_valid(tiny_store: Path, tiny_key) -> None:
    """A sweep whose first iterate is still compiling: runs pending or partial, no episodes yet."""
    from cube import set_run_manifest

    assert validate(tiny_store) == []  # every run pending
    set_run_manifest(tiny_store, tiny_key, status="partial")
    assert validate(tiny_store) == []


def test_cube_without_status_and_without_episodes_is_invalid(tmp_path: Path) -> None:
    shape = (1, 1, 2, 2, 2, 3, 2)
    path = _foreign(tmp_path, data={"reward": np.full(shape, np.nan, np.float32),
                                    "cost": np.full(shape, np.nan, np.float32)})
    assert validate(path) == ["the cube holds no episodes at all (every reward/cost is NaN)"]


def test_bit_flip_in_a_chunk_is_detected_and_named(tiny_store: Path, tiny_key) -> None:
    """Chunks carry a CRC-32C checksum: a single flipped bit is an error naming the chunk and the run,
    never plausible wrong numbers."""
    from cube import write_episodes

    write_episodes(tiny_store, tiny_key, "train", 0, np.arange(6.0), np.arange(6.0) + 1)
    assert validate(tiny_store) == []
    chunks = [p for p in (tiny_store / "cost" / "c").rglob("*") if p.is_file()]
    assert len(chunks) == 1
    data = bytearray(chunks[0].read_bytes())
    flipped = []
    for bit in (3, len(data) * 4, len(data) * 8 - 20):  # header, middle, near the checksum
        copy = bytearray(data)
        copy[bit // 8] ^= 1 << (bit % 8)
        chunks[0].write_bytes(bytes(copy))
        problems = validate(tiny_store)
        flipped.append(problems)
        assert len(problems) == 1, problems
        assert "chunk cost/c/1/1/1/1/0/0/0 of run ppo_lag/circle/d=25/seed=1" in problems[0]
    chunks[0].write_bytes(bytes(data))
    assert validate(tiny_store) == []
