"""Selection of a sub-cube: which algorithms, tasks, bounds, seeds and training iterates to analyse.

`Selection` is a frozen value object shared by the report CLI and the TUI; `parse_selection` builds one
from command-line strings. Applying a selection to sufficient statistics is `cube.stats.select`.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass

from cube.errors import CubeError

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

    def to_json(self) -> str:
        """Compact JSON of the selection (stored in result attrs and exports)."""
        return json.dumps(asdict(self), separators=(",", ":"))


def split_list(text: str) -> list[str]:
    """'a, b,,c' -> ['a', 'b', 'c']: the non-empty, stripped items of a comma-separated string."""
    return [t.strip() for t in text.split(",") if t.strip()]


def _parse_ints(text: str, what: str) -> tuple[int, ...]:
    """'0,3,5-9' -> (0, 3, 5, 6, 7, 8, 9) (non-negative integers, inclusive ranges)."""
    out: list[int] = []
    try:
        for tok in split_list(text):
            if "-" in tok:
                lo, hi = tok.split("-", 1)
                out.extend(range(int(lo), int(hi) + 1))
            else:
                out.append(int(tok))
    except ValueError:
        raise CubeError(f"cannot read {what} {text!r}: use integers like '0,3,5-9'") from None
    if not out:
        raise CubeError(f"empty {what} list {text!r}: give at least one value")
    return tuple(out)


def _parse_iterates(text: str) -> Iterates:
    """'12' -> 12; '10:50' -> (10, 50) inclusive."""
    try:
        if ":" in text:
            lo, hi = text.split(":", 1)
            return (int(lo), int(hi))
        return int(text)
    except ValueError:
        raise CubeError(f"cannot read iterates {text!r}: use 'J' or 'LO:HI' (inclusive)") from None


def parse_selection(
    algos: str | None = None,
    tasks: str | None = None,
    bounds: str | None = None,
    seeds: str | None = None,
    iterates: str | None = None,
) -> Selection:
    """Build a Selection from comma-separated CLI strings (None = all)."""
    bnds = None
    if bounds is not None:
        try:
            bnds = tuple(float(b) for b in split_list(bounds))
        except ValueError:
            raise CubeError(f"cannot read bounds {bounds!r}: use numbers like '15,25'") from None
    return Selection(
        algos=tuple(split_list(algos)) if algos is not None else None,
        tasks=tuple(split_list(tasks)) if tasks is not None else None,
        bounds=bnds,
        seeds=_parse_ints(seeds, "seeds") if seeds is not None else None,
        iterates=_parse_iterates(iterates) if iterates is not None else None,
    )
