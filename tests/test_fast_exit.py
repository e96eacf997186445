"""The ``saferl`` console script ends a command whose work is done without the interpreter's teardown
(`cube.cli.console.end_now`: half a second after a paper-scale report), its output flushed; never a command
that did not say so, one that failed, or one a thread of which exit would still wait for."""

from __future__ import annotations

import subprocess
import sys

import pytest

SCRIPT = """
import atexit, sys, threading
from cube.cli import console
atexit.register(lambda: print("|teardown", end=""))
release = threading.Event()
if "thread" in sys.argv:
    threading.Thread(target=release.wait).start()  # not a daemon: exit would join it
if "done" in sys.argv:
    console.work_done()
print("out", end="")
console.end_now(int(sys.argv[1]))
print("|returned", end="")
release.set()
"""


@pytest.mark.parametrize(("args", "printed"), [
    (["0", "done"], "out"),
    (["0"], "out|returned|teardown"),
    (["2", "done"], "out|returned|teardown"),
    (["0", "done", "thread"], "out|returned|teardown"),
], ids=["done", "not-said", "failed", "a-thread-left"])
def test_a_command_ends_at_once_only_when_its_work_is_done(args: list[str], printed: str) -> None:
    got = subprocess.run([sys.executable, "-c", SCRIPT, *args], capture_output=True, text=True, timeout=120)
    assert got.stdout == printed
    assert got.returncode == int(args[0]) if printed == "out" else got.returncode == 0


def test_a_report_ends_at_once_with_its_tables_and_cache_written(small_demo_cube, tmp_path) -> None:
    import shutil

    from cube.stats import cache

    cube = tmp_path / "c.zarr"
    shutil.copytree(small_demo_cube, cube, ignore=shutil.ignore_patterns("_derived"))
    run = [sys.executable, "-m", "cube.cli.entry", "report", str(cube), "--format", "csv", "--boot", "50"]
    first = subprocess.run(run, capture_output=True, text=True, timeout=300)
    assert first.returncode == 0 and first.stdout.startswith("algo,") and first.stdout.endswith("\n")
    assert cache.read_cache(cube) is not None  # written whole before the process ended
    again = subprocess.run(run, capture_output=True, text=True, timeout=300)
    assert again.returncode == 0 and again.stdout == first.stdout


def test_survivors_are_frozen_only_in_the_console_scripts_process() -> None:
    """`freeze_survivors` moves live objects out of the collector's reach in the console script's process
    (`console_main` marks it), never in-process (these tests, the TUI), where they would never be collected."""
    import gc

    from cube.cli import console

    before = gc.get_freeze_count()
    console.freeze_survivors()
    assert gc.get_freeze_count() == before
    probe = ("import gc, sys; import cube.cli.entry as e; from cube.cli import console; "
             "e.main = lambda: print(gc.get_freeze_count(), end=' ') or console.freeze_survivors() or "
             "print(gc.get_freeze_count() > 0) or 0; e.console_main()")
    run = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr
    assert run.stdout.split() == ["0", "True"]
