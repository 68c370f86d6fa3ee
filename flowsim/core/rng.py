"""Counter-based random numbers for a block: a pure function of its key.

Three generators, chosen per Flow with ``rng=``:

``"splitmix"`` (default)
    Output ``i`` of a block is ``mix64(k + (i + 1) * golden)``, the SplitMix64
    finaliser (Steele, Lea & Flood 2014; passes BigCrush) applied to a Weyl
    counter, with ``k`` a 64-bit hash of (seed, iteration, block, stream).  It is
    written in TensorFlow integer ops (uint64 multiply, xor, shift), so it runs on
    any device, fuses with the integrand under XLA (``jit_compile=True``;
    much faster than TensorFlow's Philox kernel on CPU: figures in
    ``docs/performance.rst``), and, being integer arithmetic, gives the same
    numbers with or without XLA and on CPU or GPU.

    Its blocks' streams can overlap.  All blocks share one increment
    ``golden``, so two block-streams of ``L`` numbers share numbers when their
    hashed keys ``k`` differ by ``m * golden`` (mod 2**64) for some ``|m| <
    L``; for ``S`` block-streams (blocks x iterations x streams) that happens
    with probability about ``S**2 * L / 2**64``.  With blocks of 65,536
    events of 8 dimensions (``L`` = 2**19): about 3*10^-7 for 2*10^6 events x
    100 iterations, 7*10^-4 for one iteration of 10^10 events, 6 % for 10^9
    events x 100 iterations and near-certain (1 - e^-6.6) for 10^10 events x
    100 iterations.  Use ``"philox4x32"`` for runs of that size.
``"philox4x32"``
    Philox4x32-10 (Salmon et al. 2011, Random123), written in TensorFlow
    integer ops like SplitMix64 (exact, so the same numbers on any device
    and with or without XLA).  Its 128-bit counter holds the position
    explicitly: ``(j, block, iteration, stream)`` as four 32-bit words, and
    its 64-bit key is the seed; distinct (seed, iteration, block, stream,
    position) are distinct Philox inputs, so streams never overlap.  Slower
    than SplitMix64 on CPU (ten rounds of 32x32-bit multiplies per two
    doubles; figures in ``docs/performance.rst``), hence not the default.
    A request of ``n`` numbers uses counters ``j = 0 .. G-1``, ``G =
    ceil(n/2)``: number ``i < G`` is made of words (0, 1) of counter ``i``,
    number ``G + i`` of words (2, 3); a 64-bit value is ``w_a * 2**32 +
    w_b``.  Limits: ``G < 2**32`` and ``stream < 2**32``.
``"philox"``
    TensorFlow's own ``tf.random.stateless_uniform(alg="philox")`` with the
    block key as seed, kept so that runs and checkpoints made with it resume
    unchanged.  Slower on CPU, and XLA's kernel draws another stream than
    TensorFlow's: the numbers depend on ``jit_compile``.

Doubles carry 53 random bits, floats 24, from each number's 64-bit value
``z``: ``u = (z >> 11) * 2**-53`` or ``(z >> 40) * 2**-24``, in [0, 1).
"""
import contextlib
import threading

import numpy as np

from .lazy_tf import tf

ALGORITHMS = ("splitmix", "philox", "philox4x32")
_GOLDEN = 0x9E3779B97F4A7C15
_M1 = 0xBF58476D1CE4E5B9
_M2 = 0x94D049BB133111EB
_local = threading.local()
#: Philox4x32 multipliers and Weyl key increments (Random123).
PHILOX_M = (0xD2511F53, 0xCD9E8D57)
PHILOX_W = (0x9E3779B9, 0xBB67AE85)
_MASK32 = 0xFFFFFFFF


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


def philox4x32(counter, key, rounds=10):
    """Philox4x32-``rounds`` of ``counter`` (four uint64 tensors holding 32-bit
    words, broadcastable) under ``key`` (two such words): the four output words.

    The 32x32-bit products are exact uint64 multiplies, split into high and
    low halves.
    """
    t = tf()
    b = t.bitwise
    c0, c1, c2, c3 = counter
    k0, k1 = key
    mask, shift = _u64(_MASK32), _u64(32)
    for r in range(rounds):
        if r:
            k0 = (k0 + _u64(PHILOX_W[0])) & mask
            k1 = (k1 + _u64(PHILOX_W[1])) & mask
        p0 = c0 * _u64(PHILOX_M[0])
        p1 = c2 * _u64(PHILOX_M[1])
        c0, c1, c2, c3 = (b.bitwise_xor(b.bitwise_xor(b.right_shift(p1, shift), c1), k0),
                          p1 & mask,
                          b.bitwise_xor(b.bitwise_xor(b.right_shift(p0, shift), c3), k1),
                          p0 & mask)
    return c0, c1, c2, c3


def _philox_uniform(key, n, dtype, stream, step=None):
    """``n`` uniforms of block ``key`` from Philox4x32-10 (layout in the module doc).
    ``step`` (loop steps of a kernel) is hashed into the 64-bit key: each step is
    another Philox permutation of the same counters."""
    t = tf()
    if not 0 <= stream < 2**32:
        raise ValueError(f"philox4x32: stream must be in [0, 2**32), got {stream}")
    groups = (n + 1) // 2
    if groups >= 2**32:
        raise ValueError(f"philox4x32: at most 2**33 numbers per block and stream, got {n}")
    k = t.bitcast(t.cast(key, t.int64), t.uint64)
    mask, shift = _u64(_MASK32), _u64(32)
    counter = (t.cast(t.range(groups, dtype=t.int64), t.uint64),
               k[1] & mask,                         # block
               t.bitwise.right_shift(k[1], shift),  # iteration
               _u64(stream))
    seed = k[0]
    if step is not None:
        seed = t.bitwise.bitwise_xor(seed, _mix64(t.bitcast(t.cast(step, t.int64), t.uint64)
                                                   + _u64(_GOLDEN)))
    x = philox4x32(counter, (seed & mask, t.bitwise.right_shift(seed, shift)))
    if dtype == t.float64:
        def to_float(hi, lo):       # (hi * 2**32 + lo) >> 11, times 2**-53: exact
            return (t.cast(hi, t.float64) * 2.0 ** -32
                    + t.cast(t.bitwise.right_shift(lo, _u64(11)), t.float64) * 2.0 ** -53)
    elif dtype == t.float32:
        def to_float(hi, lo):
            del lo
            return t.cast(t.bitwise.right_shift(hi, _u64(8)), t.float32) * (2.0 ** -24)
    else:
        raise ValueError(f"uniform: dtype must be float64 or float32, got {dtype.name}")
    return t.concat([to_float(x[0], x[1]), to_float(x[2], x[3])], axis=0)[:n]


def uniform(key, shape, dtype, stream=0, algorithm=None, step=None):
    """Uniforms in [0, 1) of ``shape`` from a block ``key`` (int64[2]).

    ``stream`` picks an independent sub-stream of the same block (e.g. a second
    set of numbers per event).  ``algorithm`` defaults to the Flow's ``rng``.
    ``step`` (a Python or scalar tensor integer >= 0, e.g. the counter of a
    ``tf.while_loop``) picks the ``step``-th batch of ``shape`` numbers of the
    stream, for kernels that draw afresh at every step of a loop: with
    ``"splitmix"`` the counters ``step * size + 1 ..``; with ``"philox"`` the key
    folded with ``step`` (``tf.random.experimental.stateless_fold_in``); with
    ``"philox4x32"`` the 64-bit key xor a SplitMix64 hash of ``step``.
    ``step=None`` (default) is batch 0 of ``"splitmix"`` and the unfolded key of
    the Philox generators.
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
    if algorithm not in ("splitmix", "philox4x32"):
        raise ValueError(f"rng must be one of {ALGORITHMS}, got {algorithm!r}")
    n = 1
    for s in shape:
        n *= int(s)
    if algorithm == "philox4x32":
        return t.reshape(_philox_uniform(key, n, dtype, int(stream), step), shape)
    k = _stream_key(key, stream)
    # Counters 1..n (batch ``step``: step*n + 1..).  Written with a runtime offset (the
    # key, added and taken away again: the same integers), XLA computes them in
    # registers instead of folding them into a stored array that every pass reads.
    if step is None:
        counter = (t.cast(t.range(n, dtype=t.int64), t.uint64) + (k + _u64(1))) - k
    else:
        counter = t.cast(t.range(n, dtype=t.int64) + (t.cast(step, t.int64) * n + 1), t.uint64)
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
    if algorithm == "philox4x32":
        return uniform(key, shape, dtype, stream=stream, algorithm=algorithm, step=step)
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
