"""Test integrands with exact integrals, and a pull check for error estimates.

Used by flowsim's own tests; algorithm and backend tests may import it.

``GENZ`` maps a family name to a :class:`Family`.  Each family has

* ``f(x)`` -- a TensorFlow integrand: ``x`` of shape ``[n, dim]`` (any float
  dtype, points of the unit cube) to ``[n]`` (or ``[n, k]`` when
  ``family.components == k``), in the dtype of ``x``.  The dimension is read
  from ``x.shape[1]`` when traced, so one ``f`` serves every dimension.
* ``exact(dim)`` -- the integral over the unit cube ``[0, 1]^dim`` (a float,
  or a ``[k]`` numpy array for vector families).

The coefficients are fixed functions of the dimension (Genz's test families
with moderate difficulty), so every run of a test sees the same integrals.
Instances are module-level objects: ``family.f`` pickles (MPI, Spark).

:func:`pulls` and :func:`check_pulls` test that reported errors are honest:
over independent seeds, ``(value - exact) / error`` should be close to N(0, 1).

:func:`check_executor` (:mod:`flowsim.testing.conformance`) checks that a
backend gives :class:`flowsim.Flow`'s bits on every conformance case;
:func:`cases_from` reads a workload's case module.

:func:`check_gpu_ready` (:mod:`flowsim.testing.gpu_ready`) lists the ops of a
workload's compiled kernels that have no GPU kernel in this TensorFlow build.

:func:`device_types` (:mod:`flowsim.testing.fleet`) counts logical CPUs as other
device types (their own rounding, delays), to test mixed fleets without GPUs.
"""
import cmath
import math

import numpy as np

from ..core.lazy_tf import tf


def _centres(dim):
    """Peak positions u_i in (0.2, 0.8), different in every dimension."""
    return 0.5 + 0.3 * np.sin(1.0 + 2.0 * np.arange(dim))


class Family:
    """One test family: ``f(x)`` (TF) and ``exact(dim)`` (float or ``[k]`` array).

    Parameters
    ----------
    name : str
        Key in :data:`GENZ`.
    components : int
        0 for a scalar integrand, k for one returning ``[n, k]``.
    """

    components = 0

    def __init__(self, name):
        self.name = name

    def f(self, x):
        raise NotImplementedError

    def exact(self, dim):
        raise NotImplementedError

    def __call__(self, x):
        return self.f(x)

    def __repr__(self):
        return f"GENZ[{self.name!r}]"


class Gaussian(Family):
    """``exp(-sum a^2 (x_i - u_i)^2)`` with ``a = 2.5``."""

    a = 2.5

    def f(self, x):
        t = tf()
        u = t.constant(_centres(x.shape[1]), x.dtype)
        return t.exp(-(self.a ** 2) * t.reduce_sum(t.square(x - u), axis=1))

    def exact(self, dim):
        a = self.a
        return float(np.prod([math.sqrt(math.pi) / (2 * a)
                              * (math.erf(a * (1 - u)) + math.erf(a * u)) for u in _centres(dim)]))


class ProductPeak(Family):
    """``prod 1 / (a^-2 + (x_i - u_i)^2)`` with ``a = 2``."""

    a = 2.0

    def f(self, x):
        t = tf()
        u = t.constant(_centres(x.shape[1]), x.dtype)
        return t.reduce_prod(1.0 / (self.a ** -2 + t.square(x - u)), axis=1)

    def exact(self, dim):
        a = self.a
        return float(np.prod([a * (math.atan(a * (1 - u)) + math.atan(a * u))
                              for u in _centres(dim)]))


class Oscillatory(Family):
    """``cos(2 pi w + sum a_i x_i)`` with ``w = 0.3`` and ``a_i = 4.5 / dim``."""

    w = 0.3
    h = 4.5

    def f(self, x):
        t = tf()
        dim = x.shape[1]
        return t.cos(2 * math.pi * self.w + t.reduce_sum(x, axis=1) * (self.h / dim))

    def exact(self, dim):
        a = self.h / dim
        z = cmath.exp(2j * math.pi * self.w) * ((cmath.exp(1j * a) - 1) / (1j * a)) ** dim
        return z.real


class Continuous(Family):
    """``exp(-sum a |x_i - u_i|)`` with ``a = 3`` (kink at the peak)."""

    a = 3.0

    def f(self, x):
        t = tf()
        u = t.constant(_centres(x.shape[1]), x.dtype)
        return t.exp(-self.a * t.reduce_sum(t.abs(x - u), axis=1))

    def exact(self, dim):
        a = self.a
        return float(np.prod([(2 - math.exp(-a * u) - math.exp(-a * (1 - u))) / a
                              for u in _centres(dim)]))


class Polynomial(Family):
    """``sum x_i^2 + prod (x_i + 1/2)``: integral ``dim / 3 + 1``."""

    def f(self, x):
        t = tf()
        return t.reduce_sum(t.square(x), axis=1) + t.reduce_prod(x + 0.5, axis=1)

    def exact(self, dim):
        return dim / 3 + 1.0


class Vector(Family):
    """``[n, 3]``: the Gaussian, polynomial and oscillatory families side by side."""

    components = 3

    def f(self, x):
        t = tf()
        return t.stack([GENZ["gaussian"].f(x), GENZ["polynomial"].f(x),
                        GENZ["oscillatory"].f(x)], axis=1)

    def exact(self, dim):
        return np.array([GENZ[n].exact(dim) for n in ("gaussian", "polynomial", "oscillatory")])


GENZ = {fam.name: fam for fam in (
    Gaussian("gaussian"), ProductPeak("product_peak"), Oscillatory("oscillatory"),
    Continuous("continuous"), Polynomial("polynomial"), Vector("vector"))}


def pulls(values, errors, exact):
    """``(values - exact) / errors`` as a float64 array (broadcasting)."""
    v = np.asarray(values, dtype=np.float64)
    e = np.asarray(errors, dtype=np.float64)
    return (v - np.asarray(exact, dtype=np.float64)) / e


def check_pulls(p, sigmas=4.0):
    """Assert that pulls ``p`` look like N(0, 1) samples; return ``(mean, std, n)``.

    The mean must lie within ``sigmas / sqrt(n)`` of 0 and the sample standard
    deviation within ``sigmas / sqrt(2 (n - 1))`` of 1 (their standard errors
    for normal samples), and no pull may exceed ``max(5, sigmas + 1.5)`` in size.
    With the default 4 a correct estimator fails about once in 10^4 runs; an
    error estimate off by 30% fails with 40 or more pulls.
    """
    p = np.asarray(p, dtype=np.float64).ravel()
    n = p.size
    if n < 10:
        raise ValueError(f"check_pulls needs at least 10 pulls, got {n}")
    if not np.all(np.isfinite(p)):
        raise AssertionError(f"non-finite pulls: {p[~np.isfinite(p)][:5]}")
    mean, std = float(p.mean()), float(p.std(ddof=1))
    tol_mean = sigmas / math.sqrt(n)
    tol_std = sigmas / math.sqrt(2 * (n - 1))
    worst = float(np.abs(p).max())
    msg = (f"pulls over {n} samples: mean {mean:+.3f} (allowed +/-{tol_mean:.3f}), "
           f"std {std:.3f} (allowed 1+/-{tol_std:.3f}), largest |pull| {worst:.2f}")
    assert abs(mean) < tol_mean, msg
    assert abs(std - 1) < tol_std, msg
    assert worst < max(5.0, sigmas + 1.5), msg
    return mean, std, n


#: Names of :mod:`flowsim.testing.conformance`, loaded on first use.
_CONFORMANCE = ("check_executor", "cases_from", "reference", "CASES")
#: Names of :mod:`flowsim.testing.gpu_ready`, loaded on first use.
_GPU_READY = ("check_gpu_ready", "GpuReadiness")
#: Names of :mod:`flowsim.testing.fleet`, loaded on first use.
_FLEET = ("device_types",)


def __getattr__(name):
    if name in _CONFORMANCE:
        from . import conformance
        return getattr(conformance, name)
    if name in _GPU_READY:
        from . import gpu_ready
        return getattr(gpu_ready, name)
    if name in _FLEET:
        from . import fleet
        return getattr(fleet, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
