"""Does the smoke preset's bound bind? Trains `saferl train --preset smoke --algos ppo_lag` (crax's MJX task;
minutes of compile on a CPU) beside the same runs at other bounds, and prints per bound and iterate the
training cost and reward per episode and PPO-Lag's lambda.

    .venv/bin/python bench/smoke_binds.py [--bounds 0.25,0.5,1,2] [--seeds 0] [--out bench/out/smoke_binds.zarr]

Exit 1 when, at the preset's own bound, lambda is 0 at every iterate of some seed (the bound never binds) or
every training episode earned exactly 0 reward (a sparse reward the smoke episodes never reach).
Measured 2026-11-27 on a 2-core CPU, seed 0 (one vmapped program of the three bounds, 411 s with compile):

    d      cost per episode (it 0, 1, 2)   lambda (it 0, 1, 2)
    0.25   1.19  0.57  0.38                0.088  0.118  0.130
    0.5    1.19  0.53  0.41                0.064  0.067  0.059
    1      1.19  0.60  0.27                0.025  0      0
    reward per episode (it 0, 1, 2): -0.79 -0.35 -0.50 (circle's dense reward: never identically 0)
"""

from __future__ import annotations

import argparse
import shutil
import sys
from pathlib import Path

import numpy as np

from cube.cli.entry import main as saferl
from cube.store.read import open_cube
from train.sweep import PRESETS, SMOKE_BOUND


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--bounds", default=f"{SMOKE_BOUND:g},0.5,1,2")
    ap.add_argument("--seeds", default="0")
    ap.add_argument("--out", default="bench/out/smoke_binds.zarr")
    args = ap.parse_args()
    out = Path(args.out)
    if out.exists():
        shutil.rmtree(out)
    (task,) = PRESETS["smoke"]["tasks"]
    rc = saferl(["train", "--preset", "smoke", "--algos", "ppo_lag", "--bounds", args.bounds, "--seeds", args.seeds,
                 "--out", str(out), "--no-progress"])
    if rc:
        return rc
    ds = open_cube(out).sel(algo="ppo_lag", task=task, mode="train")
    ok = True
    print(f"{'d':>6}  {'seed':>4}  cost per episode (per iterate)   reward per episode   lambda")
    for d in ds["bound"].values:
        for seed in ds["seed"].values:
            run = ds.sel(bound=d, seed=seed)
            cost = np.nanmean(run["cost"].values, axis=-1)
            reward = run["reward"].values
            lam = run["multiplier"].values
            print(f"{d:6g}  {seed:4d}  {' '.join(f'{c:5.2f}' for c in cost):30s}  "
                  f"{' '.join(f'{r:5.2f}' for r in np.nanmean(reward, axis=-1)):19s}  "
                  f"{' '.join(f'{x:.3f}' for x in lam)}")
            if np.isclose(d, SMOKE_BOUND):
                ok &= bool((lam > 0).any()) and bool((np.nan_to_num(reward) != 0).any())
    print(f"smoke bound d = {SMOKE_BOUND:g} on {task}: " + ("binds (lambda moves), reward dense" if ok else
                                                             "DOES NOT BIND or the reward is all 0"))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
