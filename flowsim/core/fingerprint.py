"""Fingerprints: how a checkpoint recognises the simulation that wrote it.

A function (integrand, observable, sweep kernel) is recorded as
``{"name", "code", "values"}``:

- ``name``: module and qualified name;
- ``code``: a digest of its code -- bytecode, constants, the global names it
  uses, defaults, and closure values that are numbers, strings or arrays
  (nested functions, ``functools.partial``, ``tf.function`` and callable
  objects are followed; other objects count by their type only, never by
  ``repr``, which may hold a memory address);
- ``values``: a digest of its values at :data:`N_POINTS` fixed points of the
  box, computed eagerly with TensorFlow on CPU:0 in float64 (float32 if only
  that works), rounded to 10 significant digits (so CPUs that round an
  ``exp`` differently in the last bit agree, unless a value sits on a
  rounding boundary).  ``None`` when the function
  cannot be called eagerly on a ``[n, dim]`` tensor: the fingerprint is then
  its name and code only.

:func:`digest` also covers data (sweep parameters) and classes (path models
and payoffs: the code of their methods).  Digests are SHA-256 of deterministic
bytes: every process (MPI ranks, the Spark driver) computes the same ones for
the same simulation, and two separately built but identical simulations match.
Bytecode differs between Python versions, so a checkpoint resumes under the
Python version that wrote it.  A fingerprint evaluates each function once,
eagerly, on the :data:`N_POINTS` check points: small next to tracing and
compiling the kernel.
"""
import functools
import hashlib
import types

import numpy as np

from .._moved import first_names

#: Check points per fingerprint.
N_POINTS = 32
_DEPTH = 4          # how deep closures, attributes and containers are followed
_PLAIN = (type(None), bool, int, float, complex, str, bytes, np.ndarray, np.generic)
#: flowsim modules that moved in the package layout, hashed under their first names so
#: that fingerprints, hence checkpoints written before a move, stay the same.
_FORMER = first_names()


def check_points(limits, n=N_POINTS):
    """``n`` fixed points ``[n, dim]`` (float64) spread over the box ``limits``.

    SplitMix64 of a counter: integer arithmetic, the same bits everywhere.
    """
    limits = np.asarray(limits, dtype=np.float64)
    z = np.arange(1, n * len(limits) + 1, dtype=np.uint64) * np.uint64(0x9E3779B97F4A7C15)
    for shift, mult in ((30, 0xBF58476D1CE4E5B9), (27, 0x94D049BB133111EB)):
        z = (z ^ (z >> np.uint64(shift))) * np.uint64(mult)
    z ^= z >> np.uint64(31)
    u = (z >> np.uint64(11)).astype(np.float64).reshape(n, len(limits)) * 2.0 ** -53
    return limits[:, 0] + u * (limits[:, 1] - limits[:, 0])


def fingerprint(fn, points=None):
    """``{"name", "code", "values"}`` of callable ``fn`` (``values`` only with ``points``)."""
    target = _unwrap(fn)
    if isinstance(target, functools.partial):
        target = _unwrap(target.func)
    module = getattr(target, "__module__", None) or type(target).__module__
    module = _FORMER.get(module, module)
    qualname = getattr(target, "__qualname__", None) or type(target).__qualname__
    return {"name": f"{module}.{qualname}", "code": digest(fn),
            "values": None if points is None else values_digest(fn, points)}


def values_digest(fn, points):
    """Digest of ``fn(points)`` evaluated eagerly on CPU:0, or None if that fails.

    A ``tf.function`` is called through its Python function: no trace, no XLA
    compilation for the check points' shape.
    """
    from .lazy_tf import tf
    t = tf()
    fn = _unwrap(fn)
    for dtype in (np.float64, np.float32):
        try:
            with t.device("CPU:0"):
                out = np.asarray(fn(t.constant(points.astype(dtype))), dtype=np.float64)
        except Exception:  # noqa: BLE001 - not eager-callable: name and code only
            continue
        text = " ".join(np.char.mod("%.9e", out.ravel() + 0.0))     # + 0.0: -0 is 0
        return _hex(f"{dtype.__name__}{list(out.shape)}:{text}".encode())
    return None


def digest(obj):
    """Digest of a function's or class's code (see the module doc), or of data:
    numbers, strings, arrays (dtype, shape, bytes) and containers of them."""
    h = hashlib.sha256()
    _feed(h, obj, 0, set())
    return h.hexdigest()[:16]


def _hex(data):
    return hashlib.sha256(data).hexdigest()[:16]


def _unwrap(fn):
    return getattr(fn, "python_function", fn)       # tf.function -> the Python function


def _put(h, *parts):
    h.update(("\x1f".join(map(str, parts)) + "\x1e").encode())


def _feed(h, obj, depth, seen):
    if isinstance(obj, (np.ndarray, np.generic)):
        _feed_array(h, obj, depth, seen)
        return
    if isinstance(obj, _PLAIN):
        _put(h, type(obj).__name__, repr(obj))
        return
    if depth > _DEPTH or id(obj) in seen:
        _put(h, "...", type(obj).__qualname__)
        return
    seen.add(id(obj))
    obj = _unwrap(obj)
    feeder = next((f for kinds, f in _FEEDERS if isinstance(obj, kinds)), _feed_instance)
    feeder(h, obj, depth, seen)


def _feed_array(h, a, depth, seen):
    a = np.ascontiguousarray(a)
    _put(h, "array", a.dtype.str, a.shape)
    if a.dtype.hasobject:
        for v in a.ravel():
            _feed(h, v, depth + 1, seen)
    else:
        h.update(a.tobytes())


def _feed_code(h, code, depth, seen):
    _put(h, "code", code.co_argcount, code.co_kwonlyargcount, code.co_names)
    h.update(code.co_code)
    for c in code.co_consts:
        _feed(h, c, depth, seen)


def _feed_function(h, fn, depth, seen):
    _put(h, "function", _FORMER.get(fn.__module__, fn.__module__), fn.__qualname__)
    for part in (fn.__code__, fn.__defaults__, fn.__kwdefaults__):
        _feed(h, part, depth, seen)
    for cell in fn.__closure__ or ():
        try:
            contents = cell.cell_contents
        except ValueError:                      # an empty cell
            _put(h, "empty")
            continue
        _feed(h, contents, depth + 1, seen)


def _feed_method(h, method, depth, seen):
    _feed(h, method.__func__, depth, seen)
    _feed(h, method.__self__, depth + 1, seen)


def _feed_partial(h, p, depth, seen):
    _put(h, "partial")
    for part in (p.func, p.args, p.keywords):
        _feed(h, part, depth, seen)


def _feed_module(h, module, depth, seen):
    _put(h, "module", _FORMER.get(module.__name__, module.__name__))


def _feed_class(h, klass, depth, seen):
    _put(h, "class", _FORMER.get(klass.__module__, klass.__module__), klass.__qualname__)
    for base in klass.__mro__[:-1]:              # not object
        for name, attr in sorted(vars(base).items()):
            attr = getattr(attr, "__func__", attr)      # staticmethod, classmethod
            attr = getattr(attr, "fget", attr)          # property
            if isinstance(attr, types.FunctionType):
                _put(h, name)
                _feed(h, attr, depth + 1, seen)


def _feed_sequence(h, seq, depth, seen):
    _put(h, type(seq).__name__, len(seq))
    for v in seq:
        _feed(h, v, depth + 1, seen)


def _feed_mapping(h, obj, depth, seen):
    items = obj.items() if isinstance(obj, dict) else ((v, None) for v in obj)
    _put(h, type(obj).__name__, len(obj))
    for k, v in sorted(items, key=lambda kv: repr(kv[0])):
        _feed(h, k, depth + 1, seen)
        _feed(h, v, depth + 1, seen)


def _feed_instance(h, obj, depth, seen):
    if hasattr(obj, "numpy") and hasattr(obj, "dtype"):      # eager tensor or variable
        try:
            value = np.asarray(obj.numpy())
        except Exception:  # noqa: BLE001 - a symbolic tensor: its type only
            _put(h, "tensor", type(obj).__qualname__)
            return
        _feed(h, value, depth, seen)
        return
    # A callable object or other instance: its class's code and its public
    # plain attributes (caches and compiled functions are private or not plain).
    _feed(h, type(obj), depth, seen)
    for name, v in sorted(getattr(obj, "__dict__", {}).items()):
        if not name.startswith("_") and (isinstance(v, (_PLAIN, tuple, list)) or callable(v)):
            _put(h, name)
            _feed(h, v, depth + 1, seen)


#: How each kind of object is fed to the hash, first match wins; anything else is
#: an instance (:func:`_feed_instance`).
_FEEDERS = ((types.CodeType, _feed_code), (types.FunctionType, _feed_function),
            (types.MethodType, _feed_method), (functools.partial, _feed_partial),
            (types.ModuleType, _feed_module), (type, _feed_class),
            ((tuple, list), _feed_sequence), ((dict, set, frozenset), _feed_mapping))


def box_functions(integrand, limits, histograms):
    """Config entries of an integrand over the box ``limits`` and its histograms."""
    points = check_points(limits)
    return {"limits": np.asarray(limits).tolist(), "integrand": fingerprint(integrand, points),
            "histograms": {h.name: {"bins": h.bins, "range": list(h.range),
                                    "component": h.component,
                                    "observable": fingerprint(h.observable, points)}
                           for h in histograms}}
