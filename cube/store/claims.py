"""Reading per-run claims: which process trains a run of a sweep (the writers' side, taking and releasing
claims, belongs to the trainer; `saferl status` and the TUI's Progress view read them here).

A claim is a file ``<store>/_claims/<algo>/<task>/<bound>/<seed>.claim`` holding the claimant's host and pid
as a JSON object ``{"host": str, "pid": int > 0}``. A claim whose process is gone (same host, pid not alive)
is *stale*; a claim that names no holder (a truncated or empty file, a list, pid -1, 0 or a string) is
*damaged*, and stale too, since no process can own it. A claim held by a live process, or by a process on
another host (whose liveness cannot be checked from here), is *held*.
"""

from __future__ import annotations

import json
import os
import socket
from dataclasses import dataclass
from pathlib import Path

from cube.schema import RunKey
from cube.store.fs import pid_alive

CLAIMS_DIR = "_claims"


def claim_path(store: str | os.PathLike, key: RunKey) -> Path:
    """Where the claim of run `key` lives: ``<store>/_claims/<algo>/<task>/<bound>/<seed>.claim``."""
    return Path(store) / CLAIMS_DIR / key.algo / key.task / f"{key.bound:g}" / f"{key.seed}.claim"


@dataclass(frozen=True)
class ClaimState:
    """What a run's claim file says. state: 'free' (no claim), 'held' (a live or unverifiable holder),
    'stale' (its process is gone), 'damaged' (no holder can be read from it: stale too)."""

    state: str
    holder: dict[str, object] | None = None
    why: str = ""

    @property
    def takeable(self) -> bool:
        """Whether a trainer may take the run over (free, stale or damaged)."""
        return self.state in ("free", "stale", "damaged")

    @property
    def who(self) -> str:
        """'host:pid' of the holder ('' without one)."""
        return f"{self.holder.get('host')}:{self.holder.get('pid')}" if self.holder else ""

    def describe(self) -> str:
        """One phrase for `saferl status`: 'held by host:pid', 'stale (host:pid is gone)', 'damaged (...)'."""
        return {"free": "free", "held": f"held by {self.who}", "stale": f"stale ({self.who} is gone)",
                "damaged": f"damaged ({self.why}), taken over by the next trainer"}[self.state]


def parse_claim(text: str) -> tuple[dict[str, object] | None, str]:
    """The holder ({"host", "pid"}) a claim file's text names, or None and why it names none."""
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
    return {"host": host, "pid": pid}, ""


def claim_state(store: str | os.PathLike, key: RunKey) -> ClaimState:
    """The state of a run's claim (see `ClaimState`); reading it never raises for a damaged file."""
    try:
        text = claim_path(store, key).read_text(errors="replace")
    except (FileNotFoundError, NotADirectoryError):
        return ClaimState("free")
    except OSError as exc:
        return ClaimState("damaged", None, f"unreadable: {exc.strerror}")
    holder, why = parse_claim(text)
    if holder is None:
        return ClaimState("damaged", None, why)
    if holder["host"] == socket.gethostname() and not pid_alive(int(holder["pid"])):  # type: ignore[call-overload]
        return ClaimState("stale", holder)
    return ClaimState("held", holder)


def read_claim(store: str | os.PathLike, key: RunKey) -> dict[str, object] | None:
    """The holder of a run's claim ({"host", "pid"}), or None when unclaimed or damaged."""
    return claim_state(store, key).holder
