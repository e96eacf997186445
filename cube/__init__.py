"""saferl's results cube: the schema, the Zarr store, the statistics of the paper, tables and figures,
importers and the `saferl` command line.

A core of top-level modules (``errors``, ``schema``, ``selection``, ``outputs``, ``compute``) and five
wings, imported one way: ``store`` (layout, writers, readers, locks, run status, validation), ``stats``
(sufficient statistics, metrics, bootstrap, tables), ``render`` (tables as text, figures), ``io`` (other
tools' results, the demo cube), ``cli`` (one module per command). This module re-exports the public API.
Never imports jax or textual, nor the trainer or the TUI (enforced by tests).
"""

from cube import stats  # registers the ``ds.saferl`` accessor
from cube.errors import CubeError
from cube.schema import DIMS, MODES, RUN_DIMS, SCHEMA_VERSION, RunKey
from cube.store.layout import create_store, extend_store, grow_store
from cube.store.read import export_netcdf, open_cube, read_manifests
from cube.store.recorder import Recorder
from cube.store.validate import validate
from cube.store.writer import CubeWriter, set_run_manifest, write_episodes, write_iterate_vars, write_run

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
