"""FOCOPS's KL factor on the toy task: crax's differentiated factor against the factor held constant.

    python bench/focops_kl.py --seeds 0,1,2,3

Trains FOCOPS with `focops.loss = "crax"` and `"crax_stop_gradient"` on the toy (`train.toy.TOY_CONFIG`,
400 iterates, d = 8) per seed, as tests/test_train_toy.py does, and prints per run the mean episodic
training cost over the last half of the iterates, the largest `approx_kl` of any iterate and the first
iterate whose `approx_kl` exceeds 1. About 70 s per run on one CPU core (docs/training.md, "FOCOPS's KL factor").
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from dataclasses import replace
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from cube import open_cube  # noqa: E402
from train.record import prepare_store  # noqa: E402
from train.runner import Runner  # noqa: E402
from train.toy import TOY_BOUND, TOY_CONFIG, make_toy_env  # noqa: E402

LOSSES = ("crax", "crax_stop_gradient")


def run_seeds(loss: str, seeds: list[int], folder: Path) -> None:
    """Train FOCOPS with `loss` for every seed and print one line per run."""
    config = replace(TOY_CONFIG, focops=replace(TOY_CONFIG.focops, loss=loss))
    out = folder / f"{loss}.zarr"
    prepare_store(out, config, ["focops"], ["toy"], [TOY_BOUND], seeds)
    runner = Runner(out, config, "toy", lambda task, episode_length: make_toy_env())
    for seed in seeds:
        runner.run("focops", TOY_BOUND, seed)
        run = open_cube(out).sel(algo="focops", task="toy", bound=TOY_BOUND, seed=seed)
        cost = np.nanmean(run["cost"].sel(mode="train").values, axis=1)  # [iterate]: mean episodic cost
        kl = run["approx_kl"].values.ravel()  # [iterate]
        first = int(np.argmax(kl > 1)) if (kl > 1).any() else "never"
        print(f"{loss:<20} seed {seed}  cost over the last half {np.mean(cost[len(cost) // 2:]):6.2f} "
              f"(d = {TOY_BOUND:g})  largest approx_kl {np.nanmax(kl):9.3f}  first above 1: {first}", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", default="0,1,2,3", help="comma-separated seeds (default 0,1,2,3)")
    parser.add_argument("--losses", default=",".join(LOSSES), help=f"focops.loss values (default {','.join(LOSSES)})")
    args = parser.parse_args()
    seeds = [int(s) for s in args.seeds.split(",")]
    with tempfile.TemporaryDirectory() as folder:
        for loss in args.losses.split(","):
            run_seeds(loss, seeds, Path(folder))


if __name__ == "__main__":
    main()
