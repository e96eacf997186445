"""saferl-tui: a keyboard-driven Textual explorer of a saferl results cube, readable at 80x24 over SSH.

Modules: ``app`` (the App and the one factory ``build_app``), ``cli`` (the ``saferl-tui`` script),
``screens`` (``main``, ``following`` (follow mode's screen side), ``help``, ``open``), ``views`` (one
module per view, keys 1-9 and 0: ``summary``, ``conditions``, ``cdf``, ``curves``, ``histograms``,
``runs``, ``learning``, ``runstatus``, ``profile``, ``front``; and ``base``, ``table``, ``plot``, ``format``
with what they share),
``widgets`` (info bar, loading panel, selection panel), ``messages`` (typed messages), ``model`` (the
cube, its statistics and what each view derives; no textual), ``selection`` (``UISelection``,
``CubeInfo``), ``derived`` (the cache of derived results), ``follow`` (polling a store being written),
``exports`` (files written for the user), ``commands`` (command palette provider), ``saferl_tui.tcss``
(styles). Statistics come from ``cube.stats`` and ``cube.store``; metric, setting and tier names, labels
and directions from ``cube.stats.metrics``. Never imports jax.
"""
