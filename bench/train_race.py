"""A Recorder racing `saferl train` for the same runs (issue 36), `--trials` seeded trials in one sweep:

    SAFERL_ENABLE_TOY=1 .venv/bin/python bench/train_race.py [--trials 200] [--seed 36] [--iterates 2]

`saferl train` (a real process, local executor, one run per program, the toy task) trains runs seed 0, 1, ...
of one store; a racing process takes each run in turn, at a seeded moment: either while the sweep holds that
run (its claim is held: the Recorder must be refused in one line naming the holder), or while the sweep is
still on the run before it (the Recorder claims the run, records it and keeps it until the sweep has moved
past it: the sweep must leave it, "claimed by ..., left to that process"), each with a seeded `existing=`.
Then every run must be exactly one writer's recording (the Recorder's marked costs, or the sweep's run, never
a mix), complete, and the store valid. Prints a JSON line and a tally; exit 1 when a trial failed.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import os
import random
import subprocess
import sys
import tempfile
import time
import traceback
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

from toyconfig import toy_config_toml  # noqa: E402

MARK = 1000.0  # the Recorder's train costs: MARK + seed + j / 10


def _key(seed: int) -> Any:
    from cube import RunKey

    return RunKey("ppo_lag", "toy", 2.0, seed)


def _holder_pid(store: Path, seed: int) -> int | None:
    from cube.store.claims import claim_state

    state = claim_state(store, _key(seed))
    return int(state.holder["pid"]) if state.state == "held" and state.holder else None  # type: ignore[call-overload]


def _wait(cond: Any, proc_alive: Any, limit: float = 600.0) -> bool:
    end = time.time() + limit
    while time.time() < end:
        if cond():
            return True
        if not proc_alive():
            return bool(cond())
        time.sleep(0.002)
    return False


def racer(store: str, trials: int, seed: int, sweep_pid: int, out: Any) -> None:
    """The racing process: one Recorder per run, at a seeded moment (module docstring)."""
    try:
        from cube import CubeError, Recorder

        path = Path(store)
        rng = random.Random(seed)

        def alive() -> bool:
            try:
                os.kill(sweep_pid, 0)
                return True
            except ProcessLookupError:
                return False

        _wait(lambda: (path / "zarr.json").exists(), alive)
        for s in range(trials):
            when = rng.choice(("during", "before"))
            existing = rng.choice(("refuse", "resume", "replace"))
            def past(s: int = s) -> bool:
                return _holder_pid(path, s + 1) == sweep_pid  # the sweep has moved past run s

            if when == "before" and (_holder_pid(path, s) == sweep_pid or past()):
                when = "during"  # the sweep is on run s already
            if when == "during":
                _wait(lambda s=s, past=past: _holder_pid(path, s) == sweep_pid or past(), alive)
            if past() or not alive():
                out.put((s, "late", existing, "late", ""))  # the sweep finished it first: no race to run
                continue
            rec = Recorder(path, algo="ppo_lag", task="toy", bound=2.0, seed=s, existing=existing)
            try:
                rec.open()
            except CubeError as exc:
                out.put((s, when, existing, "refused", str(exc)))
                continue
            try:
                for j in range(2):
                    rec.train_episodes(j, [1.0], [MARK + s + j / 10])
                # keep the run until the sweep has moved past it (it must meet this claim and leave the run)
                _wait(lambda s=s, past=past: s + 1 >= trials or past(), alive)
                rec.close()
                out.put((s, when, existing, "recorded", ""))
            except CubeError as exc:
                rec.close(complete=False)
                out.put((s, when, existing, "failed", str(exc)))
    except BaseException:  # noqa: BLE001 - the parent judges
        out.put((-1, "", "", "crashed", traceback.format_exc()[-800:]))


def check(store: Path, trials: int, results: dict[int, tuple], sweep_lines: list[str]) -> dict[str, list[str]]:
    import numpy as np

    from cube import open_cube, read_manifests, validate

    ds = open_cube(store).saferl.load()
    rows = {int(r["seed"]): r for r in read_manifests(store) if r["algo"] == "ppo_lag"}
    problems: dict[str, list[str]] = {}
    for s in range(trials):
        bad = []
        _, when, existing, outcome, text = results.get(s, (s, "", "", "missing", ""))
        costs = ds["cost"].sel(algo="ppo_lag", task="toy", bound=2.0, seed=s, mode="train").values
        marked = np.isclose(costs, MARK + s + np.arange(costs.shape[0])[:, None] / 10)
        by_recorder = bool(marked[:2, 0].all()) and not np.isfinite(costs[:, 1:]).any() and \
            not np.isfinite(costs[2:]).any()
        by_sweep = not marked.any() and "config" in rows[s]  # the trainer's manifest holds its config
        left = any(f"seed={s}:" in ln and "claimed by" in ln for ln in sweep_lines)
        if outcome == "late" and not by_sweep:
            bad.append("the sweep finished the run first but it is not the sweep's")
        # A replace that lands after the sweep completed the run (between two runs) is a second writer after
        # the first, not a race: the run must then be the Recorder's.
        after = existing == "replace" and any(f"seed={s}: complete" in ln for ln in sweep_lines)
        if outcome == "late":
            pass
        elif outcome == "recorded" and not (by_recorder and (left or after) and
                                            rows[s].get("writer") == "cube.Recorder"):
            bad.append(f"the Recorder recorded but the run is not its recording, or the sweep did not leave it "
                       f"(left={left}, writer={rows[s].get('writer')})")
        if outcome == "refused" and not by_sweep:
            bad.append("the Recorder was refused but the run is not the sweep's")
        named = "another writer" in text or "already holds data" in text
        if outcome == "refused" and ("\n" in text or not named):
            bad.append(f"refusal is not one line naming the holder or the data: {text}")
        if outcome not in ("recorded", "refused", "late"):
            bad.append(f"{outcome}: {text}")
        if rows[s]["status"] != "complete":
            bad.append(f"status {rows[s]['status']}")
        if bad:
            problems[f"seed {s} ({when}, {existing})"] = bad
    invalid = validate(store)
    if invalid:
        problems["validate"] = invalid
    return problems


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--trials", type=int, default=200)
    p.add_argument("--seed", type=int, default=36)
    p.add_argument("--iterates", type=int, default=2,
                   help="iterates of each toy run: more give the racer time to meet the sweep on a loaded machine "
                        "(a racer that falls behind finds every run done: 'late', no race run)")
    args = p.parse_args()
    env = {**os.environ, "SAFERL_ENABLE_TOY": "1"}
    with tempfile.TemporaryDirectory() as tmp:
        config, store = Path(tmp) / "toy.toml", Path(tmp) / "race.zarr"
        config.write_text(toy_config_toml(args.iterates, 4).replace("eval_every = 2", "eval_every = 1000"))
        t0 = time.perf_counter()
        sweep = subprocess.Popen([sys.executable, "-m", "cube.cli", "train", "--config", str(config), "--algos",
                                  "ppo_lag", "--tasks", "toy", "--bounds", "2", "--seeds", f"0-{args.trials - 1}",
                                  "--parallel-runs", "1", "--no-progress", "--out", str(store)],
                                 env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, cwd=ROOT)
        ctx = mp.get_context("spawn")
        out = ctx.Queue()
        race = ctx.Process(target=racer, args=(str(store), args.trials, args.seed, sweep.pid, out))
        race.start()
        assert sweep.stdout is not None
        sweep_lines = sweep.stdout.read().splitlines()
        sweep.wait()
        race.join(600)
        results: dict[int, tuple] = {}
        while not out.empty():
            item = out.get()
            results[item[0]] = item
        if -1 in results:
            print(results[-1][4])
            return 1
        problems = check(store, args.trials, results, sweep_lines)
        counts: dict[tuple[str, str], int] = {}
        for r in results.values():
            counts[r[1], r[3]] = counts.get((r[1], r[3]), 0) + 1
        print(json.dumps({"kind": "recorder-vs-train", "trials": args.trials, "held": args.trials - sum(
            1 for k in problems if k.startswith("seed")), "sweep_exit": sweep.returncode,
            "outcomes": {f"{w} {o}": n for (w, o), n in counts.items()}, "problems": dict(list(problems.items())[:5]),
            "seconds": round(time.perf_counter() - t0, 1)}))
        print(f"recorder vs train: {'all held' if not problems else f'{len(problems)} problem(s)'}")
        return 1 if problems or sweep.returncode != 0 else 0


if __name__ == "__main__":
    sys.exit(main())
