"""Built-in signal strategies for :func:`flowsim.finance.signal_sweep`.

A strategy is a TF-traceable ``strategy(params, data)``: ``params`` is a
``[rows, n]`` block of parameter rows (floats; windows arrive as exact floats),
``data`` a dict of ``[bars, assets]`` tensors (``close`` and, when given,
``open``, ``high``, ``low``, ``volume``).  It returns a dict with ``entries`` and
``exits`` (and optionally ``short_entries``, ``short_exits``), each bool
``[bars, rows, assets]`` (bar-major, as :mod:`flowsim.finance.indicators` gives).
Its ``params`` attribute names the parameter columns, in order; module-level
functions pickle, so they run on the MPI and Spark backends too.

The signals are vectorbt's: ``crossed_above`` / ``crossed_below`` of the
indicator outputs (:func:`flowsim.finance.indicators.crossed_above`).
"""
from ..core.lazy_tf import tf
from . import indicators as ind


def per_unique(fn, values):
    """``fn(values)`` ``[bars, rows, ...]`` computed once per distinct value and gathered.

    A grid repeats each indicator parameter for every other parameter (thresholds,
    stops); the rows of an indicator are independent, so the result is the same,
    bit for bit, as ``fn(values)``.
    """
    t = tf()
    distinct, idx = t.unique(values)
    return t.gather(fn(distinct), idx, axis=1)


def _col(params, j):
    """Column ``j`` of the parameter block as a ``[1, rows, 1]`` tensor."""
    return params[:, j][None, :, None]


def _ma(data, windows):
    """The simple moving average of the close for each row's window, once per window."""
    return per_unique(lambda w: ind.ma(data["close"], w), windows)


def ma_crossover(params, data):
    """Enter when the fast simple moving average crosses above the slow one, exit below.

    Params ``fast, slow`` (windows in bars).  The signals of
    :func:`flowsim.finance.ma_crossover_sweep`, now through the full portfolio
    (fees, stops, shorts, every metric).
    """
    fast = _ma(data, params[:, 0])
    slow = _ma(data, params[:, 1])
    return {"entries": ind.crossed_above(fast, slow), "exits": ind.crossed_above(slow, fast)}


ma_crossover.params = ("fast", "slow")


def rsi_thresholds(params, data):
    """Enter when RSI(window) crosses below ``lower``, exit when it crosses above ``upper``.

    Params ``window, lower, upper``: vectorbt's ``RSI.run(close, window)`` with
    ``rsi_crossed_below(lower)`` as entries and ``rsi_crossed_above(upper)`` as exits
    (simple-average RSI, vectorbt's default).
    """
    rsi = per_unique(lambda w: ind.rsi(data["close"], w), params[:, 0])
    lower = tf().broadcast_to(_col(params, 1), tf().shape(rsi))
    upper = tf().broadcast_to(_col(params, 2), tf().shape(rsi))
    return {"entries": ind.crossed_above(lower, rsi), "exits": ind.crossed_above(rsi, upper)}


rsi_thresholds.params = ("window", "lower", "upper")


def macd_cross(params, data):
    """Enter when MACD crosses above its signal line, exit when it crosses below.

    Params ``fast_window, slow_window, signal_window`` (simple averages, vectorbt's
    ``MACD`` defaults).
    """
    m = _ma(data, params[:, 0]) - _ma(data, params[:, 1])
    s = ind.rolling_mean(m, params[:, 2])
    return {"entries": ind.crossed_above(m, s), "exits": ind.crossed_above(s, m)}


macd_cross.params = ("fast_window", "slow_window", "signal_window")


def bbands_reversion(params, data):
    """Enter when the close crosses below the lower Bollinger band, exit above the upper.

    Params ``window, alpha`` (bands at ``MA(window) +- alpha * MSTD(window)``).
    """
    t = tf()
    mid = _ma(data, params[:, 0])
    sd = per_unique(lambda w: ind.mstd(data["close"], w), params[:, 0])
    alpha = t.cast(_col(params, 1), mid.dtype)
    upper, lower = mid + alpha * sd, mid - alpha * sd         # ind.bbands, once per window
    close = t.broadcast_to(data["close"][:, None, :], t.shape(upper))
    return {"entries": ind.crossed_above(lower, close), "exits": ind.crossed_above(close, upper)}


bbands_reversion.params = ("window", "alpha")
