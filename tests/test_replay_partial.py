"""The replay buffer sampled while partly filled (issue 36): only the rows written so far, each about as often,
both before the ring wraps and with its write position past the start. Before, the replay test sampled only
a full buffer, where drawing from every slot and drawing from the valid ones are the same."""

from __future__ import annotations

import numpy as np
import pytest

jax = pytest.importorskip("jax")
jnp = jax.numpy

from train.offpolicy.replay import replay_init, replay_insert, replay_ordered, replay_sample  # noqa: E402


def _rows(first: int, n: int) -> jax.Array:
    """Rows [i, -i] for i = first .. first + n - 1 (every row nonzero: an empty slot reads 0)."""
    ids = np.arange(first, first + n, dtype=np.float32)
    return jnp.asarray(np.stack([ids, -ids], axis=1))


@pytest.mark.parametrize("inserts", [(3,), (2, 1), (3, 2)])
def test_a_partly_filled_buffer_samples_only_its_rows_uniformly(inserts: tuple[int, ...]) -> None:
    state = replay_init(8, 2, jax.random.PRNGKey(3))
    first = 1
    for n in inserts:
        state = replay_insert(state, _rows(first, n))
        first += n
    written = list(range(1, first))
    assert int(state.size) == len(written) < 8
    np.testing.assert_array_equal(replay_ordered(state)[:, 0], written)
    state, sample = replay_sample(state, 4000)
    ids, counts = np.unique(np.asarray(sample[:, 0]), return_counts=True)
    assert ids.tolist() == written  # never an empty slot (0), never a row not written
    expected = 4000 / len(written)
    assert counts.min() > 0.85 * expected and counts.max() < 1.15 * expected


def test_a_wrapped_buffer_keeps_its_newest_rows_in_age_order() -> None:
    """After the ring wraps the buffer stays full; its oldest row is the one after the write position."""
    state = replay_init(4, 2, jax.random.PRNGKey(5))
    state = replay_insert(state, _rows(1, 3))
    state = replay_insert(state, _rows(4, 3))  # 6 rows into 4 slots: rows 3..6 kept
    assert (int(state.size), int(state.position)) == (4, 2)
    np.testing.assert_array_equal(replay_ordered(state)[:, 0], [3, 4, 5, 6])
    _, sample = replay_sample(state, 2000)
    assert set(np.asarray(sample[:, 0]).tolist()) == {3.0, 4.0, 5.0, 6.0}
