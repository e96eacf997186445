"""The one error boundary of `saferl`: every failure is one `error:` line and exit 2, never a traceback."""

from __future__ import annotations

import errno
from importlib.metadata import EntryPoint
from pathlib import Path

import pytest

from cube.cli import main
from cube.cli.console import error_line


def _one_error_line(capsys: pytest.CaptureFixture[str]) -> str:
    err = capsys.readouterr().err.strip().splitlines()
    lines = [line for line in err if line.startswith("error:")]
    assert len(lines) == 1, err
    assert not any("Traceback" in line for line in err)
    return lines[0]


def test_user_text_is_printed_literally_not_as_markup(capsys: pytest.CaptureFixture[str], small_demo_cube: Path,
                                                      tmp_path: Path) -> None:
    """rich must not swallow '[/x]' or '[/b]' in labels and paths given by the user."""
    assert main(["report", str(small_demo_cube), "--algo", "[/x]", "--boot", "10"]) == 2
    assert "unknown algo [/x]" in _one_error_line(capsys)
    missing = tmp_path / "x[/b].zarr"
    assert main(["validate", str(missing)]) in (1, 2)
    assert "x[/b].zarr" in capsys.readouterr().err


def test_os_errors_name_the_path_and_the_remedy(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    blocker = tmp_path / "a_file"
    blocker.write_text("not a folder")
    assert main(["demo", str(blocker / "demo.zarr"), "--seeds", "1", "--iterates", "2"]) == 2
    line = _one_error_line(capsys)
    assert str(blocker) in line


@pytest.mark.parametrize(("code", "remedy"), [(errno.ENOSPC, "free some space"), (errno.EACCES, "permissions"),
                                              (errno.ENOENT, "check the path")])
def test_error_line_for_os_errors(code: int, remedy: str) -> None:
    line = error_line(OSError(code, "boom", "/some/store.zarr"))
    assert line.startswith("/some/store.zarr: boom; ") and remedy in line


def register_exploding(sub) -> None:
    """A command plugin whose command fails with an unexpected exception."""

    def explode(args: object) -> int:
        raise RuntimeError("first line\nsecond line")

    sub.add_parser("explode").set_defaults(func=explode)


def test_unexpected_errors_are_one_line(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    import cube.cli.entry

    plugin = EntryPoint("explode", f"{__name__}:register_exploding", cube.cli.entry.COMMAND_GROUP)
    monkeypatch.setattr(cube.cli.entry, "command_plugins", lambda: [plugin])
    assert main(["explode"]) == 2
    line = _one_error_line(capsys)
    assert "RuntimeError: first line" in line and "second line" not in line
    monkeypatch.setenv("SAFERL_DEBUG", "1")
    with pytest.raises(RuntimeError):
        main(["explode"])


DEMO_ARGS = ["--seeds", "1", "--iterates", "2", "--episodes", "4", "--eval-episodes", "3"]


def _tree(path: Path) -> dict[str, bytes]:
    return {str(p.relative_to(path)): p.read_bytes() for p in sorted(path.rglob("*")) if p.is_file()}


def test_demo_force_refuses_a_plain_file(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    target = tmp_path / "notes.txt"
    target.write_text("precious")
    assert main(["demo", str(target), "--force", *DEMO_ARGS]) == 2
    assert "not a Zarr store" in _one_error_line(capsys)
    assert target.read_text() == "precious"


def test_demo_force_failure_keeps_the_old_store(capsys: pytest.CaptureFixture[str], tmp_path: Path,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    """A full disk while writing the new store leaves the old one byte-identical and nothing half-written."""
    import cube.io.demo

    target = tmp_path / "demo.zarr"
    assert main(["demo", str(target), *DEMO_ARGS]) == 0
    before = _tree(target)
    real = cube.io.demo.make_demo_cube

    def disk_fills_up(path, **kwargs):
        real(path, **kwargs)
        raise OSError(errno.ENOSPC, "No space left on device", str(path))

    monkeypatch.setattr(cube.io.demo, "make_demo_cube", disk_fills_up)
    assert main(["demo", str(target), "--force", "--seed", "1", *DEMO_ARGS]) == 2
    assert "No space left on device; free some space" in _one_error_line(capsys)
    assert _tree(target) == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["demo.zarr"]  # no staging folder left
    monkeypatch.setattr(cube.io.demo, "make_demo_cube", real)
    assert main(["demo", str(target), "--force", "--seed", "1", *DEMO_ARGS]) == 0
    assert _tree(target) != before  # replaced on success
    assert sorted(p.name for p in tmp_path.iterdir()) == ["demo.zarr"]


def test_negative_rng_seed_is_one_clear_line(capsys: pytest.CaptureFixture[str], small_demo_cube: Path) -> None:
    assert main(["report", str(small_demo_cube), "--rng-seed", "-1", "--boot", "10"]) == 2
    assert "--rng-seed must be an integer in 0.." in _one_error_line(capsys)


@pytest.mark.parametrize(("argv", "message"), [(["--boot", "0"], "--boot must be >= 1"),
                                               (["--seed", "-1"], "--seed must be an integer in 0..")])
def test_tui_entry_is_one_line_too(capsys: pytest.CaptureFixture[str], argv: list[str], message: str,
                                   small_demo_cube: Path) -> None:
    from saferl_tui.cli import main as tui_main

    assert tui_main([str(small_demo_cube), *argv]) == 2
    assert message in _one_error_line(capsys)
