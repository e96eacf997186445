"""`saferl demo PATH`: write a synthetic cube shaped like the paper's experiment (labelled synthetic)."""

from __future__ import annotations

import argparse

from cube.cli.console import progress_bar
from cube.selection import positive_int


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("demo", help="write a synthetic demo cube shaped like the paper's experiment")
    p.add_argument("path", help="where to write the Zarr store")
    p.add_argument("--seed", type=int, default=0, help="random seed of the synthetic data (default 0)")
    p.add_argument("--seeds", type=positive_int, default=10, help="training seeds per condition (default 10)")
    p.add_argument("--iterates", type=positive_int, default=60, help="policy iterates (default 60)")
    p.add_argument("--episodes", type=positive_int, default=256, help="training episodes per iterate (default 256)")
    p.add_argument("--eval-episodes", type=positive_int, default=100, help="final evaluation episodes (default 100)")
    p.add_argument("--force", action="store_true", help="replace an existing store at PATH")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from cube.io.demo import make_demo_cube
    from cube.store.fs import staged_store

    # Written beside the target and swapped in only once complete (see `staged_store`).
    with staged_store(args.path, force=args.force) as staging, progress_bar() as bar:
        task = bar.add_task("writing synthetic cube", total=None)

        def report(done: int, total: int) -> None:
            bar.update(task, completed=done, total=total)

        make_demo_cube(
            staging,
            seed=args.seed,
            n_seeds=args.seeds,
            n_iterates=args.iterates,
            n_train_episodes=args.episodes,
            n_eval_episodes=args.eval_episodes,
            progress=report,
        )
    print(f"wrote SYNTHETIC demo cube to {args.path}")
    return 0
