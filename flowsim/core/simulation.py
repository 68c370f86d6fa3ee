"""The Simulation contract: *what* one block of work computes.

Usage: subclass :class:`Simulation` (or use :class:`flowsim.Plain`,
:class:`flowsim.Vegas`, ...) and hand an instance to a :class:`flowsim.Flow`::

    sim = flowsim.Vegas(f, dim=4)
    first = flowsim.Flow(sim, 10**6, seed=1).run(5)    # meta["start_state"] == "fresh"
    again = flowsim.Flow(sim, 10**6, seed=1).run(5)    # "adapted: 5 iterations"

A Simulation owns its dimension, the compiled kernel over one block of events,
the float64 accumulators it needs, how iteration totals become an estimate, and
how its state adapts between iterations.  It never knows where blocks run: the
Flow (:mod:`flowsim.core.flow`) decides that.  Instances are plain Python + numpy
state and must pickle (module-level integrands pickle with ``pickle``; lambdas
need ``cloudpickle``, which Spark uses); compiled TensorFlow functions are
built lazily, per process and per device, and never pickled.

**A run starts from the state its Simulation holds.**  A Simulation adapts in
place (the VEGAS map), so running it again -- on the same Flow, a new Flow or
any backend -- continues from the adapted map, as Lepage's ``vegas`` keeps
adapting across calls of one ``Integrator``.  Same seed and events give the same
bits only from the same starting state: build a new Simulation (or
``copy.deepcopy`` one before its first run) to start afresh.
``Result.meta["start_state"]`` says ``"fresh"`` or ``"adapted: N iterations"``
(:meth:`Simulation.count_adaptation`), and
``Result.meta["start_state_id"]`` is the digest (:func:`state_digest`) of the
state the run's first iteration used.
"""
import hashlib

import numpy as np

from . import rng


class Simulation:
    """What one block of work computes; subclass it for a computation of your own.

    Usage (an antithetic-variates estimate of ``f`` over ``[0, 1]^dim``)::

        import flowsim
        from flowsim.core.lazy_tf import tf

        class Antithetic(flowsim.Simulation):
            def __init__(self, f, dim):
                self.f, self.dim = f, dim          # attributes: what config() records

            def accumulators(self):
                return {"sum": (), "sum2": ()}     # float64 partial sums of a block

            def block(self, u, valid, state):      # u: [size, dim] uniforms
                t = tf()
                y = t.cast(0.5 * (self.f(u) + self.f(1 - u)), t.float64)
                y = t.where(valid, y, t.zeros_like(y))     # padding adds nothing
                return {"sum": t.reduce_sum(y), "sum2": t.reduce_sum(y * y)}

            def estimate(self, totals, n_events):
                mean = totals["sum"] / n_events
                var = totals["sum2"] / n_events - mean ** 2
                return {"value": mean, "error": (max(var, 0.0) / n_events) ** 0.5}

        result = flowsim.Flow(Antithetic(f, 4), n_events=10**6, seed=1).run(3)

    Required: :attr:`dim`, :meth:`accumulators`, :meth:`block`, :meth:`estimate`.
    Optional: :meth:`state` / :meth:`adapt` / :meth:`prepare` for an adaptive
    state (with :meth:`get_state` / :meth:`set_state` for checkpoints),
    :meth:`inputs` for other random numbers, :meth:`block_parts` for a faster
    tiled kernel, :meth:`combine` for gathering instead of adding,
    :meth:`config` and :meth:`trace_key` when the defaults do not fit.

    The engine calls, per iteration::

        state = sim.state()                    # numpy arrays, fixed shapes
        # on some device, per block b of the iteration:
        x = sim.inputs(key_b, first_event_b, block_size, dtype, state)
        acc_b = sim.block(x, valid_b, state)   # {name: float64 tensor}
        # on the driver, rows added in block order:
        est = sim.estimate(totals, n_events)
        sim.adapt(totals, n_events)            # between iterations

    Caveats: an instance must pickle (for process, MPI and Spark backends) and
    compiles its kernel lazily in each process; it adapts in place, so a second
    run starts from the adapted state (module doc above); its default
    :meth:`config` fingerprints its attributes, so keep caches that change while
    running out of them (or override :meth:`config`).
    """

    #: Number of uniform random numbers per event.
    dim = None

    #: Whether the kernel traces :meth:`inputs` and :meth:`block` with AutoGraph, so
    #: Python ``if``/``for``/``while`` on tensors there become graph control flow (as
    #: in any ``tf.function``).  Converting costs CPU time in every new process,
    #: seconds for a kernel as large as VegasPlus's.  A simulation whose own
    #: code needs no conversion sets False and passes the user's functions it calls
    #: through :func:`flowsim.core.integrand.autograph`, as :class:`flowsim.Plain`
    #: and flowsim's subclasses of it do; a subclass defined outside flowsim that
    #: overrides methods without setting this in its own body is converted.
    autograph = True

    #: What a result's warning advises when its kept iterations disagree beyond their
    #: errors (:attr:`flowsim.Result.warnings`).
    inconsistency_advice = "use more events per iteration or skip more warm-up iterations"

    # -- what the kernel needs -------------------------------------------------
    def accumulators(self):
        """``{name: shape}`` of the per-block float64 partial sums.  Required."""
        raise NotImplementedError

    def trace_key(self):
        """A hashable value naming this simulation's compiled kernel
        (:func:`flowsim.core.kernel.compiled` adds the state's shapes, the kernel
        spec and the device).

        Default: a token drawn once per object and kept by pickling, so that a
        copy sent to a worker process reuses the kernel that worker compiled
        for an earlier task.  It assumes what the constructor fixed (the
        integrand, dimension, limits, histograms) does not change afterwards:
        build a new simulation rather than editing one that has run.
        Simulations whose kernel depends only on hashable settings may return
        those (:class:`flowsim.finance.pricing.PathSimulation` does): equal
        settings then share one compilation.
        """
        token = self.__dict__.get("_trace_token")
        if token is None:
            import uuid

            from .stable_names import content_key
            self.__dict__.setdefault("_trace_names", content_key(self))
            token = self.__dict__.setdefault("_trace_token", uuid.uuid4().hex)
        return token

    def state(self):
        """``{name: numpy array}`` passed to every block of an iteration.

        Shapes must stay fixed across iterations (values may change): the
        compiled function is traced once and takes these as arguments.
        """
        return {}

    def inputs(self, key, first_event, size, dtype, state):
        """Inputs of one block: ``size`` events of ``dim`` uniforms in [0, 1).

        ``key`` is the block's int64[2] key ``[seed, (iteration << 32) + block]``;
        :func:`flowsim.core.rng.uniform` turns it into numbers with the Flow's
        generator (``rng=``).  Use its ``stream=`` for more numbers per event.
        """
        del first_event, state
        return rng.uniform(key, [size, self.dim], dtype)

    def block(self, inputs, valid, state):
        """Accumulators of one block: ``{name: float64 tensor of its shape}``.

        ``valid`` is a boolean ``[size]`` mask; events where it is False are
        padding of the last block and must contribute nothing.  Optionally
        return ``"nonfinite"`` (scalar count of dropped NaN/Inf events) so the
        Flow can raise or report them.  Required.
        """
        raise NotImplementedError

    def block_parts(self):
        """``(per_event, reduce)`` with ``block(u, valid, state) == reduce(per_event(u,
        state), valid, state)``, or None (default).  Optional.

        ``per_event(u, state)`` maps the block's uniforms ``u`` ``[n, dim]`` (the
        default :meth:`inputs`) to one float64 tensor ``[n, ...]``, event by event;
        ``reduce(values, valid, state)`` turns the block's ``[size, ...]`` values
        into the accumulators.  With these the XLA kernel draws and evaluates a
        block in tiles of a few thousand events that stay in cache
        (:func:`flowsim.core.kernel.tile_events`), and reduces once per block:
        the same numbers and the same sums in less time (the last bits can differ
        from the whole-block kernel's where XLA contracts a multiply-add
        differently: ``docs/performance.rst``).
        """
        return None

    # -- what the driver does with totals --------------------------------------
    def estimate(self, totals, n_events):
        """Turn one iteration's totals into ``{"value": arr, "error": arr, ...}``.

        ``error`` is the standard deviation of this iteration's ``value``.
        Extra keys (histograms, ...) are kept in the iteration record.
        """
        raise NotImplementedError

    def adapt(self, totals, n_events):
        """Update adaptive state between iterations (the VEGAS grid).  Optional."""

    def prepare(self, n_events):
        """Called by the Flow before it takes :meth:`state` for an iteration of
        ``n_events`` events, so a layout that depends on the iteration size (the
        VEGAS+ hypercube allocation) can be fitted.  Must be deterministic.  Optional."""

    def combine(self, rows, n_events):
        """Totals of an iteration from its ``[n_blocks, width]`` rows.

        Default: add in block order.  Sweeps override this to gather.
        """
        from .blocks import reduce_rows
        return reduce_rows(rows)

    def config(self):
        """JSON-able description of what defines this simulation, compared when a
        run resumes from a checkpoint: a checkpoint written by another simulation
        is refused, naming what differs.

        Default: the class and its code (:func:`flowsim.core.fingerprint.digest`),
        ``dim``, and under ``"attributes"`` every instance attribute
        (:func:`attribute_config`): numbers and strings as they are, a function or
        other callable by its code and its values at fixed points of ``[0, 1]^dim``
        (as :class:`flowsim.Plain` records its integrand), a nested Simulation by
        its own ``config()``, arrays, containers and other objects by a digest of
        their content.  Left out: the adaptive state (the names :meth:`get_state`
        returns, which the checkpoint holds), the trace token, and private
        attributes (``_name``) that are None (caches not filled yet).

        Override it (calling ``super().config()`` and deleting or adding entries)
        when an attribute is a cache that changes while the simulation runs, or
        when something that defines the simulation lives outside its attributes.
        """
        from .fingerprint import digest
        return {"class": type(self).__qualname__, "dim": self.dim,
                "kernel": {"code": digest(type(self))},
                "attributes": attribute_config(self)}

    def get_state(self):
        """Adaptive state to checkpoint (numpy arrays).  Default: :meth:`state`."""
        return {k: np.array(v) for k, v in self.state().items()}

    def set_state(self, state):
        """Restore what :meth:`get_state` returned.  Adaptive subclasses override."""
        if state:
            raise NotImplementedError(
                f"{type(self).__name__} has adaptive state but no set_state")

    # -- which state a run starts from ----------------------------------------
    def count_adaptation(self, state):
        """Called by the Flow for each iteration with the :meth:`state` it uses:
        ``{"adapted_before": n}``, the number of times this simulation's state had
        changed between the iterations it ran before (0: a fresh simulation, or
        one whose state never changes).  Kept in the iteration record;
        ``Result.meta["start_state"]`` reads the first one."""
        digest = state_digest(state)
        count = self.__dict__.get("_adapted_iterations", 0)
        last = self.__dict__.get("_last_state_digest")
        if last is not None and last != digest:
            count += 1
        self.__dict__.update(_adapted_iterations=count, _last_state_digest=digest)
        return {"adapted_before": count}

    def restore_adaptations(self, records):
        """After :meth:`set_state` from a checkpoint: the count its ``records`` reached."""
        last = records[-1] if records else {}
        if "adapted_before" in last and "state_id" in last:
            self.__dict__.update(_adapted_iterations=last["adapted_before"],
                                 _last_state_digest=last["state_id"])

    # -- pickling: the trace token travels with the copy ---------------------
    def __getstate__(self):
        return dict(self.__dict__)

    def __setstate__(self, d):
        self.__dict__.update(d)


def attribute_config(sim):
    """``{name: entry}`` of the attributes that define ``sim`` (see :meth:`Simulation.config`)."""
    from .fingerprint import check_points, digest, fingerprint
    skip = {"dim", "_trace_token", "_trace_names", "_adapted_iterations", "_last_state_digest",
            "integrand_state", *sim.get_state()}
    dim = sim.dim
    points = (check_points([[0.0, 1.0]] * dim)
              if isinstance(dim, (int, np.integer)) and not isinstance(dim, bool) and dim > 0
              else None)
    out = {}
    for name, value in sorted(vars(sim).items()):
        if name in skip or (name.startswith("_") and value is None):
            continue
        if isinstance(value, np.generic):
            value = value.item()
        if value is None or isinstance(value, (bool, int, float, str)):
            out[name] = value
        elif isinstance(value, Simulation):
            out[name] = value.config()
        elif callable(value) and not isinstance(value, type):
            out[name] = fingerprint(value, points)
        else:
            out[name] = {"content": digest(value)}
    return out


def state_digest(state):
    """A short hash of state arrays ``{name: array}`` (names, dtypes, shapes, bytes):
    equal states have equal digests; iterations of equal ones pool."""
    digest = hashlib.sha256()
    for name in sorted(state):
        a = np.ascontiguousarray(state[name])
        digest.update(f"{name}:{a.dtype.str}:{a.shape};".encode())
        digest.update(a.tobytes())
    return digest.hexdigest()[:16]


def full_state(sim):
    """``sim.state()`` and the arrays its integrand reads as tensors
    (``sim.integrand_state``, e.g. :func:`flowsim.integrate`'s ``params``): what each
    block of an iteration gets."""
    extra = sim.__dict__.get("integrand_state")
    return {**sim.state(), **extra} if extra else sim.state()
