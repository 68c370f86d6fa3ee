"""VegasPlus's default hypercubes against the events per iteration (no integration runs).

The precision these choices give, beside ``vegas``'s, is the table of
``benchmarks/vegasplus_sizes.py``; here the rule itself is checked.
"""
import numpy as np
import pytest

from flowsim.algorithms.vegas import MAX_STRATA_PER_AXIS
from flowsim.algorithms.vegasplus import (
    MANY_DIMS,
    MAX_HCUBES,
    VegasPlus,
    choose_nstrat,
    events_per_hcube,
)
from flowsim.compat.vegas import vegas_nstrat

SIZES = [10 ** 5, 5 * 10 ** 5, 10 ** 6, 2 * 10 ** 6, 4 * 10 ** 6, 8 * 10 ** 6, 10 ** 7,
         2 * 10 ** 7, 5 * 10 ** 7, 10 ** 8, 2 * 10 ** 8, 10 ** 9]


def test_eight_dims_take_even_strata_within_vegas_budget_up_to_1e8():
    """8 dims: once ``vegas``'s budget of ``(1 - neval_frac) n / 2`` hypercubes (two
    events each from the evenly spread share) affords 4 strata per axis, the largest
    even ``s`` within it, never 5 or 7 (whose middle stratum straddles ``y = 1/2``)
    nor capped below 8^8; below, 16 events per hypercube (2 or 3 strata); fixed at
    the first iteration's size."""
    chosen = {n: int(choose_nstrat(8, n)[0]) for n in SIZES}
    assert chosen == {10 ** 5: 2, 5 * 10 ** 5: 3, 10 ** 6: 4, 2 * 10 ** 6: 4, 4 * 10 ** 6: 4,
                      8 * 10 ** 6: 4, 10 ** 7: 4, 2 * 10 ** 7: 6, 5 * 10 ** 7: 6,
                      10 ** 8: 6, 2 * 10 ** 8: 8, 10 ** 9: 8}
    for n, s in chosen.items():
        budget = 0.25 * n / 2
        assert s ** 8 <= budget < (s + 2) ** 8 or s ** 8 == MAX_HCUBES or s < 4
        assert np.prod(vegas_nstrat(8, n), dtype=np.float64) >= s ** 8
    sim = VegasPlus(lambda x: x[:, 0], 8)
    sim.prepare(10 ** 8)
    assert sim.n_hcubes == 6 ** 8 and sim.counts.sum() == 10 ** 8
    assert sim.counts.min() >= int(0.25 * 10 ** 8 / 6 ** 8)       # the evenly spread share
    sim.prepare(2 * 10 ** 8)
    assert sim.n_hcubes == 6 ** 8


@pytest.mark.parametrize("dim", range(1, 13))
def test_hypercubes_never_fall_as_events_grow(dim):
    """In every dimension the default hypercube count grows with ``n`` (never falls),
    keeps ``n_min >= 2`` events per hypercube, and from ``MANY_DIMS`` dimensions on
    is even from 4 strata per axis up."""
    counts = [np.prod(choose_nstrat(dim, n), dtype=np.float64) for n in SIZES]
    assert counts == sorted(counts)
    for n, h in zip(SIZES, counts):
        assert 2 * h <= n and h <= MAX_HCUBES
        s = choose_nstrat(dim, n)
        assert s.max() <= MAX_STRATA_PER_AXIS and np.all(s == s[0])
        if dim >= MANY_DIMS:
            assert s[0] % 2 == 0 or s[0] < 4
    assert events_per_hcube(dim) == max(4.0, 2 ** (dim / 2))


def test_below_many_dims_the_rule_is_unchanged():
    """Below ``MANY_DIMS`` dimensions ``max(4, 2 ** (dim / 2))`` events per hypercube
    and any parity (6 dims, 2*10^6 events: 7^6); so too in more dimensions below 4
    strata per axis."""
    assert choose_nstrat(6, 2_000_000).tolist() == [7] * 6
    assert choose_nstrat(4, 2_000_000).tolist() == [26] * 4
    assert events_per_hcube(6) == 8.0 and events_per_hcube(2) == 4.0
    assert choose_nstrat(8, 200_000).tolist() == [3] * 8
    # neval_frac = 0.9: vegas's 20 events per hypercube, more than 2^(8/2) = 16, so 16:
    # 62,500 hypercubes at 10^6 events, 3 per axis (2 if even: fewer than 4, so 3)
    assert choose_nstrat(8, 10 ** 6, neval_frac=0.9).tolist() == [3] * 8
    assert choose_nstrat(8, 10 ** 6, neval_frac=0.5).tolist() == [4] * 8


def test_first_hypercube_of_a_block_by_binary_search():
    """The hypercube of a block's first event, by a fixed number of bisection steps,
    is the count of hypercube ends at or below it (what the kernel counted before)."""
    from flowsim.algorithms.vegasplus import _ends_at_or_below
    from flowsim.core.lazy_tf import tf
    t = tf()
    rng = np.random.default_rng(0)
    for h in (1, 2, 3, 64, 1000, 4097):
        ends = np.cumsum(rng.integers(2, 6, h)).astype(np.int64)
        firsts = [0, 1, int(ends[0]), int(ends[-1]) - 1, int(ends[-1]), int(ends[-1]) + 9,
                  *rng.integers(0, ends[-1] + 3, 8).tolist()]
        got = [int(_ends_at_or_below(t.constant(ends), t.constant(f, t.int64), h))
               for f in firsts]
        assert got == [int(np.sum(ends <= f)) for f in firsts]
