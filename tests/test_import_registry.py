"""The formats of `saferl import` are records of one `Importer` kind, found through the entry-point group
`saferl.importers`: this package's own and a third party's the same way."""

from __future__ import annotations

import sys
import textwrap
from pathlib import Path

import pytest

from cube import open_cube
from cube.cli import main
from cube.io.registry import GIVES, IMPORTER_GROUP, Importer, importers

OWN = {"episodes", "saferl-eval", "omnisafe", "safepo"}


def test_every_own_format_is_one_record_of_the_group() -> None:
    found = importers()
    assert OWN <= set(found)
    for name, record in found.items():
        assert isinstance(record, Importer) and record.name == name and record.gives in GIVES
        assert record.reads and record.gives_text and record.cannot_text and callable(record.read)
        assert len({o.flag for o in record.options}) == len(record.options)


def _third_party(root: Path) -> None:
    """An installed distribution (a dist-info folder on sys.path) declaring one format in the group."""
    (root / "thirdfmt.py").write_text(textwrap.dedent('''
        import numpy as np
        from cube.io.registry import Importer, Option
        from cube.io.sourcefiles import ImportedRun
        from cube.schema import RunKey

        def read(request):
            runs = []
            for path in request.sources:  # one episode cost per line
                costs = np.array([float(x) for x in path.read_text().split()])
                run = ImportedRun(RunKey("third", path.stem, request.label("bound") or 1.0,
                                         request.option("seed_offset") or 0), str(path))
                run.episodes[("train", 0)] = (np.full(costs.shape, np.nan), costs)
                runs.append(run)
            return runs

        IMPORTER = Importer(name="costlines", reads="one episode cost per line", gives="episodes",
                            gives_text="episode costs", cannot_text="rewards", read=read,
                            options=(Option("--seed-offset", "a seed", int),))
        '''))
    info = root / "thirdfmt-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: thirdfmt\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text(f"[{IMPORTER_GROUP}]\ncostlines = thirdfmt:IMPORTER\n")


def test_a_third_party_package_adds_a_format(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _third_party(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    assert "costlines" in importers()
    src = tmp_path / "circle.txt"
    src.write_text("1\n30\n")
    out = tmp_path / "c.zarr"
    assert main(["import", "costlines", str(src), "--out", str(out), "--bound", "25", "--seed-offset", "7"]) == 0
    ds = open_cube(out)
    assert list(ds.algo.values) == ["third"] and list(ds.seed.values) == [7]
    assert ds.cost.sel(mode="train", iterate=0).values.ravel()[:2].tolist() == [1.0, 30.0]
    sys.modules.pop("thirdfmt", None)


def test_an_entry_that_is_not_a_record_is_left_out_with_a_warning(tmp_path: Path, monkeypatch) -> None:
    (tmp_path / "notfmt.py").write_text("IMPORTER = 42\n")
    info = tmp_path / "notfmt-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: notfmt\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text(f"[{IMPORTER_GROUP}]\nbroken = notfmt:IMPORTER\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.warns(Warning, match="not an Importer record"):
        found = importers()
    assert "broken" not in found and OWN <= set(found)
    sys.modules.pop("notfmt", None)


def test_readme_lists_every_format() -> None:
    readme = (Path(__file__).resolve().parents[1] / "README.md").read_text()
    section = readme.split("### Another tool's results", 1)[1].split("\n### ", 1)[0]
    for name in importers():
        assert f"saferl import {name} " in section, name
