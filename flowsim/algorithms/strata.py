"""Stratified sampling of the unit cube in hypercubes of equal events (classic VEGAS).

The unit cube of ``y`` is cut into ``H = prod(nstrat)`` hypercubes and an iteration
of ``n`` events gives each the same number of events, ``m = n // H`` or ``m + 1``:
the first ``r = n % H`` hypercubes get ``m + 1``.  Events are laid out on the block
grid in hypercube order, so the hypercube of event ``e`` is computed directly
(:func:`uniform_hypercube_of`), with no table, and a block only meets the
hypercubes of one contiguous range.

The stratified estimate is ``sum_h mean_h / H`` with variance
``sum_h var_h / (n_h H^2)``.  A block computes, for every hypercube it holds
entirely, the squared deviations about the hypercube's own mean (exact when the
mean dwarfs the spread) and returns their sum as one number per component; for
the first and last hypercube it meets (which may continue in the neighbouring
blocks) it returns count, sum and squared deviations, which the host pools
(:func:`pool_edges`, Chan et al.) in block order.  So a block returns
``O(k)`` numbers whatever ``H`` is, and the bits of the result are the same
for any chunking, device count or backend.
"""
import numpy as np

from ..core.blocks import BLOCK_QUANTUM
from ..core.lazy_tf import tf
from ..core.sums import block_sum, segment_block_sum

#: Width of one edge record: hypercube id, count, then sum and squared deviations
#: (``k`` each).
EDGE_HEAD = 2


def choose_nstrat(dim, n_events, max_hcubes, per_hcube, max_per_axis=None):
    """Strata per axis: as even as possible with ``prod <= min(max_hcubes, n / per_hcube)``
    and, if given, at most ``max_per_axis`` on every axis."""
    limit = max(1, min(max_hcubes, n_events // per_hcube))
    if max_per_axis is not None:
        limit = min(limit, max_per_axis ** dim)
    ns = max(1, int(np.floor(limit ** (1.0 / dim) + 1e-9)))
    while ns ** dim > limit:
        ns -= 1
    nstrat = [ns] * dim
    for d in range(dim):            # give some axes one more stratum while it fits
        trial = list(nstrat)
        trial[d] += 1
        if np.prod(trial, dtype=np.float64) <= limit:
            nstrat = trial
    return np.array(nstrat, dtype=np.int64)


def check_nstrat(nstrat, dim):
    """``nstrat`` as ``int64 [dim]``, each >= 1 (ValueError otherwise)."""
    ns = np.array(nstrat).reshape(-1)
    if ns.shape != (dim,) or not np.issubdtype(ns.dtype, np.integer) or np.any(ns < 1):
        raise ValueError(f"nstrat must be {dim} integers >= 1, got {nstrat!r}")
    return ns.astype(np.int64)


def strides(nstrat):
    """Mixed-radix strides of the hypercube number (axis 0 fastest)."""
    return np.concatenate([[1], np.cumprod(nstrat)[:-1]]).astype(np.int64)


def uniform_counts(n_events, h):
    """Events of each of ``h`` hypercubes: ``n // h``, the first ``n % h`` one more."""
    m, r = divmod(int(n_events), int(h))
    counts = np.full(h, m, dtype=np.int64)
    counts[:r] += 1
    return counts


def uniform_hypercube_of(events, per, extra):
    """Hypercube of each event number in ``events`` when the first ``extra``
    hypercubes hold ``per + 1`` events and the others ``per``.

    ``events``, ``per`` and ``extra`` all int64 (exact below 2**63 events) or all
    float64 holding integers (exact below 2**50; what the kernel uses: x86 has
    no vector integer division).  The inverse of :func:`uniform_counts` laid end
    to end.  Events past the last hypercube get numbers ``>= H``.
    """
    t = tf()
    big = extra * (per + 1)
    if events.dtype == t.int64:
        return t.where(events < big, events // (per + 1), extra + (events - big) // per)
    # float64 holding integers below 2**50: floor((a + 1/2) / b) is exact (floordiv:
    # XLA's floor of the quotient, without the separate lowering of a Floor op)
    return t.where(events < big, t.math.floordiv(events + 0.5, per + 1),
                   extra + t.math.floordiv(events - big + 0.5, per))


def point_in_hypercube(cube, u, nstrat, stride):
    """``y`` of the uniforms ``u`` ``[n, dim]`` placed in hypercubes ``cube`` ``[n]``."""
    t = tf()
    # in float64, exact for hypercube numbers below 2**50 (x86 has no vector integer
    # division): q = floor(c / stride), digit = q - nstrat floor(q / nstrat)
    c = t.cast(cube, t.float64)[:, None]
    ns = t.cast(nstrat, t.float64)
    q = t.math.floordiv(c + 0.5, t.cast(stride, t.float64))
    digits = q - ns * t.math.floordiv(q + 0.5, ns)
    return (t.cast(digits, u.dtype) + u) / t.cast(nstrat, u.dtype)


def local_slots(size, h):
    """Static number of hypercube slots a block of ``size`` events needs when every
    hypercube has at least two events, rounded up to ``BLOCK_QUANTUM``."""
    slots = min(h, size // 2 + 2)
    return -(-slots // BLOCK_QUANTUM) * BLOCK_QUANTUM


def block_strata(v, valid, cube, per, extra, h):
    """The accumulators of one block of stratified events.

    ``v`` ``[n, k]`` float64 values (zero where not kept), ``valid`` ``[n]``,
    ``cube`` ``[n]`` int64 hypercube numbers, nondecreasing over valid events.
    Returns ``strat_sum`` ``[k]`` (``sum_h S_h / n_h`` over this block's part of
    each hypercube), ``strat_var`` ``[k]`` (``sum_h M2_h / (n_h (n_h - 1))`` over
    the hypercubes wholly inside the block) and ``strat_edges`` ``[2, 2 + 2k]``
    (id, count, sum, M2 of the first and last hypercube met; a zero count
    when the block meets only one).
    """
    t = tf()
    size = v.shape[0]
    slots = local_slots(size, h)
    first = cube[0]
    loc = t.cast(cube - first, t.int32)
    seg = t.where(valid, loc, slots)                                       # padding: sink
    ones = t.cast(valid, t.float64)[:, None]
    cs = segment_block_sum(t.concat([ones, v], axis=1), seg, slots + 1)[:slots]
    count, total = cs[:, 0], cs[:, 1:]
    mean = total / t.maximum(count, 1.0)[:, None]
    dev = (v - t.gather(mean, t.minimum(seg, slots - 1))) * ones
    m2 = segment_block_sum(dev * dev, seg, slots + 1)[:slots]
    ids = first + t.range(slots, dtype=t.int64)
    n_h = t.cast(t.where(ids < extra, per + 1, per), t.float64)
    last = t.reduce_max(t.where(valid, loc, 0))
    slot = t.range(slots, dtype=t.int32)
    inside = (slot > 0) & (slot < last)
    scale = t.where(inside, 1.0 / (n_h * t.maximum(n_h - 1.0, 1.0)), t.zeros_like(n_h))
    def record(at, ident):
        # gather, not cs[at]: a slice at a tensor index needs it as a compile-time
        # constant under XLA, which made the block's first event and the iteration's
        # size part of the compiled function's key (a new XLA compilation per block)
        return t.concat([t.cast(ident, t.float64)[None], t.gather(cs, at),
                         t.gather(m2, at)], axis=0)

    head = record(0, first)
    tail = record(last, first + t.cast(last, t.int64))
    edges = t.stack([head, t.where(last > 0, tail, t.zeros_like(tail))])
    return {"strat_sum": block_sum(total / n_h[:, None]),
            "strat_var": block_sum(m2 * scale[:, None]),
            "strat_edges": edges}


def pool_edges(edges, per, extra):
    """``sum M2_h / (n_h (n_h - 1))`` of the hypercubes split between blocks.

    ``edges`` ``[records, 2 + 2k]`` in block order (id, count, sum, M2): records of
    one hypercube are consecutive; they are pooled (``M2 = sum M2_i + n_i (mean_i -
    mean)^2``) in that order.
    """
    edges = np.asarray(edges, dtype=np.float64)
    edges = edges[edges[:, 1] > 0]
    if edges.shape[0] == 0:
        return np.zeros((edges.shape[1] - EDGE_HEAD) // 2)
    k = (edges.shape[1] - EDGE_HEAD) // 2
    ids, count = edges[:, 0].astype(np.int64), edges[:, 1]
    s, m2 = edges[:, 2:2 + k], edges[:, 2 + k:]
    starts = np.flatnonzero(np.r_[True, ids[1:] != ids[:-1]])
    group = np.cumsum(np.r_[False, ids[1:] != ids[:-1]])
    n = np.add.reduceat(count, starts)
    mean = np.add.reduceat(s, starts, axis=0) / n[:, None]
    spread = (s / count[:, None] - mean[group]) ** 2 * count[:, None]
    m2_h = np.add.reduceat(m2, starts, axis=0) + np.add.reduceat(spread, starts, axis=0)
    h_ids = ids[starts]
    n_h = np.where(h_ids < extra, per + 1, per).astype(np.float64)
    terms = m2_h / (n_h * np.maximum(n_h - 1.0, 1.0))[:, None]
    out = np.zeros(k)
    for row in terms:                     # in hypercube order, like reduce_rows
        out += row
    return out
