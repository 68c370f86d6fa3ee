"""``from_signals``: vectorbt's ``Portfolio.from_signals`` on TensorFlow, with its ``stats()``.

    >>> pf = from_signals(close, entries, exits, fees=0.001, sl_stop=0.05, freq="1D")
    >>> pf.stats()          # one row per column: vectorbt's metrics, snake_case
    >>> pf.value()          # equity curve [bars, columns]
    >>> pf.trades.records_readable    # exit trades, as vectorbt's

The loop over bars (:func:`flowsim.finance.simulate.simulate_signals`) is one
XLA-compiled ``tf.while_loop`` updating every column at once, so it runs on any
TF device; :func:`stats_tensors` reduces its outputs to the metrics in the same
graph (what :func:`flowsim.finance.signal_sweep` runs per block of rows).
"""
import math
import numbers

import numpy as np

from ..core.lazy_tf import tf
from .accessors import result_ndim  # noqa: F401  (also read as portfolio.result_ndim)
from .align import bar_length, check_column_keywords, conform
from .grouped import grouped_signals, is_grouped
from .inputs import (  # noqa: F401  (their old home: portfolio.ann_factor ...)
    DIRECTIONS,
    INIT_CASH_MODES,
    ann_factor,
    bar_arrays,
    direction_code,
    direction_codes,
    frame_of,
    init_cash_mode,
)
from .metric_names import PORTFOLIO_STATS, STATS  # noqa: F401  (also read as portfolio.STATS)
from .orders import (
    ORDER_PARAMS,
    bar_keywords,
    mode_params,
    per_bar,
    refuse_percent_reversal,
    size_type_codes,
)
from .simulate import COLUMN_PARAMS, FEATURES, features_of, simulate_signals


# -- metrics (TF) -----------------------------------------------------------------------
def _returns(value, init_cash):
    """``returns_nb``: bar returns of ``value`` [n, c] starting from ``init_cash``."""
    t = tf()
    prev = t.concat([init_cash[None, :], value[:-1]], axis=0)
    safe = t.where(prev == 0, t.ones_like(prev), prev)
    r = (value - prev) / safe
    r = t.where(prev < 0, -r, r)
    inf = t.sign(value) * math.inf
    return t.where(prev == 0, t.where(value == 0, t.zeros_like(r), inf), r)


def _nan_if(cond, x):
    t = tf()
    return t.where(cond, t.zeros_like(x) + math.nan, x)


def _div(a, b):
    """IEEE ``a / b`` (x/0 = +-inf, 0/0 = NaN) without TF's division warnings."""
    t = tf()
    safe = t.where(b == 0, t.ones_like(b), b)
    at_zero = t.where(a == 0, t.zeros_like(a) + math.nan, t.sign(a) * math.inf)
    return t.where(b == 0, at_zero, a / safe)


def _inf_if_zero(num, den):
    t = tf()
    return t.where(den == 0, t.zeros_like(den) + math.inf, num / t.where(den == 0, 1 + den, den))


def _trade_metrics(out, close):
    """Trade counts and statistics (vectorbt's: closed trades; the open one counted)."""
    t = tf()
    n_closed, n_win, n_lose = out["acc_closed"], out["acc_win"], out["acc_lose"]
    none = n_closed == 0
    one = t.ones_like(n_closed)
    total = t.where(none, one, n_closed)
    win_rate = _nan_if(none, n_win / total)
    loss_rate = (n_closed - n_win - out["acc_even"]) / total
    avg_win_pnl = out["acc_win_pnl"] / t.where(n_win > 0, n_win, one)
    avg_lose_pnl = out["acc_lose_pnl"] / t.where(n_lose > 0, n_lose, one)
    # The open trade at the end: valued at the last close, no exit fees.
    osize, oep = out["open_size"], out["open_entry_price"]
    from .simulate import add_tolerant
    odiff = add_tolerant(osize * close[-1], -osize * oep)
    odiff = t.where(out["open_direction"] < 0, -odiff, odiff)
    open_pnl = t.where(out["open_trade"], odiff - out["open_entry_fees"], t.zeros_like(odiff))
    n_open = t.cast(out["open_trade"], close.dtype)
    return {
        "total_trades": n_closed + n_open, "total_closed_trades": n_closed,
        "total_open_trades": n_open, "open_trade_pnl": open_pnl, "win_rate": win_rate,
        "best_trade": _nan_if(none, out["acc_best"]),
        "worst_trade": _nan_if(none, out["acc_worst"]),
        "avg_winning_trade": _nan_if(n_win == 0,
                                     out["acc_win_ret"] / t.where(n_win > 0, n_win, one)),
        "avg_losing_trade": _nan_if(n_lose == 0,
                                    out["acc_lose_ret"] / t.where(n_lose > 0, n_lose, one)),
        "profit_factor": _nan_if(none, _div(out["acc_win_pnl"], t.abs(out["acc_lose_pnl"]))),
        "expectancy": _nan_if(none, win_rate * avg_win_pnl - loss_rate * t.abs(avg_lose_pnl)),
    }


def _return_metrics(out, ann_factor, risk_free, required_return):
    """Sharpe (ddof 1), Calmar, Omega and Sortino from the loop's running sums."""
    t = tf()
    s1, s2 = out["acc_r"], out["acc_r2"]
    n = t.cast(out["n_bars"], s1.dtype)
    mean = s1 / n
    var = t.maximum(s2 - s1 * mean, 0) / (n - 1)
    ann = t.constant(ann_factor, s1.dtype)
    sharpe = _inf_if_zero((mean - risk_free) * t.sqrt(ann), t.sqrt(var))
    dd = out["acc_cum_dd"]
    annual = (out["acc_cum"] / 100) ** (ann / n) - 1
    calmar = _nan_if(dd == 0, annual / t.abs(t.where(dd == 0, 1 + dd, dd)))
    omega = _inf_if_zero(out["acc_omega_pos"], -out["acc_omega_neg"])
    down = t.sqrt(out["acc_down2"] / n) * t.sqrt(ann)
    sortino = _inf_if_zero((mean - required_return) * ann, down)
    short = n < 2
    return {"sharpe_ratio": _nan_if(short, sharpe), "calmar_ratio": calmar,
            "omega_ratio": omega, "sortino_ratio": _nan_if(short, sortino)}


def rates(ann_factor, risk_free=0.0, required_return=0.0):
    """(risk-free, Omega's per-bar threshold, required return) for the loop's sums."""
    if ann_factor == 1:
        thresh = required_return
    else:
        thresh = (1 + required_return) ** (1.0 / ann_factor) - 1
    return (float(risk_free), float(thresh), float(required_return))


def stats_tensors(out, close, init_cash, ann_factor, risk_free=0.0, required_return=0.0):
    """The :data:`STATS` metrics ``{name: [c]}`` of a :func:`simulate_signals` run."""
    end = out["acc_end_value"] if "acc_end_value" in out else None
    stats = {"start_value": init_cash,
             "benchmark_return": close[-1] / close[0] - 1, "total_fees_paid": out["acc_fees"],
             "max_drawdown": _nan_if(~out["has_dd"], out["max_dd"]),
             "max_drawdown_duration": _nan_if(~out["has_dd"], out["max_dd_duration"])}
    end = out["prev_value"] if end is None else end
    stats["end_value"] = end
    stats["total_return"] = (end - init_cash) / init_cash
    stats.update(_trade_metrics(out, close))
    stats.update(_return_metrics(out, ann_factor, risk_free, required_return))
    return {k: stats[k] for k in STATS}


# -- inputs ----------------------------------------------------------------------------
def _column_param(value, name, n_cols, lo=None, strict=False, allow_nan=False):
    """A scalar or per-column keyword as a float64 ``[n_cols]`` array, checked."""
    arr = np.asarray(value.to_numpy() if hasattr(value, "to_numpy") else value,
                     dtype=np.float64).reshape(-1)
    if arr.size == 1:
        arr = np.repeat(arr, n_cols)
    if arr.size != n_cols:
        raise ValueError(f"{name} must be a scalar or one value per column ({n_cols}), got "
                         f"{arr.size} values")
    bad = ~np.isnan(arr) if allow_nan else np.ones(n_cols, dtype=bool)
    if np.any(np.isnan(arr[bad])) or (lo is not None and np.any(
            (arr[bad] <= lo) if strict else (arr[bad] < lo))):
        cond = f"> {lo}" if strict else f">= {lo}"
        raise ValueError(f"{name} must be {cond} (got {arr.tolist()[:5]}); "
                         + ("use None to turn the stop off" if allow_nan else "fix the value"))
    return arr


def _signal(x, name, shape):
    if x is None:
        return np.zeros(shape, dtype=bool)
    arr, _ = frame_of(x, name)
    if arr.dtype != bool:
        if not np.all(np.isin(arr, (0, 1))):
            raise TypeError(f"{name} must be boolean signals, got dtype {arr.dtype}")
        arr = arr.astype(bool)
    if arr.shape[0] != shape[0] or arr.shape[1] not in (1, shape[1]):
        raise ValueError(f"{name} has shape {list(arr.shape)}, close has {list(shape)}: give "
                         f"one signal per bar and column (or one column for all)")
    return np.broadcast_to(arr, shape)


def prepare(close, entries, exits, short_entries, short_exits, direction, open, high, low,
            price=None, **kw):
    """Checked numpy inputs of :func:`from_signals`: (bars, signals, params, labels)."""
    named = {"entries": entries, "exits": exits, "short_entries": short_entries,
             "short_exits": short_exits}
    bars, cols = bar_arrays(close, open, high, low, named, price)
    shape = bars["close"].shape
    c = shape[1]
    ent, ext = _signal(entries, "entries", shape), _signal(exits, "exits", shape)
    if short_entries is not None or short_exits is not None:
        signals = (ent, ext, _signal(short_entries, "short_entries", shape),
                   _signal(short_exits, "short_exits", shape))
    else:
        d = direction_codes(direction, c)
        none = np.zeros(shape, dtype=bool)
        signals = (np.where(d != 1, ent, none), np.where(d == 0, ext, none),
                   np.where(d == 1, ent, np.where(d == 2, ext, none)), np.where(d == 1, ext, none))
    params = column_params(c, n_bars=shape[0], close_1d=np.ndim(close) == 1, **kw)
    refuse_percent_reversal(params, signals)
    labels = cols if cols is not None and len(cols) == c else list(range(c))
    return bars, tuple(np.ascontiguousarray(s) for s in signals), params, labels


def _keyword(value, name, n_cols, bars, lo=None, strict=False, allow_nan=False):
    """A keyword as ``[n_cols]`` or, varying by bar, ``[bars, n_cols]`` float64, checked.

    ``bars``: ``(n_bars, close is 1-d)`` or None (one value per column only).
    """
    arr = None if bars is None else per_bar(value, name, bars[0], n_cols, bars[1])
    if arr is None:
        return _column_param(value, name, n_cols, lo, strict, allow_nan)
    flat = _column_param(arr.reshape(-1), name, arr.size, lo, strict, allow_nan)
    return flat.reshape(arr.shape)


def column_params(n_cols, init_cash=100.0, size=math.inf, fees=0.0, fixed_fees=0.0,
                  slippage=0.0, sl_stop=None, sl_trail=False, tp_stop=None, min_size=1e-8,
                  size_type="amount", upon_opposite_entry="reversereduce",
                  stop_entry_price="close", stop_exit_price="stoplimit", accumulate=False,
                  allow_partial=True, lock_cash=False, *, n_bars=None, close_1d=False):
    """Per-column keywords of :func:`from_signals`, checked, as float64 arrays.

    With ``n_bars`` (and ``close_1d``: whether close is 1-d) the keywords but
    ``init_cash`` may also vary by bar (``[n_bars, n_cols]``, see :func:`per_bar`).
    ``size_type`` and the modes of :data:`~flowsim.finance.orders.MODES` are in the
    result only when they are not vectorbt's defaults everywhere.
    """
    if isinstance(init_cash, str):
        raise ValueError(f"init_cash={init_cash!r} is not a number: from_signals takes "
                         f"init_cash='auto' or 'autoalign'; elsewhere give the cash")
    bars = None if n_bars is None else (n_bars, close_1d)
    off = {"lo": 0, "strict": True, "allow_nan": True}
    p = {"init_cash": _column_param(init_cash, "init_cash", n_cols, 0, strict=True),
         "size": _keyword(size, "size", n_cols, bars, 0, strict=True),
         "fees": _keyword(fees, "fees", n_cols, bars, 0),
         "fixed_fees": _keyword(fixed_fees, "fixed_fees", n_cols, bars, 0),
         "slippage": _keyword(slippage, "slippage", n_cols, bars, 0),
         "sl_stop": _keyword(math.nan if sl_stop is None else sl_stop, "sl_stop", n_cols,
                             bars, **off),
         "sl_trail": _keyword(sl_trail, "sl_trail", n_cols, bars),
         "tp_stop": _keyword(math.nan if tp_stop is None else tp_stop, "tp_stop", n_cols,
                             bars, **off),
         "min_size": _keyword(min_size, "min_size", n_cols, bars, 0)}
    if np.isinf(p["init_cash"]).any():
        raise ValueError("init_cash must be finite")
    codes = size_type_codes(size_type, n_cols)
    if np.any(codes != 0):
        p["size_type"] = codes
    whole = _keyword(allow_partial, "allow_partial", n_cols, bars)
    if np.any(whole == 0):
        p["allow_partial"] = whole
    locked = _keyword(lock_cash, "lock_cash", n_cols, bars)
    if np.any(locked != 0):
        p["lock_cash"] = locked
    p.update(mode_params(n_cols, upon_opposite_entry=upon_opposite_entry,
                         stop_entry_price=stop_entry_price, stop_exit_price=stop_exit_price,
                         accumulate=accumulate))
    return p


def auto_init_cash(bars, signals, params, dtype, mode):
    """``params`` with vectorbt's automatic ``init_cash``: the most cash the orders spend.

    vectorbt runs with infinite cash, then sets each column's cash to the lowest
    point of its cumulative cash flow (1 if it never goes below 0; ``"autoalign"``:
    the largest over the columns).  Here a first run with infinite cash gives the
    orders and the flows; the returned params run the same orders from that cash.
    """
    if np.isinf(params["size"]).any():
        raise ValueError(f"init_cash={mode!r} needs a finite size: with infinite cash, "
                         f"size=inf buys without limit (vectorbt: 'Attempt to go in long "
                         f"direction infinitely')")
    probe = dict(params, init_cash=np.full_like(params["init_cash"], np.inf))
    out = run_tensors(bars, signals, probe, dtype)
    size = np.asarray(out["order_size"], dtype=np.float64)
    flow = np.where(size != 0, -size * np.nan_to_num(np.asarray(out["order_price"])) -
                    np.asarray(out["order_fees"]), 0.0)
    flow = np.where(np.abs(flow) <= 1e-12, 0.0, flow)         # add_nb(0, flow)
    low = np.min(np.cumsum(flow, axis=0), axis=0)
    cash = np.where(low < 0, np.abs(low), 1.0)
    if mode == "autoalign":
        cash = np.full_like(cash, np.max(cash))
    return dict(params, init_cash=cash)


# -- the compiled run ----------------------------------------------------------------------
_COMPILED = {}


def compiled_simulate():
    """:func:`simulate_signals` as one ``tf.function(jit_compile=True)`` (made once)."""
    fn = _COMPILED.get("fn")
    if fn is None:
        fn = _COMPILED["fn"] = tf().function(simulate_signals, jit_compile=True,
                                             autograph=False)
    return fn


def run_tensors(bars, signals, params, dtype, loop_rates=(0.0, 0.0, 0.0), features=None):
    """Cast to ``dtype`` and run :func:`simulate_signals` (XLA-compiled, cached per dtype).

    ``features``: the loop's parts (default all: one compiled kernel serves every
    from_signals call of these shapes; ``"auto"``: only those the inputs use, see
    :func:`features_of`, faster per bar but one compilation per combination).
    """
    t = tf()
    fn = compiled_simulate()
    dt = t.as_dtype(dtype)
    b = {k: t.constant(v, dt) for k, v in bars.items()}
    s = tuple(t.constant(x) for x in signals)
    p = {k: (t.constant(params[k] != 0) if k == "sl_trail" else t.constant(params[k], dt))
         for k in COLUMN_PARAMS + ORDER_PARAMS if k in params}
    if features is None:
        features = FEATURES
    elif features == "auto":
        short = bool(signals[2].any() or signals[3].any())
        ohlc = not all(np.array_equal(bars[k], bars["close"]) for k in ("open", "high", "low"))
        features = features_of(params, short, ohlc)
    return fn(b, s, p, True, loop_rates, tuple(features))


class Portfolio:
    """Result of :func:`from_signals`: ``stats()``, ``value()``, ``returns()``, ``trades``.

    vectorbt's everyday accessors: ``total_return()``, ``sharpe_ratio()``,
    ``max_drawdown()``, ``cash()``, ``stats(column=...)``, ``trades``, ``positions``,
    ``drawdowns`` (records, see :mod:`flowsim.finance.accessors`) and ``plot()``.
    """

    def __init__(self, out, close, params, labels, ann, risk_free, required_return, index,
                 freq=None, freq_assumed=False, column_index=None, ndim=2):
        self._out = {k: v.numpy() for k, v in out.items()}
        #: 1 when the inputs were one-dimensional (``close`` a Series): reductions then
        #: give one value and ``stats()`` a Series, as vectorbt's ``wrap_reduced``
        self.ndim = 1 if ndim == 1 and len(labels) == 1 else 2
        self._close = close
        self._params = params
        self.columns = labels
        self._column_index = column_index     # the labels as a pandas Index (level names kept)
        self.index = index
        self.ann_factor = ann
        #: the bar length the ratios are annualised with; ``freq_assumed``: not given
        #: and not read from the index (one day assumed, where vectorbt has no ratios)
        self.freq, self.freq_assumed = freq, bool(freq_assumed)
        self.risk_free, self.required_return = risk_free, required_return
        self._cache = {}

    @property
    def name(self):
        """vectorbt's ``wrapper.name``: the one column's label when :attr:`ndim` is 1
        (None for the label 0 of an unnamed Series), else None."""
        from .accessors import series_name
        return series_name(self._labels()) if self.ndim == 1 else None

    def _labels(self):
        import pandas as pd
        if self._column_index is not None:
            return self._column_index
        return pd.Index(self.columns, tupleize_cols=False)

    def _wrap(self, a):
        """``a`` ``[bars, columns]`` as vectorbt wraps it: a DataFrame, or a Series named
        :attr:`name` when :attr:`ndim` is 1."""
        from .accessors import wrap_bars
        return wrap_bars(a, self.index, self._labels(), self.ndim)

    def value(self):
        """Equity curve (cash + position x close) per bar and column.

        >>> pf.value()

        Returns
        -------
        DataFrame ``[bars, columns]`` on the portfolio's index and columns; a Series
        named :attr:`name` when ``close`` was a Series (:attr:`ndim` 1), as vectorbt's.
        """
        return self._wrap(self._out["value"])

    def returns(self):
        """Bar returns of :meth:`value` (the first against ``init_cash``), shaped as
        :meth:`value`.

        >>> pf.returns()
        """
        t = tf()
        v = t.constant(self._out["value"])
        return self._wrap(_returns(v, t.constant(self._params["init_cash"])).numpy())

    def _assets(self):
        from .accessors import order_flows, order_records, running_sum
        o = self._out
        orders = order_records(o["order_size"], o["order_price"], o["order_fees"])
        flow, _ = order_flows(orders, o["order_size"].shape)
        return running_sum(flow, np.zeros(flow.shape[1]))

    def assets(self):
        """Position per bar and column after the bar's order (shares; negative when
        short), shaped as :meth:`value` (vectorbt's ``pf.assets()``).

        >>> pf.assets()
        """
        return self._wrap(self._assets())

    def asset_value(self):
        """Value of the position per bar and column, ``close x assets`` (negative when
        short), shaped as :meth:`value` (vectorbt's ``pf.asset_value()``).

        >>> pf.asset_value()
        """
        assets = self._assets()
        close = np.asarray(self._close, dtype=np.float64)
        return self._wrap(np.where(assets == 0, 0.0, close) * assets)

    def drawdown(self):
        """Fall of the cumulative returns below their running peak per bar and column
        (<= 0), shaped as :meth:`value` (vectorbt's ``pf.drawdown()``).

        >>> pf.drawdown()
        """
        from .accessors import drawdown_of_returns
        t = tf()
        v = t.constant(self._out["value"])
        returns = _returns(v, t.constant(self._params["init_cash"])).numpy()
        return self._wrap(drawdown_of_returns(returns))

    def _stats(self, risk_free=None):
        """:meth:`stats` as a DataFrame, with another per-bar ``risk_free`` if given."""
        import pandas as pd
        t = tf()
        risk_free = self.risk_free if risk_free is None else risk_free
        out = {k: t.constant(v) for k, v in self._out.items()}
        s = stats_tensors(out, t.constant(self._close), t.constant(self._params["init_cash"]),
                          self.ann_factor, risk_free, self.required_return)
        rows = {k: v.numpy() for k, v in s.items()}
        rows.update(self._record_stats())
        frame = pd.DataFrame({k: rows[k] for k in PORTFOLIO_STATS}, index=self._labels())
        frame.attrs.update(freq=self.freq, freq_assumed=self.freq_assumed,
                           ann_factor=self.ann_factor)
        return frame

    def _record_stats(self):
        """The metrics of :data:`PORTFOLIO_STATS` read from the index and the records."""
        from .accessors import gross_exposure, order_records, trade_durations
        o, n = self._out, len(self.index)
        c = len(self.columns)
        orders = order_records(o["order_size"], o["order_price"], o["order_fees"])
        exposure = gross_exposure(orders, np.asarray(self._close, dtype=np.float64),
                                  np.asarray(self._params["init_cash"], dtype=np.float64))
        won, lost = trade_durations(self._trade_records(), c)
        return {"start": [self.index[0]] * c, "end": [self.index[-1]] * c,
                "period": np.full(c, n, dtype=np.int64),
                "max_gross_exposure": np.max(exposure, axis=0),
                "avg_winning_trade_duration": won, "avg_losing_trade_duration": lost}

    def stats(self, column=None):
        """vectorbt's ``stats()`` metrics, one row per column (see :data:`PORTFOLIO_STATS`).

        >>> pf.stats()                  # DataFrame, one row per column
        >>> pf.stats(column="BTC")      # Series: one column's metrics
        >>> pf.stats()["max_gross_exposure"]    # most of the value held in positions

        The rows are vectorbt's 28, in its order, under snake_case names:
        ``start``, ``end`` (the first and last index values), ``period`` (bars),
        the :data:`STATS` metrics, ``max_gross_exposure`` (fraction) and
        ``avg_winning_trade_duration`` / ``avg_losing_trade_duration`` (bars, closed
        trades).  As vectorbt, a portfolio of a Series ``close`` (:attr:`ndim` 1)
        gives its metrics as a Series named :attr:`name`; vectorbt averages the
        columns of a wider one, flowsim keeps one row per column.

        Parameters
        ----------
        column : label or None
            A label of the portfolio's columns: the metrics of that column alone, as
            vectorbt's ``pf.stats(column=...)`` (under flowsim's names).

        Returns
        -------
        DataFrame (one row per column) or Series (``column`` given, or ``close`` a
        Series).  ``attrs`` holds
        ``freq`` (the bar length), ``freq_assumed`` and ``ann_factor``: the Sharpe,
        Calmar, Omega and Sortino ratios depend on them.
        """
        frame = self._stats()
        if column is None:
            if self.ndim == 1:
                row = frame.iloc[0].rename(self.name)
                row.attrs.update(frame.attrs)
                return row
            return frame
        labels = self._labels()
        try:
            found = column in labels
        except TypeError:
            found = False
        if not found:
            raise KeyError(f"column={column!r} is not a column of this portfolio; its "
                           f"columns are {list(labels)}")
        row = frame.loc[column]
        row.attrs.update(frame.attrs)
        return row

    def _metric(self, name, values):
        from .accessors import reduce_columns
        return reduce_columns(np.asarray(values, dtype=np.float64), self._labels(), name,
                              self.ndim)

    def total_return(self):
        """Total return per column, ``end value / init_cash - 1`` (vectorbt's
        ``pf.total_return()``).

        >>> pf.total_return()

        Returns
        -------
        Series named ``total_return``, one value per column; a float when ``close``
        was a Series (:attr:`ndim` 1), as vectorbt's.
        """
        return self._metric("total_return", self._stats()["total_return"])

    def sharpe_ratio(self, risk_free=None):
        """Annualised Sharpe ratio of the bar returns per column (vectorbt's
        ``pf.sharpe_ratio()``): ``mean(r - risk_free) / std(r, ddof=1) *
        sqrt(ann_factor)``, annualised as :meth:`stats` (``pf.ann_factor``).

        >>> pf.sharpe_ratio()
        >>> pf.sharpe_ratio(risk_free=0.0001)     # a per-bar rate

        Parameters
        ----------
        risk_free : float or None
            Per-bar risk-free rate; default the one given to :func:`from_signals`.

        Returns
        -------
        Series named ``sharpe_ratio``, one value per column (inf for returns
        without spread, NaN under two bars, as in vectorbt); ``attrs`` as
        :meth:`stats`'s (``freq``, ``freq_assumed``, ``ann_factor``).  A float when
        ``close`` was a Series (:attr:`ndim` 1), as vectorbt's.
        """
        if risk_free is not None and (isinstance(risk_free, bool) or not isinstance(
                risk_free, numbers.Real) or not math.isfinite(risk_free)):
            raise ValueError(f"risk_free must be a finite number (a per-bar rate), got "
                             f"{risk_free!r}")
        frame = self._stats(risk_free)
        out = self._metric("sharpe_ratio", frame["sharpe_ratio"])
        if self.ndim == 2:
            out.attrs.update(frame.attrs)
        return out

    def final_value(self):
        """Value at the last bar per column (vectorbt's ``pf.final_value()``).

        >>> pf.final_value()

        Returns
        -------
        Series named ``final_value``, one value per column (a float when ``close``
        was a Series).
        """
        return self._metric("final_value", self._out["value"][-1])

    @property
    def close(self):
        """The close per bar and column (vectorbt's ``pf.close``), shaped as :meth:`value`."""
        return self._wrap(np.asarray(self._close))

    def max_drawdown(self):
        """Deepest fall of the cumulative returns from their running peak, per column
        (<= 0; 0 without a fall), vectorbt's ``pf.max_drawdown()``.

        >>> pf.max_drawdown()

        Returns
        -------
        Series named ``max_drawdown``, one value per column (a float when ``close``
        was a Series).  ``pf.drawdowns.max_drawdown()``
        is the same fall read from the drawdown records (NaN where there is none),
        as ``stats()["max_drawdown"]``.
        """
        return self._metric("max_drawdown", self._out["acc_cum_dd"])

    def cash(self):
        """Cash balance per bar and column (vectorbt's ``pf.cash()``: a short sale adds
        its proceeds).

        >>> pf.cash()

        Returns
        -------
        DataFrame ``[bars, columns]`` on the portfolio's index and columns; a Series
        named :attr:`name` when ``close`` was a Series (:attr:`ndim` 1), as vectorbt's.
        """
        from .accessors import cash_balance
        o = self._out
        return self._wrap(cash_balance(o["order_size"], o["order_price"], o["order_fees"],
                                       self._params["init_cash"]))

    @property
    def orders(self):
        """Filled orders (vectorbt's ``pf.orders``), per column by bar.

        >>> pf.orders.records_readable       # vectorbt's table
        >>> pf.orders.count(), pf.orders.buy.count(), pf.orders.fees_paid()
        >>> pf.orders["side"]                # the table of lower-case names, ``.frame``

        An :class:`~flowsim.finance.accessors.Orders`.  Indexing and DataFrame
        attributes read :attr:`~flowsim.finance.accessors.Orders.frame`: columns
        ``column, idx, size (> 0), price, fees, side ("buy"/"sell")``.
        """
        from .accessors import Orders, order_records
        o = self._out
        return Orders(order_records(o["order_size"], o["order_price"], o["order_fees"]),
                      self._labels(), self.index, self.ndim)

    def _trade_records(self):
        from .accessors import exit_trade_records
        if "trades" not in self._cache:
            self._cache["trades"] = exit_trade_records(self._out, self._close)
        return self._cache["trades"]

    @property
    def trades(self):
        """Exit trades (vectorbt's ``pf.trades``), closed then the open one, per column.

        >>> pf.trades.records_readable       # vectorbt's table
        >>> pf.trades.win_rate(), pf.trades.count()
        >>> pf.trades["pnl"]                 # the table of lower-case names, ``.frame``

        A :class:`~flowsim.finance.accessors.Trades`.  Indexing and DataFrame
        attributes read :attr:`~flowsim.finance.accessors.Trades.frame`: columns
        ``column, size, entry_idx, entry_price, entry_fees, exit_idx, exit_price,
        exit_fees, pnl, return, direction ("long"/"short"), status
        ("closed"/"open")``; ``pnl`` and ``return`` are net of fees, the return
        relative to ``size * entry_price``.
        """
        from .accessors import Trades
        return Trades(self._trade_records(), self._labels(), self.index, self.ndim)

    @property
    def positions(self):
        """Positions (vectorbt's ``pf.positions``): the exit trades of one entry merged.

        >>> pf.positions.records_readable, pf.positions.count()
        """
        from .accessors import Positions, position_records
        return Positions(position_records(self._trade_records()), self._labels(), self.index,
                         self.ndim)

    @property
    def drawdowns(self):
        """Drawdowns of the value (vectorbt's ``pf.drawdowns``).

        >>> pf.drawdowns.records_readable, pf.drawdowns.count()
        >>> pf.drawdowns.max_drawdown()
        """
        from .accessors import Drawdowns, drawdown_records
        return Drawdowns(drawdown_records(self._out["value"]), self._labels(), self.index,
                         self.ndim)

    def plot(self, column=None, subplots=("orders", "trade_pnl", "cum_returns"), **kwargs):
        """vectorbt's default ``pf.plot()`` with matplotlib: orders on the price, the
        trades' PnL, the cumulative returns against the benchmark's.

        >>> fig = pf.plot(column="BTC")
        >>> fig.savefig("backtest.png")

        Parameters
        ----------
        column : label or None
            The column to draw; needed when the portfolio has several.
        subplots : sequence of str
            Some of ``"orders"``, ``"trade_pnl"``, ``"cum_returns"``, in order.
        **kwargs
            ``axes`` and ``title`` of :func:`flowsim.finance.plots.portfolio`.

        Returns
        -------
        matplotlib.figure.Figure
        """
        from .plots import portfolio
        return portfolio(self, column=column, subplots=subplots, **kwargs)


def from_signals(close, entries=None, exits=None, *, short_entries=None, short_exits=None,
                 direction="longonly", init_cash=100.0, size=math.inf, fees=0.0, fixed_fees=0.0,
                 slippage=0.0, sl_stop=None, sl_trail=False, tp_stop=None, open=None, high=None,
                 low=None, price=None, freq=None,
                 year_freq="365 days", risk_free=0.0, required_return=0.0,
                 min_size=1e-8, size_type="amount", upon_opposite_entry="reversereduce",
                 stop_entry_price="close", stop_exit_price="stoplimit", accumulate=False,
                 allow_partial=True, lock_cash=False, dtype="float64", group_by=None,
                 cash_sharing=False, call_seq="default"):
    """Backtest entry/exit signals the way vectorbt's ``Portfolio.from_signals`` does.

    Orders fill at the bar's close; ``slippage`` moves the fill against the
    trade (buys at ``close * (1 + slippage)``, sells at ``close * (1 -
    slippage)``); fees are ``fees * size * price + fixed_fees`` per order.  With
    ``size=inf`` an entry spends all the cash (net of fees); an exit closes the
    whole position; an entry in the opposite direction reverses it.  An entry
    and an exit on one bar cancel (vectorbt's default "ignore").  Stops
    (``sl_stop``, ``tp_stop``: fractions of the entry bar's close, checked from
    the next bar, stop-loss first) fill at the stop level without slippage, or
    at the open when the bar opens past it, on ``high`` / ``low`` when given
    (else on the close); a stop replaces every other signal of its bar; a
    trailing stop (``sl_trail=True``) raises its reference to the bar's high
    after the bar's check.

    Parameters
    ----------
    close : Series, DataFrame or array [bars] / [bars, columns]
        Prices, finite and > 0 (fill or drop missing bars first).
    entries, exits : bool, same shape (or one column for all)
        Signals; in ``direction="shortonly"`` they open / close shorts; in
        ``"both"`` entries go long and exits go short.
    short_entries, short_exits : bool or None
        Give them to trade both sides with four signals (then ``entries`` /
        ``exits`` are the long ones and ``direction`` is ignored).
    direction : "longonly" (default), "shortonly" or "both" (or vectorbt's codes 0, 1,
        2); scalar or per column.
    init_cash : float, default 100; or ``"auto"``: each column starts with the most
        cash its orders spend (1 if they never spend), ``"autoalign"``: the largest
        of those for every column (vectorbt's ``InitCashMode``; needs a finite
        ``size``).  size : float, default inf (all cash), else
        shares per order.  fees : fraction (0.001 = 0.1 %), default 0.
        fixed_fees : cash per order, default 0.  slippage : fraction, default 0.
    sl_stop, tp_stop : float in (0, inf) or None (off); scalar or per column
        (NaN in a column turns it off there).  sl_trail : bool, default False.
    open, high, low : like ``close`` or None
        Bars for the stop checks (without them the close is used).
    price : like ``close`` or None
        Where signal orders fill instead of the close (vectorbt's ``price``); e.g.
        the next bar's open with signals shifted by one bar, as backtrader fills
        market orders.  The value is still marked at the close.
    freq : "1D", "D", "1h", "h", "15min", a timedelta, or None (default)
        Bar length; the annualisation factor is ``year_freq / freq``
        (``year_freq`` default "365 days", vectorbt's).  None reads it from a
        datetime index, as vectorbt does (hourly bars: one hour); without one
        (plain arrays, irregular or business-day bars) one day is assumed with a
        warning, and ``pf.freq_assumed`` / ``stats().attrs["freq_assumed"]`` say
        so.  Use ``freq="1D", year_freq="252 days"`` for trading days.
    risk_free, required_return : float, default 0
        Per-bar rates used by the Sharpe / Omega and Sortino / Omega ratios.
    min_size : float, default 1e-8 (vectorbt's); smaller orders are rejected.
    size_type : {"amount", "value", "percent"}
        "amount" (default: ``size`` in shares), "value" (in cash, at the bar's
        order price before stops) or "percent" (a fraction of the cash, or of the
        largest short, for an entry; not where a position could reverse); scalar
        or per column.  The target kinds are refused: vectorbt's from_signals
        refuses them too.

    accumulate : bool or str
        False (default), True or "both": an entry in the position's direction
        adds ``size``, an exit takes ``size`` off; "addonly", "removeonly": only
        that half (vectorbt's ``AccumulationMode``).  A stop still closes the
        whole position; a stop is measured anew when the position grows.
    allow_partial : bool
        True (default); False: an order of a finite size that cash (or the
        position, for an exit that asks more) cannot fill whole is rejected.
    lock_cash : bool
        False (default); True: shorts only as far as the free cash covers them,
        and a buy spends only free cash (vectorbt's ``lock_cash``).
    upon_opposite_entry : str
        "reversereduce" (default) or "reverse": an entry against the position
        reverses it (with ``accumulate``, "reversereduce" takes ``size`` off);
        "close" or "closereduce" (the same with ``accumulate``): closes it;
        "ignore".
    stop_entry_price : str
        What stops are measured from: "close" (default, the entry bar's close),
        "price" or "valprice" (the order price, e.g. ``price=``'s next open),
        "fillprice" (the fill, slippage included).
    stop_exit_price : str
        Where a stop fills: "stoplimit" (default: at the stop level, or the open
        past it, without slippage), "stopmarket" (the same with slippage),
        "price" (the bar's order price) or "close", with slippage.

    ``size``, ``fees``, ``fixed_fees``, ``slippage``, ``sl_stop``, ``sl_trail``,
    ``tp_stop`` and ``min_size`` may also vary by bar, broadcast against ``close``
    as vectorbt broadcasts them (numpy's rules): a ``[bars, columns]`` or
    ``[bars, 1]`` array or DataFrame on ``close``'s index, or a 1-d one when
    ``close`` is 1-d.  A stop is read on the bar its position is entered.
    dtype : "float64" (default) or "float32".
    group_by : None (default), True, a column level or one group label per column
        Groups the columns (vectorbt's ``group_by``); the result is a
        :class:`~flowsim.finance.grouped.GroupPortfolio` reporting per group.
    cash_sharing : bool
        False (default); True: each group's columns share one cash balance
        (``init_cash`` per group) and run in ``call_seq`` order on each bar.
    call_seq : "default", "reversed", "auto" or an array
        The columns' order within a group on each bar: column order, reversed,
        sells before buys (vectorbt's "auto": sorted by approximate order value),
        or each group's order per bar.  Grouped runs take every other keyword too
        (``init_cash="auto"`` only with ``cash_sharing``: each cash group's).

    Pandas inputs are lined up as vectorbt lines them up (see
    :mod:`flowsim.finance.align`): an input whose index differs from ``close``'s is
    refused, naming it; columns with the same count are matched by position and
    labelled with every differing label (a MultiIndex), different counts aligned
    by the column levels they share.

    Returns a :class:`Portfolio`.  Values are vectorbt's, as its accessor methods
    return them: fractions (``stats()`` in vectorbt prints percentages), a
    negative ``max_drawdown``, durations in bars.  As in vectorbt, when ``close``
    and the other inputs are one-dimensional (a Series), reductions such as
    ``pf.total_return()`` are scalars and ``pf.stats()`` is a Series.
    """
    import pandas as pd
    cash_mode = init_cash_mode(init_cash)
    given, index, columns = conform(
        {"price": price, "open": open, "high": high, "low": low, "close": close,
         "entries": entries, "exits": exits, "short_entries": short_entries,
         "short_exits": short_exits})
    keywords = {"init_cash": 100.0 if cash_mode else init_cash, "size": size, "fees": fees,
                "fixed_fees": fixed_fees, "slippage": slippage, "sl_stop": sl_stop,
                "sl_trail": sl_trail, "tp_stop": tp_stop, "min_size": min_size,
                "size_type": size_type, "upon_opposite_entry": upon_opposite_entry,
                "stop_entry_price": stop_entry_price, "stop_exit_price": stop_exit_price,
                "accumulate": accumulate, "allow_partial": allow_partial,
                "lock_cash": lock_cash}
    keywords = bar_keywords(keywords, index)
    bars, signals, params, labels = prepare(
        given["close"], given["entries"], given["exits"], given["short_entries"],
        given["short_exits"], direction, given["open"], given["high"], given["low"],
        given["price"], **keywords)
    check_column_keywords(keywords, columns)
    if columns is None or len(columns) != len(labels):
        columns = None
    else:
        labels = list(columns)
    if dtype not in ("float32", "float64"):
        raise ValueError(f"dtype must be 'float32' or 'float64', got {dtype!r}")
    for name, v in (("risk_free", risk_free), ("required_return", required_return)):
        if isinstance(v, bool) or not isinstance(v, numbers.Real) or not math.isfinite(v):
            raise ValueError(f"{name} must be a finite number (a per-bar rate), got {v!r}")
    ann_factor(freq, year_freq)                   # the checks of freq and year_freq
    step, assumed = bar_length(freq, index)
    ann = ann_factor(step, year_freq)
    if is_grouped(group_by, cash_sharing):
        return grouped_signals(bars, signals, params, labels, columns, index,
                               group_by=group_by, cash_sharing=cash_sharing,
                               call_seq=call_seq, timing=(ann, step, assumed), dtype=dtype,
                               init_cash_mode=cash_mode,
                               ndim=result_ndim(list(given.values()) + list(keywords.values())))
    if cash_mode:
        params = auto_init_cash(bars, signals, params, dtype, cash_mode)
    out = run_tensors(bars, signals, params, dtype, rates(ann, risk_free, required_return))
    if index is None:
        index = pd.RangeIndex(bars["close"].shape[0])
    p64 = {k: np.asarray(v, dtype=np.dtype(dtype)) for k, v in params.items()}
    return Portfolio(out, bars["close"].astype(dtype), p64, labels, ann, risk_free,
                     required_return, index, freq=step, freq_assumed=assumed,
                     column_index=columns, ndim=result_ndim(list(given.values()) +
                                                            list(keywords.values())))
