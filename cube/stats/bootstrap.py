"""The one interval-estimate engine: the stratified bootstrap over seeds (cf. rliable's `library`).

A *sample* is one algorithm's per-run values packed by stratum (condition): values (P, Kmax, F) whose
first k[p] rows of stratum p are its runs (`strata`). A replicate draws, within every stratum
independently, k[p] seeds with replacement (seed floor(u * k[p]) for u ~ U[0, 1)); it is represented by
the draw counts w (P, Kmax), so a statistic linear in the runs is one matmul per batch of replicates.
`interval` runs that skeleton for any statistic of one or more independent samples (the aggregate IQM,
the CDF band, the probability of improvement, the greedy-expl gap): the one-seed check, batches of
replicates, the percentile interval. Point estimates and the table layouts live in `cube.stats.tables` and
`cube.stats.compare`.

Random streams: one generator per (rng_seed, label, setting) (`bootstrap_rng`), drawn in batches of
BATCH replicates; per batch, the uniforms of each sample in turn (`rng.random((b, P, Kmax))`). The
result does not depend on BATCH.
"""

from __future__ import annotations

import warnings
import zlib
from collections.abc import Callable, Sequence

import numpy as np

from cube.errors import CubeError
from cube.stats.metrics import iqm

__all__ = [
    "BATCH", "StatsWarning", "bootstrap_rng", "check_boot", "strata", "stratified_bootstrap_weights",
    "stratified_bootstrap_means", "weighted_means", "replicates", "percentile_ci", "one_seed", "interval",
    "iqm_interval",
]

BATCH = 2048  # replicates per batch: bounds memory; the random stream (and so the result) is the same
Sample = tuple[np.ndarray, int]  # (k (P,) seeds per stratum, Kmax) of one resampled algorithm


class StatsWarning(UserWarning):
    """A statistic was reported as NaN or a run was left out (e.g. a condition with fewer than 2 seeds)."""


def bootstrap_rng(rng_seed: int, label: str, setting: str) -> np.random.Generator:
    """The bootstrap's generator for one (label, setting): seeded by (rng_seed, crc32(label), crc32(setting)),
    so one algorithm's CI does not depend on which others are selected."""
    return np.random.default_rng([rng_seed, zlib.crc32(str(label).encode()), zlib.crc32(setting.encode())])


def check_boot(boot: int, ci: float) -> None:
    """CubeError unless boot is a positive integer and 0 < ci < 1."""
    if not (isinstance(boot, int | np.integer) and boot >= 1):
        raise CubeError(f"bootstrap replicates must be a positive integer, got {boot!r}")
    if not 0.0 < ci < 1.0:
        raise CubeError(f"confidence level must be in (0, 1), got {ci!r}")


def strata(values: np.ndarray, valid: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """values (P, K, F), valid (P, K) -> per-stratum valid values packed first (P', Kmax, F), counts (P',).
    Strata (conditions) without any valid seed are dropped; padding is 0 (never drawn)."""
    k = valid.sum(1)
    keep = k > 0
    order = np.argsort(~valid, axis=1, kind="stable")
    packed = np.take_along_axis(values, order[..., None], axis=1)
    return np.where(np.isnan(packed), 0.0, packed)[keep], k[keep]


def stratified_bootstrap_weights(k: np.ndarray, kmax: int, boot: int, rng: np.random.Generator) -> np.ndarray:
    """How often each seed is drawn: (boot, P, kmax) counts; row p of a replicate sums to k[p].

    Each replicate draws k[p] seeds uniformly with replacement from stratum p's first k[p] seeds
    (seed floor(u * k[p]) for u ~ U[0, 1) from rng.random((boot, P, kmax))); strata are independent.
    """
    p = k.size
    u = rng.random((boot, p, kmax))
    u *= k[None, :, None]  # in place: the draws are made once per replicate and stratum, the largest arrays here
    idx = u.astype(np.intp)
    np.minimum(idx, k[None, :, None] - 1, out=idx)
    idx += (np.arange(boot * p, dtype=np.intp) * kmax).reshape(boot, p, 1)
    flat = idx.ravel() if np.all(k == kmax) else idx[np.broadcast_to(np.arange(kmax) < k[:, None], idx.shape)]
    return np.bincount(flat, minlength=boot * p * kmax).reshape(boot, p, kmax).astype(np.float64)


def weighted_means(w: np.ndarray, values: np.ndarray) -> np.ndarray:
    """(B, P, Kmax) weights x (P, Kmax, F) values -> (B, P, F), one batched matmul over strata."""
    return np.matmul(w.transpose(1, 0, 2), values).transpose(1, 0, 2)


def stratified_bootstrap_means(values: np.ndarray, k: np.ndarray, boot: int,
                               rng: np.random.Generator) -> np.ndarray:
    """Seed means per stratum under resampling of seeds with replacement within each stratum.

    values: (P, Kmax, F), the first k[p] rows of stratum p valid (the rest finite padding);
    returns (boot, P, F).
    """
    return weighted_means(stratified_bootstrap_weights(k, values.shape[1], boot, rng) / k[None, :, None], values)


def replicates(samples: Sequence[Sample], boot: int, rng: np.random.Generator,
               statistic: Callable[..., np.ndarray], batch: int = BATCH) -> np.ndarray:
    """statistic(w_1, ..., w_n) stacked over batches of replicates: w_i (b, P, Kmax_i) are the draw
    counts of sample i (independent samples, drawn in turn from one generator); returns (boot, ...).
    `batch` bounds memory (a wide statistic, e.g. a whole learning curve, wants smaller batches); the
    random stream, and so the result, does not depend on it."""
    out = []
    for start in range(0, boot, batch):
        b = min(batch, boot - start)
        out.append(statistic(*(stratified_bootstrap_weights(k, kmax, b, rng) for k, kmax in samples)))
    return np.concatenate(out)


def percentile_ci(reps: np.ndarray, ci: float, skip_nan: bool = False) -> tuple[np.ndarray, np.ndarray]:
    """Percentile interval of replicates (boot, ...) at level ci (np.quantile, linear); with `skip_nan`
    over the replicates where the statistic exists (np.nanquantile; NaN where none does)."""
    alpha = (1.0 - ci) / 2.0
    if skip_nan and np.isnan(reps).any():
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)  # all-NaN columns give NaN, as they should
            lo, hi = np.nanquantile(reps, [alpha, 1.0 - alpha], axis=0)
        return lo, hi
    lo, hi = np.quantile(reps, [alpha, 1.0 - alpha], axis=0)
    return lo, hi


def one_seed(k: np.ndarray, what: str) -> bool:
    """True (and a one-line StatsWarning) when some condition has fewer than 2 seeds: CI is NaN then."""
    if np.all(k >= 2):
        return False
    warnings.warn(f"{what}: {int(np.sum(k < 2))} condition(s) with fewer than 2 seeds, CI reported as NaN",
                  StatsWarning, stacklevel=4)
    return True


def interval(samples: Sequence[Sample], boot: int, rng: np.random.Generator, ci: float,
             statistic: Callable[..., np.ndarray], what: str
             ) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
    """The stratified-bootstrap percentile interval of `statistic` (see `replicates`): (ci_low, ci_high,
    replicates), or None (with a StatsWarning naming `what`) when a stratum has fewer than 2 seeds in
    any sample: a CI from one seed would pretend certainty."""
    if one_seed(np.minimum.reduce([np.asarray(k) for k, _ in samples]), what):
        return None
    reps = replicates(samples, boot, rng, statistic)
    lo, hi = percentile_ci(reps, ci)
    return lo, hi, reps


def iqm_interval(values: np.ndarray, valid: np.ndarray, boot: int, rng: np.random.Generator, ci: float,
                 what: str) -> tuple[np.ndarray, np.ndarray, np.ndarray, int, np.ndarray | None]:
    """IQM over strata of seed means with its stratified-bootstrap percentile CI.

    values (P, K, F), valid (P, K). Returns (value (F,), ci_low (F,), ci_high (F,), n_strata, reps
    (boot, F) or None). Strata without a valid seed are dropped; all NaN if none is left; NaN CI (and a
    warning) when a stratum has fewer than 2 seeds. A seed is resampled as a whole (all F together).
    """
    nan = np.full(values.shape[-1], np.nan)
    packed, k = strata(values, valid)
    if not k.size:
        return nan, nan, nan, 0, None
    value = iqm(packed.sum(1) / k[:, None], axis=0)
    est = interval([(k, packed.shape[1])], boot, rng, ci,
                   lambda w: iqm(weighted_means(w / k[None, :, None], packed), axis=1), what)
    if est is None:
        return value, nan, nan, k.size, None
    lo, hi, reps = est
    return value, lo, hi, k.size, reps
