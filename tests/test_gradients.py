"""Gradients of integrals with respect to the integrand's parameters
(flowsim.integrate(..., params=...), Result.gradient), checked by pulls against
analytic dI/dtheta, and the refusals of parameters that cannot be differentiated.

Pull test: over 100 fixed seeds the rms of (estimate - exact) / error must lie in
[0.8, 1.25] and |mean| < 0.35 (3.5 standard errors).  For honest errors the rms of
100 pulls has a standard deviation of 0.07, so a false failure has probability
< 0.5 % per check (and, seeds being fixed, the test is deterministic).
"""
import math

import numpy as np
import pytest

import flowsim
from flowsim.algorithms.registry import algorithm_class
from flowsim.core.flow import Flow
from flowsim.core.lazy_tf import tf
from flowsim.physics.integrands import Plan

SEEDS = range(100)


def expo(x, s):
    return tf().exp(-s * (x[:, 0] + x[:, 1]))


def expo_exact(s):
    g = (1 - math.exp(-s)) / s
    dg = (math.exp(-s) * (1 + s) - 1) / s ** 2
    return g * g, 2 * g * dg


def power(x, a):
    return tf().pow(x[:, 0], a) * x[:, 1]


def power_exact(a):
    return 1 / (2 * (a + 1)), -1 / (2 * (a + 1) ** 2)


W = 0.1


def peak(x, c):
    t = tf()
    r2 = t.square(x[:, 0] - c) + t.square(x[:, 1] - 0.5)
    return t.exp(-r2 / W ** 2) / (math.pi * W ** 2)


def peak_exact(c):
    e = math.erf(0.5 / W)
    along = (math.erf((1 - c) / W) + math.erf(c / W)) / 2
    d_along = (math.exp(-(c / W) ** 2) - math.exp(-((1 - c) / W) ** 2)) / (W * math.sqrt(math.pi))
    return along * e, d_along * e


CASES = {
    "expo/plain": (expo, "s", 0.7, expo_exact, "plain", 2000, 2, 0),
    "power/vegas": (power, "a", 0.5, power_exact, "vegas", 4000, 2, 2),
    "peak/vegasplus": (peak, "c", 0.35, peak_exact, "vegasplus", 8000, 2, 3),
}


def pulls(f, name, theta, exact, algorithm, n_events, n_iter, skip):
    """Value and gradient pulls over SEEDS, one compiled kernel for all seeds."""
    plan = Plan(f, algorithm, params={name: theta})
    sim = plan.simulation(algorithm_class(algorithm), 2, None, {})
    fresh = None
    value, grad = [], []
    want_v, want_g = exact(theta)
    for seed in SEEDS:
        if fresh is not None:
            sim.set_state(fresh)
        flow = Flow(sim, n_events, seed=seed, quiet=True)
        if skip:                  # adapt, then measure on the frozen map (pooled iterations)
            flow.run(skip)
            sim.freeze()
        res = plan.finish(flow.run(n_iter))
        if fresh is None and algorithm != "plain":
            # the state before any iteration is what the first run started from
            fresh = type(sim)(plan.integrand, 2).get_state()
        value.append((res.value - want_v) / res.error)
        g, e = res.gradient[name]
        grad.append((g - want_g) / e)
    return np.array(value), np.array(grad)


@pytest.mark.parametrize("case", CASES, ids=list(CASES))
def test_gradient_pulls(case):
    value, grad = pulls(*CASES[case])
    for p in (value, grad):
        rms = float(np.sqrt(np.mean(p ** 2)))
        assert 0.8 <= rms <= 1.25, (case, rms)
        assert abs(np.mean(p)) < 0.35, (case, np.mean(p))


def test_gradient_matches_the_integral_of_the_derivative_on_the_same_events():
    # d/ds exp(-s x) = -x exp(-s x): integrate it directly on the same random numbers
    res = flowsim.integrate(expo, 2, 5000, 2, seed=9, params={"s": 0.7})
    direct = flowsim.integrate(lambda x: -(x[:, 0] + x[:, 1]) * expo(x, 0.7), 2, 5000, 2,
                               seed=9)
    np.testing.assert_allclose(res.gradient["s"][0], direct.value, rtol=1e-12)
    np.testing.assert_allclose(res.gradient["s"][1], direct.error, rtol=1e-9)


def test_a_parameter_used_through_a_cast_is_refused():
    def stepwise(x, s):
        t = tf()
        return x[:, 0] * t.cast(t.cast(s * 10, t.int32), t.float64)
    with pytest.raises(ValueError, match=r"params\['s'\].*does not depend differentiably"):
        flowsim.integrate(stepwise, 1, 1000, 1, seed=1, params={"s": 0.3})


def test_a_parameter_that_is_not_a_number_is_refused():
    with pytest.raises(TypeError, match=r"params\['s'\] must be a real number"):
        flowsim.integrate(expo, 2, 1000, 1, seed=1, params={"s": "0.3"})


def test_params_with_a_numpy_integrand_is_refused():
    with pytest.raises(ValueError, match="params needs a TensorFlow integrand"):
        flowsim.integrate(lambda x, s: x[:, 0], 1, 1000, 1, numpy=True, params={"s": 1.0})


def test_likelihood_fit_example_recovers_its_parameters():
    """examples/likelihood_fit.py: 2,000 events; each fitted parameter within 3 of its
    errors of the generating value (false failure 0.3 % per parameter; fixed seed)."""
    import importlib.util
    import os
    path = os.path.join(os.path.dirname(__file__), "..", "examples", "likelihood_fit.py")
    spec = importlib.util.spec_from_file_location("likelihood_fit", path)
    example = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(example)
    params, errors, cov = example.fit(example.generate(2000, seed=3), n_events=50_000)
    assert np.all(np.abs(params - np.array(example.TRUE)) < 3 * errors), (params, errors)
    assert np.all(errors > 0) and np.all(errors < 0.2)


@pytest.mark.parametrize("with_grid", [False, True], ids=["plain", "frozen-vegas"])
def test_tf_integral_in_a_tf_function_matches_integrate_on_the_same_events(with_grid):
    """tf_integral draws the Flow's events (same seed, iteration 0, block size): its
    value, error and tape gradient equal integrate's (to rounding)."""
    t = tf()
    grid = None
    if with_grid:
        grid = flowsim.Vegas(lambda x: expo(x, 0.7), 2, stratify=False)
        Flow(grid, 10000, seed=1, quiet=True).run(3)
        grid.freeze()
    theta = t.Variable(0.7, dtype=t.float64)

    @t.function
    def run():
        with t.GradientTape() as tape:
            value, error = flowsim.tf_integral(expo, 2, 10000, params={"s": theta}, seed=3,
                                               block_size=4096, grid=grid)
        return value, error, tape.gradient(value, theta)

    value, error, grad = (a.numpy() for a in run())
    if with_grid:
        plan = Plan(expo, "vegas", params={"s": 0.7})
        sim = plan.simulation(flowsim.Vegas, 2, None, {"stratify": False})
        sim.set_edges(grid.edges)
        sim.freeze()
        res = plan.finish(Flow(sim, 10000, seed=3, quiet=True, block_size=4096).run(1))
    else:
        res = flowsim.integrate(expo, 2, 10000, 1, seed=3, params={"s": 0.7}, block_size=4096)
    np.testing.assert_allclose([value, error, grad], [res.value, res.error, res.gradient["s"][0]],
                               rtol=1e-12)


def test_tf_integral_gradient_reaches_variables_the_integrand_captures():
    t = tf()
    z = t.Variable(2.0, dtype=t.float64)
    with t.GradientTape() as tape:
        value, _ = flowsim.tf_integral(lambda x: z * t.reduce_sum(x, 1), 2, 20000, seed=1)
    np.testing.assert_allclose(tape.gradient(value, z).numpy(), value.numpy() / 2.0,
                               rtol=1e-12)


def test_freeze_after_is_adapt_then_freeze_in_one_call():
    got = flowsim.integrate(peak, 2, 8000, 4, seed=3, algorithm="vegasplus",
                            params={"c": 0.35}, freeze_after=2, quiet=True)
    plan = Plan(peak, "vegasplus", params={"c": 0.35})
    sim = plan.simulation(algorithm_class("vegasplus"), 2, None, {})
    flow = Flow(sim, 8000, seed=3, quiet=True)
    flow.run(2)
    sim.freeze()
    want = plan.finish(flow.run(2))
    assert (got.value, got.error) == (want.value, want.error)
    assert got.gradient["c"] == want.gradient["c"]
    assert len(got.iterations) == 4 and got.skip == 2


def expo_frozen(x):
    return expo(x, 0.7)


@pytest.mark.parametrize("stop", [1, 3], ids=["while-training", "after-freezing"])
def test_freeze_after_resumes_from_a_checkpoint_with_the_same_bits(tmp_path, stop):
    def run(n_iter, checkpoint=None):
        sim = algorithm_class("vegas")(expo_frozen, 2, freeze_after=2)
        flow = Flow(sim, 4000, seed=5, quiet=True)
        return flow.run(n_iter, checkpoint=checkpoint, skip=min(2, n_iter - 1))
    whole = run(4)
    path = tmp_path / "run.ckpt"
    run(stop, checkpoint=path)                  # the run stopped after `stop` iterations
    resumed = run(4, checkpoint=path)
    assert (resumed.value, resumed.error) == (whole.value, whole.error)
    assert resumed.iterations[-1]["state_id"] == resumed.iterations[2]["state_id"]


@pytest.mark.parametrize("kwargs, message", [
    ({"algorithm": "plain"}, r"freeze_after needs an adaptive algorithm .*algorithm='plain'"),
    ({"algorithm": "vegas", "freeze_after": 3}, r"freeze_after \(3\) must be smaller than "
                                                r"n_iter \(3\)"),
    ({"algorithm": "vegas", "freeze_after": 0}, r"freeze_after must be an int >= 1, got 0"),
])
def test_bad_freeze_after_is_refused(kwargs, message):
    kwargs = {"freeze_after": 1, **kwargs}
    with pytest.raises(ValueError, match=message):
        flowsim.integrate(expo_frozen, 2, 1000, 3, seed=1, **kwargs)
