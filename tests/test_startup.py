"""`saferl --help`, every command's `--help` and argument errors load none of the heavy modules (checked in a fresh
process): commands import what they use when they run (issue 37). Times are bench/startup.py's, not a test's."""

from __future__ import annotations

import subprocess
import sys

HEAVY = ("xarray", "dask", "zarr", "pandas", "scipy", "numba", "matplotlib", "distributed")

PROBE = """
import contextlib, io, sys
import cube.cli.entry as entry
sys.argv = ["saferl", "--help"]
out = io.StringIO()
codes = []
with contextlib.redirect_stdout(out), contextlib.redirect_stderr(io.StringIO()):
    for argv in {argvs!r}:
        try:
            entry.build_parser().parse_args(argv)
        except SystemExit as exc:
            codes.append(exc.code)
print(codes)
print("usage: saferl" in out.getvalue())
print(",".join(sorted({{m.split(".")[0] for m in sys.modules}} & set({heavy!r}))))
"""


def _probe(argvs: list[list[str]]) -> list[str]:
    code = PROBE.format(argvs=argvs, heavy=HEAVY)
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=120)
    return run.stdout.splitlines()


def test_help_of_every_command_imports_nothing_heavy() -> None:
    commands = ["report", "plot", "plan", "status", "validate", "demo", "export", "import"]
    lines = _probe([["--help"], *([c, "--help"] for c in commands)])
    assert lines[0] == str([0] * (1 + len(commands)))
    assert lines[1] == "True"
    assert lines[2] == "", f"--help imported {lines[2]}"


def test_argument_errors_import_nothing_heavy() -> None:
    lines = _probe([["report"], ["report", "x.zarr", "--boot", "many"], ["nosuchcommand"],
                    ["plot", "x.zarr", "nosuchfigure"]])
    assert lines[0] == "[2, 2, 2, 2]"
    assert lines[2] == "", f"an argument error imported {lines[2]}"


def test_the_lazy_facades_give_the_same_objects() -> None:
    """`cube.X` and `cube.stats.X` load their module on first use; `dir()` lists them; unknown names fail."""
    import cube
    from cube import stats
    from cube.stats.tables import aggregate_table
    from cube.store.read import open_cube

    assert cube.open_cube is open_cube and stats.aggregate_table is aggregate_table and cube.stats is stats
    assert "open_cube" in dir(cube) and "aggregate_table" in dir(stats)
    for module in (cube, stats):
        try:
            module.no_such_name  # noqa: B018
        except AttributeError:
            continue
        raise AssertionError(f"{module.__name__}.no_such_name did not raise AttributeError")


def test_the_accessor_leaves_the_tables_a_report_may_not_ask_for_unloaded() -> None:
    """`ds.saferl` (registered by the first `cube.stats` name a report takes) imports the honest intervals (scipy),
    the front, profiles, plans and learning curves only when their method is called (issue 37)."""
    later = ("cube.stats.honest", "cube.stats.front", "cube.stats.profiles", "cube.stats.planning",
             "cube.stats.learning_curves", "scipy.special")
    code = ("import sys; from cube import stats; stats.cdf_curves; "
            f"print(','.join(sorted(m for m in {later!r} if m in sys.modules)))")
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=120)
    assert run.stdout.strip() == "", f"loaded at once: {run.stdout.strip()}"
