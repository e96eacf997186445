"""Fault injection, issue 26 items 11, 13, 14 and 15: hostile labels and paths, sizes and numbers beyond
reason, shared stores and planted links, and the smaller holes.

Before: a label or path with rich markup ('[/x]') crashed validate (MarkupError) and 'ppo[lag]' printed as
'ppo'; 'demo --episodes 10**9' ended in MemoryError and a seed of 1e20 was stored as -2**63; side folders
were made mode 0700 whatever the umask; a planted `_derived` link made report write (and delete) outside
the store; killed 'demo --force' left full-size hidden copies; '--out' turned a 0600 file into 0644."""

from __future__ import annotations

import os
import shutil
import signal
import stat
import warnings
from pathlib import Path

import numpy as np
import pytest
from faultkit import kill_self_at_write, start, stop

import cube
from cube import CubeError, CubeWriter, Recorder, RunKey, create_store, stats
from cube.cli import main

pytestmark = pytest.mark.faults


def _one_error_line(capsys: pytest.CaptureFixture[str]) -> str:
    err = [ln for ln in capsys.readouterr().err.splitlines() if ln.strip()]
    assert len(err) == 1 and err[0].startswith("error:") and "Traceback" not in err[0], err
    return err[0]


# ------------------------------------------------------------------------------------- item 11
def test_labels_and_paths_are_data_not_markup(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    folder = tmp_path / "x["
    folder.mkdir()
    path = folder / "b].zarr"  # the path holds '[/b]'
    labels = ["[/x]", "ppo[lag]", "[bold red]a"]
    create_store(path, algos=labels, tasks=["[/t]"], bounds=[1.0], seeds=[0], n_iterates=2, n_episodes=2)
    writer = CubeWriter(path)
    for algo in labels:
        writer.write_episodes(RunKey(algo, "[/t]", 1.0, 0), "train", 0, [1.0], [2.0])
    capsys.readouterr()
    assert main(["validate", str(path)]) == 0
    out = capsys.readouterr().out
    assert "[/x], ppo[lag], [bold red]a" in out and "x[/b].zarr" in out.replace("\n", "").replace(" ", "")
    assert main(["export", str(path), str(folder / "o[u].nc")]) == 0
    assert main(["validate", str(folder / "[/missing].zarr")]) == 1
    assert "[/missing].zarr" in capsys.readouterr().err
    from cube.cli.console import print_error, progress_bar

    print_error(CubeError("run [/x]/[bold]t/d=1/seed=0 is [red]broken"))
    assert "[/x]/[bold]t" in capsys.readouterr().err
    with progress_bar() as bar:  # descriptions name labels: never parsed as markup
        bar.add_task("importing [/x] and ppo[lag]", total=1)


# ------------------------------------------------------------------------------------- item 13
@pytest.mark.parametrize(("argv", "says"), [
    (["--episodes", str(10**9)], "--episodes 1,000,000,000 is beyond the limit of 1,000,000"),
    (["--iterates", str(10**7)], "--iterates 10,000,000 is beyond the limit"),
    (["--iterates", "100000", "--episodes", "100000"], "beyond the limit of 512 MiB per run"),
    (["--iterates", "5000", "--episodes", "8000", "--seeds", "1"], "memory"),
])
def test_demo_sizes_are_refused_before_any_work(tmp_path: Path, argv: list[str], says: str,
                                                capsys: pytest.CaptureFixture[str],
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    from cube import compute

    monkeypatch.setattr(compute, "available_memory", lambda: 2**30)  # a machine of 1 GiB free
    assert main(["demo", str(tmp_path / "d.zarr"), *argv]) == 2
    assert says in _one_error_line(capsys)
    assert os.listdir(tmp_path) == []  # nothing written, not even a staging folder


@pytest.mark.parametrize("seed", [1e20, 2**63, -3, 1.5, "x", True])
def test_seeds_outside_int64_are_refused(tmp_path: Path, seed: object) -> None:
    path = tmp_path / "s.zarr"
    with pytest.raises(CubeError, match="seed"):
        Recorder(path, algo="a", task="t", bound=1.0, seed=seed)  # type: ignore[arg-type]
    with pytest.raises(CubeError, match="seed"):
        create_store(path, algos=["a"], tasks=["t"], bounds=[1.0], seeds=[seed], n_iterates=1, n_episodes=1)
    assert not path.exists()


@pytest.mark.parametrize("iterate", [10**6, 1e9, 2**70])
def test_iterates_beyond_reason_are_refused_before_writing(tmp_path: Path, iterate: float) -> None:
    path = tmp_path / "s.zarr"
    with Recorder(path, algo="a", task="t", bound=1.0, seed=0) as rec:
        rec.train_episodes(0, [1.0], [1.0])
        with pytest.raises(CubeError, match="beyond the limit of 1,000,000 iterates"):
            rec.train_episodes(iterate, [1.0], [1.0])  # type: ignore[arg-type]
    with pytest.raises(CubeError, match="beyond the limit"):
        cube.grow_store(path, n_iterates=int(iterate) + 1)
    assert cube.open_cube(path).sizes["iterate"] == 1


def test_readers_refuse_a_fifo_at_once(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    fifo = tmp_path / "cube.nc"
    os.mkfifo(fifo)
    with pytest.raises(CubeError, match="is a FIFO"):
        cube.open_cube(fifo)
    assert main(["export", str(fifo), str(tmp_path / "o.nc")]) == 2
    assert "is a FIFO" in _one_error_line(capsys)


def test_iterate_windows_past_the_end_are_refused() -> None:
    from cube.selection import Selection, count_at_most, parse_selection

    assert parse_selection(iterates="2:4").check_iterates(5).iterates == (2, 4)
    for text in ("3:9", "7"):
        with pytest.raises(CubeError, match=r"reaches past the cube's last iterate: it has iterates 0..4"):
            parse_selection(iterates=text).check_iterates(5)
    assert Selection().check_iterates(1).iterates is None
    with pytest.raises(Exception, match="1,000,000,000 is beyond the limit of 10,000"):
        count_at_most(10_000)(str(10**9))


def test_a_reward_too_large_for_float32_is_refused(tmp_path: Path) -> None:
    """1e39 is a finite float64 but an infinite float32: the writer refuses it, so report and validate never
    disagree about it."""
    path = tmp_path / "s.zarr"
    create_store(path, algos=["a"], tasks=["t"], bounds=[1.0], seeds=[0], n_iterates=1, n_episodes=2)
    with pytest.raises(CubeError, match="does not fit the store's float32"):
        cube.write_episodes(path, RunKey("a", "t", 1.0, 0), "train", 0, [1e39, 1.0], [1.0, 1.0])
    assert int(cube.open_cube(path)["cost"].count()) == 0


# ------------------------------------------------------------------------------------- item 14
def test_side_folders_honour_the_umask_and_the_stores_group(tmp_path: Path) -> None:
    """A store a research group shares (setgid, group 4242, umask 002): every folder saferl makes inside is
    group-writable and of the store's group, so another member's recorder can write there."""
    path = tmp_path / "shared.zarr"
    old = os.umask(0o002)
    try:
        with Recorder(path, algo="a", task="t", bound=1.0, seed=0) as rec:
            rec.train_episodes(0, [1.0], [1.0])
        shutil.rmtree(path / "_locks")
        shutil.rmtree(path / "_claims")  # the recorder's claim folder too: made before the store was shared
        os.chown(path, -1, 4242)
        os.chmod(path, 0o2775)
        with Recorder(path, algo="a", task="t", bound=1.0, seed=1) as rec:
            rec.train_episodes(0, [1.0], [1.0])
        stats.load_suffstats(path)
        from train.claims import try_claim

        assert try_claim(path, RunKey("a", "t", 1.0, 0))
    finally:
        os.umask(old)
    for name in ("_locks", "_derived", "_claims"):
        st = os.stat(path / name)
        assert stat.S_IMODE(st.st_mode) & 0o070 == 0o070, (name, oct(st.st_mode))
        assert st.st_gid == 4242 and st.st_mode & stat.S_ISGID, (name, st.st_gid)


def test_a_planted_derived_link_is_never_followed(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "s.zarr"
    with Recorder(path, algo="a", task="t", bound=1.0, seed=0) as rec:
        rec.train_episodes(0, [1.0], [1.0])
    victim = tmp_path / "victim"
    (victim / "suffstats").mkdir(parents=True)
    (victim / "suffstats" / "precious.txt").write_text("keep me")
    shutil.rmtree(path / "_derived", ignore_errors=True)
    (path / "_derived").symlink_to(victim)
    with pytest.warns(UserWarning, match="symbolic link"):
        ss = stats.load_suffstats(path)
    assert int(ss["n"].sum()) == 1
    capsys.readouterr()
    assert main(["report", str(path), "--boot", "10", "--format", "csv"]) == 0
    assert sorted(p.name for p in victim.rglob("*")) == ["precious.txt", "suffstats"]
    assert (victim / "suffstats" / "precious.txt").read_text() == "keep me"


@pytest.mark.parametrize("link", ["_locks", "cost/c"])
def test_writers_refuse_planted_links(tmp_path: Path, link: str) -> None:
    path = tmp_path / "s.zarr"
    with Recorder(path, algo="a", task="t", bound=1.0, seed=0) as rec:
        rec.train_episodes(0, [1.0], [1.0])
    elsewhere = tmp_path / "elsewhere"
    shutil.move(path / link, elsewhere)
    (path / link).symlink_to(elsewhere)
    before = sorted(p.name for p in elsewhere.rglob("*"))
    with pytest.raises(CubeError, match="symbolic link inside the store"):
        CubeWriter(path).write_episodes(RunKey("a", "t", 1.0, 0), "train", 0, [2.0], [2.0])
    assert sorted(p.name for p in elsewhere.rglob("*")) == before


# ------------------------------------------------------------------------------------- item 15
def _demo_killed_while_writing(path: str) -> None:
    kill_self_at_write(lambda key: key.startswith("cost/c/"), nth=3)
    main(["demo", path, "--force", "--seeds", "1", "--iterates", "2", "--episodes", "4", "--eval-episodes", "2"])


def test_a_killed_demo_force_leaves_no_hidden_copy_after_the_next_run(tmp_path: Path) -> None:
    path = tmp_path / "d.zarr"
    args = ["--seeds", "1", "--iterates", "2", "--episodes", "4", "--eval-episodes", "2"]
    assert main(["demo", str(path), *args]) == 0
    assert stop(start(_demo_killed_while_writing, str(path))) == -signal.SIGKILL
    hidden = [p.name for p in tmp_path.iterdir() if p.name.startswith(".d.zarr.")]
    assert hidden, "the kill should have left a staging copy"
    assert cube.validate(path) == []  # the old store is untouched
    assert main(["demo", str(path), "--force", *args]) == 0
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".d.zarr.")] == []


def test_an_old_store_renamed_away_by_a_kill_comes_back(tmp_path: Path) -> None:
    """A kill between `staged_store`'s two renames leaves no store at the path, only '.<name>.old-...':
    the next run puts it back before anything else."""
    from cube.store.fs import remove_stale_staging, staging_path

    path = tmp_path / "d.zarr"
    create_store(path, algos=["a"], tasks=["t"], bounds=[1.0], seeds=[0], n_iterates=1, n_episodes=1)
    dead = staging_path(path, "old").name.rsplit("-", 2)[0] + f"-{_dead_pid()}-cafebabe"
    os.rename(path, tmp_path / dead)
    assert remove_stale_staging(path) == []
    assert (path / "zarr.json").exists() and not (tmp_path / dead).exists()


def _dead_pid() -> int:
    proc = start(int)
    stop(proc)
    return int(proc.pid)


def test_out_keeps_the_mode_of_the_file_it_replaces(tmp_path: Path, small_demo_cube: Path) -> None:
    target = tmp_path / "t.csv"
    target.write_text("old")
    os.chmod(target, 0o600)
    assert main(["report", str(small_demo_cube), "--boot", "10", "--format", "csv", "--out", str(target)]) == 0
    assert target.read_text() != "old" and stat.S_IMODE(os.stat(target).st_mode) == 0o600
    from cube.outputs import write_text

    os.chmod(target, 0o640)
    write_text(target, "new")
    assert stat.S_IMODE(os.stat(target).st_mode) == 0o640


@pytest.mark.parametrize("taken", ["file", "dangling link", "fifo"])
def test_a_file_written_without_replace_never_takes_a_taken_name(tmp_path: Path, taken: str) -> None:
    """`write_text(..., replace=False)` (the TUI's exports): a name held by anything is refused with one line,
    the holder untouched, no temporary file left; a free name gets the whole text."""
    from cube.errors import CubeError
    from cube.outputs import write_text

    target = tmp_path / "t.csv"
    if taken == "file":
        target.write_text("mine")
    elif taken == "fifo":
        os.mkfifo(target)
    else:
        target.symlink_to(tmp_path / "nowhere.csv")
    with pytest.raises(CubeError, match="t.csv"):
        write_text(target, "new", replace=False)
    assert not (tmp_path / "nowhere.csv").exists()
    assert target.is_symlink() or target.is_fifo() or target.read_text() == "mine"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["t.csv"]
    write_text(tmp_path / "free.csv", "new", replace=False)
    assert (tmp_path / "free.csv").read_text() == "new" and len(list(tmp_path.iterdir())) == 2


def test_export_on_a_full_disk_names_the_full_disk(tmp_path: Path, small_demo_cube: Path,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    from faultkit import fill_disk, mount_tmpfs, unmount

    disk = tmp_path / "disk"
    why = mount_tmpfs(disk, "1m")
    if why:
        pytest.skip(f"cannot mount a tmpfs here ({why})")
    try:
        fill_disk(disk)
        capsys.readouterr()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            assert main(["export", str(small_demo_cube), str(disk / "o.nc")]) == 2
        line = _one_error_line(capsys)
        assert "No space left on device" in line and "free some space" in line and "corrupt" not in line
        assert sorted(p.name for p in disk.iterdir()) == ["ballast"]
    finally:
        unmount(disk)
    assert np.isfinite(cube.open_cube(small_demo_cube)["cost"].values).any()
