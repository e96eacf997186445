"""`saferl status` (cube, no jax) and `saferl status --watch` following a real writer process (issue 25):
its output changes as the writer writes, a killed writer shows as stopped, a failing run as failed, Ctrl-C
ends it with exit 0 and a deleted store with one line and exit 1. Every wait is on a condition (a line
read from the command's output, a process exit), never a sleep."""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from faultkit import CTX, stop

from cube import CubeWriter, RunKey, create_store, set_run_manifest
from cube.cli import main

KEY = RunKey("a", "t", 10.0, 0)
ITERATES = 4


def _store(tmp_path: Path) -> Path:
    out = tmp_path / "s.zarr"
    create_store(out, algos=["a"], tasks=["t"], bounds=[10.0], seeds=[0, 1], n_iterates=ITERATES, n_episodes=2)
    return out


def write_on_request(path: str, go: Any) -> None:
    """A writer process: for each item taken from `go`, write the next iterate of KEY (episodes and the
    manifest a trainer keeps: pid, host, iterates done); None ends it."""
    writer = CubeWriter(path)
    manifest = {"pid": os.getpid(), "host": socket.gethostname(), "started": "2026-11-26T10:00:00+00:00"}
    writer.set_run_manifest(KEY, status="partial", manifest=manifest)
    for j in range(ITERATES):
        if go.get() is None:
            return
        writer.write_episodes(KEY, "train", j, [1.0, 2.0], [3.0, 4.0])
        writer.set_run_manifest(KEY, status="partial",
                                manifest={**manifest, "iterates_done": j + 1, "env_steps": 100.0 * (j + 1)})


class Watch:
    """`saferl status --watch` in a subprocess, its output read line by line (killed after `limit` s)."""

    def __init__(self, path: Path, *extra: str, limit: float = 180) -> None:
        code = ("import sys; from cube.cli import main; rc = main(sys.argv[1:]); "
                "assert 'jax' not in sys.modules, 'jax imported'; sys.exit(rc)")
        self.proc = subprocess.Popen([sys.executable, "-c", code, "status", str(path), "--watch", "--all", "--wide",
                                      "--interval", "0.05", *extra], stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE, text=True)
        self.timer = threading.Timer(limit, self.proc.kill)
        self.timer.start()
        self.seen: list[str] = []

    def until(self, found: Callable[[str], bool]) -> str:
        """Read lines until one is `found` (the line); fails when the output ends first."""
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.seen.append(line)
            if found(line):
                return line
        raise AssertionError(f"output ended before the line looked for: {''.join(self.seen[-20:])}")

    def row(self, seed: int, *cells: str) -> str:
        """The next row of run `seed` holding every one of `cells`."""
        return self.until(lambda ln: _is_row(ln, seed) and all(c in ln for c in cells))

    def end(self) -> tuple[int, str]:
        out, err = self.proc.communicate(timeout=120)
        self.timer.cancel()
        self.seen.append(out)
        return self.proc.returncode, err


def _is_row(line: str, seed: int) -> bool:
    cells = line.split()
    return len(cells) > 4 and cells[:4] == ["a", "t", "10", str(seed)]


def test_watch_follows_a_writer_and_tells_when_it_is_killed(tmp_path: Path) -> None:
    path = _store(tmp_path)
    go = CTX.Queue()
    writer = CTX.Process(target=write_on_request, args=(str(path), go))
    writer.start()
    watch = Watch(path)
    try:
        watch.row(0, "partial (running)")
        watch.row(1, "pending")  # the next line of the same snapshot
        for j in range(2):
            go.put(j)
            row = watch.row(0, f"{j + 1}/{ITERATES}", "partial (running)")
            assert f"{100 * (j + 1)}" in row and socket.gethostname() in row
        os.kill(writer.pid, signal.SIGKILL)  # killed mid-run: its claim-less pid is gone
        writer.join(60)
        watch.until(lambda ln: "1 partial run(s) stopped (no live process)" in ln)
        watch.row(0, f"2/{ITERATES}", "partial (stopped)")  # the same snapshot, below its summary
        watch.proc.send_signal(signal.SIGINT)
        code, err = watch.end()
        assert code == 0, err
        assert "Traceback" not in err
    finally:
        stop(writer, 10)
        if watch.proc.poll() is None:
            watch.proc.kill()


def test_watch_of_a_deleted_store_ends_in_one_line(tmp_path: Path) -> None:
    path = _store(tmp_path)
    watch = Watch(path)
    watch.row(0, "pending")
    shutil.rmtree(path)
    code, err = watch.end()
    assert code == 1
    lines = err.strip().splitlines()
    assert len(lines) == 1 and "is gone" in lines[0] and str(path) in lines[0], err


def test_status_shows_progress_failures_and_totals(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = _store(tmp_path)
    writer = CubeWriter(path)
    for j in range(3):
        writer.write_episodes(KEY, "train", j, [1.0], [2.0])
    set_run_manifest(path, KEY, status="complete", manifest={"iterates_done": 3, "env_steps": 3000.0,
                                                             "slurm_job_id": "777", "variant": "mine"})
    failed = RunKey("a", "t", 10.0, 1)
    set_run_manifest(path, failed, status="partial", manifest={"iterates_done": 1, "env_steps": 1000.0,
                                                               "error": "ValueError: boom", "retries": 2})
    assert main(["status", str(path)]) == 0
    out = capsys.readouterr().out
    assert "2 runs: 1 complete, 1 partial, 0 pending; 0 running, 1 failed" in out
    assert not any(_is_row(ln, 0) for ln in out.splitlines())  # complete runs only with --all
    assert next(ln for ln in out.splitlines() if _is_row(ln, 1)).split()[4:6] == ["failed", "1/4"]
    assert ["a", "t", "2", "1", "failed,", "1", "complete"] in [ln.split() for ln in out.splitlines()]
    assert main(["status", str(path), "--wide"]) == 0
    out = capsys.readouterr().out
    row = next(ln for ln in out.splitlines() if _is_row(ln, 1))
    assert "partial (failed)" in row and "1/4" in row and "1,000" in row and "failed: ValueError: boom" in row
    total = next(ln.split() for ln in out.splitlines() if ln.split()[:3] == ["a", "t", "2"])
    assert total[3:9] == ["0", "0", "0", "1", "0", "1"]  # running stalled stopped failed pending complete
    assert main(["status", str(path), "--all", "--wide"]) == 0
    row = next(ln for ln in capsys.readouterr().out.splitlines() if _is_row(ln, 0))
    assert "complete" in row and "3/4" in row and "777" in row and "mine" in row


def test_status_fits_80_columns_with_long_labels(tmp_path: Path) -> None:
    """At 80 columns (a tmux pane) the default tables cut no cell: no '…', every line within 80, numbers
    and statuses whole; a long label wraps inside its column (its pieces, read down the column, spell it)."""
    from rich.console import Console

    from cube.cli.status import render
    from cube.store.runstatus import rate_text, read_run_status

    algo, task = "ppo_lagrangian_with_pid_and_cost_critic", "velocity_walker2d_l3_with_a_much_longer_name"
    path = tmp_path / "long.zarr"
    create_store(path, algos=[algo, "ppo_saute"], tasks=[task], bounds=[12.5], seeds=[0, 1234567], n_iterates=400,
                 n_episodes=1)
    writer = CubeWriter(path)
    key = RunKey(algo, task, 12.5, 1234567)
    for j in range(120):
        writer.write_episodes(key, "train", j, [1.0], [2.0])
    writer.set_run_manifest(key, status="partial", manifest={
        "pid": os.getpid(), "host": socket.gethostname(), "started": "2026-11-26T10:00:00+00:00",
        "iterates_done": 120, "env_steps": 1.2e7})
    console = Console(width=80, record=True, color_system=None)
    runs = read_run_status(path)
    console.print(render(path, runs, show_all=True))
    lines = [ln.rstrip() for ln in console.export_text().splitlines()]
    assert "…" not in "\n".join(lines) and max(len(ln) for ln in lines) <= 80, "\n".join(lines)
    top = next(i for i, ln in enumerate(lines) if ln.startswith("algo"))  # below the summary (wrapped)
    head = lines[top]
    assert head.split() == ["algo", "task", "d", "seed", "status", "it/J", "steps/s", "ETA", "last", "write"], head
    row = next(ln.split() for ln in lines if " 1234567 " in ln)
    assert row[2:6] == ["12.5", "1234567", "running", "120/400"] and row[-1] == "ago", row
    table = lines[top + 2:lines.index("totals")]
    at = head.index("task")
    column = "".join(ln[:at].strip() for ln in table)
    assert column == (algo + algo + "ppo_saute" * 2), column
    end = table[0].index(" 12.5 ")  # the bound column, right-aligned
    assert "".join(ln[at:end].strip() for ln in table) == task * 4
    totals = lines[lines.index("totals") + 3:]
    rate = rate_text(sum(r.steps_per_s or 0.0 for r in runs))  # over the attempt's wall time: moves with the clock
    # ETA unknown ('—'): a pending run's compile and iterates, and nothing measured them yet
    assert totals[0].split()[-6:] == ["2", "1", "running,", "1", rate, "—"], totals
    assert totals[1].split()[-1] == "pending" and totals[3].split()[-3:] == ["2", "pending", "—"], totals
    assert lines[-3].startswith("steps/s: env steps/s over each run's last 5 iterates"), lines[-3:]


@pytest.mark.parametrize("argv", [["--interval", "0"], ["--stall-after", "-1"]])
def test_bad_options_are_one_line(tmp_path: Path, argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    path = _store(tmp_path)
    assert main(["status", str(path), "--watch", *argv]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and argv[0] in err[0]


def test_status_of_a_missing_store_is_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["status", str(tmp_path / "none.zarr")]) != 0
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "none.zarr" in err[0]
