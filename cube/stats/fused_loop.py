"""The compiled statistics loop itself (numba), imported by `cube.stats.fused` on first use only: see there.

Module-level functions, so that numba caches `cells` (a closure over other compiled functions is never found
in its cache again); `cells` is left undecorated for `cube.stats.fused` to compile, cached or not."""

from __future__ import annotations

import numba
import numpy as np

_jit = numba.njit(nogil=True, error_model="numpy")

SUB_BINS = 256
"""The most bins `select` spreads the costs of the CVaR's CDF bins over (about two costs each)."""


@_jit
def check_row(c, r):
    """(whether a cost is NaN, whether all are, whether an episode breaks the episode rule) of one cell's
    costs and rewards (E,): flags only, so that it vectorises."""
    some_nan, all_nan, bad = False, True, False
    for e in range(c.size):
        x, y = c[e], r[e]
        no_cost = x != x
        some_nan |= no_cost
        all_nan &= no_cost
        bad |= (x < 0) | (x == np.inf) | (abs(y) == np.inf) | (no_cost & (y == y))
    return some_nan, all_nan, bad


@_jit
def pack(c, r, into_c, into_r):
    """The episodes of a cell (costs not NaN) in episode order, at the front of into_c, into_r; their count."""
    n = np.int64(0)
    for e in range(c.size):
        x = c[e]
        into_c[n], into_r[n] = x, r[e]
        n += x == x
    return n


@_jit
def spread(c, r, n, d, at_most_d, top, inv_h, n_buckets, reward, over, bucket):
    """(n_r, n_viol) of n episodes c[:n], r[:n] (costs present), and what the in-order sums need, elementwise
    so that it vectorises: reward[e] = r[e] as float64 (0.0 where NaN), over[e] = max(c[e] - d, 0.0) (+0.0
    changes no sum that starts at +0.0), and bucket[e] the cost's bucket in `kernel.grid_locate`'s table
    (computed in the costs' dtype, as there; n_buckets = 1: no table)."""
    n_r = n_viol = np.int32(0)
    last = c.dtype.type(n_buckets - 1)
    for e in range(n):
        x, y = c[e], r[e]
        has_r = y == y
        n_r += np.int32(has_r)
        reward[e] = np.float64(y) if has_r else 0.0
        n_viol += np.int32(x > at_most_d)
        over[e] = max(np.float64(x) - d, 0.0)
        bucket[e] = np.int32(min(max((top - x) * inv_h, c.dtype.type(0)), last))
    return n_r, n_viol


@_jit
def add_up(c, reward, over, bucket, n, t, below, inside, use_table, counts):
    """(sum_r, sum_c, sum_over) of n episodes: float64 sums in episode order, three chains side by side, of
    reward, c and over (`spread`); counts[#{t < c[e]}] += 1 for every episode, the CDF bin found from the
    bucket (`kernel.grid_locate`) or by a binary search."""
    sum_r = sum_c = sum_over = 0.0
    if not use_table:
        for e in range(n):
            sum_r += reward[e]
            sum_c += np.float64(c[e])
            sum_over += over[e]
            counts[np.searchsorted(t, c[e])] += 1
        return sum_r, sum_c, sum_over
    for e in range(n):
        x, k = c[e], np.uint32(bucket[e])
        sum_r += reward[e]
        sum_c += np.float64(x)
        sum_over += over[e]
        counts[below[k] + (inside[k] < x)] += 1
    return sum_r, sum_c, sum_over


@_jit
def nth_largest(x, n, want):
    """The want-th largest (from 0) of x[:n], as float64: a quickselect (median of three, three-way
    partition) that reorders x."""
    lo, hi = 0, n - 1
    while lo < hi:
        p1, p2, p3 = x[lo], x[(lo + hi) // 2], x[hi]
        pivot = max(min(p1, p2), min(max(p1, p2), p3))
        lt, e, gt = lo, lo, hi  # [lo, lt) > pivot, [lt, e) == pivot, (gt, hi] < pivot
        while e <= gt:
            if x[e] > pivot:
                x[lt], x[e] = x[e], x[lt]
                lt += 1
                e += 1
            elif x[e] < pivot:
                x[gt], x[e] = x[e], x[gt]
                gt -= 1
            else:
                e += 1
        if want < lt:
            hi = lt - 1
        elif want > gt:
            lo = gt + 1
        else:
            return np.float64(pivot)
    return np.float64(x[lo])


@_jit
def select(kept, n_kept, least, greatest, rank, v, sub, bin_of, few):
    """v[a] = the rank[a]-th largest (from 0) of kept[:n_kept] (n_kept > 0), as float64; every kept cost lies
    in [least, greatest] (greatest = inf: unknown). A histogram of the costs on equal bins from least to
    greatest (the bin a monotone function of the cost) finds the bin of each rank; a quickselect among that
    bin's few costs, the value."""
    if greatest == np.inf:
        greatest = np.float64(kept[0])
        for e in range(n_kept):
            greatest = max(greatest, np.float64(kept[e]))
    n_sub = min(sub.size, max(1, n_kept // 2))
    scale = n_sub / (greatest - least) if greatest > least else np.inf
    if scale == np.inf:  # all alike, or too close to spread: a quickselect among all of them
        for a in range(rank.size):
            for e in range(n_kept):
                few[e] = kept[e]
            v[a] = nth_largest(few, n_kept, rank[a])
        return
    for b in range(n_sub):
        sub[b] = 0
    for e in range(n_kept):
        b = min(np.int32((np.float64(kept[e]) - least) * scale), n_sub - 1)
        bin_of[e] = b
        sub[b] += 1
    for a in range(rank.size):
        want, b, above = rank[a], n_sub - 1, 0
        while above + sub[b] <= want:
            above += sub[b]
            b -= 1
        n_few = np.int64(0)
        for e in range(n_kept):
            few[n_few] = kept[e]
            n_few += bin_of[e] == b
        v[a] = nth_largest(few, n_few, want - above)


@_jit
def tail_means(c, n, counts, t, k_tab, an_tab, tail, kept, rank, v, sub, bin_of, few, out):
    """out[a] = CVaR_alpha of the costs c[:n] (`cube.stats.tail`), counts (G + 1,) their CDF bins. v = c_(k),
    the k-th largest, lies in the bin where the counts from the top reach k: one scan keeps the costs above
    the lowest such bin of every alpha (in episode order), `select` finds each v among those of the bins of
    the alphas, and S adds the kept costs above v in episode order (the costs left out are at most v: they
    would add +0.0)."""
    g = t.size
    n_alpha = k_tab.shape[0]
    b_low, b_high = g, 0
    for a in range(n_alpha):
        k = k_tab[a, n]
        b = g
        reached = counts[g]
        while reached < k:
            b -= 1
            reached += counts[b]
        rank[a] = k
        b_low, b_high = min(b_low, b), max(b_high, b)
    above = 0  # the costs above the bins of the alphas
    for j in range(b_high + 1, g + 1):
        above += counts[j]
    lower = np.float64(t[b_low - 1]) if b_low > 0 else -np.inf  # bin b: t[b - 1] < c <= t[b]
    upper = np.float64(t[b_high]) if b_high < g else np.inf
    n_tail = np.int64(0)
    for e in range(n):
        x = c[e]
        tail[n_tail] = x
        n_tail += x > lower
    n_kept = np.int64(0)
    for e in range(n_tail):
        x = tail[e]
        kept[n_kept] = x
        n_kept += x <= upper
    for a in range(n_alpha):
        rank[a] -= above + 1  # v's position in descending order among the kept costs
    select(kept, n_kept, lower if b_low > 0 else 0.0, upper, rank, v, sub, bin_of, few)
    a = 0
    while a < n_alpha:  # S: the kept costs above v, in episode order, two alphas per scan
        second = a + 1 if a + 1 < n_alpha else a
        cut1, cut2 = v[a], v[second]
        total1 = total2 = 0.0
        count1 = count2 = 0
        for e in range(n_tail):
            x = np.float64(tail[e])
            total1 += x if x > cut1 else 0.0
            count1 += x > cut1
            total2 += x if x > cut2 else 0.0
            count2 += x > cut2
        an = an_tab[a, n]
        out[a] = (total1 + (an - count1) * cut1) / an
        an = an_tab[second, n]
        out[second] = (total2 + (an - count2) * cut2) / an
        a += 2


def cells(r3, c3, selected, d, at_most_d, t, top, inv_h, below, inside, use_table, sums, le, has_cost, col,
          k_tab, an_tab, cvar):
    """r3, c3: (n, E, M) rewards and costs; selected (n * M,) bool: the cells of bound d (cell = i * M + m).
    Fills, for the selected cells with a cost, sums[cell] (6,) float64 (OUTPUTS[k] in column col[k]),
    le[cell] (G,) int64, cvar[cell] (A,) float64 (CVaR_alpha of the costs, from k_tab and an_tab:
    `tail.tail_table`) and has_cost[cell]. Returns True when an episode breaks the cube's episode rule."""
    n_runs, n_eps, n_modes = c3.shape
    r2, c2 = r3.reshape((n_runs, n_eps * n_modes)), c3.reshape((n_runs, n_eps * n_modes))
    g = t.size
    counts = np.empty(g + 1, dtype=np.int64)
    row_c, row_r = np.empty(n_eps, dtype=c3.dtype), np.empty(n_eps, dtype=r3.dtype)
    packed_c, packed_r = np.empty(n_eps, dtype=c3.dtype), np.empty(n_eps, dtype=r3.dtype)
    reward, over = np.empty(n_eps, dtype=np.float64), np.empty(n_eps, dtype=np.float64)
    bucket = np.empty(n_eps, dtype=np.int32)
    n_buckets = below.size if use_table else 1
    tail, kept = np.empty(n_eps, dtype=c3.dtype), np.empty(n_eps, dtype=c3.dtype)
    few = np.empty(n_eps, dtype=c3.dtype)
    sub, bin_of = np.empty(SUB_BINS, dtype=np.int64), np.empty(n_eps, dtype=np.int32)
    n_alpha = k_tab.shape[0]
    rank = np.empty(n_alpha, dtype=np.int64)
    v = np.empty(n_alpha, dtype=np.float64)
    for cell in range(n_runs * n_modes):
        if not selected[cell]:
            continue
        i, m = cell // n_modes, cell % n_modes
        if n_modes == 1:  # a cell's episodes are a row already (stores chunked by mode)
            c, r = c2[i], r2[i]
        else:
            for e in range(n_eps):
                row_c[e], row_r[e] = c3[i, e, m], r3[i, e, m]
            c, r = row_c, row_r
        some_nan, all_nan, bad = check_row(c, r)
        if bad:
            return True
        if all_nan:
            continue
        n = n_eps
        if some_nan:
            n = pack(c, r, packed_c, packed_r)
            c, r = packed_c, packed_r
        n_r, n_viol = spread(c, r, n, d, at_most_d, top, inv_h, n_buckets, reward, over, bucket)
        for j in range(g + 1):
            counts[j] = 0
        sum_r, sum_c, sum_over = add_up(c, reward, over, bucket, n, t, below, inside, use_table, counts)
        has_cost[cell] = True
        sums[cell, col[0]] = n_r
        sums[cell, col[1]] = sum_r
        sums[cell, col[2]] = n
        sums[cell, col[3]] = sum_c
        sums[cell, col[4]] = n_viol
        sums[cell, col[5]] = sum_over
        running = 0
        for j in range(g):
            running += counts[j]
            le[cell, j] = running
        tail_means(c, n, counts, t, k_tab, an_tab, tail, kept, rank, v, sub, bin_of, few, cvar[cell])
    return False
