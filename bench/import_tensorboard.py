"""The TensorBoard case of `bench/import_speed.py`: an event file of N episodes, the reader library alone
against `saferl import tensorboard`, each in a fresh child process, side by side in one run."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import time
from pathlib import Path

STEPS_PER_UPDATE = 2048
EPISODES_PER_STEP = 8  # vector envs: several episodes end at one global step

PROTOBUF_READER = """
import json, resource, struct, sys, time
import google_crc32c
from tensorboardX.proto import event_pb2
t0 = time.perf_counter()
per_tag = {}
def masked(data):
    crc = google_crc32c.value(data)
    return (((crc >> 15) | (crc << 17)) + 0xA282EAD8) & 0xFFFFFFFF
with open(sys.argv[1], "rb") as f:
    while True:
        header = f.read(12)
        if not header:
            break
        (n,) = struct.unpack("<Q", header[:8])
        assert masked(header[:8]) == struct.unpack("<I", header[8:])[0]
        data = f.read(n)
        assert masked(data) == struct.unpack("<I", f.read(4))[0]
        event = event_pb2.Event.FromString(data)
        for v in event.summary.value:
            per_tag.setdefault(v.tag, []).append((event.step, v.simple_value))
print(json.dumps({"s": time.perf_counter() - t0, "scalars": sum(map(len, per_tag.values())),
                  "peak_gib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20}))
"""
TENSORBOARD_READER = """
import json, resource, sys, time
from tensorboard.backend.event_processing.event_file_loader import EventFileLoader
t0 = time.perf_counter()
n = 0
for event in EventFileLoader(sys.argv[1]).Load():
    n += len(event.summary.value)
print(json.dumps({"s": time.perf_counter() - t0, "scalars": n,
                  "peak_gib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20}))
"""
IMPORT = """
import json, resource, sys, time
t0 = time.perf_counter()
from cube.cli import main
code = main(["import", "tensorboard", sys.argv[1], "--out", sys.argv[2], "--bound", "25", "--force"])
assert code == 0
peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20
print(json.dumps({"s": time.perf_counter() - t0, "peak_gib": peak}))
"""


def write_events(folder: Path, episodes: int) -> Path:
    """CleanRL's tags, written with tensorboardX's synchronous EventsWriter (its own framing and CRC)."""
    import numpy as np
    from tensorboardX.event_file_writer import EventsWriter
    from tensorboardX.proto import event_pb2, summary_pb2

    folder.mkdir(parents=True, exist_ok=True)
    writer = EventsWriter(str(folder / "events"))
    rng = np.random.default_rng(0)
    returns, costs = rng.normal(10, 3, episodes), rng.gamma(2.0, 12.0, episodes)
    value = summary_pb2.Summary.Value
    for i in range(episodes):
        step = (i // EPISODES_PER_STEP + 1) * 64
        for tag, x in (("charts/episodic_return", returns[i]), ("charts/episodic_cost", costs[i])):
            summary = summary_pb2.Summary(value=[value(tag=tag, simple_value=float(x))])
            writer.write_event(event_pb2.Event(wall_time=1.7e9 + i, step=step, summary=summary))
        if step % STEPS_PER_UPDATE == 0 and (i + 1) % EPISODES_PER_STEP == 0:
            summary = summary_pb2.Summary(value=[value(tag="charts/learning_rate", simple_value=3e-4)])
            writer.write_event(event_pb2.Event(wall_time=1.7e9 + i, step=step, summary=summary))
    writer.close()
    return next(folder.glob("events*"))


def child(code: str, *argv: str) -> dict:
    """The JSON line a fresh `python -c code argv...` prints (its own time and peak RSS)."""
    out = subprocess.run([sys.executable, "-c", code, *argv], check=True, capture_output=True, text=True).stdout
    return json.loads(out.strip().splitlines()[-1])


BASELINE = """
import json, resource, sys, time
t0 = time.perf_counter()
from cube.cli import main
assert main(["import", "tensorboard", sys.argv[1], "--out", sys.argv[2], "--bound", "25", "--force"]) == 0
peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20
print(json.dumps({"s": time.perf_counter() - t0, "peak_gib": peak}))
"""


def run_case(out: Path, episodes: int, keep: bool = False, event_file_loader: bool = False) -> None:
    folder = out / f"tb_{episodes}" / "SafetyPointGoal1-v0__ppo_lag__0__1700000000"
    files = sorted(folder.glob("events*"))
    if not files:
        t0 = time.perf_counter()
        files = [write_events(folder, episodes)]
        print(f"wrote {files[0]} in {time.perf_counter() - t0:.0f} s")
    size = files[0].stat().st_size
    print(f"event file: {episodes:,} episodes ({2 * episodes:,} episode events), {size / 2**20:.0f} MiB")
    cube = out / "tb_imported.zarr"
    readers = {"protobuf Event.FromString + framing + CRC-32C": child(PROTOBUF_READER, str(files[0]))}
    if event_file_loader:  # about 30x slower than protobuf alone: ~10 minutes for 2e6 events on 2 cores
        readers["tensorboard EventFileLoader"] = child(TENSORBOARD_READER, str(files[0]))
    imported = child(IMPORT, str(folder), str(cube))
    small = out / "tb_small" / folder.name
    if not small.exists():
        write_events(small, 1000)
    fixed = child(BASELINE, str(small), str(out / "tb_small.zarr"))
    for name, r in readers.items():
        print(f"reader alone: {name:48s} {r['s']:7.1f} s   peak {r['peak_gib']:.2f} GiB   ({r['scalars']:,} scalars)")
    print(f"saferl import tensorboard (whole command)                     {imported['s']:7.1f} s   "
          f"peak {imported['peak_gib']:.2f} GiB")
    print(f"the same command on 1,000 episodes (its fixed cost)            {fixed['s']:7.1f} s   "
          f"peak {fixed['peak_gib']:.2f} GiB: the file adds {imported['peak_gib'] - fixed['peak_gib']:.2f} GiB for "
          f"{size / 2**30:.2f} GiB of events (streamed; what stays is each episode's step and values)")
    fastest = min(readers.values(), key=lambda r: r["s"])
    for name, r in readers.items():
        print(f"ratio import / {name:48s} {imported['s'] / r['s']:.2f} x")
    ok = imported["s"] <= 2 * fastest["s"]
    print(f"target: import <= 2 x the fastest reader alone: {'met' if ok else 'NOT met'}")
    if not keep:
        shutil.rmtree(cube, ignore_errors=True)
        shutil.rmtree(out / "tb_small.zarr", ignore_errors=True)
