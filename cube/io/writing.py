"""Imported runs into a store: a new one (`saferl import ... --out`) or an existing one (`--into`).

Everything is checked before anything is written: the grid fits a store's limits (`check_size`:
iterates, episode slots, the bytes of one run's episode block in memory and in its chunk), and with
`--into` no run that already holds data (`CubeWriter.recorded_iterates`, the writers' existing-run rule)
is overwritten unless `replace` is given, and every run is claimed for the whole import (`cube.store.claims`:
a run another writer records is refused in one line naming it). A new store is written beside its path and
swapped in when complete; each run added to an existing store is written in one writer bracket
(`CubeWriter.replace_run`), so readers and an interrupted import never see half a run, and a run marked
complete is first marked partial in a bracket of its own (a kill never leaves it complete and empty).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from cube.compute import Progress
from cube.errors import CubeError
from cube.io.sourcefiles import ImportedRun
from cube.schema import LEGACY_MEANS_ONLY, MEANS_ONLY, MODES, RUN_STATUS, RunKey
from cube.store.claims import take_claims
from cube.store.fs import staged_store
from cube.store.grid import update_root_attrs
from cube.store.layout import (
    MAX_CHUNK_BYTES,
    MAX_EPISODE_SLOTS,
    MAX_ITERATES,
    check_grid_size,
    create_store,
    extend_store,
    grow_store,
    open_group,
    read_coords,
)
from cube.store.locks import grid_lock
from cube.store.writer import CubeWriter, check_episode_block, key_in_grid, manifest_text

MAX_NOTES = 3
"""Sentences about means kept per format in the store's attrs (`means_notes`); runs keep their own."""


def _ordered(values: Iterable[Any]) -> list[Any]:
    return list(dict.fromkeys(values))


def check_size(runs: Sequence[ImportedRun], n_iterates: int = 0, n_episodes: int = 0) -> tuple[int, int]:
    """The grid (iterates, episode slots) that holds `runs` and a store of (n_iterates, n_episodes);
    CubeError, before anything is allocated, when a store may not hold it (`check_grid_size`: iterates,
    episode slots, and the bytes of one run's reward or cost block, which the importer holds in memory)."""
    if not runs:
        raise CubeError("nothing to import")
    widest = max(runs, key=lambda r: r.n_episodes())
    longest = max(runs, key=lambda r: r.n_iterates())
    j = max(n_iterates, longest.n_iterates())
    e = max(n_episodes, widest.n_episodes())
    try:
        check_grid_size(n_iterates=j, n_episodes=e)
    except CubeError:
        need = j * e * len(MODES) * 4 / 2**20
        raise CubeError(f"importing needs {j:,} iterates x {e:,} episode slots x {len(MODES)} modes ({need:,.0f} MiB "
                        f"per run and variable), beyond what a store holds ({MAX_ITERATES:,} iterates, "
                        f"{MAX_EPISODE_SLOTS:,} slots, {MAX_CHUNK_BYTES / 2**20:,.0f} MiB per run); most iterates: "
                        f"run {longest.key}, {longest.n_iterates():,}; most episodes in one cell: run {widest.key}, "
                        f"{widest.n_episodes():,}: check the iterates (env steps are not iterates) or split the "
                        "import") from None
    return j, e


def _store_attrs(runs: Sequence[ImportedRun], fmt: str, old: dict[str, Any] | None = None) -> dict[str, Any]:
    """Store attrs: `imported_from` (the formats, comma-separated) and `means_notes` (format -> what its
    means are, from the runs' manifests), merged with those of an existing store (`old`)."""
    old = old or {}
    sources = [s.strip() for s in str(old.get("imported_from") or "").split(",") if s.strip()]
    notes = dict(old.get("means_notes") or {})
    texts = _ordered(n for r in runs for n in [r.means_note()] if n)
    if texts:
        more = len(texts) - MAX_NOTES
        notes[fmt] = " / ".join(texts[:MAX_NOTES]) + (f" (and {more} more: see run manifests)" if more > 0 else "")
    out: dict[str, Any] = {"imported_from": ", ".join(_ordered([*sources, fmt]))}
    if notes:
        out["means_notes"] = notes
    return out


def _manifest(run: ImportedRun, fmt: str) -> dict[str, Any]:
    notes = {"import_notes": list(run.notes)} if run.notes else {}
    return {"writer": f"saferl import {fmt}", "format": fmt, "source": run.source, **run.manifest, **notes}


def _blocks(run: ImportedRun, shape: tuple[int, int, int], modes: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
    """The run's (iterate, episode, mode) reward and cost blocks, NaN where no episode is."""
    reward = np.full(shape, np.nan, dtype=np.float32)
    cost = reward.copy()
    for (mode, j), (r, c) in run.episodes.items():
        reward[j, : c.size, modes.index(mode)] = r
        cost[j, : c.size, modes.index(mode)] = c
    return reward, cost


def _write_one(writer: CubeWriter, run: ImportedRun, fmt: str) -> None:
    """One run added to an existing store, replacing whatever the run held (`CubeWriter.replace_run`:
    readers see the run before or after, never half of it; nothing of an old run's data stays)."""
    modes = [str(m) for m in writer.coords["mode"]]
    shape = (len(writer.coords["iterate"]), len(writer.coords["episode"]), len(modes))
    reward, cost = _blocks(run, shape, modes)
    values = {}
    for name, per_iterate in run.iterate_vars.items():
        if per_iterate:
            values[name] = np.full(shape[0], np.nan)
            values[name][list(per_iterate)] = list(per_iterate.values())
    flags = any(n in writer.group for n in (MEANS_ONLY, LEGACY_MEANS_ONLY))
    writer.replace_run(run.key, reward, cost, values, status="complete", manifest=_manifest(run, fmt),
                       means_only={m: m in run.means_only for m in modes} if flags else None)


def write_runs(runs: Sequence[ImportedRun], out: str | Path, *, fmt: str, force: bool = False,
               progress: Progress | None = None) -> Path:
    """A new store at `out` holding `runs` (grid: the labels they use; runs absent from the grid
    combinations stay pending). Written beside `out` and swapped in when complete."""
    n_iterates, n_episodes = check_size(runs)
    keys = [r.key for r in runs]
    var_names = sorted({name for r in runs for name in r.iterate_vars} | {"env_steps", "multiplier"})
    with staged_store(out, force=force) as staging:
        create_store(staging, algos=_ordered(k.algo for k in keys), tasks=_ordered(k.task for k in keys),
                     bounds=sorted({k.bound for k in keys}), seeds=sorted({k.seed for k in keys}),
                     n_iterates=n_iterates, n_episodes=n_episodes, iterate_vars=tuple(var_names),
                     means_only_flags=any(r.means_only for r in runs),
                     attrs={"description": f"saferl results cube imported from {fmt}", **_store_attrs(runs, fmt)})
        _write_new_runs(staging, runs, fmt, progress)
    return Path(out)


SLAB_BYTES = 128 * 2**20
"""Bytes of one reward (or cost) block a new store is written in: runs of consecutive seeds of one
(algo, task, bound), each array one concurrent zarr write."""


def _write_new_runs(path: Path, runs: Sequence[ImportedRun], fmt: str, progress: Progress | None) -> None:
    """Every run of a new store that no reader sees yet (staged beside its target) written by slabs of
    consecutive seeds, each array of a slab in one zarr call: no write brackets (nobody reads the store
    before it is renamed into place) and no per-run round trips (a per-run write took ~17 ms a run)."""
    group = open_group(path)
    coords = read_coords(group)
    modes = [str(m) for m in coords["mode"]]
    shape = (len(coords["iterate"]), len(coords["episode"]), len(modes))
    where = {d: {str(v): i for i, v in enumerate(coords[d].tolist())} for d in ("algo", "task", "seed")}
    bounds = {float(v): i for i, v in enumerate(coords["bound"].tolist())}
    slabs: dict[tuple[int, int, int], list[tuple[int, ImportedRun]]] = {}
    for run in runs:
        k = run.key
        slab = (where["algo"][k.algo], where["task"][k.task], bounds[float(k.bound)])
        slabs.setdefault(slab, []).append((where["seed"][str(k.seed)], run))
    flags = next((n for n in (MEANS_ONLY, LEGACY_MEANS_ONLY) if n in group), None)
    names = [n for n in sorted({n for r in runs for n, v in r.iterate_vars.items() if v})]
    per_seed = max(1, SLAB_BYTES // (4 * int(np.prod(shape))))
    done = 0
    for (a, t, b), members in slabs.items():
        members.sort(key=lambda m: m[0])
        while members:
            lo = members[0][0]
            batch = [m for m in members if m[0] < lo + per_seed]
            members = members[len(batch):]
            hi = batch[-1][0] + 1
            _write_slab(group, (a, t, b), lo, hi, batch, fmt, shape, modes, names, flags)
            done += len(batch)
            if progress:
                progress(done, len(runs))


def _write_slab(group: Any, at: tuple[int, int, int], lo: int, hi: int, batch: list[tuple[int, ImportedRun]],
                fmt: str, shape: tuple[int, int, int], modes: list[str], names: list[str], flags: str | None) -> None:
    """The runs `batch` ((seed position, run), positions in lo..hi-1 of the slab `at`) in one write per array."""
    n = hi - lo
    reward = np.full((n, *shape), np.nan, dtype=np.float32)
    cost = reward.copy()
    values = {name: np.full((n, shape[0]), np.nan) for name in names}
    texts = np.full(n, "", dtype=object)
    status = np.zeros(n, dtype=np.int8)
    means = np.zeros((n, len(modes)), dtype=np.int8)
    for s, run in batch:
        i = s - lo
        reward[i], cost[i] = _blocks(run, shape, modes)
        check_episode_block(reward[i], cost[i], f"run {run.key}")
        for name, per_iterate in run.iterate_vars.items():
            for j, v in per_iterate.items():
                values[name][i, j] = v
        texts[i] = manifest_text(run.key, "complete", _manifest(run, fmt))
        status[i] = RUN_STATUS["complete"]
        means[i] = [m in run.means_only for m in modes]
    cut = (*at, slice(lo, hi))
    group["reward"][cut] = reward
    group["cost"][cut] = cost
    for name, block in values.items():
        group[name][cut] = block
    group["run_manifest"][cut] = texts
    group["run_status"][cut] = status
    if flags is not None:
        group[flags][cut] = means


def _recorded(writer: CubeWriter, key: RunKey) -> int:
    """Iterates of run `key` that hold data in the store (`CubeWriter.recorded_iterates`, the rule of the
    writers' existing-run policy); 0 for a run not in the grid."""
    return writer.recorded_iterates(key) if key_in_grid(writer.coords, key) else 0


def add_runs(runs: Sequence[ImportedRun], into: str | Path, *, fmt: str, replace: bool = False,
             progress: Progress | None = None) -> Path:
    """Add `runs` to the existing store `into`, growing its grid (labels, iterates, episode slots,
    variables) without rewriting other runs. A run that already holds data there is refused unless
    `replace`, which rewrites all of it (episodes, flags, per-iterate variables, manifest)."""
    path = Path(into)
    if not path.exists():
        raise CubeError(f"{path} does not exist: --into adds runs to an existing cube; create one with --out")
    writer = CubeWriter(path)
    with take_claims(path, [r.key for r in runs], f"saferl import {fmt}", "import into"):
        writer.repair_runs([r.key for r in runs])  # what a killed writer left half-written: blank, for good
        _check_into(writer, runs, replace)
        # every check passed: grow the grid, then write
        keys = [r.key for r in runs]
        extend_store(path, algos=_ordered(k.algo for k in keys), tasks=_ordered(k.task for k in keys),
                     bounds=_ordered(k.bound for k in keys), seeds=_ordered(k.seed for k in keys))
        grow_store(path, n_iterates=max(r.n_iterates() for r in runs), n_episodes=max(r.n_episodes() for r in runs),
                   iterate_vars=sorted({n for r in runs for n, v in r.iterate_vars.items() if v}),
                   means_only_flags=any(r.means_only for r in runs))
        with grid_lock(path):
            update_root_attrs(path, lambda old: _store_attrs(runs, fmt, old))
        writer.refresh()
        for i, run in enumerate(runs):
            _write_one(writer, run, fmt)
            if progress:
                progress(i + 1, len(runs))
    return path


def _check_into(writer: CubeWriter, runs: Sequence[ImportedRun], replace: bool) -> None:
    """CubeError (one line) when `runs` cannot go into the writer's store: a run holding data without
    `replace`, a mode the store lacks, a grid beyond the store's limits."""
    path = writer.path
    busy = [(r.key, n) for r in runs for n in [_recorded(writer, r.key)] if n]
    if busy and not replace:
        key, n = busy[0]
        raise CubeError(f"{len(busy)} of the runs already hold data in {path} (first: {key}, {n} iterate(s), "
                        f"status {writer.run_status(key)}): pass --replace to overwrite them as a whole, or import "
                        "them with other labels (--algo/--seed)")
    modes = [str(m) for m in writer.coords["mode"]]
    lacking = sorted({m for r in runs for m, _ in r.episodes if m not in modes})
    if lacking:
        raise CubeError(f"{path} has no mode {lacking[0]!r} (it has {', '.join(modes)}); import into another cube")
    check_size(runs, len(writer.coords["iterate"]), len(writer.coords["episode"]))
