"""CVaR_alpha of a cell's episodes (beyond the paper; Rockafellar & Uryasev 2000): its definition, the alphas,
and the table of k and alpha N per episode count that both kernels (`cube.stats.kernel`, `cube.stats.fused`) use.

For a cell with N episodes (NaN is not an episode) and costs sorted descending c_(1) >= ... >= c_(N):

    k = ceil(alpha N),  w = alpha N - (k - 1)  (in (0, 1]),
    CVaR_alpha(c) = (c_(1) + ... + c_(k-1) + w c_(k)) / (alpha N)

the mean of the worst alpha share of the episodes with the boundary episode weighted by its fraction, the
empirical form of CVaR_alpha = VaR_alpha + E[(X - VaR_alpha)^+] / alpha. alpha N is exact: alpha is read as the
decimal it is written as (0.1 x 30 = 3, not 3.0000000000000004). The metric is CVaR of the normalized cost
deviation D = (c - d)/d, which is (CVaR_alpha(c) - d)/d (an increasing affine map keeps the order and the
weights sum to alpha N); the cells hold CVaR_alpha(c) in cost units (`cube.stats.suffvars.CVAR_VAR`).

How both kernels evaluate it, in the same float64 operations (so they agree bit for bit): with v = c_(k) (an
episode's value, exact) and m = #{i: c_i > v} (m <= k - 1, ties at v are v),

    S = the float64 sum of the c_i > v in episode order,   CVaR_alpha(c) = (S + (alpha N - m) v) / (alpha N)

which equals the definition: the k - 1 largest values are the m values above v and k - 1 - m copies of v.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from fractions import Fraction
from typing import TYPE_CHECKING

from cube.errors import CubeError

if TYPE_CHECKING:  # numpy loads with the table: `saferl report --help` reads the alphas without it
    import numpy as np

DEFAULT_CVAR_ALPHA = 0.1
"""The alpha of the CVaR metric when none is chosen (`--cvar-alpha`)."""
CVAR_ALPHAS: tuple[float, ...] = (0.1, 0.05)
"""The alphas every pass computes (and the cache holds); another alpha is computed when asked for."""


def check_alpha(alpha: float) -> float:
    """alpha as a float in (0, 1]; CubeError (one line) otherwise."""
    try:
        value = float(alpha)
    except (TypeError, ValueError):
        raise CubeError(f"CVaR alpha {alpha!r} is not a number: give a share of episodes in (0, 1], e.g. 0.1") from None
    if not 0.0 < value <= 1.0:
        raise CubeError(f"CVaR alpha {alpha!r} is not in (0, 1]: give the share of worst episodes, e.g. 0.1 or 0.05")
    return value


def cvar_alphas(extra: Sequence[float] | float | None = None) -> tuple[float, ...]:
    """CVAR_ALPHAS followed by the other alphas of `extra` (checked), each once."""
    extra = () if extra is None else ((extra,) if isinstance(extra, int | float) else tuple(extra))
    return tuple(dict.fromkeys((*CVAR_ALPHAS, *(check_alpha(a) for a in extra))))


_TABLES: dict[tuple[tuple[float, ...], int], tuple[np.ndarray, np.ndarray]] = {}


def tail_table(alphas: Sequence[float], n_max: int) -> tuple[np.ndarray, np.ndarray]:
    """(k, alpha N) for every alpha and episode count N = 0..n_max: k (A, n_max + 1) int64 = ceil(alpha N)
    (0 for N = 0) and alpha N (A, n_max + 1) float64, both from alpha read as its decimal (`Fraction(repr)`)."""
    key = (tuple(float(a) for a in alphas), int(n_max))
    if key not in _TABLES:
        import numpy as np

        k = np.zeros((len(alphas), n_max + 1), dtype=np.int64)
        an = np.zeros((len(alphas), n_max + 1), dtype=np.float64)
        for i, alpha in enumerate(key[0]):
            exact = Fraction(repr(alpha))
            for n in range(1, n_max + 1):
                k[i, n], an[i, n] = math.ceil(exact * n), float(exact * n)
        _TABLES[key] = (k, an)
    return _TABLES[key]
