"""The Status view (key 8, issue 25): every run's status as `cube.store.runstatus` reads it, stalled and
failed runs flagged, sortable and filterable like Conditions, totals per algorithm and task."""

from __future__ import annotations

import os
import socket
from datetime import UTC, datetime
from pathlib import Path

from textual.widgets import DataTable

from cube import CubeWriter, RunKey, create_store
from cube.store.locks import WRITE_SEQ
from cube.store.runstatus import read_run_status, totals
from saferl_tui.app import SaferlApp, build_app
from saferl_tui.views.runstatus import TOTALS_HEADER
from tests.test_tui_follow import _write, cells, sync
from tests.tuiwait import until_quiet

T0 = 1_900_000_000.0
"""Every run's last write (chunk mtimes set so); the app's clock is T0 + AGO."""
AGO = 900.0
STALL_S = 600.0


def status_store(path: Path) -> Path:
    """2 algos x 1 task x 1 bound x 3 seeds of every status: ppo complete / failed / pending, ppo_lag
    running (this process, stalled: no write for AGO > STALL_S seconds) / stopped / complete."""
    create_store(path, algos=("ppo", "ppo_lag"), tasks=("goal",), bounds=(15.0,), seeds=range(3), n_iterates=4,
                 n_episodes=8, iterate_vars=("env_steps",))
    writer = CubeWriter(path)
    started = datetime.fromtimestamp(T0 - 3600.0, tz=UTC).isoformat()
    runs = {("ppo", 0): ("complete", 4, {}), ("ppo", 1): ("partial", 2, {"error": "NaN in the loss"}),
            ("ppo_lag", 0): ("partial", 3, {"pid": os.getpid(), "host": socket.gethostname(), "started": started,
                                            "slurm_job_id": "4242"}),
            ("ppo_lag", 1): ("partial", 1, {}), ("ppo_lag", 2): ("complete", 4, {})}
    for (algo, seed), (status, done, manifest) in runs.items():
        key = RunKey(algo, "goal", 15.0, seed)
        _write(writer, key, range(done))
        writer.set_run_manifest(key, status=status, manifest=manifest)
    for folder, _dirs, files in os.walk(path / WRITE_SEQ / "c"):
        for name in files:
            os.utime(Path(folder) / name, (T0, T0))
    return path


def app_for(path: Path) -> SaferlApp:
    return build_app(path, boot=20, follow=False, stall_s=STALL_S, clock=lambda: T0 + AGO)


def table(app: SaferlApp, which: str = "#status-table") -> DataTable:
    return app.main_screen.view("status").query_one(which, DataTable)


@sync
async def test_status_view_shows_what_the_status_reader_reads(tmp_path: Path) -> None:
    path = status_store(tmp_path / "p.zarr")
    want = read_run_status(path, stall_s=STALL_S)
    app = app_for(path)
    async with app.run_test(size=(160, 40)) as pilot:
        await until_quiet(pilot)
        await pilot.press("8")
        await until_quiet(pilot)
        rows = cells(table(app))
        header = [str(c.label.plain).removesuffix(" ▲") for c in table(app).columns.values()]
        assert len(rows) == len(want) == 6
        by_run = {tuple(r[:4]): dict(zip(header, r, strict=True)) for r in rows}
        for run in want:
            row = by_run[(run.key.algo, run.key.task, f"{run.key.bound:g}", str(run.key.seed))]
            assert row["status"] == run.status
            assert row["iterates"] == ("" if run.iterates is None else f"{run.iterates}/{run.n_iterates}")
        running = by_run[("ppo_lag", "goal", "15", "0")]
        assert "stalled 15m" in running["flags"] and running["slurm"] == "4242"
        assert running["last write"] == "15m ago" and running["host"] == socket.gethostname()
        assert "NaN in the loss" in by_run[("ppo", "goal", "15", "1")]["flags"]
        assert [r[4] for r in rows] == ["running", "stopped", "failed", "pending", "complete", "complete"], \
            "attention first"
        sums = totals(want)
        total_rows = cells(table(app, "#status-totals"))
        assert [(r[0], r[1], r[2]) for r in total_rows] == [(g["algo"], g["task"], str(g["runs"])) for g in sums]


@sync
async def test_status_view_and_saferl_status_show_a_run_in_the_same_text(tmp_path: Path) -> None:
    """The one row formatter: for every run, the TUI's cells and `saferl status`'s cells agree on iterates,
    env steps, steps/s (0.833 for the running run: 3,000 steps in an hour), ETA, host, job, last write and
    flags; totals too."""
    from cube.cli.status import RUN_COLUMNS, run_cells, totals_table
    from cube.store.runstatus import RunStatusReader

    path = status_store(tmp_path / "p.zarr")
    runs = RunStatusReader(path, STALL_S).read(now=T0 + AGO)  # what the app's clock says
    want = {(r.key.algo, r.key.seed): run_cells(r, now=T0 + AGO) for r in runs}
    same = {"iterates": "iterates", "steps": "env steps", "steps/s": "steps/s", "eta": "ETA", "host": "host",
            "slurm": "job", "last write": "last write", "flags": "flags"}
    app = app_for(path)
    async with app.run_test(size=(160, 40)) as pilot:
        await until_quiet(pilot)
        await pilot.press("8")
        await until_quiet(pilot)
        header = [str(c.label.plain).removesuffix(" ▲") for c in table(app).columns.values()]
        for row in cells(table(app)):
            tui = dict(zip(header, row, strict=True))
            cli = dict(zip(RUN_COLUMNS, want[(tui["algo"], int(tui["seed"]))], strict=True))
            assert {h: tui[h] for h in same} == {h: cli[c] for h, c in same.items()}, tui
        running = next(r for r in cells(table(app)) if r[4] == "running")
        assert running[header.index("steps/s")] == "0.833" and running[header.index("last write")] == "15m ago"
        cli_totals = totals_table(runs)
        tui_totals = cells(table(app, "#status-totals"))
        cli_header = [str(c.header) for c in cli_totals.columns]
        for tui_name, cli_name in (("steps", "env steps"), ("steps/s", "steps/s"), ("eta", "ETA")):
            assert [r[TOTALS_HEADER.index(tui_name)] for r in tui_totals] == \
                [str(c) for c in cli_totals.columns[cli_header.index(cli_name)].cells], tui_name


@sync
async def test_status_sorts_and_filters_like_conditions(tmp_path: Path) -> None:
    path = status_store(tmp_path / "p.zarr")
    app = app_for(path)
    async with app.run_test(size=(160, 40)) as pilot:
        await until_quiet(pilot)
        await pilot.press("8")
        await until_quiet(pilot)
        view = app.main_screen.view("status")
        await pilot.press("greater_than_sign")  # status -> iterates
        assert view.sort_key == "iterates"
        its = [r[5] for r in cells(table(app)) if r[5]]
        assert its == sorted(its)
        await pilot.press("r")
        assert [r[5] for r in cells(table(app)) if r[5]] == sorted(its, reverse=True)
        await pilot.press("slash", *"status:failed", "enter")
        rows = cells(table(app))
        assert [r[:5] for r in rows] == [["ppo", "goal", "15", "1", "failed"]]
        assert "1 of 6 rows match" in str(view.query_one("#status-title").render())


@sync
async def test_a_netcdf_cube_says_run_status_needs_a_store(tmp_path: Path) -> None:
    import xarray as xr

    from cube import open_cube

    zarr_path = status_store(tmp_path / "p.zarr")
    nc = tmp_path / "p.nc"
    ds = open_cube(zarr_path).load()
    ds.attrs = {k: v for k, v in ds.attrs.items() if isinstance(v, str | int | float) and not isinstance(v, bool)}
    ds.to_netcdf(nc)
    assert isinstance(ds, xr.Dataset)
    app = build_app(nc, boot=20)
    async with app.run_test(size=(120, 40)) as pilot:
        await until_quiet(pilot)
        await pilot.press("8")
        await until_quiet(pilot)
        status = str(app.main_screen.view("status").query_one(".view-status").render())
        assert "netCDF" in status and app.is_running


def test_reader_keeps_unchanged_runs_and_sees_new_claims_and_writes(tmp_path: Path) -> None:
    """A reader reuses the status of runs that cannot have changed (sequence still, not running, same claim)
    but sees a claim taken without any write, and a write to a complete run."""
    import json

    from cube.store.claims import claim_path
    from cube.store.locks import SeqWatch
    from cube.store.runstatus import RunStatusReader

    path = status_store(tmp_path / "p.zarr")
    watch, reader = SeqWatch(path), RunStatusReader(path, stall_s=STALL_S)
    first = {(r.key.algo, r.key.seed): r for r in reader.read(now=T0 + AGO, seqs=watch.poll()[1])}
    assert first[("ppo", 2)].status == "pending" and first[("ppo_lag", 2)].status == "complete"
    again = {(r.key.algo, r.key.seed): r for r in reader.read(now=T0 + AGO, seqs=watch.poll()[1])}
    assert again[("ppo_lag", 2)] is first[("ppo_lag", 2)] and again[("ppo", 2)] is first[("ppo", 2)]
    claim = claim_path(path, RunKey("ppo", "goal", 15.0, 2))
    claim.parent.mkdir(parents=True, exist_ok=True)
    claim.write_text(json.dumps({"host": socket.gethostname(), "pid": os.getpid()}))
    writer = CubeWriter(path)
    _write(writer, RunKey("ppo_lag", "goal", 15.0, 2), range(3, 4))
    now = {(r.key.algo, r.key.seed): r for r in reader.read(now=T0 + AGO, seqs=watch.poll()[1])}
    assert now[("ppo", 2)].status == "running"  # claimed: no write needed to see it
    assert now[("ppo_lag", 2)] is not first[("ppo_lag", 2)]
    assert now[("ppo_lag", 2)].last_write != first[("ppo_lag", 2)].last_write  # its sequence moved: read again
    fresh = {(r.key.algo, r.key.seed): r for r in read_run_status(path, stall_s=STALL_S)}
    for k, run in now.items():
        assert (run.status, run.iterates, run.env_steps, run.last_write) == (
            fresh[k].status, fresh[k].iterates, fresh[k].env_steps, fresh[k].last_write), k
