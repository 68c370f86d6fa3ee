"""Infinite and semi-infinite limits (flowsim.physics.unbounded): known integrals over
every kind of axis, by every algorithm, with honest errors.

Pulls: each case is integrated with 12 seeds; a pull beyond 4 (probability 6e-5 per
pull for a normal pull, 3e-3 for the 48 pulls of the test) fails, and so does a mean
pull beyond 4 / sqrt(12) or an rms pull above 1.6 (for 12 normal pulls, a chi2 with 12
degrees of freedom above 30.7: probability 2e-3 per case).
"""
import math
import pickle

import numpy as np
import pytest
from scipy.special import erfc

import flowsim
from flowsim.core.lazy_tf import tf
from flowsim.physics.unbounded import Unbounded, unbounded

SEEDS = range(12)


def gauss(x):
    t = tf()
    return t.exp(-t.reduce_sum(x * x, axis=1))


def laplace_gauss(x):
    t = tf()
    return t.exp(-t.abs(x[:, 0] - 1.0)) * t.exp(-x[:, 1] ** 2) * x[:, 2]


CASES = {
    # name: (integrand, dim, limits, exact, algorithm)
    "line_half_line": (gauss, 2, [(-np.inf, np.inf), (0, np.inf)], math.pi / 2, "vegasplus"),
    "below_above_box": (laplace_gauss, 3, [(-np.inf, 1), (0.5, np.inf), (0, 2)],
                        1.0 * math.sqrt(math.pi) / 2 * erfc(0.5) * 2.0, "vegas"),
    "line_plain": (gauss, 1, [(-np.inf, np.inf)], math.sqrt(math.pi), "plain"),
    "shifted_above": (gauss, 2, [(1, np.inf), (-np.inf, np.inf)],
                      math.sqrt(math.pi) / 2 * erfc(1) * math.sqrt(math.pi), "vegasplus"),
}


@pytest.mark.parametrize("name", CASES)
def test_known_integrals_have_honest_pulls(name):
    f, dim, limits, exact, algorithm = CASES[name]
    pulls = []
    for seed in SEEDS:
        r = flowsim.integrate(f, dim, 20_000, 4, seed=seed, algorithm=algorithm,
                              limits=limits, skip=1)
        pulls.append((r.value - exact) / r.error)
    pulls = np.array(pulls)
    assert np.all(np.abs(pulls) < 4), pulls
    assert abs(pulls.mean()) < 4 / math.sqrt(len(pulls)), pulls
    assert np.sqrt(np.mean(pulls ** 2)) < 1.6, pulls


def test_the_change_of_variables_and_its_jacobian():
    wrapped, limits = unbounded(gauss, [(2, np.inf), (-np.inf, -1), (-np.inf, np.inf), (0, 3)])
    assert limits.tolist() == [[0, 1], [0, 1], [-1, 1], [0, 3]]
    t = np.array([[0.0, 0.0, 0.0, 1.5], [0.5, 0.5, 0.5, 2.0], [0.75, 0.9, -0.5, 0.0]])
    x, jac = (a.numpy() for a in wrapped.x_and_jacobian(tf().constant(t)))
    np.testing.assert_allclose(x, [[2, -1, 0, 1.5], [3, -2, 0.5 / 0.75, 2.0],
                                   [5, -10, -0.5 / 0.75, 0.0]])
    expected = [1.0, 4 * 4 * (1.25 / 0.75 ** 2), 16 * 100 * (1.25 / 0.75 ** 2)]
    np.testing.assert_allclose(jac, expected)


def test_open_ends_contribute_zero_and_vector_outputs_scale():
    def pair(x):
        t = tf()
        v = t.exp(-x[:, 0] ** 2)
        return t.stack([v, 2 * v], axis=1)
    wrapped = Unbounded(pair, [(-np.inf, np.inf)])
    out = wrapped(tf().constant([[-1.0], [0.0], [0.5]])).numpy()
    assert out[0].tolist() == [0.0, 0.0]              # x = -inf: no NaN
    np.testing.assert_allclose(out[1], [1.0, 2.0])
    np.testing.assert_allclose(out[2, 1], 2 * out[2, 0])
    assert pickle.loads(pickle.dumps(Unbounded(gauss, [(0, np.inf)]))).kinds.tolist() == [1]


def test_parameters_and_their_gradients_over_an_infinite_line():
    def width(x, s):
        return tf().exp(-(x[:, 0] / s) ** 2)
    r = flowsim.integrate(width, 1, 50_000, 4, seed=3, algorithm="vegas", skip=1,
                          params={"s": 1.5}, limits=[(-np.inf, np.inf)])
    value, (grad, grad_error) = r.value, r.gradient["s"]
    assert abs(value - 1.5 * math.sqrt(math.pi)) < 4 * r.error
    assert abs(grad - math.sqrt(math.pi)) < 4 * grad_error
