"""`saferl --help`, every command's `--help` and argument errors load none of the heavy modules (checked in a fresh
process): commands import what they use when they run (issue 37). Times are bench/startup.py's, not a test's."""

from __future__ import annotations

import subprocess
import sys

import pytest

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


COMMAND_PROBE = """
import contextlib, io, sys
import cube.cli.entry as entry
out, err = io.StringIO(), io.StringIO()
with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
    try:
        entry.parser_for({argv!r}).parse_args({argv!r})
    except SystemExit:
        pass
print(sorted({{m.removeprefix("cube.cli.") for m in sys.modules if m.startswith("cube.cli.") or m == "train.cli"}}))
print(repr(out.getvalue() + err.getvalue()))
print("numpy" in sys.modules)
"""


@pytest.mark.parametrize(("argv", "loaded"), [(["report", "--help"], ["report"]),
                                              (["plot", "--help"], ["plot"]),
                                              (["demo", "--help"], ["demo", "export", "migrate", "publish",
                                                                    "status", "validate"])])
def test_a_command_loads_only_the_plugin_named_after_it_or_all_of_them(argv: list[str], loaded: list[str]) -> None:
    """`saferl report` loads the report plugin alone (no trainer, plotter or importer registered), and no numpy; a
    command whose plugin has another name (``demo``: the ``cube`` plugin) loads every plugin, as before."""
    code = COMMAND_PROBE.format(argv=argv)
    lines = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                           timeout=120).stdout.splitlines()
    modules = eval(lines[0])  # noqa: S307 - our own probe's list of names
    assert set(loaded) <= set(modules), modules
    if argv[0] in ("report", "plot"):
        others = {"train.cli", "demo", "import_", "plan", "render", "validate"}  # the other plugins
        assert not others & set(modules), modules
        assert lines[2] == "False", "numpy loaded for the help of one command"  # 0.1 s of a 0.4 s start
    else:
        assert "report" in modules and "plot" in modules, modules
    assert f"usage: saferl {argv[0]}" in eval(lines[1])  # noqa: S307


def test_the_top_level_help_loads_no_importer_and_the_import_help_lists_every_format() -> None:
    """The import formats' sub-parsers are added when `saferl import` is parsed (`CommandParser.defer`):
    `saferl --help` loads no importer and no numpy; `saferl import --help` still lists every format."""
    for argv, loaded, shown in ((["--help"], "False", "import    read other tools"),
                                (["import", "--help"], "True", "omnisafe")):
        code = COMMAND_PROBE.format(argv=argv)
        lines = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                               timeout=120).stdout.splitlines()
        assert lines[2] == loaded, (argv, "numpy loaded" if loaded == "False" else "numpy not loaded")
        assert shown in eval(lines[1]), argv  # noqa: S307 - our own probe's text


def test_help_and_a_mistyped_command_still_list_every_command(capsys: pytest.CaptureFixture[str]) -> None:
    from cube.cli.entry import main

    for argv in (["--help"], ["reprot"]):
        with pytest.raises(SystemExit):
            main(argv)
        text = " ".join(capsys.readouterr())
        for command in ("report", "plot", "demo", "validate", "import"):
            assert command in text, (argv, command)


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
