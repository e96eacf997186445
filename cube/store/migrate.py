"""Rewriting a store of an earlier chunk layout into the current one (`saferl migrate`).

Stores written before issue 37 keep each run's reward and cost in one plain chunk holding every iterate,
episode slot and mode, two thirds of it NaN filler (the evaluation modes exist at the final iterate only).
`migrate_store` rewrites such a store into the layout of `cube.store.chunking`: the whole store is
copied into a staging folder beside it (attributes, coordinates, manifests, statuses, per-iterate variables,
claims and progress files byte for byte; the statistics cache ``_derived`` is dropped and recomputed on the
next report), reward and cost are rewritten run by run (the same float32 values, absent episodes not
stored), and the copy then replaces the store in one rename (`cube.store.fs.staged_store`): a crash or
Ctrl-C leaves the original as it was. Refused for a URL, and for a store being written (a live claim, an
open write bracket, or a write that lands while the copy is made).
"""

from __future__ import annotations

import shutil
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import zarr

from cube.errors import CubeError
from cube.schema import EPISODE_VARS
from cube.store.chunking import episode_chunking, layout_of
from cube.store.claims import holder_alive, holder_text, parse_claim
from cube.store.fs import PathLike, staged_store
from cube.store.layout import EPISODE_COMPRESSORS, open_group
from cube.store.location import local_path, refuse_url
from cube.store.locks import grid_lock, read_write_seqs

LEFT_BEHIND = ("_derived", "_locks")
"""Folders of a store that a migration does not copy: the statistics cache (recomputed) and lock files."""


@dataclass(frozen=True)
class Migrated:
    """What `migrate_store` did: `runs` rewritten, or `already` True when the store was in the layout."""

    path: Path
    runs: int
    already: bool = False


def needs_migration(path: PathLike) -> bool:
    """Whether the store's reward and cost are in an earlier layout (not `cube.store.chunking`'s) or codec
    (zstd, before `EPISODE_COMPRESSORS`' Blosc)."""
    group = open_group(path, mode="r")
    current = EPISODE_COMPRESSORS[0].to_dict()["name"]
    layouts = [layout_of(group[name].metadata) for name in EPISODE_VARS]
    return any(layout is None or layout["codec"] != current for layout in layouts)


def migrate_store(path: PathLike, progress: Callable[[int, int], None] | None = None,
                  threads: int = 2) -> Migrated:
    """Rewrite the store at `path` into the current layout, atomically (see module docstring); the same
    values in every array. `progress(done, total)` after each run. CubeError (one line) for a URL, a store
    being written, or anything that is not a saferl store; the store is then unchanged."""
    refuse_url(path, "migrate")
    path = Path(local_path(path))
    if not needs_migration(path):
        return Migrated(path, 0, already=True)
    with grid_lock(path):
        _refuse_live_writers(path)
        before = read_write_seqs(path)
        with staged_store(path, force=True) as staging:
            shutil.copytree(path, staging, symlinks=True, ignore=_ignore_top(path))
            runs = _rewrite_episodes(path, staging, progress, threads)
            after = read_write_seqs(path)
            if before is not None and (after is None or not np.array_equal(before, after)):
                raise CubeError(f"a writer wrote into {path} while it was being migrated; the store is unchanged: "
                                "stop its writers and run saferl migrate again")
    return Migrated(path, runs)


def _ignore_top(root: Path) -> Callable[[str, list[str]], list[str]]:
    def ignore(folder: str, names: list[str]) -> list[str]:
        if Path(folder) == root:
            return [n for n in names if n in LEFT_BEHIND or n in EPISODE_VARS]
        return []
    return ignore


def _refuse_live_writers(path: Path) -> None:
    """CubeError when a live process holds a claim on a run or a write bracket is open (an odd sequence)."""
    for claim in sorted((path / "_claims").rglob("*.claim")) if (path / "_claims").is_dir() else ():
        try:
            holder, _ = parse_claim(claim.read_text())
        except OSError:
            continue
        if holder is not None and holder_alive(holder):
            raise CubeError(f"{path} is being written ({holder_text(holder)} holds "
                            f"{claim.relative_to(path / '_claims')}); migrate it once its writers are done")
    seqs = read_write_seqs(path)
    if seqs is not None and bool((seqs % 2).any()):
        raise CubeError(f"{path} has a write in progress (or one its writer died in); let it finish, or repair it "
                        "with saferl validate --repair, then migrate")


def _rewrite_episodes(source: Path, staging: Path, progress: Callable[[int, int], None] | None,
                      threads: int) -> int:
    """Create reward and cost in `staging` in the current layout and copy every run's values into them."""
    old = zarr.open_group(str(source), mode="r")
    new = zarr.open_group(str(staging), mode="r+")
    pairs = []
    for name in EPISODE_VARS:
        arr = old[name]
        shape = arr.shape
        chunks = episode_chunking(shape[4], shape[5], arr.chunks[4] if arr.chunks[4] < shape[4] else None,
                                  arr.chunks[5] if arr.chunks[5] < shape[5] else None)
        out = new.create_array(name, shape=shape, chunks=chunks, dtype=arr.dtype,
                               fill_value=arr.metadata.fill_value, dimension_names=arr.metadata.dimension_names,
                               compressors=EPISODE_COMPRESSORS)
        out.attrs.update(dict(arr.attrs))
        pairs.append((arr, out))
    runs = list(np.ndindex(*pairs[0][0].shape[:4]))

    def copy(run: tuple[int, ...]) -> None:
        for src, dst in pairs:
            dst[run] = src[run]

    done = 0
    with ThreadPoolExecutor(threads) as pool:
        for _ in pool.map(copy, runs):
            done += 1
            if progress is not None:
                progress(done, len(runs))
    return len(runs)
