"""The task matrix: every crax-bench safety task at every level builds, is at its level, and steps.

Building all 48 (16 tasks x levels 1-3) takes about 20 s on 2 cores and runs in CI, with the checks
that the level took effect (crax's two pitfalls: `safe_lift_humanoid` takes its level only as `difficulty=`,
`safe_velocity_*` only as `velocity_threshold=`; the test also shows that crax's `get_environment(name,
level=k)` really builds level 1 there). Stepping compiles a reset and a step per task (15-60 s each on a CPU):
CI steps two representatives (a Point task at level 2 on MJX, a velocity task at level 3 on crax's default
generalized backend); the other 46 are marked slow and run only with SAFERL_TASK_MATRIX=1 (about an hour on
2 cores).
`bench/task_matrix.py` does the same for all of them and prints compile and step times.
"""

from __future__ import annotations

import contextlib
import io
import os

import numpy as np
import pytest

pytestmark = pytest.mark.crax
pytest.importorskip("crax")
jax = pytest.importorskip("jax")
import jax.numpy as jnp  # noqa: E402

from train.envs import crax_environment, import_crax, make_crax_env  # noqa: E402
from train.tasks import TASK_SPECS, task_spec  # noqa: E402

CI_STEPPED = ("circle_l2", "velocity_hopper_l3")
"""The tasks CI steps; the rest need SAFERL_TASK_MATRIX=1."""
ALL = os.environ.get("SAFERL_TASK_MATRIX") == "1"


@pytest.fixture(scope="module", autouse=True)
def jax_cache() -> None:
    """The persistent compile cache `saferl train` uses (a rerun reuses the compiles)."""
    from train.sweep_run import setup_jax

    setup_jax()


def _level_facts(env) -> dict:  # noqa: ANN001
    base = env.unwrapped
    facts = {}
    for name in ("difficulty", "_velocity_threshold", "_max_height", "_restricted_feet", "_max_gap"):
        if hasattr(base, name):
            value = getattr(base, name)
            facts[name] = list(value) if isinstance(value, list | tuple) else value
    return facts


def test_every_task_and_level_builds_at_its_level() -> None:
    from crax.envs.safe_velocity import get_threshold_for_level

    registry = import_crax()._envs
    facts = {}
    for label, spec in TASK_SPECS.items():
        env = crax_environment(label, 64)  # (its observation_size traces a reset: 1-80 s, left to the steps)
        assert type(env.unwrapped) is registry[spec.env], label  # crax's class of that task
        facts[label] = _level_facts(env)
        if spec.family.level_via == "difficulty":
            assert facts[label]["difficulty"] == spec.level, label
        if spec.velocity_agent:
            want = get_threshold_for_level(spec.velocity_agent, spec.level)
            assert facts[label]["_velocity_threshold"] == pytest.approx(want), label
    assert [facts[f"height_humanoid_l{k}"]["_max_height"] for k in (1, 2, 3)] == [1.2, 1.1, 1.0]
    assert [len(facts[f"lift_ant_l{k}"]["_restricted_feet"]) for k in (1, 2, 3)] == [1, 2, 3]
    assert [len(facts[f"lift_spider_l{k}"]["_restricted_feet"]) for k in (1, 2, 3)] == [2, 3, 4]
    # velocity levels scale the level-1 threshold by 1, 0.75, 0.5
    v = [facts[f"velocity_swimmer_l{k}"]["_velocity_threshold"] for k in (1, 2, 3)]
    np.testing.assert_allclose(np.array(v) / v[0], [1.0, 0.75, 0.5])
    # circle gets a square boundary and hazards from level 2 on: a larger observation
    sizes = [int(crax_environment(t, 64).observation_size) for t in ("circle", "circle_l2")]
    assert sizes[1] > sizes[0]


def test_crax_level_pitfalls_are_real() -> None:
    """crax's own `get_environment(name, level=k)` builds level 1 of these two (and says so on stdout); the
    path `saferl train` takes does not."""
    envs = import_crax()
    for name, fact, label in (("safe_velocity_hopper", "_velocity_threshold", "velocity_hopper_l3"),
                              ("safe_lift_humanoid", "difficulty", "lift_humanoid_l3")):
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            naive = envs.get_environment(name, level=3)
        assert "Warning" in out.getvalue() and "task mapping" in out.getvalue()
        level1 = _level_facts(crax_environment(label.replace("_l3", "_l1"), 64))[fact]
        ours = _level_facts(crax_environment(label, 64))[fact]
        assert _level_facts(naive)[fact] == level1 != ours, (name, level1, ours)


def _step_task(label: str, n: int = 2, steps: int = 3) -> None:
    fns = make_crax_env(label, 64)
    reset = jax.jit(jax.vmap(fns.reset))
    step = jax.jit(jax.vmap(fns.step))
    state = reset(jax.random.split(jax.random.PRNGKey(0), n))
    rng = np.random.default_rng(0)
    for _ in range(steps):
        action = jnp.asarray(rng.uniform(-1, 1, (n, fns.action_size)), jnp.float32)
        state = step(state, action)
        obs, reward, cost, done = jax.vmap(fns.observe)(state)
        assert obs.shape == (n, fns.obs_size) and np.isfinite(np.asarray(obs)).all(), label
        assert np.isfinite(np.asarray(reward)).all() and (np.asarray(cost) >= 0).all(), label
        assert set(np.unique(np.asarray(done))) <= {0.0, 1.0}, label
    assert fns.name == task_spec(label).env


@pytest.mark.parametrize("label", CI_STEPPED)
def test_representative_tasks_step(label: str) -> None:
    _step_task(label)


@pytest.mark.slow
@pytest.mark.skipif(not ALL, reason="set SAFERL_TASK_MATRIX=1 to step all 48 tasks (about an hour on 2 cores)")
@pytest.mark.parametrize("label", [t for t in TASK_SPECS if t not in CI_STEPPED])
def test_every_task_steps(label: str) -> None:
    _step_task(label)


@pytest.mark.parametrize("label", ["velocity_swimmer_l1", "lift_humanoid_l3"])
def test_crax_step_bugs_are_mended(label: str) -> None:
    """Two crax-bench bugs that stopped these tasks at their first scanned step, mended in train.envs: the
    swimmer's fluid model called jnp.clip(a_min=...), which the installed jax rejects; lift_humanoid level 3
    adds `airtime_reward` to metrics and info in step only, so a scan's carry changed structure."""
    fns = make_crax_env(label, episode_length=20)
    step, observe = jax.vmap(fns.step), jax.vmap(fns.observe)

    def steps(state, keys):
        def one(s, key):
            s = step(s, jax.random.uniform(key, (2, fns.action_size), minval=-1.0, maxval=1.0))
            return s, observe(s)[1:3]
        return jax.lax.scan(one, state, keys)

    state = jax.vmap(fns.reset)(jax.random.split(jax.random.PRNGKey(0), 2))
    _, (reward, cost) = jax.jit(steps)(state, jax.random.split(jax.random.PRNGKey(1), 3))
    assert reward.shape == (3, 2) and np.isfinite(np.asarray(reward)).all()
    assert (np.asarray(cost) >= 0).all()
