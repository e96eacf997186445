"""What the human tables say about honest intervals of V (`cube.stats.honest`): the tier at V's honest upper
bound where a tier rests on an observed V = 0 ("4→3" in the tier cell, the claim in a note), and the
few-seeds mark (`cube.stats.reasons.MARKS`). Text only; the numbers come from `stats.with_honest`.

A table without the honest variables (an API call that did not attach them) gets no mark and no note.
"""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np
import xarray as xr

from cube.stats.metrics import SETTING
from cube.stats.reasons import MARKS

__all__ = ["FEW_MARK", "ARROW", "has_honest", "rests_on_zero", "tier_cell", "claims", "claim_notes",
           "few_seeds", "few_note", "conditions_claim_note"]

FEW_MARK = "‡"
"""The mark of a row whose intervals stand on fewer than FEW_SEEDS seeds in a condition."""
ARROW = "→"


def has_honest(table: xr.Dataset) -> bool:
    """Whether `stats.with_honest` attached the honest variables to the table."""
    return "rests_on_zero" in table and "tier_at_bound" in table


def rests_on_zero(table: xr.Dataset, **at) -> bool:
    """Whether the tier at `at` (algo, setting[, task, bound]) rests on an observed V = 0 with a bound."""
    if not has_honest(table):
        return False
    one = table.sel(at)
    return bool(one["rests_on_zero"]) and int(one["tier"]) >= 0 and int(one["tier_at_bound"]) >= 0


def tier_cell(table: xr.Dataset, tier_text: str, arrow: str = ARROW, **at) -> str:
    """`tier_text` as it is, or 'tier_text→b' where the tier rests on V = 0 observed (b: the tier at V's
    honest upper bound)."""
    if not rests_on_zero(table, **at):
        return tier_text
    return f"{tier_text}{arrow}{int(table['tier_at_bound'].sel(at))}"


def claims(table: xr.Dataset) -> Iterator[tuple[str, str, str]]:
    """(algo, setting, claim) of an aggregate table's rows whose tier rests on V = 0 observed."""
    if not has_honest(table):
        return
    for a in table["algo"].values:
        for s in table["setting"].values:
            if rests_on_zero(table, algo=a, setting=s):
                yield str(a), str(s), str(table["claim"].sel(algo=a, setting=s).item())


def _setting(s: str) -> str:
    return SETTING[s].label if s in SETTING else s


def claim_notes(table: xr.Dataset) -> list[str]:
    """One note per aggregate row whose tier rests on V = 0: '→ ppo_lag, Final (greedy): tier 4 observed;
    V ≤ 0.0015 at 95%: tier 3 at the bound'."""
    return [f"{ARROW} {a}, {_setting(s)}: {claim}" for a, s, claim in claims(table)]


def conditions_claim_note(table: xr.Dataset) -> str:
    """The note of a per-condition table with some tier resting on V = 0, else ''."""
    if not has_honest(table) or not bool((table["rests_on_zero"] & (table["tier"] >= 0)).any()):
        return ""
    level = 100 * float(table.attrs.get("ci", 0.95))
    return (f"4{ARROW}b: tier 4 rests on V = 0 observed; b is the tier at V's honest {level:g}% upper bound "
            "(csv/json: honest_high, claim)")


def few_seeds(table: xr.Dataset, **at) -> bool:
    """Whether the row at `at` is marked few-seeds."""
    return "few_seeds" in table and bool(table["few_seeds"].sel(at))


def few_note(table: xr.Dataset) -> str:
    """'‡ fewer than 5 seeds in a condition (least 3): ...' where some row is marked, else ''."""
    if "few_seeds" not in table or not bool(np.asarray(table["few_seeds"].values).any()):
        return ""
    seeds = table["min_seeds"] if "min_seeds" in table else table.get("n_seeds")
    least = ""
    if seeds is not None:
        have = np.asarray(seeds.values)[np.asarray(table["few_seeds"].values, dtype=bool)]
        least = f" (least: {int(have.min())})" if have.size else ""
    return f"{FEW_MARK} few seeds{least}: {MARKS['few-seeds']}"
