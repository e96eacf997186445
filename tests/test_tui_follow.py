"""Follow mode (issue 25): a writer process writes the store while the TUI follows it.

Each poll is started by the test (`MainScreen.poll_store`, what the timer calls; the timer itself is set
to an hour) and waited for by condition (`until_quiet`), never by sleeping. The numbers after an update
must equal a cold load of the same store state (incremental == full pass).
"""

from __future__ import annotations

import asyncio
import functools
import os
import shutil
import subprocess
import sys
from collections.abc import Callable, Coroutine
from pathlib import Path

import numpy as np
import xarray as xr
from textual.widgets import DataTable

from cube import MODES, CubeWriter, RunKey, create_store
from cube.stats import load_suffstats
from saferl_tui.app import SaferlApp, build_app
from tests.tuiwait import until_quiet

BOOT = 20
N_ITER = 4
PARTIAL = RunKey("ppo_lag", "goal", 15.0, 1)
"""The run still training: iterates 0 and 1 written, status partial."""
CLOCK = 2_000_000_000.0


def _episodes(key: RunKey, iterate: int) -> tuple[np.ndarray, np.ndarray]:
    """Deterministic (reward, cost) of 6 episodes of one run and iterate."""
    rng = np.random.default_rng([hash(key.algo) % 97, int(key.seed), iterate])
    reward = rng.normal(10.0 + iterate, 1.0, 6)
    return reward, rng.gamma(2.0, 8.0 * (1.0 + 0.3 * int(key.algo == "ppo")), 6)


def _write(writer: CubeWriter, key: RunKey, iterates: range) -> None:
    for j in iterates:
        for mode in MODES:
            writer.write_episodes(key, mode, j, *_episodes(key, j))
        writer.write_iterate_vars(key, j, {"env_steps": float((j + 1) * 1000)})


def make_store(tmp_path: Path) -> Path:
    """2 algos x 1 task x 1 bound x 2 seeds x 4 iterates; every run complete but PARTIAL (2 iterates)."""
    path = tmp_path / "live.zarr"
    create_store(path, algos=("ppo", "ppo_lag"), tasks=("goal",), bounds=(15.0,), seeds=range(2), n_iterates=N_ITER,
                 n_episodes=8, iterate_vars=("env_steps",))
    writer = CubeWriter(path)
    for algo in ("ppo", "ppo_lag"):
        for seed in range(2):
            key = RunKey(algo, "goal", 15.0, seed)
            done = key == PARTIAL
            _write(writer, key, range(2 if done else N_ITER))
            writer.set_run_manifest(key, status="partial" if done else "complete")
    return path


# ------------------------------------------------------------------ writers (run in their own process)
def finish_run(path: str) -> None:
    """Write PARTIAL's iterates 2 and 3 and mark it complete."""
    writer = CubeWriter(path)
    _write(writer, PARTIAL, range(2, N_ITER))
    writer.set_run_manifest(PARTIAL, status="complete")


def fail_run(path: str) -> None:
    """Write PARTIAL's iterate 2, then record that the sweep gave up on it."""
    writer = CubeWriter(path)
    _write(writer, PARTIAL, range(2, 3))
    writer.set_run_manifest(PARTIAL, status="partial", manifest={"error": "NaN in the loss", "retries": 2})


def die_mid_write(path: str) -> None:
    """Write PARTIAL's iterate 2, killed (SIGKILL) while writing its cost chunk: an interrupted bracket."""
    from faultkit import kill_self_at_write

    kill_self_at_write(lambda key: key.startswith("cost/c/"))
    _write(CubeWriter(path), PARTIAL, range(2, 3))


def grow(path: str) -> None:
    """A new seed of ppo with 6 iterates (the grid grows in seeds and iterates)."""
    import cube

    with cube.Recorder(path, algo="ppo", task="goal", bound=15.0, seed=2) as rec:
        for j in range(6):
            rec.train_episodes(j, *_episodes(RunKey("ppo", "goal", 15.0, 2), j))


# ------------------------------------------------------------------ helpers
TESTS = Path(__file__).resolve().parent


def run_writer(writer: Callable[[str], None], path: Path) -> int:
    """Run `writer(path)` in a new Python process (a real writer, as `saferl train` is one); its exit code.
    A subprocess with its own standard streams: the TUI under test holds the terminal's."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(TESTS.parent), str(TESTS)])}
    code = f"from tests.test_tui_follow import {writer.__name__} as w; w({str(path)!r})"
    done = subprocess.run([sys.executable, "-c", code], stdin=subprocess.DEVNULL, capture_output=True, env=env,
                          cwd=TESTS.parent, timeout=300, check=False)
    return done.returncode

def cells(table: DataTable) -> list[list[str]]:
    return [[str(getattr(c, "plain", c)) for c in table.get_row_at(i)] for i in range(table.row_count)]


def summary_rows(app: SaferlApp) -> list[list[str]]:
    return cells(app.main_screen.view("summary").query_one("#summary-table", DataTable))


def status_rows(app: SaferlApp) -> list[list[str]]:
    return cells(app.main_screen.view("status").query_one("#status-table", DataTable))


async def poll(pilot) -> None:
    """One poll of the store, as the timer makes it, and everything it starts."""
    pilot.app.main_screen.poll_store()
    await until_quiet(pilot)


def app_for(path: Path, **kwargs) -> SaferlApp:
    return build_app(path, boot=BOOT, follow_interval=3600.0, clock=lambda: CLOCK, **kwargs)


def check_same_as_full_pass(app: SaferlApp, path: Path) -> None:
    """The followed statistics equal a full pass over the store as it is now (no cache)."""
    full = load_suffstats(path, cache=False)
    mine = app.model.ss
    assert mine is not None
    for name in ("n", "sum_r", "sum_c"):
        if name in full:
            xr.testing.assert_allclose(mine[name], full[name])
    xr.testing.assert_equal(mine["le"], full["le"])


# ------------------------------------------------------------------ tests
def sync(test: Callable[..., Coroutine]) -> Callable[..., None]:
    """Run an async test in its own event loop (the suite has no async plugin)."""

    @functools.wraps(test)
    def run(*args, **kwargs) -> None:
        asyncio.run(test(*args, **kwargs))

    return run


@sync
async def test_follow_shows_a_finished_run_as_a_cold_load_does(tmp_path: Path) -> None:
    path = make_store(tmp_path)
    app = app_for(path)
    async with app.run_test(size=(120, 40)) as pilot:
        await until_quiet(pilot)
        screen = app.main_screen
        assert screen.following, "a partial run: follow mode is on by default"
        before = summary_rows(app)
        await pilot.press("8")
        await until_quiet(pilot)
        assert any(r[:5] == ["ppo_lag", "goal", "15", "1", "stopped"] and r[5] == "2/4" for r in status_rows(app))
        table = screen.view("status").query_one("#status-table", DataTable)
        table.move_cursor(row=2)
        await pilot.press("1")
        await until_quiet(pilot)
        idle = screen.follower.step() if screen.follower else "no follower"
        assert idle is None, "nothing written: a poll reports nothing"

        assert run_writer(finish_run, path) == 0
        await poll(pilot)
        assert screen.last_update is not None and screen.last_update.changed == 1
        assert "1 run changed" in str(screen.query_one("#infobar").render())
        after = summary_rows(app)
        assert after != before
        check_same_as_full_pass(app, path)
        await pilot.press("8")
        await until_quiet(pilot)
        followed_status = status_rows(app)
        assert table.cursor_row == 2, "the refresh keeps the cursor"
        assert screen.focused is table
        assert all(r[4] == "complete" for r in followed_status)

    cold = app_for(path, follow=False)
    async with cold.run_test(size=(120, 40)) as pilot:
        await until_quiet(pilot)
        assert summary_rows(cold) == after
        await pilot.press("8")
        await until_quiet(pilot)
        assert status_rows(cold) == followed_status


@sync
async def test_a_failing_run_is_one_line_and_flagged(tmp_path: Path) -> None:
    path = make_store(tmp_path)
    app = app_for(path)
    async with app.run_test(size=(120, 40)) as pilot:
        await until_quiet(pilot)
        assert run_writer(fail_run, path) == 0
        await poll(pilot)
        screen = app.main_screen
        notes = [n for n in screen.follow_log if "failed" in n]
        assert len(notes) == 1 and "NaN in the loss" in notes[0] and "\n" not in notes[0]
        check_same_as_full_pass(app, path)
        await pilot.press("8")
        await until_quiet(pilot)
        row = next(r for r in status_rows(app) if r[:4] == ["ppo_lag", "goal", "15", "1"])
        assert row[4] == "failed" and "NaN in the loss" in row[-1] and row[5] == "3/4"


@sync
async def test_a_writer_killed_mid_write_is_one_line_and_nothing_is_lost(tmp_path: Path) -> None:
    path = make_store(tmp_path)
    app = app_for(path)
    async with app.run_test(size=(120, 40)) as pilot:
        await until_quiet(pilot)
        before = app.model.ss["n"].sel(algo="ppo").copy()
        assert run_writer(die_mid_write, path) != 0
        await poll(pilot)
        screen = app.main_screen
        assert any("interrupted" in n.lower() for n in screen.follow_log), screen.follow_log
        assert app.is_running and screen.following
        xr.testing.assert_equal(app.model.ss["n"].sel(algo="ppo"), before)
        status = app.model.ss["run_status"].sel(algo="ppo_lag", task="goal", bound=15.0, seed=1)
        assert int(status) != 2, "still partial"
        assert summary_rows(app), "the Summary still shows"


@sync
async def test_a_grown_grid_adds_the_new_seed_and_iterates(tmp_path: Path) -> None:
    path = make_store(tmp_path)
    app = app_for(path)
    async with app.run_test(size=(120, 40)) as pilot:
        await until_quiet(pilot)
        assert run_writer(grow, path) == 0
        await poll(pilot)
        screen = app.main_screen
        assert any(n.startswith("the grid grew: seeds 2 → 3") and "iterates 4 → 6" in n for n in screen.follow_log)
        assert screen.selection is not None and screen.selection.seeds == (0, 1, 2)
        check_same_as_full_pass(app, path)
        await pilot.press("8")
        await until_quiet(pilot)
        assert len(status_rows(app)) == 6


@sync
async def test_a_deleted_store_stops_following_and_keeps_the_numbers(tmp_path: Path) -> None:
    path = make_store(tmp_path)
    app = app_for(path)
    async with app.run_test(size=(120, 40)) as pilot:
        await until_quiet(pilot)
        shown = summary_rows(app)
        shutil.rmtree(path)
        await poll(pilot)
        screen = app.main_screen
        assert [n for n in screen.follow_log if "is gone" in n] and not screen.following
        assert summary_rows(app) == shown and app.is_running
        await pilot.press("w")  # follow on again: the store is still gone, one more line, no crash
        await until_quiet(pilot)
        assert app.is_running


@sync
async def test_w_toggles_follow_mode_and_no_follow_keeps_it_off(tmp_path: Path) -> None:
    path = make_store(tmp_path)
    app = app_for(path, follow=False)
    async with app.run_test(size=(120, 40)) as pilot:
        await until_quiet(pilot)
        screen = app.main_screen
        assert not screen.following
        await pilot.press("w")
        await until_quiet(pilot)
        assert screen.following and "following" in str(screen.query_one("#infobar").render())
        await pilot.press("w")
        assert not screen.following


@sync
async def test_the_timer_polls_by_itself(tmp_path: Path) -> None:
    """With a short --follow-interval the TUI picks the writer's run up with no key pressed."""
    import time

    path = make_store(tmp_path)
    app = build_app(path, boot=BOOT, follow_interval=0.1)
    async with app.run_test(size=(120, 40)) as pilot:
        await until_quiet(pilot)
        screen = app.main_screen
        assert run_writer(finish_run, path) == 0
        deadline = time.monotonic() + 120.0
        while screen.last_update is None:  # a condition, polled: the timer fires on its own
            assert time.monotonic() < deadline, "the timer never picked the write up"
            await pilot.pause(0.05)
        await until_quiet(pilot)
        assert screen.last_update.changed == 1
        check_same_as_full_pass(app, path)
