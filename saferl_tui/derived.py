"""The TUI model's cache of derived results (tables, curves, selections of the statistics), thread-safe.

Workers compute outside the lock and store under it; `renew` swaps the statistics the results derive from
and forgets them in one step, and a result computed from statistics older than the last `renew` is
returned but never stored (a generation count), so a slow worker cannot put a stale table back.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable
from typing import Any

import xarray as xr

RECENT = 4
"""Selected copies of the statistics kept (`recent`): large, so only the last few."""


class DerivedCache:
    """Derived results by key: `get` (compute once), `by_algo` (per-algorithm results grown as algorithms
    are added), `recent` (the last few selected copies), `renew` (new statistics: forget)."""

    def __init__(self) -> None:
        self._values: dict[Hashable, Any] = {}
        self._recent: OrderedDict[Hashable, xr.Dataset] = OrderedDict()
        self._lock = threading.Lock()
        self._gen = 0

    def get(self, key: Hashable, fn: Callable[[], Any]) -> Any:
        """The value under `key`, computed by `fn()` (outside the lock) the first time."""
        with self._lock:
            if key in self._values:
                return self._values[key]
            gen = self._gen
        value = fn()
        with self._lock:
            if gen == self._gen:
                self._values[key] = value
        return value

    def __contains__(self, key: Hashable) -> bool:
        with self._lock:
            return key in self._values

    def recent(self, key: Hashable, fn: Callable[[], xr.Dataset]) -> xr.Dataset:
        """`fn()` kept among the RECENT most recently used values (selected copies of the statistics)."""
        with self._lock:
            if key in self._recent:
                self._recent.move_to_end(key)
                return self._recent[key]
            gen = self._gen
        value = fn()
        with self._lock:
            if gen != self._gen:
                return value
            self._recent[key] = value
            while len(self._recent) > RECENT:
                self._recent.popitem(last=False)
        return value

    def by_algo(self, key: Hashable, algos: tuple[str, ...], compute: Callable[[tuple[str, ...]], xr.Dataset]
                ) -> xr.Dataset:
        """A per-algorithm result (a Dataset along ``algo``) for ``algos``, computed only for algorithms not
        computed before under ``key`` (``compute(missing algos)``) and concatenated to what is known.

        Valid for statistics in which an algorithm's values do not depend on the other algorithms (true of
        every ``cube.stats`` table: each bootstrap is seeded per algorithm and setting), so toggling
        algorithms reuses what is already known. ``key`` names everything else the result depends on.
        """
        with self._lock:
            have = self._values.get(key)
            gen = self._gen
        known = set() if have is None else {str(a) for a in have["algo"].values}
        missing = tuple(a for a in algos if a not in known)
        if missing:
            fresh = compute(missing)
            have = fresh if have is None else xr.concat([have, fresh], dim="algo")
            with self._lock:
                if gen == self._gen:
                    self._values[key] = have
        assert have is not None
        return have.sel(algo=list(algos))

    def renew(self, swap: Callable[[], None], keep: Callable[[Hashable], bool] = lambda key: False) -> None:
        """`swap()` (put the new statistics in place) and forget every value but those whose key `keep`s, in
        one step under the lock: no worker sees the new statistics with the old values."""
        with self._lock:
            swap()
            self._values = {k: v for k, v in self._values.items() if keep(k)}
            self._recent.clear()
            self._gen += 1
