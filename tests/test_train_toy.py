"""The trainer on the pure-JAX toy task: constraint satisfaction, and the cube written by the runner.

Toy task (train/toy.py): per-step reward = per-step cost = (1 + a) / 2, T = 32, d = 8, so PPO drives the
episodic cost to ~32 while the constrained algorithms (PPO-Lag, P3O, FOCOPS, PPO-PID, PPO-Saute, CRPO) must
hold it at d = 8 (a = -0.5).
"""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

jax = pytest.importorskip("jax")
pytest.importorskip("flax")
pytest.importorskip("optax")

from cube import open_cube, read_manifests  # noqa: E402
from train.config import TrainConfig  # noqa: E402
from train.evaluate import evaluate_store  # noqa: E402
from train.onpolicy.core import make_train  # noqa: E402
from train.record import check_labels, prepare_store  # noqa: E402
from train.registry import ALGOS, algorithm  # noqa: E402
from train.runner import Runner  # noqa: E402
from train.toy import TOY_BOUND, TOY_CONFIG, make_toy_env  # noqa: E402

D = TOY_BOUND
TOY = TOY_CONFIG
TOLERANCE = 0.15
"""Constrained runs must end with mean episodic cost <= (1 + TOLERANCE) d, the cost averaged over the last
half of training (the multipliers make the cost oscillate around d; over seeds 0-3 these means were
7.5-8.7 for d = 8, PPO's about 31.5)."""
ACTIVE = {"crpo": 0.1}
"""Least share of the last half's iterates in which the constraint acted (default 0.5): CRPO's cost steps
come in short bursts, so only some iterates hold one."""
SAUTE_NOTE = """PPO-Saute with the undiscounted budget (gamma_b = 1) is conservative on the toy: its observation
carries the budget but not the steps left, and a tanh policy never pays exactly zero cost, so once the budget
is gone every later step is penalised. Measured (seed 0, 400 iterates, d = 8): episodic cost 17.7 -> 0.9
after 40 iterates, 0.24 (0.03 d) over the last half (penalty -0.2 or an unclipped budget: about the same),
no step penalised after iterate ~40; with d = 16 it ends at 2.3; with d = 40 (never penalised) it is PPO
(cost 31)."""


FOCOPS_NOTE = """crax's FOCOPS loss differentiates its KL factor eta / k (losses.focops_crax_policy_loss):
while the surrogate -mean(rho A) is positive and k > eta, the gradient raises k without bound. On the toy
(seeds 0-3, 400 iterates, d = 8, this CPU) the approximate KL reached 408-1607 and the mean cost over the
last half was 13.20, 6.61, 7.36, 11.73: two of four seeds end above (1 + TOLERANCE) d, and which ones depends
on the CPU's rounding. With the factor held constant (focops.loss = "crax_stop_gradient") the KL stayed
below 0.1 and the cost ended at 7.85-8.20 in all four. So the toy asserts the constraint of FOCOPS with the
factor held constant (bench/focops_kl.py prints these); crax's own form is checked against crax on the
same batch (test_train_parity) and its runaway gradient by hand (test_losses_units)."""
FOCOPS_HELD = replace(TOY, focops=replace(TOY.focops, loss="crax_stop_gradient"))


def toy_factory(task: str, episode_length: int):
    return make_toy_env()


@pytest.fixture(scope="module")
def toy_runner(tmp_path_factory: pytest.TempPathFactory) -> Runner:
    out = tmp_path_factory.mktemp("toy") / "toy.zarr"
    prepare_store(out, TOY, ALGOS, ["toy"], [D], [0])
    return Runner(out, TOY, "toy", toy_factory)


@pytest.fixture(scope="module")
def focops_held_runner(tmp_path_factory: pytest.TempPathFactory) -> Runner:
    """FOCOPS with its KL factor held constant in the gradient (see FOCOPS_NOTE)."""
    out = tmp_path_factory.mktemp("toy_focops") / "toy.zarr"
    prepare_store(out, FOCOPS_HELD, ["focops"], ["toy"], [D], [0])
    return Runner(out, FOCOPS_HELD, "toy", toy_factory)


class _Seen:
    """Progress stub that counts the iterates reported."""

    def __init__(self) -> None:
        self.iterates = 0

    def start_run(self, key, config):
        return 0

    def advance(self, tid, steps, res, key, elapsed):
        self.iterates += 1

    def finish_run(self, tid):
        pass


def _final_cost(runner: Runner, algo: str) -> tuple[float, float]:
    seen = _Seen()
    res = runner.run(algo, D, 0, progress=seen)
    ds = open_cube(runner.out).sel(algo=algo, task="toy", bound=D, seed=0)
    cost = ds["cost"].sel(mode="train").values  # [iterate, episode]
    logs = [c[~np.isnan(c)] for c in cost]
    assert seen.iterates == len(logs) == res.iterates_done == TOY.n_iterates == 400
    assert all(log.size == TOY.num_envs for log in logs)  # one episode per env per iterate
    costs = [float(np.mean(log)) for log in logs]
    # the multiplier oscillates and touches 0 now and then (when the cost dips under d): the share of the
    # last half's iterates with an active multiplier, not its last value, says the constraint was active;
    # without a multiplier: the share with budget-penalised steps (PPO-Saute) or with cost steps (CRPO)
    active = {"crpo": ds["crpo_reward_share"].values.ravel() < 1}.get(algo, ds["multiplier"].values.ravel() > 0)
    if algo == "ppo_saute":
        # the cube holds the env's reward (= cost on the toy), not the learner's budget-shaped one
        train = ds.sel(mode="train")
        np.testing.assert_allclose(train["reward"].values, train["cost"].values, rtol=1e-5)
        # the random start overdraws the budget in about half its steps; the policy learns not to
        penalised = ds["saute_penalty_share"].values.ravel()
        assert penalised[0] > 0.3 and penalised[-50:].max() < 0.01, penalised
        assert ds["mean_step_reward"].values.ravel()[0] < 0  # the learner saw the penalties, the cube did not
        active = penalised > 0
    return float(np.mean(costs[-len(costs) // 2:])), float(np.mean(active[-len(active) // 2:]))


def test_ppo_ignores_the_constraint(toy_runner) -> None:
    cost, _ = _final_cost(toy_runner, "ppo")
    assert cost > 3 * D  # unconstrained: far above d (max possible is 32)


@pytest.mark.parametrize("algo", [a for a in ALGOS if a != "ppo"])
def test_constrained_algorithms_end_at_or_below_d(toy_runner, focops_held_runner, algo: str) -> None:
    cost, active = _final_cost(focops_held_runner if algo == "focops" else toy_runner, algo)
    assert cost <= (1 + TOLERANCE) * D, f"{algo}: mean cost over the last half {cost:.2f} > d={D}"
    if algo == "ppo_saute":  # conservative here, see SAUTE_NOTE: it ends far below d, and away from its budget
        assert 0.01 * D < cost < 0.5 * D
        return
    assert cost > 0.25 * D  # and not trivially safe by doing nothing (reward = cost here)
    assert active > ACTIVE.get(algo, 0.5), f"{algo}: constraint active in only {active:.0%} of the last half"


SMALL = TrainConfig(total_env_steps=3 * 8 * 20, episode_length=20, num_envs=8, unroll_length=4,
                    batch_size=8, num_minibatches=2, num_epochs=1, policy_hidden=(8,), value_hidden=(8,),
                    cost_value_hidden=(8,), eval_episodes=5, eval_every=2)


def train_grid(out: Path, config: TrainConfig, algos: list[str], bounds: list[float], seeds: list[int],
               progress=None) -> None:
    """Create the store of a toy grid and train its runs one by one (as `saferl train` does)."""
    check_labels(algos, ["toy"], bounds, seeds, known_tasks=("toy",))
    prepare_store(out, config, algos, ["toy"], bounds, seeds)
    runner = Runner(out, config, "toy", toy_factory)
    for a in algos:
        for b in bounds:
            for s in seeds:
                runner.run(a, b, s, progress)


def test_runner_writes_every_episode_and_paired_evals(tmp_path: Path) -> None:
    out = tmp_path / "toy.zarr"
    train_grid(out, SMALL, ["ppo", "ppo_lag"], [4.0], [0, 1])
    ds = open_cube(out)
    assert ds.sizes["iterate"] == 3 and ds.sizes["episode"] == 8  # 8 envs x 1 episode, >= 5 eval
    train = ds["cost"].sel(mode="train").load()
    assert (train.notnull().sum("episode") == 8).all()  # every env's episode at every iterate
    assert (train.fillna(0) >= 0).all()
    # evaluations at iterates 1 (eval_every=2) and 2 (final): 5 episodes each, expl and greedy
    for mode in ("expl", "greedy"):
        n = ds["cost"].sel(mode=mode).notnull().sum("episode").load()
        assert (n.sel(iterate=[1, 2]) == 5).all() and (n.sel(iterate=0) == 0).all()
    # the toy's reward equals its cost episode by episode
    np.testing.assert_allclose(ds["reward"].sel(mode="greedy", iterate=2).load(),
                               ds["cost"].sel(mode="greedy", iterate=2).load())
    mult = ds["multiplier"].load()
    assert mult.sel(algo="ppo").isnull().all() and mult.sel(algo="ppo_lag").notnull().all()
    steps = ds["env_steps"].sel(algo="ppo", seed=0).values.ravel()
    # updates of 8 steps per env; episodes of 20 steps end during updates 3, 5 and 8 (steps 20, 40, 60)
    np.testing.assert_array_equal(steps, [3 * 64, 5 * 64, 8 * 64])
    np.testing.assert_array_equal(ds["n_updates"].sel(algo="ppo", seed=0).values.ravel(), [3, 2, 3])
    rows = read_manifests(out)
    assert {r["status"] for r in rows} == {"complete"}
    for r in rows:
        assert r["iterates_done"] == 3 and r["config"]["episode_length"] == 20 and "versions" in r
        assert r["eval_iterates"] == [1, 2]

    before = ds["cost"].sel(mode="greedy", iterate=1).load().copy()
    ds.close()
    # re-evaluating stored checkpoints reproduces the same paired rollouts
    n = evaluate_store(out, 1, env_factory=toy_factory, report=lambda s: None)
    assert n == 4
    again = open_cube(out)["cost"].sel(mode="greedy", iterate=1).load()
    np.testing.assert_allclose(again, before, rtol=1e-5)


def test_eval_initial_states_identical_across_algorithms(tmp_path: Path) -> None:
    from train.acting import eval_key

    tr = make_train(SMALL, make_toy_env())
    st_a = tr.init(jax.random.PRNGKey(0), algorithm("ppo").id, 0.0, 0.2)
    st_b = tr.init(jax.random.PRNGKey(0), algorithm("focops").id, 0.1, 0.2)
    # identical parameters -> identical rollouts only if the initial states (and noise) are identical
    ev_a = tr.evaluate(st_a.params, st_a.normalizer, eval_key(0, 3))
    ev_b = tr.evaluate(st_b.params, st_b.normalizer, eval_key(0, 3))
    np.testing.assert_array_equal(ev_a.greedy_cost, ev_b.greedy_cost)
    np.testing.assert_array_equal(ev_a.expl_cost, ev_b.expl_cost)
    assert not np.array_equal(ev_a.expl_cost, tr.evaluate(st_a.params, st_a.normalizer, eval_key(0, 4)).expl_cost)


class _Interrupt:
    """Progress stub that presses Ctrl-C after the second iterate."""

    def start_run(self, key, config):
        return 0

    def advance(self, tid, steps, res, key, elapsed):
        if res.iterates_done == 2:
            raise KeyboardInterrupt

    def finish_run(self, tid):
        pass


def test_ctrl_c_leaves_valid_store_with_partial_run(tmp_path: Path) -> None:
    out = tmp_path / "int.zarr"
    with pytest.raises(KeyboardInterrupt):
        train_grid(out, SMALL, ["ppo"], [4.0], [0], progress=_Interrupt())
    ds = open_cube(out)
    (row,) = read_manifests(out)
    assert row["status"] == "partial" and row["iterates_done"] == 2 and "interrupted" in row["notes"]
    n = ds["cost"].sel(mode="train").notnull().sum("episode").values.ravel()
    assert list(n) == [8, 8, 0]
    assert json.loads(json.dumps(row["config"]))["num_envs"] == 8
