"""Vectorizable float64 logarithm for the path kernels.

XLA on CPU evaluates float64 ``log`` element by element (several times the cost
of ``exp``: ``docs/performance.rst``), and the Heston QE step and the inverse
normal CDF need several per path step.  :func:`log` computes it from the
IEEE-754 bits instead: exponent ``e`` and mantissa ``m`` in [sqrt(1/2), sqrt(2)),
``log x = e ln 2 + 2 atanh(s)`` with ``s = (m - 1) / (m + 1)`` by its odd series
to ``s**23`` (|s| <= 0.1716, so the truncation error is below 2e-18).  Measured
error <= 3 ulp for normal positive doubles; zero, negative, subnormal, inf and
NaN inputs are not supported (callers keep arguments in [1e-300, 1e300]).
float32 uses ``tf.math.log``.
"""
import math

from ..core.lazy_tf import tf

_LN2_HI = 6.93147180369123816490e-01     # fdlibm split of ln 2: hi has 32 low zero bits
_LN2_LO = 1.90821492927058770002e-10
_SQRT2 = math.sqrt(2.0)
_COEFS = [1.0 / (2 * k + 1) for k in range(12)]   # 1, 1/3, 1/5, ... 1/23


def log(x):
    """Natural logarithm of positive normal doubles (``tf.math.log`` for float32)."""
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
    poly = _COEFS[-1]
    for c in reversed(_COEFS[:-1]):
        poly = poly * s2 + c
    return e * _LN2_HI + (e * _LN2_LO + 2 * s * poly)
