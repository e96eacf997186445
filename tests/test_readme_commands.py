"""README's set-up commands work as written on a fresh clone: `make demo` up to the TUI's first Summary.

`make test` is what CI itself runs on a fresh clone (`.ci/run`), so this test runs the other one: it clones
the repository's committed HEAD, runs `make demo` exactly as README writes it, in a pseudo-terminal of
80x24 (Textual needs a terminal), with `SAFERL_TUI_EXIT_AFTER_LOAD` set so the TUI exits once the Summary
is on screen instead of waiting for `q`.
"""

from __future__ import annotations

import fcntl
import os
import pty
import re
import select
import shutil
import struct
import subprocess
import termios
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"


def _setup_commands() -> list[str]:
    """The commands of README's first code block (what a new user types first)."""
    block = re.search(r"```bash\n(.*?)```", README.read_text(), re.S)
    assert block is not None, "README must open with a bash block of the set-up commands"
    return [line.split("#", 1)[0].strip() for line in block.group(1).splitlines() if line.split("#", 1)[0].strip()]


def test_readme_opens_with_make_demo_and_make_test() -> None:
    head = README.read_text().split("\n## ", 1)[0]
    assert _setup_commands() == ["make demo", "make test"]
    assert head.index("make demo") < head.index("make test")


def _run_in_pty(cmd: str, cwd: Path, env: dict[str, str], timeout: float, size: tuple[int, int] = (80, 24)
                ) -> tuple[int, str]:
    """Run `cmd` (a shell line) with stdin/stdout/stderr on a pseudo-terminal of `size` (cols, rows);
    return its exit status and everything it wrote (escape sequences included)."""
    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", size[1], size[0], 0, 0))
    proc = subprocess.Popen(cmd, shell=True, cwd=cwd, env=env, stdin=slave, stdout=slave, stderr=slave,
                            start_new_session=True)
    os.close(slave)
    out = bytearray()
    deadline = time.monotonic() + timeout
    try:
        while True:
            if time.monotonic() > deadline:
                proc.kill()
                pytest.fail(f"`{cmd}` did not finish within {timeout:.0f} s; its last output:\n"
                            f"{out[-2000:].decode(errors='replace')}")
            ready, _, _ = select.select([master], [], [], 1.0)
            if ready:
                try:
                    chunk = os.read(master, 65536)
                except OSError:  # EIO: every writer of the terminal has exited
                    break
                if not chunk:
                    break
                out += chunk
            elif proc.poll() is not None:
                break
    finally:
        os.close(master)
    return proc.wait(timeout=60), out.decode(errors="replace")


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("git") is None or shutil.which("make") is None, reason="needs git and make")
def test_make_demo_reaches_the_summary_on_a_fresh_clone(tmp_path: Path) -> None:
    clone = tmp_path / "saferl"
    subprocess.run(["git", "clone", "-q", str(ROOT), str(clone)], check=True)
    assert not (clone / "demo").exists()  # ignored by git: `make demo` must create it
    env = {k: v for k, v in os.environ.items() if not k.startswith(("VIRTUAL_ENV", "PYTHONPATH"))}
    env.update(TERM="xterm-256color", SAFERL_TUI_EXIT_AFTER_LOAD="1", COLUMNS="80", LINES="24")
    env["PATH"] = os.pathsep.join(p for p in env.get("PATH", "").split(os.pathsep) if ".venv" not in p)
    code, out = _run_in_pty("make demo", clone, env, timeout=1500)
    tail = out[-3000:]
    assert code == 0, f"`make demo` exited {code}:\n{tail}"
    assert "Summary of demo/results.zarr shown" in out, tail
    assert "wrote SYNTHETIC demo cube to demo/results.zarr" in out
    assert (clone / "demo" / "results.zarr" / "zarr.json").exists()
