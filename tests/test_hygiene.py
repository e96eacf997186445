"""Domain code never imports the UI or the trainer's heavy dependencies (checked in a fresh process)."""

from __future__ import annotations

import ast
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

CHECK = """
import sys
import {module}
bad = sorted(m for m in sys.modules if m.split('.')[0] in {forbidden!r})
print(','.join(bad))
"""


@pytest.mark.parametrize(
    ("module", "forbidden"),
    [
        ("cube", ("jax", "jaxlib", "textual", "crax", "flax", "optax")),
        ("cube.cli.entry", ("jax", "jaxlib", "textual", "crax", "flax", "optax")),
        ("saferl_tui", ("jax", "jaxlib", "crax", "flax", "optax")),
        ("train", ("jax", "jaxlib", "crax", "textual")),
    ],
)
def test_module_does_not_import(module: str, forbidden: tuple[str, ...]) -> None:
    code = CHECK.format(module=module, forbidden=forbidden)
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert result.stdout.strip() == "", f"{module} imported {result.stdout.strip()}"


def test_cli_parser_builds_without_jax() -> None:
    code = (
        "import sys\nfrom cube.cli.entry import build_parser\nbuild_parser()\n"
        "print(','.join(sorted(m for m in sys.modules if m.split('.')[0] in ('jax', 'textual', 'crax'))))"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert result.stdout.strip() == ""


ROOT = Path(__file__).resolve().parents[1]
# `train` and `saferl_tui` as modules: an import, or a dotted/entry-point string like "train.cli" or
# "saferl_tui:main". The bare word "train" is a mode name of the cube and stays allowed.
MODULE_REF = re.compile(r"\b(train|saferl_tui)[.:][A-Za-z_]|\bsaferl_tui\b")


def _names_module(node: ast.AST, roots: tuple[str, ...]) -> bool:
    if isinstance(node, ast.Import):
        return any(a.name.split(".")[0] in roots for a in node.names)
    if isinstance(node, ast.ImportFrom):
        return (node.module or "").split(".")[0] in roots and node.level == 0
    return False


CUBE_MODULES = sorted((ROOT / "cube").rglob("*.py"))


@pytest.mark.parametrize("path", CUBE_MODULES, ids=lambda p: str(p.relative_to(ROOT)))
def test_cube_never_names_train_or_tui(path: Path) -> None:
    """cube knows nothing of the trainer or the TUI: no import, no string import, no mention."""
    text = path.read_text()
    tree = ast.parse(text)
    imports = [n for n in ast.walk(tree) if _names_module(n, ("train", "saferl_tui"))]
    assert not imports, f"{path.name}:{imports[0].lineno} imports train/saferl_tui"
    hits = [(i, line) for i, line in enumerate(text.splitlines(), 1) if MODULE_REF.search(line)]
    assert not hits, f"{path.name}:{hits[0][0]} names train/saferl_tui: {hits[0][1].strip()}"


WINGS = ("store", "stats", "render", "io", "cli")
ALLOWED = {
    "core": set(),
    "store": {"core"},
    "stats": {"core", "store"},
    "render": {"core", "store", "stats"},
    "io": {"core", "store"},
    "cli": {"core", "store", "stats", "render", "io"},
}
"""The one direction of imports between cube's wings (docs/ARCHITECTURE.md): the top-level modules
(errors, schema, selection, outputs, compute) are the core; `cube/__init__` re-exports."""


def _wing(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 and parts[1] in WINGS else "core"


@pytest.mark.parametrize("path", [p for p in CUBE_MODULES if p != ROOT / "cube" / "__init__.py"],
                         ids=lambda p: str(p.relative_to(ROOT)))
def test_cube_wings_import_in_one_direction(path: Path) -> None:
    """Every import (module level or inside a function) goes down the wing order, never back up."""
    mine = _wing(".".join(path.relative_to(ROOT).with_suffix("").parts))
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.level == 0 and (node.module or "").split(".")[0] == "cube":
            targets = [node.module] if node.module != "cube" else [f"cube.{a.name}" for a in node.names]
            for target in targets:
                wing = "stats" if target == "cube.stats" else _wing(target)
                assert wing == mine or wing in ALLOWED[mine], \
                    f"{path.relative_to(ROOT)}:{node.lineno} ({mine}) imports {target} ({wing})"


PACKAGES = ("cube", "train", "saferl_tui")


def _module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def imported_modules(tree: ast.Module, name: str, is_package: bool, known: set[str]) -> set[str]:
    """The modules of `known` that module `name` imports anywhere (module level and inside functions), except
    under `if TYPE_CHECKING:`. `from a import b` names the module `a.b` where that is a module, else `a`."""
    found: set[str] = set()

    def visit(node: ast.AST) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.If) and _is_type_checking(child.test):
                for other in child.orelse:
                    visit_node(other)
                continue
            visit_node(child)

    def visit_node(node: ast.AST) -> None:
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                package = name.split(".") if is_package else name.split(".")[:-1]
                base = ".".join(package[: len(package) - node.level + 1] + ([node.module] if node.module else []))
            subs = {f"{base}.{a.name}" for a in node.names} & known
            found.update(subs)
            if len(subs) < len(node.names):
                found.add(base)
        visit(node)

    visit(tree)
    return (found & known) - {name}


def import_graph() -> dict[str, set[str]]:
    """module -> the modules it imports, over cube/, train/ and saferl_tui/."""
    paths = {_module_name(p): p for pkg in PACKAGES for p in (ROOT / pkg).rglob("*.py")}
    return {name: imported_modules(ast.parse(p.read_text()), name, p.name == "__init__.py", set(paths))
            for name, p in paths.items()}


def strongly_connected(graph: dict[str, set[str]]) -> list[list[str]]:
    """Tarjan's strongly connected components of `graph` (iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    components: list[list[str]] = []
    for root in graph:
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph[child]))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                components.append(sorted(component))
    return components


def test_no_import_cycle_anywhere() -> None:
    """No two modules of cube/, train/ or saferl_tui/ import each other, directly or round a circle, counting
    imports inside functions (those under `if TYPE_CHECKING:` excepted)."""
    cycles = [c for c in strongly_connected(import_graph()) if len(c) > 1]
    assert not cycles, f"import cycles: {cycles}"


def test_the_cycle_finder_finds_cycles() -> None:
    """The graph and the components above can fail: a function-level import closing a circle is one, an import
    under TYPE_CHECKING is none."""
    known = {"p", "p.a", "p.b", "p.c"}
    a = ast.parse("from p import b\nimport p.c\n")
    b = ast.parse("def f():\n    from p.a import x\n")
    c = ast.parse("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    import p.a\n")
    graph = {"p": set(), "p.a": imported_modules(a, "p.a", False, known),
             "p.b": imported_modules(b, "p.b", False, known), "p.c": imported_modules(c, "p.c", False, known)}
    assert graph == {"p": set(), "p.a": {"p.b", "p.c"}, "p.b": {"p.a"}, "p.c": set()}
    assert sorted(c for c in strongly_connected(graph) if len(c) > 1) == [["p.a", "p.b"]]
    assert imported_modules(ast.parse("from . import a\nfrom .b import y\n"), "p.c", False, known) == {"p.a", "p.b"}


MAX_MODULE_LINES = 600


@pytest.mark.parametrize("package", ["cube", "train", "saferl_tui"])
def test_no_module_is_over_600_lines(package: str) -> None:
    """A module holds one idea: none grows past MAX_MODULE_LINES lines."""
    long = {str(p.relative_to(ROOT)): n for p in (ROOT / package).rglob("*.py")
            if (n := len(p.read_text().splitlines())) > MAX_MODULE_LINES}
    assert not long, f"modules over {MAX_MODULE_LINES} lines: {long}"


def test_module_reference_pattern_catches_string_imports() -> None:
    """The pattern above must catch the ways cube could reach the trainer (so the test can fail)."""
    for bad in ('importlib.import_module("train.cli")', "COMMANDS = ('train.cli',)", "x = 'saferl_tui'",
                '"train:register"'):
        assert MODULE_REF.search(bad), bad
    for ok in ('mode = "train"', "the train setting", "train_episodes"):
        assert not MODULE_REF.search(ok), ok
    tree = ast.parse("from train.core import x\nimport saferl_tui.app\n")
    assert all(_names_module(n, ("train", "saferl_tui")) for n in tree.body)


def test_tui_never_imports_jax_anywhere() -> None:
    """Every saferl_tui module, imported in a fresh process, leaves jax unimported."""
    mods = [".".join(p.relative_to(ROOT).with_suffix("").parts) for p in (ROOT / "saferl_tui").rglob("*.py")]
    code = "import importlib, sys\n" + "".join(f"importlib.import_module({m!r})\n" for m in mods) + (
        "print(','.join(sorted(m for m in sys.modules if m.split('.')[0] in ('jax', 'jaxlib', 'crax'))))")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert result.stdout.strip() == ""


PLUGIN = '''
def register(sub):
    p = sub.add_parser("hello", help="a third-party command")
    p.set_defaults(func=lambda args: print("hello from a plugin") or 0)
'''


def _fake_distribution(tmp_path: Path, entry: str) -> dict[str, str]:
    """A package `saferl_hello` with a dist-info that declares `entry` in the saferl.commands group."""
    (tmp_path / "saferl_hello.py").write_text(PLUGIN)
    info = tmp_path / "saferl_hello-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: saferl-hello\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text(f"[saferl.commands]\n{entry}\n")
    return {**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path), str(ROOT)])}


def test_third_party_package_adds_a_command(tmp_path: Path) -> None:
    env = _fake_distribution(tmp_path, "hello = saferl_hello:register")
    run = subprocess.run([sys.executable, "-m", "cube.cli", "hello"], capture_output=True, text=True, env=env)
    assert run.returncode == 0, run.stderr
    assert run.stdout.strip() == "hello from a plugin"
    helptext = subprocess.run([sys.executable, "-m", "cube.cli", "--help"], capture_output=True, text=True,
                              env=env).stdout
    for command in ("validate", "demo", "export", "report", "train", "evaluate", "status", "hello"):
        assert f"    {command} " in helptext, command


def test_broken_plugin_is_one_warning_and_the_rest_works(tmp_path: Path) -> None:
    env = _fake_distribution(tmp_path, "broken = saferl_hello_missing:register")
    run = subprocess.run([sys.executable, "-m", "cube.cli", "validate", str(tmp_path / "none.zarr")],
                         capture_output=True, text=True, env=env)
    lines = run.stderr.strip().splitlines()
    assert any("plugin 'broken'" in line for line in lines)
    assert "Traceback" not in run.stderr
    assert run.returncode in (1, 2)  # validate ran and refused the missing store


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's mallopt")
def test_console_script_keeps_freed_memory() -> None:
    """`keep_freed_memory` takes effect here (glibc) and `console_main` runs the CLI after it."""
    probe = ("import sys; from cube.compute import keep_freed_memory; import cube.cli.entry as e; "
             "print(keep_freed_memory()); sys.argv = ['saferl', '--help']; e.console_main()")
    run = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert run.returncode == 0, run.stderr
    assert run.stdout.splitlines()[0] == "True" and "usage: saferl" in run.stdout


def test_console_script_runs_blas_on_one_thread() -> None:
    """`console_main` sets BLAS to one thread before numpy loads and keeps a number the user set;
    `one_blas_thread` leaves the variables alone once numpy is imported."""
    probe = ("import os, sys, cube.cli.entry as e; "
             "e.main = lambda: print('numpy' in sys.modules, os.environ['OPENBLAS_NUM_THREADS'], "
             "os.environ['MKL_NUM_THREADS']) or 0; e.console_main()")
    env = {k: v for k, v in os.environ.items() if k not in ("OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")}

    def run(code: str, **extra: str) -> list[str]:
        done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=120,
                              env={**env, **extra})
        assert done.returncode == 0, done.stderr
        return done.stdout.split()

    assert run(probe) == ["False", "1", "1"]
    assert run(probe, OPENBLAS_NUM_THREADS="3") == ["False", "3", "1"]
    late = ("import os, numpy; from cube.compute import one_blas_thread; "
            "print(one_blas_thread(), os.environ.get('OPENBLAS_NUM_THREADS'))")
    assert run(late) == ["False", "None"]
