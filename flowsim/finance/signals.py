"""``signal_sweep``: every parameter row of a signal strategy through ``from_signals``.

    >>> grid = pd.DataFrame(itertools.product([7, 14, 21], [25, 30], [70, 75], [0.02, 0.05]),
    ...                     columns=["window", "lower", "upper", "sl_stop"])
    >>> table = signal_sweep(strategies.rsi_thresholds, close, grid, fees=0.001, freq="1D")

A :class:`flowsim.Sweep` runs blocks of parameter rows: for each block the
strategy makes its signals ``[bars, rows, assets]``, the portfolio loop
(:func:`flowsim.finance.simulate.simulate_signals`, XLA-compiled) runs every
(row, asset) pair as one column and the block returns only the metrics, so memory
is bounded by the block and every row sees the same operations whatever the
block, the ``events_limit`` or the backend: the same bits on each.
"""
import collections
import math
import threading

import numpy as np

from ..core.lazy_tf import tf
from .align import bar_length, common_index
from .orders import ORDER_PARAMS
from .portfolio import (
    STATS,
    ann_factor,
    column_params,
    compiled_simulate,
    direction_codes,
    rates,
    stats_tensors,
)
from .simulate import COLUMN_PARAMS, FEATURES, features_of

#: The ``params`` column that sets ``direction`` per row (names or vectorbt's codes).
DIRECTION_COLUMN = "direction"
#: from_signals keywords a ``params`` column may set per row.
ROW_KEYWORDS = ("init_cash", "size", "fees", "fixed_fees", "slippage", "sl_stop", "sl_trail",
                "tp_stop")
_COUNTS = ("total_trades", "total_closed_trades", "total_open_trades")


class SignalKernel:
    """``kernel(params, data)`` of the sweep: signals, portfolio loop, metrics.

    ``params`` columns: the strategy's ``n_strategy`` parameters, then the
    ``row_keywords`` (per-row from_signals keywords); ``fixed`` holds the other
    keywords (scalars or per asset).  Picklable when ``strategy`` is a
    module-level function.
    """

    def __init__(self, strategy, n_strategy, row_keywords, fixed, direction, ann, risk_free=0.0,
                 required_return=0.0, features=FEATURES):
        self.strategy, self.n_strategy = strategy, int(n_strategy)
        self.row_keywords = tuple(row_keywords)
        self.fixed = {k: np.asarray(v, dtype=np.float64) for k, v in fixed.items()}
        self.direction = int(direction)
        self.ann, self.risk_free, self.required_return = float(ann), risk_free, required_return
        # the loop's optional parts (stops, bars) this grid uses; "short" is decided
        # when tracing, from the strategy's signals and the direction
        self.features = tuple(f for f in features if f != "short")

    def __call__(self, params, data):
        return tf().autograph.experimental.do_not_convert(self._run)(params, data)

    def _signals(self, params, data, cols):
        t = tf()
        sig = self.strategy(params[:, :self.n_strategy], data)
        if not isinstance(sig, dict) or "entries" not in sig or "exits" not in sig:
            raise TypeError("strategy must return a dict with 'entries' and 'exits' "
                            "[bars, rows, assets] (and optionally short_entries/short_exits)")
        n = t.shape(data["close"])[0]

        def flat(name):
            x = t.cast(sig[name], t.bool)
            return t.reshape(t.broadcast_to(x, [n, t.shape(params)[0], t.shape(data["close"])[1]]),
                             [n, cols])

        le, lx = flat("entries"), flat("exits")
        if "short_entries" in sig or "short_exits" in sig:
            none = t.zeros_like(le)
            se = flat("short_entries") if "short_entries" in sig else none
            sx = flat("short_exits") if "short_exits" in sig else none
            return le, lx, se, sx
        d = self.direction
        if d == 0:
            return le, lx, None, None             # long only: the loop drops the short terms
        none = t.zeros_like(le)
        return ((le if d != 1 else none), (lx if d == 0 else none),
                (le if d == 1 else (lx if d == 2 else none)), (lx if d == 1 else none))

    def _run(self, params, data):
        t = tf()
        close = data["close"]
        dtype = close.dtype
        rows = t.shape(params)[0]
        assets = int(close.shape[1])
        cols = rows * assets
        signals = self._signals(params, data, cols)
        features = self.features + (("short",) if signals[2] is not None else ())
        loop_bars = ("close", "price") + (("open", "high", "low") if "ohlc" in features else ())
        bars = {k: t.cast(data[k], dtype) for k in loop_bars if k in data}
        p = self._params(params, rows, assets, dtype)
        out = compiled_simulate()(bars, signals, p, False,
                                  rates(self.ann, self.risk_free, self.required_return), features)
        ends = t.tile(t.stack([close[0], close[-1]]), [1, rows])    # first and last close
        stats = stats_tensors(out, ends, p["init_cash"], self.ann, self.risk_free,
                              self.required_return)
        return {k: t.reshape(v, [rows, assets]) for k, v in stats.items()}

    def _params(self, params, rows, assets, dtype):
        """The loop's parameters of the block's columns: per-row ones repeated over the
        assets, fixed ones (per asset, or per bar and asset) tiled over the rows."""
        t = tf()
        p = {}
        for k in COLUMN_PARAMS + ORDER_PARAMS:
            if k in self.row_keywords:
                j = self.n_strategy + self.row_keywords.index(k)
                p[k] = t.repeat(t.cast(params[:, j], dtype), assets)
            elif k in self.fixed:
                fixed = t.constant(self.fixed[k], dtype)
                p[k] = t.tile(fixed, [1, rows] if fixed.shape.rank == 2 else [rows])
        p["sl_trail"] = p["sl_trail"] != 0
        return p

    def key(self):
        """What the compiled graph depends on (the fixed keywords are constants in it)."""
        return (self.strategy, self.n_strategy, self.row_keywords, self.direction, self.ann,
                self.risk_free, self.required_return, self.features,
                tuple((k, v.tobytes()) for k, v in sorted(self.fixed.items())))

    def __repr__(self):
        name = getattr(self.strategy, "__qualname__", repr(self.strategy))
        return (f"SignalKernel({name}, rows keywords {self.row_keywords}, "
                f"direction {self.direction})")


#: Sweeps kept with their compiled blocks, keyed by kernel and shapes: a new grid or
#: new prices of the same shapes run without retracing (XLA compiles for seconds).
_SWEEPS = collections.OrderedDict()
_LOCK = threading.Lock()
_MAX = 6


def _cached(sim):
    """The cached Sweep of ``sim``'s kernel and shapes, given ``sim``'s arrays."""
    key = (sim.kernel.key(), sim.params.shape, sim.block_rows,
           tuple((k, v.shape) for k, v in sorted(sim.data.items())))
    with _LOCK:
        entry = _SWEEPS.pop(key, None) or (sim, threading.Lock())
        _SWEEPS[key] = entry
        while len(_SWEEPS) > _MAX:
            _SWEEPS.popitem(last=False)
    cached, lock = entry
    cached.params, cached.data = sim.params, sim.data
    return cached, lock


def _asset_frame(x, name, n_bars=None):
    cols = None
    if hasattr(x, "columns"):
        cols = [str(c) for c in x.columns]
        x = x.to_numpy()
    elif hasattr(x, "to_numpy"):
        x = x.to_numpy()
    a = np.asarray(x, dtype=np.float64)
    if a.ndim == 1:
        a = a[:, None]
    if a.ndim != 2:
        raise ValueError(f"{name} must be [bars] or [bars, assets], got shape {list(a.shape)}")
    if n_bars is not None and a.shape[0] != n_bars:
        raise ValueError(f"{name} has {a.shape[0]} bars but close has {n_bars}")
    return a, cols


def _strategy_columns(strategy, rest):
    """The strategy's parameter columns in its order, checked against ``strategy.params``."""
    wanted = getattr(strategy, "params", None)
    if wanted is None:
        return rest
    missing = [c for c in wanted if c not in rest]
    extra = [c for c in rest if c not in wanted]
    if missing or extra:
        raise ValueError(f"params columns must be the strategy's {list(wanted)} plus "
                         f"from_signals keywords {list(ROW_KEYWORDS)}; missing {missing}, "
                         f"unknown {extra}")
    return list(wanted)


def _split_params(strategy, params):
    """(strategy names, row-keyword names, float64 array [rows, k]) from a DataFrame."""
    if not hasattr(params, "columns"):
        raise TypeError(f"params must be a pandas DataFrame, one row per combination, got "
                        f"{type(params).__name__}")
    if len(params) == 0:
        raise ValueError("params must have at least one row")
    names = [str(c) for c in params.columns]
    kw = [c for c in names if c in ROW_KEYWORDS]
    rest = _strategy_columns(strategy, [c for c in names if c not in ROW_KEYWORDS])
    arr = params[rest + kw].to_numpy(dtype=np.float64)
    if np.isnan(arr[:, :len(rest)]).any():
        raise ValueError("params: strategy parameters must not be NaN")
    return rest, kw, arr


def _check_rows(kw, arr, k0):
    for j, name in enumerate(kw):
        v = arr[:, k0 + j]
        column_params(len(v), **{name: v})   # same checks and messages as from_signals


def _strategy_data(c, **given):
    """The strategy's data: close and the given bars (gaps in open/high/low filled)."""
    n = c.shape[0]
    data = {"close": c}
    for name, x in given.items():
        if x is not None:
            data[name] = np.broadcast_to(_asset_frame(x, name, n)[0], c.shape).copy()
    o = np.where(np.isnan(data.get("open", c)), c, data.get("open", c))
    data["open"] = o
    data["low"] = np.where(np.isnan(data.get("low", np.minimum(o, c))), np.minimum(o, c),
                           data.get("low", np.minimum(o, c)))
    data["high"] = np.where(np.isnan(data.get("high", np.maximum(o, c))), np.maximum(o, c),
                            data.get("high", np.maximum(o, c)))
    return data


def _grid_features(data, fixed, rows):
    """The loop's optional parts the whole grid uses (the same kernel for every block)."""
    used = dict(fixed)
    used.update(rows)
    ohlc = not all(np.array_equal(data[k], data["close"]) for k in ("open", "high", "low"))
    return features_of(used, True, ohlc)


def signal_simulation(strategy, close, params, *, direction="longonly", open=None, high=None,
                      low=None, volume=None, price=None, freq=None, year_freq="365 days",
                      risk_free=0.0,
                      required_return=0.0, block_size=None, cash_sharing=False,
                      call_seq="default", **portfolio_kw):
    """The :class:`flowsim.Sweep` that :func:`signal_sweep` runs, and its table's layout.

    Returns ``(sweep, names, assets)``: the Sweep (a Simulation: any Flow runs it
    with ``block_size=sweep.block_rows``), the parameter names and the asset labels.
    """
    from ..algorithms.sweep import Sweep
    if not callable(strategy):
        raise TypeError(f"strategy must be a callable strategy(params, data), got {strategy!r}")
    index = common_index({"close": close, "open": open, "high": high, "low": low,
                          "volume": volume, "price": price})
    c, assets = _asset_frame(close, "close")
    if not np.all(np.isfinite(c)) or np.any(c <= 0):
        raise ValueError("close must be finite and > 0 (no NaN): drop or fill missing bars first")
    data = _strategy_data(c, open=open, high=high, low=low, volume=volume, price=price)
    names, kw, arr = _split_params(strategy, params)
    known = ROW_KEYWORDS + ("min_size", "size_type", "upon_opposite_entry", "stop_entry_price",
                            "stop_exit_price", "accumulate", "allow_partial", "lock_cash")
    bad = [k for k in portfolio_kw if k not in known]
    if bad:
        raise TypeError(f"signal_sweep got unknown keywords {bad}; from_signals keywords are "
                        f"{list(known)}")
    both = [k for k in kw if k in portfolio_kw]
    if both:
        raise ValueError(f"{both} given both as params columns and as keywords: choose one")
    _check_rows(kw, arr, len(names))
    fixed = column_params(c.shape[1], n_bars=c.shape[0], close_1d=np.ndim(close) == 1,
                          **portfolio_kw)
    code = direction_codes(direction, 1)[0]
    ann_factor(freq, year_freq)                   # the checks of freq and year_freq
    step, assumed = bar_length(freq, index)
    kernel = SignalKernel(strategy, len(names), kw, fixed, code, ann_factor(step, year_freq),
                          risk_free, required_return,
                          _grid_features(data, fixed, {k: arr[:, len(names) + j]
                                                       for j, k in enumerate(kw)}))
    if cash_sharing:
        kernel = group_kernel(kernel, call_seq)
    kernel.freq, kernel.freq_assumed = step, assumed
    if block_size is None:
        from ..core.blocks import default_block_size
        block_size = default_block_size(arr.shape[0], max_block=max(1, 1024 // c.shape[1]))
    labels = assets if assets is not None else [str(j) for j in range(c.shape[1])]
    return Sweep(kernel, arr, data, block_rows=block_size), names + kw, labels


def signal_sweep(strategy, close, params, *, direction="longonly", open=None, high=None,
                 low=None, volume=None, price=None, freq=None, year_freq="365 days",
                 risk_free=0.0,
                 required_return=0.0, dtype="float64", backend=None, block_size=None,
                 events_limit=None, flow_kwargs=None, cash_sharing=False, call_seq="default",
                 **portfolio_kw):
    """Backtest a signal strategy for every row of ``params`` on every asset at once.

    Parameters
    ----------
    strategy : callable
        ``strategy(params, data)`` (see :mod:`flowsim.finance.strategies`):
        ``rsi_thresholds``, ``ma_crossover``, ``macd_cross``, ``bbands_reversion``
        or your own TF function returning ``entries`` / ``exits`` (and short
        signals) ``[bars, rows, assets]``.
    close : Series, DataFrame or array [bars] / [bars, assets]
        Prices, finite and > 0; every parameter row runs on every asset.
    params : DataFrame
        One row per combination.  Columns named like a from_signals keyword
        (``sl_stop``, ``tp_stop``, ``sl_trail``, ``fees``, ``fixed_fees``,
        ``slippage``, ``size``, ``init_cash``) set that keyword per row, and so
        does a ``direction`` column ("longonly", "shortonly", "both" or vectorbt's
        codes; the rows of each direction run as one sweep, the table keeps the
        grid's order); the others are the strategy's parameters (its ``params``
        names).
    direction, freq, year_freq, risk_free, required_return, open, high, low, price :
        As in :func:`flowsim.finance.from_signals` (``volume`` reaches the
        strategy's ``data`` only): pandas bars must share one index, and
        ``freq=None`` reads the bar length from it (``table.attrs`` holds
        ``freq``, ``freq_assumed`` and ``ann_factor``).
    dtype : "float64" (default) or "float32" (see the precision table in the docs).
    backend : None (one device), "threads", "mpi", "spark".
    block_size : parameter rows per block (a multiple of 64; default: at most
        1024 / assets); memory grows with ``block_size x assets x bars``.
    events_limit : rows per device call (default all); never changes the bits.
    flow_kwargs : dict of other :class:`flowsim.Flow` options.  The portfolio loop
        is always XLA-compiled; ``{"jit_compile": True}`` compiles the whole block
        (indicators, signals, metrics too) and costs a longer first call.  Either
        way the table has the same bits for every ``block_size``,
        ``events_limit`` and backend (NaN where NaN: compare tables with
        ``DataFrame.equals``, not ``==``); with and without ``jit_compile`` the
        values may differ in the last bits.
    cash_sharing : bool
        False (default); True: each combination trades all the assets from one
        cash balance (vectorbt's ``group_by`` of its columns with
        ``cash_sharing=True``); the table has one row per combination with the
        :data:`~flowsim.finance.grouped.GROUP_STATS` metrics.
    call_seq : "default" or "auto"
        With ``cash_sharing``: the assets in column order on each bar, or sells
        first (vectorbt's "auto").
    **portfolio_kw : the other from_signals keywords, scalar or per asset.

    Returns a :class:`pandas.DataFrame`, one row per (combination, asset) in
    combination order: the parameters, ``asset`` (when there are several), then the
    :data:`flowsim.finance.STATS` metrics (counts as integers).
    """
    import pandas as pd

    from ..algorithms.sweep import run_rows
    if hasattr(params, "columns") and DIRECTION_COLUMN in params.columns:
        return _sweep_by_direction(
            strategy, close, params, direction, dict(
                open=open, high=high, low=low, volume=volume, price=price, freq=freq,
                year_freq=year_freq, risk_free=risk_free, required_return=required_return,
                dtype=dtype, backend=backend, block_size=block_size,
                events_limit=events_limit, flow_kwargs=flow_kwargs,
                cash_sharing=cash_sharing, call_seq=call_seq, **portfolio_kw))
    sim, names, assets = signal_simulation(
        strategy, close, params, direction=direction, open=open, high=high, low=low,
        volume=volume, price=price, freq=freq, year_freq=year_freq, risk_free=risk_free,
        required_return=required_return, block_size=block_size, cash_sharing=cash_sharing,
        call_seq=call_seq, **portfolio_kw)
    if dtype not in ("float32", "float64"):
        raise ValueError(f"dtype must be 'float32' or 'float64', got {dtype!r}")
    kwargs = {"jit_compile": False, **(flow_kwargs or {})}
    cached, lock = _cached(sim)
    with lock:
        out = run_rows(cached, backend, dtype, events_limit, **kwargs)
    frame = pd.DataFrame(_table(sim, names, assets, out, cash_sharing))
    frame.attrs.update(freq=sim.kernel.freq, freq_assumed=sim.kernel.freq_assumed,
                       ann_factor=sim.kernel.ann)
    for j, name in enumerate(names):
        col = sim.params[:, j]
        if np.all(col == np.round(col)) and np.all(np.isfinite(col)):
            frame[name] = frame[name].astype(np.int64)
    return frame


def _sweep_by_direction(strategy, close, params, direction, kw):
    """:func:`signal_sweep` of a grid with a ``direction`` column: one sweep per direction
    (the direction is part of the compiled loop), the rows back in the grid's order."""
    import pandas as pd
    if not (isinstance(direction, str) and direction == "longonly"):
        raise ValueError(f"direction is a column of params and the keyword direction="
                         f"{direction!r}: give one of them")
    if len(params) == 0:
        raise ValueError("params must have at least one row")
    codes = direction_codes(params[DIRECTION_COLUMN].to_numpy(), len(params))
    parts = []
    for code in dict.fromkeys(codes.tolist()):
        rows = np.flatnonzero(codes == code)
        sub = params.iloc[rows].drop(columns=DIRECTION_COLUMN).reset_index(drop=True)
        table = signal_sweep(strategy, close, sub, direction=int(code), **kw)
        per_row = len(table) // len(sub)
        table.insert(min(list(params.columns).index(DIRECTION_COLUMN), sub.shape[1]),
                     DIRECTION_COLUMN, np.repeat(params[DIRECTION_COLUMN].to_numpy()[rows],
                                                 per_row))
        parts.append((np.repeat(rows, per_row) * per_row + np.tile(np.arange(per_row),
                                                                   len(rows)), table))
    order = np.concatenate([where for where, _ in parts])
    frame = pd.concat([t for _, t in parts], ignore_index=True)
    frame = frame.iloc[np.argsort(order, kind="stable")].reset_index(drop=True)
    frame.attrs.update(parts[0][1].attrs)
    return frame


def group_kernel(kernel, call_seq):
    """The shared-cash kernel of ``kernel``'s grid (``call_seq`` "default" or "auto")."""
    from .grouped import GROUP_REFUSED, GroupSignalKernel
    if call_seq not in ("default", "auto"):
        raise ValueError(f"call_seq must be 'default' or 'auto' in a shared-cash sweep, got "
                         f"{call_seq!r}")
    refused = [k for k in GROUP_REFUSED if k in kernel.fixed]
    refused += [k for k, v in kernel.fixed.items() if v.ndim == 2]
    if refused:
        raise ValueError(f"cash_sharing=True sweeps take vectorbt's defaults of "
                         f"{list(GROUP_REFUSED)} and keywords per asset, not per bar; got "
                         f"{refused}")
    return GroupSignalKernel(kernel, call_seq == "auto")


def _table(sim, names, assets, out, cash_sharing):
    """The sweep's columns: per (row, asset), or per row with ``cash_sharing``."""
    from .grouped import GROUP_STATS
    n_assets = 1 if cash_sharing else len(assets)
    table = {name: np.repeat(sim.params[:, j], n_assets) for j, name in enumerate(names)}
    if n_assets > 1:
        table["asset"] = np.tile(np.array(assets, dtype=object), sim.n_rows)
    for k in (GROUP_STATS if cash_sharing else STATS):
        v = np.asarray(out[k]).reshape(-1)
        table[k] = v.round().astype(np.int64) if k in _COUNTS + ("total_orders",) else v
    return table


def max_abs_diff(a, b):
    """``{metric: max |a - b|}`` over two sweep tables (NaN/inf where both agree count 0)."""
    out = {}
    for k in STATS:
        x, y = a[k].to_numpy(np.float64), b[k].to_numpy(np.float64)
        same = (x == y) | (np.isnan(x) & np.isnan(y))
        d = np.where(same, 0.0, np.abs(x - y))
        out[k] = float(np.max(d)) if d.size else math.nan
    return out
