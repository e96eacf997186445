"""Reductions on a dask.distributed cluster give the local scheduler's numbers (cube.compute)."""

from __future__ import annotations

import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
import xarray as xr

from cube import CubeError, open_cube, stats
from cube.compute import ENV_VAR, active_client, compute, resolve_address, scheduler_context
from cube.io.demo import make_demo_cube

distributed = pytest.importorskip("distributed", reason="needs dask.distributed (pip install distributed)")

SETTINGS = ("train", "final_expl", "final_greedy")


@pytest.fixture(scope="module")
def cluster() -> Iterator[object]:
    """A LocalCluster of 2 worker processes, 1 thread each, for the whole module."""
    with distributed.LocalCluster(n_workers=2, processes=True, threads_per_worker=1, dashboard_address=":0",
                                  silence_logs=40) as lc:
        yield lc


@pytest.fixture(scope="module")
def cube_path(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("cluster") / "small.zarr"
    make_demo_cube(path, tasks=("goal", "circle"), bounds=(15.0, 25.0), n_seeds=3, n_iterates=5,
                   n_train_episodes=16, n_eval_episodes=10)
    return path


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_statistics_on_cluster_equal_local(cluster, cube_path: Path) -> None:
    local = stats.load_suffstats(cube_path, cache=False)
    assert active_client() is None
    with scheduler_context(cluster.scheduler_address) as client:
        assert active_client() is client
        with distributed.get_task_stream(client=client) as stream:
            remote = stats.load_suffstats(cube_path, cache=False)
    assert active_client() is None
    workers = set(cluster.scheduler_info["workers"])
    ran = [t for t in stream.data if "map_block" in str(t["key"])]
    assert ran, "the sufficient-statistics pass did not run on the cluster's workers"
    assert {t["worker"] for t in ran} <= workers
    xr.testing.assert_identical(local, remote)
    # Independent check of the counts: episodes present in the raw cube.
    raw = open_cube(cube_path)["cost"].transpose(*remote["n"].dims, "episode").values
    np.testing.assert_array_equal(remote["n"].values, (~np.isnan(raw)).sum(-1))
    for a, b in ((stats.condition_table(local, SETTINGS), stats.condition_table(remote, SETTINGS)),
                 (stats.aggregate_table(local, SETTINGS, boot=200), stats.aggregate_table(remote, SETTINGS, boot=200))):
        xr.testing.assert_identical(a, b)


def test_compute_reports_progress_on_cluster(cluster) -> None:
    import dask.array as da

    x = da.arange(40, chunks=10) ** 2
    seen: list[tuple[int, int]] = []
    with scheduler_context(cluster.scheduler_address):
        out = compute(x, lambda done, total: seen.append((done, total)))
    np.testing.assert_array_equal(out, np.arange(40) ** 2)
    assert seen[0] == (0, 4) and seen[-1] == (4, 4)
    assert [d for d, _ in seen] == sorted(d for d, _ in seen)


def test_environment_variable_selects_the_cluster(cluster, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(ENV_VAR, cluster.scheduler_address)
    assert resolve_address(None) == cluster.scheduler_address
    assert resolve_address("tcp://elsewhere:1") == "tcp://elsewhere:1"
    with scheduler_context(None) as client:
        assert client is not None and client.scheduler.address == cluster.scheduler_address


def test_no_address_means_local_threads(monkeypatch: pytest.MonkeyPatch) -> None:
    import dask.array as da

    monkeypatch.delenv(ENV_VAR, raising=False)
    seen: list[tuple[int, int]] = []
    with scheduler_context(None) as client:
        assert client is None and active_client() is None
        out = compute(da.ones(10, chunks=5).sum(), lambda done, total: seen.append((done, total)))
    assert out == 10.0
    assert seen and seen[-1][0] == seen[-1][1] > 0


def test_unreachable_scheduler_is_one_line_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(ENV_VAR, raising=False)
    address = f"tcp://127.0.0.1:{_free_port()}"
    with pytest.raises(CubeError) as err, scheduler_context(address, timeout=1.0):
        pass
    message = str(err.value)
    assert "\n" not in message and address in message and "--scheduler" in message
    with pytest.raises(CubeError, match="unknown address scheme"), scheduler_context("nosuch://x", timeout=1.0):
        pass


def test_cube_does_not_import_distributed() -> None:
    code = ("import sys, cube, cube.compute, cube.stats, cube.cli.entry\n"
            "print(','.join(sorted(m for m in sys.modules if m.split('.')[0] == 'distributed')))")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert result.stdout.strip() == ""


def test_saferl_report_on_cluster_equals_local(cluster, cube_path: Path, tmp_path: Path,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    from cube.cli import main

    monkeypatch.delenv(ENV_VAR, raising=False)
    common = ["report", str(cube_path), "--kind", "all", "--format", "json", "--no-cache", "--boot", "200"]
    assert main([*common, "-o", str(tmp_path / "local")]) == 0
    client = distributed.Client(cluster.scheduler_address, set_as_default=False)
    try:
        with distributed.get_task_stream(client=client) as stream:
            assert main([*common, "--scheduler", cluster.scheduler_address, "-o", str(tmp_path / "remote")]) == 0
    finally:
        client.close()
    assert any("map_block" in str(t["key"]) for t in stream.data), "saferl report did not use the cluster"
    local = sorted(p.name for p in (tmp_path / "local").iterdir())
    assert local and local == sorted(p.name for p in (tmp_path / "remote").iterdir())
    for name in local:
        assert (tmp_path / "local" / name).read_text() == (tmp_path / "remote" / name).read_text(), name
    bad = f"tcp://127.0.0.1:{_free_port()}"
    assert main([*common, "--scheduler", bad, "-o", str(tmp_path / "bad")]) == 2
