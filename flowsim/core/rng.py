"""Counter-based random numbers for a block: a pure function of its key.

Two generators, chosen per Flow with ``rng=``:

``"splitmix"`` (default)
    Output ``i`` of a block is ``mix64(k + (i + 1) * golden)``, the SplitMix64
    finaliser (Steele, Lea & Flood 2014; passes BigCrush) applied to a Weyl
    counter, with ``k`` a 64-bit hash of (seed, iteration, block, stream).  It is
    written in TensorFlow integer ops (uint64 multiply, xor, shift), so it runs on
    any device, fuses with the integrand under XLA (``jit_compile=True``;
    much faster than TensorFlow's Philox kernel on CPU: figures in
    ``docs/performance.rst``), and, being integer arithmetic, gives the same
    numbers with or without XLA and on CPU or GPU.
``"philox"``
    TensorFlow's own ``tf.random.stateless_uniform(alg="philox")`` with the
    block key as seed: the reference counter-based generator, slower on CPU.

Doubles carry 53 random bits, floats 24: ``u = (z >> 11) * 2**-53`` in [0, 1).
"""
import contextlib
import threading

import numpy as np

from .lazy_tf import tf

ALGORITHMS = ("splitmix", "philox")
_GOLDEN = 0x9E3779B97F4A7C15
_M1 = 0xBF58476D1CE4E5B9
_M2 = 0x94D049BB133111EB
_local = threading.local()


@contextlib.contextmanager
def using(algorithm):
    """Within this block, :func:`uniform` uses ``algorithm`` (set while tracing)."""
    if algorithm not in ALGORITHMS:
        raise ValueError(f"rng must be one of {ALGORITHMS}, got {algorithm!r}")
    old = getattr(_local, "algorithm", None)
    _local.algorithm = algorithm
    try:
        yield
    finally:
        _local.algorithm = old


def current():
    return getattr(_local, "algorithm", None) or "splitmix"


def _u64(value):
    return tf().constant(np.uint64(value), tf().uint64)


def _mix64(z):
    t = tf()
    b = t.bitwise
    z = b.bitwise_xor(z, b.right_shift(z, _u64(30))) * _u64(_M1)
    z = b.bitwise_xor(z, b.right_shift(z, _u64(27))) * _u64(_M2)
    return b.bitwise_xor(z, b.right_shift(z, _u64(31)))


def _stream_key(key, stream):
    """64-bit key of (seed, iteration/block word, stream) -> well mixed."""
    t = tf()
    k = t.bitcast(t.cast(key, t.int64), t.uint64)
    h = _mix64(k[0] + _u64(_GOLDEN))
    h = _mix64(t.bitwise.bitwise_xor(h, k[1]) + _u64(_GOLDEN))
    return _mix64(h + _u64((stream + 1) * _GOLDEN % 2**64))


def uniform(key, shape, dtype, stream=0, algorithm=None, step=None):
    """Uniforms in [0, 1) of ``shape`` from a block ``key`` (int64[2]).

    ``stream`` picks an independent sub-stream of the same block (e.g. a second
    set of numbers per event).  ``algorithm`` defaults to the Flow's ``rng``.
    ``step`` (a Python or scalar tensor integer >= 0, e.g. the counter of a
    ``tf.while_loop``) picks the ``step``-th batch of ``shape`` numbers of the
    stream, for kernels that draw afresh at every step of a loop: with
    ``"splitmix"`` the counters ``step * size + 1 ..``; with ``"philox"`` the key
    folded with ``step`` (``tf.random.experimental.stateless_fold_in``).
    ``step=None`` (default) is batch 0 of ``"splitmix"`` and the unfolded key of
    ``"philox"``.
    """
    t = tf()
    algorithm = algorithm or current()
    dtype = t.as_dtype(dtype)
    if algorithm == "philox":
        key = t.cast(key, t.int64)
        seed = t.stack([key[0] + stream * 0x5851F42D, key[1]])
        if step is not None:
            seed = t.random.experimental.stateless_fold_in(seed, t.cast(step, t.int64))
        return t.random.stateless_uniform(shape, seed=seed, dtype=dtype, alg="philox")
    if algorithm != "splitmix":
        raise ValueError(f"rng must be one of {ALGORITHMS}, got {algorithm!r}")
    n = 1
    for s in shape:
        n *= int(s)
    k = _stream_key(key, stream)
    counter = t.cast(t.range(1, n + 1, dtype=t.int64), t.uint64)
    if step is not None:
        counter = counter + t.cast(t.cast(step, t.int64) * n, t.uint64)
    z = _mix64(k + counter * _u64(_GOLDEN))
    if dtype == t.float64:
        u = t.cast(t.bitwise.right_shift(z, _u64(11)), t.float64) * (2.0 ** -53)
    elif dtype == t.float32:
        u = t.cast(t.bitwise.right_shift(z, _u64(40)), t.float32) * (2.0 ** -24)
    else:
        raise ValueError(f"uniform: dtype must be float64 or float32, got {dtype.name}")
    return t.reshape(u, shape)


def uniform_step(key, step, shape, dtype, stream=0, algorithm=None):
    """Uniforms of ``shape`` for sub-step ``step`` of a block (a loop inside a kernel).

    ``step`` is an integer tensor (the counter of a ``tf.while_loop``); the
    numbers are a pure function of (``key``, ``stream``, ``step``) and differ
    from :func:`uniform`'s.  ``algorithm`` defaults to the Flow's ``rng``.
    """
    t = tf()
    algorithm = algorithm or current()
    dtype = t.as_dtype(dtype)
    step = t.cast(step, t.int64)
    if algorithm == "philox":
        key = t.cast(key, t.int64)
        seed = t.stack([key[0] + stream * 0x5851F42D, key[1]])
        seed = t.random.experimental.stateless_fold_in(seed, step, alg="philox")
        return t.random.stateless_uniform(shape, seed=seed, dtype=dtype, alg="philox")
    if algorithm != "splitmix":
        raise ValueError(f"rng must be one of {ALGORITHMS}, got {algorithm!r}")
    k = t.bitcast(t.cast(key, t.int64), t.uint64)
    h = _mix64(t.bitwise.bitwise_xor(k[1], _mix64(t.bitcast(step, t.uint64) + _u64(_GOLDEN))))
    return uniform(t.stack([t.bitcast(k[0], t.int64), t.bitcast(h, t.int64)]), shape, dtype,
                   stream=stream, algorithm="splitmix")


def uniform_keys(keys, dtype=None):
    """One uniform in [0, 1) per column of ``keys`` (int64 ``[2, n]``): ``[n]``.

    SplitMix64 of each key, whatever the Flow's ``rng``: for per-item streams
    such as (sub-environment seed, episode number).
    """
    t = tf()
    dtype = t.as_dtype(dtype or t.float64)
    z = _mix64(_stream_key(keys, 0) + _u64(_GOLDEN))
    if dtype == t.float64:
        return t.cast(t.bitwise.right_shift(z, _u64(11)), t.float64) * (2.0 ** -53)
    if dtype == t.float32:
        return t.cast(t.bitwise.right_shift(z, _u64(40)), t.float32) * (2.0 ** -24)
    raise ValueError(f"uniform_keys: dtype must be float64 or float32, got {dtype.name}")
