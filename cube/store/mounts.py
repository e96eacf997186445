"""Whether the store's file locks hold across nodes: the file system the store lives on, read from the mount
table (/proc/mounts), before anyone writes into it.

Writers of a store rely on flock (`cube.store.locks`: run brackets, the grid lock; the trainer's claim
takeovers). flock is coherent across the nodes of NFS (Linux >= 2.6.12, unless mounted
``local_lock=flock`` or ``local_lock=all``), of Lustre mounted ``-o flock``, GPFS and CephFS; Lustre's
``localflock`` keeps locks on one node and ``noflock`` makes flock fail (ENOSYS); BeeGFS keeps them on one
node unless its clients set ``tuneUseGlobalFileLocks``. So writing from several nodes (a SLURM job, a dask
worker) into a store whose locks are node-local is refused with one line naming the mount option to use,
and single-node writing there gets one warning per store and process. ``SAFERL_TRUST_LOCKS=1`` skips the
check (a site that knows its file system better); ``SAFERL_MULTI_NODE=0/1`` overrides the detection of
multi-node writing. docs/cluster.md lists the safe file systems.
"""

from __future__ import annotations

import os
import sys
import warnings
from dataclasses import dataclass
from pathlib import Path

from cube.errors import CubeError, CubeWarning
from cube.store.fs import PathLike

LOCAL_FILESYSTEMS = frozenset({
    "ext2", "ext3", "ext4", "xfs", "btrfs", "zfs", "tmpfs", "ramfs", "overlay", "f2fs", "jfs", "reiserfs",
    "bcachefs", "nilfs2", "vfat", "exfat", "ntfs3", "hfsplus", "apfs", "devtmpfs",
})
"""File systems of one machine: nobody on another node can write the store, so their flock is enough."""
MOUNT_TABLE = Path("/proc/mounts")
"""Where the mount table is read from (tests point it at a table of their own)."""
COHERENT_NETWORK = frozenset({"gpfs", "ceph", "fuse.ceph-fuse", "glusterfs", "fuse.glusterfs", "ocfs2", "gfs2"})


@dataclass(frozen=True)
class LockSupport:
    """What flock means on the store's file system. kind: 'local' (one machine), 'coherent' (across
    nodes), 'node-local' (locks do not cross nodes), 'unsupported' (flock fails), 'unknown'."""

    kind: str
    fstype: str
    mount: str
    options: str
    advice: str = ""


class LockWarning(CubeWarning):
    """The store's locks are node-local: fine on one node, unsafe for writers on several."""


def _unescape(field: str) -> str:
    r"""/proc/mounts escapes space, tab, newline and backslash as \040, \011, \012, \134."""
    for code, char in (("\\040", " "), ("\\011", "\t"), ("\\012", "\n"), ("\\134", "\\")):
        field = field.replace(code, char)
    return field


def _existing(path: Path) -> Path:
    """The path itself if it exists, else its nearest existing parent (a store not created yet)."""
    path = Path(os.path.abspath(path))
    while not path.exists() and path != path.parent:
        path = path.parent
    return Path(os.path.realpath(path))


def mount_of(path: PathLike, table: str) -> tuple[str, str, str]:
    """(mount point, fs type, options) of the mount holding `path`, from the text of a mount table."""
    where = str(_existing(Path(path)))
    best = ("/", "unknown", "")
    for line in table.splitlines():
        fields = line.split()
        if len(fields) < 4:
            continue
        point = _unescape(fields[1])
        inside = where == point or where.startswith(point.rstrip("/") + "/") or point == "/"
        if inside and len(point) >= len(best[0]):  # the longest match; a later mount on the same point wins
            best = (point, fields[2], fields[3])
    return best


def lock_support(path: PathLike, table: str | None = None) -> LockSupport:
    """How flock behaves on the file system of `path` (`table`: the mount table's text, default that of
    MOUNT_TABLE)."""
    if table is None:
        try:
            table = MOUNT_TABLE.read_text()
        except OSError:
            return LockSupport("unknown", "unknown", "/", "", f"no {MOUNT_TABLE} to read")
    point, fstype, options = mount_of(path, table)
    opts = set(options.split(","))
    local_lock = next((o.split("=", 1)[1] for o in opts if o.startswith("local_lock=")), "none")
    if fstype in LOCAL_FILESYSTEMS:
        return LockSupport("local", fstype, point, options)
    if fstype in ("nfs", "nfs4"):
        if local_lock in ("flock", "all"):
            return LockSupport("node-local", fstype, point, options,
                               f"mount it with local_lock=none (it has local_lock={local_lock})")
        return LockSupport("coherent", fstype, point, options)
    if fstype == "lustre":
        if "noflock" in opts:
            return LockSupport("unsupported", fstype, point, options, "mount it with -o flock (it has noflock)")
        if "flock" in opts:
            return LockSupport("coherent", fstype, point, options)
        return LockSupport("node-local", fstype, point, options,
                           "mount it with -o flock (it has " + ("localflock" if "localflock" in opts
                                                                 else "no flock option") + ")")
    if fstype in COHERENT_NETWORK:
        return LockSupport("coherent", fstype, point, options)
    if fstype == "beegfs":
        return LockSupport("node-local", fstype, point, options,
                           "set tuneUseGlobalFileLocks=true in the clients' beegfs-client.conf, then "
                           "SAFERL_TRUST_LOCKS=1")
    return LockSupport("unknown", fstype, point, options,
                       "use a file system whose flock is coherent across nodes (docs/cluster.md)")


def multi_node_writer() -> bool:
    """Whether this process writes as one of several nodes: inside a SLURM job or a dask worker
    (SAFERL_MULTI_NODE=0/1 overrides)."""
    forced = os.environ.get("SAFERL_MULTI_NODE")
    if forced is not None and forced.strip() in ("0", "1"):
        return forced.strip() == "1"
    if os.environ.get("SLURM_JOB_ID"):
        return True
    distributed = sys.modules.get("distributed")
    if distributed is not None:
        try:
            distributed.get_worker()
            return True
        except (ValueError, AttributeError):
            return False
    return False


_CHECKED: set[tuple[str, bool]] = set()


def check_store_locks(path: PathLike, *, multi_node: bool | None = None, table: str | None = None) -> LockSupport:
    """Before writing into the store at `path`: CubeError (one line, with the mount option to use) when
    flock does not work there, or when several nodes write (`multi_node`, default `multi_node_writer()`)
    and its locks are node-local; a `LockWarning` once per store and process for one node on node-local
    (or unknown network) locks. Checked once per store and process; SAFERL_TRUST_LOCKS=1 skips it."""
    multi = multi_node_writer() if multi_node is None else multi_node
    key = (os.path.abspath(path), multi)
    if os.environ.get("SAFERL_TRUST_LOCKS", "").strip() == "1":
        return LockSupport("coherent", "trusted", "/", "")
    support = lock_support(path, table)
    if table is None and key in _CHECKED:
        return support
    if support.kind == "unsupported":
        raise CubeError(f"{path} is on a {support.fstype} mount ({support.mount}) where file locks fail; saferl's "
                        f"writers need them: {support.advice}")
    if support.kind == "node-local" and multi:
        raise CubeError(f"{path} is on a {support.fstype} mount ({support.mount}) whose file locks do not reach "
                        f"other nodes, so writers on several nodes could corrupt it: {support.advice} "
                        "(or write from one node)")
    if support.kind in ("node-local", "unknown") and support.fstype != "unknown" and key not in _CHECKED:
        warnings.warn(f"{path} is on a {support.fstype} mount ({support.mount}) whose file locks may not reach "
                      f"other nodes: safe for writers on this node only; {support.advice}", LockWarning,
                      stacklevel=3)
    if table is None:
        _CHECKED.add(key)
    return support
