"""The picklable run of a sweep (`SweepRun`): trains or resumes one unit of work in whatever process it lands in.

A unit is one run (a RunKey) or a vmapped group (a tuple of them, `train.grouping.make_units`); the process
caches one compiled `train.runner.Runner` per (store, task, config). No jax at import.
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from cube.schema import RunKey
from train.config import TrainConfig
from train.overrides import with_overrides
from train.progress import TrainProgress
from train.sweep import make_env

if TYPE_CHECKING:
    from train.runner import Runner

_RUNNERS: dict[tuple[str, str, str], Runner] = {}
"""The compiled Runners of this process, per (store, task, config)."""


def setup_jax() -> None:
    """Persistent compile cache (SAFERL_JAX_CACHE, "" disables it), as `saferl train` sets it."""
    import jax

    cache = os.environ.get("SAFERL_JAX_CACHE", str(Path.home() / ".cache" / "saferl" / "jax"))
    if cache:
        jax.config.update("jax_compilation_cache_dir", cache)
        jax.config.update("jax_persistent_cache_min_compile_time_secs", 1.0)


@dataclass(frozen=True)
class SweepRun:
    """Picklable `run_one(unit)` for executors: trains or resumes one run of the store `out` (a RunKey unit;
    returns a JSON-able summary of this attempt) or a vmapped group (a tuple of RunKeys; returns
    {str(key): summary} for each run it writes).

    `config` is the plain dict of the TrainConfig (`config_to_dict`). Complete runs are skipped; partial
    ones resume from their newest resume point. `write`: the runs to write (None: every run of a unit);
    the other members of a group unit ride along unwritten (see `make_units`).
    With `claims`, a run claimed by another live `saferl train` process is left to it (local sweeps);
    dask and SLURM executors hand each run to one worker themselves and retry lost ones elsewhere,
    where a dead claimant on another host could not be told from a live one, so they run without.
    `progress`: the live display of this process (the local executor's); a pickled copy goes without it.
    """

    out: str
    config: dict[str, Any]
    claims: bool = True
    progress: TrainProgress | None = field(default=None, compare=False, repr=False)
    write: frozenset[RunKey] | None = None

    def __getstate__(self) -> dict[str, Any]:
        return {**self.__dict__, "progress": None}

    def _claim_all(self, keys: Sequence[RunKey]) -> RunKey | None:
        """Claim every run of `keys` (in order), or none: returns the run claimed by another process (after
        releasing those taken here), or None when all are ours. A group is trained whole or not at all."""
        from train.claims import release, try_claim

        if not self.claims:
            return None
        taken: list[RunKey] = []
        for k in keys:
            if not try_claim(self.out, k):
                for t in taken:
                    release(self.out, t)
                return k
            taken.append(k)
        return None

    def runner(self, task: str) -> Runner:
        """The cached compiled Runner of `task` in this process."""
        ck = (self.out, task, json.dumps(self.config, sort_keys=True))
        if ck not in _RUNNERS:
            from train.runner import Runner

            setup_jax()
            config = with_overrides(TrainConfig(), json.loads(json.dumps(self.config)))  # tuples -> lists
            _RUNNERS[ck] = Runner(self.out, config, task, make_env)
        return _RUNNERS[ck]

    def __call__(self, unit: RunKey | tuple[RunKey, ...]) -> dict[str, Any]:
        if isinstance(unit, RunKey):
            return self.train((unit,))[str(unit)]
        return self.train(unit, grouped=True)

    def train(self, keys: tuple[RunKey, ...], grouped: bool = False) -> dict[str, Any]:
        """Train `keys` (one task) as one group if this process can claim every run it writes;
        {str(key): summary} for those runs. `grouped` adds the group's size to each summary."""
        from train.claims import release
        from train.placement import current_placement

        mine = [k for k in keys if self.write is None or k in self.write]
        blocker = self._claim_all(mine)
        if blocker is not None:
            return {str(k): claimed_elsewhere(self.out, blocker) for k in mine}
        try:
            where = current_placement()
            results = self.runner(keys[0].task).run_group(keys, self.progress, write=mine)
        finally:
            if self.claims:
                for k in mine:
                    release(self.out, k)
        group = {"group_size": len(keys)} if grouped else {}
        return {str(res.key): {"status": res.status, "iterates_done": res.iterates_done,
                               "env_steps": res.env_steps, "compile_s": res.compile_s,
                               "train_s": res.train_s, "resumed_from": res.resumed_from,
                               **group, **where} for res in results}


def claimed_elsewhere(out: str, key: RunKey) -> dict[str, Any]:
    """The summary of a run left to the process that holds the claim of `key` (the run, or the member of
    its group another process claimed)."""
    from train.claims import read_claim

    holder = read_claim(out, key) or {}
    return {"status": "claimed", "claimed_by": f"{holder.get('host', '?')}:{holder.get('pid', '?')}"}
