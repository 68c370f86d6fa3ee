"""Peaked integrands of the precision table (``benchmarks/vegas.py --precision-only``).

Each is written twice, in TensorFlow for flowsim and in numpy for Lepage's
``vegas``, with the exact integral over the unit cube:

* ``dgauss4``, ``dgauss8``: two Gaussian peaks (width 0.1) on the diagonal at
  1/4 and 3/4 (VegasFlow's and vegas's benchmark): a separable map cannot tell
  the peaks apart, so it wastes events on two phantom peaks per pair of axes;
* ``corner4``: one Gaussian peak (width 0.1) at the corner x = 0, cut in half
  on every axis by the box;
* ``genz6``: Genz's product peak ``prod 1 / (c^-2 + (x - w)^2)`` with c = 25,
  w = 0.3 (separable, with Cauchy tails: a map that fits the core alone
  under-samples them).
"""
import math

import numpy as np
from _common import A
from _common import numpy_double_gaussian as double_gaussian_np

GENZ_C, GENZ_W = 25.0, 0.3
#: Genz factor normalisation: each factor integrates to 1 over [0, 1].
_GENZ_NORM = GENZ_C / (math.atan(GENZ_C * (1 - GENZ_W)) + math.atan(GENZ_C * GENZ_W))


def _tf():
    from flowsim.core.lazy_tf import tf
    return tf()


def double_gaussian_tf(x):
    from flowsim.targets import double_gaussian
    return double_gaussian(x)


def _double_gaussian_exact(dim):
    from flowsim.targets import double_gaussian_exact
    return double_gaussian_exact(dim)


def corner_tf(x):
    t = _tf()
    norm = t.constant((A * math.sqrt(math.pi) / 2) ** -x.shape[1], x.dtype)
    return norm * t.exp(-t.reduce_sum(t.square(x), axis=1) / (A * A))


def corner_np(x):
    return (A * math.sqrt(math.pi) / 2) ** -x.shape[1] * np.exp(-np.square(x).sum(axis=1) / (A * A))


def genz_tf(x):
    t = _tf()
    norm = t.constant(_GENZ_NORM ** x.shape[1], x.dtype)
    return norm / t.reduce_prod(1.0 + GENZ_C * GENZ_C * t.square(x - GENZ_W), axis=1)


def genz_np(x):
    return _GENZ_NORM ** x.shape[1] / np.prod(1.0 + GENZ_C * GENZ_C * np.square(x - GENZ_W), axis=1)


#: name -> (TensorFlow integrand, numpy integrand, dim, exact integral)
PEAKED = {
    "dgauss4": (double_gaussian_tf, double_gaussian_np, 4, _double_gaussian_exact(4)),
    "dgauss8": (double_gaussian_tf, double_gaussian_np, 8, _double_gaussian_exact(8)),
    "corner4": (corner_tf, corner_np, 4, math.erf(1 / A) ** 4),
    "genz6": (genz_tf, genz_np, 6, 1.0),
}
