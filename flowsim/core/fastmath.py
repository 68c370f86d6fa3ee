"""Vectorised elementary functions for kernels (TensorFlow, loaded lazily).

    from flowsim.core import fastmath

    def integrand(x):
        return -fastmath.log(x[:, 0]) * x[:, 1]

XLA on CPU vectorises float64 ``exp`` but evaluates ``log`` one element at a
time, several times slower (figures in ``docs/performance.rst``).  The
functions here are built from operations XLA vectorises: exponent and mantissa
read from the IEEE-754 bits, then a polynomial.

:func:`log`
    In place of ``tf.math.log`` in integrands: float64 and float32, the whole
    range like ``numpy.log`` (zero, negatives, subnormals, inf, nan).
:func:`log_positive`
    The path kernels' logarithm: positive normal doubles only, a little cheaper.
:func:`inverse_normal`
    The standard normal quantile (Acklam), on :func:`log_positive`.
:func:`is_finite`
    ``tf.math.is_finite``'s booleans from two comparisons, which XLA converts
    with the rest of the graph (``is_finite`` takes a separate, slower
    conversion at each compile).

Each keeps the bits it had under its former path (``flowsim.core.fastmath.log``,
``flowsim.finance.fastmath.log``, ``flowsim.finance.pricing.inverse_normal``).
"""
import math

from .lazy_tf import tf

__all__ = ["inverse_normal", "is_finite", "log", "log_positive"]

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


def is_finite(x):
    """Whether each element of the float tensor ``x`` is finite: the booleans of
    ``tf.math.is_finite(x)`` (NaN and +-inf are not), as ``-inf < x < inf``.

        finite = fastmath.is_finite(values)      # [n] bools for values [n]

    Under XLA, TensorFlow converts ``IsFinite`` alone through MLIR, a few
    milliseconds of every new process's first call of a kernel; comparisons are
    converted with the rest of the graph.
    """
    t = tf()
    x = t.convert_to_tensor(x)
    inf = t.constant(math.inf, x.dtype)
    return t.logical_and(x > -inf, x < inf)


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
        raise TypeError("flowsim.core.fastmath.log: x must be float64 or float32, "
                        f"got {x.dtype.name}")
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


_SQRT2 = math.sqrt(2.0)
_SERIES = [1.0 / (2 * k + 1) for k in range(12)]   # 1, 1/3, 1/5, ... 1/23


def log_positive(x):
    """Natural logarithm of positive normal doubles (``tf.math.log`` for float32).

    Exponent ``e`` and mantissa ``m`` in [sqrt(1/2), sqrt(2)) from the bits,
    ``log x = e ln 2 + 2 atanh(s)`` with ``s = (m - 1) / (m + 1)`` by its odd
    series to ``s**23`` (``|s| <= 0.1716``: truncation error below 2e-18).  Measured
    error <= 3 ulp for normal positive doubles; zero, negative, subnormal, inf
    and NaN inputs are not supported (callers keep arguments in [1e-300, 1e300]).
    """
    t = tf()
    if x.dtype != t.float64:
        return t.math.log(x)
    bits = t.bitcast(x, t.int64)
    e = t.bitwise.right_shift(bits, 52) - 1023
    mant = t.bitwise.bitwise_or(t.bitwise.bitwise_and(bits, 0x000FFFFFFFFFFFFF),
                                0x3FF0000000000000)
    m = t.bitcast(mant, t.float64)
    big = m > _SQRT2
    m = t.where(big, 0.5 * m, m)
    e = t.cast(t.where(big, e + 1, e), t.float64)
    s = (m - 1) / (m + 1)
    s2 = s * s
    poly = _SERIES[-1]
    for c in reversed(_SERIES[:-1]):
        poly = poly * s2 + c
    return e * _LN2_HI + (e * _LN2_LO + 2 * s * poly)


_ACKLAM_A = (-3.969683028665376e+01, 2.209460984245205e+02, -2.759285104469687e+02,
             1.383577518672690e+02, -3.066479806614716e+01, 2.506628277459239e+00)
_ACKLAM_B = (-5.447609879822406e+01, 1.615858368580409e+02, -1.556989798598866e+02,
             6.680131188771972e+01, -1.328068155288572e+01, 1.0)
_ACKLAM_C = (-7.784894002430293e-03, -3.223964580411365e-01, -2.400758277161838e+00,
             -2.549732539343734e+00, 4.374664141464968e+00, 2.938163982698783e+00)
_ACKLAM_D = (7.784695709041462e-03, 3.224671290700398e-01, 2.445134137142996e+00,
             3.754408661907416e+00, 1.0)


def _horner(coefs, x):
    out = coefs[0] * x + coefs[1]
    for c in coefs[2:]:
        out = out * x + c
    return out


def inverse_normal(u):
    """Standard normal quantile of ``u`` in (0, 1), Acklam's rational approximation.

    Relative error below 1.15e-9 everywhere (the algorithm QuantLib's
    ``InverseCumulativeNormal`` uses), branch-free so it vectorizes and fuses
    under XLA, where it is cheaper than ``tf.math.ndtri`` (full precision;
    figures in ``docs/performance.rst``).
    The approximation error is far below Monte Carlo noise; it is not
    bit-symmetric (``inverse_normal(1 - u)`` may differ from ``-inverse_normal(u)``
    in the last bits), which is why antithetic paths negate the normals.
    """
    t = tf()
    q = u - 0.5
    r = q * q
    central = _horner(_ACKLAM_A, r) * q / _horner(_ACKLAM_B, r)
    m = t.minimum(u, 1 - u)
    s = t.sqrt(-2 * log_positive(m))
    tail = _horner(_ACKLAM_C, s) / _horner(_ACKLAM_D, s)
    tail = t.where(u < 0.5, tail, -tail)
    return t.where(m < 0.02425, tail, central)
