"""saferl-tui: a keyboard-driven Textual explorer of a saferl results cube.

Modules: ``app`` (the App and ``build_app``), ``cli`` (the ``saferl-tui`` script), ``screens`` (main,
help, open-path), ``panes`` (the six views), ``widgets`` (info bar, loading panel, selection panel),
``messages`` (typed messages), ``model`` (cube + statistics + cache; no textual), ``commands`` (command
palette provider), ``saferl_tui.tcss`` (styles). Statistics come from ``cube.stats``, ``cube.curves`` and ``cube.summary``.
"""
