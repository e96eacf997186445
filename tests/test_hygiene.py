"""Domain code never imports the UI or the trainer's heavy dependencies (checked in a fresh process)."""

from __future__ import annotations

import subprocess
import sys

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
        ("cube.cli", ("jax", "jaxlib", "textual", "crax", "flax", "optax")),
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
        "import sys\nfrom cube.cli import build_parser\nbuild_parser()\n"
        "print(','.join(sorted(m for m in sys.modules if m.split('.')[0] in ('jax', 'textual', 'crax'))))"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert result.stdout.strip() == ""
