"""The `dsrl` format: offline safe-RL datasets (DSRL) in HDF5, one run per file.

A DSRL dataset holds per-step arrays at its root: `observations`, `next_observations`, `actions`,
`rewards`, `costs`, `terminals`, `timeouts` (n,) or (n, ...). Episodes end at steps where `terminals |
timeouts`; each episode's reward and cost are the plain sums over its steps, exactly. Steps after the
last episode end (an unfinished episode) are left out and said. The data were collected by many behaviour
policies, so the run is one iterate of mode `train`; the task is the dataset's name (the file's stem,
e.g. `OfflineCarCircle-v0`), the algorithm `dataset`, the seed 0 unless given; the target cost d is the
user's (`--bound`). Needs h5py (`pip install 'saferl[dsrl]'`).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from cube.errors import CubeError
from cube.io.conventions import note_convention
from cube.io.registry import Importer, ImportRequest
from cube.io.sourcefiles import ImportedRun, add_episodes, find_files, run_key

DATASETS = ("rewards", "costs", "terminals", "timeouts")
CHUNK = 1 << 20
"""Steps read at a time (the arrays are summed chunk by chunk, never held whole)."""


def episode_sums(rewards: np.ndarray, costs: np.ndarray, ends: np.ndarray) -> tuple[np.ndarray, np.ndarray, int]:
    """Per-episode sums (m,) of per-step rewards and costs (n,) split after the steps where `ends` (n,) is
    True, and the steps after the last end (left out)."""
    stops = np.flatnonzero(ends) + 1
    if not stops.size:
        return np.empty(0), np.empty(0), int(ends.size)
    starts, done = np.r_[0, stops[:-1]], int(stops[-1])  # the steps after `done` belong to no episode yet
    r = np.add.reduceat(rewards[:done].astype(np.float64), starts)
    c = np.add.reduceat(costs[:done].astype(np.float64), starts)
    return r, c, int(ends.size - done)


def _read_file(path: Path, request: ImportRequest) -> ImportedRun:
    try:
        import h5py
    except ImportError:
        raise CubeError("reading DSRL's HDF5 datasets needs h5py: pip install 'saferl[dsrl]'") from None
    where = str(path)
    try:
        f = h5py.File(path, "r")
    except OSError as exc:
        raise CubeError(f"cannot read {path} as HDF5 ({str(exc)[:80]})") from None
    with f:
        missing = [k for k in DATASETS if k not in f]
        if missing:
            raise CubeError(f"{where} lacks {', '.join(missing)}: a DSRL dataset holds rewards, costs, terminals and "
                            f"timeouts per step (its keys: {', '.join(sorted(f.keys())[:10])})")
        n = f["costs"].shape[0]
        if any(f[k].shape[:1] != (n,) for k in DATASETS):
            raise CubeError(f"{where}: rewards, costs, terminals and timeouts differ in length ("
                            + ", ".join(f"{k} {f[k].shape[0]:,}" for k in DATASETS) + ")")
        rewards, costs, carried = [], [], (np.empty(0), np.empty(0))
        for a in range(0, n, CHUNK):  # episodes may span chunks: the unfinished tail carries over
            b = min(a + CHUNK, n)
            r = np.r_[carried[0], np.asarray(f["rewards"][a:b], dtype=np.float64).reshape(b - a)]
            c = np.r_[carried[1], np.asarray(f["costs"][a:b], dtype=np.float64).reshape(b - a)]
            ends = np.r_[np.zeros(carried[0].size, bool),
                         np.asarray(f["terminals"][a:b], bool).reshape(b - a)
                         | np.asarray(f["timeouts"][a:b], bool).reshape(b - a)]
            er, ec, tail = episode_sums(r, c, ends)
            rewards.append(er)
            costs.append(ec)
            carried = (r[r.size - tail:], c[c.size - tail:]) if tail else (np.empty(0), np.empty(0))
    found = {"algo": "dataset", "task": path.name.split(".")[0], "seed": 0}
    run = ImportedRun(run_key(found, request.labels, where), where, manifest={"steps": int(n)})
    r, c = np.concatenate(rewards), np.concatenate(costs)
    if not c.size:
        raise CubeError(f"{where}: no step ends an episode (terminals | timeouts is never set): nothing to import")
    add_episodes(run, "train", np.zeros(c.size, dtype=np.int64), r, c, where)
    run.manifest.update(iterates_done=1, env_steps=float(n - carried[0].size), episodes=int(c.size))
    if carried[0].size:
        run.notes.append(f"{where}: its last {carried[0].size:,} step(s) end no episode (neither terminal nor "
                         "timeout) and are left out")
    note_convention(run, "cost_discount", "undiscounted", "the sum of the dataset's per-step costs")
    note_convention(run, "normalization", "raw", "the sum of the dataset's per-step rewards (not DSRL's normalized "
                    "score)")
    note_convention(run, "history", "complete", "every step of the dataset")
    return run


def _read(request: ImportRequest) -> list[ImportedRun]:
    return [_read_file(p, request) for p in find_files(request.sources, "*.hdf5|*.h5", "DSRL datasets (.hdf5, .h5)")]


DSRL = Importer(
    name="dsrl", reads="DSRL offline datasets (HDF5: rewards, costs, terminals, timeouts per step)", gives="episodes",
    gives_text="every episode of the dataset, split at terminals | timeouts, reward and cost summed exactly: all "
    "metrics, tiers, CDFs (one iterate: the behaviour data)",
    cannot_text="iterates or learning curves (the data come from many behaviour policies); the target cost d "
    "(--bound is yours); an unfinished last episode (left out, said)",
    read=_read, example="saferl import dsrl OfflineCarCircle-v0.hdf5 --out dsrl.zarr --bound 10")
