"""The statistics of one block of episodes, as every pass over a store computes them (`cube.stats.suffstats`):
what a block computes (`BlockSpec`), the kernel run on it with a torn read of a run being written left out
(`map_block`), and where its statistics go (`put_block` into a Dataset, `Sink` for a pass's tasks to fill
arrays in place)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import xarray as xr

from cube.schema import RUN_DIMS
from cube.stats.kernel import BadEpisodes, cell_stats
from cube.stats.suffvars import ALPHA_DIM, CDF_VAR, CVAR_VAR, SUM_VARS


def locator(labels: dict[str, np.ndarray], origin: tuple[int, ...]) -> Callable[[tuple[int, ...]], str]:
    """index (a, t, b, s, j, e, m) relative to `origin` -> 'algo=.. task=.. bound=.. seed=.. iterate=.. mode=..'."""
    def where(idx: tuple[int, ...]) -> str:
        idx = (0,) * (len(origin) - len(idx)) + tuple(idx)  # a one-run block has no run dims
        pos = [o + i for o, i in zip(origin, idx, strict=True)]
        names = (*RUN_DIMS, "iterate", "episode", "mode")
        return " ".join(f"{n}={labels[n][p]}" for n, p in zip(names, pos, strict=False) if n != "episode")
    return where


Block = dict[str, np.ndarray]
"""The statistics of a block of cells: {name: array (..., M[, G or A])} for every name of STATS_VARS."""


@dataclass(frozen=True)
class BlockSpec:
    """What every block of a pass computes: the CDF grid `kappa` and the dtype of its counts, the CVaR
    `alphas` (`cube.stats.tail`), and the `kernel` ("auto", "numpy", "fused"; None = the default)."""

    kappa: np.ndarray
    le_dtype: type
    alphas: tuple[float, ...]
    kernel: str | None = None

    @classmethod
    def of(cls, ss: xr.Dataset, kernel: str | None = None) -> BlockSpec:
        """The spec of existing statistics `ss` (to recompute some of their runs alike)."""
        return cls(ss["kappa"].values, ss[CDF_VAR].dtype, tuple(float(a) for a in ss[ALPHA_DIM].values), kernel)


def map_block(r: np.ndarray, c: np.ndarray, d: np.ndarray, labels: dict[str, np.ndarray],
               origin: tuple[int, ...], spec: BlockSpec,
               written: Callable[[tuple[int, ...]], bool] | None = None) -> Block:
    """One dask task: the statistics of a block of episodes (..., E, M) whose first element sits at `origin`
    in the cube: (..., M) float64 per SUM_VARS name, the (..., M, G) CDF counts and the (..., M, A) CVaRs.

    `written(run position)` tells whether a run was written while the pass read it (`WrittenSince`):
    bad values in such a run are a reader's torn view, not a broken cube, so the run is left out here
    (all zero) and recomputed from a consistent read afterwards; elsewhere they are a one-line error."""
    while True:
        try:
            got = cell_stats(r, c, d, spec.kappa, locator(labels, origin), spec.kernel, spec.alphas)
            break
        except BadEpisodes as exc:
            run_dims = r.ndim - 3  # 4 for blocks of runs, 0 for one run's (J, E, M)
            if written is None or exc.block_index is None:
                raise
            run = tuple(o + i for o, i in zip(origin[:4], (*exc.block_index[:run_dims], 0, 0, 0, 0), strict=False))
            if not written(run):
                raise
            r, c = np.array(r, copy=True), np.array(c, copy=True)
            blank = exc.block_index[:run_dims]
            r[blank], c[blank] = np.nan, np.nan
    n_cells = int(np.prod(got.cells))

    def every_cell(values: np.ndarray, dtype: type) -> np.ndarray:
        """(rows, F) of the cells got.rows -> (n_cells, F), zero (no episode) in the others."""
        if got.rows.size == n_cells:  # every cell holds episodes (training blocks): rows are all, in order
            return values.astype(dtype, copy=False)
        out = np.zeros((n_cells, values.shape[1]), dtype=dtype)
        out[got.rows] = values
        return out

    sums = every_cell(got.sums, np.float64)
    block = {name: sums[:, i].reshape(got.cells) for i, name in enumerate(SUM_VARS)}
    for name, values, dtype in ((CDF_VAR, got.le, spec.le_dtype), (CVAR_VAR, got.cvar, np.float64)):
        block[name] = every_cell(values, dtype).reshape(*got.cells, values.shape[1])
    return block


def put_block(ss: xr.Dataset, index: tuple, block: Block) -> None:
    """Write a block's statistics into `ss` (in place) at `index` (positions along the leading dims)."""
    for name, values in block.items():
        ss[name].values[index] = values


class Sink:
    """The statistics of a pass on the local threaded scheduler, which its tasks fill in place (`put_block`):
    each task writes its own cells, so the main thread has no blocks left to copy in after the last task
    (0.2-0.4 s of a cold paper-scale report, docs/performance.md, sixth round) and the pass holds no finished
    blocks."""

    def __init__(self, ss: xr.Dataset) -> None:
        self.ss = ss

    def put(self, place: tuple, block: Block) -> None:
        """Write a block's statistics at `place` (cells no other task writes)."""
        put_block(self.ss, place, block)

    def __dask_tokenize__(self) -> tuple[str, int]:  # dask names tasks by their arguments: never by the arrays
        return ("Sink", id(self))
