"""Size and write/read time of an off-policy resume point at crax's sizes (2048 envs, T 2000, replay 1e6).

For each Point task the whole `OffPolicyState` is traced (`jax.eval_shape`: nothing is allocated or compiled)
and its bytes are split into the replay buffer, the env states and the rest (networks, targets, Adam moments,
normaliser, keys). Then one task's state is filled (random replay rows) and saved and loaded through the
runner's own `train.checkpoint.save_resume` / `load_resume`, timed, into a temporary folder (`--dir` to time
another file system, e.g. the cluster's scratch).

    .venv/bin/python bench/offpolicy_resume.py                 # all four tasks, timing on goal
    .venv/bin/python bench/offpolicy_resume.py --time-task push --dir /scratch/me
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def nbytes(tree: Any) -> int:
    import jax

    return int(sum(np.prod(x.shape) * np.dtype(x.dtype).itemsize for x in jax.tree_util.tree_leaves(tree)))


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--tasks", default="goal,circle,push,button")
    p.add_argument("--time-task", default="goal", help="task whose resume point is written and read ('' skips)")
    p.add_argument("--dir", default=None, help="folder to write into (default: a temporary folder)")
    a = p.parse_args()

    import jax

    from train.envs import make_crax_env
    from train.offpolicy import OffPolicyConfig
    from train.offpolicy.config import fmt_bytes, replay_bytes
    from train.offpolicy.core import make_offpolicy_train

    cfg = OffPolicyConfig()
    print(f"crax CLI sizes: {cfg.num_envs} envs, T {cfg.episode_length}, replay {cfg.max_replay_size:,}, "
          f"networks {list(cfg.hidden)}; jax {jax.__version__} on {jax.devices()[0].device_kind}")
    print(f"{'task':<8} {'obs':>4} {'replay':>10} {'env states':>11} {'rest':>9} {'resume point':>13}")
    shapes_of: dict[str, Any] = {}
    for task in a.tasks.split(","):
        env = make_crax_env(task, cfg.episode_length)
        trainer = make_offpolicy_train(cfg, env, memory=(2**60, "not checked here"))
        shapes = jax.eval_shape(trainer.init, jax.random.PRNGKey(0), 1, 0.0, 25.0 / cfg.episode_length)
        shapes_of[task] = shapes
        total, rb, eb = nbytes(shapes), nbytes(shapes.replay), nbytes(shapes.rollout)
        assert nbytes(shapes.replay.data) == replay_bytes(cfg, env.obs_size, env.action_size)
        print(f"{task:<8} {env.obs_size:>4} {fmt_bytes(rb):>10} {fmt_bytes(eb):>11} {fmt_bytes(total - rb - eb):>9} "
              f"{fmt_bytes(total):>13}", flush=True)
    if not a.time_task:
        return 0
    from cube.schema import RunKey
    from train import checkpoint

    shapes = shapes_of[a.time_task]
    rng = np.random.default_rng(0)
    state = jax.tree_util.tree_map(lambda s: np.zeros(s.shape, s.dtype), shapes)
    state = state._replace(replay=state.replay._replace(
        data=rng.standard_normal(shapes.replay.data.shape, dtype=np.float32)))
    key = RunKey("sac_lag", a.time_task, 25.0, 0)
    with tempfile.TemporaryDirectory(dir=a.dir) as tmp:
        for rep in range(2):
            t0 = time.perf_counter()
            checkpoint.save_resume(tmp, key, rep, state, 0.0)
            t_save = time.perf_counter() - t0
            size = (checkpoint.run_dir(tmp, key) / f"resume_{rep}.msgpack").stat().st_size
            t0 = time.perf_counter()
            found = checkpoint.load_resume(tmp, key, shapes, rep)
            t_load = time.perf_counter() - t0
            assert found is not None and np.array_equal(np.asarray(found[1].replay.data), state.replay.data)
            print(f"{a.time_task}: resume point {fmt_bytes(size)} on disk; save_resume {t_save:.1f} s, load_resume "
                  f"{t_load:.1f} s ({size / 2**20 / t_save:.0f} / {size / 2**20 / t_load:.0f} MiB/s)", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
