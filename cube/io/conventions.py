"""The conventions that make two results comparable or not, recorded per run (manifest key `conventions`).

Published safe-RL numbers differ in four conventions that files rarely state (OmniSafe PR #236, DSRL #12,
OASIS #1, FISOR #6, focops #1 and #3, ray #45284), plus whether the history read was complete:

* `cost_discount`: the episode cost is the plain sum of per-step costs (`undiscounted`, the paper's C) or a
  discounted sum (`discounted`);
* `window`: what one stored number is: `none` (one episode) or a window of episodes (`sliding, 50
  episodes`, `epoch means`, ...; the run's `means` entry says more);
* `evaluation`: how evaluation episodes were acted: `deterministic` (greedy), `stochastic` (exploration),
  `deterministic and stochastic`, or `none` (no evaluation episodes);
* `normalization`: rewards and costs as the environment gave them (`raw`) or rescaled (`normalized`);
* `history`: every logged row read (`complete`) or a sample of them (`sampled`, e.g. W&B's `run.history()`).

Each value says where it comes from (`from`: the file, a flag, the format's documented default, or what
the stored data imply); `unknown` where nothing says. An importer notes what its files say
(`note_convention`); `settle_conventions` then fills the rest from the flags, refusing a flag that
contradicts a file. Runs written before the key existed are read by their writer (`conventions_of`).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from cube.errors import CubeError
from cube.schema import MEANS_KEY

if TYPE_CHECKING:  # in annotations only: `saferl import --help` loads no numpy
    from cube.io.sourcefiles import ImportedRun

CONVENTIONS_KEY = "conventions"
"""Run-manifest key: name -> {"value": str, "from": str}."""
UNKNOWN = "unknown"


@dataclass(frozen=True)
class Convention:
    """One convention: its manifest name, a title for screens, the values a flag may give, the flag."""

    name: str
    title: str
    choices: tuple[str, ...]
    flag: str | None
    help: str


CONVENTIONS: tuple[Convention, ...] = (
    Convention("cost_discount", "cost", ("undiscounted", "discounted"), "--cost-discount",
               "whether the source's episode costs are plain sums of per-step costs or discounted sums"),
    Convention("window", "window", (), None, "what one stored number is: one episode or a window of them"),
    Convention("evaluation", "evaluation", ("deterministic", "stochastic"), "--eval",
               "how the source's evaluation episodes were acted (deterministic = greedy)"),
    Convention("normalization", "normalization", ("raw", "normalized"), "--normalization",
               "whether the source's rewards and costs are raw or rescaled (normalized returns, VecNormalize)"),
    Convention("history", "history", ("complete", "sampled"), None,
               "whether every logged row was read or a sample of them"),
)
BY_NAME = {c.name: c for c in CONVENTIONS}


def flag_dest(convention: Convention) -> str:
    """The argparse dest of a convention's flag ('--cost-discount' -> 'cost_discount')."""
    return (convention.flag or "").lstrip("-").replace("-", "_")


def note_convention(run: ImportedRun, name: str, value: str, source: str, *, default: bool = False) -> None:
    """Record what a source says about a convention (`source`: where it says so, one phrase). `default`:
    the format's documented default rather than the file's word, so a flag may override it."""
    if name not in BY_NAME:
        raise KeyError(name)
    entry = {"value": value, "from": source}
    if default:
        entry["default"] = True
    run.manifest.setdefault(CONVENTIONS_KEY, {})[name] = entry


def window_value(means: Mapping[str, Any] | None) -> str:
    """The `window` value implied by a run's `means` entries: `none` without means, else the kinds and
    window sizes ('sliding, 50 episodes'; 'interval' for crax's per-log means)."""
    if not means:
        return "none"
    parts = []
    for entry in means.values():
        kind = str((entry or {}).get("kind") or "means")
        n = (entry or {}).get("window_episodes")
        parts.append(f"{kind}, {n} episodes" if n else kind)
    return "; ".join(dict.fromkeys(parts))


def evaluation_value(modes: Iterable[str]) -> str:
    """The `evaluation` value implied by the modes holding data (greedy = deterministic, expl = stochastic)."""
    have = set(modes)
    kinds = [k for m, k in (("greedy", "deterministic"), ("expl", "stochastic")) if m in have]
    return " and ".join(kinds) or "none"


def settle_conventions(run: ImportedRun, flags: Mapping[str, Any]) -> None:
    """Fill every convention of `run`: what its files said (kept; a flag that contradicts it is refused),
    else the flag (`flags`: convention name -> value, None where not given), else what the stored data
    imply (window, evaluation), else `unknown`."""
    noted = run.manifest.setdefault(CONVENTIONS_KEY, {})
    implied = {"window": window_value(run.manifest.get(MEANS_KEY)),
               "evaluation": evaluation_value(m for m, _ in run.episodes)}
    for conv in CONVENTIONS:
        given = flags.get(conv.name)
        if noted.get(conv.name, {}).pop("default", False) and given is not None:
            del noted[conv.name]  # a format's default gives way to the flag
        if conv.name in noted:
            said = noted[conv.name]["value"]
            if given is not None and given != said and not (conv.name == "evaluation" and said == "none"):
                raise CubeError(f"{run.source}: {conv.flag} {given} contradicts the source, which says "
                                f"{conv.title} {said} ({noted[conv.name]['from']}); leave {conv.flag} out")
            continue
        if conv.name == "evaluation" and implied["evaluation"] == "none":
            noted[conv.name] = {"value": "none", "from": "no evaluation episodes"}
        elif given is not None:
            noted[conv.name] = {"value": str(given), "from": f"flag {conv.flag}"}
        elif conv.name in implied:
            noted[conv.name] = {"value": implied[conv.name], "from": "the stored data"}
        else:
            noted[conv.name] = {"value": UNKNOWN, "from": "nothing says"}


# ------------------------------------------------------------------------------------- reading
TRAIN_CONVENTIONS = {"cost_discount": "undiscounted", "window": "none", "evaluation": "deterministic and stochastic",
                     "normalization": "raw", "history": "complete"}
"""What `saferl train` runs are: sums of raw per-step costs per episode, every episode, paired greedy and
exploration evaluation (`train/evaluate.py`)."""


def conventions_of(row: Mapping[str, Any]) -> dict[str, str]:
    """A run's conventions (name -> value) from its manifest row; runs written before the key existed
    are read by their writer: `saferl train` as TRAIN_CONVENTIONS, others `unknown` except the window."""
    stored = row.get(CONVENTIONS_KEY)
    if isinstance(stored, dict) and stored:
        return {c.name: str((stored.get(c.name) or {}).get("value", UNKNOWN)) for c in CONVENTIONS}
    writer = str(row.get("writer") or "")
    if writer == "saferl train" or (not writer and row.get("config") is not None and not row.get("format")):
        return dict(TRAIN_CONVENTIONS)
    out = {c.name: UNKNOWN for c in CONVENTIONS}
    if writer or row.get("format") or row.get("recorder"):
        out["window"] = window_value(row.get(MEANS_KEY))
    return out


def conventions_text(values: Mapping[str, str]) -> str:
    """'cost undiscounted; window none; evaluation deterministic; normalization raw; history complete'."""
    return "; ".join(f"{c.title} {values.get(c.name, UNKNOWN)}" for c in CONVENTIONS)


def differences(rows: Iterable[Mapping[str, Any]]) -> dict[str, Counter[str]]:
    """The conventions in which `rows` (manifest rows) do not all agree: name -> runs per value."""
    counts: dict[str, Counter[str]] = {c.name: Counter() for c in CONVENTIONS}
    for row in rows:
        for name, value in conventions_of(row).items():
            counts[name][value] += 1
    return {name: c for name, c in counts.items() if len(c) > 1}


def difference_line(rows: Iterable[Mapping[str, Any]]) -> str | None:
    """One line saying in which conventions the runs shown side by side differ (None when they agree)."""
    diff = differences(rows)
    if not diff:
        return None
    parts = [f"{BY_NAME[name].title} (" + ", ".join(f"{v}: {n} run(s)" for v, n in sorted(c.items())) + ")"
             for name, c in diff.items()]
    return ("the runs compared differ in " + "; ".join(parts)
            + ": their numbers may not be comparable (each run's manifest says where its conventions come from)")


def agreed(rows: Iterable[Mapping[str, Any]]) -> dict[str, str]:
    """Each convention's value where every row agrees, else 'differs'."""
    counts: dict[str, Counter[str]] = {c.name: Counter() for c in CONVENTIONS}
    for row in rows:
        for name, value in conventions_of(row).items():
            counts[name][value] += 1
    return {name: (next(iter(c)) if len(c) == 1 else "differs") for name, c in counts.items() if c}


def reference_line(rows: Iterable[Mapping[str, Any]], reference: Mapping[str, str], name: str) -> str | None:
    """One line saying where the runs' conventions differ from a reference's (`reference`: name -> value)."""
    ours = agreed(rows)
    off = [f"{BY_NAME[k].title}: {name} {v}, cube {ours.get(k, UNKNOWN)}" for k, v in reference.items()
           if k in BY_NAME and ours.get(k, UNKNOWN) != v]
    if not off:
        return None
    return f"the cube's conventions differ from {name}'s ({'; '.join(off)}): compare with care"
