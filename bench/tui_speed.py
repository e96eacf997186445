"""How fast saferl-tui shows the Summary and re-renders after a selection change (headless, App.run_test).

    python bench/tui_speed.py [--demo demo/results.zarr] [--eighth bench/out/tui_eighth.zarr] [--boot 2000]

Cubes (built with ``cube.io.demo.make_demo_cube`` when missing; their sufficient statistics are cached in
the store first, so "start" means opening a cube that ``saferl report`` or the TUI has seen before):

* demo:   4 algos x 4 tasks x 3 bounds x 10 seeds x 60 iterates x 256 episodes (``make demo``)
* eighth: 1/8 paper scale, 30 seeds x 122 iterates x 256 training episodes (1,440 runs)

For each cube it prints, next to its target: time from ``build_app`` to the rendered Summary table;
the time from a key press that changes the selection to the re-rendered Summary, cold (statistics of
that selection not derived yet) and warm (derived before); and, side by side, what the same statistics
cost when called directly through ``cube.stats`` (the floor the TUI can reach); and, without a
target, how long each other view takes the first time it is shown. Times are wall-clock
seconds of one run each (no repetition: every cold case can happen only once per process).
"""

from __future__ import annotations

import argparse
import asyncio
import time
from collections.abc import Callable
from pathlib import Path

from textual.pilot import Pilot
from textual.widgets import DataTable

from cube import stats
from cube.io.demo import make_demo_cube
from cube.selection import Selection
from saferl_tui.app import build_app
from saferl_tui.screens.main import MainScreen

SUMMARY_TARGET_S = 2.0
CHANGE_TARGET_S = 0.3
CUBES = {
    "demo": {"n_seeds": 10, "n_iterates": 60},
    "eighth": {"n_seeds": 30, "n_iterates": 122},
}


def ensure_cube(path: Path, shape: dict) -> float:
    """Build the cube if missing and make sure its sufficient statistics are cached; returns the seconds
    the first pass took (0 if it was already cached)."""
    if not path.exists():
        print(f"building {path} ({shape}) ...", flush=True)
        path.parent.mkdir(parents=True, exist_ok=True)
        make_demo_cube(path, **shape)
    t = time.perf_counter()
    calls = []
    stats.load_suffstats(path, progress=lambda d, n: calls.append(d))
    return time.perf_counter() - t if calls else 0.0


async def wait_until(pilot: Pilot, cond: Callable[[], bool], timeout: float = 600.0) -> float:
    """Poll ``cond`` every few ms while the app runs; returns the time it became true."""
    end = time.perf_counter() + timeout
    while not cond():
        if time.perf_counter() > end:
            raise TimeoutError("the app did not render in time")
        await asyncio.sleep(0.002)
    return time.perf_counter()


def summary_shown(screen: MainScreen, sel_check: Callable[[], bool]) -> Callable[[], bool]:
    def ok() -> bool:
        return screen.shown_selection("summary") == screen.selection and sel_check()

    return ok


async def drive(path: Path, boot: int) -> dict[str, float]:
    out: dict[str, float] = {}
    t0 = time.perf_counter()
    app = build_app(path, boot=boot)
    async with app.run_test(size=(120, 40)) as pilot:
        def screen() -> MainScreen:
            return app.main_screen

        await wait_until(pilot, lambda: isinstance(app.screen, MainScreen) and app.screen.model.info is not None)
        s = screen()
        table = s.query_one("#summary-table", DataTable)
        t = await wait_until(pilot, summary_shown(s, lambda: table.row_count > 0))
        out["start -> Summary"] = t - t0

        async def change(keys: list[str], label: str, focus: str | None = None) -> None:
            if focus:
                s.query_one(focus).focus()
                await pilot.pause()
            for k in keys[:-1]:
                await pilot.press(k)
            before = s.selection
            t1 = time.perf_counter()
            app.simulate_key(keys[-1])  # posts the key without Pilot's wait-for-idle
            await wait_until(pilot, lambda: s.selection != before)
            t2 = await wait_until(pilot, summary_shown(s, lambda: True))
            out[label] = t2 - t1

        await pilot.press("f")
        await pilot.pause()
        await change(["space"], "deselect task (cold)", focus="#sel-tasks")
        await change(["space"], "reselect task (warm)")
        await change(["space"], "deselect task again (warm)")
        await change(["space"], "reselect task (warm) ")
        await change(["space"], "deselect algorithm (pieces derived)", focus="#sel-algos")
        await change(["space"], "reselect algorithm (warm)")
        await change(["escape", "t"], "setting train -> final expl (cold)")
        await change(["t"], "setting final expl -> final greedy (cold)")
        await change(["t"], "setting back to train (warm)")
        await change(["t"], "setting train -> final expl (warm)")
        await change(["t", "t"], "setting back to train (warm) ")

        for key, view in (("2", "conditions"), ("3", "cdf"), ("4", "curves"), ("5", "histograms"), ("6", "runs"),
                          ("1", "summary")):
            t1 = time.perf_counter()
            app.simulate_key(key)
            t2 = await wait_until(pilot, lambda view=view: s.shown_selection(view) == s.selection)
            out[f"view {view} (first time)" if view != "summary" else "back to summary (warm)"] = t2 - t1
    return out


def direct(path: Path, boot: int) -> dict[str, float]:
    """The same statistics straight from cube.stats (no TUI): load, then select + aggregate_table."""
    out = {}
    t = time.perf_counter()
    ss = stats.load_suffstats(path)
    out["stats: load_suffstats (cached)"] = time.perf_counter() - t
    tasks = tuple(str(x) for x in ss["task"].values[1:])
    t = time.perf_counter()
    sub = stats.select(ss.drop_vars("le"), Selection(tasks=tasks))
    stats.aggregate_table(sub, ("train", "final_greedy"), boot=boot, rng_seed=0)
    out["stats: select + aggregate (1 task off)"] = time.perf_counter() - t
    return out


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--demo", default="demo/results.zarr", help="demo cube (10 seeds x 60 iterates)")
    p.add_argument("--eighth", default="bench/out/tui_eighth.zarr", help="1/8-paper-scale cube")
    p.add_argument("--boot", type=int, default=2000, help="bootstrap replicates (paper: 2000)")
    p.add_argument("--only", choices=tuple(CUBES), help="run one cube only")
    args = p.parse_args()
    for name, shape in CUBES.items():
        if args.only and name != args.only:
            continue
        path = Path(getattr(args, name))
        first = ensure_cube(path, shape)
        print(f"\n== {name}: {path}  ({shape['n_seeds']} seeds x {shape['n_iterates']} iterates, B={args.boot})")
        if first:
            print(f"   first pass (sufficient statistics, one time per cube): {first:.2f} s")
        tui = asyncio.run(drive(path, args.boot))
        lib = direct(path, args.boot)
        print(f"   {'measure':42s} {'seconds':>8s} {'target':>7s} {'ratio':>6s}")
        for label, secs in tui.items():
            if label.startswith("view "):
                print(f"   {label:42s} {secs:8.3f} {'-':>7s} {'-':>6s}")
                continue
            target = SUMMARY_TARGET_S if label.startswith("start") else CHANGE_TARGET_S
            print(f"   {label:42s} {secs:8.3f} {target:7.2f} {secs / target:6.2f}")
        for label, secs in lib.items():
            print(f"   {label:42s} {secs:8.3f} {'':>7s} {'':>6s}")


if __name__ == "__main__":
    main()
