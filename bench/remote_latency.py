"""A report over HTTP at 100 ms a request beside the same report of the local cube, side by side in one run.

    .venv/bin/python bench/remote_latency.py [--scale 24] [--delay 0.1] [--demo] [--out DIR] [--keep]

Writes a synthetic cube at 1/SCALE of the paper's training episodes (4 algos x 4 tasks x 3 bounds x 30 seeds x
122 iterates; 2048/SCALE training episodes per iterate, 100 final expl/greedy; with --demo: the `saferl demo`
cube instead), publishes it (`saferl publish`) into a folder that a local HTTP server serves, adding DELAY
seconds to every request (tests/latency_proxy.py: keep-alive, a large listen backlog, like an object store's
endpoint), in a process of its own. Then, each in a child process, timed from start to exit (the first table is
the report's output):

1. `saferl report LOCAL --no-cache` and `saferl report URL --no-cache` (a cold statistics pass each): the
   seconds to the first table (its header row on the child's output) and to exit, the ratio remote / local of
   the first, with the requests the remote one made and how many were in flight at once;
2. the same reports again with the statistics cache (the local store's `_derived`, the URL's local cache
   folder keyed by the snapshot id), and their ratio.

The load average is printed beside the numbers (the machine is shared).
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SAFERL = [sys.executable, "-m", "cube.cli"]


def timed(argv: list[str], env: dict[str, str]) -> tuple[float, float]:
    """(seconds to the first table, seconds to exit) of the command `argv` run in a child process; the first
    table is there when its header row (``Algorithm``) reaches the child's standard output."""
    start = time.perf_counter()
    first = None
    with subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
                          cwd=ROOT) as child:
        for line in child.stdout:
            if first is None and "Algorithm" in line:
                first = time.perf_counter() - start
        err = child.stderr.read()
    seconds = time.perf_counter() - start
    if child.returncode != 0:
        sys.exit(f"{' '.join(argv)} failed: {err.strip()}")
    return (seconds if first is None else first), seconds


def requests_since(log: Path, mark: int) -> tuple[int, int]:
    """(requests, most in flight at once) in the proxy's log after its first `mark` lines."""
    spans = [tuple(map(float, line.split()[:2])) for line in log.read_text().splitlines()[mark:]]
    events = sorted([(start, 1) for start, _ in spans] + [(end, -1) for _, end in spans], key=lambda e: (e[0], e[1]))
    most = now = 0
    for _, step in events:
        now += step
        most = max(most, now)
    return len(spans), most


def write_cube(path: Path, scale: int, demo: bool) -> None:
    if demo:
        subprocess.run([*SAFERL, "demo", str(path)], check=True, capture_output=True, cwd=ROOT)
        return
    sys.path.insert(0, str(ROOT))
    from cube.io.demo import make_demo_cube

    make_demo_cube(path, seed=0, n_seeds=30, n_iterates=122, n_train_episodes=max(1, 2048 // scale),
                   n_eval_episodes=100)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--scale", type=int, default=24, help="1/SCALE of the paper's training episodes (24)")
    parser.add_argument("--delay", type=float, default=0.1, help="seconds the proxy adds to each request (0.1)")
    parser.add_argument("--demo", action="store_true", help="the `saferl demo` cube instead of the scaled one")
    parser.add_argument("--out", help="working folder (default: a temporary one)")
    parser.add_argument("--keep", action="store_true", help="keep the working folder")
    args = parser.parse_args()
    work = Path(args.out or tempfile.mkdtemp(prefix="saferl-remote-"))
    www = work / "www"
    www.mkdir(parents=True, exist_ok=True)
    local = work / "cube.zarr"
    servers: list[subprocess.Popen] = []
    try:
        if not local.exists():
            start = time.perf_counter()
            write_cube(local, args.scale, args.demo)
            print(f"wrote {local} in {time.perf_counter() - start:.0f} s")
        shutil.rmtree(www / "cube.zarr", ignore_errors=True)
        subprocess.run([*SAFERL, "publish", str(local), str(www / "cube.zarr")], check=True, capture_output=True,
                       cwd=ROOT)
        log = work / "requests.log"
        log.unlink(missing_ok=True)
        servers.append(subprocess.Popen([sys.executable, str(ROOT / "tests" / "latency_proxy.py"), str(www),
                                         str(args.delay), str(log)], stdout=subprocess.PIPE, text=True))
        url = f"{servers[0].stdout.readline().strip()}/cube.zarr"
        env = {**os.environ, "SAFERL_CACHE_DIR": str(work / "cache")}
        shutil.rmtree(work / "cache", ignore_errors=True)
        shutil.rmtree(local / "_derived", ignore_errors=True)
        what = "the demo cube" if args.demo else f"a 1/{args.scale}-scale cube"
        print(f"{what}, HTTP with {args.delay * 1000:.0f} ms a request (tests/latency_proxy.py serving the folder)")
        rows = []
        for label, extra in (("cold (--no-cache)", ["--no-cache"]), ("cached (2nd report)", [])):
            if extra == []:  # fill both caches first
                timed([*SAFERL, "report", str(local)], env)
                timed([*SAFERL, "report", url], env)
            t_local = timed([*SAFERL, "report", str(local), *extra], env)
            mark = len(log.read_text().splitlines()) if log.exists() else 0
            t_remote = timed([*SAFERL, "report", url, *extra], env)
            rows.append((label, t_local, t_remote, requests_since(log, mark)))
        print("first table (exit), seconds from the start of the process")
        print(f"{'report':20s} {'local s':>12s} {'remote s':>12s} {'remote/local':>13s} {'requests':>9s} "
              f"{'in flight':>10s}")
        for label, t_local, t_remote, (count, most) in rows:
            print(f"{label:20s} {t_local[0]:5.1f} ({t_local[1]:4.1f}) {t_remote[0]:5.1f} ({t_remote[1]:4.1f}) "
                  f"{t_remote[0] / t_local[0]:13.2f} {count:9d} {most:10d}")
        print(f"load average {os.getloadavg()[0]:.2f} {os.getloadavg()[1]:.2f} {os.getloadavg()[2]:.2f} (each "
              "report: a child process from start to exit, the table its output; one machine serves and computes)")
    finally:
        for server in servers:
            server.terminate()
            server.wait()
        if not args.keep and not args.out:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
