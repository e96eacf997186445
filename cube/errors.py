"""The one exception type that user-facing code raises for bad input."""

from __future__ import annotations


class CubeError(Exception):
    """A problem the user can fix: the message is one line naming the problem and what to do.

    The CLI prints ``error: <message>`` and exits with status 2; no traceback is shown.
    """

    def __init__(self, message: str) -> None:
        super().__init__(" ".join(str(message).split()))


class CubeWarning(UserWarning):
    """Something the user should know that does not stop the command (an interrupted write left out, a
    statistics cache that did not verify, node-local file locks): one line, printed as ``warning: <message>``."""
