"""saferl's results cube: the schema, the Zarr store, the statistics of the paper, tables and figures,
importers and the `saferl` command line.

A core of top-level modules (``errors``, ``schema``, ``selection``, ``outputs``, ``compute``) and five
wings, imported one way: ``store`` (layout, writers, readers, locks, run status, validation), ``stats``
(sufficient statistics, metrics, bootstrap, tables), ``render`` (tables as text, figures), ``io`` (other
tools' results, the demo cube), ``cli`` (one module per command). This module re-exports the public API.
Never imports jax or textual, nor the trainer or the TUI (enforced by tests).
"""

from __future__ import annotations

import importlib
from typing import Any

# Lazy (PEP 562): `import cube` (and so every `cube.*` module, the command line's included) costs nothing; a
# name below is imported from its module on first use, which also registers the ``ds.saferl`` accessor.
_EXPORTS: dict[str, str] = {  # public name -> the module that defines it
    "CubeError": "cube.errors",
    "DIMS": "cube.schema",
    "MODES": "cube.schema",
    "RUN_DIMS": "cube.schema",
    "SCHEMA_VERSION": "cube.schema",
    "RunKey": "cube.schema",
    "create_store": "cube.store.layout",
    "extend_store": "cube.store.layout",
    "grow_store": "cube.store.layout",
    "export_netcdf": "cube.store.read",
    "open_cube": "cube.store.read",
    "read_manifests": "cube.store.read",
    "Recorder": "cube.store.recorder",
    "validate": "cube.store.validate",
    "CubeWriter": "cube.store.writer",
    "set_run_manifest": "cube.store.writer",
    "write_episodes": "cube.store.writer",
    "write_iterate_vars": "cube.store.writer",
    "write_run": "cube.store.writer",
}

__all__ = [
    "DIMS",
    "MODES",
    "RUN_DIMS",
    "SCHEMA_VERSION",
    "CubeError",
    "CubeWriter",
    "Recorder",
    "RunKey",
    "create_store",
    "export_netcdf",
    "extend_store",
    "grow_store",
    "open_cube",
    "read_manifests",
    "set_run_manifest",
    "stats",
    "validate",
    "write_episodes",
    "write_iterate_vars",
    "write_run",
]


def __getattr__(name: str) -> Any:
    """`cube.stats` or a public name, imported on first use (registering the ``ds.saferl`` accessor)."""
    if name == "stats":
        return importlib.import_module("cube.stats")
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'cube' has no attribute {name!r}")
    importlib.import_module("cube.stats.accessor")  # registers ``ds.saferl``
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_EXPORTS) | {"stats"})
