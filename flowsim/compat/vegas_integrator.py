"""The engine behind :mod:`flowsim.compat.vegas` (its usage and its differences
from Lepage's ``vegas`` are documented there): the integrand wrappers, the averaged
results and :class:`Integrator`.  Import the public names from
:mod:`flowsim.compat.vegas`."""
import math

import numpy as np

from flowsim.core import covariance
from flowsim.core.lazy_tf import tf

from .vegas_map import AdaptiveMap, axis_jacobians, rebinned
from .vegasflow.monte_carlo import derived_seed

try:
    from gvar import BufferDict as _DictBase
except ImportError:                        # no gvar: a dict of GValue
    _DictBase = dict


def lbatchintegrand(f):
    """Mark ``f(x)`` as a batch integrand: ``x`` ``[n, dim]``, output ``[n, ...]``."""
    f.fcntype = "lbatch"
    return f


batchintegrand = lbatchintegrand


def rbatchintegrand(f):
    """Mark ``f(x)`` as a right batch integrand: ``x`` ``[dim, n]``, output ``[..., n]``."""
    f.fcntype = "rbatch"
    return f


class LBatchIntegrand:
    """Base class of batch integrands: subclasses define ``__call__(self, x)``
    with ``x`` ``[n, dim]``."""

    fcntype = "lbatch"


BatchIntegrand = LBatchIntegrand


class RBatchIntegrand:
    """Base class of right batch integrands: ``__call__(self, x)``, ``x`` ``[dim, n]``."""

    fcntype = "rbatch"


class GValue:
    """A number with its standard deviation (``gvar.GVar`` without ``gvar``)."""

    def __init__(self, mean, sdev):
        self.mean, self.sdev = float(mean), float(sdev)

    def __str__(self):
        return fmt(self.mean, self.sdev)

    __repr__ = __str__

    def __float__(self):
        return self.mean


def fmt(mean, sdev):
    """``0.25038(38)``: the mean to the second significant digit of ``sdev``."""
    if not (sdev > 0 and math.isfinite(sdev)):
        return f"{mean:g}({sdev:g})"
    dec = max(0, 1 - math.floor(math.log10(sdev)))
    digits = int(round(sdev * 10 ** dec))
    return f"{mean:.{dec}f}({digits})"


def gvalue(mean, sdev):
    """A ``gvar.GVar`` if ``gvar`` is installed, else a :class:`GValue`."""
    try:
        import gvar
    except ImportError:
        return GValue(mean, sdev)
    return gvar.gvar(float(mean), float(sdev))


def gvalues(mean, cov):
    """Correlated ``gvar.gvar(mean, cov)`` (flat), or :class:`GValue` of each
    component without ``gvar``."""
    mean = np.asarray(mean, dtype=np.float64)
    cov = np.asarray(cov, dtype=np.float64)
    try:
        import gvar
    except ImportError:
        return [GValue(m, math.sqrt(max(c, 0.0))) for m, c in zip(mean, np.diag(cov))]
    return list(gvar.gvar(mean, (cov + cov.T) / 2.0))


class Layout:
    """How an integrand's output (number, array or dict) maps to flat components."""

    def __init__(self, sample, correlate=True):
        if isinstance(sample, dict):
            self.kind = "dict"
            self.parts = [(k, np.shape(v)) for k, v in sample.items()]
        elif np.ndim(sample) == 0:
            self.kind, self.parts = "scalar", [(None, ())]
        else:
            self.kind, self.parts = "array", [(None, np.shape(sample))]
        self.size = sum(int(np.prod(s)) for _, s in self.parts)
        #: columns the integrand returns: the outputs, then their pair sums
        self.columns = self.size
        if correlate and self.kind != "scalar":
            self.columns += len(covariance.pairs(self.size))

    def flatten(self, out, n, right=False):
        """Batch output -> ``[n, size]`` float64."""
        items = [out[k] for k, _ in self.parts] if self.kind == "dict" else [out]
        cols = []
        for item, (_, shape) in zip(items, self.parts):
            a = np.asarray(item, dtype=np.float64)
            if right:
                a = np.moveaxis(a.reshape(int(np.prod(shape)), n), 0, -1) if shape else a
            if a.shape != (n, *shape):
                raise ValueError(f"integrand returned shape {list(a.shape)} for a batch of "
                                 f"{n} points; expected {[n, *shape]} (the shape of its "
                                 f"first output, with one row per point)")
            cols.append(a.reshape(n, -1))
        return np.concatenate(cols, axis=1)

    def build(self, values, errors=None, cov=None):
        """Flat ``values`` with their ``errors`` (uncorrelated) or covariance
        ``cov`` -> number, object array or dict of them."""
        if cov is None:
            flat = [gvalue(v, e) for v, e in zip(values, errors)]
        else:
            flat = gvalues(values, cov)
        out, i = {}, 0
        for key, shape in self.parts:
            m = int(np.prod(shape))
            g = flat[i:i + m]
            out[key] = g[0] if not shape else np.array(g, dtype=object).reshape(shape)
            i += m
        return out if self.kind == "dict" else out[None]


class BatchFunction:
    """A vegas integrand as a numpy batch function ``x [n, dim] -> [n, size]``
    (picklable when the integrand is)."""

    def __init__(self, fcn, layout, jacobians=None):
        self.fcn, self.layout = fcn, layout
        self.fcntype = getattr(fcn, "fcntype", "scalar")
        self.__name__ = getattr(fcn, "__name__", type(fcn).__name__)
        #: ``x -> dx[d]/dy[d]`` of the map, passed as ``jac=`` (``uses_jac=True``)
        self.jacobians = jacobians

    def __call__(self, x):
        n = x.shape[0]
        jac = None if self.jacobians is None else self.jacobians(x)
        if self.fcntype == "lbatch":
            out = self.layout.flatten(_call(self.fcn, x, jac), n)
        elif self.fcntype == "rbatch":
            xr = np.ascontiguousarray(x.T)
            out = self.layout.flatten(_call(self.fcn, xr, None if jac is None else jac.T), n,
                                      right=True)
        else:
            out = np.stack([self.layout.flatten(_one(_call(self.fcn, p, None if jac is None
                                                           else jac[i]), self.layout), 1)[0]
                            for i, p in enumerate(x)]) if n else np.zeros((0, self.layout.size))
        if self.layout.kind == "scalar":
            return out[:, 0]
        return covariance.with_pair_sums(out) if self.layout.columns > self.layout.size else out


def _call(fcn, x, jac):
    """``fcn(x)``, or ``fcn(x, jac=jac)`` with a Jacobian (``uses_jac``)."""
    return fcn(x) if jac is None else fcn(x, jac=jac)


def _one(value, layout):
    """A single point's output as a batch of one."""
    if layout.kind == "dict":
        return {k: np.asarray(value[k])[None] for k, _ in layout.parts}
    return np.asarray(value)[None]


def _centre(limits):
    """The box's centre; on an infinite axis 1 inside a finite end, or 0."""
    low, high = limits[:, 0], limits[:, 1]
    with np.errstate(invalid="ignore"):
        mid = (low + high) / 2
    return np.where(np.isfinite(mid), mid, np.where(np.isfinite(low), low + 1.0,
                                                    np.where(np.isfinite(high), high - 1.0, 0.0)))


def _sample(fcn, limits, uses_jac=False):
    """The integrand's output at the centre of the box (its layout); with
    ``uses_jac``, called with the Jacobian of a uniform map."""
    mid = _centre(limits)
    jac = (limits[:, 1] - limits[:, 0]) if uses_jac else None
    kind = getattr(fcn, "fcntype", "scalar")
    if kind == "lbatch":
        out = _call(fcn, np.tile(mid, (2, 1)), None if jac is None else np.tile(jac, (2, 1)))
        return ({k: np.asarray(v)[0] for k, v in out.items()} if isinstance(out, dict)
                else np.asarray(out)[0])
    if kind == "rbatch":
        out = _call(fcn, np.tile(mid[:, None], (1, 2)),
                    None if jac is None else np.tile(jac[:, None], (1, 2)))
        return ({k: np.asarray(v)[..., 0] for k, v in out.items()} if isinstance(out, dict)
                else np.asarray(out)[..., 0])
    return _call(fcn, mid, jac)


class _Averaged:
    """What :class:`RAvg`, :class:`RAvgArray` and :class:`RAvgDict` share."""

    #: ``None``: iterations combine by flowsim's rule; True/False: ``vegas``'s weighted or
    #: unweighted average (results of :func:`ravg`).
    weighted = None

    def _set(self, result, layout, records, combined=None):
        self.result = result
        self._layout = layout
        n = len(records)
        if combined is None:
            self.itn_results = [layout.build(np.atleast_1d(r["value"]),
                                             np.atleast_1d(r["error"])) for r in records]
            c = np.atleast_1d(result.chi2_dof) if result.chi2_dof is not None else np.zeros(1)
            self.dof = (n - 1) * layout.size
            self.chi2 = float(np.sum(c) * (n - 1))
        else:
            self.itn_results = [layout.build(np.atleast_1d(r["value"]), cov=r["covariance"])
                                for r in records]
            self.flat_mean, self.cov, self.chi2, self.dof = combined
        if self.dof > 0:
            from scipy.special import gammaincc
            self.Q = float(gammaincc(self.dof / 2.0, self.chi2 / 2.0))
        else:
            self.Q = 1.0
        self.sum_neval = int(result.n_events) if result is not None else 0
        self.avg_neval = self.sum_neval / max(n, 1)
        self._rows = [(np.atleast_1d(r["value"])[0], np.atleast_1d(r["error"])[0],
                       r["events"], r.get("state_id")) for r in records]
        self._records = None if combined is None else list(records)

    def extend(self, other):
        """Add the iterations of ``other`` (a result of the same integrand's shape) after
        this one's, as ``vegas``'s ``extend``; the average is recomputed by this
        result's rule (flowsim's for a call's result, ``vegas``'s for :func:`ravg`'s)."""
        if not isinstance(other, _Averaged) or other._layout.parts != self._layout.parts:
            raise ValueError("extend needs a result of an integrand of the same shape, "
                             f"got {type(other).__name__}")
        if self.weighted is not None:
            merged = ravg(list(self.itn_results) + list(other.itn_results), self.weighted)
        else:
            merged = _merged_calls(self, other)
        _become(self, merged)

    def converged(self, rtol, atol):
        """Every output's ``sdev < atol + rtol |mean|`` (vegas's ``converged``)."""
        sdev = np.sqrt(np.maximum(np.diag(self.cov), 0.0))
        return bool(np.all(sdev < atol + rtol * np.abs(self.flat_mean)))

    def summary(self):
        """The iteration table of ``vegas`` (first component; the ``chi2/dof`` of
        every component, correlations included, for arrays and dicts)."""
        average = "average    " if self.weighted is False else "wgt average"
        lines = [f"itn   integral        {average}     chi2/dof        Q", "-" * 55]
        for i, (v, e, _, _) in enumerate(self._rows):
            mean, err, chi2, dof = self._running(i + 1)
            c = chi2 / dof if dof > 0 else 0.0
            q = 1.0
            if dof > 0:
                from scipy.special import gammaincc
                q = float(gammaincc(dof / 2.0, chi2 / 2.0))
            lines.append(f"{i + 1:>3}   {fmt(v, e):<15} {fmt(mean, err):<15}"
                         f" {c:>8.2f} {q:>8.2f}")
        return "\n".join(lines) + "\n"

    def _running(self, n):
        """``(mean, sdev, chi2, dof)`` of the first ``n`` iterations (first component)."""
        if self._records is not None:
            mean, cov, chi2, dof = (average_iterations(self._records[:n]) if self.weighted is None
                                    else vegas_average(self._records[:n], self.weighted))
            return float(mean[0]), math.sqrt(max(cov[0, 0], 0.0)), chi2, dof
        from flowsim.core.stats import combine
        rows = self._rows[:n]
        mean, err, chi2 = combine(np.array([[r[0]] for r in rows]),
                                  np.array([[r[1]] for r in rows]),
                                  [r[2] for r in rows], [r[3] for r in rows])
        c = 0.0 if chi2 is None else float(np.atleast_1d(chi2)[0])
        return float(mean[0]), float(err[0]), c * (n - 1), n - 1


class RAvg(_Averaged):
    """Result of a scalar integrand: ``mean``, ``sdev``, ``chi2``, ``dof``, ``Q``,
    ``itn_results`` (one number per iteration), :meth:`summary`, :meth:`extend`."""

    def __init__(self, result, layout, records, combined=None):
        self._set(result, layout, records, combined)
        if combined is None:
            self.mean, self.sdev = float(result.value), float(result.error)
        else:
            self.mean, self.sdev = float(combined[0][0]), math.sqrt(max(combined[1][0, 0], 0.0))

    @property
    def val(self):
        return gvalue(self.mean, self.sdev)

    def converged(self, rtol, atol):
        """``sdev < atol + rtol |mean|`` (vegas's ``RAvg.converged``)."""
        return self.sdev < atol + rtol * abs(self.mean)

    def __str__(self):
        return fmt(self.mean, self.sdev)

    __repr__ = __str__

    def __float__(self):
        return self.mean


def _merged_calls(first, second):
    """The result of two calls' iterations, by flowsim's rule (a new state per call)."""
    from flowsim.core.result import Result
    records = ([dict(r, state_id=("first", r.get("state_id"))) for r in first.result.iterations]
               + [dict(r, state_id=("second", r.get("state_id")))
                  for r in second.result.iterations])
    result = Result(records, first.result.wall_time + second.result.wall_time,
                    first.result.timeline + second.result.timeline, first.result.meta)
    cls = type(first)
    return cls(result, first._layout, records)


def _become(target, source):
    """``target`` takes ``source``'s values and attributes (extend works in place)."""
    if isinstance(target, np.ndarray):
        target[...] = source
    elif isinstance(target, dict):
        for key in source:
            target[key] = source[key]
    target.__dict__.update(source.__dict__)


def _flat_estimate(item):
    """``(layout sample, flat means, covariance)`` of one iteration's estimate: a
    number, ``GValue`` or ``gvar``, an array of them, a dict of those, or a result."""
    if isinstance(item, RAvg):
        item = item.val
    if hasattr(item, "keys"):                        # a dict or gvar.BufferDict
        item = {k: item[k] for k in item.keys()}
    elif isinstance(item, np.ndarray):
        item = np.asarray(item)
    values = ([np.asarray(v, dtype=object).reshape(-1) for v in item.values()]
              if isinstance(item, dict) else [np.asarray(item, dtype=object).reshape(-1)])
    flat = np.concatenate(values)
    means = np.array([getattr(g, "mean", g) for g in flat], dtype=np.float64)
    try:
        import gvar
        cov = np.asarray(gvar.evalcov(list(flat)), dtype=np.float64).reshape(len(flat), -1)
    except (ImportError, TypeError, ValueError, AttributeError):
        cov = np.diag([float(getattr(g, "sdev", 0.0)) ** 2 for g in flat])
    sample = ({k: np.zeros(np.shape(v)) for k, v in item.items()} if isinstance(item, dict)
              else np.zeros(np.shape(item)))
    return sample, means, cov


def vegas_average(records, weighted=True):
    """``(flat mean, cov, chi2, dof)`` of iteration records by ``vegas``'s rule:
    weighted by the inverse covariances (``weighted=True``), or the plain mean with
    ``sum(cov) / n**2`` (``False``, its chi2 measured against the mean covariance)."""
    means = np.array([r["value"] for r in records], dtype=np.float64)
    covs = np.array([r["covariance"] for r in records], dtype=np.float64)
    n, size = means.shape
    for c in covs:
        c[np.diag_indices(size)] = np.maximum(np.diag(c), TINY)
    if weighted:
        inverses = np.array([np.linalg.pinv(c, hermitian=True) for c in covs])
        cov = np.linalg.pinv(inverses.sum(axis=0), hermitian=True)
        mean = cov @ np.einsum("nij,nj->i", inverses, means)
        chi2 = float(sum((m - mean) @ w @ (m - mean) for m, w in zip(means, inverses)))
        return mean, cov, chi2, (n - 1) * size
    mean = means.mean(axis=0)
    cov = covs.sum(axis=0) / n ** 2
    spread = np.linalg.pinv(covs.sum(axis=0) / n, hermitian=True)
    chi2 = float(sum((m - mean) @ spread @ (m - mean) for m in means))
    return mean, cov, chi2, (n - 1) * size


def ravg(reslist, weighted=None):
    """A running average of ``reslist`` as ``vegas.ravg``: iteration estimates
    (numbers with errors, arrays or dicts of them, e.g. ``result.itn_results[5:]``) or
    a result, averaged by ``vegas``'s rule, weighted by the inverse covariances
    (``weighted=True``, default unless ``reslist`` is an unweighted average) or not
    (``False``: unbiased, for iterations of a map no longer adapting).  Returns a
    :class:`RAvg`, :class:`RAvgArray` or :class:`RAvgDict` (``summary()``,
    ``extend()``, ``chi2``, ``Q``...)."""
    if weighted is None:
        weighted = getattr(reslist, "weighted", None) is not False
    items = list(reslist.itn_results if isinstance(reslist, _Averaged) else reslist)
    if not items:
        raise ValueError("ravg needs at least one result, got none")
    estimates = [_flat_estimate(item) for item in items]
    layout = Layout(estimates[0][0], correlate=False)
    if any(len(means) != layout.size for _, means, _ in estimates):
        raise ValueError("ravg: every result must have the shape of the first")
    records = [{"iteration": i + 1, "value": means, "error": np.sqrt(np.diag(cov)),
                "covariance": cov, "events": 0, "state_id": None}
               for i, (_, means, cov) in enumerate(estimates)]
    cls = {"scalar": RAvg, "array": RAvgArray, "dict": RAvgDict}[layout.kind]
    out = cls(None, layout, records, vegas_average(records, weighted))
    out.weighted = bool(weighted)
    return out


def average_iterations(records):
    """``(flat mean, cov, chi2, dof)`` of iteration records with covariances
    (:func:`flowsim.core.covariance.combine_correlated`)."""
    return covariance.combine_correlated(
        np.array([np.atleast_1d(r["value"]) for r in records]),
        np.array([r["covariance"] for r in records]),
        [r["events"] for r in records], [r.get("state_id") for r in records])


class RAvgArray(np.ndarray, _Averaged):
    """Result of an array integrand: an object array of correlated numbers
    (``gvar.gvar(mean, cov)``), plus ``chi2``, ``dof``, ``Q``, ``itn_results``
    (correlated too) and :meth:`summary`; ``.mean``/``.sdev`` arrays, ``.cov``
    the covariance ``[size, size]`` of the flattened array (``.flat_mean``)."""

    def __new__(cls, result, layout, records, combined=None):
        combined = average_iterations(records) if combined is None else combined
        obj = np.asarray(layout.build(combined[0], cov=combined[1])).view(cls)
        obj._set(result, layout, records, combined)
        shape = layout.parts[0][1]
        obj.mean = combined[0].reshape(shape)
        obj.sdev = np.sqrt(np.maximum(np.diag(combined[1]), 0.0)).reshape(shape)
        return obj


class RAvgDict(_DictBase, _Averaged):
    """Result of a dict integrand: a dict (``gvar.BufferDict`` with ``gvar``) of
    correlated numbers/arrays, plus ``chi2``, ``dof``, ``Q``, ``itn_results``
    and :meth:`summary`; ``.cov`` the covariance ``[size, size]`` of the values
    flattened in key order (``.flat_mean``)."""

    def __init__(self, result, layout, records, combined=None):
        combined = average_iterations(records) if combined is None else combined
        super().__init__(layout.build(combined[0], cov=combined[1]))
        self._set(result, layout, records, combined)


class Integrator:
    """Adaptive multidimensional integrator over a box, as ``vegas.Integrator``.

    Parameters
    ----------
    map : sequence of (low, high), AdaptiveMap or Integrator
        The integration limits, one pair per dimension; or a map
        (:class:`AdaptiveMap`, or another integrator's) to start from, whose
        region gives the limits.  An entry may be
        ``-np.inf`` / ``np.inf`` (``vegas`` refuses them with an
        ``OverflowError``): flowsim then integrates after the change of
        variables of :mod:`flowsim.physics.unbounded`.
    nitn : int
        Iterations per call (default 10).
    neval : int or None
        Integrand evaluations per iteration (default None: 1000, or with
        ``nstrat`` ``2 prod(nstrat) / (1 - neval_frac)``); flowsim runs exactly
        this many.
    alpha : float
        Damping of the map's adaptation (default 0.5, as ``vegas``); 0 stops it.
    beta : float
        Damping of the stratification's adaptation in [0, 1] (default 0.75:
        VEGAS+); 0 gives every hypercube the same events (classic VEGAS).
    adapt : bool
        Adapt the map (and allocation) between iterations (default True).
    seed : int or None
        flowsim's random seed (default: drawn from the OS).  Each call uses
        the next stream of the seed, so two calls never reuse numbers.
    backend : None or str
        flowsim backend (``"threads"``, ``"mpi"``...); default one device.
    correlate_integrals : bool
        Estimate the correlations between the outputs of an array or dict
        integrand (default True, as ``vegas``): ``size (size - 1) / 2`` more
        columns (a size of 30 ran about 6 times slower than 10); False sets
        them to zero.
    nstrat : sequence of int or None
        Strata per axis (default None: chosen from ``neval`` by ``vegas``'s
        rule, :func:`vegas_nstrat`).  As in ``vegas``, giving ``nstrat``
        without ``neval`` sets ``neval`` to ``2 prod(nstrat) / (1 -
        neval_frac)``, and a smaller ``neval`` given with it is refused; a later
        change of ``neval`` or ``neval_frac`` alone chooses the strata anew.
    neval_frac : float
        Fraction of the events VEGAS+ allocates by the hypercubes' variances
        (default 0.75, in [0, 1)); the rest go evenly, at least 2 per
        hypercube.  Not used with ``beta=0``.
    uniform_nstrat : bool
        The same strata on every axis (default False: ``vegas`` gives some axes
        one more).
    max_nhcube : ignored
        Accepted and ignored, as ``vegas`` 6 does (a legacy setting).
    uses_jac : bool
        Call the integrand as ``f(x, jac=jac)`` with the running map's
        ``jac[d] = dx[d]/dy[d]`` (``[n, dim]`` for a batch integrand, ``[dim,
        n]`` for an rbatch one), as ``vegas`` does (default False); needs finite
        limits and backend None or ``"threads"``.
    adapt_to_errors : bool
        The map follows the hypercubes' variances instead of ``|f|``, as
        ``vegas`` does (default False): the strata, the same on every axis, are
        the map's increments and every hypercube gets the same events
        (:mod:`flowsim.compat.vegas_errors`).
    rtol, atol : float
        Stop a call's iterations early, as ``vegas`` does: after each iteration
        (and its adaptation), once the average so far has every ``sdev < atol +
        rtol |mean|`` (default 0 and 0: never; ``vegas`` warns this is unreliable
        in early iterations, and so it is here).
    **flowsim_kwargs
        Passed to the flowsim Flow (``events_limit``, ``dtype``...).

    The map (and VEGAS+ allocation) adapted by a call is kept for the next
    call, as in ``vegas``: train with one call, then measure with another.
    Its increments per axis are fixed at the first call: ``neval // 50``
    between 2 and 200.  Keyword arguments of a call change these settings
    for that call and the following ones.
    """

    def __init__(self, map, nitn=10, neval=None, alpha=0.5, beta=0.75, adapt=True, seed=None,
                 backend=None, correlate_integrals=True, rtol=0.0, atol=0.0, nstrat=None,
                 neval_frac=0.75, uniform_nstrat=False, max_nhcube=None, uses_jac=False,
                 adapt_to_errors=False, **flowsim_kwargs):
        self.limits, self._initial_map = _limits_and_map(map)
        self.dim = self.limits.shape[0]
        self.settings = {"nitn": nitn, "neval": 1000, "alpha": alpha, "beta": beta,
                         "adapt": adapt, "correlate_integrals": bool(correlate_integrals),
                         "rtol": 0.0, "atol": 0.0, "nstrat": None, "neval_frac": 0.75,
                         "uniform_nstrat": bool(uniform_nstrat), "max_nhcube": max_nhcube,
                         "uses_jac": False, "adapt_to_errors": False}
        self._n_bins = None
        given = {k: v for k, v in (("nstrat", nstrat), ("neval", neval)) if v is not None}
        self.seed = seed
        self.backend = backend
        self.set(rtol=rtol, atol=atol, neval_frac=neval_frac, uses_jac=uses_jac,
                 adapt_to_errors=adapt_to_errors, **given)
        self.flowsim_kwargs = flowsim_kwargs
        self._calls = 0
        self._base = None
        self.simulation = None

    def set(self, **settings):
        """Change settings of the constructor (``nitn``, ``neval``, ``alpha``,
        ``beta``, ``adapt``, ``nstrat``...) for this call and the next ones; returns
        the old values, so ``integ.set(**old)`` restores them (as ``vegas``)."""
        unknown = set(settings) - set(self.settings)
        if unknown:
            raise TypeError(f"unknown vegas setting(s) {sorted(unknown)}; flowsim's "
                            f"compat.vegas supports {sorted(self.settings)}")
        for key in ("rtol", "atol"):
            if key in settings:
                settings[key] = _tolerance(key, settings[key])
        if "neval_frac" in settings:
            settings["neval_frac"] = _fraction(settings["neval_frac"])
        for key in ("uses_jac", "adapt_to_errors"):
            if key in settings:
                settings[key] = _flag(key, settings[key])
        if settings.get("uses_jac"):
            _check_uses_jac(self.limits, self.backend)
        if "nstrat" in settings and settings["nstrat"] is not None:
            settings.update(self._explicit_strata(settings))
        elif "neval" in settings or "neval_frac" in settings:
            settings["nstrat"] = None
        old = {k: self.settings[k] for k in settings}
        self.settings.update(settings)
        return old

    def _explicit_strata(self, settings):
        """``nstrat`` and ``neval`` of a call that gives ``nstrat`` (vegas's rule)."""
        from flowsim.algorithms.strata import check_nstrat
        nstrat = check_nstrat(settings["nstrat"], self.dim)
        beta = settings.get("beta", self.settings["beta"])
        errors = settings.get("adapt_to_errors", self.settings["adapt_to_errors"])
        frac = (0.0 if beta == 0 or errors
                else settings.get("neval_frac", self.settings["neval_frac"]))
        needed = 2.0 * float(np.prod(nstrat)) / (1.0 - frac)
        if "neval" not in settings:
            return {"nstrat": nstrat, "neval": int(needed)}
        if settings["neval"] < needed:
            raise ValueError(f"neval too small: {settings['neval']} < {needed} (2 "
                             f"prod(nstrat) / (1 - neval_frac)); raise neval or lower nstrat")
        return {"nstrat": nstrat}

    def strata(self):
        """The strata per axis the next call uses (``vegas``'s ``nstrat``)."""
        s = self.settings
        if s["nstrat"] is not None:
            return np.asarray(s["nstrat"], dtype=np.int64)
        frac = 0.0 if s["beta"] == 0 else s["neval_frac"]
        return vegas_nstrat(self.dim, s["neval"], frac, s["uniform_nstrat"])

    @property
    def map(self):
        """The map of the next call, an :class:`AdaptiveMap` (a copy: changing it does
        not change the integrator's; ``Integrator(m)`` starts one from it)."""
        if self.simulation is not None:
            return AdaptiveMap(self.simulation.grid.tolist())
        if self._initial_map is not None:
            return AdaptiveMap(self._initial_map)
        return AdaptiveMap(self.limits.tolist())

    def _new_simulation(self, integrand):
        from flowsim.algorithms.vegas import Vegas
        from flowsim.algorithms.vegasplus import VegasPlus
        from flowsim.physics.unbounded import is_unbounded, unbounded

        from .vegas_errors import ErrorAdaptedVegas, error_strata
        s = self.settings
        if self._n_bins is None:
            self._n_bins = (int(self._initial_map.ninc[0]) if self._initial_map is not None
                            else int(min(200, max(2, s["neval"] // 50))))
        n_bins = self._n_bins
        limits = self.limits
        if is_unbounded(limits):
            integrand, limits = unbounded(integrand, limits)
        nstrat = self.strata()
        if s["adapt_to_errors"]:
            nstrat = error_strata(self.dim, int(s["neval"]), s["nstrat"])
            sim = ErrorAdaptedVegas(integrand, self.dim, limits=limits, nstrat=nstrat,
                                    alpha=s["alpha"])
        elif s["beta"] > 0:
            sim = VegasPlus(integrand, self.dim, limits=limits, n_bins=n_bins,
                            alpha=s["alpha"], beta=s["beta"], nstrat=nstrat,
                            neval_frac=s["neval_frac"])
        else:
            sim = Vegas(integrand, self.dim, limits=limits, n_bins=n_bins, alpha=s["alpha"],
                        nstrat=nstrat)
        self._carry_map(sim, nstrat)
        sim.freeze(not s["adapt"])
        return sim

    def _carry_map(self, sim, nstrat):
        """Start ``sim`` from the last call's map and allocation (or the map given to
        the constructor), re-divided if its increments differ (same density)."""
        old = self.simulation
        if old is not None:
            if (type(old) is type(sim) and old.n_bins == sim.n_bins
                    and np.array_equal(old.nstrat, nstrat)):
                sim.set_state(old.get_state())
            else:
                sim.set_edges(rebinned(old.edges, sim.n_bins))
        elif self._initial_map is not None:
            m = self._initial_map
            low, width = self.limits[:, 0:1], self.limits[:, 1:] - self.limits[:, 0:1]
            sim.set_edges(rebinned((m.grid[:, :m.ninc[0] + 1] - low) / width, sim.n_bins))

    # -- the points of an iteration ---------------------------------------------------
    def random_batch(self, yield_hcube=False, yield_y=False):
        """Batches of one iteration's points and weights from the current map and
        stratification, as ``vegas``'s ``random_batch``: ``x [n, dim], wgt [n]``
        (``x, y, wgt, hcube`` with both flags, ``x, wgt, hcube`` or ``x, y, wgt``
        with one), ``sum(wgt * f(x))`` over the batches an estimate of the integral.
        A VEGAS+ allocation is the one of the last call (even before the first);
        each iteration's random numbers come from the next stream of ``seed``."""
        sim = self._sampler()
        rng = np.random.default_rng(self._next_seed())
        counts = _counts(sim, int(self.settings["neval"]))
        ends = np.cumsum(counts)
        stride = np.concatenate([[1], np.cumprod(sim.nstrat)[:-1]])
        first = 0
        while first < len(counts):
            last = max(first + 1, int(np.searchsorted(ends, ends[first] - counts[first]
                                                      + BATCH_EVENTS, side="right")))
            hcube = np.repeat(np.arange(first, last), counts[first:last])
            y = ((hcube[:, None] // stride) % sim.nstrat + rng.random((hcube.size, self.dim))
                 ) / sim.nstrat
            x, wgt = self._points(sim, y)
            wgt = wgt / (len(counts) * counts[hcube])
            yield (x,) + ((y,) if yield_y else ()) + (wgt,) + ((hcube,) if yield_hcube else ())
            first = last

    def random(self, yield_hcube=False, yield_y=False):
        """One iteration's points one at a time: :meth:`random_batch`'s tuples per point."""
        for batch in self.random_batch(yield_hcube, yield_y):
            yield from zip(*batch)

    def sample(self, nbatch=None, mode="rbatch"):
        """``(wgt, x)``: whole iterations of points (at least ``nbatch``, default one
        iteration), ``wgt`` divided by their number; ``x`` ``[dim, n]`` with
        ``mode="rbatch"`` (default), ``[n, dim]`` with ``"lbatch"``."""
        if mode not in ("rbatch", "lbatch"):
            raise ValueError(f"mode must be 'rbatch' or 'lbatch', got {mode!r}")
        neval = int(self.settings["neval"])
        repeats = max(1, -(-int(nbatch or neval) // neval))
        xs, ws = [], []
        for _ in range(repeats):
            for x, w in self.random_batch():
                xs.append(x)
                ws.append(w)
        x = np.concatenate(xs)
        return np.concatenate(ws) / repeats, (x.T if mode == "rbatch" else x)

    def _sampler(self):
        """The simulation whose map the points come from (a uniform one before any call)."""
        if self.simulation is None:
            self.simulation = self._new_simulation(_unit)
        return self.simulation

    def _jacobians(self, x):
        """``dx[d]/dy[d]`` ``[n, dim]`` of the running map at ``x`` (``uses_jac``)."""
        return axis_jacobians(self.simulation.grid, x)

    def _next_seed(self):
        import secrets
        if self._base is None:
            self._base = secrets.randbits(62) if self.seed is None else int(self.seed)
        seed = derived_seed(self._base, self._calls)
        self._calls += 1
        return seed

    def _points(self, sim, y):
        """``(x, weight)`` of ``y`` points: the map and, on infinite axes, the change of
        variables (a point where it is not finite weighs 0)."""
        t_points, jacobian = sim.map(y)
        unbounded = getattr(sim.integrand, "x_and_jacobian", None)
        if unbounded is None:
            return t_points, jacobian
        x, dxdt = (a.numpy() for a in unbounded(tf().constant(t_points)))
        weight = jacobian * dxdt
        return x, np.where(np.isfinite(weight) & np.isfinite(x).all(axis=1), weight, 0.0)

    def _kernel_key(self, fcn, layout):
        """What the compiled kernel of a call depends on: the integrand (as
        :func:`flowsim.physics.integrands.function_key` keys it), its output layout, the
        box, the simulation's class, increments and strata, the events per iteration
        and the settings other than ``nitn``, ``rtol`` and ``atol`` (the map, the seed
        and whether it trains are the kernel's arguments).  Calls with equal keys, of
        this integrator or another, share one traced kernel.  None (a kernel per call)
        with ``uses_jac`` (the integrand reads this integrator's map) or an integrand
        that cannot be keyed."""
        from flowsim.physics.integrands import function_key
        if self.settings["uses_jac"]:
            return None
        sim = self.simulation
        settings = tuple(sorted((k, v if not isinstance(v, np.ndarray) else v.tobytes())
                                for k, v in self.settings.items()
                                if k not in ("nitn", "rtol", "atol", "adapt")))
        key = ("compat.vegas", type(sim).__qualname__, function_key(fcn),
               getattr(fcn, "fcntype", "scalar"), layout.kind, tuple(layout.parts),
               layout.columns, self.limits.tobytes(), sim.n_bins,
               tuple(np.asarray(sim.nstrat).tolist()), settings,
               tuple(sorted(self.flowsim_kwargs.items())))
        try:
            hash(key)
        except TypeError:
            return None
        return key

    def __call__(self, fcn, **settings):
        """Integrate ``fcn``: a :class:`RAvg`, :class:`RAvgArray` or :class:`RAvgDict`."""
        from flowsim.distribution.registry import flow_class
        from flowsim.physics.numpy_integrands import NumpyIntegrand
        self.set(**settings)
        if not callable(fcn):
            raise TypeError(f"fcn must be callable, got {fcn!r}")
        uses_jac = self.settings["uses_jac"]
        layout = Layout(_sample(fcn, self.limits, uses_jac), self.settings["correlate_integrals"])
        batch = BatchFunction(fcn, layout, self._jacobians if uses_jac else None)
        integrand = NumpyIntegrand(batch, components=0 if layout.kind == "scalar"
                                   else layout.columns)
        self.simulation = self._new_simulation(integrand)
        key = self._kernel_key(fcn, layout)
        if key is not None:
            from flowsim.core.stable_names import content_key
            self.simulation.__dict__.update(_trace_token=key, _trace_names=content_key(key))
        self._batch = batch
        seed = self._next_seed()
        opts = {"quiet": True, "jit_compile": False, **self.flowsim_kwargs}
        flow = flow_class(self.backend)(self.simulation, n_events=int(self.settings["neval"]),
                                        seed=seed, **opts)
        rtol, atol = self.settings["rtol"], self.settings["atol"]
        if not (rtol or atol):
            return _averaged(_quietly(flow, int(self.settings["nitn"])), layout)
        return _until_converged(flow, int(self.settings["nitn"]), layout, rtol, atol)


#: The smallest variance an iteration's estimate counts with (``vegas``'s ``TINY``).
TINY = 1e-308
#: Points per batch of :meth:`Integrator.random_batch` (whole hypercubes, at least one).
BATCH_EVENTS = 50_000


def _unit(x):
    """The integrand of a map sampled before any call (never evaluated)."""
    return x[:, 0]


def _counts(sim, neval):
    """Events of each hypercube in an iteration of ``neval`` events."""
    from flowsim.algorithms.strata import uniform_counts
    sim.prepare(neval)
    counts = getattr(sim, "counts", None)
    return np.asarray(counts if counts is not None else uniform_counts(neval, sim.n_hcubes))


def vegas_nstrat(dim, neval, neval_frac=0.75, uniform=False):
    """``vegas``'s strata per axis for ``neval`` events: ``ns`` per axis with ``ns**dim``
    near ``(1 - neval_frac) neval / 2`` (two events per hypercube from the evenly spread
    share), and ``d`` axes with one more (none if ``uniform``)."""
    budget = (1.0 - neval_frac) * neval / 2.0
    ns = max(1, int(abs(budget) ** (1.0 / dim)))
    d = 0 if uniform or budget <= 1 else int(
        (math.log(budget) - dim * math.log(ns)) / math.log(1 + 1.0 / ns))
    nstrat = np.full(dim, ns, dtype=np.int64)
    nstrat[:d] += 1
    return nstrat


def _tolerance(key, value):
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not value >= 0:
        raise ValueError(f"{key} must be a number >= 0, got {value!r}")
    return float(value)


def _flag(key, value):
    if not isinstance(value, (bool, np.bool_)):
        raise ValueError(f"{key} must be True or False, got {value!r}")
    return bool(value)


def _check_uses_jac(limits, backend):
    """``uses_jac=True`` needs finite limits and the map in this process."""
    if not np.all(np.isfinite(limits)):
        raise ValueError("uses_jac=True needs finite limits: on an infinite axis flowsim "
                         "integrates after a change of variables whose Jacobian is not "
                         "vegas's; pass finite limits or uses_jac=False")
    if backend not in (None, "threads"):
        raise ValueError(f"uses_jac=True runs on backend None or 'threads' (the map's "
                         f"Jacobian is read in this process), got backend={backend!r}; "
                         f"pass backend=None or uses_jac=False")


def _limits_and_map(map):
    """``(limits [dim, 2], AdaptiveMap or None)`` of an Integrator's ``map`` argument:
    limits, an :class:`AdaptiveMap` or another :class:`Integrator` (its map)."""
    if isinstance(map, Integrator):
        map = map.map
    if isinstance(map, AdaptiveMap):
        initial = AdaptiveMap(map)
        if np.any(initial.ninc != initial.ninc[0]):
            initial.adapt(ninc=int(initial.ninc.max()))
        limits = np.array(initial.region(), dtype=np.float64)
        return limits, (initial if initial.ninc[0] >= 2 else None)
    limits = np.array(map, dtype=np.float64)
    if limits.ndim != 2 or limits.shape[1] != 2:
        raise ValueError(f"map must be a list of (low, high) pairs, one per dimension, "
                         f"an AdaptiveMap or an Integrator, got shape {list(limits.shape)}")
    return limits, None


def _fraction(value):
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value < 1:
        raise ValueError(f"neval_frac must be a number in [0, 1), got {value!r}")
    return float(value)


def _quietly(flow, n_iter):
    """``flow.run(n_iter)`` without flowsim's warning on iterations that disagree:
    ``vegas`` issues none (its ``Q`` says it), and a call that trains a map is often
    thrown away.  The result's ``Q`` and :meth:`summary` carry the same test."""
    import warnings

    from flowsim.core.log import FlowsimWarning
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FlowsimWarning)
        return flow.run(n_iter)


def _averaged(result, layout):
    """The :class:`RAvg`, :class:`RAvgArray` or :class:`RAvgDict` of a run."""
    if layout.kind == "scalar":
        return RAvg(result, layout, result.iterations)
    result = _without_pair_sums(result, layout)
    cls = RAvgArray if layout.kind == "array" else RAvgDict
    return cls(result, layout, result.iterations)


def _until_converged(flow, nitn, layout, rtol, atol):
    """Up to ``nitn`` iterations, one at a time (the bits of ``flow.run(nitn)``'s
    first ones), stopping after the first whose average is converged (vegas's rule)."""
    from flowsim.core.result import Result
    records, timeline, wall = [], [], 0.0
    for _ in range(nitn):
        part = _quietly(flow, 1)
        records += part.iterations
        timeline += part.timeline
        wall += part.wall_time
        out = _averaged(Result(records, wall, timeline, part.meta), layout)
        if out.converged(rtol, atol):
            break
    return out


def _without_pair_sums(result, layout):
    """``result`` of the outputs and their pair sums -> the outputs' result, each
    iteration record with its ``covariance`` (diagonal without the pair sums)."""
    from flowsim.core.result import Result
    size = layout.size
    records = []
    for rec in result.iterations:
        v, e = np.atleast_1d(rec["value"]), np.atleast_1d(rec["error"])
        cov = (covariance.covariance_from_pair_errors(e, size) if layout.columns > size
               else np.diag(e[:size] ** 2))
        records.append({**rec, "value": v[:size], "error": e[:size], "covariance": cov})
    return Result(records, result.wall_time, result.timeline, result.meta, skip=result.skip)

