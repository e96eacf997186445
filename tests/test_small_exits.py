"""The small exits of issue 36, each refused (or shown) in one line: stored labels are text to `saferl status`,
never markup; the Status view calls a deleted store gone; `status --watch --interval 1e300`, `--stall-after nan`,
`saferl-tui` on a missing path, a plain file or a folder that is no store, `demo --seed -1`,
`plot curves --window 1e9` and `report --out ''`; an OmniSafe config.json with a byte-order mark, or whose `algo`
is a JSON object. And `status --watch` ends within one poll of Ctrl-C, however busy the machine.

Before: `[/x]` as a label ended status in "unexpected MarkupError" and `ppo[lag]` showed as `ppo`; the Status
view called a deleted store "a netCDF file"; --interval 1e300 ended in "unexpected OverflowError"; --stall-after
nan silently turned stall detection off; saferl-tui stayed open on a bad path (and exited 0 on nope.zarr);
demo --seed -1 ended in "unexpected ValueError"; --window 1e9 and --out '' were accepted; the BOM gave an
"unexpected" error and the object became a label."""

from __future__ import annotations

import json
import multiprocessing as mp
import os
import random
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from cube import CubeError, CubeWriter, RunKey, create_store, open_cube
from cube.cli import main


def _labelled_store(tmp_path: Path) -> Path:
    path = tmp_path / "s.zarr"
    create_store(path, algos=["[/x]", "ppo[lag]"], tasks=["[bold]t"], bounds=[10.0], seeds=[0], n_iterates=2,
                 n_episodes=2)
    writer = CubeWriter(path)
    for algo in ("[/x]", "ppo[lag]"):
        key = RunKey(algo, "[bold]t", 10.0, 0)
        writer.write_episodes(key, "train", 0, [1.0], [2.0])
        writer.set_run_manifest(key, status="partial", manifest={"host": "elsewhere", "pid": 1})
    return path


def test_status_shows_stored_labels_as_text(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = _labelled_store(tmp_path)
    assert main(["status", str(path), "--all"]) == 0
    out = capsys.readouterr().out
    assert "[/x]" in out and "ppo[lag]" in out and "[bold]t" in out


@pytest.mark.parametrize("argv", [["--watch", "--interval", "1e300"], ["--watch", "--interval", "inf"],
                                  ["--stall-after", "nan"], ["--stall-after", "inf"], ["--stall-after", "-1"]])
def test_status_refuses_times_it_cannot_use(tmp_path: Path, argv: list[str],
                                            capsys: pytest.CaptureFixture[str]) -> None:
    path = _labelled_store(tmp_path)
    assert main(["status", str(path), *argv]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and argv[-2] in err[0] and "unexpected" not in err[0]


def test_the_status_view_calls_a_deleted_store_gone(small_demo_cube: Path, tmp_path: Path) -> None:
    from saferl_tui.model import CubeModel

    path = tmp_path / "c.zarr"
    shutil.copytree(small_demo_cube, path)
    model = CubeModel(path)
    from cube.stats.cache import wait_for_cache_writes

    selection = model.load(lambda f, t: None).default_selection()
    wait_for_cache_writes()  # the statistics cache the load writes in the background
    shutil.rmtree(path)
    with pytest.raises(CubeError) as info:
        model.run_statuses(selection)
    assert "is gone" in str(info.value) and "netCDF" not in str(info.value)


@pytest.mark.parametrize("what", ["missing", "nope.zarr", "plain file", "folder"])
def test_saferl_tui_refuses_a_path_that_is_no_cube(tmp_path: Path, what: str,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    from saferl_tui.cli import main as tui_main

    path = {"missing": tmp_path / "missing", "nope.zarr": tmp_path / "nope.zarr", "plain file": tmp_path / "x.txt",
            "folder": tmp_path / "folder"}[what]
    if what == "plain file":
        path.write_text("hello")
    if what == "folder":
        path.mkdir()
    assert tui_main([str(path)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error:") and str(path) in err[0]


def test_demo_refuses_a_negative_seed(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["demo", str(tmp_path / "d.zarr"), "--seed", "-1"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--seed" in err[0] and "unexpected" not in err[0]
    assert not (tmp_path / "d.zarr").exists()


def test_plot_refuses_a_window_beyond_the_iterates(small_demo_cube: Path, tmp_path: Path,
                                                    capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "c.pdf"
    assert main(["plot", str(small_demo_cube), "curves", "--window", "1000000000", "--out", str(out)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--window 1,000,000,000" in err[0] and "5 iterates" in err[0]
    assert not out.exists()


def test_plot_cuts_the_default_window_to_a_short_cube(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """No --window on a cube of 3 iterates: the default 5 is cut to 3 (only a window given is refused)."""
    from cube.io.demo import make_demo_cube

    path = tmp_path / "short.zarr"
    make_demo_cube(path, seed=1, algos=("ppo", "ppo_lag"), tasks=("goal",), bounds=(25.0,), n_seeds=2,
                   n_iterates=3, n_train_episodes=4, n_eval_episodes=4)
    out = tmp_path / "c.png"
    assert main(["plot", str(path), "curves", "--out", str(out), "--boot", "20"]) == 0
    assert out.stat().st_size > 0 and "error" not in capsys.readouterr().err


def test_report_refuses_an_empty_out(small_demo_cube: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["report", str(small_demo_cube), "--out", ""]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--out" in err[0]


def _omnisafe(tmp_path: Path, change: object) -> Path:
    from import_fixtures import omnisafe_run

    run = omnisafe_run(tmp_path / "runs", "PPOLag", "SafetyPointGoal1-v0", 0, [[(1.0, 2.0)] * 3] * 2)
    config = run / "config.json"
    if callable(change):
        change(config)
    return tmp_path / "runs"


def test_an_omnisafe_config_with_a_byte_order_mark_is_read(tmp_path: Path) -> None:
    runs = _omnisafe(tmp_path, lambda c: c.write_bytes(b"\xef\xbb\xbf" + c.read_bytes()))
    assert main(["import", "omnisafe", str(runs), "--out", str(tmp_path / "o.zarr")]) == 0
    assert open_cube(tmp_path / "o.zarr")["algo"].values.tolist() == ["PPOLag"]


def test_an_omnisafe_algo_that_is_an_object_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    def object_algo(config: Path) -> None:
        body = json.loads(config.read_text())
        body["algo"] = {"name": "PPOLag"}
        config.write_text(json.dumps(body))

    runs = _omnisafe(tmp_path, object_algo)
    assert main(["import", "omnisafe", str(runs), "--out", str(tmp_path / "o.zarr")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "algo is an object" in err[0] and "--algo" in err[0]
    assert not (tmp_path / "o.zarr").exists()
    assert main(["import", "omnisafe", str(runs), "--out", str(tmp_path / "o.zarr"), "--algo", "ppo_lag"]) == 0
    assert open_cube(tmp_path / "o.zarr")["algo"].values.tolist() == ["ppo_lag"]


# ------------------------------------------------------------------------------- --watch shutdown
def test_ctrl_c_during_a_poll_lets_it_finish_and_ends_the_watch(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                                capsys: pytest.CaptureFixture[str]) -> None:
    """A Ctrl-C that lands inside a poll's reads (zarr calls, lock files) never cuts them: the poll finishes,
    the watch ends with 0 and leaves no handler of its own behind."""
    from cube.store.runstatus import RunStatusReader

    path = _labelled_store(tmp_path)
    real = RunStatusReader.read
    finished: list[bool] = []

    def read_with_a_ctrl_c(self: RunStatusReader, *args: object, **kwargs: object) -> object:
        os.kill(os.getpid(), signal.SIGINT)  # delivered at once, to this (the main) thread
        runs = real(self, *args, **kwargs)  # type: ignore[arg-type]
        finished.append(True)
        return runs

    monkeypatch.setattr(RunStatusReader, "read", read_with_a_ctrl_c)
    before = signal.getsignal(signal.SIGINT)
    assert main(["status", str(path), "--watch", "--interval", "3600"]) == 0
    assert finished == [True] and signal.getsignal(signal.SIGINT) is before


def _burn(stop_at: float) -> None:
    while time.time() < stop_at:
        pass


@pytest.mark.faults
def test_watch_ends_promptly_on_ctrl_c_under_load(tmp_path: Path) -> None:
    """Two busy processes beside it (2 cores): Ctrl-C at seeded moments after the watch has drawn ends it
    with 0, each within 30 s."""
    path = _labelled_store(tmp_path)
    burners = [mp.get_context("fork").Process(target=_burn, args=(time.time() + 120,)) for _ in range(2)]
    for b in burners:
        b.start()
    rng = random.Random(36)
    try:
        for _ in range(1):
            proc = subprocess.Popen([sys.executable, "-m", "cube.cli", "status", str(path), "--watch", "--all",
                                     "--interval", "0.01"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
            assert proc.stdout is not None
            for _ in range(1 + rng.randrange(3)):  # a seeded number of snapshots drawn (a line each)
                assert proc.stdout.readline()
            proc.send_signal(signal.SIGINT)
            t0 = time.monotonic()
            try:
                proc.communicate(timeout=30)
            finally:
                proc.kill()
            assert proc.returncode == 0 and time.monotonic() - t0 < 30
    finally:
        for b in burners:
            b.kill()
            b.join()
