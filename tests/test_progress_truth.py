"""One truth about a sweep's progress (issue 35): the trainer's live display, `saferl status --format json` and
the TUI's Status view read one model (`cube.store.progress`), so at the same moment they agree on each run's
phase, iterate and steps/s; the trainer's bars never pass their totals, and a resumed run's bar starts where
the run stands. A toy sweep (two seeds in one vmapped group), interrupted and resumed.
"""

from __future__ import annotations

import contextlib
import io
import json
from pathlib import Path
from typing import Any

import pytest

from cube.store.progress import Progress, ProgressLog, combine, read_record, run_progress, sweep_eta
from cube.store.runstatus import eta_text, phase_text

J = 6


def test_rate_is_over_the_last_iterates_and_leaves_out_the_compile() -> None:
    record = {"phase": "training", "since": 100.0, "n_iterates": 10, "first": 0,
              "iterates": [[0, 100.0, 60.0], [1, 200.0, 2.0], [2, 300.0, 4.0]]}
    p = run_progress(record, now=110.0)
    assert p.steps_per_s == pytest.approx(200 / 6) and p.over == 2, "iterate 0 (compile) left out"
    assert p.iterates == 3 and p.eta_s == pytest.approx(7 * 3.0) and p.phase_s == pytest.approx(10.0)
    long = {**record, "iterates": [[j, 100.0 * (j + 1), 1.0 + (j > 3)] for j in range(9)]}
    assert run_progress(long, window=5).steps_per_s == pytest.approx(500 / 10) and run_progress(long).over == 5
    assert run_progress({**record, "iterates": record["iterates"][:1]}).eta_s is None, "no ETA before 2 iterates"
    compiling = run_progress({**record, "phase": "compiling"})
    assert compiling.eta_s is None and eta_text(compiling.eta_s, True) == "—"
    resumed = {**record, "first": 4, "iterates": [[3, 400.0, 0.0], [4, 500.0, 70.0], [5, 600.0, 2.0]]}
    assert run_progress(resumed).steps_per_s == pytest.approx(50.0) and run_progress(resumed).iterates == 6
    assert phase_text("compiling", 130.0) == "compiling 2m" and phase_text("training", 5.0) == "training"


def test_sweep_eta_counts_pending_runs_compiles() -> None:
    running = [Progress("training", eta_s=10.0), Progress("training", eta_s=20.0)]
    assert sweep_eta(running, 0, None) == 20.0
    assert sweep_eta(running, 3, 100.0) == 20.0 + 2 * 100.0, "3 pending runs, 2 at a time"
    assert sweep_eta(running, 3, None) is None, "pending runs and nothing measured: unknown"
    assert sweep_eta([*running, Progress("compiling")], 0, 100.0) is None
    assert combine(running).steps_per_s is None and combine(running).eta_s == 20.0


def test_progress_log_round_trips_through_the_store(tmp_path: Path) -> None:
    from cube.schema import RunKey

    keys = [RunKey("ppo", "toy", 2.0, s) for s in (0, 1)]
    log = ProgressLog(tmp_path, keys, 4, 0, {}, "stamp")
    assert read_record(tmp_path, keys[1])["phase"] == "compiling"
    log.iterate(0, {k: 10.0 for k in keys}, 30.0)
    log.iterate(1, {k: 20.0 for k in keys}, 1.0)
    log.phase("evaluating")
    stored = run_progress(read_record(tmp_path, keys[0]), now=1e10)
    assert stored == log.progress(now=1e10)[keys[0]] and stored.phase == "evaluating"
    assert stored.steps_per_s == pytest.approx(10.0) and stored.compile_s == pytest.approx(30.0)
    assert stored.eta_s is None  # an evaluation's time is not known from the training pace: '—', never '0s'
    log.phase("training")
    assert run_progress(read_record(tmp_path, keys[0]), now=1e10).eta_s == pytest.approx(2.0)
    log.start_at(3, {keys[0]: 30.0})  # a resume found its point after the log began
    resumed = run_progress(read_record(tmp_path, keys[0]))
    assert (resumed.iterates, resumed.env_steps, resumed.steps_per_s) == (3, 30.0, None)


def test_compiler_messages_go_to_a_log_named_on_screen_during_the_live_display(
        tmp_path: Path, capfd: pytest.CaptureFixture[str]) -> None:
    """XLA writes its `slow_operation_alarm` to fd 2 from C++: the live display sends fd 2 to `<out>.stderr.log`
    (named on screen) and keeps the terminal (the fd 2 it found) for itself; an empty log is removed at the end."""
    import os

    from rich.console import Console

    from cube.schema import RunKey
    from train.cli import SweepProgress
    from train.config import TrainConfig

    for alarm in (b"E slow_operation_alarm.cc:140] Very slow compile?\n", b""):
        progress = SweepProgress([RunKey("ppo", "toy", 1.0, 0)], TrainConfig(), out=tmp_path / "x.zarr")
        progress.plain, progress.console = False, Console(stderr=True, force_terminal=True, width=200)
        progress.bar.live.console = progress.console
        with progress:
            os.write(2, alarm)
        screen = capfd.readouterr().err
        assert "all runs" in screen and "slow_operation_alarm" not in screen, screen
        if alarm:
            assert progress.log_path.read_bytes() == alarm
            assert f"compiler messages (XLA) go to {progress.log_path}" in screen
            progress.log_path.unlink()
    assert not progress.log_path.exists(), "an empty log is removed"


def test_a_remote_sweeps_display_reads_the_records_its_workers_write(tmp_path: Path) -> None:
    """Dask and SLURM workers call no display hooks here: the display reads every unfinished run's record
    written since the sweep began (an older attempt's record is not shown as training), and its sweep ETA
    counts the pending run's compile and iterates as measured on the running one."""
    from cube.schema import RunKey
    from train.cli import SweepProgress
    from train.config import TrainConfig

    keys = [RunKey("ppo", "toy", 1.0, s) for s in range(3)]
    ProgressLog(tmp_path, keys[2:], 4, 0, {}, "an old attempt").phase("training")
    progress = SweepProgress(keys, TrainConfig(), out=tmp_path, remote=True)
    progress.t_start += 1e-6
    log = ProgressLog(tmp_path, keys[:1], 4, 0, {}, "now")
    log.iterate(0, {keys[0]: 10.0}, 5.0)
    log.iterate(1, {keys[0]: 20.0}, 1.0)
    assert set(progress.state()) == {str(keys[0])}
    sweep = progress.sweep()
    assert sweep.steps_per_s == pytest.approx(10.0)
    assert sweep.eta_s == pytest.approx(2 * 1.0 + 2 * (5.0 + 4 * 1.0)), "2 iterates left, then 2 runs one by one"


# ---------------------------------------------------------------------------------------- the toy sweep
pytest.importorskip("jax")


def _status_json(out: Path) -> dict[str, dict[str, Any]]:
    from cube.cli.entry import main

    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        assert main(["status", str(out), "--format", "json"]) == 0
    body = json.loads(buf.getvalue())
    return {f"{r['algo']}/{r['task']}/d={r['bound']:g}/seed={r['seed']}": r for r in body["runs"]}


def _tui_rows(tui: list) -> dict[str, dict[str, Any]]:
    """The Status view's rows from the TUI's model (`tui`: [model, selection], loaded once, as the app keeps it)."""
    from saferl_tui.views.runstatus import RunStatusView

    rows, _ = RunStatusView.fetch(tui[0], tui[1], ())
    return {f"{r['algo']}/{r['task']}/d={r['bound']:g}/seed={r['seed']}": r for r in rows}


class Moments:
    """Wraps `SweepProgress`'s hooks: at each start and each iterate, reads the three tools and checks the bars."""

    def __init__(self, out: Path, stop_after: int | None = None) -> None:
        self.out, self.stop_after, self.seen, self.starts = out, stop_after, [], []
        self.errors: list[str] = []
        self.tui: list = []
        """What disagreed (a hook's AssertionError would only fail the run, which the sweep retries)."""

    def install(self, monkeypatch: pytest.MonkeyPatch) -> None:
        from train.cli import SweepProgress

        start, advance = SweepProgress.start_run, SweepProgress.advance
        moments = self

        def start_run(progress: SweepProgress, key: Any, config: Any) -> int:
            tid = start(progress, key, config)
            moments.starts.append(progress.bar.tasks[-1].completed)
            moments.look(progress)
            return tid

        def advance_(progress: SweepProgress, tid: int, steps: int, res: Any, key: Any, elapsed: float) -> None:
            advance(progress, tid, steps, res, key, elapsed)
            moments.look(progress)
            if moments.stop_after is not None and res.iterates_done >= moments.stop_after:
                raise KeyboardInterrupt

        monkeypatch.setattr(SweepProgress, "start_run", start_run)
        monkeypatch.setattr(SweepProgress, "advance", advance_)

    def look(self, progress: Any) -> None:
        try:
            self._look(progress)
        except AssertionError as exc:
            self.errors.append(str(exc))

    def _look(self, progress: Any) -> None:
        for task in progress.bar.tasks:
            assert task.total is not None and task.completed <= task.total, (task.description, task.completed)
        display = progress.state()
        if not self.tui:
            from saferl_tui.model import CubeModel

            model = CubeModel(self.out, boot=10)
            self.tui = [model, model.load().default_selection()]
        status, tui = _status_json(self.out), _tui_rows(self.tui)
        assert display, "the display follows the runs training"
        for run, p in display.items():
            s, t = status[run], tui[run]
            assert s["status"] == "running" and s["phase"] == p.phase == t["phase"], (run, p, s["phase"], t["phase"])
            assert s["iterates"] == p.iterates == t["iterates"], (run, p.iterates, s["iterates"], t["iterates"])
            if p.steps_per_s is None:
                assert s["steps_per_s"] is None and t["steps/s"] is None and s["text"]["ETA"] in ("—", "")
            else:
                assert s["steps_per_s"] == pytest.approx(p.steps_per_s, rel=0.05)
                assert t["steps/s"] == pytest.approx(p.steps_per_s, rel=0.05)
                assert s["rate_over_iterates"] == p.over >= 1
            self.seen.append((run, p.phase, p.iterates, p.steps_per_s))


def _train(out: Path, toml: Path) -> int:
    from cube.cli.entry import main

    return main(["train", "--algos", "ppo", "--tasks", "toy", "--bounds", "4", "--seeds", "0,1", "--parallel-runs",
                 "2", "--config", str(toml), "--iterates", str(J), "--no-progress", "--out", str(out)])


def test_trainer_status_and_tui_agree_through_an_interrupted_and_resumed_sweep(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from tests.toyconfig import toy_config_toml

    monkeypatch.setenv("SAFERL_ENABLE_TOY", "1")
    toml = tmp_path / "toy.toml"
    toml.write_text(toy_config_toml(J, 8))
    out = tmp_path / "toy.zarr"
    first = Moments(out, stop_after=4)
    first.install(monkeypatch)
    assert _train(out, toml) == 130
    assert not first.errors, first.errors
    runs = {r for r, *_ in first.seen}
    assert len(runs) == 2
    assert [(p, it) for r, p, it, _ in first.seen if r == min(runs)][0] == ("compiling", 0)
    assert any(rate is not None for *_, rate in first.seen), "a rate once two iterates landed"
    assert first.starts == [0]

    monkeypatch.undo()
    monkeypatch.setenv("SAFERL_ENABLE_TOY", "1")
    again = Moments(out)
    again.install(monkeypatch)
    assert _train(out, toml) == 0
    assert not again.errors, again.errors
    assert again.starts == [4], "the resumed bar starts at the resume point (iterate 3 evaluated)"
    phases = [(p, it) for r, p, it, _ in again.seen if r == min(runs)]
    assert phases[0] == ("compiling", 4) and phases[-1][1] == J
    status = _status_json(out)
    assert {r["phase"] for r in status.values()} == {"complete"} and all(r["eta_s"] is None for r in status.values())
