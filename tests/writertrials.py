"""Seeded trials of writers racing for one run and of replacements killed at a write point (issue 36). The
tests run a seeded subset (tests/test_writer_claims.py, tests/test_replace_faults.py); bench/fault_trials.py
runs the full counts and prints the tally. Writers are forked children (cheap: no interpreter start, the
parent's imports shared) killed with SIGKILL where a kill is asked for; every wait is on a condition.

A trial returns a list of problems ('' items never): empty when it held."""

from __future__ import annotations

import json
import multiprocessing as mp
import os
import random
import shutil
import signal
import traceback
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

FORK = mp.get_context("fork")
RUN = {"algo": "a", "task": "t", "bound": 10.0, "seed": 0}
ITERATES = 4


def _costs(writer: int, iterates: int = ITERATES) -> list[float]:
    """Writer `writer`'s train cost of iterates 0..: 100 + 10 * writer + j (so runs never look alike)."""
    return [100.0 + 10.0 * writer + j for j in range(iterates)]


def _jitter(rng: random.Random) -> None:
    """A seeded number of busy iterations (0 to ~2 ms): moves where two racing writers meet."""
    for _ in range(rng.randrange(0, 20_000)):
        pass


def _one_line(exc: BaseException) -> str:
    return str(exc) if "\n" not in str(exc) else "MULTI-LINE: " + str(exc)


def _finish(conn: Any, result: str) -> None:
    conn.send(result)
    conn.close()
    os._exit(0)  # a forked child never runs the parent's exit hooks (pytest's, zarr's)


# ----------------------------------------------------------------------------------- racing writers
def _recorder_child(path: str, writer: int, existing: str, seed: int, attempts: Any, conn: Any,
                    start: Any) -> None:
    """Open a Recorder of RUN, record ITERATES iterates of this writer's costs; report 'recorded' or
    'refused: <line>'. The one that opened waits until both have tried before it writes a thing."""
    try:
        from cube import CubeError, Recorder

        rng = random.Random(seed * 7 + writer)
        start.wait()
        _jitter(rng)
        rec = Recorder(path, **RUN, existing=existing)
        try:
            rec.open()
        except CubeError as exc:
            with attempts.get_lock():
                attempts.value += 1
            _finish(conn, "refused: " + _one_line(exc))
        with attempts.get_lock():
            attempts.value += 1
        while attempts.value < 2:  # the other writer has not tried yet: hold the run, write nothing
            _jitter(rng)
        try:
            for j, cost in enumerate(_costs(writer)):
                rec.train_episodes(j, [1.0], [cost])
            rec.close()
        except CubeError as exc:
            _finish(conn, "failed: " + _one_line(exc))
        _finish(conn, "recorded")
    except BaseException:  # noqa: BLE001 - a child reports everything, the parent judges
        _finish(conn, "crashed: " + traceback.format_exc()[-800:])


def _import_child(path: str, writer: int, table: str, seed: int, attempts: Any, conn: Any, start: Any) -> None:
    """`saferl import episodes TABLE --into PATH` (in this process); the one that claimed the run waits until
    both have tried before it writes a run."""
    try:
        import cube.io.writing as writing
        from cube.cli.console import error_line
        from cube.io.registry import import_runs

        rng = random.Random(seed * 7 + writer)
        real = writing._write_one  # noqa: SLF001 - the trial's pause inside the claimed import

        def write_one(*args: Any, **kwargs: Any) -> None:
            with attempts.get_lock():
                attempts.value += 1
            while attempts.value < 2:
                _jitter(rng)
            real(*args, **kwargs)

        writing._write_one = write_one  # noqa: SLF001
        runs = import_runs("episodes", [table])
        start.wait()
        _jitter(rng)
        try:
            writing.add_runs(runs, path, fmt="episodes")
        except Exception as exc:  # noqa: BLE001 - the CLI's one line
            with attempts.get_lock():
                attempts.value += 1
            _finish(conn, "refused: " + _one_line(Exception(error_line(exc))))
        _finish(conn, "recorded")
    except BaseException:  # noqa: BLE001
        _finish(conn, "crashed: " + traceback.format_exc()[-800:])


def _episodes_table(folder: Path, writer: int) -> Path:
    path = folder / f"episodes-{writer}.csv"
    rows = ["algo,task,bound,seed,iterate,mode,reward,cost"]
    rows += [f"{RUN['algo']},{RUN['task']},{RUN['bound']},{RUN['seed']},{j},train,1.0,{c}"
             for j, c in enumerate(_costs(writer))]
    path.write_text("\n".join(rows) + "\n")
    return path


def _train_costs(path: Path) -> np.ndarray:
    from cube import open_cube

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ds = open_cube(path).saferl.load()
    return ds["cost"].sel(**RUN, mode="train", episode=0).values


def race_trial(folder: Path, seed: int, kind: str = "recorder") -> list[str]:
    """Two writers of one new run started together (`kind`: 'recorder' with a seeded `existing=` each, or
    'import' into an existing store): exactly one records, the other is refused in one line naming the
    holder, and the run holds exactly the winner's recording, marked complete."""
    from cube import create_store, read_manifests, validate

    rng = random.Random(seed)
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "r.zarr"
    if kind == "import":
        create_store(path, algos=[RUN["algo"]], tasks=[RUN["task"]], bounds=[RUN["bound"]], seeds=[RUN["seed"]],
                     n_iterates=ITERATES, n_episodes=1)
    attempts, start = FORK.Value("i", 0), FORK.Barrier(2)
    pipes, procs = [], []
    for writer in (1, 2):
        here, there = FORK.Pipe(duplex=False)
        if kind == "recorder":
            args = (str(path), writer, rng.choice(("refuse", "resume", "replace")), seed, attempts, there, start)
            target: Callable[..., None] = _recorder_child
        else:
            args = (str(path), writer, str(_episodes_table(folder, writer)), seed, attempts, there, start)
            target = _import_child
        proc = FORK.Process(target=target, args=args)
        proc.start()
        there.close()
        pipes.append(here)
        procs.append(proc)
    results = []
    for here, proc in zip(pipes, procs, strict=True):
        results.append(here.recv() if here.poll(120) else "no answer")
        proc.join(60)
    problems = [r for r in results if not (r == "recorded" or r.startswith("refused: "))]
    winners = [w for w, r in zip((1, 2), results, strict=True) if r == "recorded"]
    if len(winners) != 1:
        return problems + [f"{len(winners)} writers recorded: {results}"]
    refusal = next(r for r in results if r.startswith("refused: "))
    if "MULTI-LINE" in refusal or not all(w in refusal for w in ("host ", "pid ", "since ")):
        problems.append(f"the refusal does not name the holder in one line: {refusal}")
    costs = _train_costs(path)
    if costs[:ITERATES].tolist() != _costs(winners[0]) or not np.isnan(costs[ITERATES:]).all():
        problems.append(f"the run is not writer {winners[0]}'s recording: {costs.tolist()}")
    status = read_manifests(path)[0]["status"]
    if status != "complete":
        problems.append(f"status {status}")
    problems += validate(path)
    return problems


# -------------------------------------------------------------------------------- killed replacements
def _count_writes(conn: Any, action: Callable[[], None]) -> None:
    from zarr.storage import LocalStore

    keys: list[str] = []
    original = LocalStore.set

    async def counting(self: Any, key: str, value: Any) -> None:
        keys.append(key)
        await original(self, key, value)

    LocalStore.set = counting  # type: ignore[method-assign]
    try:
        action()
        _finish(conn, json.dumps(keys))
    except BaseException:  # noqa: BLE001
        _finish(conn, "crashed: " + traceback.format_exc()[-800:])


def _killed_at(nth: int, action: Callable[[], None]) -> None:
    from faultkit import kill_self_at_write

    kill_self_at_write(lambda key: True, nth)
    try:
        action()
    finally:
        os._exit(0)


def record_old(path: Path) -> None:
    """The old run: ITERATES iterates of writer 1's costs, complete."""
    from cube import Recorder

    with Recorder(path, **RUN) as rec:
        for j, cost in enumerate(_costs(1)):
            rec.train_episodes(j, [1.0], [cost])
            rec.iterate_vars(j, env_steps=100.0 * (j + 1))


def recorder_replace(path: Path) -> Callable[[], None]:
    """A Recorder replacing RUN with writer 2's costs, one flush per iterate."""

    def action() -> None:
        from cube import Recorder

        with Recorder(path, **RUN, existing="replace") as rec:
            for j, cost in enumerate(_costs(2)):
                rec.train_episodes(j, [1.0], [cost])
                rec.iterate_vars(j, env_steps=50.0 * (j + 1))
    return action


def import_replace(path: Path, table: Path) -> Callable[[], None]:
    """`saferl import episodes TABLE --into PATH --replace` (writer 2's costs) in this process."""

    def action() -> None:
        from cube.io.registry import import_runs
        from cube.io.writing import add_runs

        add_runs(import_runs("episodes", [table]), path, fmt="episodes", replace=True)
    return action


def write_keys(base: Path, folder: Path, how: str) -> list[str]:
    """The store keys a replacement `how` ('recorder' or 'import') writes on a copy of `base`, in order: its
    write points are 1..len (a kill just before each)."""
    path = folder / "count.zarr"
    shutil.copytree(base, path)
    action = _replacement(path, folder, how)
    here, there = FORK.Pipe(duplex=False)
    proc = FORK.Process(target=_count_writes, args=(there, action))
    proc.start()
    there.close()
    answer = here.recv() if here.poll(120) else "no answer"
    proc.join(60)
    shutil.rmtree(path)
    if not answer.startswith("["):
        raise AssertionError(f"counting the writes failed: {answer}")
    return json.loads(answer)


def _replacement(path: Path, folder: Path, how: str) -> Callable[[], None]:
    return recorder_replace(path) if how == "recorder" else import_replace(path, _episodes_table(folder, 2))


def replace_kill_trial(base: Path, folder: Path, nth: int, how: str = "recorder") -> list[str]:
    """A copy of `base` (the old run, complete) replaced by `how`, SIGKILLed just before its `nth` store
    write: validate finds nothing, the status is truthful (never complete without every iterate), the run is
    the old recording or a completed prefix of the new one, and the next replacement completes."""
    from cube import read_manifests, validate

    path = folder / f"kill-{how}-{nth}.zarr"
    shutil.copytree(base, path)
    action = _replacement(path, folder, how)
    proc = FORK.Process(target=_killed_at, args=(nth, action))
    proc.start()
    proc.join(120)
    problems = [] if proc.exitcode == -signal.SIGKILL else [f"write {nth}: the writer was not killed ({proc.exitcode})"]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        problems += [f"write {nth}: validate: {p}" for p in validate(path)]
        status = read_manifests(path)[0]["status"]
        costs = _train_costs(path)
    old, new = _costs(1), _costs(2)
    got = [c for c in costs.tolist() if not np.isnan(c)]
    is_old = costs[:ITERATES].tolist() == old
    prefix = len(got)
    is_new_prefix = got == new[:prefix] and np.isnan(costs[prefix:]).all()
    if not (is_old or is_new_prefix):
        problems.append(f"write {nth}: the run mixes recordings: {costs.tolist()}")
    if status == "complete" and got not in (old, new):
        problems.append(f"write {nth}: status complete with {prefix} of {ITERATES} iterates: {got}")
    problems += [f"write {nth}: next replace: {p}" for p in _next_replace_problems(path, folder, how)]
    shutil.rmtree(path, ignore_errors=True)
    return problems


def _next_replace_problems(path: Path, folder: Path, how: str) -> list[str]:
    """The next replacement of the same kind, in a child, completes and leaves exactly the new run."""
    from cube import read_manifests, validate

    here, there = FORK.Pipe(duplex=False)
    action = _replacement(path, folder, how)

    def child(conn: Any) -> None:
        try:
            action()
            _finish(conn, "ok")
        except BaseException:  # noqa: BLE001
            _finish(conn, "crashed: " + traceback.format_exc()[-800:])

    proc = FORK.Process(target=child, args=(there,))
    proc.start()
    there.close()
    answer = here.recv() if here.poll(120) else "no answer"
    proc.join(60)
    if answer != "ok":
        return [answer]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        problems = validate(path)
        costs = _train_costs(path)
        row = read_manifests(path)[0]
    if costs[:ITERATES].tolist() != _costs(2) or row["status"] != "complete":
        problems.append(f"not the new run, complete: {costs.tolist()}, {row['status']}")
    if how == "recorder" and row.get("iterates_done") != ITERATES:
        problems.append(f"iterates_done {row.get('iterates_done')}")
    return problems


def make_old(folder: Path) -> Path:
    """The store every replacement trial starts from (the old run, complete)."""
    base = folder / "old.zarr"
    if not base.exists():
        record_old(base)
    return base


def tally(results: dict[str, list[str]]) -> str:
    """'N trials, K held; first problems: ...' as one JSON-able line."""
    bad = {k: v for k, v in results.items() if v}
    return json.dumps({"trials": len(results), "held": len(results) - len(bad),
                       "problems": {k: v[:2] for k, v in list(bad.items())[:5]}})
