"""saferl's results cube: schema, Zarr store, validation and every statistic of the paper.

This package never imports jax or textual (enforced by a test).
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
