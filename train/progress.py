"""The display hooks training reports to (`TrainProgress`), and what it reports a run or a group as.

`train.runner.Runner` calls `start_run` before a group's first iterate, `advance` after each iterate and
`finish_run` at the end; `train.cli.SweepProgress` (rich) implements them, tests count or interrupt with them.
No jax here.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from cube.schema import RunKey
    from train.config import TrainConfig
    from train.runner import GroupLabel


class RunView(Protocol):
    """What a display reads of a run or a group of runs (a `train.runner.RunResult`, a `GroupLabel`)."""

    env_steps: float
    """Environment steps so far (the group's sum)."""
    train_s: float
    """Seconds of training after the first iterate (compile excluded)."""
    iterates_done: int
    final_cost: float
    """Mean episodic cost of the last iterate's training episodes."""


class TrainProgress(Protocol):
    """The live display's hooks (the runner calls them in this order; a hook may raise KeyboardInterrupt)."""

    def start_run(self, key: RunKey | GroupLabel, config: TrainConfig) -> int:
        """A run (a RunKey) or a group (a `GroupLabel`) starts: returns the handle `advance` gets back."""
        ...

    def advance(self, tid: int, steps: int, res: RunView, key: RunKey | GroupLabel, elapsed: float) -> None:
        """An iterate of `steps` env steps ended; `res`: the run's (group's) totals; `elapsed`: seconds since
        the run started, compile included."""
        ...

    def finish_run(self, tid: int) -> None:
        """The run (group) is done."""
        ...
