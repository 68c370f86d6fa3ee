"""What :func:`flowsim.integrate` does with integrands that are not plain real
TF functions: parameters and their gradients, complex values, covariance
between components, numpy functions.

Each is a vector integrand evaluated on the same events as the value:

* ``params={"s": 0.3}``: the integrand is called ``f(x, s=<TF scalar>)`` and
  every event also returns ``df/ds`` (forward-mode autodiff,
  ``tf.autodiff.ForwardAccumulator``), so ``Result.gradient["s"]`` is the
  Monte Carlo estimate of ``dI/ds`` from the same events, and its error the
  standard error of that estimate, computed as the value's is;
* complex output: real and imaginary parts are two real components;
* ``covariance=True``: per-block cross-products (:mod:`flowsim.core.covariance`)
  give ``Result.covariance`` with plain Monte Carlo; with VEGAS and VEGAS+ the
  pair sums ``f_i + f_j`` are further components (:class:`PairSums`), whose
  errors give the covariance;
* ``numpy=True``: :class:`flowsim.physics.numpy_integrands.NumpyIntegrand`.
"""
import functools
import inspect
import numbers

import numpy as np

from ..algorithms.plain import Plain
from ..core import covariance as cov
from ..core.fastmath import is_finite
from ..core.integrand import current_block_state
from ..core.kernel import columns
from ..core.lazy_tf import tf
from ..core.stable_names import content_key


class CovariantPlain(Plain):
    """:class:`flowsim.Plain` that also returns the covariance of the components
    of each iteration's estimate (``record["covariance"]``, ``Result.covariance``).

    Costs ``k * k`` more per-event products for ``k`` components (a matrix
    product per block): use it for tens of components, not thousands.
    """

    def accumulators(self):
        k = max(self.components, 1)
        return {**super().accumulators(), "cross": (k * k,)}

    def reduce(self, f, valid, state, x=None):
        t = tf()
        out = super().reduce(f, valid, state, x)
        keep = t.reduce_all(is_finite(f), axis=1) & valid
        out["cross"] = cov.block_cross(t.where(keep[:, None], f, t.zeros_like(f)), valid)
        return out

    def combine(self, rows, n_events):
        totals = super().combine(rows, n_events)
        cols = columns(self)
        (s0, s1), (x0, x1), (c0, _) = cols["sum"], cols["cross"], cols["count"]
        totals[x0:x1] = cov.pool_cross(rows[:, s0:s1], rows[:, x0:x1], rows[:, c0])
        return totals

    def estimate(self, totals, n_events):
        est = super().estimate(totals, n_events)
        est["covariance"] = cov.covariance_of_mean(totals["cross"], n_events)
        return est

    def config(self):
        return {**super().config(), "covariance": True}


def _as_columns(out):
    return out[:, None] if out.shape.rank == 1 else out


class ComplexParts:
    """A complex integrand as real components: ``[re_0..re_k-1, im_0..im_k-1]``."""

    def __init__(self, function):
        self.function = function
        self.__name__ = getattr(function, "__name__", "integrand")

    def __call__(self, x, **kwargs):
        t = tf()
        out = t.convert_to_tensor(self.function(x, **kwargs))
        parts = [t.cast(t.math.real(out), x.dtype), t.cast(t.math.imag(out), x.dtype)]
        if out.shape.rank == 1:
            return t.stack(parts, axis=1)
        return t.concat(parts, axis=1)


class PairSums:
    """``f``'s ``m`` components followed by ``f_i + f_j`` for every pair ``i < j``.

    The algorithm estimates every component's error as it does the value's
    (stratified, adaptive, any iterations), so ``cov_ij = (e_{i+j}^2 - e_i^2 -
    e_j^2) / 2``: the covariance of any algorithm, at the cost of
    ``m (m - 1) / 2`` more components.
    """

    def __init__(self, function, m):
        self.function, self.m = function, int(m)
        self.__name__ = getattr(function, "__name__", "integrand")

    @staticmethod
    def pairs(m):
        return [(i, j) for i in range(m) for j in range(i + 1, m)]

    def __call__(self, x):
        t = tf()
        out = t.convert_to_tensor(self.function(x))
        cols = [out[:, i] + out[:, j] for i, j in self.pairs(self.m)]
        return t.concat([out, t.stack(cols, axis=1)], axis=1)


def check_params(params):
    """``params`` as ``(names, float values)``, refusing what is not a real number."""
    if not isinstance(params, dict) or not params:
        raise TypeError(f"params must be a non-empty dict {{name: number}}, got {params!r}")
    names, values = [], []
    for name, value in params.items():
        if not isinstance(name, str) or not name.isidentifier():
            raise TypeError(f"params keys must be keyword names (str), got {name!r}")
        if isinstance(value, bool) or not isinstance(value, (numbers.Real, np.floating,
                                                             np.integer)):
            raise TypeError(f"params[{name!r}] must be a real number (it is passed to the "
                            f"integrand as a TF scalar and differentiated), got {value!r}")
        names.append(name)
        values.append(float(value))
    return names, values


class ParamIntegrand:
    """``f(x, **params)`` and its derivatives with respect to each parameter,
    per event: ``[f, df/dp_1, ..., df/dp_P]`` as columns (each ``k`` wide for a
    ``[n, k]`` ``f``)."""

    def __init__(self, function, params):
        self.function = function
        self.names, self.values = check_params(params)
        self.__name__ = getattr(function, "__name__", "integrand")
        #: What its trace depends on (not the values: they are arguments in a kernel).
        self.probe_key = ("params", function_key(function), tuple(self.names))
        try:
            hash(self.probe_key)
        except TypeError:
            self.probe_key = None

    def _call(self, x, theta):
        out = self.function(x, **theta)
        return tf().convert_to_tensor(out)

    def __call__(self, x):
        t = tf()
        given = (current_block_state() or {}).get("params")
        if given is None:               # a probe, an eager call: the values themselves
            theta = {k: t.constant(v, x.dtype) for k, v in zip(self.names, self.values)}
        else:                           # in a kernel: its argument (one kernel, any values)
            theta = {k: t.cast(given[i], x.dtype) for i, k in enumerate(self.names)}
        value = self._call(x, theta)
        if value.dtype.is_complex:
            raise TypeError("params with a complex integrand: gradients of complex "
                            "integrands are not supported; return the real and imaginary "
                            "parts as two components")
        cols = [_as_columns(value)]
        for name in self.names:
            with t.autodiff.ForwardAccumulator(theta[name], t.constant(1.0, x.dtype)) as acc:
                out = self._call(x, theta)
            d = acc.jvp(out)
            if d is None:
                raise ValueError(
                    f"params[{name!r}]: the integrand's value does not depend differentiably "
                    f"on it (TensorFlow finds no derivative: an int cast, a comparison, "
                    f"tf.round or a numpy call in between breaks it); use it in "
                    f"differentiable TF ops, or pass it as a fixed value instead of in params")
            cols.append(_as_columns(t.cast(d, x.dtype)))
        return t.concat(cols, axis=1)


class Plan:
    """How one :func:`flowsim.integrate` call wraps the integrand and its result."""

    def __init__(self, f, algorithm, params=None, numpy=False, covariance=None):
        self.algorithm = algorithm
        self.names = []
        self.complex = False
        self.numpy = bool(numpy)
        self.covariance = covariance
        if numpy:
            from .numpy_integrands import NumpyIntegrand
            if params:
                raise ValueError("params needs a TensorFlow integrand (its derivatives are "
                                 "TF's autodiff); numpy=True integrands have none")
            f = f if isinstance(f, NumpyIntegrand) else NumpyIntegrand(f)
        elif getattr(f, "needs_jit", True) is False:
            self.numpy = True
        self.user_function = f
        self.values = ()
        if params is not None:
            f = ParamIntegrand(f, params)
            self.names, self.values = f.names, f.values
        self.integrand = f

    def simulation(self, cls, dim, limits, options, n_events=None):
        """The Simulation for this plan (a complex integrand found by its probe); with
        ``n_events``, one that shares its compiled kernels with every equal plan's
        (:func:`reuse_key`)."""
        sim = self._simulation(cls, dim, limits, options)
        key = reuse_key(self, cls, dim, limits, options, n_events)
        if key is not None:
            sim.__dict__.update(_trace_token=key, _trace_names=content_key(key))
        if self.names:
            sim.integrand_state = {"params": np.array(self.values, dtype=np.float64)}
        return sim

    def _simulation(self, cls, dim, limits, options):
        sim = self._build(cls, dim, limits, options)
        try:
            k = sim.components
        except TypeError as exc:
            if "complex" not in str(exc) or self.names:
                raise
            self.complex = True
            self.integrand = ComplexParts(self.integrand)
            if cls is not Plain and "train" not in options:
                options = {**options, "train": "norm"}
            sim = self._build(cls, dim, limits, options)
            k = sim.components
        self.k = max(k, 1) // (len(self.names) + 1) // (2 if self.complex else 1)
        self.scalar = k == 0 or k == (len(self.names) + 1) * (2 if self.complex else 1)
        self.pairs = 0
        want = self.covariance if self.covariance is not None else self.complex
        if want and cls is not Plain and max(k, 1) > 1:
            self.pairs = max(k, 1)
            self.integrand = PairSums(self.integrand, self.pairs)
            sim = self._build(cls, dim, limits, options)
        return sim

    def _build(self, cls, dim, limits, options):
        from .unbounded import is_unbounded, unbounded
        want = self.covariance if self.covariance is not None else self.complex
        if want and cls is Plain:
            cls = CovariantPlain
        integrand = self.integrand
        if is_unbounded(limits):
            integrand, limits = unbounded(integrand, limits, dim)
        return cls(integrand, dim, limits=limits, **options)

    def _split_pairs(self, result):
        """Covariance from the pair sums' errors; the pair sums taken off the result."""
        m = self.pairs
        v, e = np.atleast_1d(result.value), np.atleast_1d(result.error)
        c = np.diag(e[:m] ** 2)
        for idx, (i, j) in enumerate(PairSums.pairs(m)):
            c[i, j] = c[j, i] = (e[m + idx] ** 2 - e[i] ** 2 - e[j] ** 2) / 2.0
        result.raw_pairs = (v[m:], e[m:])
        result.value, result.error, result.covariance = v[:m], e[:m], c
        if result.chi2_dof is not None:
            result.chi2_dof = np.atleast_1d(result.chi2_dof)[:m]
        if not self.names and not self.complex:
            result.value = _shape(result.value, m == 1)
            result.error = _shape(result.error, m == 1)

    def finish(self, result):
        """Split the raw components of ``result`` into value, gradient, complex parts."""
        if self.pairs:
            self._split_pairs(result)
        if not self.names and not self.complex:
            return result
        v = np.atleast_1d(result.value)
        e = np.atleast_1d(result.error)
        c = result.covariance
        k = self.k
        width = 2 * k if self.complex else k
        result.raw_value, result.raw_error = v, e
        if self.complex:
            result.value = _shape(v[:k] + 1j * v[k:2 * k], self.scalar)
            result.error = _shape(e[:k] + 1j * e[k:2 * k], self.scalar)
            result.correlation = None
            if c is not None:
                rho = np.array([c[i, k + i] / (e[i] * e[k + i]) for i in range(k)])
                result.correlation = _shape(rho, self.scalar)
        else:
            result.value, result.error = _shape(v[:k], self.scalar), _shape(e[:k], self.scalar)
        for p, name in enumerate(self.names, start=1):
            sl = slice(p * width, (p + 1) * width)
            result.gradient[name] = (_shape(v[sl], self.scalar), _shape(e[sl], self.scalar))
        if c is not None:
            result.raw_covariance = c
            result.covariance = c[:width, :width]
        if result.chi2_dof is not None:
            result.chi2_dof = _shape(np.atleast_1d(result.chi2_dof)[:width], width == 1)
        return result


def _shape(a, scalar):
    a = np.asarray(a)
    return a.reshape(()).item() if scalar and a.size == 1 else a


def _value_key(value):
    """A hashable stand-in for a value a traced function reads: numbers and strings as
    they are, arrays by their bytes, functions by :func:`function_key`, other objects
    by identity."""
    if isinstance(value, np.ndarray):
        return ("array", value.dtype.str, value.shape, value.tobytes())
    if inspect.isfunction(value):
        return function_key(value)
    try:
        hash(value)
    except TypeError:
        return ("id", id(value))
    return value


def function_key(function, depth=0):
    """``function`` and the values it reads when traced: its closure cells and the
    globals its code names, and theirs for the functions among them (three levels)."""
    if isinstance(function, functools.partial):
        return ("partial", function_key(function.func, depth),
                tuple(_value_key(a) for a in function.args),
                tuple(sorted((k, _value_key(v)) for k, v in function.keywords.items())))
    if not inspect.isfunction(function):
        return _object_key(function)
    if depth > 3:
        return function
    cells = []
    for cell in function.__closure__ or ():
        try:
            cells.append(_value_key(cell.cell_contents) if depth < 3 else id(cell))
        except ValueError:                       # an empty cell
            cells.append(None)
    names = function.__code__.co_names
    read = [(n, _value_key(function.__globals__[n]) if not inspect.isfunction(
        function.__globals__[n]) else function_key(function.__globals__[n], depth + 1))
        for n in names if n in function.__globals__
        and not inspect.ismodule(function.__globals__[n])]
    return (function, tuple(cells), tuple(read))


def _object_key(obj):
    """A callable object (or bound method) by its type and what it pickles to, so a
    changed attribute gives another key; an object that does not pickle gives an
    unhashable key (no kernel is shared)."""
    digest = content_key(obj)
    if digest == type(obj).__qualname__:          # it did not pickle
        return ["unshared", id(obj)]
    return ("object", type(obj).__qualname__, digest)


def reuse_key(plan, cls, dim, limits, options, n_events):
    """What determines the kernel of :func:`flowsim.integrate`'s simulation: the user's
    function (the object, the values of its closure and of the globals its code reads,
    and of the functions among them: :func:`function_key`), the parameter names (their
    values are the kernel's arguments), the algorithm and its options, the dimension,
    the limits and the events per iteration (VEGAS+ fixes its hypercubes from them).
    None (a kernel per call) when one of them is not hashable, or without
    ``n_events``."""
    if n_events is None:
        return None
    function = plan.user_function
    key = ("integrate", cls.__qualname__, function_key(function),
           tuple(plan.names), plan.numpy, plan.complex, plan.pairs, plan.covariance, dim,
           None if limits is None else np.asarray(limits, np.float64).tobytes(),
           tuple(sorted(options.items())), n_events)
    try:
        hash(key)
    except TypeError:
        return None
    return key
