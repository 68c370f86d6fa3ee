"""Plain Monte Carlo: uniform points in the box, mean of the integrand times volume."""

import numpy as np

from ..core.blocks import reduce_rows
from ..core.fastmath import is_finite
from ..core.integrand import Domain, evaluate, probe_components
from ..core.kernel import columns
from ..core.lazy_tf import tf
from ..core.simulation import Simulation
from ..core.stats import mean_and_error
from ..core.sums import block_sum, count_true
from .histogram import Histogram, estimate_record


def moments(values, valid):
    """Accumulators of samples ``values [n, k]`` (rows outside ``valid`` are 0).

    ``sum``, ``count`` and ``m2``: the sum of squared deviations from the
    *block's own* mean.  Centring in the block keeps the variance exact when
    the mean dwarfs the spread (``sum2/n - mean²`` cancels to 0 for
    ``f = 1e8 + x``); :meth:`Plain.combine` pools the blocks.
    """
    # (no ``if`` statement: AutoGraph converts this in users' subclasses)
    return (moments_of_values(values[:, 0], valid) if values.shape[1] == 1
            else _moments_of_columns(values, valid))


def _moments_of_columns(values, valid):
    t = tf()
    count = count_true(valid)
    w = t.cast(valid, t.float64)[:, None]
    total = block_sum(values * w)
    dev = (values - total / t.maximum(count, 1.0)) * w
    return {"sum": total, "m2": block_sum(dev * dev), "count": count}


def moments_of_values(f, valid):
    """:func:`moments` of one value per event, ``f`` of shape ``[n]``: the same
    operations on ``[n]``, which XLA's CPU backend compiles to much cheaper loops
    than ``[n, 1]`` times an ``[n, 1]`` mask (the same bits)."""
    t = tf()
    count = count_true(valid)
    w = t.cast(valid, t.float64)
    total = block_sum(f * w)
    dev = (f - total / t.maximum(count, 1.0)) * w
    return {"sum": total[None], "m2": block_sum(dev * dev)[None], "count": count}


def _finite_values(f, valid):
    """``f [n, 1]`` with non-finite and invalid events 0, the finite mask, the moments."""
    t = tf()
    finite = is_finite(f[:, 0])
    flat = t.where(finite & valid, f[:, 0], t.zeros_like(f[:, 0]))
    return flat[:, None], finite, moments_of_values(flat, valid)


def _finite_columns(f, valid):
    t = tf()
    finite = t.reduce_all(is_finite(f), axis=1)
    f = t.where((finite & valid)[:, None], f, t.zeros_like(f))
    return f, finite, moments(f, valid)


def pool_moments(sums, m2s, counts):
    """Sum, pooled ``m2`` and count of blocks given per block (Chan et al.).

    ``m2 = sum_b m2_b + n_b (mean_b - mean)²``, added in block order (the same
    bits from the same rows on every backend).
    """
    n = reduce_rows(counts[:, None])[0]
    total = reduce_rows(sums)
    mean = total / max(n, 1.0)
    spread = (sums / np.maximum(counts, 1.0)[:, None] - mean) ** 2 * counts[:, None]
    return total, reduce_rows(m2s) + reduce_rows(spread), n


class Plain(Simulation):
    """Plain (crude) Monte Carlo integration of ``integrand`` over ``limits``.

    Parameters
    ----------
    integrand : callable
        TensorFlow-traceable ``f(x)`` with ``x`` of shape ``[n, dim]`` (already
        mapped into ``limits``, dtype of the Flow) returning ``[n]`` or ``[n, k]``
        of the same dtype.  Checked when first traced: a wrong shape or dtype is
        an error that shows expected vs got.
    dim : int
        Number of integration variables (> 0).
    limits : array of shape (dim, 2), a (low, high) pair, or None
        Integration box; default the unit cube.
    histograms : sequence of :class:`flowsim.Histogram`
        Observables to histogram, weighted by the integrand (component 0 unless
        the histogram says otherwise).

    The estimate of one iteration is ``V * mean(f)`` with error
    ``V * std(f) / sqrt(n)`` (``std`` with ``n - 1``; the variance from
    deviations about each block's mean, pooled: exact even when the mean
    dwarfs the spread).  One event has an infinite error (its spread is
    unknown).  Iterations are pooled (:func:`flowsim.core.stats.combine`): ``run(5)``
    at ``n`` events gives the value and error of one sample of ``5n`` events.
    The error is a standard error: it is honest when ``n`` is large enough
    for the sample variance to be reliable; for heavy-tailed or sparse
    integrands (few events carry most of the integral) it is often too small
    at small ``n``.  Plain MC error falls as ``1/sqrt(n)`` whatever the
    integrand; for peaked integrands use :class:`flowsim.VegasPlus`.
    """

    #: The kernel's own code needs no AutoGraph; the integrand and histogram
    #: observables are converted alone (:func:`flowsim.core.integrand.autograph`).
    #: A subclass defined outside flowsim that overrides methods is converted
    #: unless its own body sets this (:func:`flowsim.core.integrand.autograph_kernel`).
    autograph = False

    def __init__(self, integrand, dim, limits=None, histograms=()):
        self.domain = Domain(dim, limits)
        self.dim = self.domain.dim
        if not callable(integrand):
            raise TypeError(f"integrand must be callable, got {integrand!r}")
        self.integrand = integrand
        self.histograms = list(histograms)
        for h in self.histograms:
            if not isinstance(h, Histogram):
                raise TypeError(f"histograms must be flowsim.Histogram objects, got {h!r}")
        names = [h.name for h in self.histograms]
        if len(set(names)) != len(names):
            raise ValueError(f"histogram names must be unique, got {names}")
        self._components = None

    @property
    def components(self):
        """0 for a scalar integrand, k for one returning ``[n, k]``."""
        if self._components is None:
            k = probe_components(self.integrand, self.dim)
            self._check_components(k)
            self._components = k
        return self._components

    def _check_components(self, k):
        """Subclasses refuse component counts they cannot use (raise ValueError)."""

    def accumulators(self):
        k = max(self.components, 1)
        acc = {"sum": (k,), "m2": (k,), "count": (), "nonfinite": ()}
        for h in self.histograms:
            if h.component >= k:
                raise ValueError(f"histogram {h.name!r} is weighted by integrand component "
                                 f"{h.component}, but the integrand returns {k} component(s)")
            acc.update(h.accumulators())
        return acc

    def block(self, u, valid, state):
        x = self.domain.map(u)
        return self.reduce(self._values(x), valid, state, x)

    def _values(self, x):
        t = tf()
        f = evaluate(self.integrand, x, self.components)
        return t.cast(f, t.float64) * self.domain.volume

    def values(self, u, state):
        """Per event: the integrand at ``u`` mapped into the box, times the volume
        (float64 ``[n, max(components, 1)]``)."""
        del state
        return self._values(self.domain.map(u))

    def map_state(self):
        """The arrays :meth:`weighted_points` needs (none: the map is the box)."""
        return {}

    def weighted_points(self, y, valid, state):
        """Unit-cube points ``y`` ``[n, dim]`` drawn uniformly, as the map sees them:
        ``(x, w, keep, bad)`` with ``x`` the points in the box, ``w = f(x) J``
        (float64 ``[n, max(components, 1)]``, its mean the integral; 0 where not
        kept), ``keep`` the valid events with finite weights and ``bad`` the valid
        ones without.  ``state``: :meth:`map_state`."""
        del state
        t = tf()
        x = self.domain.map(y)
        w = self._values(x)
        finite = t.reduce_all(is_finite(w), axis=1)
        keep = finite & valid
        return x, t.where(keep[:, None], w, t.zeros_like(w)), keep, valid & ~finite

    def block_parts(self):
        # Only when block is this class's (Vegas overrides it) and the inputs are the
        # default uniforms; histograms need the points themselves, so they opt out.
        if (type(self).block is not Plain.block or self.histograms
                or type(self).inputs is not Simulation.inputs):
            return None
        return self.values, self.reduce

    def reduce(self, f, valid, state, x=None):
        """Accumulators of a block from its per-event values ``f`` (:meth:`values`);
        ``x``, the points, is needed only for histograms."""
        del state
        # one value per event: on [n] (moments_of_values); no ``if`` for AutoGraph
        f, finite, out = (_finite_values if f.shape[1] == 1 else _finite_columns)(f, valid)
        out["nonfinite"] = count_true(valid & ~finite)
        for h in self.histograms:
            out.update(h.block(x, f[:, h.component]))
        return out

    def combine(self, rows, n_events):
        """Rows added in block order, but ``m2`` pooled about the overall mean."""
        totals = super().combine(rows, n_events)
        cols = columns(self)
        if "m2" in cols:
            (s0, s1), (m0, m1), (c0, _) = cols["sum"], cols["m2"], cols["count"]
            _, totals[m0:m1], _ = pool_moments(rows[:, s0:s1], rows[:, m0:m1], rows[:, c0])
        return totals

    def estimate(self, totals, n_events):
        value, error = mean_and_error(totals["sum"], totals["m2"], n_events)
        return estimate_record(value, error, self.components, self.histograms, totals,
                               n_events)

    def config(self):
        from ..core.fingerprint import box_functions
        return {"class": "Plain", "dim": self.dim,
                **box_functions(self.integrand, self.domain.limits, self.histograms)}
