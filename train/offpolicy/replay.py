"""Uniform replay buffer as crax has it (brax's `UniformSamplingQueue`), as a pure jax pytree.

crax keeps the last `capacity` transitions, flattened to float32 rows, oldest first (it rolls the whole
buffer when an insert overflows), and samples `m` rows with replacement by `randint(key, (m,), 0, size)`
after splitting the buffer's own key. This buffer holds the same rows in a ring (no O(capacity) roll per
insert) and maps crax's age index to the ring's slot, so the same inserts and the same key give the very
same samples (tests/test_offpolicy_parity.py checks it against crax's class).

State: `ReplayState(data [capacity, width] float32, size [], position [], key)`: `position` is the next slot
written, `size` the number of valid rows (<= capacity). Everything is a traced array, so the state vmaps over
runs and goes into a resume point like any other leaf. Rows are flat float32 vectors; `pack`/`unpack` turn a
transition pytree into rows and back.
"""

from __future__ import annotations

import math
import os
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp


class ReplayState(NamedTuple):
    """Ring-buffer state: data `[capacity, width]`, size and next write position (int32 scalars), sampling key."""

    data: jax.Array
    size: jax.Array
    position: jax.Array
    key: jax.Array


def replay_init(capacity: int, width: int, key: jax.Array) -> ReplayState:
    """An empty buffer of `capacity` rows of `width` float32 values."""
    return ReplayState(jnp.zeros((capacity, width), jnp.float32), jnp.zeros((), jnp.int32),
                       jnp.zeros((), jnp.int32), key)


def replay_insert(state: ReplayState, rows: jax.Array) -> ReplayState:
    """Append rows `[n, width]` (n <= capacity, checked by the config), overwriting the oldest when full."""
    capacity, n = state.data.shape[0], rows.shape[0]
    slots = (state.position + jnp.arange(n, dtype=jnp.int32)) % capacity
    data = state.data.at[slots].set(rows.astype(state.data.dtype), unique_indices=True)
    return ReplayState(data, jnp.minimum(state.size + n, capacity), (state.position + n) % capacity, state.key)


def replay_sample(state: ReplayState, m: int) -> tuple[ReplayState, jax.Array]:
    """`m` rows drawn uniformly with replacement from the valid ones (crax's key use and age indexing)."""
    capacity = state.data.shape[0]
    key, sample_key = jax.random.split(state.key)
    age = jax.random.randint(sample_key, (m,), minval=0, maxval=state.size)  # 0 = oldest, as crax's index
    oldest = (state.position - state.size) % capacity
    rows = jnp.take(state.data, (oldest + age) % capacity, axis=0)
    return state._replace(key=key), rows


def replay_ordered(state: ReplayState) -> jax.Array:
    """The valid rows oldest first `[size, width]` (host-side inspection and tests; not jittable)."""
    capacity, size = state.data.shape[0], int(state.size)
    oldest = (int(state.position) - size) % capacity
    return jnp.take(state.data, (oldest + jnp.arange(size)) % capacity, axis=0)


class RowLayout(NamedTuple):
    """How a transition pytree's leaves `[..., *shape]` sit in a flat row: per leaf (shape, offset)."""

    treedef: Any
    shapes: tuple[tuple[int, ...], ...]
    offsets: tuple[int, ...]
    width: int


def row_layout(example: Any) -> RowLayout:
    """The layout of `example` (one transition, no batch axis; any pytree of arrays/scalars)."""
    leaves, treedef = jax.tree_util.tree_flatten(example)
    shapes = tuple(tuple(jnp.shape(x)) for x in leaves)
    sizes = [math.prod(s) for s in shapes]
    offsets = tuple(sum(sizes[:i]) for i in range(len(sizes)))
    return RowLayout(treedef, shapes, offsets, sum(sizes))


def pack(layout: RowLayout, batch: Any) -> jax.Array:
    """Transitions with one leading axis `[n, ...]` -> rows `[n, width]` float32."""
    leaves = jax.tree_util.tree_leaves(batch)
    n = leaves[0].shape[0]
    return jnp.concatenate([jnp.reshape(x, (n, -1)).astype(jnp.float32) for x in leaves], axis=1)


def unpack(layout: RowLayout, rows: jax.Array) -> Any:
    """Rows `[..., width]` -> the transition pytree with the same leading axes."""
    lead = rows.shape[:-1]
    leaves = []
    for shape, off in zip(layout.shapes, layout.offsets, strict=True):
        leaves.append(rows[..., off:off + math.prod(shape)].reshape(lead + shape))
    return jax.tree_util.tree_unflatten(layout.treedef, leaves)


def memory_available(fraction: float = 0.9) -> tuple[int, str]:
    """(bytes, where) a program may use: `fraction` of the accelerator's allocator limit, or of this machine's
    available memory (MemAvailable; physical memory where /proc/meminfo is missing)."""
    dev = jax.devices()[0]
    stats = dev.memory_stats() if dev.platform != "cpu" else None
    if stats and stats.get("bytes_limit"):
        return int(fraction * stats["bytes_limit"]), f"{dev.device_kind} memory"
    total = 0
    try:
        with open("/proc/meminfo") as fh:
            for line in fh:
                if line.startswith("MemAvailable:"):
                    total = int(line.split()[1]) * 1024
                    break
    except OSError:
        pass
    if not total:
        total = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    return int(fraction * total), "this machine's available memory"

