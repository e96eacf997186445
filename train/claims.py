"""Per-run claims, so several `saferl train` processes can fill one store without training a run twice.

A claim is a file ``<store>/_claims/<algo>/<task>/<bound>/<seed>.claim`` created with O_CREAT|O_EXCL
(atomic on local and NFSv3+ filesystems) holding the claimant's host and pid. A claim whose process is
gone (same host, pid not alive) is taken over; one held by a live process, or by a process on another
host (whose liveness cannot be checked), is respected: the run is left to its owner. Removing the
``_claims`` folder releases claims left by crashed processes on other hosts.

Taking over a stale claim is check-then-replace, so it happens under an exclusive lock
(``_claims/.takeover.lock``, flock): the holder is read again under the lock and the claim replaced
atomically, so of several processes restarting after a crash exactly one takes the run.
"""

from __future__ import annotations

import fcntl
import json
import os
import socket
import uuid
from pathlib import Path

from cube.schema import RunKey
from cube.store.fs import pid_alive, side_folder

CLAIMS_DIR = "_claims"


def claim_path(store: str | os.PathLike, key: RunKey) -> Path:
    return Path(store) / CLAIMS_DIR / key.algo / key.task / f"{key.bound:g}" / f"{key.seed}.claim"


def _holder() -> dict[str, object]:
    return {"host": socket.gethostname(), "pid": os.getpid()}


def read_claim(store: str | os.PathLike, key: RunKey) -> dict[str, object] | None:
    """The holder of a run's claim ({"host", "pid"}), or None when unclaimed or unreadable."""
    try:
        return json.loads(claim_path(store, key).read_text())
    except (FileNotFoundError, json.JSONDecodeError):
        return None


def _stale(holder: dict[str, object] | None) -> bool:
    if holder is None:
        return False
    return holder.get("host") == socket.gethostname() and not pid_alive(int(holder.get("pid", -1)))


def try_claim(store: str | os.PathLike, key: RunKey) -> bool:
    """Claim a run for this process; True if this process now holds it (or already did)."""
    path = claim_path(store, key)
    side_folder(Path(store) / CLAIMS_DIR)
    path.parent.mkdir(parents=True, exist_ok=True)
    me = _holder()
    try:
        fd = os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
    except FileExistsError:
        return _take_over_if_stale(store, key, me)
    with os.fdopen(fd, "w") as fh:
        json.dump(me, fh)
    return True


def _take_over_if_stale(store: str | os.PathLike, key: RunKey, me: dict[str, object]) -> bool:
    """Under the takeover lock: replace the run's claim by ours if its holder is this process or gone."""
    path = claim_path(store, key)
    with open(Path(store) / CLAIMS_DIR / ".takeover.lock", "a+") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            holder = read_claim(store, key)
            if holder == me:
                return True
            if path.exists() and not _stale(holder):
                return False  # a live owner (or one whose file is being written: its claim stands)
            tmp = path.with_name(f".{path.name}.{uuid.uuid4().hex}")
            tmp.write_text(json.dumps(me))
            os.replace(tmp, path)  # atomic: readers see the old claim or ours, never none
            return True
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def release(store: str | os.PathLike, key: RunKey) -> None:
    """Drop this process's claim on a run (a claim held by another process is left alone)."""
    if read_claim(store, key) == _holder():
        claim_path(store, key).unlink(missing_ok=True)
