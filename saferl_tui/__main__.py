"""``python -m saferl_tui``: the ``saferl-tui`` command (what ``--serve`` runs per browser session)."""

import sys

from saferl_tui.cli import main

if __name__ == "__main__":
    sys.exit(main())
