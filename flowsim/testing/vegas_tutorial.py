"""vegas's tutorial integrands, shared by the scripts that run Lepage's vegas on them
(``benchmarks/make_vegas_reference.py``, ``benchmarks/make_vegas_api_reference.py``)
and ``tests/test_compat_vegas.py`` (which runs :mod:`flowsim.compat.vegas`): the
integrand with three outputs ("Multiple Integrands Simultaneously")::

    r = integ(vegas.lbatchintegrand(moments), nitn=10, neval=10000)
    derived(r)["<x>"]                   # I_x / I_1, with its correlated error
"""
import math

import numpy as np

#: The outputs, in order.
KEYS = ("1", "x", "x**2")


def moments(x):
    """``f = exp(-200 |x - 1/2|^2)`` times ``1``, ``x_0`` and ``x_0^2`` on a batch
    ``x [n, 4]`` of the unit 4-cube (``<x> = 1/2``, ``sigma_x^2 = 1/400``)."""
    f = np.exp(-200.0 * np.sum((x - 0.5) ** 2, axis=1))
    return {"1": f, "x": f * x[:, 0], "x**2": f * x[:, 0] ** 2}


moments.fcntype = "lbatch"


def derived(result):
    """``<x> = I_x / I_1`` and ``sigma_x^2 = I_x2 / I_1 - <x>^2`` of a dict of
    three (correlated) numbers."""
    mean_x = result["x"] / result["1"]
    return {"<x>": mean_x, "sigma_x^2": result["x**2"] / result["1"] - mean_x ** 2}


def tutorial(x):
    """vegas's tutorial integrand, one point at a time (integral 1 over the box)."""
    dx2 = sum((xd - 0.5) ** 2 for xd in x)
    return math.exp(-100.0 * dx2) * 1013.2118364296088


def batch_dict(x):
    """A batch integrand returning a dict: a scalar and a 2-vector per point."""
    return {"a": x[:, 0] * x[:, 1], "b": np.stack([x[:, 0] ** 2, np.cos(x[:, 1])], axis=1)}


def right_array(x):
    """A point integrand returning a 2-array."""
    return np.array([np.exp(-x[0] - x[1]), x[0] ** 3])
