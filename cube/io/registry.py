"""The formats of `saferl import`: one `Importer` record each, found through the entry-point group
`saferl.importers`.

A record says what a format reads, what it gives and cannot give (episodes, or only means of several
episodes), its own command-line options, and the function that reads it. This package declares its
formats in pyproject.toml; another installed package adds one the same way:

    [project.entry-points."saferl.importers"]
    myformat = "mypackage.saferl_import:IMPORTER"      # an Importer record

`import_runs` is the one path from sources to checked runs: the record's `read`, then the labels given
on the command line, then each run's conventions (`cube.io.conventions`). Nothing is written here.
"""

from __future__ import annotations

import argparse
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from importlib.metadata import entry_points
from pathlib import Path
from typing import TYPE_CHECKING, Any

from cube.errors import CubeError, CubeWarning
from cube.io.conventions import settle_conventions
from cube.schema import RunKey

if TYPE_CHECKING:  # numpy loads with the readers: `saferl import --help` lists the formats without it
    from cube.io.sourcefiles import ImportedRun

IMPORTER_GROUP = "saferl.importers"
"""Entry-point group of the formats of `saferl import` (each entry: an `Importer` record)."""
GIVES = ("episodes", "means", "episodes and means", "episodes or means")
"""What a format stores: every episode (all metrics), only means of several episodes (R, C, D_norm;
never V, D_norm+, tiers or CDFs), some of each, or one or the other depending on the file."""
LABELS: tuple[str, ...] = ("algo", "task", "bound", "seed")


@dataclass(frozen=True)
class Option:
    """One command-line option of a format (`--flag VALUE`), passed to its `read` as
    `request.options[dest]` (dest: the flag without dashes, '-' as '_'; None when not given).

    kind: a converter of the text (int, float, str), or None for a switch (True when given)."""

    flag: str
    help: str
    kind: Callable[[str], Any] | None = str
    choices: tuple[str, ...] | None = None
    metavar: str | None = None

    @property
    def dest(self) -> str:
        return self.flag.lstrip("-").replace("-", "_")

    def add_to(self, parser: argparse.ArgumentParser) -> None:
        if self.kind is None:
            parser.add_argument(self.flag, dest=self.dest, action="store_true", help=self.help)
        else:
            parser.add_argument(self.flag, dest=self.dest, type=self.kind, choices=self.choices,
                                metavar=self.metavar, help=self.help)


@dataclass(frozen=True)
class ImportRequest:
    """What `saferl import FORMAT` was asked: the sources, the labels given on the command line (None
    where not given; `bound` and `seed` already checked), the format's own options by dest, and the
    conventions given by flags (`cube.io.conventions`: name -> value, None where not given)."""

    sources: tuple[Path, ...]
    labels: dict[str, Any] = field(default_factory=dict)
    options: dict[str, Any] = field(default_factory=dict)
    conventions: dict[str, Any] = field(default_factory=dict)

    def option(self, dest: str) -> Any:
        return self.options.get(dest)

    def label(self, name: str) -> Any:
        return self.labels.get(name)


@dataclass(frozen=True)
class Importer:
    """One format of `saferl import`.

    name: the FORMAT word; reads: what files it reads (one line); gives: one of GIVES; gives_text and
    cannot_text: what it gives and cannot give (README's table says the same); options: its own
    command-line options (`--algo/--task/--bound/--seed`, `--out/--into` and the convention flags are
    every format's); read: the sources and options -> runs (`ImportedRun`, checked: every value is
    refused with one `CubeError` line before anything is written); example: one command line."""

    name: str
    reads: str
    gives: str
    gives_text: str
    cannot_text: str
    read: Callable[[ImportRequest], list[ImportedRun]]
    options: tuple[Option, ...] = ()
    example: str = ""

    def __post_init__(self) -> None:
        if self.gives not in GIVES:
            raise ValueError(f"Importer {self.name!r}: gives must be one of {GIVES}, not {self.gives!r}")


# options several formats share (each record lists those it takes)
WINDOW = Option("--window", "episodes in the tool's window of means when it is not the tool's default", int,
                metavar="N")
STEPS_PER_ITERATE = Option("--steps-per-iterate", "env steps per iterate (e.g. one policy update's): env steps "
                           "1..N are iterate 0, N+1..2N iterate 1, ...", int, metavar="N")


def importers() -> dict[str, Importer]:
    """Every installed format by name, in name order (entry-point group `saferl.importers`). An entry
    that fails to load or is not an `Importer` is left out with a warning, so the others still work."""
    found: dict[str, Importer] = {}
    for ep in sorted(entry_points(group=IMPORTER_GROUP), key=lambda e: e.name):
        try:
            record = ep.load()
        except Exception as exc:  # noqa: BLE001 - a broken plugin must not take the other formats down
            warnings.warn(f"saferl importer {ep.name!r} ({ep.value}) could not be loaded: "
                          f"{type(exc).__name__}: {exc}", CubeWarning, stacklevel=2)
            continue
        if not isinstance(record, Importer):
            warnings.warn(f"saferl importer {ep.name!r} ({ep.value}) is a {type(record).__name__}, not an "
                          "Importer record: left out", CubeWarning, stacklevel=2)
            continue
        found.setdefault(record.name, record)
    if not found:
        raise CubeError(f"no import formats are installed (entry-point group {IMPORTER_GROUP!r} is empty): "
                        "install the package, e.g. pip install -e .")
    return found


def importer(name: str) -> Importer:
    """The format `name`; CubeError naming the installed ones otherwise."""
    known = importers()
    if name not in known:
        raise CubeError(f"unknown import format {name!r}: use one of {', '.join(known)}")
    return known[name]


def checked_labels(labels: dict[str, Any]) -> dict[str, Any]:
    """The labels given on the command line (None = not given), bound and seed checked."""
    from cube.io.sourcefiles import bound_value, seed_value

    out = {k: labels.get(k) for k in LABELS}
    if out["seed"] is not None:
        out["seed"] = seed_value(out["seed"], "--seed")
    if out["bound"] is not None:
        out["bound"] = bound_value(out["bound"], "--bound")
    return out


def apply_labels(runs: list[ImportedRun], given: dict[str, Any]) -> list[ImportedRun]:
    """Replace labels by the ones given on the command line (None = keep); refuse runs that collide."""
    given = {k: v for k, v in checked_labels(given).items() if v is not None}
    seen: dict[RunKey, str] = {}
    for run in runs:
        if given:
            run.key = RunKey(**{**run.key.as_dict(), **given})
        if run.key in seen:
            raise CubeError(f"{run.source} and {seen[run.key]} are both run {run.key}: give each its own labels "
                            "(e.g. import them separately with --seed)")
        seen[run.key] = run.source
    return runs


def import_runs(name: str, sources: Sequence[str | Path], labels: dict[str, Any] | None = None,
                options: dict[str, Any] | None = None, conventions: dict[str, Any] | None = None
                ) -> list[ImportedRun]:
    """The runs of `sources` in format `name`, labelled (`labels` override the files'), each with its
    conventions settled (`conventions`: the values given by flags, None where not given). Options not
    given may be left out of `options`; an option the format does not take is refused."""
    record = importer(name)
    options = dict(options or {})
    own = {o.dest for o in record.options}
    extra = sorted(k for k, v in options.items() if v not in (None, False) and k not in own)
    if extra:
        flag = "--" + extra[0].replace("_", "-")
        raise CubeError(f"{flag} is not an option of {name} (its options: "
                        f"{', '.join(o.flag for o in record.options) or 'none'})")
    request = ImportRequest(tuple(Path(s) for s in sources), checked_labels(labels or {}),
                            {o.dest: options.get(o.dest) for o in record.options}, dict(conventions or {}))
    runs = apply_labels(record.read(request), request.labels)
    for run in runs:
        settle_conventions(run, request.conventions)
    return runs
