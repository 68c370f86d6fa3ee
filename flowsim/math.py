"""Vectorised elementary functions for integrands (TensorFlow, loaded lazily).

XLA on CPU vectorises float64 ``exp`` but evaluates ``log`` one element at a
time, several times slower (figures in ``docs/performance.rst``).
:func:`log` is built from operations XLA vectorises: the exponent and mantissa
read from the IEEE-754 bits, then a polynomial.  Use it in integrands in place
of ``tf.math.log``; it takes float64 and float32 tensors and handles the whole
range like ``numpy.log``.

    import flowsim.math as fm

    def integrand(x):
        return -fm.log(x[:, 0]) * x[:, 1]
"""
from .core.lazy_tf import tf

__all__ = ["log"]

# fdlibm's e_log.c: ln 2 split so that k * _LN2_HI is exact for |k| < 2**11, and the
# minimax coefficients of R(z) ~ (log((1+s)/(1-s)) - 2s)/s in z = s*s, error below
# 2**-58.45.  fdlibm's notice: Copyright (C) 1993 by Sun Microsystems, Inc. All rights
# reserved.  Developed at SunSoft, a Sun Microsystems, Inc. business.  Permission to
# use, copy, modify, and distribute this software is freely granted, provided that this
# notice is preserved.
_LN2_HI = 6.93147180369123816490e-01
_LN2_LO = 1.90821492927058770002e-10
_LG = (6.666666666666735130e-01, 3.999999999940941908e-01, 2.857142874366239149e-01,
       2.222219843214978396e-01, 1.818357216161805012e-01, 1.531383769920937332e-01,
       1.479819860511658591e-01)


def log(x):
    """Natural logarithm of a float64 or float32 tensor, elementwise, as ``numpy.log``.

    Within 1 ulp of the exact value for every positive finite double
    (subnormals included); ``log(0) = -inf``, ``log(x < 0) = nan``,
    ``log(inf) = inf``, ``log(nan) = nan``.  Tested against numpy to 2 ulp
    (tests/test_math.py).  float32 is computed in float64 and rounded once
    (correctly rounded in the tests); under XLA on CPU that is slower than
    ``tf.math.log``'s float32, which is vectorised but flushes subnormals and,
    without XLA, is up to 3 ulp off.
    Integer arithmetic on the bits plus multiplies, adds and one division;
    XLA may contract a multiply and an add into one FMA, so results with and
    without XLA can differ in the last bit.
    """
    t = tf()
    x = t.convert_to_tensor(x)
    if x.dtype == t.float32:
        # a float32 subnormal is its integer bits times 2**-149: a normal double
        raw = t.bitcast(x, t.int32)
        tiny = (raw > 0) & (raw < 0x00800000)
        x64 = t.where(tiny, t.cast(raw, t.float64) * 2.0 ** -149, t.cast(x, t.float64))
        negative = (raw < 0) & (raw != -2**31)          # below -0.0, subnormals included
        x64 = t.where(negative, t.constant(-1.0, t.float64), x64)
        return t.cast(_log64(x64), t.float32)
    if x.dtype != t.float64:
        raise TypeError(f"flowsim.math.log: x must be float64 or float32, got {x.dtype.name}")
    return _log64(x)


def _i64(value):
    return tf().constant(value, tf().int64)


def _log64(x):
    t = tf()
    b = t.bitwise
    # A subnormal x is its integer bits times 2**-1074: take the log of that integer
    # (exact as a double) and subtract 1074 ln 2.  No float arithmetic touches a
    # subnormal (TensorFlow's CPU kernels flush them to zero).
    raw = t.bitcast(x, t.int64)
    tiny = (raw > 0) & (raw < _i64(0x0010000000000000))
    bits = t.where(tiny, t.bitcast(t.cast(raw, t.float64), t.int64), raw)
    hx = b.bitwise_and(b.right_shift(bits, _i64(32)), _i64(0x7FFFFFFF))
    k = b.right_shift(hx, _i64(20)) - t.where(tiny, _i64(1023 + 1074), _i64(1023))
    hx = b.bitwise_and(hx, _i64(0x000FFFFF))
    # mantissa into [sqrt(2)/2, sqrt(2)): exponent 0x3ff or 0x3fe, k adjusted
    i = b.bitwise_and(hx + _i64(0x95F64), _i64(0x100000))
    k = k + b.right_shift(i, _i64(20))
    high = b.bitwise_or(hx, b.bitwise_xor(i, _i64(0x3FF00000)))
    low = b.bitwise_and(bits, _i64(0xFFFFFFFF))
    m = t.bitcast(b.bitwise_or(b.left_shift(high, _i64(32)), low), t.float64)
    f = m - 1.0
    dk = t.cast(k, t.float64)
    hfsq = 0.5 * f * f
    s = f / (2.0 + f)
    z = s * s
    w = z * z
    t1 = w * (_LG[1] + w * (_LG[3] + w * _LG[5]))
    t2 = z * (_LG[0] + w * (_LG[2] + w * (_LG[4] + w * _LG[6])))
    r = t2 + t1
    y = dk * _LN2_HI - ((hfsq - (s * (hfsq + r) + dk * _LN2_LO)) - f)
    # special values decided on the bits (a subnormal compares equal to 0 on CPU)
    magnitude = b.bitwise_and(raw, _i64(0x7FFFFFFFFFFFFFFF))
    inf_bits = _i64(0x7FF0000000000000)
    inf = t.constant(float("inf"), t.float64)
    special = t.where(magnitude == 0, -inf,
                      t.where(raw == inf_bits, inf, t.constant(float("nan"), t.float64)))
    return t.where((raw > 0) & (raw < inf_bits), y, special)
