"""Fault injection, issue 26 item 3: writers on file systems whose file locks are node-local (injected mount
tables). Before: the writer lock, the grid lock and claim takeovers trusted flock everywhere."""

from __future__ import annotations

import warnings
from pathlib import Path

import numpy as np
import pytest

import cube
from cube import CubeError, CubeWriter, Recorder
from cube.store import mounts
from cube.store.mounts import LockWarning, check_store_locks, lock_support

pytestmark = pytest.mark.faults

BASE = "rootfs / rootfs rw 0 0\nproc /proc proc rw,nosuid 0 0\n"


def _table(point: str, fstype: str, options: str) -> str:
    return BASE + f"srv:/export {point.replace(' ', chr(92) + '040')} {fstype} {options} 0 0\n"


@pytest.mark.parametrize(("fstype", "options", "kind", "advice"), [
    ("nfs4", "rw,relatime,vers=4.2,local_lock=none,addr=10.0.0.1", "coherent", ""),
    ("nfs", "rw,vers=3,local_lock=flock", "node-local", "local_lock=none"),
    ("nfs4", "rw,vers=4.1,local_lock=all", "node-local", "local_lock=none"),
    ("lustre", "rw,flock,lazystatfs", "coherent", ""),
    ("lustre", "rw,localflock", "node-local", "-o flock"),
    ("lustre", "rw,lazystatfs", "node-local", "-o flock"),
    ("lustre", "rw,noflock", "unsupported", "-o flock"),
    ("gpfs", "rw,relatime", "coherent", ""),
    ("beegfs", "rw,cfgFile=/etc/beegfs/beegfs-client.conf", "node-local", "tuneUseGlobalFileLocks"),
    ("ext4", "rw,relatime", "local", ""),
    ("fuse.sshfs", "rw,user_id=0", "unknown", "coherent across nodes"),
])
def test_lock_support_from_the_mount_table(tmp_path: Path, fstype: str, options: str, kind: str, advice: str) -> None:
    store = tmp_path / "with space" / "s.zarr"  # not created yet: its nearest existing parent counts
    (tmp_path / "with space").mkdir()
    support = lock_support(store, _table(str(tmp_path / "with space"), fstype, options))
    assert (support.kind, support.fstype) == (kind, fstype)
    assert advice in support.advice
    assert lock_support(tmp_path, _table(str(tmp_path / "with space"), fstype, options)).kind == "unknown" or \
        lock_support(tmp_path, _table(str(tmp_path / "with space"), fstype, options)).fstype != fstype


@pytest.fixture
def node_local(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """tmp_path mounted (says the injected table) as NFS with local_lock=flock; no memo of earlier checks."""
    table = tmp_path / "mounts"
    table.write_text(_table(str(tmp_path), "nfs", "rw,vers=3,local_lock=flock"))
    monkeypatch.setattr(mounts, "MOUNT_TABLE", table)
    monkeypatch.setattr(mounts, "_CHECKED", set())
    for var in ("SLURM_JOB_ID", "SAFERL_MULTI_NODE", "SAFERL_TRUST_LOCKS"):
        monkeypatch.delenv(var, raising=False)
    return tmp_path


def test_multi_node_writing_on_node_local_locks_is_refused(node_local: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from train.claims import try_claim

    path = node_local / "s.zarr"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", LockWarning)
        with Recorder(path, algo="a", task="t", bound=1.0, seed=0) as rec:
            rec.train_episodes(0, [1.0], [1.0])
    monkeypatch.setenv("SLURM_JOB_ID", "4242")  # a SLURM job: one of several nodes
    before = {p: p.read_bytes() for p in path.rglob("*") if p.is_file() and "_locks" not in p.parts}
    for attempt in (lambda: CubeWriter(path), lambda: Recorder(path, algo="b", task="t", bound=1.0, seed=0).open(),
                    lambda: cube.extend_store(path, seeds=[5]),
                    lambda: try_claim(path, cube.RunKey("a", "t", 1.0, 0))):
        with pytest.raises(CubeError) as info:
            attempt()
        message = str(info.value)
        assert "\n" not in message and "local_lock=none" in message and "nfs" in message
    after = {p: p.read_bytes() for p in path.rglob("*") if p.is_file() and "_locks" not in p.parts}
    assert after == before
    monkeypatch.setenv("SAFERL_TRUST_LOCKS", "1")  # a site that knows better
    CubeWriter(path)


def test_single_node_writing_on_node_local_locks_warns_once(node_local: Path) -> None:
    path = node_local / "s.zarr"
    with pytest.warns(LockWarning, match="local_lock=none") as caught:
        with Recorder(path, algo="a", task="t", bound=1.0, seed=0) as rec:
            rec.train_episodes(0, [1.0], [1.0])
        CubeWriter(path).write_episodes(cube.RunKey("a", "t", 1.0, 0), "train", 0, [1.0], [2.0])
    assert len([w for w in caught if issubclass(w.category, LockWarning)]) == 1
    assert float(np.nansum(cube.open_cube(path)["cost"].values)) == 2.0


def test_flock_disabled_is_refused_even_on_one_node(node_local: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(mounts, "MOUNT_TABLE", node_local / "lustre")
    (node_local / "lustre").write_text(_table(str(node_local), "lustre", "rw,noflock"))
    with pytest.raises(CubeError, match="noflock.*|.*-o flock"):
        Recorder(node_local / "s.zarr", algo="a", task="t", bound=1.0, seed=0).open()
    assert not (node_local / "s.zarr").exists()
    assert check_store_locks(node_local / "x", multi_node=False, table=_table(str(node_local), "nfs4", "rw")).kind \
        == "coherent"
