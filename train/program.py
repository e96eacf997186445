"""The compiled group program both families train through, and what each family supplies to it.

A group is runs of one task trained together: one run with the plain compiled functions, several as one
vmapped program (each run with its own RNG stream, multiplier and state). `GroupProgram` owns what is the same
for every family (jit and vmap, the one host transfer per iterate, the paired evaluation keys, taking a run
out of the group state and putting runs together, a leading run axis on everything that comes back); a
`TrainerFamily` (`train.onpolicy.family.ONPOLICY_FAMILY`, `train.offpolicy.family.OFFPOLICY_FAMILY`) supplies its
trainer and the few things that differ: the runs' initial arguments, the checkpoint payload, what is recorded
per iterate, and (on-policy) how older resume points load. `trainer_family(name)` finds one by name.

No jax at import; the program imports it when built.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Sequence
from typing import TYPE_CHECKING, Protocol, TypeVar

import numpy as np

from train.algorithm import OFFPOLICY, ONPOLICY
from train.config import TrainConfig
from train.envs import EnvFns, PyTree

if TYPE_CHECKING:
    import jax

    from cube.schema import RunKey
    from train.nets import Normalizer
    from train.rollout import EpisodeBuffer, EvalOut

Flags = tuple[Hashable, ...]
"""What a family's programs differ by for a set of algorithms (e.g. cost critic or not, the env adapter)."""
Payload = dict[str, PyTree]
"""An evaluation checkpoint: the policy, the critics, the normaliser's arrays, the multiplier."""
T = TypeVar("T")


class RunState(Protocol):
    """What the group program reads of a family's training state (`TrainState`, `OffPolicyState`; a pytree,
    with a leading run axis in a vmapped group)."""

    @property
    def params(self) -> PyTree: ...
    @property
    def normalizer(self) -> Normalizer: ...
    @property
    def multiplier(self) -> jax.Array: ...
    @property
    def d_step(self) -> jax.Array: ...


class IterateOutput(Protocol):
    """What the runner reads of a family's iterate output (`IterateOut`, `OffPolicyIterateOut`)."""

    @property
    def episodes(self) -> EpisodeBuffer: ...
    @property
    def n_updates(self) -> jax.Array: ...
    @property
    def metrics(self) -> dict[str, jax.Array]: ...


class FamilyTrainer(Protocol):
    """The pure functions a family's `make_*_train` builds (jittable, vmappable over runs)."""

    init: Callable[..., RunState]
    iterate: Callable[[RunState], tuple[RunState, IterateOutput]]
    evaluate: Callable[..., EvalOut]
    template: Callable[[], Payload]


class TrainerFamily(Protocol):
    """A family of algorithms as the group program and `saferl evaluate` see it."""

    name: str

    def flags(self, algos: Sequence[str]) -> Flags:
        """What the program of runs of `algos` is built with (one-line CubeError for algorithms that cannot
        share a program)."""
        ...

    def build(self, config: TrainConfig, env: EnvFns, flags: Flags, axis_name: str | None = None, n_runs: int = 1,
              for_evaluation: bool = False) -> FamilyTrainer:
        """The family's trainer for a group of `n_runs` (`axis_name`: the vmap axis of a group; `for_evaluation`:
        only `evaluate` and `template` will be called, nothing needs to fit in memory)."""
        ...

    def init_args(self, config: TrainConfig, keys: Sequence[RunKey]) -> tuple[jax.Array, ...]:
        """The trainer's `init` arguments of each run, stacked `[runs, ...]` (seed keys, algorithm ids, ...)."""
        ...

    def payload(self, one: RunState) -> Payload:
        """The evaluation checkpoint of one run's state."""
        ...

    def params(self, payload: Payload) -> PyTree:
        """The parameters `evaluate` takes, from a checkpoint payload."""
        ...

    def record(self, config: TrainConfig, algo: str, out: IterateOutput,
               mult: float) -> tuple[int, dict[str, float]]:
        """(env steps, per-iterate variables but env_steps and dropped_episodes) of one run's host iterate output
        (`out` without run axis, `mult` its multiplier after the iterate)."""
        ...

    def resume_templates(self, template: RunState) -> list[PyTree]:
        """Other structures a resume point of a run like `template` may have been written in (by earlier saferl
        versions), newest first."""
        ...

    def upgrade(self, loaded: PyTree, fresh: RunState) -> RunState:
        """A state loaded into one of `resume_templates`, completed from `fresh` (the run's initial state)."""
        ...


def trainer_family(name: str) -> TrainerFamily:
    """The family called `name` (`train.algorithm.FAMILIES`)."""
    from train.offpolicy.family import OFFPOLICY_FAMILY
    from train.onpolicy.family import ONPOLICY_FAMILY

    return {ONPOLICY: ONPOLICY_FAMILY, OFFPOLICY: OFFPOLICY_FAMILY}[name]


class GroupProgram:
    """The compiled init / iterate / evaluate of a group of runs of one family; what comes back to the host has
    a leading run axis whatever the group's size (see the module docstring)."""

    def __init__(self, family: TrainerFamily, config: TrainConfig, env: EnvFns, flags: Flags, n_runs: int = 1) -> None:
        import jax

        self.family, self.config, self.flags, self.batched = family, config, flags, n_runs > 1
        axis = "runs" if self.batched else None
        self.trainer = t = family.build(config, env, flags, axis_name=axis, n_runs=n_runs)
        if self.batched:
            self._init = jax.jit(jax.vmap(t.init))
            self._iterate = jax.jit(jax.vmap(t.iterate, axis_name="runs"))
            self._evaluate = jax.jit(jax.vmap(t.evaluate))
        else:
            self._init, self._iterate, self._evaluate = jax.jit(t.init), jax.jit(t.iterate), jax.jit(t.evaluate)

    def init(self, keys: Sequence[RunKey]) -> RunState:
        """The initial state of the runs `keys`, in this order."""
        args = self.family.init_args(self.config, keys)
        return self._init(*args) if self.batched else self._init(*(a[0] for a in args))

    def iterate(self, state: RunState) -> tuple[RunState, IterateOutput, np.ndarray]:
        """One iterate: (state, host copy of the output, host multipliers `[runs]`); the one transfer of it."""
        import jax

        state, out = self._iterate(state)
        out, mult = jax.device_get((out, state.multiplier))
        return state, self._runs_axis(out), self._runs_axis(mult)

    def evaluate(self, state: RunState, seeds: Sequence[int], iterate: int) -> EvalOut:
        """Paired expl/greedy evaluation episodes of every run (host arrays `[runs, N]`; keys `eval_key`)."""
        import jax
        import jax.numpy as jnp

        from train.acting import eval_key

        keys = [eval_key(s, iterate) for s in seeds]
        key = jnp.stack(keys) if self.batched else keys[0]
        return self._runs_axis(jax.device_get(self._evaluate(state.params, state.normalizer, key, state.d_step)))

    def member(self, state: RunState, i: int) -> RunState:
        """The state of run i of the group."""
        import jax

        return jax.tree_util.tree_map(lambda x: x[i], state) if self.batched else state

    def stack(self, states: Sequence[RunState]) -> RunState:
        """The group state of the runs' states."""
        import jax
        import jax.numpy as jnp

        return jax.tree_util.tree_map(lambda *xs: jnp.stack(xs), *states) if self.batched else states[0]

    def payload(self, one: RunState) -> Payload:
        """The evaluation checkpoint of one run's state."""
        return self.family.payload(one)

    def record(self, algo: str, out: IterateOutput, mult: float) -> tuple[int, dict[str, float]]:
        """(env steps, per-iterate variables) of one run's host iterate output (`TrainerFamily.record`)."""
        return self.family.record(self.config, algo, out, mult)

    def _runs_axis(self, tree: T) -> T:
        import jax

        return tree if self.batched else jax.tree_util.tree_map(lambda x: np.asarray(x)[None], tree)
