"""The everyday part of Lepage's ``vegas`` on flowsim's engine.

Usage, as in ``vegas``'s tutorial::

    from flowsim.compat import vegas

    def f(x):                                   # one point x[d] at a time
        return math.exp(-100 * sum((xd - 0.5) ** 2 for xd in x)) * 1013.2118364296088

    integ = vegas.Integrator([[-1, 1], [0, 1], [0, 1], [0, 1]])
    integ(f, nitn=10, neval=1000)               # adapt the map, discard
    result = integ(f, nitn=10, neval=1000)
    print(result.summary())
    print("result = %s    Q = %.2f" % (result, result.Q))

``@vegas.batchintegrand`` (= ``lbatchintegrand``: ``x`` ``[n, dim]`` ->
``[n]``, ``[n, ...]`` or a dict of those) and ``@vegas.rbatchintegrand``
(``x`` ``[dim, n]`` -> ``[..., n]``) mark numpy integrands that take a batch
of points, which is much faster than one point at a time (Lepage's own
decorators, which set ``fcntype``, are recognised too).  An integrand may
return a number, an array or a dict of numbers and arrays; the result is
then a :class:`RAvg`, :class:`RAvgArray` or :class:`RAvgDict`.

What runs: ``beta > 0`` (default 0.75) is :class:`flowsim.VegasPlus`,
``beta=0`` stratified :class:`flowsim.Vegas`, on ``neval`` events per
iteration; the numpy integrand runs through ``tf.numpy_function``
(:class:`flowsim.physics.numpy_integrands.NumpyIntegrand`).  Differences from
``vegas``:

* random numbers are flowsim's counter-based streams, from ``seed`` (default
  drawn from the OS): the same seed gives the same bits on every backend;
* iterations combine as :class:`flowsim.Result` does (weights floored, so no
  iteration dominates through an under-estimated error), not with plain
  ``1 / sdev**2`` weights;
* iterations of an array or dict integrand are averaged as ``vegas`` averages
  them, weighted by the inverse of their covariance matrices, but with each
  matrix first rescaled so that its diagonal is that floored variance
  (:func:`flowsim.core.covariance.combine_correlated`); ``chi2`` is ``vegas``'s,
  ``dof = (nitn - 1) * size``.
* the map trains on the first component of a vector integrand;
* no warning is issued when the iterations disagree (``vegas`` issues none):
  read the result's ``Q`` (and :meth:`RAvg.summary`), as with ``vegas``.

The outputs of an array or dict integrand are correlated, as in ``vegas``: each
iteration estimates them from the same points, and the integrand's columns
carry their pair sums ``f_i + f_j`` (:func:`flowsim.core.covariance.with_pair_sums`,
``size (size - 1) / 2`` more columns), whose errors give each iteration's
covariance whatever the stratification.  So derived quantities get ``vegas``'s
errors::

    r = integ(f, nitn=10, neval=10000)       # f returns {'1': ..., 'x': ...}
    print(r['x'] / r['1'])                   # error from the correlated gvars
    print(gvar.evalcorr([r['1'], r['x']]))

``vegas.AdaptiveMap`` (:mod:`flowsim.compat.vegas_map`, the same grids as
``vegas``), ``Integrator(..., uses_jac=True)``, ``adapt_to_errors=True``
(:mod:`flowsim.compat.vegas_errors`) and ``vegas.PDFIntegrator``
(:mod:`flowsim.compat.vegas_pdf`, expectation values under a probability
density; loaded when first used) are here too.

Results are ``gvar`` numbers when ``gvar`` is installed (``vegas`` needs it):
an array result holds ``gvar.gvar(mean, cov)``, a dict result is a
``gvar.BufferDict`` of them.  Without ``gvar`` they are :class:`GValue`
(``mean``, ``sdev``, no correlations: combine them with the ``cov``
attribute, e.g. ``flowsim.core.covariance.ratio(r.flat_mean, r.cov, i, j)``).
"""
from .vegas_integrator import (
    BatchIntegrand,
    GValue,
    Integrator,
    LBatchIntegrand,
    RAvg,
    RAvgArray,
    RAvgDict,
    RBatchIntegrand,
    batchintegrand,
    lbatchintegrand,
    ravg,
    rbatchintegrand,
    vegas_average,
    vegas_nstrat,
)
from .vegas_map import AdaptiveMap

__all__ = ["AdaptiveMap", "BatchIntegrand", "GValue", "Integrator", "LBatchIntegrand", "RAvg",
           "RAvgArray", "RAvgDict", "RBatchIntegrand", "batchintegrand", "lbatchintegrand",
           "rbatchintegrand", "ravg", "vegas_average", "vegas_nstrat"]

_PDF_NAMES = ("PDFEV", "PDFEVArray", "PDFEVDict", "PDFIntegrator")


def __getattr__(name):
    """``PDFIntegrator`` and its results, from :mod:`flowsim.compat.vegas_pdf` (loaded
    when first asked for: it needs ``gvar``)."""
    if name in _PDF_NAMES:
        from . import vegas_pdf
        return getattr(vegas_pdf, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
