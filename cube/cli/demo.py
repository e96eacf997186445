"""`saferl demo PATH`: write a synthetic cube shaped like the paper's experiment (labelled synthetic)."""

from __future__ import annotations

import argparse

from cube.cli.console import progress_bar
from cube.errors import CubeError
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


def check_demo_size(args: argparse.Namespace) -> None:
    """One line before any work for a demo no machine should write: too many iterates or episode slots for
    a store (`cube.store.layout` limits), or more memory than available (a run's arrays are built whole)."""
    from cube.compute import check_memory
    from cube.store.layout import MAX_CHUNK_BYTES, MAX_EPISODE_SLOTS, MAX_ITERATES

    if not 0 <= args.seed < 2**63:
        raise CubeError(f"--seed must be a whole number from 0 to 2**63 - 1 (the synthetic data's random seed), "
                        f"got {args.seed}")
    slots = max(args.episodes, args.eval_episodes)
    for flag, value, limit in (("--iterates", args.iterates, MAX_ITERATES), ("--episodes", args.episodes,
                               MAX_EPISODE_SLOTS), ("--eval-episodes", args.eval_episodes, MAX_EPISODE_SLOTS)):
        if value > limit:
            raise CubeError(f"{flag} {value:,} is beyond the limit of {limit:,}; ask for fewer")
    run_bytes = args.iterates * slots * 3 * 4  # one variable of one run, float32 (iterate, episode, mode)
    if run_bytes > MAX_CHUNK_BYTES:
        raise CubeError(f"--iterates {args.iterates:,} x --episodes {slots:,} make one run {run_bytes / 2**20:,.0f} "
                        f"MiB, beyond the limit of {MAX_CHUNK_BYTES / 2**20:,.0f} MiB per run; ask for fewer")
    # reward and cost of a run, float64 samples of its training episodes, the written chunk: ~6 copies
    check_memory(6 * run_bytes + 4 * args.iterates * args.episodes * 8,
                 f"--iterates {args.iterates:,} with --episodes {slots:,}", "ask for fewer iterates or episodes")


def run(args: argparse.Namespace) -> int:
    from cube.io.demo import make_demo_cube
    from cube.store.fs import staged_store
    from cube.store.location import refuse_url

    refuse_url(args.path, "write a demo cube at")
    check_demo_size(args)

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
