"""``saferl-tui CUBE --serve``: the explorer in a browser through `textual-serve` (the optional extra
``saferl[serve]``). Each browser tab runs its own ``saferl-tui`` (the same arguments without ``--serve``);
the server binds to this machine only unless ``--host`` says otherwise."""

from __future__ import annotations

import shlex
import sys
from collections.abc import Sequence

from cube.errors import CubeError

SERVE_FLAGS = {"--serve": 0, "--host": 1, "--port": 1}
"""The flags of serving (and how many values each takes), left out of the app's own command."""


def app_command(argv: Sequence[str]) -> str:
    """The shell command each browser session runs: this Python running saferl-tui on ``argv`` minus the
    serve flags (``--host 0.0.0.0`` and ``--host=...`` both left out)."""
    out: list[str] = []
    skip = 0
    for arg in argv:
        if skip:
            skip -= 1
            continue
        name = arg.split("=", 1)[0]
        if name in SERVE_FLAGS:
            skip = SERVE_FLAGS[name] if "=" not in arg else 0
            continue
        out.append(arg)
    return shlex.join([sys.executable, "-m", "saferl_tui", *out])


def tunnel_text(host: str, port: int) -> str:
    """How to reach the server: the URL, and the SSH tunnel from a laptop when it runs on a login node."""
    local = host in ("127.0.0.1", "localhost", "::1")
    lines = [f"saferl-tui: serving on http://{host}:{port} (Ctrl+C stops it)"]
    if local:
        lines.append(f"from your laptop: ssh -N -L {port}:localhost:{port} USER@THIS_HOST, "
                     f"then open http://localhost:{port}")
    else:
        lines.append(f"bound to {host}: anyone who can reach this port can see the cube; "
                     "--host 127.0.0.1 with an SSH tunnel keeps it private")
    return "\n".join(lines)


def serve(argv: Sequence[str], host: str, port: int) -> int:
    """Serve the app until Ctrl+C; CubeError (one line) without textual-serve or with a bad port."""
    if not 0 < port < 65536:
        raise CubeError(f"--port must be a port number from 1 to 65535, not {port}")
    try:
        from textual_serve.server import Server
    except ImportError:
        raise CubeError("--serve needs textual-serve: pip install 'saferl[serve]'") from None
    print(tunnel_text(host, port), flush=True)
    Server(app_command(argv), host=host, port=port, title="saferl-tui").serve()
    return 0
