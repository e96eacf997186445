"""The exception types that user-facing code raises for bad input: `CubeError`, and `DamagedStoreError`
for a store whose bytes cannot be read as written."""

from __future__ import annotations


class CubeError(Exception):
    """A problem the user can fix: the message is one line naming the problem and what to do.

    The CLI prints ``error: <message>`` and exits with status 2; no traceback is shown.
    """

    def __init__(self, message: str) -> None:
        super().__init__(" ".join(str(message).split()))


class DamagedStoreError(CubeError):
    """A store whose bytes cannot be read as written: a chunk whose checksum does not match or that does not
    decode, a chunk key that is a folder or a link, metadata zarr cannot parse. Raised where the damage is
    found (`cube.store.damage.reading_store` around the store's reads of chunks), so callers let it
    through and never word it again. Build it with `found` (the damage is named) or `unexplained` (only
    the decode error is known)."""

    ADVICE = "restore that run from a copy or rerun it"

    @classmethod
    def found(cls, what: str, damage: str, advice: str = ADVICE) -> DamagedStoreError:
        """'cannot <what>, the store is corrupt: <damage>: <advice> (saferl validate lists every problem)'."""
        return cls(f"cannot {what}, the store is corrupt: {damage}{': ' + advice if advice else ''} "
                   "(saferl validate lists every problem)")

    @classmethod
    def unexplained(cls, what: str, cause: BaseException,
                    advice: str = "check it with saferl validate or rewrite the damaged runs") -> DamagedStoreError:
        """'cannot <what> (<error type>: <its first line>): the store may be corrupt; <advice>'."""
        detail = str(cause).strip().splitlines()[0][:160] if str(cause).strip() else ""
        return cls(f"cannot {what} ({type(cause).__name__}{': ' + detail if detail else ''}): the store may be "
                   f"corrupt; {advice}")


class CubeWarning(UserWarning):
    """Something the user should know that does not stop the command (an interrupted write left out, a
    statistics cache that did not verify, node-local file locks): one line, printed as ``warning: <message>``."""
