"""flowsim.unweighted: the same events on every backend, distributed as the integrand
(a chi2 test of their histogram against the integrand's normalised shape), what the
maximum weight and its overflow mean, the files written, and the inputs refused.
(Every backend's candidates, bit for bit: the ``physics_unweighted`` conformance case.)"""
import logging
import math

import numpy as np
import pytest
from scipy import stats as scipy_stats

import flowsim
from flowsim.core.lazy_tf import tf
from flowsim.physics.unweighted import UnweightedEvents, unweighted

CENTRE, WIDTH = 0.35, 0.08


def bump(x):
    """A Gaussian bump on [0, 1]^dim, centre 0.35, sigma 0.08 (every axis)."""
    t = tf()
    return t.exp(-0.5 * t.reduce_sum(t.square((x - CENTRE) / WIDTH), axis=1))


def signed(x):
    return tf().reduce_sum(x, axis=1) - 0.5


def pair(x):
    t = tf()
    return t.stack([bump(x), t.ones_like(x[:, 0])], axis=1)


@pytest.fixture(scope="module")
def trained():
    """A VEGAS map adapted to the bump (2-d), and its events on Flow."""
    sim = flowsim.Vegas(bump, 2)
    flowsim.Flow(sim, 40_000, seed=1, quiet=True).run(4)
    return sim, unweighted(sim, 30_000, seed=5)


def bin_probabilities(edges):
    """The normalised bump's probability of each bin of one axis (truncated to [0, 1])."""
    cdf = scipy_stats.norm(CENTRE, WIDTH).cdf
    return np.diff(cdf(edges)) / (cdf(1.0) - cdf(0.0))


def chi2_p(sample, edges):
    counts, _ = np.histogram(sample, edges)
    expected = bin_probabilities(edges) * len(sample)
    chi2 = float(((counts - expected) ** 2 / expected).sum())
    return scipy_stats.chi2.sf(chi2, len(counts) - 1)


def test_events_follow_the_integrand(trained):
    """Each axis's histogram against the bump's (25 bins over the central 0.05..0.65,
    where every bin expects >= 100 events).  The test fails for a correct sampler with
    probability 0.1 % per axis (p < 0.001; one seed)."""
    sim, events = trained
    assert isinstance(events, UnweightedEvents) and events.shape == (30_000, 2)
    edges = np.linspace(0.05, 0.65, 26)
    for axis in range(2):
        inside = events[(events[:, axis] >= 0.05) & (events[:, axis] < 0.65), axis]
        probs = bin_probabilities(edges)
        counts, _ = np.histogram(inside, edges)
        expected = probs / probs.sum() * len(inside)
        chi2 = float(((counts - expected) ** 2 / expected).sum())
        assert scipy_stats.chi2.sf(chi2, 24) > 1e-3, (axis, chi2)
    assert np.corrcoef(events.T)[0, 1] == pytest.approx(0.0, abs=4 / math.sqrt(30_000))
    info = events.info
    assert info["overflow_fraction"] < 1e-3
    assert 0.05 < info["efficiency"] <= 1.0
    exact = 2 * math.pi * WIDTH ** 2 * (scipy_stats.norm(CENTRE, WIDTH).cdf(1)
                                        - scipy_stats.norm(CENTRE, WIDTH).cdf(0)) ** 2
    assert abs(info["integral"] - exact) < 4 * info["integral_error"]


def test_uniform_map_gives_the_same_distribution():
    """Plain's map (uniform in the box) and other limits: 1-d, 20 bins over the box."""
    sim = flowsim.Plain(bump, 1, limits=[(0.0, 1.0)])
    events = unweighted(sim, 8_000, seed=3)
    assert events.shape == (8_000, 1)
    assert chi2_p(events[:, 0], np.linspace(0.0, 1.0, 21)) > 1e-3
    assert events.info["efficiency"] == pytest.approx(WIDTH * math.sqrt(2 * math.pi), rel=0.1)


def test_same_events_from_the_same_seed_on_threads(trained):
    sim, events = trained
    again = unweighted(sim, 30_000, seed=5, backend="threads")
    np.testing.assert_array_equal(again, events)
    assert again.info == events.info
    other = unweighted(sim, 30_000, seed=6)
    assert not np.array_equal(other, events)


@pytest.mark.costly
@pytest.mark.timeout(600)
def test_same_events_on_joblib(trained):
    sim, events = trained
    np.testing.assert_array_equal(unweighted(sim, 30_000, seed=5, backend="joblib",
                                             n_jobs=2), events)


def test_max_weight_below_the_largest_weight_reports_its_overflow(trained, caplog):
    sim, events = trained
    half = events.info["max_weight"] / 2
    with caplog.at_level(logging.WARNING, logger="flowsim"):
        low = unweighted(sim, 2_000, seed=5, max_weight=half)
    assert low.info["max_weight"] == half
    assert 0 < low.info["overflow_fraction"] < 1
    assert any("weigh more than max_weight" in r.getMessage() for r in caplog.records)
    safe = unweighted(sim, 2_000, seed=5, max_weight_factor=2.0)
    assert safe.info["max_weight"] == 2 * safe.info["presample_max"]
    assert safe.info["efficiency"] == pytest.approx(events.info["efficiency"] / 2, rel=0.1)


def test_events_written_in_chunks(trained, tmp_path):
    sim, events = trained
    small = unweighted(sim, 5_000, seed=5, pass_events=4096)
    assert len(small.info["files"]) == 0
    out = unweighted(sim, 5_000, seed=5, pass_events=4096, path=tmp_path / "npy")
    assert out.shape == (0, 2) and len(out.info["files"]) > 1
    np.testing.assert_array_equal(np.concatenate([np.load(f) for f in out.info["files"]]), small)
    import pyarrow.parquet as pq
    par = unweighted(sim, 5_000, seed=5, pass_events=4096, path=tmp_path / "pq",
                     format="parquet")
    tables = [pq.read_table(f) for f in par.info["files"]]
    assert tables[0].column_names == ["x0", "x1"]
    back = np.concatenate([np.stack([t["x0"].to_numpy(), t["x1"].to_numpy()], axis=1)
                           for t in tables])
    np.testing.assert_array_equal(back, small)


def test_vector_integrand_weights_by_the_component_asked():
    sim = flowsim.Plain(pair, 1)
    flat = unweighted(sim, 3_000, seed=2, component=1)
    assert flat.info["efficiency"] == 1.0           # a constant: every candidate kept
    assert chi2_p(unweighted(sim, 3_000, seed=2)[:, 0], np.linspace(0, 1, 11)) > 1e-3
    with pytest.raises(ValueError, match=r"component must be an int in \[0, 2\)"):
        unweighted(sim, 10, seed=1, component=2)


@pytest.mark.parametrize("call, error, message", [
    (lambda: unweighted(flowsim.Plain(signed, 2), 100, seed=1), ValueError,
     r"need a non-negative integrand: \d+ of 100000 weights of the pre-sample are negative"),
    (lambda: unweighted(object(), 100, seed=1), TypeError,
     "sim must be a flowsim.Plain, Vegas or VegasPlus"),
    (lambda: unweighted(flowsim.Plain(bump, 1), 0, seed=1), ValueError, "n_events"),
    (lambda: unweighted(flowsim.Plain(bump, 1), 10, seed=1, format="csv"), ValueError,
     r"format must be one of \('npy', 'parquet'\), got 'csv'"),
    (lambda: unweighted(flowsim.Plain(bump, 1), 10, seed=1, max_weight=0.0), ValueError,
     "max_weight must be > 0"),
])
def test_bad_inputs_are_refused_naming_them(call, error, message):
    with pytest.raises(error, match=message):
        call()
