"""Record every finished episode of a vectorised safe env through a `cube.Recorder`, as a wrapper.

    import cube
    from cube.io.gym import RecordEpisodes

    with cube.Recorder("mine.zarr", algo="my_lag", task="SafetyPointGoal1", bound=25.0, seed=0) as rec:
        env = RecordEpisodes(make_vector_env(), rec)      # any Gymnasium-style vector env with a cost
        obs, info = env.reset(seed=0)
        for iterate in range(n_iterates):
            env.iterate = iterate                          # episodes that finish now count for this iterate
            for _ in range(steps_per_iterate):
                obs, reward, terminated, truncated, info = env.step(policy(obs))   # as the env returns it
            ...                                            # update the policy
            rec.iterate_vars(iterate, multiplier=lam, env_steps=steps)

The wrapped env's `step` may return Safety-Gymnasium's 6-tuple (obs, reward, cost, terminated, truncated,
info) or Gymnasium's 5-tuple with the per-step cost in `info["cost"]` (`cost_key`); the wrapper returns
exactly what the env returned. Per env, rewards and costs are summed over each episode and the episode is
recorded when terminated or truncated (`Recorder.step`): an episode still running when the iterate
changes counts for the iterate in which it finishes, and one unfinished when the recorder closes is
dropped. With Gymnasium's next-step autoreset, the reset step after an episode adds reward 0 and cost 0
(or whatever the env reports) to the next episode. Gymnasium is not imported: the wrapper only calls
`reset`/`step` and passes every other attribute through to the env.
"""

from __future__ import annotations

from typing import Any

from cube.errors import CubeError
from cube.store.recorder import Recorder


class RecordEpisodes:
    """A vectorised safe env whose finished episodes go into `recorder` (mode `mode`, iterate `iterate`).

    env: anything with Gymnasium's vector-env `reset(**kwargs)` and `step(actions)`; one env without a
    batch dimension works too (scalars). cost_key: where a 5-tuple step puts the per-step cost in `info`.
    """

    def __init__(self, env: Any, recorder: Recorder, *, mode: str = "train", cost_key: str = "cost",
                 iterate: int = 0) -> None:
        self.env = env
        self.recorder = recorder
        self.mode = mode
        self.cost_key = cost_key
        self.iterate = iterate

    def reset(self, **kwargs: Any) -> Any:
        """The env's reset (episodes running before it are dropped: a reset ends them unfinished)."""
        self.recorder.drop_running(self.mode)
        return self.env.reset(**kwargs)

    def step(self, actions: Any) -> tuple[Any, ...]:
        """The env's step, returned as is; the step's rewards and costs are added to the running episodes
        and those that end here are recorded."""
        out = self.env.step(actions)
        if len(out) == 6:
            _, reward, cost, terminated, truncated, _ = out
        elif len(out) == 5:
            _, reward, terminated, truncated, info = out
            if not isinstance(info, dict) or self.cost_key not in info:
                raise CubeError(f"the env's step returned no cost: neither Safety-Gymnasium's 6-tuple nor "
                                f"info[{self.cost_key!r}] (pass cost_key= where the env puts it)")
            cost = info[self.cost_key]
        else:
            raise CubeError(f"the env's step returned {len(out)} values; expected Gymnasium's 5 (cost in info) "
                            "or Safety-Gymnasium's 6")
        self.recorder.step(reward, cost, terminated | truncated, iterate=self.iterate, mode=self.mode)
        return out

    def __getattr__(self, name: str) -> Any:
        return getattr(self.env, name)
