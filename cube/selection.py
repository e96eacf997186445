"""Selection of a sub-cube: which algorithms, tasks, bounds, seeds and training iterates to analyse.

`Selection` is a frozen value object shared by the report CLI and the TUI; `parse_selection` builds one
from command-line strings. The parsers here (`parse_names`, `parse_ints`, `parse_floats`,
`parse_iterates`) are the only ones: every CLI and the TUI read lists, ranges and iterate windows with
them, under one policy (comma lists; inclusive ranges LO-HI or LO:HI; a value given twice is an error).
Applying a selection to sufficient statistics is `cube.stats.select`.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Sequence
from dataclasses import asdict, dataclass

from cube.errors import CubeError
from cube.schema import same_bound

Iterates = None | int | tuple[int, int]


@dataclass(frozen=True)
class Selection:
    """Labels to keep along each run dim (None = all) and the training iterates to use.

    iterates: None (all), an int j (the fixed policy pi_j), or an inclusive range (lo, hi). It restricts
    only the `train` mode; the `final_*` settings always use each run's final evaluation.
    """

    algos: tuple[str, ...] | None = None
    tasks: tuple[str, ...] | None = None
    bounds: tuple[float, ...] | None = None
    seeds: tuple[int, ...] | None = None
    iterates: Iterates = None

    def __post_init__(self) -> None:
        it = self.iterates
        if isinstance(it, tuple):
            if len(it) != 2 or it[0] > it[1] or it[0] < 0:
                raise CubeError(f"iterate range {it} is invalid: give (lo, hi) with 0 <= lo <= hi")
        elif it is not None and (not isinstance(it, int) or it < 0):
            raise CubeError(f"iterate {it!r} is invalid: give a non-negative integer")

    def check_iterates(self, n_iterates: int) -> Selection:
        """This selection, after checking that its iterates lie inside a cube of `n_iterates` iterates
        (0..n_iterates-1): CubeError naming the iterate and the cube's range otherwise, never a silently
        shorter window."""
        it = self.iterates
        last = it[1] if isinstance(it, tuple) else it
        if last is not None and last >= n_iterates:
            raise CubeError(f"--iterates {_iterates_text(it)} reaches past the cube's last iterate: it has iterates "
                            f"0..{n_iterates - 1}")
        return self

    def to_json(self) -> str:
        """Compact JSON of the selection (stored in result attrs and exports)."""
        return json.dumps(asdict(self), separators=(",", ":"))


def _iterates_text(it: Iterates) -> str:
    return f"{it[0]}:{it[1]}" if isinstance(it, tuple) else str(it)


def split_list(text: str) -> list[str]:
    """'a, b,,c' -> ['a', 'b', 'c']: the non-empty, stripped items of a comma-separated string."""
    return [t.strip() for t in text.split(",") if t.strip()]


Words = str | Sequence[str]
MAX_LIST_VALUES = 100_000  # a longer list is a typo (0-1000000000), not a sweep: refused before expansion


def _items(words: Words) -> list[str]:
    """The comma-separated items of one string or of several words ('0-2,7' '9' -> ['0-2', '7', '9'])."""
    return [item for word in ([words] if isinstance(words, str) else words) for item in split_list(word)]


def _range(item: str, what: str) -> tuple[int, int] | None:
    """'5-9' or '5:9' -> (5, 9); a single integer -> None; CubeError for anything else."""
    lo, sep, hi = item.replace(":", "-").partition("-")
    try:
        if not sep:
            int(item)
            return None
        start, stop = int(lo), int(hi)
    except ValueError:
        raise CubeError(f"cannot read {what} {item!r}: {what} must be integers or ranges like 0-29") from None
    if stop < start:
        raise CubeError(f"cannot read {what} {item!r}: the range is empty (the end is below the start)")
    return start, stop


def parse_names(words: Words, what: str) -> tuple[str, ...]:
    """Names from 'ppo,p3o' (or several such words); a name given twice or none at all is an error."""
    text = words if isinstance(words, str) else " ".join(words)
    names: list[str] = []
    for item in _items(words):
        if item in names:
            raise CubeError(f"{what[:-1]} {item!r} given twice in {text!r}; list every {what[:-1]} once")
        names.append(item)
    if not names:
        raise CubeError(f"empty {what} list {text!r}: give at least one value")
    return tuple(names)


def parse_ints(words: Words, what: str = "seeds") -> tuple[int, ...]:
    """Non-negative integers from '0,3,5-9' (inclusive ranges, LO-HI or LO:HI); duplicates are an error.

    The size of every range is checked before it is expanded, so a typo like 0-1000000000 is refused at
    once (at most MAX_LIST_VALUES values)."""
    text = words if isinstance(words, str) else " ".join(words)
    spans: list[tuple[int, int]] = []
    for item in _items(words):
        span = _range(item, what)
        if span is None:
            span = (int(item), int(item))
        if span[0] < 0:
            raise CubeError(f"cannot read {what} {item!r}: {what} must be non-negative integers")
        spans.append(span)
    total = sum(hi - lo + 1 for lo, hi in spans)
    if total > MAX_LIST_VALUES:
        raise CubeError(f"{what} {text!r} hold {total:,} values; at most {MAX_LIST_VALUES:,} are allowed")
    values: list[int] = []
    seen: set[int] = set()
    for lo, hi in spans:
        for v in range(lo, hi + 1):
            if v in seen:
                raise CubeError(f"{what[:-1]} {v} given twice in {text!r}; list every {what[:-1]} once")
            seen.add(v)
            values.append(v)
    if not values:
        raise CubeError(f"empty {what} list {text!r}: give at least one value")
    return tuple(values)


def parse_floats(words: Words, what: str = "bounds") -> tuple[float, ...]:
    """Numbers from '15,25.5' (or several such words); a value given twice (`same_bound`) is an error."""
    text = words if isinstance(words, str) else " ".join(words)
    values: list[float] = []
    for item in _items(words):
        try:
            value = float(item)
        except ValueError:
            raise CubeError(f"cannot read {what} {item!r}: {what} must be numbers like 15,25") from None
        if any(same_bound(value, v) for v in values):
            raise CubeError(f"{what[:-1]} {value:g} given twice in {text!r}; list every {what[:-1]} once")
        values.append(value)
    if not values:
        raise CubeError(f"empty {what} list {text!r}: give at least one value")
    return tuple(values)


def parse_iterates(text: str, n_iterates: int | None = None) -> Iterates:
    """'' or 'all' -> None; 'J' -> J; 'LO:HI' or 'LO-HI' -> (LO, HI) inclusive; CubeError otherwise.

    With n_iterates, an iterate (or range start) past the cube's last iterate is refused, and a range end
    past it is an error too: the window must lie inside 0..n_iterates-1."""
    t = text.strip().lower()
    if t in ("", "all"):
        return None
    lo, sep, hi = t.replace("-", ":").partition(":")
    try:
        out: Iterates = (int(lo), int(hi)) if sep else int(t)
    except ValueError:
        raise CubeError(f"cannot read iterates {text!r}: use all, J or LO:HI (inclusive)") from None
    first, last = (out, out) if isinstance(out, int) else out
    if first < 0 or last < first:
        raise CubeError(f"iterate range {text!r} is invalid: give J or LO:HI with 0 <= LO <= HI")
    if n_iterates is not None and last >= n_iterates:
        raise CubeError(f"iterate {last} is out of range: the cube has iterates 0..{n_iterates - 1}")
    return out


def parse_selection(
    algos: str | None = None,
    tasks: str | None = None,
    bounds: str | None = None,
    seeds: str | None = None,
    iterates: str | None = None,
) -> Selection:
    """Build a Selection from comma-separated CLI strings (None = all)."""
    return Selection(
        algos=parse_names(algos, "algos") if algos is not None else None,
        tasks=parse_names(tasks, "tasks") if tasks is not None else None,
        bounds=parse_floats(bounds, "bounds") if bounds is not None else None,
        seeds=parse_ints(seeds, "seeds") if seeds is not None else None,
        iterates=parse_iterates(iterates) if iterates is not None else None,
    )


def add_selection_arguments(parser: argparse.ArgumentParser) -> None:
    """The selection flags shared by every command that analyses a cube (report, plot, ...)."""
    parser.add_argument("--algos", "--algo", dest="algos", help="comma-separated algorithms (default all)")
    parser.add_argument("--tasks", "--task", dest="tasks", help="comma-separated tasks (default all)")
    parser.add_argument("--bounds", "--bound", dest="bounds", help="comma-separated safety bounds (default all)")
    parser.add_argument("--seeds", "--seed", dest="seeds", help="seeds, e.g. 0-9 or 0,3,5 (default all)")
    parser.add_argument("--iterates",
                        help="training iterates: J (policy pi_J) or LO:HI / LO-HI inclusive (default all)")


def selection_from_args(args: argparse.Namespace) -> Selection:
    """The Selection named by the flags of `add_selection_arguments`."""
    return parse_selection(args.algos, args.tasks, args.bounds, args.seeds, args.iterates)


def parse_pair(text: str, flag: str) -> tuple[str, str]:
    """'ppo_lag,ppo' -> ('ppo_lag', 'ppo'): two different algorithms (`flag` names the option in errors)."""
    parts = [t.strip() for t in text.split(",")]
    if len(parts) != 2 or not all(parts) or parts[0] == parts[1]:
        raise CubeError(f"cannot read {flag} {text!r}: give two different algorithms, e.g. {flag} ppo_lag,ppo")
    return parts[0], parts[1]


def parse_settings(text: str | None) -> tuple[str, ...] | None:
    """'train,final_greedy' -> ('train', 'final_greedy'); None = every setting with episodes. The names
    are checked against the registry by `cube.stats.settings_arg`."""
    return None if text is None else parse_names(text, "settings")


MAX_BOOT = 1_000_000
"""More bootstrap replicates than this are a typo, not a tighter interval (and hours of work)."""


def add_statistics_arguments(parser: argparse.ArgumentParser, baseline_help: str) -> None:
    """The flags of the interval estimates and the baseline, shared by every command that reports them."""
    parser.add_argument("--settings",
                        help="comma-separated settings from train, final_expl, final_greedy "
                             "(default: all with episodes)")
    parser.add_argument("--boot", type=int, default=2000, help="bootstrap replicates B (default 2000, as in the paper)")
    parser.add_argument("--ci", type=float, default=0.95, help="confidence level of the intervals (default 0.95)")
    parser.add_argument("--rng-seed", type=int, default=0, help="seed of the bootstrap (default 0)")
    parser.add_argument("--baseline", help=baseline_help)


def check_statistics_arguments(boot: int, ci: float, rng_seed: int, seed_flag: str = "--rng-seed") -> None:
    """One CubeError line for bootstrap settings out of range, before any work."""
    if not 1 <= boot <= MAX_BOOT or not 0 < ci < 1:
        raise CubeError(f"--boot must be >= 1 (at most {MAX_BOOT:,}) and --ci strictly between 0 and 1 "
                        f"(e.g. --boot 2000 --ci 0.95), got --boot {boot} --ci {ci}")
    if not 0 <= rng_seed < 2**32:
        raise CubeError(f"{seed_flag} must be an integer in 0..{2**32 - 1}, got {rng_seed}")


def positive_int(text: str) -> int:
    """argparse type of a count that must be >= 1 ('--seeds 10')."""
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be >= 1, got {value}")
    return value


def count_at_most(limit: int):  # noqa: ANN201 - an argparse type
    """argparse type of a count in 1..`limit` ('--bins 20', at most 10,000): refused before any work, naming
    the value and the limit."""
    def parse(text: str) -> int:
        value = positive_int(text)
        if value > limit:
            raise argparse.ArgumentTypeError(f"{value:,} is beyond the limit of {limit:,}")
        return value

    parse.__name__ = f"count_at_most_{limit}"
    return parse
