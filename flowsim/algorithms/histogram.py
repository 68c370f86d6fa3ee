"""Histograms of an observable, weighted by the integrand: race-free accumulators."""

import numpy as np

from ..core.blocks import available_memory, check_count, check_memory  # noqa: F401 (their old home)
from ..core.integrand import autograph
from ..core.lazy_tf import tf
from ..core.sums import segment_block_sum


class Histogram:
    """Distribution of ``observable(x)`` weighted by the integrand's contribution.

    Parameters
    ----------
    observable : callable
        TF-traceable, ``x`` ``[n, dim]`` -> ``[n]`` (in the integration limits).
    bins : int
        Number of equal bins over ``range``.
    range : (float, float)
        Low and high edge; values outside are not counted.
    name : str or None
        Key in ``Result.histograms`` (default: the observable's ``__name__``).
    component : int
        Which integrand component weights the events (vector integrands).

    The bin values add up to the part of the integral whose observable falls in
    ``range``; each bin has its own Monte Carlo error.  Bins are per-block
    ``unsorted_segment_sum`` accumulators, added in block order like every other
    sum, so they keep their bits across devices and never lose events to races.
    """

    def __init__(self, observable, bins, range, name=None, component=0):
        if not callable(observable):
            raise TypeError(f"observable must be callable, got {observable!r}")
        self.observable = observable
        self.bins = check_count("bins", bins)
        lo, hi = (float(v) for v in range)
        if not lo < hi:
            raise ValueError(f"range must have low < high, got {range!r}")
        self.range = (lo, hi)
        self.name = name or getattr(observable, "__name__", "histogram")
        self.component = check_count("component", component, minimum=0)

    @property
    def edges(self):
        return np.linspace(self.range[0], self.range[1], self.bins + 1)

    def accumulators(self):
        return {f"hist/{self.name}": (self.bins,), f"hist2/{self.name}": (self.bins,)}

    def block(self, x, weights):
        """Per-bin sums of ``weights`` ``[n]`` (float64, 0 for masked events)."""
        t = tf()
        obs = t.cast(t.reshape(autograph(self.observable)(x), [-1]), t.float64)
        lo, hi = self.range
        scaled = (obs - lo) / (hi - lo) * self.bins
        inside = (scaled >= 0) & (scaled < self.bins)
        # truncation is the floor of the values inside (>= 0)
        ids = t.where(inside, t.cast(t.where(inside, scaled, 0.0), t.int32), self.bins)
        w = t.where(inside, weights, 0.0)
        s = segment_block_sum(w, ids, self.bins + 1)[: self.bins]
        s2 = segment_block_sum(w * w, ids, self.bins + 1)[: self.bins]
        return {f"hist/{self.name}": s, f"hist2/{self.name}": s2}

    def estimate(self, totals, n_events):
        s = totals[f"hist/{self.name}"]
        s2 = totals[f"hist2/{self.name}"]
        mean = s / n_events
        if n_events < 2:
            return {"edges": self.edges, "values": mean, "errors": np.full_like(mean, np.inf)}
        var = np.maximum(s2 / n_events - mean ** 2, 0.0) / (n_events - 1)
        return {"edges": self.edges, "values": mean, "errors": np.sqrt(var)}


def estimate_record(value, error, components, histograms, totals, n_events):
    """An iteration's estimate dict: scalars for a ``[n]`` integrand, plus histograms."""
    if components == 0:
        value, error = value[0], error[0]
    est = {"value": value, "error": error}
    if histograms:
        est["histograms"] = {h.name: h.estimate(totals, n_events) for h in histograms}
    return est

