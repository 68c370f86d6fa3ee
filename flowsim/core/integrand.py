"""Integration domains and checked integrand evaluation, shared by algorithms."""
import contextlib
import contextvars
import importlib.util
import inspect
import os
import threading
import weakref

import numpy as np

from . import tf_private
from .blocks import check_count
from .lazy_tf import tf


def limits_array(dim, limits):
    """``limits`` (None: the unit cube; one ``(low, high)`` pair for every axis; or
    ``[dim, 2]``) as a float64 ``[dim, 2]`` array, its shape checked (not its values)."""
    if limits is None:
        return np.tile([0.0, 1.0], (dim, 1))
    try:
        lim = np.array(limits, dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"limits must be numbers shaped [dim, 2], got {limits!r}") from exc
    if lim.shape == (2,):
        lim = np.tile(lim, (dim, 1))
    if lim.shape != (dim, 2):
        raise ValueError(f"limits must have shape [dim, 2] = [{dim}, 2] "
                         f"(or be one (low, high) pair), got shape {list(lim.shape)}")
    return lim


class Domain:
    """A box ``limits`` = ``[[low_1, high_1], ..., [low_dim, high_dim]]``.

    ``limits=None`` is the unit cube.  A single ``(low, high)`` pair applies to
    every dimension.
    """

    def __init__(self, dim, limits=None):
        self.dim = check_count("dim", dim)
        lim = limits_array(self.dim, limits)
        if not np.all(np.isfinite(lim)):
            raise ValueError(f"limits must be finite, got {lim.tolist()}; for infinite limits "
                             f"call flowsim.integrate (it changes variables) or wrap the "
                             f"integrand: f, limits = flowsim.unbounded(f, limits)")
        bad = np.flatnonzero(lim[:, 0] >= lim[:, 1])
        if bad.size:
            d = int(bad[0])
            raise ValueError(f"limits: low must be < high in every dimension; dimension {d} "
                             f"has low={float(lim[d, 0])!r} >= high={float(lim[d, 1])!r}")
        self.limits = lim
        self.low = lim[:, 0]
        self.width = lim[:, 1] - lim[:, 0]
        self.volume = float(np.prod(self.width))

    def map(self, u):
        """Unit-cube points ``u`` ``[n, dim]`` -> points of the box (same dtype)."""
        t = tf()
        return (t.constant(self.low, u.dtype) + u * t.constant(self.width, u.dtype))


def probe_components(integrand, dim, name="integrand"):
    """Trace ``integrand`` symbolically once: 0 for ``[n]`` output, k for ``[n, k]``.

    An exception the integrand raises itself (``ValueError("...")``, ``1 / 0``...)
    keeps its type and message; only a failure inside TensorFlow (``x.numpy()``,
    mixed dtypes...) becomes a TypeError saying the integrand is not traceable.
    An integrand with a ``probe_key`` attribute (what its trace depends on) is
    probed once per key and dimension.
    """
    if not callable(integrand):
        raise TypeError(f"{name} must be callable, got {integrand!r}")
    key = getattr(integrand, "probe_key", None)
    if key is not None and (key, dim) in _PROBED:
        return _PROBED[(key, dim)]
    k = _probe(integrand, dim, name)
    if key is not None:
        with _PROBED_LOCK:
            _PROBED[(key, dim)] = k
            while len(_PROBED) > 256:
                del _PROBED[next(iter(_PROBED))]
    return k


#: ``(integrand.probe_key, dim)`` -> components, for integrands that carry a key of what
#: their trace depends on (:class:`flowsim.physics.integrands.ParamIntegrand`).
_PROBED = {}
_PROBED_LOCK = threading.Lock()


def _probe(integrand, dim, name):
    t = tf()
    first = None
    for dtype in (t.float64, t.float32):     # a float32-only integrand is fine in float32 Flows
        spec = t.TensorSpec([None, dim], dtype)
        try:
            out = _plain_trace(integrand, spec, outputs=True)
            if out is None:     # converted as the kernel converts it, which then reuses it
                ctx = _enabled_context()
                fn = t.function(integrand if ctx is None else _CONTEXT[1](integrand, ctx),
                                autograph=ctx is None)
                out = fn.get_concrete_function(spec).structured_outputs
        except Exception as exc:  # noqa: BLE001 - reported below with the float64 attempt
            first = first or exc
            continue
        return _components(out, dim, name, dtype)
    own = user_error(first)
    if own is not None:
        own.add_note(f"(raised by the {name} {_qualname(integrand)} while flowsim traced it "
                     f"on x of shape [n, {dim}])")
        raise own
    raise TypeError(f"{name} must be TensorFlow-traceable on x of shape [n, {dim}]: "
                    f"tracing it failed with {type(first).__name__}: {first}") from first


def _qualname(f):
    return getattr(f, "__qualname__", None) or repr(f)


def user_error(exc):
    """The exception user code raised, if ``exc`` (maybe re-wrapped by AutoGraph) came
    from outside TensorFlow; None for TensorFlow's own errors (tracing problems)."""
    # AutoGraph re-raises a copy ("in user code: ...", or a StagingError when it cannot
    # copy the type) whose __context__ is the exception it copied.
    while hasattr(exc, "ag_error_metadata") and hasattr(exc.__context__, "ag_error_metadata"):
        exc = exc.__context__
    tb = exc.__traceback__
    while tb is not None and tb.tb_next is not None:
        tb = tb.tb_next
    if tb is None or _TF_DIR is None:
        return None
    return None if os.path.abspath(tb.tb_frame.f_code.co_filename).startswith(_TF_DIR) else exc


def _tf_dir():
    spec = importlib.util.find_spec("tensorflow")
    return os.path.dirname(spec.origin) + os.sep if spec and spec.origin else None


_TF_DIR = _tf_dir()


def _components(out, dim, name, dtype):
    t = tf()
    if not isinstance(out, t.Tensor):
        raise TypeError(f"{name} must return one tensor of shape [n] or [n, k], "
                        f"got {type(out).__name__}")
    if out.shape.rank == 0:
        raise ValueError(f"{name} returns a scalar, expected shape [n]: one value per point "
                         f"of x [n, {dim}] (or [n, k]); for a constant c return "
                         f"c * tf.ones_like(x[:, 0])")
    if out.dtype != dtype:
        raise TypeError(f"{name} must return {dtype.name} values for x of dtype {dtype.name} "
                        f"(expected [n] or [n, k] {dtype.name}), got {out.dtype.name}")
    shape = out.shape
    if shape.rank == 1:
        return 0
    if shape.rank == 2 and shape[1] is not None:
        return int(shape[1])
    raise ValueError(f"{name} must return shape [n] or [n, k] for x of shape [n, {dim}], "
                     f"got {shape}")


def autograph(fn):
    """``fn`` converted by AutoGraph where it needs it, as ``tf.function`` converts
    the functions it calls.

    flowsim traces its own kernel code without AutoGraph (it has no Python
    control flow on tensors, and converting it costs CPU time in every new
    process); the user's functions it calls go
    through this, so an ``if`` or ``for`` on tensors in an integrand still
    becomes graph control flow.

    The returned function, called on a symbolic ``x``, first traces ``fn``
    without AutoGraph, once per function and dtype (:func:`_plain_trace`): a
    function whose trace raises nothing has no Python control flow on tensors
    (TensorFlow refuses ``bool`` and iteration of a symbolic tensor), and
    AutoGraph would build the same operations, so ``fn`` is called as it is,
    without the conversion (AutoGraph's source-to-source conversion cost
    more than the trace).  Otherwise, or when ``fn``'s code names ``print``
    (which AutoGraph turns into a print in the graph), or when the call on
    this ``x`` raises (a branch on its static shape), ``fn`` is converted.  On
    eager tensors ``fn`` runs as it is.  Returns ``fn`` itself when this
    TensorFlow offers no way to convert one function (:func:`autograph_kernel`
    is then True: the whole kernel is converted, as before).
    """
    ctx = _enabled_context()
    if ctx is None:
        return fn
    converted = []

    def call(x, *args, **kwargs):
        if isinstance(x, tf().Tensor) and not tf().executing_eagerly() and (
                _plain_trace(fn, tf().TensorSpec(x.shape, x.dtype)) is not None):
            try:
                return fn(x, *args, **kwargs)
            except Exception:  # noqa: BLE001, S110 - e.g. control flow on this shape only:
                pass           # AutoGraph's conversion runs it, or reports its error
        if not converted:
            converted.append(_CONTEXT[1](fn, ctx))
        return converted[0](x, *args, **kwargs)

    return call


#: Whether a function traces without AutoGraph, per dtype: ``{owner: {(fn, dtype): bool}}``,
#: held weakly by the function (by its object for a bound method).
_PLAIN = weakref.WeakKeyDictionary()
_PLAIN_LOCK = threading.Lock()


def _plain_trace(fn, spec, outputs=False):
    """Whether ``fn`` traces without AutoGraph on ``spec``: None when that trace
    raised (or ``fn``'s code names ``print``), so ``fn`` needs AutoGraph; else
    True, or the trace's outputs if ``outputs``.

    The answer is kept per function and dtype; a function that cannot be held
    weakly (or hashed) is traced again at each question.
    """
    if _enabled_context() is None:
        return None
    owner, sub = (fn.__self__, fn.__func__) if inspect.ismethod(fn) else (fn, None)
    key = (sub, spec.dtype.name)
    try:
        with _PLAIN_LOCK:
            known = _PLAIN.get(owner, {}).get(key)
    except TypeError:           # unhashable, or no weak references to it
        owner = known = None
    if known is False:
        return None
    if known and not outputs:
        return True
    if known is None and _names_print(fn):
        out = None
    else:
        try:
            out = tf().function(fn, autograph=False).get_concrete_function(
                spec).structured_outputs
        except Exception:  # noqa: BLE001 - any failure: AutoGraph decides, and reports it
            out = None
    if owner is not None:
        with _PLAIN_LOCK:
            _PLAIN.setdefault(owner, {})[key] = out is not None
    return out


def _names_print(fn):
    """Whether the code of ``fn`` (or of a function it defines) uses the name ``print``."""
    target = getattr(fn, "__func__", fn)
    code = getattr(target, "__code__", None) or getattr(
        vars(type(target)).get("__call__"), "__code__", None)
    todo = [code] if code is not None else []
    while todo:
        c = todo.pop()
        if "print" in c.co_names:
            return True
        todo.extend(k for k in c.co_consts if inspect.iscode(k))
    return False


def autograph_kernel(simulation):
    """Whether the kernel of ``simulation`` is traced with AutoGraph.

    The most derived class that sets :attr:`~flowsim.Simulation.autograph` in
    its own body decides, unless a class below it, defined outside flowsim,
    overrides methods without setting it: a user's subclass of
    :class:`flowsim.Plain` whose ``block`` branches on tensors in Python is
    converted as before.  Always True when :func:`autograph` cannot convert the
    user's functions alone.
    """
    if _enabled_context() is None:
        return True
    for cls in type(simulation).__mro__:
        if "autograph" in vars(cls):
            return bool(vars(cls)["autograph"])
        own = cls.__module__ == "flowsim" or cls.__module__.startswith("flowsim.")
        if not own and any(callable(v) for k, v in vars(cls).items()
                           if not k.startswith("__")):
            return True
    return True


_CONTEXT = []
#: flowsim modules integrands call that hold no Python control flow on tensors:
#: AutoGraph calls them as they are instead of converting them in every process.
PLAIN_MODULES = ("flowsim.core.lazy_tf", "flowsim.core.fastmath")


def _enabled_context():
    """AutoGraph's "conversion on" context, or None
    (:func:`flowsim.core.tf_private.autograph_context`); looked up after TensorFlow
    loads, when :data:`PLAIN_MODULES` join AutoGraph's list of modules it leaves alone."""
    if not _CONTEXT:
        tf()
        found = tf_private.autograph_context(PLAIN_MODULES)
        _CONTEXT.extend(found or (None,))
    return _CONTEXT[0]


def evaluate(integrand, x, components, name="integrand"):
    """``integrand(x)`` as ``[n, max(components, 1)]``, checked at trace time; the
    integrand is converted by AutoGraph (:func:`autograph`)."""
    t = tf()
    out = autograph(integrand)(x)
    out = t.convert_to_tensor(out)
    k = _components(out, x.shape[1], name, x.dtype)
    if k != components:
        raise ValueError(f"{name} returned {k or 'no'} components at trace time but "
                         f"{components or 'no'} when probed")
    n = x.shape[0]
    if out.shape[0] is not None and n is not None and out.shape[0] != n:
        raise ValueError(f"{name} must return one value per point: expected shape "
                         f"[{n}{', ' + str(k) if k else ''}], got {list(out.shape)}")
    return t.reshape(out, [-1, max(components, 1)])


#: The state arrays of the block being traced, for integrands that read theirs
#: (:func:`block_state`): a parameter passed as a tensor is not a constant of the
#: kernel, so one compiled kernel serves every value.
_BLOCK_STATE = contextvars.ContextVar("flowsim_block_state", default=None)


@contextlib.contextmanager
def block_state(state):
    """While a block is traced (or run eagerly): its ``state`` tensors, which
    :func:`current_block_state` returns."""
    token = _BLOCK_STATE.set(state)
    try:
        yield
    finally:
        _BLOCK_STATE.reset(token)


def current_block_state():
    """The state of the block being traced, or None outside a kernel."""
    return _BLOCK_STATE.get()
