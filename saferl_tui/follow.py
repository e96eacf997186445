"""Follow mode: keep the opened store's statistics up to date while writers write it.

A :class:`Follower` is stepped from a thread worker on a timer. Each step polls the store's write
sequences (`cube.store.locks.SeqWatch`: stat calls, and reads of the sequence chunks whose folders
changed, so an idle store costs a few stats per poll); only when some run's sequence moved does it
update the statistics (`CubeModel.update`, through `cube.stats.suffstats.update_suffstats`: the runs
that moved are read again, a grown grid adds runs) and report what happened in one line each: runs
that failed since, writes their writer died in, a grid that grew, a store that is gone. Nothing here
imports textual.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass, field

import numpy as np

from cube.errors import CubeError, CubeWarning
from cube.store.locks import SeqWatch, StoreGone
from cube.store.runstatus import RunStatusReader
from saferl_tui.model import CubeModel
from saferl_tui.selection import CubeInfo

DEFAULT_INTERVAL_S = 2.0
"""Seconds between two polls of the store (`saferl-tui --follow-interval`)."""


@dataclass
class FollowUpdate:
    """What one step of a :class:`Follower` found: `changed` runs read again at time `at` (POSIX
    seconds); `notes`, one line each for the user; `grew`: the grid has new labels or iterates; `gone`:
    the store was deleted (follow mode stops); `error`: the update failed (the statistics left as they were)."""

    changed: int
    at: float
    notes: list[str] = field(default_factory=list)
    grew: bool = False
    gone: bool = False
    error: str | None = None


class Follower:
    """Polls the store of `model` and brings `model` up to date when runs were written (`step`)."""

    def __init__(self, model: CubeModel) -> None:
        self.model = model
        self.watch = SeqWatch(model.path)
        self._reader = RunStatusReader(model.path, model.stall_s)
        self._reported: set[str] = set()

    def step(self) -> FollowUpdate | None:
        """One poll; None when nothing was written since the last update (the idle case: stat calls only).
        Blocking: call from a worker. Never raises for a store that changed under it."""
        try:
            _sizes, seqs = self.watch.poll()
            if seqs is None or _same(seqs, self.model.seqs):
                return None
            before = self.model.info
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always", CubeWarning)
                changed = self.model.update(seqs.copy())
        except StoreGone as exc:
            return FollowUpdate(0, self.model.clock(), [str(exc)], gone=True)
        except CubeError as exc:
            return FollowUpdate(0, self.model.clock(), error=f"following {self.model.path}: {exc}")
        except Exception as exc:  # noqa: BLE001 - a store changing under a read raises anything; never crash
            return FollowUpdate(0, self.model.clock(),
                                error=f"following {self.model.path}: {type(exc).__name__}: {exc}")
        notes = [" ".join(str(w.message).split()) for w in caught if issubclass(w.category, CubeWarning)]
        grew = grid_growth(before, self.model.info)
        if grew:
            notes.append(grew)
        notes += self._failures({tuple(int(i) for i in ix) for ix in changed})
        return FollowUpdate(int(changed.shape[0]), self.model.clock(), list(dict.fromkeys(notes)), grew=bool(grew))

    def _failures(self, changed: set[tuple[int, ...]]) -> list[str]:
        """One line per run written since the previous step that `RunStatusReader` now calls failed (each
        failure said once)."""
        try:
            runs = self._reader.read(now=self.model.clock())
        except Exception:  # noqa: BLE001 - run status is a courtesy here: the statistics are updated
            return []
        lines = [f"run {r.key} failed: {r.error or 'no error recorded'}" for r in runs
                 if r.status == "failed" and r.index in changed]
        new = [line for line in lines if line not in self._reported]
        self._reported.update(new)
        return new


def _same(a: np.ndarray, b: np.ndarray | None) -> bool:
    return b is not None and a.shape == b.shape and bool(np.array_equal(a, b))


def grid_growth(before: CubeInfo | None, after: CubeInfo | None) -> str:
    """'the grid grew: seeds 2 → 3, iterates 4 → 6' ('' when the labels and iterates are the same)."""
    if before is None or after is None:
        return ""
    parts = []
    for name in ("algos", "tasks", "bounds", "seeds"):
        old, new = getattr(before, name), getattr(after, name)
        if old != new:
            parts.append(f"{name} {len(old)} → {len(new)}")
    if before.n_iterates != after.n_iterates:
        parts.append(f"iterates {before.n_iterates} → {after.n_iterates}")
    return "the grid grew: " + ", ".join(parts) if parts else ""
