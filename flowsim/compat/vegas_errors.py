"""``adapt_to_errors=True`` of ``vegas.Integrator``: a map that follows the errors.

``vegas`` then gives every hypercube the same events (no VEGAS+ allocation)
and makes the map's increments the strata themselves (``ninc = nstrat`` per
axis); after each iteration every hypercube adds its variance to the training
of the increments it lies in, so the map shrinks where the Monte Carlo error
is largest rather than where ``|f|`` is.  :class:`ErrorAdaptedVegas` does the
same on flowsim's engine (a :class:`flowsim.VegasPlus` with ``beta=0`` and
``neval_frac=0``, whose hypercube variances it already measures); flowsim's
map has as many increments on every axis, so the strata are the same on
every axis (``vegas``'s ``uniform_nstrat=True``).
"""
import numpy as np

from flowsim.algorithms.vegasplus import VegasPlus

from .vegas_map import TINY, AdaptiveMap


def error_strata(dim, neval, nstrat=None):
    """Strata per axis of an ``adapt_to_errors`` iteration of ``neval`` events:
    ``nstrat`` if given (the same on every axis), else ``ns`` per axis with
    ``ns**dim`` near ``neval / 2`` (two events per hypercube)."""
    if nstrat is not None:
        nstrat = np.asarray(nstrat, dtype=np.int64)
        if np.any(nstrat != nstrat[0]):
            raise ValueError(f"adapt_to_errors=True needs the same nstrat on every axis "
                             f"(flowsim's map has as many increments on each), got "
                             f"{nstrat.tolist()}; pass nstrat={[int(nstrat.max())] * dim} "
                             f"or adapt_to_errors=False")
    else:
        ns = max(1, int(abs(neval / 2.0) ** (1.0 / dim)))
        nstrat = np.full(dim, ns, dtype=np.int64)
    if nstrat[0] < 2:
        raise ValueError(f"adapt_to_errors=True needs at least 2 strata per axis (the map's "
                         f"increments), got nstrat={nstrat.tolist()} for neval={neval}; "
                         f"raise neval to at least {2 * 2 ** dim} or use "
                         f"adapt_to_errors=False")
    return nstrat


class ErrorAdaptedVegas(VegasPlus):
    """Stratified VEGAS whose map trains on the hypercubes' variances.

    ``ErrorAdaptedVegas(integrand, dim, limits, nstrat=[ns] * dim, alpha=0.5)``:
    the map has ``ns`` increments per axis, the strata; every hypercube gets
    the same events; after each iteration the variance of each hypercube's
    estimate is added to the increment it occupies on every axis and the map
    adapts as ``vegas.AdaptiveMap.adapt(alpha)`` does.
    """

    def __init__(self, integrand, dim, limits=None, nstrat=None, alpha=0.5, train=0):
        nstrat = error_strata(dim, 0, nstrat)
        super().__init__(integrand, dim, limits=limits, n_bins=int(nstrat[0]), alpha=alpha,
                         beta=0.0, nstrat=nstrat, neval_frac=0.0, train=train)

    def adapt(self, totals, n_events):
        if self.frozen:
            return
        if self.alpha > 0:
            _, var, counts = self._hcube_stats(totals, n_events)
            var = var / counts                 # the variance of each hypercube's estimate
            sigma2 = var.sum(axis=1) if self.train == "norm" else var[:, self.train]
            m = AdaptiveMap(self.edges.tolist())
            m.sum_f, m.n_f = self._projected(sigma2)
            m.adapt(alpha=self.alpha)
            self.edges = m.grid
        self._alloc = None

    def _projected(self, per_hcube):
        """Sums ``[dim, ns]`` of ``per_hcube`` over the hypercubes in each stratum of
        each axis, and their counts (plus ``vegas``'s ``TINY``)."""
        cube = np.arange(self.n_hcubes)
        stride = np.concatenate([[1], np.cumprod(self.nstrat)[:-1]])
        sums = np.empty((self.dim, self.n_bins))
        counts = np.empty((self.dim, self.n_bins))
        for d in range(self.dim):
            slab = (cube // stride[d]) % self.nstrat[d]
            sums[d] = np.bincount(slab, weights=np.abs(per_hcube), minlength=self.n_bins)
            counts[d] = np.bincount(slab, minlength=self.n_bins) + TINY
        return sums, counts

    def config(self):
        return {**super().config(), "map_training": "hypercube variances"}
