"""Damaged stores through every command (issue 36): one line naming the damage, a non-zero exit, no traceback.

Before: a truncated or flipped cost chunk made `report` print its line and then a 107-121-line traceback
("RuntimeError: Event loop is closed": zarr's event loop closed under the reads the error cut short), the same
for a flipped `run_status` chunk and a changed `chunk_shape` ("coroutine ... was never awaited"); a root
zarr.json saying 3 seeds where the data have 2, and a schema version of 99, were valid to `validate` and read
by `report` and `export` as if nothing happened; a flipped `run_manifest` or `env_steps` chunk left `report`
silent; `status` on a root zarr.json that is no JSON or a cost dtype of int8 ended "unexpected ..."."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from cube import CubeWriter, RunKey, create_store
from cube.cli import main
from cube.errors import CubeError
from tests.twostore import write_two_runs

pytestmark = pytest.mark.faults


@pytest.fixture(scope="module")
def written(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Two runs with episodes of two modes, env steps, a manifest and a status each."""
    return write_two_runs(tmp_path_factory.mktemp("damaged") / "w.zarr", greedy=True)


def _flip(path: Path) -> None:
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0x10
    path.write_bytes(bytes(data))


def _cut(path: Path) -> None:
    path.write_bytes(path.read_bytes()[: len(path.read_bytes()) // 2])


def _edit(path: Path, change: Callable[[dict], None]) -> None:
    meta = json.loads(path.read_text())
    change(meta)
    path.write_text(json.dumps(meta))


def _grid_of_3_seeds(meta: dict) -> None:
    meta["attributes"]["saferl_grid"]["seed"] = 3


def _chunk_shape(meta: dict) -> None:
    meta["chunk_grid"]["configuration"]["chunk_shape"][5] = 2


DAMAGE: dict[str, tuple[Callable[[Path], None], tuple[str, ...], str]] = {
    # name: (damage a copy, commands, a phrase of the one line)
    "flipped cost": (lambda p: _flip(p / "cost/c/0/0/0/1/0/0/0"), ("report", "export", "validate"),
                     "chunk cost/c/0/0/0/1/0/0/0 of run ppo/goal/d=15/seed=1 is damaged"),
    "truncated cost": (lambda p: _cut(p / "cost/c/0/0/0/1/0/0/0"), ("report", "export"),
                       "chunk cost/c/0/0/0/1/0/0/0"),
    "flipped status": (lambda p: _flip(p / "run_status/c/0/0/0/1"), ("status", "export", "report", "validate"),
                       "chunk run_status/c/0/0/0/1"),
    "chunk shape": (lambda p: _edit(p / "cost/zarr.json", _chunk_shape), ("report", "export", "validate"),
                    "cost/c/0/0/0/0/0/0/0"),
    "grid of 3 seeds": (lambda p: _edit(p / "zarr.json", _grid_of_3_seeds),
                        ("validate", "report", "export", "status"), "publishes 3 seed label(s) but the array"),
    "schema 99": (lambda p: _edit(p / "zarr.json", lambda m: m["attributes"].update(saferl_schema_version=99)),
                  ("validate", "report", "export", "status"), "schema version 99; this saferl reads version 1"),
    "flipped manifest": (lambda p: _flip(p / "run_manifest/c/0/0/0/1"), ("report", "status", "validate"),
                         "chunk run_manifest/c/0/0/0/1"),
    "flipped env steps": (lambda p: _flip(p / "env_steps/c/0/0/0/1/0"), ("report", "status", "validate"),
                          "chunk env_steps/c/0/0/0/1/0"),
    "root not JSON": (lambda p: (p / "zarr.json").write_text("{ not json"), ("status", "validate", "report"),
                      "zarr.json cannot be read (JSONDecodeError"),
    "cost as int8": (lambda p: _edit(p / "cost/zarr.json", lambda m: m.update(data_type="int8")),
                     ("status", "validate", "report"), "'cost'"),
    "cost as int8, fill 0": (lambda p: _edit(p / "cost/zarr.json", lambda m: m.update(data_type="int8", fill_value=0)),
                             ("status", "validate", "report"), "'cost'"),
}


@pytest.mark.parametrize("damage", DAMAGE)
def test_each_command_names_the_damage_in_one_line(written: Path, tmp_path: Path, damage: str,
                                                    capsys: pytest.CaptureFixture[str]) -> None:
    change, commands, phrase = DAMAGE[damage]
    path = tmp_path / "d.zarr"
    shutil.copytree(written, path)
    change(path)
    for command in commands:
        argv = [command, str(path)] + ([str(tmp_path / "out.nc")] if command == "export" else [])
        code = main(argv)
        err = capsys.readouterr().err
        lines = [ln for ln in err.splitlines() if ln.strip()]
        assert code != 0, (command, err)
        if command == "validate":
            assert phrase in err and "INVALID" in lines[-1] and "Traceback" not in err, (command, err)
            continue
        assert len(lines) == 1 and lines[0].startswith("error:") and phrase in lines[0], (command, err)
        assert "unexpected" not in lines[0], (command, err)
        assert not (tmp_path / "out.nc").exists()


def test_every_reader_refuses_the_damaged_metadata(written: Path, tmp_path: Path) -> None:
    """The cube API and the TUI's model refuse what the commands refuse (one CubeError line)."""
    from cube import open_cube, read_manifests, stats
    from saferl_tui.model import CubeModel

    for damage in ("grid of 3 seeds", "schema 99"):
        path = tmp_path / damage.replace(" ", "_")
        shutil.copytree(written, path)
        DAMAGE[damage][0](path)
        for read in (open_cube, read_manifests, lambda p: stats.load_suffstats(p, cache=False),
                     lambda p: CubeModel(p).load(lambda f, t: None)):
            with pytest.raises(CubeError) as info:
                read(path)
            assert DAMAGE[damage][2] in str(info.value) and "\n" not in str(info.value)


def test_many_damaged_chunks_end_in_one_line_and_nothing_after_it(tmp_path: Path) -> None:
    """Reads that the first error cut short are still running in zarr's event loop when the command ends:
    they are drained before zarr's exit hook closes the loop (a real process: the damage is in its exit)."""
    path = tmp_path / "many.zarr"
    create_store(path, algos=["a", "b", "c"], tasks=["t", "u", "v", "w"], bounds=[1.0, 2.0], seeds=list(range(4)),
                 n_iterates=4, n_episodes=64)
    writer = CubeWriter(path)
    for key in (RunKey(a, t, b, s) for a in "abc" for t in "tuvw" for b in (1.0, 2.0) for s in range(4)):
        writer.write_episodes(key, "train", 0, [[1.0] * 64] * 4, [[2.0] * 64] * 4)
    for i, chunk in enumerate(sorted(p for p in (path / "cost" / "c").rglob("*") if p.is_file())):
        if i % 3 == 0:
            _flip(chunk)
    for argv in (["report", str(path)], ["export", str(path), str(tmp_path / "x.nc")]):
        done = subprocess.run([sys.executable, "-m", "cube.cli", *argv], capture_output=True, text=True, timeout=300)
        lines = [ln for ln in done.stderr.splitlines() if ln.strip()]
        assert done.returncode == 2 and len(lines) == 1 and "is damaged (checksum mismatch)" in lines[0], done.stderr
