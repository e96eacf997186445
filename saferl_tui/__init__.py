"""saferl-tui: a keyboard-driven Textual explorer of a saferl results cube.

Modules: ``app`` (the App and the one factory ``build_app``), ``cli`` (the ``saferl-tui`` script),
``screens`` (main, help, open-path), ``views`` (one module per view: ``summary``, ``conditions``, ``cdf``,
``curves``, ``histograms``, ``runs``, and ``base`` with what they share), ``widgets`` (info bar, loading
panel, selection panel), ``messages`` (typed messages), ``model`` (cube + statistics + cache; no textual),
``commands`` (command palette provider), ``saferl_tui.tcss`` (styles). Statistics come from
``cube.stats``, ``cube.stats.curves`` and ``cube.store.summary``; metric, setting and tier names, labels and
directions from ``cube.stats.metrics``. Never imports jax.
"""
