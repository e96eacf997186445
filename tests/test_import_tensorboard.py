"""`saferl import tensorboard`: event files written by the real writer (tensorboardX's SummaryWriter and
EventsWriter, in the test), every event kept, episodes round-tripped against `cube.Recorder`."""

from __future__ import annotations

import json
import shutil
import struct
from pathlib import Path

import numpy as np
import pytest

from cube import open_cube, read_manifests
from cube.cli import main
from cube.io.tfrecord import TagTable, scalars
from tests.import_roundtrip import assert_same_metrics, record, stored_episodes

tensorboardX = pytest.importorskip("tensorboardX")
from tensorboardX.event_file_writer import EventsWriter  # noqa: E402
from tensorboardX.proto import event_pb2, summary_pb2, tensor_pb2, tensor_shape_pb2  # noqa: E402

RUN = "SafetyPointGoal1-v0__ppo_lag__3__1700000000"  # CleanRL: f"{env_id}__{exp_name}__{seed}__{int(time.time())}"
STEPS_PER_ROLLOUT = 4 * 128  # 4 envs x 128 steps


def _err(capsys: pytest.CaptureFixture[str]) -> str:
    lines = [ln for ln in capsys.readouterr().err.splitlines() if ln.startswith("error:")]
    assert len(lines) == 1, lines
    return lines[0]


def _cleanrl_run(root: Path, updates: int = 4, seed: int = 0) -> dict[tuple[str, int], tuple[np.ndarray, np.ndarray]]:
    """A CleanRL-style run (ppo_continuous_action.py with a cost): per finished episode
    `add_scalar("charts/episodic_return", r, global_step)` (+ length, cost), several at one step with
    vector envs; per update `charts/learning_rate` and `losses/value_loss`. Returns the episodes by iterate
    (float32, as the event file keeps them)."""
    rng = np.random.default_rng(seed)
    writer = tensorboardX.SummaryWriter(str(root / "runs" / RUN))
    episodes: dict[tuple[str, int], tuple[list, list]] = {}
    step = 0
    for update in range(updates):
        for _ in range(128):
            step += 4
            for _ in range(rng.choice([0] * 30 + [1, 2, 3])):  # vector envs: several episodes at one step
                r, c = np.float32(rng.normal(10, 5)), np.float32(rng.gamma(2.0, 12.0))
                writer.add_scalar("charts/episodic_return", r, step)
                writer.add_scalar("charts/episodic_length", 1000, step)
                writer.add_scalar("charts/episodic_cost", c, step)
                rs, cs = episodes.setdefault(("train", update), ([], []))
                rs.append(r)
                cs.append(c)
        writer.add_scalar("charts/learning_rate", 3e-4, step)
        writer.add_scalar("losses/value_loss", float(rng.random()), step)
    writer.close()
    return {k: (np.array(r, np.float64), np.array(c, np.float64)) for k, (r, c) in episodes.items()}


def test_cleanrl_events_round_trip_episode_for_episode(tmp_path: Path, capsys) -> None:
    episodes = _cleanrl_run(tmp_path)
    out = tmp_path / "tb.zarr"
    assert main(["import", "tensorboard", str(tmp_path / "runs"), "--out", str(out), "--bound", "25"]) == 0
    assert "conventions: cost unknown; window none; evaluation none; normalization unknown; history complete" \
        in capsys.readouterr().out
    ds = open_cube(out)
    assert (list(ds.algo.values), list(ds.task.values), list(ds.seed.values)) == (
        ["ppo_lag"], ["SafetyPointGoal1-v0"], [3])  # from CleanRL's run folder name
    got = stored_episodes(out)
    assert got.keys() == episodes.keys()
    for cell, (r, c) in episodes.items():  # episode for episode, in the order they were logged
        np.testing.assert_array_equal(got[cell][0], r)
        np.testing.assert_array_equal(got[cell][1], c)
    np.testing.assert_array_equal(ds.env_steps.squeeze().values, [STEPS_PER_ROLLOUT * (j + 1) for j in range(4)])
    recorded = record(tmp_path / "rec.zarr", episodes, algo="ppo_lag", task="SafetyPointGoal1-v0", bound=25.0, seed=3)
    assert_same_metrics(out, recorded)
    row = read_manifests(out)[0]
    assert row["iterates_from"].startswith("the steps of charts/learning_rate")
    assert row["conventions"]["history"] == {"value": "complete", "from": "every event of the file(s), none sampled"}


def test_steps_per_iterate_and_named_tags(tmp_path: Path) -> None:
    episodes = _cleanrl_run(tmp_path, updates=2, seed=1)
    out = tmp_path / "tb.zarr"
    assert main(["import", "tensorboard", str(tmp_path / "runs"), "--out", str(out), "--bound", "25", "--algo",
                 "mine", "--steps-per-iterate", str(STEPS_PER_ROLLOUT // 2), "--cost-tag", "charts/episodic_cost",
                 "--reward-tag", "charts/episodic_length", "--eval", "deterministic"]) == 0
    got = stored_episodes(out)
    assert sum(c.size for _, c in got.values()) == sum(c.size for _, c in episodes.values())
    assert max(j for _, j in got) <= 3 and all(np.all(r == 1000) for r, _ in got.values())  # lengths as rewards
    assert open_cube(out).algo.values.tolist() == ["mine"]


def test_twenty_five_thousand_episodes_at_a_tag_are_all_imported(tmp_path: Path) -> None:
    """TensorBoard's EventAccumulator keeps 10,000 scalars per tag by default; every one is kept here."""
    folder = tmp_path / "runs" / "SafetyCarCircle-v0__sac_lag__0__1700000000"
    folder.mkdir(parents=True)
    writer = EventsWriter(str(folder / "events"))  # tensorboardX's synchronous event file writer
    n = 25_000
    costs = (np.arange(n) % 97).astype(np.float32)
    for i in range(n):  # 4 episodes per env step, 100 episodes per iterate
        value = summary_pb2.Summary.Value(tag="charts/episodic_cost", simple_value=float(costs[i]))
        event = event_pb2.Event(wall_time=1.7e9 + i, step=i // 4, summary=summary_pb2.Summary(value=[value]))
        writer.write_event(event)
    writer.close()
    out = tmp_path / "tb.zarr"
    assert main(["import", "tensorboard", str(folder), "--out", str(out), "--bound", "50",
                 "--steps-per-iterate", "25"]) == 0
    ds = open_cube(out).sel(mode="train").squeeze()
    stored = ds.cost.values
    assert int((~np.isnan(stored)).sum()) == n and stored.shape[0] == n // 100
    np.testing.assert_array_equal(stored[~np.isnan(stored)], costs)
    assert np.isnan(ds.reward.values).all()  # no return tag: rewards unknown, costs complete


def _value(tag: str, **kw) -> summary_pb2.Summary.Value:
    return summary_pb2.Summary.Value(tag=tag, **kw)


def test_every_scalar_layout_decodes_as_protobuf_does(tmp_path: Path) -> None:
    """simple_value (tensorboardX, PyTorch), one-element tensors (TF2's tf.summary.scalar: float_val,
    double_val, int64_val, tensor_content), skipped non-scalars; small blocks split records anywhere."""
    scalar = tensor_shape_pb2.TensorShapeProto()
    vector = tensor_shape_pb2.TensorShapeProto(dim=[tensor_shape_pb2.TensorShapeProto.Dim(size=2)])
    values = [
        [_value("a", simple_value=1.5), _value("b", simple_value=-2.0)],
        [_value("t/float", tensor=tensor_pb2.TensorProto(dtype=1, float_val=[7.25], tensor_shape=scalar))],
        [_value("t/double", tensor=tensor_pb2.TensorProto(dtype=2, double_val=[1e300]))],
        [_value("t/content", tensor=tensor_pb2.TensorProto(dtype=2, tensor_content=struct.pack("<d", -3.5)))],
        [_value("t/int64", tensor=tensor_pb2.TensorProto(dtype=9, int64_val=[-5]))],
        [_value("t/vector", tensor=tensor_pb2.TensorProto(dtype=1, float_val=[1, 2], tensor_shape=vector))],
        [_value("t/text", tensor=tensor_pb2.TensorProto(dtype=7, string_val=[b"x"]))],
        [_value("h", histo=summary_pb2.HistogramProto(min=0, max=1, num=2))],
    ]
    writer = EventsWriter(str(tmp_path / "events"))
    for step, vals in enumerate(values):
        event = event_pb2.Event(wall_time=1.0 + step, step=2**40 + step, summary=summary_pb2.Summary(value=vals))
        writer.write_event(event)
    writer.close()
    path = next(tmp_path.glob("events*"))
    expected = [("a", 1.5), ("b", -2.0), ("t/float", 7.25), ("t/double", 1e300), ("t/content", -3.5), ("t/int64", -5.0)]
    for block in (1 << 23, 7, 40):
        table = TagTable()
        got = [(table.names[t], v, s) for b in scalars(path, table, block=block)
               for t, v, s in zip(b.tag_ids.tolist(), b.values.tolist(), b.steps.tolist(), strict=True)]
        assert [(t, v) for t, v, _ in got] == expected
        assert [s for *_, s in got] == [2**40, 2**40, 2**40 + 1, 2**40 + 2, 2**40 + 3, 2**40 + 4]


def _omnisafe_tb(root: Path) -> Path:
    """OmniSafe's logger writes each progress.csv row to TensorBoard at global_step = epoch, in tb/."""
    run = root / "runs" / "PPOLag-{SafetyPointGoal1-v0}" / "seed-002-2026-11-27-10-00-00"
    (run / "tb").mkdir(parents=True)
    (run / "config.json").write_text(json.dumps({"seed": 2, "algo": "PPOLag", "env_id": "SafetyPointGoal1-v0",
                                                 "lagrange_cfgs": {"cost_limit": 25.0}}))
    writer = tensorboardX.SummaryWriter(str(run / "tb"))
    for epoch, (ret, cost) in enumerate([(1.0, 40.0), (2.0, 30.0), (3.0, 20.0)]):
        for tag, value in (("Metrics/EpRet", ret), ("Metrics/EpCost", cost), ("TotalEnvSteps", 2000 * (epoch + 1)),
                           ("Metrics/LagrangeMultiplier", 0.1 * epoch)):
            writer.add_scalar(tag, value, epoch)
    writer.close()
    return run


def test_omnisafe_tags_are_window_means(tmp_path: Path, capsys) -> None:
    _omnisafe_tb(tmp_path)
    out = tmp_path / "tb.zarr"
    assert main(["import", "tensorboard", str(tmp_path / "runs"), "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "1 hold only means of several episodes" in printed and "window of the last 50 episodes" in printed
    ds = open_cube(out).squeeze(["algo", "task", "bound", "seed"])
    assert ds.cost.sel(mode="train", episode=0).values.tolist() == [40.0, 30.0, 20.0]
    assert ds.env_steps.values.tolist() == [2000, 4000, 6000]
    assert ds.multiplier.values.tolist() == pytest.approx([0.0, 0.1, 0.2])
    assert bool(ds.means_only.sel(mode="train"))
    row = read_manifests(out)[0]
    assert (row["algo"], row["task"], row["seed"], row["bound"]) == ("PPOLag", "SafetyPointGoal1-v0", 2, 25.0)
    assert row["conventions"]["window"]["value"] == "sliding, 50 episodes"
    assert row["conventions"]["cost_discount"]["value"] == "undiscounted"


def _truncated(path: Path) -> None:
    data = path.read_bytes()
    path.write_bytes(data[:-7])


def _flipped(path: Path) -> None:
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0x10
    path.write_bytes(bytes(data))


@pytest.mark.parametrize(("damage", "message"), [
    (_truncated, "is truncated: its last record"),
    (_flipped, "CRC-32C check; the file is corrupt"),
])
def test_damaged_event_files_are_one_line_and_leave_the_cube_as_it_was(tmp_path: Path, capsys, damage,
                                                                      message: str) -> None:
    _cleanrl_run(tmp_path, updates=2)
    cube = tmp_path / "mine.zarr"
    assert main(["import", "tensorboard", str(tmp_path / "runs"), "--out", str(cube), "--bound", "25"]) == 0
    before = {p.relative_to(cube): p.read_bytes() for p in sorted(cube.rglob("*")) if p.is_file()}
    other = tmp_path / "other" / "runs"
    shutil.copytree(tmp_path / "runs", other)
    path = next(other.rglob("events*"))
    damage(path)
    capsys.readouterr()
    assert main(["import", "tensorboard", str(other), "--into", str(cube), "--bound", "25", "--seed", "9"]) == 2
    line = _err(capsys)
    assert message in line and str(path) in line
    after = {p.relative_to(cube): p.read_bytes() for p in sorted(cube.rglob("*")) if p.is_file()}
    assert after == before


@pytest.mark.parametrize(("args", "message"), [
    (["--steps-per-iterate", "0"], "--steps-per-iterate must be a whole number of env steps >= 1"),
    (["--cost-tag", "charts/nope"], "no per-episode cost tag (charts/nope not among its scalar tags"),
    (["--iterate-tag", "losses/nope"], "no scalar tag 'losses/nope' to take iterates from"),
    (["--iterate-tag", "losses/value_loss", "--steps-per-iterate", "5"], "not both"),
    (["--reward-tag", "charts/learning_rate"], "do not pair episode for episode"),
])
def test_bad_requests_are_one_line(tmp_path: Path, capsys, args: list[str], message: str) -> None:
    _cleanrl_run(tmp_path, updates=1)
    out = tmp_path / "tb.zarr"
    assert main(["import", "tensorboard", str(tmp_path / "runs"), "--out", str(out), "--bound", "25", *args]) == 2
    assert message in _err(capsys)
    assert not out.exists()


def test_an_event_file_without_labels_or_iterates_says_what_to_pass(tmp_path: Path, capsys) -> None:
    folder = tmp_path / "logs"
    writer = tensorboardX.SummaryWriter(str(folder))
    writer.add_scalar("charts/episodic_cost", 3.0, 10)
    writer.close()
    assert main(["import", "tensorboard", str(folder), "--out", str(tmp_path / "o.zarr")]) == 2
    assert "no algo, task, bound, seed in the files or folder names; pass --algo" in _err(capsys)
    assert main(["import", "tensorboard", str(folder), "--out", str(tmp_path / "o.zarr"), "--algo", "a", "--task",
                 "t", "--bound", "1", "--seed", "0"]) == 2
    assert "say how episodes form iterates: --steps-per-iterate N" in _err(capsys)
