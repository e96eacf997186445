"""The statistics pass against the codec floor (issue 37): what a cold `saferl report --cdf` costs beside just
reading and decoding the episodes the store holds, side by side in one run.

    nice -n 19 .venv/bin/python bench/pass_floor.py [--cube bench/out/c24.zarr] [--rounds 3] \
        [--against REV [--against-cube OLD]] [--jit]

1. the codec floor: every stored chunk file of ``reward`` and ``cost`` read, its CRC-32C checked and its payload
   decoded with the store's codec (Blosc or zstd) into a reused buffer (google_crc32c and numcodecs, the
   libraries zarr itself calls), by two threads, with no zarr, dask or xarray in between;
2. the cold `saferl report --cdf` on the same store: its statistics cache (``_derived``) deleted first, the whole
   process timed (start-up, the pass, the tables, the cache written), as a user waits for it, with the
   prebuilt statistics loop (`cube.stats.prebuilt`, built first where missing, as a machine's first report
   leaves it); with ``--jit`` also with the loop of numba's JIT (SAFERL_PREBUILT=off);
3. with ``--against REV``: the same report of another revision (a detached git worktree of REV, made in a
   temporary folder and removed afterwards, its modules first on PYTHONPATH; this checkout's venv). Both
   checkouts' `cube` packages are byte-compiled first, as an install leaves them (with
   $PYTHONDONTWRITEBYTECODE set, a fresh worktree would compile its modules in every timed process).

Every step is a child process of its own, timed whole (wall clock) and printing its peak memory (ru_maxrss).
The rounds alternate the steps (a busy machine slows all alike); the fastest of each is printed with its ratio
to the floor (issue 37's target at full scale: report <= 2.0x the floor, <= 1/3 of 5f054e1's report, peak
< 2 GiB). The cube defaults to the 1/24-scale one of bench/startup.py, written when missing
(`bench/write_cube.py --scale 1/24`).
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

FLOOR = r"""
import json, os, resource, sys, threading, time
from concurrent.futures import ThreadPoolExecutor
import google_crc32c
import numpy as np
from numcodecs.blosc import Blosc
from numcodecs.zstd import Zstd
root = sys.argv[1]
files = [os.path.join(d, f) for name in ("reward", "cost") for d, _, fs in os.walk(os.path.join(root, name, "c"))
         for f in fs]
meta = json.load(open(os.path.join(root, "reward", "zarr.json")))
names = [c["name"] for c in meta["codecs"]]
codec = Blosc() if "blosc" in names else Zstd()
chunk_bytes = 4 * int(np.prod(meta["chunk_grid"]["configuration"]["chunk_shape"]))
buffers = {}
def decode(path):
    with open(path, "rb") as fh:
        data = fh.read()
    payload = np.frombuffer(data, dtype=np.uint8)[:-4]  # as zarr's crc32c codec hands it over: no copy
    if google_crc32c.value(payload).to_bytes(4, "little") != data[-4:]:
        raise SystemExit(f"CRC-32C mismatch in {path}")
    out = buffers.setdefault(threading.get_ident(), np.empty(chunk_bytes, dtype=np.uint8))  # reused, as the pass
    return len(data), len(codec.decode(payload, out=out))
t0 = time.perf_counter()
with ThreadPoolExecutor(2) as pool:
    sizes = list(pool.map(decode, files))
seconds = time.perf_counter() - t0
stored, decoded = sum(s for s, _ in sizes), sum(d for _, d in sizes)
rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20
print(f"RESULT files={len(files)} stored={stored} decoded={decoded} inner_s={seconds:.3f} rss_gib={rss:.3f} "
      f"codec={names[1] if len(names) > 1 else names}")
"""

REPORT = r"""
import contextlib, io, os, resource, sys
import cube
from cube.cli.entry import console_main
sys.argv = ["saferl", "report", sys.argv[1], "--cdf"]
with contextlib.redirect_stdout(io.StringIO()):
    try:
        rc = console_main()
    except SystemExit as exc:
        rc = exc.code
assert rc == 0, rc
rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20
print(f"RESULT rss_gib={rss:.3f} source={os.path.dirname(os.path.dirname(cube.__file__))}")
"""


def child(code: str, cube: Path, pythonpath: str | None = None, **extra_env: str) -> tuple[float, dict[str, str]]:
    """(wall seconds of the whole child process, its RESULT fields)."""
    env = {**os.environ, **extra_env}
    if pythonpath:
        env["PYTHONPATH"] = pythonpath  # that checkout's `cube` before this venv's editable one
    start = time.perf_counter()
    # not in this checkout: `python -c` puts its folder first on sys.path, before PYTHONPATH
    run = subprocess.run([sys.executable, "-c", code, str(cube)], capture_output=True, text=True, env=env,
                         cwd=tempfile.gettempdir())
    seconds = time.perf_counter() - start
    if run.returncode != 0:
        raise SystemExit(f"child failed ({run.returncode}):\n{run.stderr[-3000:]}")
    line = next(x for x in run.stdout.splitlines() if x.startswith("RESULT "))
    return seconds, dict(kv.split("=") for kv in line.split()[1:])


def cold_report(cube: Path, pythonpath: str | None = None, **extra_env: str) -> tuple[float, dict[str, str]]:
    shutil.rmtree(cube / "_derived", ignore_errors=True)  # the statistics cache: a cold pass
    return child(REPORT, cube, pythonpath, **extra_env)


def ensure_prebuilt() -> None:
    """The prebuilt statistics loop of this machine (`cube.stats.prebuilt`), as every report after a
    machine's first finds it: built now (in the foreground) where it is missing."""
    if os.environ.get("SAFERL_PREBUILT", "on").strip().lower() in ("off", "0", "no", "false"):
        print("SAFERL_PREBUILT is off: the reports compile the loop with numba's JIT", flush=True)
        return
    run = subprocess.run([sys.executable, "-m", "cube.stats.prebuilt"], capture_output=True, text=True, cwd=ROOT)
    print(f"prebuilt statistics loop: {(run.stdout or run.stderr).strip()}", flush=True)


def compile_modules(root: Path) -> None:
    """Byte-compile a checkout's `cube` package, as installing it does: where $PYTHONDONTWRITEBYTECODE is set (this
    machine) a fresh worktree would otherwise compile every module it imports in every timed process."""
    subprocess.run([sys.executable, "-m", "compileall", "-q", str(root / "cube")], check=True, capture_output=True)


def ensure_cube(path: Path) -> None:
    if not path.exists():
        print(f"writing the 1/24-scale cube at {path} (bench/write_cube.py --scale 1/24) ...", flush=True)
        subprocess.run([sys.executable, str(ROOT / "bench" / "write_cube.py"), str(path), "--keep", "--scale", "1/24"],
                       check=True, cwd=ROOT)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--cube", default=str(ROOT / "bench" / "out" / "c24.zarr"))
    ap.add_argument("--rounds", type=int, default=3, help="alternating rounds; the fastest of each is kept")
    ap.add_argument("--against", metavar="REV", help="also time the report of this git revision (a worktree)")
    ap.add_argument("--against-cube", metavar="PATH", help="the store REV's report reads (default --cube): the same "
                    "episodes as REV wrote them, e.g. the store --cube was `saferl migrate`d from")
    ap.add_argument("--jit", action="store_true", help="also time the report with the loop of numba's JIT "
                    "(SAFERL_PREBUILT=off), as a machine's first reports run it")
    args = ap.parse_args()
    cube = Path(args.cube)
    ensure_cube(cube)
    ensure_prebuilt()
    other = None
    compile_modules(ROOT)
    if args.against:
        other = Path(tempfile.mkdtemp(prefix="pass-floor-against-"))
        subprocess.run(["git", "worktree", "add", "--detach", "-q", str(other), args.against], check=True, cwd=ROOT)
        compile_modules(other)
    steps = {"codec floor (2 threads)": lambda: child(FLOOR, cube),
             "saferl report --cdf (cold)": lambda: cold_report(cube)}
    if args.jit:
        steps["report --cdf (cold, JIT loop)"] = lambda: cold_report(cube, SAFERL_PREBUILT="off")
    if other is not None:
        theirs_cube = Path(args.against_cube or cube)
        steps[f"report --cdf of {args.against}"] = lambda: cold_report(theirs_cube, str(other))
    results: dict[str, list[tuple[float, dict[str, str]]]] = {name: [] for name in steps}
    try:
        for _ in range(args.rounds):
            for name, step in steps.items():
                results[name].append(step())
    finally:
        if other is not None:
            subprocess.run(["git", "worktree", "remove", "--force", str(other)], cwd=ROOT, check=False)
    load = os.getloadavg()
    facts = results["codec floor (2 threads)"][0][1]
    print(f"bench/pass_floor.py: {cube}: {int(facts['files']):,} reward/cost chunk files, "
          f"{int(facts['stored']) / 2**20:.0f} MiB stored, {int(facts['decoded']) / 2**20:.0f} MiB decoded; "
          f"{args.rounds} alternating rounds, fastest of each, whole processes; "
          f"load average {load[0]:.2f} {load[1]:.2f} {load[2]:.2f} on {os.cpu_count()} cores")
    floor = min(s for s, _ in results["codec floor (2 threads)"])
    for name, values in results.items():
        best, fields = min(values, key=lambda v: v[0])
        inner = (f", decode alone {fields['inner_s']} s ({fields['codec']})" if "inner_s" in fields
                 else f", cube from {fields['source']}")
        print(f"  {name:34s} {best:8.3f} s  {best / floor:6.2f}x the floor   peak {fields['rss_gib']} GiB{inner}")
    if other is not None:
        ours = min(s for s, _ in results["saferl report --cdf (cold)"])
        theirs = min(s for s, _ in results[f"report --cdf of {args.against}"])
        where = f" (it read {args.against_cube})" if args.against_cube else ""
        print(f"  this report / {args.against}'s: {ours / theirs:.2f}x{where}")


if __name__ == "__main__":
    main()
