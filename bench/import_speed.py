"""Time and peak memory of `saferl import`: episodes (a 10-million-row Parquet table) or tensorboard
(an event file of 10^6 episodes).

    .venv/bin/python bench/import_speed.py [--rows 10000000] [--keep]
    .venv/bin/python bench/import_speed.py --tensorboard [--episodes 1000000]

episodes: writes bench/out/episodes_<rows>.parquet once (4 algos x 2 tasks x 2 bounds x 5 seeds = 80 runs,
50 iterates, the rest episodes of mode train), then runs `saferl import episodes FILE --out CUBE` in a
child process and prints its wall time, rows per second and peak memory (ru_maxrss of the child),
beside the time of a plain `pandas.read_parquet` of the same file in another child.

tensorboard (`bench/import_tensorboard.py`): writes bench/out/tb_<episodes>/ once with tensorboardX's
EventsWriter (CleanRL's tags: charts/episodic_return and charts/episodic_cost per episode, 8 at one
step, charts/learning_rate per update), then times, each in a fresh child, the reader library alone
parsing every record (framing + both CRC-32C checks + protobuf `Event.FromString`, the values kept per
tag; with --event-file-loader also tensorboard's `EventFileLoader`) and `saferl import tensorboard DIR
--out CUBE`, and prints the ratio import / reader, each child's peak memory, and the same command's on
1,000 episodes (its fixed cost: what the file adds is what a streamed import keeps per episode).
"""

from __future__ import annotations

import argparse
import resource
import shutil
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

OUT = Path(__file__).resolve().parent / "out"


def make_table(path: Path, rows: int) -> None:
    import pandas as pd

    rng = np.random.default_rng(0)
    runs = [(a, t, b, s) for a in ("ppo", "ppo_lag", "p3o", "focops") for t in ("goal", "circle")
            for b in (15.0, 25.0) for s in range(5)]
    per_run = rows // len(runs)
    iterates = 50
    per_cell = per_run // iterates
    idx = np.arange(len(runs) * iterates * per_cell)
    run = idx // (iterates * per_cell)
    labels = np.array(runs, dtype=object)
    df = pd.DataFrame({
        "algo": pd.Categorical(labels[run, 0].astype(str)), "task": pd.Categorical(labels[run, 1].astype(str)),
        "bound": labels[run, 2].astype(np.float64), "seed": labels[run, 3].astype(np.int64),
        "iterate": (idx // per_cell) % iterates, "mode": pd.Categorical(np.full(idx.size, "train")),
        "reward": rng.normal(10, 3, idx.size).astype(np.float32),
        "cost": rng.gamma(2.0, 12.0, idx.size).astype(np.float32)})
    df.to_parquet(path)


def child(code: str) -> tuple[float, float]:
    """(wall seconds, peak RSS GiB) of `python -c code` in a fresh process."""
    t0 = time.perf_counter()
    subprocess.run([sys.executable, "-c", code], check=True)
    wall = time.perf_counter() - t0
    peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 2**20
    return wall, peak


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rows", type=int, default=10_000_000)
    ap.add_argument("--keep", action="store_true", help="keep the imported cube")
    ap.add_argument("--tensorboard", action="store_true", help="the TensorBoard case instead")
    ap.add_argument("--episodes", type=int, default=1_000_000, help="episodes in the event file (--tensorboard)")
    ap.add_argument("--event-file-loader", action="store_true",
                    help="--tensorboard: also time tensorboard's EventFileLoader (slow: ~10 min for 2e6 events)")
    args = ap.parse_args()
    if args.tensorboard:
        sys.path.insert(0, str(Path(__file__).resolve().parent))
        from import_tensorboard import run_case

        run_case(OUT, args.episodes, keep=args.keep, event_file_loader=args.event_file_loader)
        return
    OUT.mkdir(parents=True, exist_ok=True)
    table = OUT / f"episodes_{args.rows}.parquet"
    if not table.exists():
        t0 = time.perf_counter()
        make_table(table, args.rows)
        print(f"wrote {table} ({table.stat().st_size / 2**20:.0f} MiB) in {time.perf_counter() - t0:.1f} s")
    cube = OUT / "imported.zarr"
    shutil.rmtree(cube, ignore_errors=True)
    read_s, read_peak = child(f"import pandas as pd; pd.read_parquet({str(table)!r})")
    imp_s, imp_peak = child("import sys; from cube.cli import main; "
                            f"sys.exit(main(['import', 'episodes', {str(table)!r}, '--out', {str(cube)!r}]))")
    print(f"plain pandas.read_parquet             {read_s:7.1f} s   peak {read_peak:.2f} GiB (max of children so far)")
    print(f"saferl import episodes ({args.rows:,} rows)  {imp_s:7.1f} s   peak {imp_peak:.2f} GiB (max of children)")
    print(f"rows per second                       {args.rows / imp_s:,.0f}")
    print(f"ratio import / read                   {imp_s / read_s:.1f} x")
    if not args.keep:
        shutil.rmtree(cube, ignore_errors=True)


if __name__ == "__main__":
    main()
