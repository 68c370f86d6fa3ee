"""VegasFlow's ``MonteCarloFlow`` on flowsim's engine (``vegasflow.monte_carlo``).

An instance builds a flowsim :class:`~flowsim.Simulation` when the integrand is
compiled and runs it in a :class:`flowsim.Flow` (one device) or a
:class:`flowsim.distribution.threads.ThreadPoolFlow` (several), so a seed
given to :meth:`MonteCarloFlow.set_seed` fixes every bit of every later
``run_integration`` whatever the devices and ``events_limit``.
"""
import contextlib
import copy
import inspect
import logging
import secrets
import threading
import time

import numpy as np

from ...core import rng
from ...core.lazy_tf import logical_devices, tf
from ...core.result import Result, warn_if_inconsistent
from ...physics.numpy_integrands import NumpyIntegrand
from .configflow import DEFAULT_ACTIVE_DEVICES, DTYPE, MAX_EVENTS_LIMIT

logger = logging.getLogger("vegasflow.monte_carlo")


def print_iteration(it, res, error, extra="", threshold=0.1):
    """VegasFlow's one-line report of an iteration."""
    if res < threshold:
        return f"Result for iteration {it}: {res:.3e} +/- {error:.3e}" + extra
    return f"Result for iteration {it}: {res:.4f} +/- {error:.4f}" + extra


def derived_seed(seed, *words):
    """A seed in [0, 2**62) for stream ``words`` of ``seed`` (numpy SeedSequence)."""
    state = np.random.SeedSequence([int(seed), *map(int, words)]).generate_state(1, np.uint64)
    return int(state[0] >> np.uint64(2))


class Integrand:
    """The user's integrand called as flowsim calls integrands, ``f(x)``.

    It passes ``n_dim`` and ``weight`` (the Monte Carlo weight of each event:
    ``sum(f * weight)`` over an iteration is its estimate, as in VegasFlow)
    when the integrand's signature names them.  ``weight`` is 0 for the
    padding events of a block, so histograms the integrand fills count each
    event of the iteration once.
    """

    def __init__(self, function, args, n_dim, weight=None):
        self.function = function
        self.args = tuple(args)
        self.n_dim = n_dim
        self.weight = weight
        self.__name__ = getattr(function, "__name__", "integrand")
        self._local = threading.local()

    @contextlib.contextmanager
    def masked(self, valid):
        """Within: the weights passed are 0 where ``valid`` is False."""
        self._local.valid = valid
        try:
            yield
        finally:
            self._local.valid = None

    def call(self, x, weight=None):
        """The user's function on ``x`` with ``weight`` (computed if None)."""
        kwargs = {}
        if "n_dim" in self.args:
            kwargs["n_dim"] = self.n_dim
        if "weight" in self.args:
            if weight is None:
                weight = self.weight(x)
                valid = getattr(self._local, "valid", None)
                if valid is not None:
                    weight = tf().where(valid, weight, tf().zeros_like(weight))
            kwargs["weight"] = weight
        return self.function(x, **kwargs)

    def __call__(self, x):
        return self.call(x)


class EagerIntegrand(NumpyIntegrand):
    """``function`` run eagerly inside flowsim's kernel (``tf.py_function``): it
    receives eager tensors (``x.numpy()`` works) and returns ``[n]`` or ``[n, k]``
    tensors or arrays, as VegasFlow runs an integrand compiled with
    ``compilable=False`` or under :func:`.configflow.run_eager`.  The kernel then
    runs without XLA."""

    def _probe(self, dim, dtype, kwargs):
        t = tf()
        with t.init_scope():        # eagerly, also while flowsim traces the kernel
            x = t.constant(np.full((2, dim), 0.5, dtype=dtype))
            values = {k: (t.ones(2, x.dtype) if len(getattr(v, "shape", ()) or ()) else v)
                      for k, v in kwargs.items()}
            return self._check(np.asarray(self.function(x, **values)), 2, dim)

    def _outside(self, fn, inputs, dtype):
        return tf().py_function(fn, inputs, dtype)


class MaskedBlock:
    """Mixin for a Simulation whose integrand is an :class:`Integrand` taking
    ``weight``: the block's validity mask reaches the weights."""

    def block(self, u, valid, state):
        with self.integrand.masked(valid):
            return super().block(u, valid, state)


class MonteCarloFlow:
    """Parent of :class:`PlainFlow`, :class:`VegasFlow` and :class:`VegasFlowPlus`.

    Parameters
    ----------
    n_dim : int
        Number of dimensions of the integrand.
    n_events : int
        Events per iteration (settable: ``instance.n_events = 2 * n``).
    events_limit : int
        Most events handed to a device at once (default 10**6).  In flowsim
        it bounds memory only: the result does not depend on it.
    list_devices : list of str or None
        Device types to use (default ``["GPU"]``; ``["GPU", "CPU"]`` adds the
        CPUs).  Several matching devices run an iteration's blocks in a
        thread pool, one worker per device; none found, the default device.
    verbose : bool
        Log each iteration's result (logger ``"vegasflow.monte_carlo"``, level
        INFO), printed as VegasFlow prints it (:mod:`.configflow`).
    xmin, xmax : sequences of n_dim floats or None
        Integration limits (default the unit cube); give both or neither.
    """

    _CAN_RUN_VECTORIAL = False

    def __init__(self, n_dim, n_events, events_limit=MAX_EVENTS_LIMIT,
                 list_devices=DEFAULT_ACTIVE_DEVICES, verbose=True, xmin=None, xmax=None,
                 **kwargs):
        if "simplify_signature" in kwargs:
            logger.warning("simplify_signature is deprecated and will be removed")
        self.n_dim = n_dim
        self._n_events = int(n_events)
        self._events_limit = int(events_limit)
        self._verbose = verbose
        self._history = []
        self._integrand = None
        self._tf_integrand = None
        self._compilation_arguments = None
        self._vectorial = False
        self.simulation = None
        self.event = None
        self.distribute = False
        self._seed = secrets.randbits(62)
        self._flows = 0              # Flows made so far: each gets its own stream
        self._flow = None
        self._samples = 0            # calls of generate_random_array
        self._graph_counter = None   # iterations run by the differentiable run_event
        self._edges_var = None
        self._scale_var = None
        self._jit = True
        self.list_devices = list_devices
        if list_devices:
            kinds = {str(k).upper() for k in list_devices}
            self.devices = {n: True for n in logical_devices() if n.split(":")[0] in kinds}
        else:
            self.devices = None
        self._xmin, self._xdelta, self._xdeltajac = None, None, None
        if xmin is not None or xmax is not None:
            if xmin is None or xmax is None:
                raise ValueError("Both xmin and xmax must be provided if the integration "
                                 "limits are to change")
            if not len(xmin) == len(xmax) == n_dim:
                raise ValueError("The integration limits must be given for all dimensions")
            lo, hi = np.asarray(xmin, np.float64), np.asarray(xmax, np.float64)
            if np.any(hi - lo < 0.0):
                raise ValueError(f"No xmin ({xmin}) can be bigger than xmax ({xmax})")
            self._xmin, self._xdelta = lo, hi - lo
            self._xdeltajac = float(np.prod(self._xdelta))

    # -- what VegasFlow exposes ------------------------------------------------------
    @property
    def n_events(self):
        """Events per iteration; setting it starts a new random stream."""
        return self._n_events

    @n_events.setter
    def n_events(self, val):
        self._n_events = int(val)
        self._flow = None

    @property
    def events_per_run(self):
        """Events per device call (VegasFlow's name for ``min(events_limit, n_events)``)."""
        return min(self._events_limit, self.n_events)

    @events_per_run.setter
    def events_per_run(self, val):
        self._events_limit = int(val)
        self._flow = None

    @property
    def events_limit(self):
        return self._events_limit

    @property
    def history(self):
        """``(result, error, histograms)`` per iteration run so far."""
        return self._history

    @property
    def xjac(self):
        """``1 / n_events``, the weight of an event of the unit cube."""
        return 1.0 / self.n_events

    @property
    def limits(self):
        """``[[xmin, xmax], ...]`` or None (the unit cube)."""
        if self._xmin is None:
            return None
        return np.stack([self._xmin, self._xmin + self._xdelta], axis=1)

    def set_seed(self, seed):
        """Fix the random stream of every later iteration and sample.

        Unlike VegasFlow (which called ``tf.random.set_seed``, so every device
        drew the same numbers), the same seed gives the same bits whatever
        the devices, their number and ``events_limit``.
        """
        self._seed = int(seed)
        self._flows = 0
        self._samples = 0
        self._flow = None

    def set_distribute(self, queue_object):
        """Not provided: raises NotImplementedError naming flowsim's backends.

        VegasFlow sent each device call to a Dask cluster; with flowsim, run
        the integrand through ``flowsim.integrate(..., backend="joblib")``
        inside ``joblib.parallel_config(backend="dask")`` (or ``"mpi"``,
        ``"spark"``): the same seed gives the same bits as on one device.
        """
        raise NotImplementedError(
            "set_distribute (Dask) is not provided by flowsim.compat.vegasflow: use "
            "flowsim.integrate(f, dim, n_events, n_iter, backend='joblib') inside "
            "joblib.parallel_config(backend='dask'), or backend='mpi' or 'spark'")

    def _can_run_vectorial(self, expected_shape=None):
        return self._CAN_RUN_VECTORIAL

    # -- compile -----------------------------------------------------------------------
    def _simulation(self, integrand):
        """The flowsim Simulation of this algorithm for ``integrand`` (subclasses)."""
        raise NotImplementedError

    def compile(self, integrand, compilable=True, signature=None, trace=False, check=True):
        """Prepare ``integrand`` for integration.

        ``integrand(xarr)``, ``integrand(xarr, n_dim=None)``,
        ``integrand(xarr, weight=None)`` or ``integrand(xarr, n_dim=None,
        weight=None)``: ``xarr`` ``[n, n_dim]`` of ``DTYPE``, ``n_dim`` the
        dimension, ``weight`` ``[n]`` the Monte Carlo weight of each event
        (fill histograms with ``f * weight``), returning ``[n]`` or ``[n, k]``.
        With ``compilable=False``, or after ``run_eager(True)``, the integrand
        runs eagerly (``tf.py_function``: eager tensors in, ``x.numpy()`` works;
        slower; no XLA).  An integrand XLA cannot compile (a ``tf.py_function``
        inside) runs without XLA, with a note on the ``flowsim`` logger.  ``signature`` and
        ``trace`` are accepted and ignored: flowsim traces the integrand once
        per shape.  The shape is always checked (``check`` is ignored): a
        wrong one raises ValueError.
        """
        del signature, trace, check
        self._compilation_arguments = (integrand, {"compilable": compilable})
        self._integrand = integrand
        python = getattr(integrand, "python_function", integrand)
        args = [a for a in inspect.getfullargspec(python).args[1:] if a in ("n_dim", "weight")]
        function = integrand
        self._jit = bool(compilable) and not tf().config.functions_run_eagerly()
        if not self._jit:               # eager tensors in, as in VegasFlow: no XLA
            function = EagerIntegrand(integrand, keywords=args)
        self._tf_integrand = Integrand(function, args, self.n_dim, weight=self._weight)
        if "weight" in args:
            self._weight_vars()          # eagerly: the probe below traces the integrand
        self.simulation = self._simulation(self._tf_integrand)
        k = self.simulation.components
        self._vectorial = k > 0
        if self._vectorial and not self._can_run_vectorial((1, k)):
            raise NotImplementedError(f"The {type(self).__name__} algorithm does not support "
                                      f"vectorial integrands")
        self.event = self.run_event
        self._flow = None
        if self._graph_counter is not None:
            self._graph_counter = None
        return self

    def _recompile(self):
        if self._compilation_arguments is None:
            raise RuntimeError("recompile was called without ever having called compile")
        self.compile(self._compilation_arguments[0], **self._compilation_arguments[1])

    def _simulation_class(self, cls):
        """``cls`` with the weights masked if the integrand takes ``weight``."""
        if self._tf_integrand is not None and "weight" in self._tf_integrand.args:
            return type(cls.__name__, (MaskedBlock, cls), {})
        return cls

    # -- the weight passed to integrands -------------------------------------------
    def _edges(self):
        """The map's edges ``[n_dim, bins+1]`` in the unit cube, or None (no map)."""
        return None

    def _weight_vars(self):
        t = tf()
        if self._scale_var is None:
            self._scale_var = t.Variable(0.0, dtype=t.float64, trainable=False)
            edges = self._edges()
            if edges is not None:
                self._edges_var = t.Variable(edges, dtype=t.float64, trainable=False)
        return self._scale_var, self._edges_var

    def _sync(self):
        """Before an iteration: the weights' variables to this iteration's values."""
        uses_weight = self._tf_integrand is not None and "weight" in self._tf_integrand.args
        if not uses_weight and self._scale_var is None:
            return
        scale, edges = self._weight_vars()
        scale.assign((self._xdeltajac or 1.0) / self.n_events)
        if edges is not None:
            edges.assign(self._edges())

    def _weight(self, x):
        """Per-event weight ``J(x) V / n_events`` of points ``x`` of the box."""
        t = tf()
        scale, edges = self._weight_vars()
        x01 = x if self._xmin is None else (x - self._xmin) / self._xdelta
        w = t.ones_like(x[:, 0]) * t.cast(scale, x.dtype)
        if edges is None:
            return w
        e = t.cast(edges, x.dtype)
        bins = e.shape[1] - 1
        inner = e[:, 1:-1]                                        # [dim, bins-1]
        iy = t.reduce_sum(t.cast(x01[:, :, None] >= inner[None], t.int32), axis=2)
        ids = iy + t.range(self.n_dim, dtype=t.int32) * bins
        width = t.reshape(e[:, 1:] - e[:, :-1], [-1])
        return w * t.reduce_prod(t.gather(width, ids) * bins, axis=1)

    # -- running -----------------------------------------------------------------------
    def _make_flow(self):
        from ...core.flow import Flow
        from ...distribution.threads import ThreadPoolFlow
        seed = derived_seed(self._seed, 0, self._flows)
        self._flows += 1
        opts = {"seed": seed, "dtype": DTYPE.name, "quiet": True, "jit_compile": self._jit}
        from ...core.blocks import default_block_size
        opts["events_limit"] = max(self._events_limit, default_block_size(self.n_events))
        names = list(self.devices or ())
        if len(names) > 1:
            return ThreadPoolFlow(self.simulation, self.n_events, devices=names, **opts)
        return Flow(self.simulation, self.n_events, device=names[0] if names else None, **opts)

    def run_integration(self, n_iter, log_time=True, histograms=None):
        """Run ``n_iter`` iterations; return ``(value, error)`` of them combined.

        flowsim combines the iterations (:class:`flowsim.Result`): iterations
        of one state (plain MC, a frozen grid) pooled, an adapting grid's
        averaged with floored weights.  ``histograms``: a tuple of
        ``tf.Variable`` the integrand fills; each is emptied before every
        iteration, kept per iteration in :attr:`history`, and at the end holds
        the iterations' average weighted by ``1 / error**2`` (as VegasFlow).
        """
        if self.simulation is None:
            raise RuntimeError("Compile must be ran before running any iterations")
        if self._flow is None:
            self._flow = self._make_flow()
        start_all = time.perf_counter()
        records, histo = [], []
        for i in range(n_iter):
            start = time.perf_counter()
            for h in histograms or ():
                h.assign(tf().zeros_like(h))
            self._sync()
            rec = self._flow.run(1).iterations[-1]
            records.append(rec)
            if histograms:
                histo.append([h.numpy() for h in histograms])
            self._history.append((rec["value"], rec["error"], copy.deepcopy(histograms)))
            if self._verbose:
                self._log_iteration(i, rec, time.perf_counter() - start if log_time else None)
        self._sync()
        result = Result(records, time.perf_counter() - start_all, meta={
            "simulation": type(self.simulation).__name__, "seed": self._flow.seed},
            inconsistency_advice=self.simulation.inconsistency_advice)
        warn_if_inconsistent(result)
        if histograms:
            w = np.array([1.0 / np.mean(np.atleast_1d(r["error"])) ** 2 for r in records])
            for j, h in enumerate(histograms):
                h.assign(sum(wi * hs[j] for wi, hs in zip(w, histo)) / w.sum())
        if self._verbose:
            self._log_final(result.value, result.error)
        self.result = result
        return result.value, result.error

    def _log_iteration(self, i, rec, seconds):
        """VegasFlow's line(s) for iteration ``i``."""
        res, err = rec["value"], rec["error"]
        took = "" if seconds is None else f"(took {seconds:.5f} s)"
        if self._vectorial:
            lines = [print_iteration(i, r, e, extra=f" [dimension {d}] {took}")
                     for d, (r, e) in enumerate(zip(np.atleast_1d(res), np.atleast_1d(err)))]
            logger.info("\n      ".join(lines))
        else:
            logger.info(print_iteration(i, res, err, extra=took))

    def _log_final(self, value, error):
        """VegasFlow's line(s) for the combined result."""
        if self._vectorial:
            lines = [f"Final results [dim = {d}]: {r:g} +/- {e:g}"
                     for d, (r, e) in enumerate(zip(np.atleast_1d(value), np.atleast_1d(error)))]
            logger.info("\n     ".join(lines))
        else:
            logger.info(f" > Final results: {float(value):g} +/- {float(error):g}")

    # -- sampling ----------------------------------------------------------------------
    def _map(self, y):
        """Unit-cube ``y`` -> ``(x, J)`` (``J`` includes the volume)."""
        x = y if self._xmin is None else self._xmin + y * self._xdelta
        return x, np.full(len(y), self._xdeltajac or 1.0)

    def generate_random_array(self, n_events, *args):
        """``(x, w)``: ``n_events`` points ``[n, n_dim]`` of this algorithm's
        density and their weights ``[n]``, ``w = J(x) V / n_events``, so that
        ``sum(f(x) * w)`` estimates the integral.  The numbers are a function
        of the seed and the call count (:meth:`set_seed`)."""
        del args
        t = tf()
        seed = derived_seed(self._seed, 1, self._samples)
        self._samples += 1
        y = t.random.stateless_uniform([int(n_events), self.n_dim], seed=[seed, 0],
                                       dtype=t.float64, alg="philox").numpy()
        x, jac = self._map(y)
        return t.constant(x, DTYPE), t.constant(jac / n_events, DTYPE)

    # -- differentiable ------------------------------------------------------------------
    def make_differentiable(self):
        """Freeze the grid and return :meth:`run_event`, which computes one
        iteration inside any ``tf.function`` or ``tf.GradientTape``."""
        if self.simulation is None:
            raise RuntimeError("Compile must be ran before make_differentiable")
        t = tf()
        if self._graph_counter is None:
            self._graph_counter = t.Variable(0, dtype=t.int64, trainable=False)
        self._weight_vars()
        self._sync()
        return self.run_event

    def run_event(self, tensorize_events=False, **kwargs):
        """One iteration of ``n_events``, as TensorFlow ops: ``(value, error)``.

        In VegasFlow this returned the raw sums of one device call; here it is
        the estimate of one iteration and its standard error, with the grid
        as it is (frozen by :meth:`make_differentiable`), gradients flowing to
        whatever the integrand depends on.  Each call draws fresh numbers from
        the seed's stream (a counter variable), so it is reproducible.
        """
        del tensorize_events, kwargs
        if self._graph_counter is None:
            self.make_differentiable()
        t = tf()
        step = self._graph_counter.assign_add(1)
        key = t.stack([t.constant(derived_seed(self._seed, 2), t.int64), step])
        n = self.n_events
        y = rng.uniform(key, [n, self.n_dim], DTYPE, algorithm="splitmix")
        x, jac = self._graph_map(y)
        f = self._tf_integrand.call(x, weight=jac / n)
        v = t.cast(f, t.float64) * t.reshape(t.cast(jac, t.float64),
                                             [-1] + [1] * (len(f.shape) - 1))
        value = t.reduce_mean(v, axis=0)
        var = t.reduce_sum(t.square(v - value), axis=0) / (n - 1.0) / n
        return value, t.sqrt(var)

    def _graph_map(self, y):
        """TF version of :meth:`_map`."""
        t = tf()
        jac = t.ones_like(y[:, 0]) * (self._xdeltajac or 1.0)
        if self._xmin is None:
            return y, jac
        return t.constant(self._xmin, y.dtype) + y * t.constant(self._xdelta, y.dtype), jac


def wrapper(integrator_class, integrand, n_dim, n_iter, total_n_events, compilable=True):
    """Integrate ``integrand`` with ``integrator_class``: ``(value, error)``."""
    mc_instance = integrator_class(n_dim, total_n_events)
    mc_instance.compile(integrand, compilable=compilable)
    return mc_instance.run_integration(n_iter)


def sampler(integrator_class, integrand, n_dim, total_n_events, training_steps=5,
            compilable=True, return_class=False):
    """Train ``integrator_class`` on ``integrand`` for ``training_steps``
    iterations and return its ``generate_random_array`` (or the instance)."""
    mc_instance = integrator_class(n_dim, total_n_events, verbose=False)
    mc_instance.compile(integrand, compilable=compilable)
    mc_instance.run_integration(training_steps, log_time=False)
    if return_class:
        return mc_instance
    return mc_instance.generate_random_array
