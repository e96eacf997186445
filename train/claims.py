"""Per-run claims, so several `saferl train` processes can fill one store without training a run twice.

A claim is a file ``<store>/_claims/<algo>/<task>/<bound>/<seed>.claim`` holding the claimant's host and pid
(JSON). Every change of a claim (taking, taking over, releasing) happens under one exclusive lock per store
(``_claims/.takeover.lock``, flock), and a claim file appears whole (written beside it, then linked into
place), so a run has one holder at a time, always: a live holder's claim is never replaced, and a release
never removes another process's claim.

A claim whose process is gone (same host, pid not alive) is stale and taken over; so is a *damaged* claim
(not a JSON object with a host and a positive integer pid: a truncated or empty file, a list, pid -1, 0 or
a string), since no process can own it. A claim held by a live process, or by a process on another host
(whose liveness cannot be checked), is respected: the run is left to its owner. Removing the ``_claims``
folder releases claims left by crashed processes on other hosts. The lock must be coherent across the nodes
that train into the store (`cube.store.mounts` checks the store's file system). Reading a claim (`ClaimState`,
`claim_state`, the claim file's format) lives in `cube.store.claims`, shared with `saferl status` and the TUI;
taking and releasing claims lives here.
"""

from __future__ import annotations

import fcntl
import json
import os
import socket
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from cube.schema import RunKey
from cube.store.claims import CLAIMS_DIR, ClaimState, claim_path, claim_state, parse_claim, read_claim
from cube.store.fs import side_folder
from cube.store.mounts import check_store_locks

__all__ = ["CLAIMS_DIR", "ClaimState", "claim_path", "claim_state", "parse_claim", "read_claim", "release",
           "try_claim"]


def _holder() -> dict[str, object]:
    return {"host": socket.gethostname(), "pid": os.getpid()}


@contextmanager
def _claims_lock(store: str | os.PathLike) -> Iterator[None]:
    folder = side_folder(Path(store) / CLAIMS_DIR)
    with open(folder / ".takeover.lock", "a+") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def _place(path: Path, me: dict[str, object], replace: bool) -> None:
    """Make `path` hold `me`, whole: written beside it, then linked (new) or renamed (replacing) into place."""
    tmp = path.with_name(f".{path.name}.{uuid.uuid4().hex}")
    try:
        tmp.write_text(json.dumps(me))
        if replace:
            os.replace(tmp, path)
        else:
            os.link(tmp, path)  # fails if a claim appeared meanwhile (another host's trainer)
    finally:
        tmp.unlink(missing_ok=True)


def try_claim(store: str | os.PathLike, key: RunKey) -> bool:
    """Claim a run for this process; True if this process now holds it (or already did)."""
    check_store_locks(store)
    path = claim_path(store, key)
    me = _holder()
    with _claims_lock(store):
        path.parent.mkdir(parents=True, exist_ok=True)
        state = claim_state(store, key)
        if state.holder == me:
            return True
        if not state.takeable:
            return False
        try:
            _place(path, me, replace=state.state != "free")
        except FileExistsError:
            return False
        return True


def release(store: str | os.PathLike, key: RunKey) -> None:
    """Drop this process's claim on a run (a claim held by another process is left alone)."""
    with _claims_lock(store):
        if read_claim(store, key) == _holder():
            claim_path(store, key).unlink(missing_ok=True)
