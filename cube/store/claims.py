"""Per-run claims: one writer per run for a recording's whole life (`cube.Recorder`, `saferl import --into`,
`saferl train`), and what `saferl status` and the TUI's Status view read about them.

A claim is a file ``<store>/_claims/<algo>/<task>/<bound>/<seed>.claim`` holding its holder as a JSON object
``{"host": str, "pid": int > 0, "since": POSIX seconds, "writer": str, "token": str, "started": int}``
(`started`: the process's start time in clock ticks since boot, which tells a reused pid from its first
owner; `token`: one per claiming object, so two writers of one process are told apart too). Only host and
pid are required (claims of earlier versions hold nothing else).

Every change of a claim (taking, taking over, releasing) happens under one exclusive lock per store
(``_claims/.takeover.lock``, flock), and a claim file appears whole (written beside it, then linked into
place), so a run has one holder at a time: a live holder's claim is never replaced, and a release never
removes another writer's claim. A claim is taken over only when its holder is provably dead: same host and
its pid gone (or reused by a later process), or *damaged* (not a JSON object naming a host and a positive
integer pid: no process can own it). A claim of a process on another host cannot be checked from here: it
is respected, and the refusal says so (remove the claim file once that process is gone). The lock must be
coherent across the nodes that write into the store (`cube.store.mounts` checks the store's file system).
"""

from __future__ import annotations

import fcntl
import json
import os
import socket
import time
import uuid
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from cube.errors import CubeError
from cube.schema import RunKey, utc_stamp
from cube.store.fs import pid_alive, process_start, side_folder, store_write_error
from cube.store.location import is_remote
from cube.store.mounts import check_store_locks

CLAIMS_DIR = "_claims"
PROCESS_TOKEN = uuid.uuid4().hex
"""The token of `try_claim`'s process-wide claims (a sweep's runs); other claimants take one each."""

_SAFE = set("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_+=-.,")


def _part(label: str) -> str:
    """A label as one path component: itself when plain, else percent-encoded (a '/' or '..' in a label
    never leaves the claims folder)."""
    text = "".join(ch if ch in _SAFE else "".join(f"%{b:02X}" for b in ch.encode()) for ch in label)
    return "%2E" + text[1:] if text.startswith(".") else text or "%"


def run_file_name(key: RunKey, suffix: str) -> str:
    """One file name per run, unique in a flat folder: '<algo>@<task>@<bound>@<seed><suffix>' (labels
    percent-encoded as in claim paths: an '@' or '/' in a label never collides or leaves the folder)."""
    return "@".join((_part(key.algo), _part(key.task), f"{key.bound:g}", str(key.seed))) + suffix


def claim_path(store: str | os.PathLike, key: RunKey) -> Path:
    """Where the claim of run `key` lives: ``<store>/_claims/<algo>/<task>/<bound>/<seed>.claim``."""
    return Path(store) / CLAIMS_DIR / _part(key.algo) / _part(key.task) / f"{key.bound:g}" / f"{key.seed}.claim"


@dataclass(frozen=True)
class ClaimState:
    """What a run's claim file says. state: 'free' (no claim), 'held' (a live or unverifiable holder),
    'stale' (its process is gone), 'damaged' (no holder can be read from it: stale too)."""

    state: str
    holder: dict[str, object] | None = None
    why: str = ""

    @property
    def takeable(self) -> bool:
        """Whether a writer may take the run over (free, stale or damaged)."""
        return self.state in ("free", "stale", "damaged")

    @property
    def who(self) -> str:
        """'host:pid' of the holder ('' without one)."""
        return f"{self.holder.get('host')}:{self.holder.get('pid')}" if self.holder else ""

    def describe(self) -> str:
        """One phrase for `saferl status`: 'held by host:pid', 'stale (host:pid is gone)', 'damaged (...)'."""
        return {"free": "free", "held": f"held by {self.who}", "stale": f"stale ({self.who} is gone)",
                "damaged": f"damaged ({self.why}), taken over by the next writer"}[self.state]


def parse_claim(text: str) -> tuple[dict[str, object] | None, str]:
    """The holder a claim file's text names ({"host", "pid"} and whichever of "since", "writer", "token",
    "started" it holds), or None and why it names none."""
    try:
        body = json.loads(text)
    except ValueError:
        return None, "empty" if not text.strip() else "not JSON"
    if not isinstance(body, dict):
        return None, f"a JSON {type(body).__name__}, not an object"
    host, pid = body.get("host"), body.get("pid")
    if not isinstance(host, str) or not host:
        return None, "no host"
    if isinstance(pid, bool) or not isinstance(pid, int) or pid <= 0:
        return None, f"pid {pid!r} is no process id"
    holder: dict[str, object] = {"host": host, "pid": pid}
    for name, kind in (("since", (int, float)), ("writer", str), ("token", str), ("started", int)):
        value = body.get(name)
        if isinstance(value, kind) and not isinstance(value, bool):
            holder[name] = value
    return holder, ""


def holder_alive(holder: dict[str, object]) -> bool:
    """Whether a claim's holder may still run: always for another host (it cannot be checked from here);
    on this host, its pid is alive and (where the claim recorded it) started when the claim says."""
    if holder["host"] != socket.gethostname():
        return True
    pid = int(holder["pid"])  # type: ignore[call-overload]
    if not pid_alive(pid):
        return False
    started = holder.get("started")
    return started is None or process_start(pid) in (None, started)


def claim_state(store: str | os.PathLike, key: RunKey) -> ClaimState:
    """The state of a run's claim (see `ClaimState`); reading it never raises for a damaged file. A store at
    a URL is a published snapshot: no writer, no claim."""
    if is_remote(store):
        return ClaimState("free")
    try:
        text = claim_path(store, key).read_text(errors="replace")
    except (FileNotFoundError, NotADirectoryError):
        return ClaimState("free")
    except OSError as exc:
        return ClaimState("damaged", None, f"unreadable: {exc.strerror}")
    holder, why = parse_claim(text)
    if holder is None:
        return ClaimState("damaged", None, why)
    return ClaimState("held" if holder_alive(holder) else "stale", holder)


def read_claim(store: str | os.PathLike, key: RunKey) -> dict[str, object] | None:
    """The holder of a run's claim ({"host", "pid", ...}), or None when unclaimed or damaged."""
    return claim_state(store, key).holder


# ------------------------------------------------------------------------------------ taking claims
class ClaimRefused(CubeError):
    """Another writer holds the run: the one line names it (host, pid, since when, what it is)."""


def holder_text(holder: dict[str, object]) -> str:
    """'host h, pid 123, since 2026-11-27T10:00:00Z (cube.Recorder)'."""
    since = holder.get("since")
    text = f"host {holder['host']}, pid {holder['pid']}"
    text += f", since {utc_stamp(float(since))}" if isinstance(since, int | float) else ""  # type: ignore[arg-type]
    return text + (f" ({holder['writer']})" if holder.get("writer") else "")


def refusal(store: str | os.PathLike, key: RunKey, holder: dict[str, object], what: str) -> ClaimRefused:
    """The one line refusing `what` of run `key` to a second writer."""
    where = ("; that process is on another host, so it cannot be checked from here: once it is gone there, "
             f"remove {claim_path(store, key)}") if holder["host"] != socket.gethostname() else \
        "; wait for it to finish (or stop it) and try again"
    return ClaimRefused(f"cannot {what} run {key}: another writer is recording it ({holder_text(holder)})"
                        f"{where}")


@contextmanager
def _claims_lock(store: str | os.PathLike) -> Iterator[None]:
    folder = side_folder(Path(store) / CLAIMS_DIR)
    with open(folder / ".takeover.lock", "a+") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def _place(path: Path, holder: dict[str, object], replace: bool) -> None:
    """Make `path` hold `holder`, whole: written beside it, then linked (new) or renamed (replacing) into place."""
    tmp = path.with_name(f".{path.name}.{uuid.uuid4().hex}")
    try:
        tmp.write_text(json.dumps(holder))
        if replace:
            os.replace(tmp, path)
        else:
            os.link(tmp, path)  # fails if a claim appeared meanwhile (another host's writer)
    finally:
        tmp.unlink(missing_ok=True)


def _same(a: dict[str, object] | None, b: dict[str, object]) -> bool:
    """Whether two holders are one claimant (host, pid and token; a claim without a token is process-wide)."""
    return a is not None and all(a.get(k) == b.get(k) for k in ("host", "pid", "token"))


def new_holder(writer: str, token: str | None = None) -> dict[str, object]:
    """The holder this process writes into a claim: host, pid, since (now), writer, token, started."""
    holder: dict[str, object] = {"host": socket.gethostname(), "pid": os.getpid(), "since": round(time.time(), 3),
                                 "writer": writer, "token": token or uuid.uuid4().hex}
    started = process_start(os.getpid())
    if started is not None:
        holder["started"] = started
    return holder


def _take(store: str | os.PathLike, key: RunKey, me: dict[str, object]) -> dict[str, object] | None:
    """Under the claims lock: take run `key`'s claim for `me`; None when taken (or already ours), else
    the live holder."""
    path = claim_path(store, key)
    path.parent.mkdir(parents=True, exist_ok=True)
    state = claim_state(store, key)
    if _same(state.holder, me):
        return None
    if not state.takeable:
        return state.holder
    try:
        _place(path, me, replace=state.state != "free")
    except FileExistsError:
        return claim_state(store, key).holder or {"host": "?", "pid": "?"}
    return None


def _drop(store: str | os.PathLike, key: RunKey, me: dict[str, object]) -> None:
    """Under the claims lock: remove run `key`'s claim if `me` holds it."""
    if _same(read_claim(store, key), me):
        claim_path(store, key).unlink(missing_ok=True)


@dataclass
class RunClaims:
    """Claims one writer holds on runs of a store (`take_claims`); `release()` drops them (idempotent)."""

    store: Path
    keys: list[RunKey]
    holder: dict[str, object] = field(default_factory=dict)

    def release(self) -> None:
        """Drop these claims (a claim some other writer took over meanwhile is left alone)."""
        if not self.keys:
            return
        try:
            with _claims_lock(self.store):
                for key in self.keys:
                    _drop(self.store, key, self.holder)
        except OSError:
            pass  # the store went away or turned read-only: the claims die with this process anyway
        self.keys = []

    def __enter__(self) -> RunClaims:
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()


def take_claims(store: str | os.PathLike, keys: Sequence[RunKey], writer: str, what: str = "record") -> RunClaims:
    """Claim every run of `keys` for one writer (`writer`: what it is, e.g. 'cube.Recorder'), all or none,
    under one hold of the claims lock: a `RunClaims` to release when the writing ends. `ClaimRefused` (one
    line naming the holder: host, pid, since when) when another live writer holds one of them; a claim whose
    holder is provably dead (or damaged) is taken over. The store's folder must exist."""
    store = Path(store)
    check_store_locks(store)
    me = new_holder(writer)
    taken: list[RunKey] = []
    try:
        with _claims_lock(store):
            for key in dict.fromkeys(keys):
                other = _take(store, key, me)
                if other is not None:
                    for done in taken:
                        _drop(store, done, me)
                    raise refusal(store, key, other, what)
                taken.append(key)
    except OSError as exc:
        raise store_write_error(exc, store, f"claim the runs to {what}") from None
    return RunClaims(store, taken, me)


def try_claim(store: str | os.PathLike, key: RunKey, writer: str = "saferl train") -> bool:
    """Claim a run for this process (a sweep's process-wide claim); True if this process now holds it (or
    already did), False when another live writer does."""
    check_store_locks(store)
    with _claims_lock(store):
        return _take(store, key, new_holder(writer, PROCESS_TOKEN)) is None


def release(store: str | os.PathLike, key: RunKey) -> None:
    """Drop this process's `try_claim` claim on a run (a claim held by another writer is left alone)."""
    with _claims_lock(store):
        _drop(store, key, new_holder("", PROCESS_TOKEN))
