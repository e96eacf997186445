"""The `saferl` command line: ``entry`` (the entry point, plugin loading, the one error boundary),
``console`` (the stderr console, progress bars, the one-line ``error:``), and one module per command:
``demo``, ``validate``, ``report``, ``plot``, ``import_``, ``export``, ``status``. ``saferl train`` and
``saferl evaluate`` are the trainer's, registered through the ``saferl.commands`` entry points."""

from cube.cli.entry import main, register

__all__ = ["main", "register"]
