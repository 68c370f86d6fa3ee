"""Trading-strategy parameter sweeps: one row per parameter combination, on any backend.

A strategy is a TF-traceable function ``positions(params, data)`` that maps a
``[rows, n_params]`` block of parameter rows and the shared price data to the
exposure held *after* each bar's close, ``[rows, n_bars]`` in [0, 1].  The
metrics (total return, Sharpe ratio, maximum drawdown, trade count) are computed
from the exposure by :func:`backtest_metrics` in the same kernel, and a
:class:`flowsim.Sweep` (what :func:`flowsim.sweep` builds; here cached per shape so
repeated sweeps do not retrace) runs it over blocks of rows on any backend.  Rows are
independent, so the table has the same bits for any ``events_limit``, block size
or backend.

:func:`ma_crossover_sweep` is the moving-average crossover built on it, with
vectorbt's ``Portfolio.from_signals(fees=0)`` semantics.
"""
import collections
import math
import numbers
import threading

import numpy as np

from ..core.lazy_tf import tf

#: Metric columns of every strategy sweep, in order.
METRICS = ("total_return", "sharpe", "max_drawdown", "trades")


# -- metrics of exposure paths (TF, any dtype) ----------------------------------------
_XLA_SCAN = {}


def _equity_scan(r):
    """Compounded equity of bar returns ``r`` [rows, bars]: final value and worst drawdown.

    ``equity *= 1 + r`` bar by bar, with its running high and the minimum of
    ``equity / high`` (vectorbt's drawdown quotient), starting from equity 1.
    TF has no cumulative-max op, so this is a small nested
    ``tf.function(jit_compile=True)``: XLA turns the loop over bars (each step
    updating every row) into one native loop, on CPU or GPU, even when the
    surrounding kernel is not compiled.  Each row sees the same operations in
    the same order whatever the block of rows, so the bits do not depend on it.
    Returns ``(equity[-1], min(equity / running high))``.
    """
    t = tf()
    fn = _XLA_SCAN.get("fn")
    if fn is None:
        def scan(r):
            cols = t.transpose(r)                                # [bars, rows]
            n = t.shape(cols)[0]
            one = t.ones_like(cols[0])

            def body(i, equity, high, worst):
                equity = equity * (1 + cols[i])
                high = t.maximum(high, equity)
                return i + 1, equity, high, t.minimum(worst, equity / high)

            _, equity, _, worst = t.while_loop(lambda i, e, h, w: i < n, body,
                                               [t.constant(0), one, one, one])
            return equity, worst

        fn = _XLA_SCAN["fn"] = t.function(scan, jit_compile=True, autograph=False)
    return fn(r)


def backtest_metrics(position, close, annualization=252):
    """Metrics of all-in, fee-free trading of ``close`` with exposure ``position``.

    Parameters
    ----------
    position : tensor [rows, n_bars]
        Fraction of equity held long after bar ``t``'s close (0 flat, 1 all in);
        entries and exits fill at that bar's close.
    close : tensor [n_bars]
        Closing prices (same dtype as ``position``).
    annualization : float
        Periods per year for the Sharpe ratio (default 252 trading days).

    Returns ``{"total_return", "sharpe", "max_drawdown", "trades"}`` tensors
    ``[rows]`` of ``close.dtype``.  Bar returns are ``position[t-1] *
    (close[t] / close[t-1] - 1)`` with the first return 0; Sharpe is
    mean / std(ddof=1) * sqrt(annualization) over all bars (+inf when the std is
    0, as vectorbt gives); the equity compounds the returns from 1; the maximum
    drawdown is ``min(equity / running max) - 1`` (<= 0); a trade starts at each
    bar where the exposure goes from 0 to > 0 (an open position at the end counts).
    """
    t = tf()
    dtype = close.dtype
    n_bars = int(close.shape[0])
    ret = close[1:] / close[:-1] - 1                                   # [n-1]
    held = position[:, :-1]
    r = held * ret                                                     # [rows, n-1]
    n = t.constant(n_bars, dtype)
    mean = t.reduce_sum(r, axis=1) / n
    dev = r - mean[:, None]
    var = (t.reduce_sum(dev * dev, axis=1) + mean * mean) / (n - 1)   # first return is 0
    std = t.sqrt(var)
    safe = t.where(std > 0, std, t.ones_like(std))
    sharpe = t.where(std > 0, mean / safe * t.constant(math.sqrt(annualization), dtype),
                     t.fill(t.shape(std), t.constant(math.inf, dtype)))
    equity, worst = _equity_scan(r)
    was = t.concat([t.zeros_like(position[:, :1]), held], axis=1) > 0
    starts = t.cast((position > 0) & ~was, dtype)
    return {"total_return": equity - 1, "sharpe": sharpe, "max_drawdown": worst - 1,
            "trades": t.reduce_sum(starts, axis=1)}


# -- moving averages and crossovers (TF) ---------------------------------------------
def rolling_means(data, windows):
    """Simple moving averages ``[rows, n_bars]`` for one window per row.

    ``data`` must hold ``"csum"``, the float64 running sum of the closes (as
    :func:`ma_crossover_data` makes it), and for float32 kernels ``"csum_lo"``,
    its float32 rounding residual.  Window sums are differences of running sums,
    ``(csum[t] - csum[t - w]) / w``, exactly vectorbt's rolling mean in float64;
    in float32 the (hi, lo) pair keeps the window sums accurate to float32
    precision (a float32 running sum alone loses ~1e-3 on long series).  Values
    before bar ``w - 1`` are meaningless; mask them with ``t + 1 >= w``.
    """
    t = tf()
    csum = data["csum"]
    dtype = csum.dtype
    n = int(csum.shape[0])
    w = t.cast(windows, t.int64)[:, None]                               # [rows, 1]
    upto = t.range(1, n + 1, dtype=t.int64)[None, :]                    # [1, n]
    lo_idx = t.maximum(upto - w, 0)
    zero = t.zeros([1], dtype)
    hi = t.concat([zero, csum], axis=0)
    wsum = hi[1:][None, :] - t.gather(hi, lo_idx)
    if dtype == t.float32 and "csum_lo" in data:
        lo = t.concat([zero, data["csum_lo"]], axis=0)
        wsum = wsum + (lo[1:][None, :] - t.gather(lo, lo_idx))
    return wsum / t.cast(w, dtype)


def _forward_fill_sign(sign):
    """Carry the last non-zero value of ``sign`` [rows, n] forward over zeros."""
    t = tf()
    n = int(sign.shape[1])
    k = 1
    while k < n:
        shifted = t.concat([t.zeros_like(sign[:, :k]), sign[:, :n - k]], axis=1)
        sign = t.where(sign == 0, shifted, sign)
        k *= 2
    return sign


def crossover_positions(fast, slow, defined):
    """Long-only exposure of "enter when ``fast`` crosses above ``slow``, exit below".

    ``fast``, ``slow`` are ``[rows, n_bars]``; ``defined`` a boolean mask of the
    bars where both exist.  vectorbt's ``crossed_above`` fires on a bar where
    fast > slow if the previous bar was below or equal and fast has been below
    slow at least once; from_signals then ignores entries while long and exits
    while flat.  The resulting state is: long at bar t iff fast was below slow at
    some bar <= t and the last bar <= t where they differ has fast above.
    """
    t = tf()
    above = defined & (fast > slow)
    below = defined & (fast < slow)
    sign = t.cast(above, t.int8) - t.cast(below, t.int8)
    ties = t.reduce_any(defined & t.equal(fast, slow))
    sign = t.cond(ties, lambda: _forward_fill_sign(sign), lambda: sign)
    n = int(fast.shape[1])
    first_below = t.argmax(t.cast(below, t.int8), axis=1, output_type=t.int32)   # 0 if none
    seen_below = (t.range(n)[None, :] >= first_below[:, None]) & t.reduce_any(below, axis=1,
                                                                             keepdims=True)
    return t.cast((sign > 0) & seen_below, fast.dtype)


def ma_crossover_positions(params, data):
    """Strategy kernel: ``params`` ``[rows, 2]`` (fast, slow windows) -> exposure."""
    t = tf()
    params = t.cast(params, t.int64)
    fast_w, slow_w = params[:, 0], params[:, 1]
    fast = rolling_means(data, fast_w)
    slow = rolling_means(data, slow_w)
    n = int(data["csum"].shape[0])
    first = t.maximum(fast_w, slow_w)[:, None]
    defined = t.range(1, n + 1, dtype=t.int64)[None, :] >= first
    return crossover_positions(fast, slow, defined)


# -- the sweep kernel and the entry points --------------------------------------------
class StrategyKernel:
    """``kernel(params, data)`` for :func:`flowsim.sweep`: positions then metrics.

    Picklable when ``positions`` is a module-level function (MPI, Spark).
    """

    def __init__(self, positions, annualization=252):
        self.positions = positions
        self.annualization = float(annualization)

    def __call__(self, params, data):
        # Plain Python loops only over static sizes: skip autograph (it costs seconds).
        return tf().autograph.experimental.do_not_convert(self._metrics)(params, data)

    def _metrics(self, params, data):
        position = self.positions(params, data)
        return backtest_metrics(position, data["close"], self.annualization)

    def __repr__(self):
        name = getattr(self.positions, "__qualname__", repr(self.positions))
        return f"StrategyKernel({name}, annualization={self.annualization})"


def _check_close(close):
    close = np.asarray(close, dtype=np.float64) if not hasattr(close, "to_numpy") \
        else close.to_numpy(dtype=np.float64)
    if close.ndim != 1:
        raise ValueError(f"close must be one-dimensional (one price per bar), "
                         f"got shape {list(close.shape)}")
    if close.shape[0] < 2:
        raise ValueError(f"close needs at least 2 bars, got {close.shape[0]}")
    if not np.all(np.isfinite(close)) or np.any(close <= 0):
        bad = int(np.flatnonzero(~np.isfinite(close) | (close <= 0))[0])
        raise ValueError(f"close must be finite and > 0; bar {bad} is {close[bad]!r}")
    return close


def _check_annualization(annualization):
    if isinstance(annualization, bool) or not isinstance(annualization, numbers.Real) \
            or not math.isfinite(annualization) or annualization <= 0:
        raise ValueError(f"annualization must be a positive number of periods per year, "
                         f"got {annualization!r}")
    return float(annualization)


def _as_data(data):
    """DataFrame / dict / 1-D array -> ``{column: float64 array}`` with ``close``."""
    if hasattr(data, "columns"):
        data = {str(c).lower(): data[c].to_numpy() for c in data.columns}
    elif not isinstance(data, dict):
        data = {"close": data}
    if "close" not in data:
        raise ValueError(f"data must have a 'close' column, got {sorted(data)}")
    out = {"close": _check_close(data["close"])}
    for k, v in data.items():
        if k == "close":
            continue
        v = np.asarray(v)
        if v.shape[:1] != out["close"].shape:
            raise ValueError(f"data column {k!r} has {v.shape[:1]} bars, close has "
                             f"{out['close'].shape[0]}")
        out[k] = v
    return out


def _table(params, names, values):
    import pandas as pd
    cols = {name: params[:, j] for j, name in enumerate(names)}
    for m in METRICS:
        cols[m] = values[m]
    frame = pd.DataFrame(cols)
    frame["trades"] = frame["trades"].round().astype(np.int64)
    return frame


#: Sweeps kept with their compiled kernels, keyed by (kernel, shapes): a new
#: close series or grid of the same shapes reuses the trace (seconds on CPU).
_SWEEPS = collections.OrderedDict()
_SWEEPS_LOCK = threading.Lock()
_SWEEPS_MAX = 8


def _run_sweep(kernel, params, data, backend, dtype, block_size, flow_kwargs):
    """:func:`flowsim.sweep` with the :class:`~flowsim.Sweep` cached by shapes.

    The compiled block function depends only on the kernel and the shapes of
    ``params`` and ``data`` (they are tensor arguments), so a cached Sweep gets
    the new arrays and runs without retracing.  Same bits as a fresh one.
    """
    from ..algorithms.sweep import Sweep, run_rows
    flow_kwargs = dict(flow_kwargs)
    # Whole-kernel XLA compiles for seconds per new shape: off unless asked.
    flow_kwargs.setdefault("jit_compile", False)
    key = (kernel.positions, kernel.annualization, params.shape, block_size,
           tuple((k, v.shape, v.dtype.str) for k, v in sorted(data.items())))
    with _SWEEPS_LOCK:
        entry = _SWEEPS.pop(key, None)
        if entry is None:
            entry = (Sweep(kernel, params, data, block_rows=block_size), threading.Lock())
        _SWEEPS[key] = entry
        while len(_SWEEPS) > _SWEEPS_MAX:
            _SWEEPS.popitem(last=False)
    sim, lock = entry
    with lock:
        sim.params, sim.data = params, data
        events_limit = flow_kwargs.pop("events_limit", None) or None
        return run_rows(sim, backend, dtype, events_limit, **flow_kwargs)


def strategy_sweep(positions, data, params, names=None, annualization=252, dtype="float64",
                   backend=None, block_size=None, **flow_kwargs):
    """Backtest a user-written strategy for every row of ``params`` in one sweep.

    Parameters
    ----------
    positions : callable
        TF-traceable ``positions(params, data)``: ``params`` is a ``[rows,
        n_params]`` block of ``dtype`` floats (integer parameters arrive as
        exact floats: cast them back with ``tf.cast``), ``data`` a dict of
        ``[n_bars]`` tensors (``"close"`` and the other columns of ``data``);
        returns the exposure ``[rows, n_bars]`` held after each bar's close,
        in [0, 1].  Module-level functions pickle, so
        they run on the MPI and Spark backends.
    data : DataFrame, dict of arrays, or 1-D array
        The bars; needs a ``close`` column (column names are lower-cased), finite
        and > 0.  A bare array is the close.
    params : array [n_rows, n_params]
        One combination per row (e.g. ``[[5, 20], [5, 25], ...]``).
    names : sequence of str or None
        Column names of ``params`` in the result (default ``p0, p1, ...``).
    annualization : float
        Periods per year for the Sharpe ratio (default 252).
    dtype : {"float64", "float32"}
        Precision of the kernel; float32 differs from float64 by roughly the
        bounds documented in :func:`ma_crossover_sweep`.
    backend : None or str
        ``None`` (one device), ``"threads"``, ``"mpi"`` or ``"spark"``.
    block_size : int or None
        Rows per block (multiple of 64; default up to 256 rows).  Any value
        gives the same bits; it trades memory (block_size x n_bars per array)
        against per-block overhead.
    **flow_kwargs
        Passed to the Flow (``events_limit``, ``device``, ``jit_compile``...).

    Returns a :class:`pandas.DataFrame` with the parameter columns then
    ``total_return, sharpe, max_drawdown, trades``, one row per ``params`` row in
    order (see :func:`backtest_metrics` for their definitions).
    """
    if not callable(positions):
        raise TypeError(f"positions must be a callable positions(params, data), got {positions!r}")
    from ..algorithms.sweep import param_rows
    bars = _as_data(data)
    params = param_rows(params)
    names = [f"p{j}" for j in range(params.shape[1])] if names is None else list(names)
    if len(names) != params.shape[1]:
        raise ValueError(f"names must give one name per params column ({params.shape[1]}), "
                         f"got {names}")
    kernel = StrategyKernel(positions, _check_annualization(annualization))
    if block_size is None:
        from ..core.blocks import default_block_size
        block_size = default_block_size(params.shape[0], max_block=256)
    # Floats, so the Sweep casts params and data alike to ``dtype``.
    values = _run_sweep(kernel, params.astype(np.float64), bars, backend, dtype, block_size,
                        flow_kwargs)
    return _table(params, names, values)


def ma_crossover_data(close):
    """The data dict :func:`ma_crossover_positions` reads: close and running sums."""
    close = _check_close(close)
    csum = np.cumsum(close)
    lo = (csum - csum.astype(np.float32).astype(np.float64)).astype(np.float32)
    return {"close": close, "csum": csum, "csum_lo": lo.astype(np.float64)}


def _check_pairs(pairs, n_bars):
    pairs = np.asarray(pairs)
    if pairs.ndim != 2 or pairs.shape[1] != 2 or pairs.shape[0] == 0:
        raise ValueError(f"pairs must be a non-empty sequence of (fast, slow) windows, "
                         f"shape [n, 2]; got shape {list(pairs.shape)}")
    if not np.issubdtype(pairs.dtype, np.integer):
        if not np.issubdtype(pairs.dtype, np.floating) or not np.all(pairs == np.round(pairs)):
            raise TypeError(f"pairs must hold integer window lengths, got dtype {pairs.dtype}")
    pairs = pairs.astype(np.int64)
    bad = np.flatnonzero((pairs[:, 0] < 1) | (pairs[:, 0] >= pairs[:, 1]))
    if bad.size:
        f, s = pairs[bad[0]]
        raise ValueError(f"pairs must have 1 <= fast < slow; row {int(bad[0])} is ({f}, {s})")
    bad = np.flatnonzero(pairs[:, 1] > n_bars)
    if bad.size:
        raise ValueError(f"pairs: row {int(bad[0])} has a slow window of {pairs[bad[0], 1]} "
                         f"bars but close has only {n_bars}")
    return pairs


def ma_crossover_sweep(close, pairs, annualization=252, dtype="float64", backend=None,
                       **flow_kwargs):
    """Backtest a moving-average crossover for every ``(fast, slow)`` pair at once.

    Long-only, all-in with fractional shares, no fees: enter when the fast simple
    moving average crosses above the slow one, exit when it crosses below, both
    filled at that bar's close.  These are vectorbt's ``MA.ma_crossed_above`` /
    ``ma_crossed_below`` signals through ``Portfolio.from_signals(fees=0)``; the
    1,590-pair test grid matches vectorbt to <= 1e-9 in every column.

    Parameters
    ----------
    close : array [n_bars] or pandas Series
        Closing prices, finite and > 0.
    pairs : array [n_pairs, 2] of int
        ``(fast, slow)`` windows in bars, ``1 <= fast < slow <= n_bars``.
    annualization : float
        Periods per year for the Sharpe ratio (default 252, daily bars).
    dtype : {"float64", "float32"}
        Kernel precision.  float32 keeps the moving averages to float32 precision
        (running sums are split into a float32 (hi, lo) pair), so a crossing
        decision differs from float64 only where the two averages agree to
        ~1e-7 relative.  On the 1,590-pair test grid (2,520 bars) 1,586 pairs
        agree with float64 within 1e-5 x (1 + abs(value)) in every metric; 4 pairs
        whose averages come within 1e-7 of each other at a crossing fill one bar
        apart, and differ by up to 0.055 in total return, 0.0097 in Sharpe,
        0.0025 in drawdown and 1 trade (asserted in tests/test_finance.py;
        ``examples/backtest_sweep.py`` prints the maxima).  Check the pairs you
        act on in float64.
    backend : None or str
        ``None`` (one device), ``"threads"``, ``"mpi"`` or ``"spark"``.
    **flow_kwargs
        ``block_size`` (rows per block, default <= 256), ``events_limit``,
        ``device``... (see :class:`flowsim.Flow`): rows are independent, so the
        backend, ``block_size`` and ``events_limit`` never change the bits.
        ``jit_compile`` is off by default here: XLA fuses the whole kernel
        (less CPU time per sweep) but compiles for seconds per new shape, which
        only pays for repeated large sweeps of the same shapes (figures in
        ``docs/performance.rst``); on, it may change the last bits.  The
        equity scan is XLA-compiled either way.

    Returns a :class:`pandas.DataFrame` with columns ``fast, slow, total_return,
    sharpe, max_drawdown, trades``, one row per pair, in order.  ``sharpe`` is
    mean / std(ddof=1) * sqrt(annualization) of the daily equity returns over all
    bars (the first 0), +inf for a pair that never trades (vectorbt's value);
    ``max_drawdown`` <= 0; ``trades`` counts entries, an open one included.
    """
    data = ma_crossover_data(close)
    pairs = _check_pairs(pairs, data["close"].shape[0])
    return strategy_sweep(ma_crossover_positions, data, pairs, names=("fast", "slow"),
                          annualization=annualization, dtype=dtype, backend=backend,
                          **flow_kwargs)
