"""Fault injection: readers racing writers, corrupt chunks, hostile output paths (marker `faults`)."""

from __future__ import annotations

import multiprocessing as mp
from pathlib import Path

import numpy as np
import pytest

from cube import CubeWriter, RunKey, create_store, validate

pytestmark = pytest.mark.faults

KEY = RunKey("ppo", "goal", 15.0, 0)


def _write_forever(path: str, started: object, stop: object) -> None:
    """Rewrite iterates of one run with a changing number of episodes, as fast as possible."""
    writer = CubeWriter(path)
    rng = np.random.default_rng(0)
    started.set()  # type: ignore[attr-defined]
    i = 0
    while not stop.is_set():  # type: ignore[attr-defined]
        n = int(rng.integers(1, 9))
        reward = rng.normal(size=n)
        writer.write_episodes(KEY, "train", i % 4, reward, np.abs(reward) + 1.0)
        i += 1


@pytest.fixture
def busy_store(tmp_path: Path):
    """A store with one run that another process rewrites continuously while the test reads."""
    path = tmp_path / "busy.zarr"
    create_store(path, algos=["ppo"], tasks=["goal"], bounds=[15.0], seeds=[0, 1], n_iterates=4, n_episodes=8)
    writer = CubeWriter(path)
    for it in range(4):
        writer.write_episodes(KEY, "train", it, np.ones(8), np.ones(8))
    ctx = mp.get_context("spawn")
    started, stop = ctx.Event(), ctx.Event()
    proc = ctx.Process(target=_write_forever, args=(str(path), started, stop))
    proc.start()
    assert started.wait(60)
    yield path
    stop.set()
    proc.join(30)
    assert proc.exitcode == 0


def test_validate_never_sees_a_torn_iterate(busy_store: Path) -> None:
    """120 validations while a writer rewrites iterates: never a spurious problem (rewards without costs)."""
    for attempt in range(120):
        assert validate(busy_store) == [], f"read {attempt}"


def test_a_writer_that_never_pauses_cannot_starve_a_reader(busy_store: Path) -> None:
    """Against a writer with no pause between writes, optimistic reads rarely find the run still (about
    half of 300 reads failed 10 tries each without the run lock); holding the writers off for one read
    always gets both variables of one write."""
    from cube.store.locks import StillRunReader

    reader = StillRunReader(busy_store)
    for attempt in range(200):
        reward, cost = reader.read((0, 0, 0, 0), tries=10)
        assert (np.isnan(reward) == np.isnan(cost)).all(), f"read {attempt}: rewards without costs"
        r, c = reward[~np.isnan(reward)], cost[~np.isnan(cost)]
        same_write = np.isclose(c, np.abs(r) + 1.0, rtol=1e-6) | ((r == 1.0) & (c == 1.0))  # or the first write
        assert same_write.all(), f"read {attempt}: rewards and costs of different writes"


def _hostile_targets(tmp_path: Path) -> dict[str, Path]:
    """A symlink to a precious file, a FIFO and a folder, in a temp dir (never /dev)."""
    import os

    precious = tmp_path / "precious.txt"
    precious.write_text("keep me")
    link = tmp_path / "link.csv"
    link.symlink_to(precious)
    fifo = tmp_path / "pipe.csv"
    os.mkfifo(fifo)
    folder = tmp_path / "folder.csv"
    folder.mkdir()
    return {"symbolic link": link, "FIFO": fifo, "folder": folder}


@pytest.mark.parametrize("kind", ["symbolic link", "FIFO", "folder"])
def test_outputs_refuse_targets_that_are_not_regular_files(tmp_path: Path, kind: str, small_demo_cube: Path,
                                                           capsys: pytest.CaptureFixture[str]) -> None:
    from cube.cli import main

    target = _hostile_targets(tmp_path)[kind]
    before = sorted(p.name for p in tmp_path.iterdir())
    assert main(["export", str(small_demo_cube), str(target)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error:") and f"is a {kind}" in err[0].replace("is an ", "is a ")
    assert sorted(p.name for p in tmp_path.iterdir()) == before  # nothing replaced, no temp file left
    assert (tmp_path / "precious.txt").read_text() == "keep me"


def test_atomic_output_leaves_the_old_file_on_failure(tmp_path: Path) -> None:
    from cube import CubeError
    from cube.outputs import atomic_output

    target = tmp_path / "table.csv"
    target.write_text("old")
    with pytest.raises(CubeError, match="cannot write .*table.csv .No space left on device.: free some space"), \
            atomic_output(target) as tmp:
        tmp.write_text("half")
        raise OSError(28, "No space left on device")
    assert target.read_text() == "old"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["table.csv"]


def test_statistics_never_see_a_torn_iterate(busy_store: Path) -> None:
    """The statistics pass under a racing writer: every cell has as many rewards as costs (the writer
    always writes both), over 100 passes with and without the cache."""
    from cube import stats

    for attempt in range(100):
        ss = stats.load_suffstats(busy_store, cache=attempt % 2 == 0)
        assert (ss["n_r"].values == ss["n"].values).all(), f"pass {attempt}"


def test_cache_follows_content_even_with_same_size_and_restored_mtime(tmp_path: Path) -> None:
    """`touch -r` after rewriting a chunk with as many bytes must not fool the statistics cache."""
    import os

    from cube import stats

    path = tmp_path / "c.zarr"
    create_store(path, algos=["ppo"], tasks=["goal"], bounds=[15.0], seeds=[0], n_iterates=2, n_episodes=4)
    writer = CubeWriter(path)
    writer.write_episodes(KEY, "train", 0, np.ones(4), np.full(4, 1.0))
    first = float(stats.load_suffstats(path)["sum_c"].sum())
    chunks = [next(p for p in (path / name / "c").rglob("*") if p.is_file()) for name in ("reward", "cost")]
    stats_before = [chunk.stat() for chunk in chunks]
    writer.write_episodes(KEY, "train", 0, np.ones(4), np.full(4, 2.0))  # the same rewards, other costs
    for chunk, stat in zip(chunks, stats_before, strict=True):  # both chunks rewritten: restore both mtimes
        assert chunk.stat().st_size == stat.st_size  # same size ...
        os.utime(chunk, ns=(stat.st_atime_ns, stat.st_mtime_ns))  # ... and the old mtime restored
        assert chunk.stat().st_mtime_ns == stat.st_mtime_ns
    again = float(stats.load_suffstats(path)["sum_c"].sum())
    assert (first, again) == (4.0, 8.0)


@pytest.mark.parametrize("kind", ["symbolic link", "FIFO", "folder"])
def test_report_out_refuses_targets_that_are_not_regular_files(tmp_path: Path, kind: str, small_demo_cube: Path,
                                                               capsys: pytest.CaptureFixture[str]) -> None:
    from cube.cli import main

    target = _hostile_targets(tmp_path)[kind]
    before = sorted(p.name for p in tmp_path.iterdir())
    assert main(["report", str(small_demo_cube), "--format", "csv", "--boot", "10", "--out", str(target)]) == 2
    err = [ln for ln in capsys.readouterr().err.splitlines() if ln.startswith("error:")]
    assert len(err) == 1 and "refusing to replace it" in err[0]
    assert sorted(p.name for p in tmp_path.iterdir()) == before
    assert (tmp_path / "precious.txt").read_text() == "keep me"


def _demo(tmp_path: Path, name: str) -> Path:
    from cube.cli import main

    path = tmp_path / name
    assert main(["demo", str(path), "--seeds", "2", "--iterates", "3", "--episodes", "8", "--eval-episodes", "4"]) == 0
    return path


def _flip(chunk: Path, where: float = 0.5) -> None:
    data = bytearray(chunk.read_bytes())
    data[int(len(data) * where)] ^= 0x10
    chunk.write_bytes(bytes(data))


@pytest.mark.parametrize("array", ["run_status", "cost", "reward", "run_manifest"])
def test_corrupt_chunks_are_named_by_every_command(tmp_path: Path, array: str,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    """A bit flipped in any array's chunk: each command that reads it (validate, report, status) ends with
    one line naming the chunk and its run, a non-zero exit, and the store untouched."""
    from cube.cli import main

    path = _demo(tmp_path, "c.zarr")
    capsys.readouterr()
    chunk = sorted(p for p in (path / array / "c").rglob("*") if p.is_file())[-1]
    _flip(chunk)
    before = {p: p.read_bytes() for p in path.rglob("*") if p.is_file() and "_derived" not in p.parts}
    readers = {"cost": ("validate", "report"), "reward": ("validate", "report"),
               "run_status": ("validate", "report", "status"), "run_manifest": ("status",)}[array]
    for argv in (["validate", str(path)], ["report", str(path), "--boot", "10", "--no-cache"],
                 ["status", str(path), "--all"]):
        code = main(argv)
        err = capsys.readouterr().err.strip().splitlines()
        named = [ln for ln in err if "is damaged (checksum mismatch)" in ln]
        if argv[0] not in readers:
            continue  # this command never reads that array
        assert code != 0, (argv, err)
        assert len(named) == 1 and f"chunk {array}/c/" in named[0], (argv, err)
        assert "Traceback" not in "\n".join(err)
    after = {p: p.read_bytes() for p in path.rglob("*") if p.is_file() and "_derived" not in p.parts}
    assert after == before


def test_killed_cache_writers_leave_nothing_behind(tmp_path: Path) -> None:
    """A report killed while writing the statistics cache leaves a temporary group; the next cache
    write removes it (its writer is gone) and keeps a live writer's."""
    import os
    import shutil

    from cube import stats

    path = _demo(tmp_path, "k.zarr")
    stats.load_suffstats(path)
    derived = path / "_derived"
    dead = derived / f"suffstats.tmp-{_dead_pid_of_this_host()}-deadbeef"
    live = derived / f"suffstats.tmp-{os.getpid()}-cafebabe"
    old_style = derived / "suffstats.tmp-0a1b2c3d"  # written before pids were in the name
    for leftover in (dead, live, old_style):
        shutil.copytree(derived / "suffstats", leftover)
    stats.load_suffstats(path, kappa=np.array([0.0, 1.0]))  # another grid: a full pass and a cache write
    assert not dead.exists() and not old_style.exists() and live.exists()


def _dead_pid_of_this_host() -> int:
    proc = mp.get_context("spawn").Process(target=int)
    proc.start()
    proc.join()
    return int(proc.pid)


@pytest.fixture
def small_disk(tmp_path: Path):
    """A 3 MiB tmpfs (root can mount one here); skipped where mounting is not allowed."""
    import subprocess

    mount = tmp_path / "disk"
    mount.mkdir()
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=3m", "tmpfs", str(mount)], capture_output=True)
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here ({done.stderr.decode().strip()[:80]}); full-disk tests need root")
    yield mount
    subprocess.run(["umount", "-l", str(mount)], check=False)


def test_full_disk_is_one_line_and_loses_nothing(small_disk: Path, small_demo_cube: Path,
                                                capsys: pytest.CaptureFixture[str]) -> None:
    """demo --force, export and report --out onto a full disk: one line each, non-zero exit, the old
    store byte-identical and no temporary files left."""
    from cube.cli import main

    store = small_disk / "d.zarr"
    assert main(["demo", str(store), "--seeds", "1", "--iterates", "2", "--episodes", "4", "--eval-episodes", "2"]) == 0
    before = {p: p.read_bytes() for p in store.rglob("*") if p.is_file()}
    (small_disk / "tables").mkdir()
    with open(small_disk / "ballast", "wb") as ballast:  # fill the disk to the last byte
        try:
            while True:
                ballast.write(b"\0" * 65536)
                ballast.flush()
        except OSError:
            pass
    capsys.readouterr()
    for argv in (["demo", str(store), "--force", "--seeds", "3", "--iterates", "20"],
                 ["export", str(small_demo_cube), str(small_disk / "out.nc")],
                 ["report", str(small_demo_cube), "--per-condition", "--cdf", "--format", "json", "--boot", "10",
                  "--out", str(small_disk / "tables")]):
        code = main(argv)
        err = [ln for ln in capsys.readouterr().err.splitlines() if ln.startswith("error:")]
        assert code == 2 and len(err) == 1 and "space" in err[0], (argv, err)
    assert {p: p.read_bytes() for p in store.rglob("*") if p.is_file()} == before
    leftovers = [p.name for p in small_disk.rglob("*") if ".tmp-" in p.name or ".new-" in p.name
                 or p.name.startswith(".zarr.json.")]
    assert leftovers == []
