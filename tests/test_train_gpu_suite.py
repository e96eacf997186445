"""`bench/gpu_suite.sh` runs on a CPU at tiny sizes: both parts, ours and crax's trainer, with its summaries.

One algorithm on Safe Circle Point (the fastest MJX compile), TINY=1 sizes, SKIP_INSTALL=1 (this environment's
packages): part 1 times one run of ours and one of crax's (compile excluded), part 2 a vmapped group of 2 of ours
against one crax run and turns both into device-hours of the paper's grid cell. About 3-5 minutes on 2 idle cores,
15 minutes measured on 2 cores shared with other jobs (four compiles; crax's single-run compile is shared
through the suite's compile cache).
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = [pytest.mark.crax, pytest.mark.slow]
pytest.importorskip("crax")
pytest.importorskip("jax")

ROOT = Path(__file__).resolve().parents[1]


def test_gpu_suite_runs_on_cpu_at_tiny_sizes(tmp_path: Path) -> None:
    env = {**os.environ, "TINY": "1", "SKIP_INSTALL": "1", "PYTHON": sys.executable, "OUT": str(tmp_path),
           "ALGOS": "crpo", "TASK": "circle", "GRID_TASKS": "circle", "GRID_ALGOS": "crpo", "LIMIT": "1500",
           "JAX_PLATFORMS": "cpu"}
    res = subprocess.run(["bash", str(ROOT / "bench" / "gpu_suite.sh")], cwd=ROOT, env=env, capture_output=True,
                         text=True, timeout=3300)
    log = (tmp_path / "gpu_suite.log").read_text()
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-2000:]
    assert "crax.training.agents.crpo.train" in log and "IMPORT FAILED" not in log
    (tp,) = re.findall(r"^THROUGHPUT task=circle algo=crpo ours_sps=(\d+) crax_sps=(\d+) ratio=([\d.]+)", log, re.M)
    assert int(tp[0]) > 0 and int(tp[1]) > 0 and float(tp[2]) == pytest.approx(int(tp[0]) / int(tp[1]), rel=0.01)
    (grid,) = re.findall(r"^GRID task=circle algo=crpo group=2 runs=90 .* ours_h=([\d.e+-]+) crax_h=([\d.e+-]+) "
                         r"ratio=([\d.]+)", log, re.M)
    assert float(grid[0]) > 0 and float(grid[1]) > 0
    assert re.search(r"^  crpo +ours +\d+ +crax +\d+ +ratio [\d.]+x$", log, re.M), log[-2000:]
    total = r"total over 1 cell\(s\): ours [\d.]+ h, crax [\d.]+ h, ratio [\d.]+ \(goal <= 0.333: (met|not met)\)"
    assert re.search(total, log), log[-2000:]
    assert "gpu suite rc=0" in log
