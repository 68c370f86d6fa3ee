"""numpy integrands: flowsim.integrate(g, ..., numpy=True) and @flowsim.numpy_integrand."""
import pickle

import numpy as np
import pytest

import flowsim
from flowsim.core.lazy_tf import tf
from flowsim.physics.numpy_integrands import NumpyIntegrand


def g_np(x):
    return np.exp(-np.sum(x ** 2, axis=1))


def g_tf(x):
    return tf().exp(-tf().reduce_sum(x ** 2, axis=1))


def test_numpy_integrand_gives_the_tf_integrands_value_on_the_same_numbers():
    a = flowsim.integrate(g_np, 3, 5000, 2, seed=4, numpy=True)
    b = flowsim.integrate(g_tf, 3, 5000, 2, seed=4, jit_compile=False)
    np.testing.assert_allclose(a.value, b.value, rtol=1e-12)
    np.testing.assert_allclose(a.error, b.error, rtol=1e-9)


def test_decorator_and_vector_output():
    @flowsim.numpy_integrand
    def two(x):
        return np.stack([x[:, 0], x[:, 0] ** 2], axis=1)
    res = flowsim.integrate(two, 1, 20000, 1, seed=1)
    assert res.value.shape == (2,)
    assert np.all(np.abs(res.value - [0.5, 1 / 3]) < 5 * res.error)


def test_numpy_integrand_pickles_with_its_simulation():
    sim = flowsim.Plain(NumpyIntegrand(g_np), 3)
    copy = pickle.loads(pickle.dumps(sim))
    assert copy.integrand.function is g_np


def test_wrong_shape_is_refused_with_the_shape():
    with pytest.raises(ValueError, match=r"must return shape \[n\] or \[n, k\].*one value"):
        flowsim.integrate(lambda x: np.sum(x), 2, 1000, 1, seed=1, numpy=True)
