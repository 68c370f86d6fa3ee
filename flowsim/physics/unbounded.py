"""Infinite and semi-infinite limits by a change of variables.

Usage::

    import numpy as np
    import flowsim

    def gauss(x):                                     # exp(-|x|^2) in 2 dimensions
        return tf.exp(-tf.reduce_sum(x * x, axis=1))

    r = flowsim.integrate(gauss, 2, 100_000, 5, seed=1,
                          limits=[(-np.inf, np.inf), (0, np.inf)])   # pi / 2

    integrand, limits = flowsim.unbounded(gauss, [(-np.inf, np.inf), (0, np.inf)])
    sim = flowsim.VegasPlus(integrand, 2, limits=limits)              # any Simulation

:func:`flowsim.integrate` and :class:`flowsim.compat.vegas.Integrator` apply it
themselves; a Simulation built directly takes finite limits only, so wrap the integrand
with :func:`unbounded` first.  Each infinite axis is sampled in a variable ``t`` of a
finite range and the integrand is multiplied by ``dx/dt``:

=================  ===================  ================  ==========================
limits             ``x(t)``             ``t`` in          ``dx/dt``
=================  ===================  ================  ==========================
``(a, inf)``       ``a + t / (1 - t)``  ``[0, 1)``        ``1 / (1 - t)^2``
``(-inf, b)``      ``b - t / (1 - t)``  ``[0, 1)``        ``1 / (1 - t)^2``
``(-inf, inf)``    ``t / (1 - t^2)``    ``(-1, 1)``       ``(1 + t^2) / (1 - t^2)^2``
=================  ===================  ================  ==========================

Finite axes are left as they are.  The maps put half of the events at ``|x - a| < 1``
(``|x| < 0.62`` for a doubly infinite axis): an integrand whose mass lies at a scale far
from 1, or far from 0, is best shifted and scaled into ``x`` first (the integral of
``f(c + s y)`` is ``|s|^-dim`` times that of ``f``).  A point where ``x(t)`` or the
product of the ``dx/dt`` is not finite (``t`` at the open end of its range, or a
rounding there) contributes zero: the integrand must vanish at infinity, faster than
``1 / |x|`` for the integral to exist.  VEGAS adapts its map in ``t``, so it also
learns where in ``x`` the integrand lives.
"""
import numpy as np

from ..core.fastmath import is_finite
from ..core.integrand import limits_array
from ..core.lazy_tf import tf

__all__ = ["Unbounded", "is_unbounded", "unbounded"]

#: Axis kinds: finite, ``(a, inf)``, ``(-inf, b)``, ``(-inf, inf)``.
FINITE, ABOVE, BELOW, BOTH = 0, 1, 2, 3
#: The range of ``t`` of each kind but FINITE.
T_RANGE = {ABOVE: (0.0, 1.0), BELOW: (0.0, 1.0), BOTH: (-1.0, 1.0)}


def is_unbounded(limits):
    """Whether ``limits`` (None or ``[dim, 2]``-like) has an infinite entry."""
    if limits is None:
        return False
    try:
        return bool(np.isinf(np.asarray(limits, dtype=np.float64)).any())
    except (TypeError, ValueError):
        return False


def _kinds(lim):
    """The kind of each axis; refuses NaN, ``(inf, ...)`` and ``(..., -inf)``."""
    low, high = lim[:, 0], lim[:, 1]
    bad = np.flatnonzero(np.isnan(lim).any(axis=1) | (low == np.inf) | (high == -np.inf))
    if bad.size:
        d = int(bad[0])
        raise ValueError(f"limits: dimension {d} is {lim[d].tolist()}; an infinite limit "
                         f"must be -inf below or +inf above")
    return np.where(np.isinf(low), np.where(np.isinf(high), BOTH, BELOW),
                    np.where(np.isinf(high), ABOVE, FINITE))


class Unbounded:
    """``f`` over limits with infinite entries as an integrand over finite ones (the
    module's change of variables); ``limits`` the finite box to integrate it over.

    Picklable when ``f`` is; its output (``[n]`` or ``[n, k]``, real or complex) is
    ``f``'s times the Jacobian."""

    def __init__(self, f, limits, dim=None):
        if dim is None and np.ndim(limits) != 2:
            raise ValueError(f"limits must have shape [dim, 2] (or pass dim= with one "
                             f"(low, high) pair), got {limits!r}")
        lim = limits_array(len(limits) if dim is None else dim, limits)
        self.f = f
        self.kinds = _kinds(lim)
        self.anchor = np.where(self.kinds == ABOVE, lim[:, 0],
                               np.where(self.kinds == BELOW, lim[:, 1], 0.0))
        self.limits = np.array([T_RANGE.get(int(k), tuple(row))
                                for k, row in zip(self.kinds, lim)], dtype=np.float64)

    def x_and_jacobian(self, t_points):
        """``(x [n, dim], dx/dt [n])`` of points ``t`` ``[n, dim]``."""
        t = tf()
        kinds = t.constant(self.kinds[None, :], t.int32)
        anchor = t.constant(self.anchor[None, :], t_points.dtype)
        one = t.ones_like(t_points)
        half_line = t_points / (one - t_points)
        line = t_points / (one - t_points * t_points)
        x = t.where(kinds == ABOVE, anchor + half_line,
                    t.where(kinds == BELOW, anchor - half_line,
                            t.where(kinds == BOTH, line, t_points)))
        d_half = one / ((one - t_points) * (one - t_points))
        d_line = (one + t_points * t_points) / ((one - t_points * t_points) ** 2)
        dx = t.where(kinds == BOTH, d_line, t.where(kinds == FINITE, one, d_half))
        return x, t.reduce_prod(dx, axis=1)

    def __call__(self, t_points, *args, **kwargs):
        t = tf()
        x, jacobian = self.x_and_jacobian(t_points)
        ok = is_finite(jacobian) & t.reduce_all(is_finite(x), axis=1)
        safe_x = t.where(ok[:, None], x, t.zeros_like(x))
        out = t.convert_to_tensor(self.f(safe_x, *args, **kwargs))
        weight = t.where(ok, jacobian, t.zeros_like(jacobian))
        weight = t.cast(weight, out.dtype)
        if out.shape.rank == 2:
            weight = weight[:, None]
        return t.where(t.reshape(ok, [-1] + [1] * (out.shape.rank - 1)), out * weight,
                       t.zeros_like(out))


def unbounded(f, limits, dim=None):
    """``(integrand, finite_limits)``: ``f`` over ``limits`` (``[dim, 2]``, entries may
    be ``-inf`` / ``inf``) as an integrand over a finite box, by the module's change of
    variables.  ``dim`` (default: ``len(limits)``) lets one ``(low, high)`` pair apply to
    every axis."""
    wrapped = Unbounded(f, limits, dim)
    return wrapped, wrapped.limits
