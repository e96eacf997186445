"""README's "Your own trainer" example runs as written, and `saferl report` reads what it recorded."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

from cube import read_manifests, validate
from cube.cli import main

README = Path(__file__).resolve().parents[1] / "README.md"


def _example() -> str:
    section = README.read_text().split("### Your own trainer", 1)[1]
    return re.search(r"```python\n(.*?)```", section, re.S).group(1)


def test_own_trainer_example_records_and_reports(tmp_path: Path) -> None:
    cwd = os.getcwd()
    os.chdir(tmp_path)
    try:
        exec(compile(_example(), "README example", "exec"), {})  # noqa: S102 - our own README
    finally:
        os.chdir(cwd)
    store = tmp_path / "mine.zarr"
    assert validate(store) == []
    assert [r["status"] for r in read_manifests(store)] == ["complete"] * 3
    out = tmp_path / "table.json"
    assert main(["report", str(store), "--format", "json", "--boot", "50", "--out", str(out)]) == 0
    rows = json.loads(out.read_text())["rows"]
    assert {(r["algo"], r["setting"]) for r in rows} == {("my_lag", "train"), ("my_lag", "final_greedy")}
    assert all(r["metrics"]["V"]["value"] is not None and r["tier"] >= 0 for r in rows)
