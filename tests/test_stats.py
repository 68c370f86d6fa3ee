"""flowsim.core.stats: inverse-variance combination, chi^2/dof, the zero-error case."""
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from flowsim.core.result import Result
from flowsim.core.stats import combine, mean_and_error, weighted_average


def test_weighted_average_known_numbers():
    mean, err, chi2 = weighted_average([1.0, 3.0], [1.0, 1.0])
    assert mean == 2.0
    assert err == pytest.approx(1 / np.sqrt(2), rel=1e-15)
    assert chi2 == 2.0      # ((1-2)^2 + (3-2)^2) / (2-1)


def test_weighted_average_weights_by_inverse_variance():
    # errors 1 and 2 -> weights 1 and 1/4
    mean, err, chi2 = weighted_average([1.0, 6.0], [1.0, 2.0])
    assert mean == pytest.approx((1.0 + 6.0 / 4) / 1.25, rel=1e-15)
    assert err == pytest.approx(1 / np.sqrt(1.25), rel=1e-15)
    expected_chi2 = (1.0 - mean) ** 2 + (6.0 - mean) ** 2 / 4
    assert chi2 == pytest.approx(expected_chi2, rel=1e-14)


def test_weighted_average_is_elementwise_for_vectors():
    v = np.array([[1.0, 10.0], [3.0, 10.0], [2.0, 13.0]])
    e = np.array([[1.0, 1.0], [1.0, 1.0], [1.0, 3.0]])
    mean, err, chi2 = weighted_average(v, e)
    for j in range(2):
        m, s, c = weighted_average(v[:, j], e[:, j])
        assert mean[j] == m and err[j] == s and chi2[j] == c
    assert mean.shape == err.shape == chi2.shape == (2,)


def test_single_iteration_has_nan_chi2():
    mean, err, chi2 = weighted_average([[5.0]], [[0.5]])
    assert mean[0] == 5.0 and err[0] == 0.5
    assert np.isnan(chi2[0])


def test_zero_error_iterations_average_plainly_with_zero_error():
    # An exactly constant integrand: every iteration has error 0.
    mean, err, chi2 = weighted_average([2.0, 2.0, 2.0], [0.0, 0.0, 0.0])
    assert mean == 2.0 and err == 0.0 and np.isnan(chi2)
    # Mixed: the zero-error iterations win (infinite weight) and no warning.
    with np.errstate(all="raise"):
        mean, err, chi2 = weighted_average([[1.0, 4.0], [3.0, 5.0]], [[0.0, 1.0], [0.5, 1.0]])
    assert mean[0] == 1.0 and err[0] == 0.0 and np.isnan(chi2[0])
    assert mean[1] == 4.5 and err[1] == pytest.approx(1 / np.sqrt(2)) and chi2[1] == 0.5


def test_chi2_dof_is_near_one_for_honest_errors():
    rng = np.random.default_rng(3)
    errors = rng.uniform(0.5, 2.0, size=4000)
    values = 7.0 + errors * rng.standard_normal(4000)
    mean, err, chi2 = weighted_average(values, errors)
    assert abs(mean - 7.0) < 4 * err
    assert abs(chi2 - 1.0) < 4 * np.sqrt(2 / 3999)


def test_weighted_average_rejects_bad_shapes():
    with pytest.raises(ValueError,
                       match=r"share a shape \[n_iter, \.\.\.\], got \(2,\) and \(3,\)"):
        weighted_average([1.0, 2.0], [1.0, 1.0, 1.0])
    with pytest.raises(ValueError, match="share a shape"):
        weighted_average([], [])
    with pytest.raises(ValueError, match="share a shape"):
        weighted_average(1.0, 1.0)


def test_mean_and_error_matches_numpy():
    rng = np.random.default_rng(5)
    x = rng.exponential(size=1000)
    mean, err = mean_and_error(x.sum(), ((x - x.mean()) ** 2).sum(), x.size)
    assert mean == pytest.approx(x.mean(), rel=1e-13)
    assert err == pytest.approx(x.std(ddof=1) / np.sqrt(x.size), rel=1e-12)
    # Constant samples: error exactly 0.
    mean, err = mean_and_error(3.0 * 10, 0.0, 10)
    assert mean == 3.0 and err == 0.0
    # One sample: the spread is unknown, not 0.
    mean, err = mean_and_error(np.array([2.5]), np.array([0.0]), 1)
    assert mean[0] == 2.5 and err[0] == np.inf


@settings(max_examples=50, deadline=None)
@given(offset=st.sampled_from([0.0, 1.0, 1e4, 1e8, -1e12]),
       sizes=st.lists(st.integers(1, 40), min_size=1, max_size=8), seed=st.integers(0, 99))
def test_pooled_block_moments_are_exact_whatever_the_offset(offset, sizes, seed):
    """Blocks centred on their own mean, pooled (Chan): the variance of
    ``offset + x`` equals that of ``x`` even where sum2/n - mean^2 cancels."""
    from flowsim.algorithms.plain import pool_moments
    rng = np.random.default_rng(seed)
    blocks = [offset + rng.normal(size=(n, 2)) for n in sizes]
    sums = np.array([b.sum(axis=0) for b in blocks])
    m2s = np.array([((b - b.mean(axis=0)) ** 2).sum(axis=0) for b in blocks])
    counts = np.array([float(len(b)) for b in blocks])
    total, m2, n = pool_moments(sums, m2s, counts)
    x = np.concatenate(blocks)
    assert n == len(x)
    want = ((x - x.mean(axis=0)) ** 2).sum(axis=0)
    # samples near the offset carry its rounding (spacing(offset) each); the
    # sum2/n - mean^2 route loses spacing(offset**2) instead: 2.0 at 1e8
    atol = 100 * len(x) * max(np.spacing(abs(offset)), 1e-12)
    np.testing.assert_allclose(m2, want, rtol=1e-6, atol=atol)


def test_pooled_moments_where_sum2_cancels():
    """The case the pooling exists for: 1e8 + x, where sum2 - sum^2/n loses everything."""
    from flowsim.algorithms.plain import pool_moments
    x = 1e8 + np.random.default_rng(0).normal(size=(64, 1))
    blocks = [x[:32], x[32:]]
    total, m2, n = pool_moments(np.array([b.sum(axis=0) for b in blocks]),
                                np.array([((b - b.mean(axis=0)) ** 2).sum(axis=0)
                                          for b in blocks]), np.array([32.0, 32.0]))
    want = ((x - x.mean()) ** 2).sum()
    assert m2[0] == pytest.approx(want, rel=1e-6)
    naive = (x * x).sum() - x.sum() ** 2 / len(x)
    assert abs(naive - want) > 100 * abs(m2[0] - want) + 1.0


def shifted(x):
    return 1e8 + x[:, 0]


def test_plain_error_survives_a_large_offset():
    """f = 1e8 + x on [0, 1]: error sqrt(1/12)/sqrt(n), not 0 (sum2/n - mean^2 gave 0)."""
    import flowsim
    n = 20_000
    res = flowsim.Flow(flowsim.Plain(shifted, 1), n, seed=3, block_size=1024,
                       jit_compile=False, quiet=True).run(1)
    assert res.value == pytest.approx(1e8 + 0.5, abs=5 * np.sqrt(1 / 12 / n))
    assert res.error == pytest.approx(np.sqrt(1 / 12 / n), rel=0.03)


def test_result_combines_kept_iterations_only():
    recs = [{"iteration": i + 1, "value": v, "error": 1.0, "events": 10, "seconds": 0.1}
            for i, v in enumerate([100.0, 1.0, 3.0])]
    r = Result(recs, wall_time=1.0, skip=1)
    # no state ids: two stretches, each floored by the pair pooled (200 / 19 per event)
    assert r.value == 2.0 and r.chi2_dof == pytest.approx(2.0 / (200 / 19 / 10))
    assert [x["kept"] for x in r.iterations] == [False, True, True]
    assert r.n_events == 30 and r.events_per_second == 30.0
    assert "(warm-up)" in str(r)


# -- combining iterations (flowsim.core.stats.combine) ------------------------------------------


@settings(max_examples=40, deadline=None)
@given(sizes=st.lists(st.integers(2, 30), min_size=1, max_size=6), seed=st.integers(0, 99),
       offset=st.sampled_from([0.0, 3.0, -1e4]))
def test_pooling_equals_one_sample_of_all_events(sizes, seed, offset):
    """Iterations of one state pool into exactly the mean and standard error of
    the concatenated sample."""
    from flowsim.core.stats import pool
    rng = np.random.default_rng(seed)
    samples = [offset + rng.standard_t(3, size=n) for n in sizes]
    values = np.array([[x.mean()] for x in samples])
    errors = np.array([[x.std(ddof=1) / np.sqrt(x.size)] for x in samples])
    value, error = pool(values, errors, sizes)
    every = np.concatenate(samples)
    assert value[0] == pytest.approx(every.mean(), rel=1e-12, abs=1e-12)
    assert error[0] == pytest.approx(every.std(ddof=1) / np.sqrt(every.size), rel=1e-9)
    same, err2, _ = combine(values, errors, sizes, ["s"] * len(sizes))
    assert same[0] == value[0] and err2[0] == error[0]


def test_pooling_is_not_biased_towards_low_errors():
    """Plain MC iterations that missed a peak have a low value and a low error;
    pooling weighs them by events, inverse-variance weights favour them."""
    values, errors = np.array([[0.94], [0.82], [0.46]]), np.array([[0.35], [0.26], [0.11]])
    pooled, _, _ = combine(values, errors, [200_000] * 3, ["s"] * 3)
    weighted, _, _ = weighted_average(values, errors)
    assert pooled[0] == pytest.approx(values.mean(), rel=1e-12)
    assert weighted[0] < 0.6 < pooled[0]


def test_zero_error_iteration_does_not_take_over():
    """A sparse integrand: iterations without a hit give 0 +/- 0.  Pooled (one
    state) they count as the events they are; from adapting states they count
    as the least precise stretch, never with infinite weight."""
    values, errors = np.array([[0.0], [0.0], [2.0]]), np.array([[0.0], [0.0], [1.0]])
    pooled, perr, chi2 = combine(values, errors, [100] * 3, ["s"] * 3)
    assert pooled[0] == pytest.approx(2.0 / 3) and 0 < perr[0] < 1
    assert np.isfinite(chi2[0])
    adaptive, aerr, chi2 = combine(values, errors, [100] * 3)
    assert adaptive[0] == pytest.approx(2.0 / 3) and aerr[0] > 0.3 and np.isfinite(chi2[0])


def test_underestimated_error_gets_no_overwhelming_weight():
    """An adapting run: one iteration claims 50x less variance than the others
    (it missed a peak: low value).  Its weight is capped by the floor, and the
    scatter raises the error."""
    values = np.array([[1.0], [1.02], [0.2], [0.98], [1.01]])
    errors = np.array([[0.1], [0.1], [0.002], [0.1], [0.1]])
    naive, nerr, _ = weighted_average(values, errors)
    value, error, chi2 = combine(values, errors, [1000] * 5)
    assert naive[0] < 0.21                       # the naive average is that iteration
    assert 0.5 < value[0] < 1.0 and abs(value[0] - 1.0) < 3 * error[0]
    assert chi2[0] > 2


def test_improving_map_keeps_its_precision():
    """Errors falling steadily (a converging VEGAS map) are weighted as they say:
    the floor does not bind when each iteration is consistent with its successors."""
    errors = np.array([[0.0138], [0.0026], [0.00156], [0.0011], [0.00085]])
    values = 1.0 + errors * np.array([[1.0], [-0.5], [0.7], [-0.3], [0.2]])
    naive, nerr, _ = weighted_average(values, errors)
    value, error, _ = combine(values, errors, [2_000_000] * 5)
    assert error[0] < 1.2 * nerr[0]
    assert value[0] == pytest.approx(naive[0], abs=nerr[0])


def test_chi2_dof_is_none_for_one_iteration():
    value, error, chi2 = combine([[1.0]], [[0.1]], [10])
    assert chi2 is None and value[0] == 1.0 and error[0] == 0.1


def test_single_events_pool_into_a_finite_error():
    """n_events=1: each iteration's error is unknown (inf); five of them pooled
    are a sample of five."""
    x = np.array([1.0, 2.0, 4.0, 0.5, 3.0])
    value, error, _ = combine(x[:, None], np.full((5, 1), np.inf), [1] * 5, ["s"] * 5)
    assert value[0] == pytest.approx(x.mean())
    assert error[0] == pytest.approx(x.std(ddof=1) / np.sqrt(5))


def test_combine_refuses_mismatched_inputs():
    with pytest.raises(ValueError, match="events must have one count per iteration"):
        combine([[1.0], [2.0]], [[1.0], [1.0]], [10])
    with pytest.raises(ValueError, match="states must have one key per iteration"):
        combine([[1.0], [2.0]], [[1.0], [1.0]], [10, 10], ["a"])
