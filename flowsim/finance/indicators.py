"""Technical indicators in TensorFlow, batched over parameter rows and asset columns.

Each function takes price series ``[bars]`` or ``[bars, columns]`` (numpy or
tensors) and one parameter value or one per parameter row (``[rows]``), and
returns **bar-major** tensors ``[bars, rows, columns]``: ``out[:, r, j]`` is the
indicator of parameter row ``r`` on column ``j``.  The formulas, defaults and
warm-up NaNs are vectorbt's (``vectorbt.indicators``): a window of ``w`` bars
gives NaN on the first ``w - 1`` bars (one more where the input starts with a
NaN, as RSI's price differences do).

    >>> rsi = indicators.rsi(close, window=[7, 14, 21])       # [bars, 3, 1]
    >>> upper, middle, lower = indicators.bbands(close, 20, alpha=2)

``ewm=True`` selects vectorbt's exponential moving average (``span = window``,
``adjust=False``, ``min_periods = window``); simple averages are differences of
running sums, exact to rounding.  Inputs must be free of NaN (only the NaNs an
indicator makes itself are carried, as vectorbt does).
"""
import math

import numpy as np

from ..core.lazy_tf import tf


def _series(x, dtype=None):
    """``x`` as a ``[bars, 1, columns]`` float tensor."""
    t = tf()
    if hasattr(x, "to_numpy"):
        x = x.to_numpy()
    x = x if isinstance(x, t.Tensor) else t.convert_to_tensor(np.asarray(x, dtype=np.float64)
                                                               if dtype is None else x)
    if dtype is not None:
        x = t.cast(x, dtype)
    if x.shape.rank == 1:
        x = x[:, None]
    if x.shape.rank == 2:
        x = x[:, None, :]
    return x


def _rows(p, dtype=None):
    """A parameter as a ``[rows]`` tensor (scalar -> one row)."""
    t = tf()
    p = p if isinstance(p, t.Tensor) else t.convert_to_tensor(np.asarray(p))
    p = t.reshape(p, [-1])
    return t.cast(p, dtype) if dtype is not None else p


def _nan(x):
    return tf().zeros_like(x) + math.nan


def rolling_mean(x, window):
    """vectorbt's ``rolling_mean_nb`` (``min_periods = window``) of ``x`` ``[bars, R, c]``.

    NaNs are skipped in the sums and counted out of the window, so any NaN
    inside a window makes that bar NaN.  ``window`` ``[rows]``; ``R`` is 1 or rows.
    """
    t = tf()
    w = t.cast(_rows(window), t.int32)
    rows = t.shape(w)[0]
    n = t.shape(x)[0]
    isnan = t.math.is_nan(x)
    vals = t.where(isnan, t.zeros_like(x), x)
    zero = t.zeros_like(vals[:1])
    cs = t.concat([zero, t.cumsum(vals, axis=0)], axis=0)                  # [n+1, R, c]
    cn = t.concat([zero, t.cumsum(t.cast(~isnan, x.dtype), axis=0)], axis=0)
    shape = [t.shape(cs)[0], rows, t.shape(cs)[2]]
    cs, cn = t.broadcast_to(cs, shape), t.broadcast_to(cn, shape)
    hi = t.range(1, n + 1)[:, None]                                        # [n, 1]
    lo = t.maximum(hi - w[None, :], 0)                                     # [n, rows]
    idx_r = t.broadcast_to(t.range(rows)[None, :], t.shape(lo))

    def take(a, i):
        return t.gather_nd(a, t.stack([t.broadcast_to(i, t.shape(lo)), idx_r], axis=-1))

    wsum = take(cs, hi) - take(cs, lo)
    wlen = take(cn, hi) - take(cn, lo)
    ok = wlen >= t.cast(w, x.dtype)[None, :, None]
    return t.where(ok, wsum / t.where(ok, wlen, t.ones_like(wlen)), _nan(wsum))


_JIT = {}


def _compiled(fn):
    """``fn`` as a ``tf.function(jit_compile=True)``: XLA runs its loop over bars natively."""
    out = _JIT.get(fn.__name__)
    if out is None:
        out = _JIT[fn.__name__] = tf().function(fn, jit_compile=True, autograph=False)
    return out


def _ewm_loop(x, window, adjust, with_std=False, ddof=0):
    """vectorbt's ``ewm_mean_nb`` / ``ewm_std_nb`` (span = window, minp = window)."""
    t = tf()
    return _compiled(_ewm_impl)(x, t.convert_to_tensor(_rows(window)), bool(adjust),
                                bool(with_std), int(ddof))


def _ewm_impl(x, window, adjust, with_std, ddof):
    t = tf()
    dtype = x.dtype
    w = t.cast(_rows(window), dtype)
    rows = t.shape(w)[0]
    x = t.broadcast_to(x, [t.shape(x)[0], rows, t.shape(x)[2]])
    n = t.shape(x)[0]
    alpha = (1.0 / (1.0 + (w - 1) / 2.0))[:, None]                        # [rows, 1]
    factor = 1.0 - alpha
    new_wt = t.ones_like(alpha) if adjust else alpha
    minp = w[:, None]
    first = x[0]
    obs = ~t.math.is_nan(first)
    mean = first
    nobs = t.cast(obs, dtype)
    zero = t.zeros_like(first)
    one = t.ones_like(first)
    out0 = t.where(nobs >= minp, first, _nan(first))
    if with_std:
        out0 = t.where(t.math.is_finite(first) & (nobs >= minp) & (ddof < 1), zero, _nan(first))
    arr = t.TensorArray(dtype, size=n).write(0, out0)

    def body(i, mean, nobs, old_wt, cov, sum_wt, sum_wt2, arr):
        cur = x[i]
        obs = ~t.math.is_nan(cur)
        nobs = nobs + t.cast(obs, dtype)
        live = ~t.math.is_nan(mean)
        old_wt = t.where(live, old_wt * factor, old_wt)
        sum_wt = t.where(live, sum_wt * factor, sum_wt)
        sum_wt2 = t.where(live, sum_wt2 * factor * factor, sum_wt2)
        upd = live & obs
        moved = ((old_wt * mean) + (new_wt * cur)) / (old_wt + new_wt)
        new_mean = t.where(upd & (mean != cur), moved, mean)
        if with_std:
            cov = t.where(upd, ((old_wt * (cov + (mean - new_mean) * (mean - new_mean)))
                                + (new_wt * (cur - new_mean) * (cur - new_mean)))
                          / (old_wt + new_wt), cov)
            sum_wt = t.where(upd, sum_wt + new_wt, sum_wt)
            sum_wt2 = t.where(upd, sum_wt2 + new_wt * new_wt, sum_wt2)
        grown = old_wt + new_wt
        if not adjust:
            if with_std:
                sum_wt = t.where(upd, sum_wt / grown, sum_wt)
                sum_wt2 = t.where(upd, sum_wt2 / (grown * grown), sum_wt2)
            old_wt = t.where(upd, one, old_wt)
        else:
            old_wt = t.where(upd, grown, old_wt)
        new_mean = t.where(~live & obs, cur, new_mean)
        if with_std:
            ready = (nobs > 0) & (nobs >= minp) & t.math.is_finite(new_mean)
            if ddof == 0:
                var = cov
            else:
                num = sum_wt * sum_wt
                den = num - ddof * sum_wt2
                var = t.where(den > 0, num / t.where(den > 0, den, one) * cov, _nan(cov))
            val = t.where(ready, var, _nan(var))
        else:
            val = t.where(nobs >= minp, new_mean, _nan(new_mean))
        return i + 1, new_mean, nobs, old_wt, cov, sum_wt, sum_wt2, arr.write(i, val)

    init = [t.constant(1), mean, nobs, one, zero, one, one, arr]
    arr = t.while_loop(lambda i, *_: i < n, body, init)[-1]
    out = arr.stack()
    return t.sqrt(out) if with_std else out


def ma(close, window, ewm=False, adjust=False):
    """Moving average (vectorbt ``MA``): simple, or exponential with ``ewm=True``."""
    x = _series(close)
    return _ewm_loop(x, window, adjust) if ewm else rolling_mean(x, window)


def mstd(close, window, ewm=False, adjust=False, ddof=0):
    """Moving standard deviation (vectorbt ``MSTD``, population ``ddof=0`` by default)."""
    t = tf()
    x = _series(close)
    if ewm:
        return _ewm_loop(x, window, adjust, with_std=True, ddof=ddof)
    ref = x[:1]                                    # shift by the first bar: less cancellation
    d = x - ref
    m1 = rolling_mean(d, window)
    m2 = rolling_mean(d * d, window)
    w = t.cast(_rows(window), x.dtype)[None, :, None]
    var = t.maximum(m2 - m1 * m1, 0) * w / (w - ddof)
    return t.sqrt(var)


def bbands(close, window=20, alpha=2.0, ewm=False, adjust=False, ddof=0):
    """Bollinger bands (vectorbt ``BBANDS``): ``(upper, middle, lower)``, ``middle`` = MA."""
    t = tf()
    mid = ma(close, window, ewm, adjust)
    sd = mstd(close, window, ewm, adjust, ddof)
    a = t.cast(_rows(alpha), mid.dtype)[None, :, None]
    return mid + a * sd, mid, mid - a * sd


def rsi(close, window=14, ewm=False, adjust=False):
    """Relative strength index (vectorbt ``RSI``): ``100 - 100 / (1 + up / down)``."""
    t = tf()
    x = _series(close)
    delta = t.concat([_nan(x[:1]), x[1:] - x[:-1]], axis=0)
    up = t.where(delta < 0, t.zeros_like(delta), delta)
    down = t.abs(t.where(delta > 0, t.zeros_like(delta), delta))
    if ewm:
        ru, rd = _ewm_loop(up, window, adjust), _ewm_loop(down, window, adjust)
    else:
        ru, rd = rolling_mean(up, window), rolling_mean(down, window)
    return 100 - 100 / (1 + ru / rd)


def _rolling_extreme(x, window, fn, pad):
    """Rolling min or max (``fn``) of ``x`` ``[bars, 1, c]`` for per-row windows (NaN warm-up)."""
    t = tf()
    w = t.cast(_rows(window), t.int32)
    n = int(x.shape[0])
    levels = [x[:, 0, :]]                                                  # [n, c]
    k = 1
    while 2 * k <= n:
        prev = levels[-1]
        shifted = t.concat([t.fill([k, t.shape(prev)[1]], t.constant(pad, x.dtype)),
                            prev[:-k]], axis=0)
        levels.append(fn(prev, shifted))
        k *= 2
    table = t.stack(levels)                                                # [K, n, c]
    lvl = t.cast(t.floor(t.math.log(t.cast(w, t.float64)) / math.log(2.0) + 1e-9), t.int32)
    lvl = t.minimum(lvl, len(levels) - 1)
    span = t.bitwise.left_shift(t.ones_like(lvl), lvl)                    # 2**lvl
    i = t.range(n)[:, None]                                                # [n, 1]
    j = t.maximum(i - w[None, :] + span[None, :], 0)                       # [n, rows]
    lv = t.broadcast_to(lvl[None, :], t.shape(j))
    a = t.gather_nd(table, t.stack([lv, t.broadcast_to(i, t.shape(j))], axis=-1))
    b = t.gather_nd(table, t.stack([lv, j], axis=-1))
    out = fn(a, b)                                                         # [n, rows, c]
    ok = (i + 1 >= w[None, :])[:, :, None]
    return t.where(ok, out, _nan(out))


def stoch(high, low, close, k_window=14, d_window=3, d_ewm=False, adjust=False):
    """Stochastic oscillator (vectorbt ``STOCH``): ``(percent_k, percent_d)``.

    ``k_window`` and ``d_window`` are per row (give both the same number of rows,
    or a scalar for one of them).
    """
    t = tf()
    c = _series(close)
    lo = _rolling_extreme(_series(low, c.dtype), k_window, t.minimum, math.inf)
    hi = _rolling_extreme(_series(high, c.dtype), k_window, t.maximum, -math.inf)
    k = 100 * (c - lo) / (hi - lo)
    d = _ewm_loop(k, d_window, adjust) if d_ewm else rolling_mean(k, d_window)
    return k, d


def macd(close, fast_window=12, slow_window=26, signal_window=9, macd_ewm=False,
         signal_ewm=False, adjust=False):
    """MACD (vectorbt ``MACD``): ``(macd, signal)``; the histogram is their difference."""
    m = ma(close, fast_window, macd_ewm, adjust) - ma(close, slow_window, macd_ewm, adjust)
    s = _ewm_loop(m, signal_window, adjust) if signal_ewm else rolling_mean(m, signal_window)
    return m, s


def true_range(high, low, close):
    """``max(high - low, |high - prev close|, |low - prev close|)``; bar 0: high - low."""
    t = tf()
    h, lo, c = _series(high), _series(low), _series(close)
    tr1 = h - lo
    prev = c[:-1]
    tr = t.maximum(t.maximum(tr1[1:], t.abs(h[1:] - prev)), t.abs(lo[1:] - prev))
    return t.concat([tr1[:1], tr], axis=0)


def atr(high, low, close, window=14, ewm=True, adjust=False):
    """Average true range (vectorbt ``ATR``, exponential by default): ``(tr, atr)``."""
    tr = true_range(high, low, close)
    return tr, (_ewm_loop(tr, window, adjust) if ewm else rolling_mean(tr, window))


def obv(close, volume):
    """On-balance volume (vectorbt ``OBV``): running sum of +-volume, 0 on unchanged closes."""
    t = tf()
    c, v = _series(close), _series(volume)
    v = t.broadcast_to(v, t.shape(c))
    down = t.concat([t.zeros_like(c[:1], dtype=t.bool), c[1:] < c[:-1]], axis=0)
    same = t.concat([t.zeros_like(c[:1], dtype=t.bool), t.math.is_finite(c[1:]) &
                     (c[1:] == c[:-1])], axis=0)
    signed = t.where(same, t.zeros_like(v), t.where(down, -v, v))
    return t.cumsum(t.where(t.math.is_nan(signed), t.zeros_like(signed), signed), axis=0)


def crossed_above(a, b):
    """vectorbt's ``crossed_above_nb`` on bar-major ``[bars, ...]``: ``a`` crosses above ``b``.

    True at a bar where ``a > b`` after a bar where ``a < b`` (ties in between
    wait; a NaN resets).  Use ``crossed_above(b, a)`` for "crossed below".
    """
    t = tf()
    if not isinstance(a, t.Tensor):
        a = t.constant(a, b.dtype)
    if not isinstance(b, t.Tensor):
        b = t.constant(b, a.dtype)
    return _compiled(_crossed_above_impl)(a, b)


def _crossed_above_impl(a, b):
    t = tf()
    shape = t.shape(a + b)
    a, b = t.broadcast_to(a, shape), t.broadcast_to(b, shape)
    n = t.shape(a)[0]
    arr = t.TensorArray(t.bool, size=n)
    false = t.zeros_like(a[0], dtype=t.bool)

    def body(i, was_below, armed, arr):
        x, y = a[i], b[i]
        nan = t.math.is_nan(x) | t.math.is_nan(y)
        above = ~nan & (x > y)
        below = ~nan & (x < y)
        fire = above & was_below & armed
        # vectorbt's crossed_ago: -1 (armed) until a cross fires, re-armed by a tie,
        # a bar below or a NaN.
        armed = ~(above & was_below)
        was_below = t.where(nan, false, t.where(below, ~false, was_below))
        return i + 1, was_below, armed, arr.write(i, fire)

    arr = t.while_loop(lambda i, *_: i < n, body, [t.constant(0), false, ~false, arr])[-1]
    return arr.stack()
