"""Checkpoints next to the cube: `<store>/_checkpoints/<algo>/<task>/<bound>/<seed>/iter_<j>.msgpack`.

Each run folder holds `run.json` (config, labels, env sizes) and one msgpack file per evaluated
iterate with the policy, both critics, the observation normaliser and the multiplier.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Any

from cube.errors import CubeError
from cube.schema import RunKey
from cube.store.fs import side_folder
from train.envs import PyTree

CHECKPOINT_DIR = "_checkpoints"


MARKER_ATTRIBUTES = {"description": "saferl checkpoints (msgpack files, not Zarr arrays)"}


def run_dir(store: str | os.PathLike[str], key: RunKey) -> Path:
    """Folder of one run's checkpoints."""
    return Path(store) / CHECKPOINT_DIR / key.algo / key.task / f"{float(key.bound):g}" / str(int(key.seed))


def _make_run_dir(store: str | os.PathLike[str], key: RunKey) -> Path:
    """Create the run folder; mark `_checkpoints` as an (empty) Zarr group so opening the store stays silent."""
    side_folder(Path(store) / CHECKPOINT_DIR, MARKER_ATTRIBUTES)
    d = run_dir(store, key)
    d.mkdir(parents=True, exist_ok=True)
    return d


def write_run_meta(store: str | os.PathLike[str], key: RunKey, meta: dict[str, Any]) -> None:
    """Write `run.json` (config and labels) for a run."""
    d = _make_run_dir(store, key)
    _atomic_write(d / "run.json", json.dumps(meta, indent=1, sort_keys=True).encode())


def read_run_meta(store: str | os.PathLike[str], key: RunKey) -> dict[str, Any]:
    """Read `run.json` of a run (CubeError if the run has no checkpoints)."""
    p = run_dir(store, key) / "run.json"
    if not p.exists():
        raise CubeError(f"run {key.algo}/{key.task}/d={key.bound:g}/seed={key.seed} has no checkpoints in {store}")
    return json.loads(p.read_text())


def save(store: str | os.PathLike[str], key: RunKey, iterate: int, payload: PyTree) -> Path:
    """Serialise a pytree payload (see `core.checkpoint_payload`) for `iterate`."""
    from flax import serialization

    path = _make_run_dir(store, key) / f"iter_{iterate}.msgpack"
    _atomic_write(path, serialization.to_bytes(payload))
    return path


def load(store: str | os.PathLike[str], key: RunKey, iterate: int, template: PyTree) -> PyTree:
    """Restore the payload of `iterate` into the structure of `template`."""
    from flax import serialization

    path = run_dir(store, key) / f"iter_{iterate}.msgpack"
    if not path.exists():
        have = available_iterates(store, key)
        raise CubeError(f"no checkpoint at iterate {iterate} for {key.algo}/{key.task}/d={key.bound:g}/"
                        f"seed={key.seed}; checkpoints exist at iterates {have or 'none'}")
    return serialization.from_bytes(template, path.read_bytes())


_RESUME = re.compile(r"resume_(\d+)\.msgpack")


def save_resume(store: str | os.PathLike[str], key: RunKey, iterate: int, state: PyTree, env_steps: float) -> None:
    """Save the whole training state after `iterate` (optimiser, env states, RNG key) for resuming.

    One file `resume_<iterate>.msgpack` holding the state's leaves in tree order (any pytree works, also
    env states flax cannot serialise), written atomically. The previous resume point is kept and older
    ones removed after it: the runs of a vmapped group save one after the other, so a process killed
    between two saves still leaves every member a resume point at one common iterate.
    """
    import jax
    import numpy as np
    from flax import serialization

    d = _make_run_dir(store, key)
    leaves = [np.asarray(x) for x in jax.tree_util.tree_leaves(jax.device_get(state))]
    payload = {"leaves": {str(i): x for i, x in enumerate(leaves)}, "env_steps": np.asarray(env_steps, np.float64)}
    _atomic_write(d / f"resume_{int(iterate)}.msgpack", serialization.msgpack_serialize(payload))
    its = resume_iterates(store, key)
    keep = {int(iterate), max((j for j in its if j < iterate), default=-1)}
    for j in its:
        if j not in keep:  # older ones, and any left after this iterate by an attempt that started over
            (d / f"resume_{j}.msgpack").unlink(missing_ok=True)


def resume_iterates(store: str | os.PathLike[str], key: RunKey) -> list[int]:
    """Iterates with a resume point, ascending (normally at most two: the newest and the one before)."""
    d = run_dir(store, key)
    if not d.exists():
        return []
    found = (_RESUME.fullmatch(p.name) for p in d.iterdir())
    return sorted(int(m.group(1)) for m in found if m)


def load_resume(store: str | os.PathLike[str], key: RunKey, template: PyTree,
                iterate: int | None = None) -> tuple[int, PyTree, float] | None:
    """(iterate, state, env_steps) of the resume point after `iterate` (default: the newest), or None if
    the run has none there or it was written by another config."""
    import jax
    import numpy as np
    from flax import serialization

    its = resume_iterates(store, key)
    j = its[-1] if its and iterate is None else iterate
    if j is None or j not in its:
        return None
    raw = (run_dir(store, key) / f"resume_{j}.msgpack").read_bytes()
    payload = serialization.msgpack_restore(raw)
    leaves, treedef = jax.tree_util.tree_flatten(template)
    stored = [payload["leaves"][str(i)] for i in range(len(payload["leaves"]))]
    if len(stored) != len(leaves) or any(np.shape(a) != np.shape(b) for a, b in zip(stored, leaves, strict=True)):
        return None  # written by another config: start from scratch
    restored = [jax.numpy.asarray(a, dtype=b.dtype) for a, b in zip(stored, leaves, strict=True)]
    return j, jax.tree_util.tree_unflatten(treedef, restored), float(payload["env_steps"])


def clear_resume(store: str | os.PathLike[str], key: RunKey) -> None:
    """Forget a run's resume points (it starts from scratch next time)."""
    for j in resume_iterates(store, key):
        (run_dir(store, key) / f"resume_{j}.msgpack").unlink(missing_ok=True)


def available_iterates(store: str | os.PathLike[str], key: RunKey) -> list[int]:
    """Iterates with a stored checkpoint, ascending."""
    d = run_dir(store, key)
    if not d.exists():
        return []
    found = (re.fullmatch(r"iter_(\d+)\.msgpack", p.name) for p in d.iterdir())
    return sorted(int(m.group(1)) for m in found if m)


def _atomic_write(path: Path, data: bytes) -> None:
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_bytes(data)
    os.replace(tmp, path)
