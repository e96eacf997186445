"""The full counts of issue 36's writer fault trials (the test suite runs a seeded subset of each):

    .venv/bin/python bench/fault_trials.py [--trials 200] [--random-points 50] [--kinds race,import,replace]

* race: two Recorders of one new run started together (each with a seeded `existing=`), `--trials` seeds:
  exactly one records, the other is refused in one line naming the holder (host, pid, since), and the run
  equals the winner's recording, complete (tests/writertrials.py `race_trial`);
* import: the same with two `saferl import episodes --into` of one run;
* replace: a Recorder replacing a complete run, and `import --into --replace`, SIGKILLed just before each
  of their store writes and at `--random-points` seeded random ones: validate valid, status truthful, the
  run the old recording or a completed prefix of the new one, the next replacement completes
  (`replace_kill_trial`).

Writers are forked children (tests/writertrials.py). Prints one JSON line per kind and a final tally; exit 1
when a trial failed.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

import writertrials as wt  # noqa: E402 - the trials live beside the tests that run their subset


def races(kind: str, trials: int, folder: Path) -> dict[str, list[str]]:
    return {f"{kind}-{seed}": wt.race_trial(folder / f"{kind}-{seed}", seed, kind) for seed in range(trials)}


def replacements(how: str, random_points: int, folder: Path) -> dict[str, list[str]]:
    base = wt.make_old(folder / "old")
    n = len(wt.write_keys(base, folder, how))
    rng = random.Random(36)
    points = [*range(1, n + 1), *(rng.randint(1, n) for _ in range(random_points))]
    return {f"{how}-write-{nth}-{i}": wt.replace_kill_trial(base, folder, nth, how) for i, nth in enumerate(points)}


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--trials", type=int, default=200)
    p.add_argument("--random-points", type=int, default=50)
    p.add_argument("--kinds", default="race,import,replace")
    args = p.parse_args()
    failed = 0
    with tempfile.TemporaryDirectory() as tmp:
        for kind in args.kinds.split(","):
            t0 = time.perf_counter()
            if kind in ("race", "import"):
                results = races("recorder" if kind == "race" else "import", args.trials, Path(tmp) / kind)
                line = json.loads(wt.tally(results))
                print(json.dumps({"kind": kind, **line, "seconds": round(time.perf_counter() - t0, 1)}), flush=True)
                failed += line["trials"] - line["held"]
            elif kind == "replace":
                for how in ("recorder", "import"):
                    t0 = time.perf_counter()
                    results = replacements(how, args.random_points, Path(tmp) / how)
                    line = json.loads(wt.tally(results))
                    print(json.dumps({"kind": f"replace-{how}", **line,
                                      "seconds": round(time.perf_counter() - t0, 1)}), flush=True)
                    failed += line["trials"] - line["held"]
            else:
                raise SystemExit(f"unknown kind {kind!r}: use race, import, replace")
    print(f"fault trials: {'all held' if not failed else f'{failed} failed'}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
