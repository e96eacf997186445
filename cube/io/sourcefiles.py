"""What every importer shares: the run read from a source (`ImportedRun`), finding files, reading CSV
and JSON, and the checks of every value read (numbers, seeds, bounds, costs, iterates), each failure one
`CubeError` line naming the file, the value and the limit, before anything is written."""

from __future__ import annotations

import csv
import json
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from cube.errors import CubeError
from cube.schema import EPISODE_RULE_HINT, MAX_ITERATES, MEANS_KEY, RunKey, first_broken_episode, seed_label

CSV_BLOCK = 1 << 24
"""Bytes read at a time when counting a CSV's fields."""


@dataclass
class ImportedRun:
    """One run read from a source: its labels, episodes per (mode, iterate), what is means only.

    episodes: (mode, iterate) -> (rewards, costs), 1-D float arrays (rewards NaN where unknown).
    means_only: the modes whose values are means of several episodes, one per iterate, not episodes.
    reward_means: the modes whose first episode's reward is the mean reward of all of them (the others NaN).
    iterate_vars: name -> {iterate: value} (env_steps, multiplier).
    manifest: what the run's manifest records besides the labels (see `cube.schema.MANIFEST_KEYS`).
    notes: sentences the import prints once (what was dropped or inferred), also kept in the manifest.
    """

    key: RunKey
    source: str
    episodes: dict[tuple[str, int], tuple[np.ndarray, np.ndarray]] = field(default_factory=dict)
    means_only: set[str] = field(default_factory=set)
    reward_means: set[str] = field(default_factory=set)
    iterate_vars: dict[str, dict[int, float]] = field(default_factory=dict)
    manifest: dict[str, Any] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)

    def n_iterates(self) -> int:
        its = [j for _, j in self.episodes] + [j for v in self.iterate_vars.values() for j in v]
        return 1 + max(its, default=0)

    def n_episodes(self) -> int:
        return max((c.size for _, c in self.episodes.values()), default=1)

    def means_note(self, mode: str = "train") -> str | None:
        """The sentence saying what this run's means of `mode` are (None for episodes)."""
        return ((self.manifest.get(MEANS_KEY) or {}).get(mode) or {}).get("text")


# ---------------------------------------------------------------------------------------- helpers
def find_files(sources: Sequence[str | Path], pattern: str, what: str) -> list[Path]:
    """The files named, or found (recursively, sorted) under the folders named, matching `pattern`
    (several patterns separated by '|')."""
    found: list[Path] = []
    for src in map(Path, sources):
        if src.is_dir():
            found.extend(sorted({p for pat in pattern.split("|") for p in src.rglob(pat)}))
        elif src.is_file():
            found.append(src)
        else:
            raise CubeError(f"{src} does not exist; give {what} files or folders holding them")
    if not found:
        raise CubeError(f"no {what} found in {', '.join(map(str, sources))} (looked for {pattern})")
    return found


def ragged_line(path: Path) -> tuple[int, int, int] | None:
    """(line number, fields, header fields) of the first row of a CSV whose field count differs from its
    header's, or None. Blank lines are skipped (as pandas does). Files with quotes are parsed by `csv`;
    others are counted in blocks with numpy (fast for tables of millions of rows)."""
    expected, line = -1, 0
    pending = np.zeros(3, dtype=np.int64)  # commas, bytes and '\r' of the line not yet ended
    with path.open("rb") as f:
        while True:
            block = f.read(CSV_BLOCK)
            if b'"' in block:
                return ragged_line_quoted(path)
            buf = np.frombuffer(block, dtype=np.uint8)
            ends = np.flatnonzero(buf == 10) if block else np.array([buf.size])  # end of file ends the last line
            if not block and not pending[1]:
                return None
            counts = [np.searchsorted(np.flatnonzero(buf == c), ends) for c in (44, 13)]
            commas, crs = (np.diff(np.concatenate([[0], c])) for c in counts)
            size = np.diff(np.concatenate([[-1], ends])) - 1 if block else np.zeros(1, dtype=np.int64)
            if ends.size:
                commas[0] += pending[0]
                size[0] += pending[1]
                crs[0] += pending[2]
            rows = np.flatnonzero(size - crs > 0)
            fields = commas + 1
            if rows.size and expected < 0:
                expected = int(fields[rows[0]])
            wrong = rows[fields[rows] != expected]
            if wrong.size:
                return line + int(wrong[0]) + 1, int(fields[wrong[0]]), expected
            if not block:
                return None
            line += ends.size
            tail = buf[(int(ends[-1]) + 1 if ends.size else 0):]
            done = np.array([(tail == 44).sum(), tail.size, (tail == 13).sum()], dtype=np.int64)
            pending = done if ends.size else pending + done


def ragged_line_quoted(path: Path, skip_lines: int = 0) -> tuple[int, int, int] | None:
    """`ragged_line` by the csv module (quoted fields), the first `skip_lines` lines left out."""
    with path.open(newline="", encoding="utf-8", errors="replace") as f:
        for _ in range(skip_lines):
            f.readline()
        reader = csv.reader(f)
        expected = -1
        for row in reader:
            if not row:
                continue
            if expected < 0:
                expected = len(row)
            elif len(row) != expected:
                return reader.line_num + skip_lines, len(row), expected
    return None


def read_csv(path: Path, skip_lines: int = 0, **kwargs: Any) -> Any:
    """A CSV as a pandas frame, its first `skip_lines` lines left out; CubeError for unreadable files and
    rows whose field count is not the header's (pandas would fill a short row with NaN)."""
    import pandas as pd

    if skip_lines:
        kwargs["skiprows"] = skip_lines
    try:
        ragged = ragged_line_quoted(path, skip_lines) if skip_lines else ragged_line(path)
    except OSError as exc:
        raise CubeError(f"cannot read {path} ({exc.strerror or type(exc).__name__})") from None
    if ragged is not None:
        line, got, want = ragged
        raise CubeError(f"{path}, line {line}: {got} field(s) where the header has {want}; every row needs "
                        "one field per column (fix the file and import again)")
    try:
        return pd.read_csv(path, **kwargs)
    except (ValueError, OSError, UnicodeDecodeError) as exc:
        first = (str(exc).splitlines() or [type(exc).__name__])[0][:120]
        raise CubeError(f"cannot read {path} as CSV ({first}); is it the right format?") from None


def number(value: Any, what: str, where: str) -> float:
    """A number from a file (a CSV cell's text, a JSON number); never a boolean."""
    if isinstance(value, bool | np.bool_):
        raise CubeError(f"{where}: {what} {value!r} is a boolean, not a number")
    try:
        return float(value)
    except (TypeError, ValueError, OverflowError):
        raise CubeError(f"{where}: {what} {value!r} is not a number") from None


def seed_value(value: Any, where: str) -> int:
    """A seed label by the cube's rule (`cube.schema.seed_label`), the error naming where it was read."""
    try:
        return seed_label(value)
    except CubeError as exc:
        raise CubeError(f"{where}: {exc}") from None


def bound_value(value: Any, where: str) -> float:
    """A safety bound d: a finite number > 0."""
    x = number(value, "bound (the cost limit d)", where)
    if not (math.isfinite(x) and x > 0):
        raise CubeError(f"{where}: bound {value!r} is not a finite number > 0 (the safety bound d)")
    return x


def check_iterates(n: int, where: str) -> None:
    """Refuse a source of more rows (iterates) than a store holds (`cube.store.layout.MAX_ITERATES`)."""
    if n > MAX_ITERATES:
        raise CubeError(f"{where}: {n:,} iterates, beyond the limit of {MAX_ITERATES:,} per store (iterates count "
                        "policy updates 0, 1, 2, ...; env steps are not iterates)")


def check_costs(costs: np.ndarray, where: str) -> None:
    """Every imported cost is an episode's (or a mean's): present, and valid by the cube's episode rule."""
    if np.isnan(costs).any():
        raise CubeError(f"{where}: a cost is missing; every episode needs a finite cost")
    broken = first_broken_episode(np.full(costs.shape, np.nan), costs)
    if broken is not None:
        rule, mask = broken
        raise CubeError(f"{where}: {rule.count_text(int(mask.sum()))} (first {costs[mask].flat[0]:g}); "
                        f"{EPISODE_RULE_HINT}")


def json_object(path: Path) -> dict[str, Any]:
    """A JSON file that must hold an object (a tool's config.json)."""
    try:
        value = json.loads(path.read_bytes().decode("utf-8-sig"))  # a byte-order mark (Windows editors) is fine
    except (ValueError, OSError) as exc:
        raise CubeError(f"cannot read {path} as JSON ({str(exc)[:80]})") from None
    if not isinstance(value, dict):
        raise CubeError(f"{path} holds a JSON {type(value).__name__}, not an object of settings "
                        "({\"seed\": ..., ...}); is it the run's config.json?")
    return value




def yaml_object(path: Path) -> dict[str, Any]:
    """A YAML file that must hold a mapping (a tool's config.yaml); needs PyYAML (a dependency of dask).
    Python-specific tags that `yaml.dump` writes (FSRL's `!!python/tuple`) are read as plain lists, maps
    and strings; nothing is executed."""
    try:
        import yaml
    except ImportError:
        raise CubeError(f"reading {path} needs PyYAML (pip install pyyaml), or give the config as JSON") from None

    class Lenient(yaml.SafeLoader):
        pass

    def plain(loader: Any, suffix: str, node: Any) -> Any:
        if isinstance(node, yaml.SequenceNode):
            return loader.construct_sequence(node)
        if isinstance(node, yaml.MappingNode):
            return loader.construct_mapping(node)
        return loader.construct_scalar(node)

    Lenient.add_multi_constructor("", plain)
    try:
        value = yaml.load(path.read_text(), Loader=Lenient)  # a SafeLoader: nothing is executed
    except (yaml.YAMLError, OSError, UnicodeDecodeError) as exc:
        raise CubeError(f"cannot read {path} as YAML ({(str(exc).splitlines() or ['?'])[0][:80]})") from None
    if not isinstance(value, dict):
        raise CubeError(f"{path} holds a YAML {type(value).__name__}, not a mapping of settings: is it the config?")
    return value


# ------------------------------------------------------------------------------- runs from logs
LABEL_FLAGS = {"algo": "--algo", "task": "--task", "bound": "--bound (the cost limit d)", "seed": "--seed"}


def check_label_values(labels: dict[str, Any], where: str) -> None:
    """CubeError when a label found in a tool's files is no name or number (a JSON object or list, a
    boolean): it would become a label like "{'name': 'PPOLag'}"."""
    for name, flag in LABEL_FLAGS.items():
        value = labels.get(name)
        if isinstance(value, dict | list | tuple | bool):
            kind = {dict: "an object", list: "a list", tuple: "a list", bool: "a boolean"}[type(value)]
            raise CubeError(f"{where}: its {name} is {kind} ({json.dumps(value)[:60]}), not a name; pass {flag}")


def run_key(found: dict[str, Any], given: dict[str, Any], where: str) -> RunKey:
    """A run's labels: those found in its files or folder names, filled or overridden by those given on
    the command line (None = not given); CubeError naming the flags to pass for the missing ones."""
    labels = {**found, **{k: v for k, v in given.items() if v is not None}}
    check_label_values(labels, where)
    missing = [k for k in LABEL_FLAGS if labels.get(k) is None or str(labels.get(k)).strip() == ""]
    if missing:
        raise CubeError(f"{where}: no {', '.join(missing)} in the files or folder names; pass "
                        + ", ".join(LABEL_FLAGS[k] for k in missing))
    return RunKey(str(labels["algo"]), str(labels["task"]), bound_value(labels["bound"], where),
                  seed_value(labels["seed"], where))


def iterates_of(steps: np.ndarray, per_iterate: int | None, bounds: np.ndarray | None, where: str) -> np.ndarray:
    """The iterate of each episode (n,) int64 from the env step at which it ended (n,), counting steps from 1
    (the step count after the episode's last step): env steps 1..N are iterate 0 with `per_iterate` N;
    with `bounds` (the sorted env steps at which policy updates were logged), the number of updates
    logged before the episode's step (an episode at an update's own step counts before that update)."""
    if per_iterate is not None:
        if per_iterate < 1:
            raise CubeError(f"--steps-per-iterate must be a whole number of env steps >= 1, got {per_iterate}")
        if steps.size and steps.min() < 0:
            raise CubeError(f"{where}: a negative env step ({int(steps.min())}); --steps-per-iterate needs steps >= 0")
        return np.maximum(steps - 1, 0) // per_iterate
    assert bounds is not None
    return np.searchsorted(bounds, steps, side="left").astype(np.int64)


def add_episodes(run: ImportedRun, mode: str, iterates: np.ndarray, rewards: np.ndarray, costs: np.ndarray,
                 where: str) -> None:
    """Episodes (n,) of `mode` into `run`, grouped by iterate (n,) int64, in their order within each
    iterate; costs checked (finite, >= 0), the iterates within a store's limit."""
    if not costs.size:
        return
    check_costs(costs, where)
    bad = ~np.isfinite(rewards) & ~np.isnan(rewards)
    if bad.any():
        raise CubeError(f"{where}: a reward is {rewards[bad][0]}; rewards must be finite (or missing)")
    if iterates.min() < 0:
        raise CubeError(f"{where}: iterate {int(iterates.min())} < 0")
    check_iterates(int(iterates.max()) + 1, where)
    order = np.argsort(iterates, kind="stable")
    its, r, c = iterates[order], rewards[order], costs[order]
    cuts = np.flatnonzero(np.diff(its)) + 1
    for a, b in zip(np.r_[0, cuts].tolist(), np.r_[cuts, its.size].tolist(), strict=True):
        run.episodes[(mode, int(its[a]))] = (r[a:b].astype(np.float64), c[a:b].astype(np.float64))


def add_means(run: ImportedRun, mode: str, iterates: np.ndarray, rewards: np.ndarray, costs: np.ndarray,
              where: str, means: dict[str, Any]) -> None:
    """Means of several episodes, one per iterate (n,), into `run` as means only (`MEANS_KEY`: `means`
    says what they are: kind, column, window_episodes, text). An iterate without a cost mean is left out."""
    keep = ~np.isnan(costs)
    if not keep.any():
        raise CubeError(f"{where}: no {mode} cost mean to import")
    check_costs(costs[keep], where)
    check_iterates(int(iterates.max()) + 1, where)
    for j, r, c in zip(iterates[keep].tolist(), rewards[keep].tolist(), costs[keep].tolist(), strict=True):
        run.episodes[(mode, int(j))] = (np.array([r], dtype=np.float64), np.array([c], dtype=np.float64))
    run.means_only.add(mode)
    run.manifest.setdefault(MEANS_KEY, {})[mode] = means
