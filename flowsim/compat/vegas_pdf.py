"""``vegas.PDFIntegrator``: expectation values under a probability density.

Usage, as in ``vegas``'s tutorial::

    import gvar as gv
    from flowsim.compat import vegas

    prior = gv.gvar(["1.0(5)", "2(1)"])               # a Gaussian prior
    g_ev = vegas.PDFIntegrator(prior, seed=1)
    g_ev(neval=4000, nitn=5)                           # adapt to the PDF

    def f(p):                                          # p has prior's layout
        return p[0] * p[1]

    r = g_ev(f, neval=4000, nitn=5)                    # <f(p)> under the PDF
    print(r, r.pdfnorm, r.Q)                           # mean, the PDF's integral
    s = g_ev.stats(f)                                  # mean and sdev of f(p)
    print(s, s.vegas_mean, s.vegas_sdev)

``PDFIntegrator(param, pdf=None)``: ``param`` (a ``gvar``, an array or dict of
them, or a ``gvar.PDF``) fixes the integration variables; the PDF is its
Gaussian, or ``pdf(p)`` (not normalised, same layout as ``param``; may be a
batch integrand).  ``f(p)`` may return a number, an array or a dict, one point
at a time or in batches (``@vegas.lbatchintegrand``...).  The integrals of
``f(p) pdf(p)`` and ``pdf(p)`` are done together, so their ratio, the
expectation value, carries their correlation, as in ``vegas``.

The variables are ``vegas``'s: ``p = mean + L chi`` with ``L`` from ``param``'s
covariance (``gvar.PDF``), ``chi = scale tan(theta)``, ``theta`` within
``arctan(limit / scale)``, on a map first adapted to the Gaussian.  The
integrals run on flowsim's engine (:class:`flowsim.compat.vegas.Integrator`,
the same settings).  Not provided: ``stats(histograms=...)`` (histogram
``sample()``'s points with their weights), ``save``/``saveall``.
"""
import functools
import math

import numpy as np

from .vegas_integrator import Integrator, lbatchintegrand
from .vegas_map import AdaptiveMap

try:
    import gvar
except ImportError:                        # refused with a message when used
    gvar = None

__all__ = ["PDFEV", "PDFEVArray", "PDFEVDict", "PDFIntegrator"]


def _need_gvar():
    if gvar is None:
        raise ImportError("vegas.PDFIntegrator needs gvar (pip install gvar), as Lepage's "
                          "vegas does: the prior is given as gvar numbers")
    return gvar


def _ratio(results):
    """``results['f(p)*pdf'] / results['pdf']`` (correlated gvars)."""
    return results["f(p)*pdf"] / results["pdf"]


class _Expectation:
    """What the three result types share: ``results`` (the integrals, a
    :class:`flowsim.compat.vegas.RAvgDict`), ``pdfnorm``, its attributes."""

    def extend(self, other):
        """Add the iterations of ``other``'s integrals after this one's."""
        self.results.extend(other.results)

    def __getattr__(self, key):
        if key.startswith("__") or key in ("results", "keys"):
            raise AttributeError(key)
        if key == "pdfnorm":
            return self.results["pdf"]
        return getattr(self.results, key)


class PDFEV(_Expectation, gvar.GVar if gvar is not None else object):
    """Expectation value of a number ``f(p)``: a ``gvar``, with ``pdfnorm`` (the
    PDF's integral), ``results`` and their ``Q``, ``chi2``, ``summary()``..."""

    def __init__(self, results, analyzer=None):
        self.results = results
        ans, extras = (_ratio(results), {}) if analyzer is None else analyzer(results)
        super().__init__(*ans.internaldata)
        for key, value in extras.items():
            setattr(self, key, value)


class PDFEVArray(_Expectation, np.ndarray):
    """Expectation values of an array ``f(p)``: an array of correlated ``gvar``."""

    def __new__(cls, results, analyzer=None):
        ans, extras = (_ratio(results), {}) if analyzer is None else analyzer(results)
        self = np.asarray(ans).view(cls)
        self.__dict__.update(extras)
        self.results = results
        return self

    def __array_finalize__(self, obj):
        if obj is not None and "results" in getattr(obj, "__dict__", {}):
            self.__dict__.update(obj.__dict__)


class PDFEVDict(_Expectation, gvar.BufferDict if gvar is not None else dict):
    """Expectation values of a dict ``f(p)``: a ``gvar.BufferDict``."""

    def __init__(self, results, analyzer=None):
        super().__init__()
        self.results = results
        if analyzer is None:
            for key in results:
                if key != "pdf":
                    self[key[1]] = results[key]
            self.buf[:] /= results["pdf"]
            return
        ans, extras = analyzer(results)
        for key, value in extras.items():
            setattr(self, key, value)
        for key in ans:
            self[key] = ans[key]


def _result_of(results, analyzer=None):
    """The PDFEV, PDFEVArray or PDFEVDict of the integrals ``results``."""
    if "f(p)*pdf" not in results:
        return PDFEVDict(results, analyzer)
    if analyzer is None and np.ndim(results["f(p)*pdf"]) == 0:
        return PDFEV(results)
    return PDFEVArray(results, analyzer)


class _Parameters:
    """``param``'s layout: flat points ``[n, size]`` -> what ``f(p)`` takes."""

    def __init__(self, param_pdf):
        self.pdf = param_pdf
        self.sample = param_pdf.sample(mode=None)
        self.is_dict = hasattr(self.sample, "keys")

    def batch(self, pflat, right=False):
        """``p`` for a batch integrand (batch index first, or last with ``right``)."""
        n = pflat.shape[0]
        if self.is_dict:
            return (gvar.BufferDict(self.sample, rbatch_buf=np.ascontiguousarray(pflat.T))
                    if right else gvar.BufferDict(self.sample, lbatch_buf=pflat))
        shape = np.shape(self.sample)
        return (np.moveaxis(pflat.reshape((n, *shape)), 0, -1) if right
                else pflat.reshape((n, *shape)))

    def point(self, pflat_row):
        """``p`` of one point."""
        if self.is_dict:
            return gvar.BufferDict(self.sample, buf=pflat_row)
        return pflat_row.reshape(np.shape(self.sample))


def _outputs(fcn, params, pflat):
    """``fcn`` on the points ``pflat`` ``[n, size]``: an array ``[n, ...]`` or a dict
    of them, whatever ``fcn``'s batch kind."""
    kind = getattr(fcn, "fcntype", "scalar")
    if kind == "flat":
        return fcn(params, pflat)
    if kind in ("lbatch", "rbatch"):
        right = kind == "rbatch"
        out = fcn(params.batch(pflat, right))
        move = (lambda a: np.moveaxis(np.asarray(a, dtype=np.float64), -1, 0)) if right \
            else (lambda a: np.asarray(a, dtype=np.float64))
        return ({k: move(out[k]) for k in out.keys()} if hasattr(out, "keys") else move(out))
    rows = [fcn(params.point(row)) for row in pflat]
    if rows and hasattr(rows[0], "keys"):
        return {k: np.array([np.asarray(r[k], dtype=np.float64) for r in rows])
                for k in rows[0].keys()}
    return np.array([np.asarray(r, dtype=np.float64) for r in rows])


def _pdf_integrand(theta, f, params, pdf, scale, adapt_to_pdf):
    """``{'pdf': pdf(p) dp/dtheta, 'f(p)*pdf': f(p) pdf(p) dp/dtheta}`` (``vegas``'s
    ``_f_lbatch``); ``pdf`` first unless ``adapt_to_pdf`` is False (the map trains on
    the first output)."""
    tan_theta = np.tan(theta)
    chiv = scale * tan_theta
    dp_dtheta = np.prod(scale * (tan_theta ** 2 + 1.0), axis=1) * params.pdf.dp_dchiv
    pflat = params.pdf.pflat(chiv, mode="lbatch")
    if pdf is None:
        density = (np.prod(np.exp(-chiv ** 2 / 2.0) / math.sqrt(2 * math.pi), axis=1)
                   / params.pdf.dp_dchiv)
    else:
        density = np.asarray(_outputs(pdf, params, pflat), dtype=np.float64).reshape(
            len(theta), -1).prod(axis=1)
    weight = dp_dtheta * density
    ans = {"pdf": weight}
    if f is not None:
        fp = _outputs(f, params, pflat)
        if isinstance(fp, dict):
            for key, value in fp.items():
                ans[("f(p)*pdf", key)] = value * weight.reshape((-1,) + (1,) * (value.ndim - 1))
        else:
            ans["f(p)*pdf"] = fp * weight.reshape((-1,) + (1,) * (fp.ndim - 1))
    if not adapt_to_pdf:
        ans["pdf"] = ans.pop("pdf")
    return ans


def _theta_grid(limit, scale):
    """Nodes of a 1-d map in ``theta`` adapted to the Gaussian in ``chi = scale
    tan(theta)`` (``vegas``'s ``_make_map``, on fixed points)."""
    y = (np.arange(2000)[:, None] + 0.5) / 2000
    edge = math.atan(limit)
    m = AdaptiveMap([[-edge, edge]], ninc=100)
    theta, jac = np.empty(y.shape), np.empty(len(y))
    for _ in range(10):
        m.map(y, theta, jac)
        tan_theta = np.tan(theta[:, 0])
        fx = (tan_theta ** 2 + 1) * np.exp(-(scale * tan_theta) ** 2 / 2.0)
        m.add_training_data(y, (jac * fx) ** 2)
        m.adapt(alpha=1.5)
    return m.extract_grid()[0]


class PDFIntegrator(Integrator):
    """Expectation values ``<f(p)>`` under a probability density, as
    ``vegas.PDFIntegrator`` (see :mod:`flowsim.compat.vegas_pdf`).

    Parameters
    ----------
    param : gvar, array or dict of gvars, or gvar.PDF
        The integration variables and, without ``pdf``, the (Gaussian) PDF.
    pdf : callable or None
        ``pdf(p)``, not necessarily normalised (default: ``param``'s Gaussian).
    adapt_to_pdf : bool
        The map adapts to the PDF (default True) or to ``f(p) pdf(p)``.
    limit, scale : float
        ``|chi| < limit`` standard deviations (default 100); variables
        emphasising ``scale`` standard deviations (default 1).
    svdcut : float
        SVD cut of ``param``'s correlation matrix (default 1e-15, ``gvar.PDF``).
    **kwargs
        :class:`flowsim.compat.vegas.Integrator`'s settings (``nitn``,
        ``neval``, ``seed``, ``backend``...); ``uses_jac`` is ignored, as
        ``vegas`` ignores it.
    """

    def __init__(self, param, pdf=None, adapt_to_pdf=True, limit=100.0, scale=1.0,
                 svdcut=1e-15, **kwargs):
        g = _need_gvar()
        if param is None:
            raise ValueError("param must be specified (gvar numbers: the prior)")
        param_pdf = param if isinstance(param, g.PDF) else g.PDF(param, svdcut=svdcut)
        self.param_pdf = param_pdf
        self._params = _Parameters(param_pdf)
        self.param_sample = self._params.sample
        self.limit, self.scale = abs(float(limit)), abs(float(scale))
        if not (self.limit > 0 and self.scale > 0):
            raise ValueError(f"limit and scale must be > 0, got limit={limit!r}, "
                             f"scale={scale!r}")
        self.pdf, self.adapt_to_pdf = pdf, bool(adapt_to_pdf)
        if pdf is not None and not callable(pdf):
            raise TypeError(f"pdf must be callable pdf(p) or None, got {pdf!r}")
        kwargs.pop("uses_jac", None)
        grid = _theta_grid(self.limit / self.scale, self.scale)
        super().__init__(AdaptiveMap(param_pdf.size * [grid]), **kwargs)

    def _integrand(self, f):
        return lbatchintegrand(functools.partial(
            _pdf_integrand, f=f, params=self._params, pdf=self.pdf, scale=self.scale,
            adapt_to_pdf=self.adapt_to_pdf))

    def __call__(self, f=None, **settings):
        """``<f(p)>``: a :class:`PDFEV`, :class:`PDFEVArray` or :class:`PDFEVDict`
        (``.pdfnorm`` the PDF's integral); with ``f=None`` only the PDF is integrated
        (to adapt the map), giving the integrals with ``pdfnorm``."""
        settings.pop("uses_jac", None)
        for key in ("save", "saveall"):
            if settings.get(key) is not None:
                raise ValueError(f"{key}= is not provided by flowsim; keep the returned "
                                 f"result instead (its .results and .itn_results hold "
                                 f"every iteration)")
            settings.pop(key, None)
        for key in ("pdf", "adapt_to_pdf"):
            if key in settings:
                setattr(self, key, settings.pop(key))
        results = super().__call__(self._integrand(f), **settings)
        if results["pdf"].mean == 0:
            raise RuntimeError("the integral of the PDF vanishes; increase neval")
        if f is None:
            results.pdfnorm = results["pdf"]
            return results
        return _result_of(results)

    def stats(self, f=None, moments=False, histograms=False, **settings):
        """Mean and (co)variance of ``f(p)`` under the PDF (default ``f``: ``p``
        itself): a gvar (array, dict) whose ``sdev`` is the PDF's spread of ``f(p)``,
        plus ``vegas_mean`` (the means with their integration errors),
        ``vegas_cov``, ``vegas_sdev`` and ``stats`` (``gvar.PDFStatistics``, with
        skewness and kurtosis if ``moments``).  The map does not adapt unless
        ``adapt=True`` is passed, as in ``vegas``."""
        if histograms:
            raise ValueError("stats(histograms=...) is not provided by flowsim; histogram "
                             "the points of wgts, p = integrator.sample(nbatch) with "
                             "numpy.histogram(..., weights=wgts)")
        f = lbatchintegrand(_identity) if f is None else f
        sample = _outputs(f, self._params, self._params.pdf.meanflat[None, :])
        shape = None if isinstance(sample, dict) else np.shape(sample)[1:]
        integrand = functools.partial(_stats_integrand, f=f, moments=bool(moments))
        integrand.fcntype = "flat"          # takes the flat points, not p
        old = {} if "adapt" in settings else self.set(adapt=False)
        try:
            results = super().__call__(self._integrand(integrand), **settings)
        finally:
            self.set(**old)
        layout = (sample, shape)
        analyzer = functools.partial(_stats_analyzer, layout=layout, moments=bool(moments))
        if shape is None:
            return PDFEVDict(results, analyzer)
        if shape == ():
            return PDFEV(results, analyzer)
        return PDFEVArray(results, analyzer)

    def sample(self, nbatch, mode="rbatch"):
        """``(wgts, p)``: at least ``nbatch`` points ``p`` distributed as the PDF with
        their weights (summing to 1), whole iterations of the current map; ``p`` has
        ``param``'s layout with the sample index last (``mode="rbatch"``) or first
        (``"lbatch"``)."""
        if mode not in ("rbatch", "lbatch"):
            raise ValueError(f"mode must be 'rbatch' or 'lbatch', got {mode!r}")
        neval = int(self.settings["neval"])
        wgts, points = [], []
        for _ in range(max(1, -(-int(nbatch) // neval))):
            for theta, wgt in self.random_batch():
                weights = _pdf_integrand(theta, None, self._params, self.pdf, self.scale,
                                         True)["pdf"]
                chiv = self.scale * np.tan(theta)
                points.append(self._params.pdf.pflat(chiv, mode="lbatch"))
                wgts.append(wgt * weights)
        wgts = np.concatenate(wgts)
        return wgts / wgts.sum(), self._params.batch(np.concatenate(points), mode == "rbatch")


def _identity(p):
    return p


def _flat_outputs(out, n):
    """``f(p)``'s outputs (array or dict) as ``[n, k]``."""
    if isinstance(out, dict):
        return np.concatenate([np.asarray(v).reshape(n, -1) for v in out.values()], axis=1)
    return np.asarray(out).reshape(n, -1)


def _stats_integrand(params, pflat, f, moments):
    """``f(p)``, the products ``f_i f_j`` (``j <= i``) and, with ``moments``, the
    third and fourth powers: what :meth:`PDFIntegrator.stats` integrates."""
    fp = _flat_outputs(_outputs(f, params, pflat), len(pflat))
    lower = np.tril_indices(fp.shape[1])
    ans = {"fp": fp, "fpfp": fp[:, lower[0]] * fp[:, lower[1]]}
    if moments:
        ans["fp**3"], ans["fp**4"] = fp ** 3, fp ** 4
    return ans


def _stats_analyzer(results, layout, moments):
    """Means, covariances and statistics of ``f(p)`` from the integrals of ``f``,
    ``f_i f_j`` (and powers) times the PDF (``vegas``'s ``_stats_analyzer``)."""
    ratio = gvar.BufferDict()
    for key in results:
        if key != "pdf":
            ratio[key[1]] = results[key]
    ratio = ratio / results["pdf"]
    fp = ratio["fp"]
    mean = gvar.mean(fp)
    k = len(mean)
    products = iter(ratio["fpfp"])
    cov = np.zeros((k, k), dtype=object)
    second = [None] * k
    for i in range(k):
        for j in range(i + 1):
            value = next(products)
            if i == j:
                second[i] = value
            cov[i, j] = cov[j, i] = value - fp[i] * fp[j]
    cov = cov + gvar.evalcov(fp)
    ans = gvar.gvar(mean, gvar.mean(cov))
    stats = [gvar.PDFStatistics(moments=[fp[i], second[i], ratio["fp**3"][i],
                                         ratio["fp**4"][i]] if moments else
                                [fp[i], second[i]]) for i in range(k)]
    sample, shape = layout
    sdev = np.array([gvar.fabs(cov[i, i]) ** 0.5 for i in range(k)], dtype=object)
    if shape is None:
        template = gvar.BufferDict({key: np.zeros(np.shape(v)[1:]) for key, v in sample.items()})
        extras = {"vegas_mean": gvar.BufferDict(template, buf=fp),
                  "vegas_sdev": gvar.BufferDict(template, buf=sdev),
                  "vegas_cov": cov, "stats": gvar.BufferDict(template, buf=np.array(
                      stats, dtype=object))}
        return gvar.BufferDict(template, buf=ans), extras
    if shape == ():
        return ans[0], {"vegas_mean": fp[0], "vegas_sdev": sdev[0], "vegas_cov": cov,
                        "stats": stats[0]}
    extras = {"vegas_mean": fp.reshape(shape), "vegas_sdev": sdev.reshape(shape),
              "vegas_cov": cov, "stats": np.array(stats, dtype=object).reshape(shape)}
    return ans.reshape(shape), extras
