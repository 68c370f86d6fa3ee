"""vectorbt's record accessors of a :class:`~flowsim.finance.Portfolio`: orders, trades,
positions, drawdowns, and its cash.

    >>> pf = from_signals(close, entries, exits, fees=0.001, freq="1D")
    >>> pf.orders.records_readable        # vectorbt's order records
    >>> pf.trades.records_readable        # vectorbt's exit trades, its titles and order
    >>> pf.trades.win_rate()              # winning trades / all trades, per column
    >>> pf.positions.count()              # positions (exit trades of one entry merged)
    >>> pf.drawdowns.max_drawdown()       # deepest peak-to-valley fall of the value
    >>> pf.cash()                         # cash balance per bar and column

The records are vectorbt 1.2's (its order records, ``get_exit_trades_nb``, ``get_positions_nb``,
``get_drawdowns_nb``): the same fields, ids, order and numbers; ``records`` holds
the raw fields (``col`` a position, ``direction`` 0 long / 1 short, ``status`` codes),
``records_readable`` the titled table with column labels, index values and names.
A reduction (``count()``, ``win_rate()``, ...) is one value per column, a Series,
or a scalar when the portfolio's ``close`` was a Series (vectorbt's ``wrap_reduced``).
"""
import numpy as np

#: vectorbt's tolerances of ``add_nb`` (a sum this close to zero is zero).
REL_TOL, ABS_TOL = 1e-9, 1e-12

TRADE_FIELDS = ("id", "col", "size", "entry_idx", "entry_price", "entry_fees", "exit_idx",
                "exit_price", "exit_fees", "pnl", "return", "direction", "status", "parent_id")
ORDER_FIELDS = ("id", "col", "idx", "size", "price", "fees", "side")
DRAWDOWN_FIELDS = ("id", "col", "peak_idx", "start_idx", "valley_idx", "end_idx", "peak_val",
                   "valley_val", "end_val", "status")
_INT_FIELDS = ("id", "col", "idx", "side", "entry_idx", "exit_idx", "direction", "status",
               "parent_id", "peak_idx", "start_idx", "valley_idx", "end_idx")
_TITLES = {"col": "Column", "idx": "Timestamp", "price": "Price", "fees": "Fees",
           "side": "Side", "size": "Size", "entry_idx": "Entry Timestamp",
           "entry_price": "Avg Entry Price", "entry_fees": "Entry Fees",
           "exit_idx": "Exit Timestamp", "exit_price": "Avg Exit Price",
           "exit_fees": "Exit Fees", "pnl": "PnL", "return": "Return",
           "direction": "Direction", "status": "Status", "parent_id": "Position Id",
           "peak_idx": "Peak Timestamp", "start_idx": "Start Timestamp",
           "valley_idx": "Valley Timestamp", "end_idx": "End Timestamp",
           "peak_val": "Peak Value", "valley_val": "Valley Value", "end_val": "End Value"}
_INDEX_FIELDS = ("idx", "entry_idx", "exit_idx", "peak_idx", "start_idx", "valley_idx", "end_idx")
TRADE_DIRECTIONS = ("Long", "Short")
TRADE_STATUSES = ("Open", "Closed")
ORDER_SIDES = ("Buy", "Sell")
DRAWDOWN_STATUSES = ("Active", "Recovered")


def is_close(a, b):
    both = np.isfinite(a) & np.isfinite(b)
    near = np.abs(a - b) <= np.maximum(REL_TOL * np.maximum(np.abs(a), np.abs(b)), ABS_TOL)
    return both & ((a == b) | near)


def add_tolerant(a, b):
    """vectorbt's ``add_nb`` on arrays: ``a + b``, or 0 where the sum is zero within
    its tolerances (relative 1e-9, absolute 1e-12)."""
    a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    zero = np.where(np.sign(a) != np.sign(b), is_close(np.abs(a), np.abs(b)),
                    is_close(a + b, np.zeros_like(a)))
    return np.where(zero, 0.0, a + b)


def trade_stats(size, entry_price, entry_fees, exit_price, exit_fees, direction):
    """vectorbt's ``get_trade_stats_nb``: (PnL, return) of trades, net of fees."""
    entry_val = size * entry_price
    diff = add_tolerant(size * exit_price, -entry_val)
    diff = np.where(direction == 1, -diff, diff)
    pnl = diff - entry_fees - exit_fees
    with np.errstate(divide="ignore", invalid="ignore"):
        return pnl, pnl / entry_val


def cash_balance(order_size, order_price, order_fees, init_cash):
    """Cash per bar ``[bars, columns]`` from signed order sizes (0: no order), as
    vectorbt's ``cash_flow_nb`` and ``cash_nb`` compute it."""
    filled = order_size != 0
    flow = np.where(filled, -order_size * np.where(filled, order_price, 0.0) - order_fees, 0.0)
    return running_sum(add_tolerant(np.zeros_like(flow), flow), init_cash)


def series_name(columns):
    """vectorbt's name of a one-column result: the column's label, or None for the
    label 0 (an unnamed Series)."""
    label = columns[0]
    return None if isinstance(label, (int, np.integer)) and label == 0 else label


def wrap_bars(values, index, columns, ndim=2):
    """Values ``[bars, columns]`` as vectorbt's ``ArrayWrapper.wrap`` gives them: a
    DataFrame on ``index`` and ``columns``, or, when ``ndim`` is 1 (one column from a
    Series ``close``, or one group), a Series named after the column.

    >>> wrap_bars(np.ones((3, 1)), pd.RangeIndex(3), ["x"], ndim=1)   # Series "x"
    """
    import pandas as pd
    values = np.asarray(values)
    if ndim == 1 and len(columns) == 1:
        return pd.Series(values.reshape(len(index), -1)[:, 0], index=index,
                         name=series_name(columns))
    return pd.DataFrame(values, index=index, columns=columns)


def result_ndim(inputs):
    """vectorbt's ``ndim`` of a broadcast result: 2 when any input is two-dimensional,
    else 1 (a Series or a 1-d array for ``close`` and every other array)."""
    return 2 if any(np.ndim(x) >= 2 for x in inputs if not isinstance(x, str)) else 1


def reduce_columns(values, columns, name, ndim=2):
    """One value per column as vectorbt's ``wrap_reduced`` gives it: a Series named
    ``name`` on ``columns``, or the value alone (a numpy scalar) when ``ndim`` is 1
    (the portfolio's ``close`` was a Series or a 1-d array).

    >>> reduce_columns(np.array([0.1]), ["a"], "total_return", ndim=1)   # 0.1
    """
    import pandas as pd
    values = np.asarray(values)
    if ndim == 1:
        return values[0]
    return pd.Series(values, index=columns, name=name)


def order_records(order_size, order_price, order_fees):
    """vectorbt's order records (a dict of :data:`ORDER_FIELDS` arrays) from the signed
    order sizes ``[bars, columns]`` (0: no order) of an ungrouped run: per column by
    bar, ``side`` 0 buy / 1 sell, ``size`` > 0."""
    col, idx = np.nonzero(np.asarray(order_size).T)
    size = np.asarray(order_size, dtype=np.float64)[idx, col]
    return {"id": np.arange(len(col), dtype=np.int64), "col": col.astype(np.int64),
            "idx": idx.astype(np.int64), "size": np.abs(size),
            "price": np.asarray(order_price, dtype=np.float64)[idx, col],
            "fees": np.asarray(order_fees, dtype=np.float64)[idx, col],
            "side": (size < 0).astype(np.int64)}


def _free_cash_flow(before, now, debt, price, fees):
    """vectorbt's ``get_free_cash_diff_nb`` on arrays: (debt, free cash flow) of orders
    taking positions ``before`` to ``now``."""
    size = add_tolerant(now, -before)
    cash = -size * price - fees
    with np.errstate(divide="ignore", invalid="ignore"):
        cover = (size > 0) & (before < 0)
        paid = np.where(now < 0, np.abs(size), np.abs(before)) * (debt / np.abs(before))
        short = (size < 0) & (now < 0)
        short_value = np.where(before < 0, np.abs(size), np.abs(now)) * price
    new_debt = np.where(cover, add_tolerant(debt, -paid),
                        np.where(short, debt + short_value, debt))
    flow = np.where(cover, add_tolerant(2 * paid, cash),
                    np.where(short, add_tolerant(cash, -2 * short_value), cash))
    still = is_close(size, np.zeros_like(size))
    return np.where(still, debt, new_debt), np.where(still, 0.0, flow)


def order_flows(orders, shape):
    """(asset flow, free cash flow) ``[bars, columns]`` of order records (at most one
    per bar and column), as vectorbt's ``asset_flow_nb`` and ``cash_flow_nb(free=True)``."""
    size, price, fees = np.zeros(shape), np.zeros(shape), np.zeros(shape)
    filled = np.zeros(shape, dtype=bool)
    at = (orders["idx"], orders["col"])
    size[at] = np.where(orders["side"] == 1, -1.0, 1.0) * orders["size"]
    price[at], fees[at], filled[at] = orders["price"], orders["fees"], True
    assets, cash = np.zeros(shape), np.zeros(shape)
    position, debt = np.zeros(shape[1]), np.zeros(shape[1])
    zero = np.zeros(shape[1])
    for i in range(shape[0]):
        now = add_tolerant(position, size[i])
        new_debt, flow = _free_cash_flow(position, now, debt, price[i], fees[i])
        assets[i] = add_tolerant(zero, np.where(filled[i], size[i], 0.0))
        cash[i] = add_tolerant(zero, np.where(filled[i], flow, 0.0))
        position = np.where(filled[i], now, position)
        debt = np.where(filled[i], new_debt, debt)
    return assets, cash


def running_sum(flow, start):
    """vectorbt's ``assets_nb`` / ``cash_nb``: running tolerant sums of ``flow``
    ``[bars, columns]`` from ``start`` ``[columns]``."""
    out = np.empty_like(flow)
    now = np.asarray(start, dtype=np.float64)
    for i in range(flow.shape[0]):
        now = out[i] = add_tolerant(now, flow[i])
    return out


def gross_exposure(orders, close, init_cash):
    """vectorbt's ``pf.gross_exposure()`` ``[bars, columns]`` of an ungrouped run: the
    absolute position value over itself plus the free cash (cash less what shorts owe)."""
    asset_flow, cash_flow = order_flows(orders, close.shape)
    assets = running_sum(asset_flow, np.zeros(close.shape[1]))
    cash = running_sum(cash_flow, init_cash)
    value = np.abs(np.where(assets == 0, 0.0, close) * assets)
    denom = add_tolerant(value, cash)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(denom == 0, 0.0, value / np.where(denom == 0, 1.0, denom))


def drawdown_of_returns(returns):
    """vectorbt's ``returns.vbt.drawdown()`` of bar returns ``[bars, columns]``: the
    cumulative returns over their running peak, less 1 (<= 0)."""
    cum = np.cumprod(1 + np.nan_to_num(np.asarray(returns, dtype=np.float64), nan=0.0),
                     axis=0) * 100.0
    return cum / np.maximum.accumulate(cum, axis=0) - 1


def trade_durations(trades, n_cols):
    """(mean bars held by winning, by losing closed trades) per column: vectorbt's
    ``trades.winning.duration.mean()`` and ``losing`` (NaN without such trades)."""
    closed = trades["status"] == 1
    held = (trades["exit_idx"] - trades["entry_idx"]).astype(np.float64)
    out = []
    for won in (trades["pnl"] > 0, trades["pnl"] < 0):
        pick = closed & won
        count = np.bincount(trades["col"][pick], minlength=n_cols)
        total = np.bincount(trades["col"][pick], weights=held[pick], minlength=n_cols)
        with np.errstate(divide="ignore", invalid="ignore"):
            out.append(np.where(count > 0, total / np.maximum(count, 1), np.nan))
    return tuple(out)


def trade_table(rows):
    """Exit-trade records (a dict of :data:`TRADE_FIELDS` arrays) from rows ``(col, size,
    entry_idx, entry_price, entry_fees, exit_idx, exit_price, exit_fees, direction,
    status, parent_id)``: PnL and return from :func:`trade_stats`, ids in row order."""
    names = ("col", "size", "entry_idx", "entry_price", "entry_fees", "exit_idx", "exit_price",
             "exit_fees", "direction", "status", "parent_id")
    rec = {k: np.array([r[m] for r in rows], dtype=np.int64 if k in _INT_FIELDS else
                       np.float64) for m, k in enumerate(names)}
    rec["pnl"], rec["return"] = trade_stats(rec["size"], rec["entry_price"], rec["entry_fees"],
                                            rec["exit_price"], rec["exit_fees"],
                                            rec["direction"])
    rec["id"] = np.arange(len(rows), dtype=np.int64)
    return {k: rec[k] for k in TRADE_FIELDS}


def exit_trade_records(out, close):
    """vectorbt's exit-trade records (a dict of :data:`TRADE_FIELDS` arrays) from the
    outputs of :func:`~flowsim.finance.simulate.simulate_signals`: per column the
    closed trades by exit bar, then the open one valued at the last close.

    The loop keeps each trade's fields as it fills the orders; built from the orders
    instead (:func:`exit_trades_from_orders`, vectorbt's ``get_exit_trades_nb``), the
    records are the same trades, their prices within a unit in the last place.
    """
    rows = []
    n = close.shape[0]
    for j in range(close.shape[1]):
        for i in np.flatnonzero(out["trade_closed"][:, j]):
            rows.append([j, out["trade_size"][i, j], out["trade_entry_idx"][i, j],
                         out["trade_entry_price"][i, j], out["trade_entry_fees"][i, j], i,
                         out["trade_exit_price"][i, j], out["trade_exit_fees"][i, j],
                         out["trade_direction"][i, j] < 0, 1])
        if out["open_trade"][j]:
            rows.append([j, out["open_size"][j], out["open_entry_idx"][j],
                         out["open_entry_price"][j], out["open_entry_fees"][j], n - 1,
                         close[-1, j], 0.0, out["open_direction"][j] < 0, 0])
    # In from_signals a column fills one order per bar, so a position (and its exit
    # trades) is named by its entry bar within its column.
    parent, last = -1, None
    for row in rows:
        if (row[0], row[2]) != last:
            parent, last = parent + 1, (row[0], row[2])
        row.append(parent)
    return trade_table(rows)


def column_orders(orders):
    """The order records (a dict of arrays) sorted by column, bar order kept."""
    keep = np.argsort(orders["col"], kind="stable")
    return {k: np.asarray(v)[keep] for k, v in orders.items()}


class _OpenTrade:
    """The running sums of one column's open position (vectorbt's trade loop)."""

    def __init__(self, idx, direction, parent):
        self.idx, self.direction, self.parent = idx, direction, parent
        self.size = self.gross = self.fees = 0.0

    def add(self, size, price, fees):
        self.size += size
        self.gross += size * price
        self.fees += fees

    def record(self, col, size, exit_idx, exit_price, exit_fees, status):
        entry_fees = size / self.size * self.fees
        return (col, size, self.idx, self.gross / self.size, entry_fees, exit_idx, exit_price,
                exit_fees, self.direction, status, self.parent)

    def shrink(self, size):
        fraction = (self.size - size) / self.size
        self.size *= fraction
        self.gross *= fraction
        self.fees *= fraction


def _close_trade(trade, rows, col, i, size, price, fees):
    """An order against ``trade``: ``(trade left open or None, a reversed one or None)``."""
    if size < trade.size or is_close(np.float64(size), np.float64(trade.size)):
        whole = bool(is_close(np.float64(size), np.float64(trade.size)))
        rows.append(trade.record(col, trade.size if whole else size, i, price, fees, 1))
        if whole:
            return None, None
        trade.shrink(size)
        return trade, None
    closed = trade.size
    exit_fees = closed / size * fees
    rows.append(trade.record(col, closed, i, price, exit_fees, 1))
    turned = _OpenTrade(i, 1 - trade.direction, trade.parent + 1)
    turned.size = size - closed
    turned.gross = turned.size * price
    turned.fees = fees - exit_fees
    return None, turned


def exit_trades_from_orders(orders, close):
    """vectorbt's ``get_exit_trades_nb``: exit-trade records (a dict of
    :data:`TRADE_FIELDS` arrays) from order records (``col, idx, size, price, fees,
    side``) and the close ``[bars, columns]``."""
    o = column_orders(orders)
    rows, parent, trade, col_now = [], -1, None, -1
    for k in range(len(o["col"])):
        col, i = int(o["col"][k]), int(o["idx"][k])
        if col != col_now:
            rows, trade = _flush(rows, trade, col_now, close), None
            col_now = col
        side, size, price, fees = o["side"][k], o["size"][k], o["price"][k], o["fees"][k]
        if trade is None:
            parent += 1
            trade = _OpenTrade(i, int(side), parent)
        if side == trade.direction:
            trade.add(size, price, fees)
            continue
        trade, turned = _close_trade(trade, rows, col, i, size, price, fees)
        if turned is not None:
            parent = turned.parent
            trade = turned
    rows = _flush(rows, trade, col_now, close)
    return trade_table(rows)


def _flush(rows, trade, col, close):
    """``rows`` with the open trade of column ``col`` valued at the last close."""
    if trade is not None and -trade.size < 0 and not is_close(np.float64(-trade.size), 0.0):
        n = close.shape[0]
        rows.append(trade.record(col, trade.size, n - 1, close[n - 1, col], 0.0, 0))
    return rows


def _sequential_sum(x):
    total = 0.0
    for v in x:
        total += v
    return total


def position_records(trades):
    """vectorbt's ``get_positions_nb``: the exit trades of each position merged."""
    pid = trades["parent_id"]
    starts = np.flatnonzero(np.r_[True, pid[1:] != pid[:-1]]) if len(pid) else np.array([], int)
    ends = np.r_[starts[1:], len(pid)]
    rec = {k: np.empty(len(starts), dtype=trades[k].dtype) for k in TRADE_FIELDS}
    for p, (a, b) in enumerate(zip(starts, ends)):
        part = {k: trades[k][a:b] for k in TRADE_FIELDS}
        one = {k: v[0] for k, v in part.items()}
        if b - a > 1:
            size = _sequential_sum(part["size"])
            one.update(size=size, exit_idx=part["exit_idx"][-1],
                       entry_price=_sequential_sum(part["size"] * part["entry_price"]) / size,
                       exit_price=_sequential_sum(part["size"] * part["exit_price"]) / size,
                       entry_fees=_sequential_sum(part["entry_fees"]),
                       exit_fees=_sequential_sum(part["exit_fees"]),
                       direction=part["direction"][-1], status=part["status"][-1])
            pnl, ret = trade_stats(*(np.float64(one[k]) for k in (
                "size", "entry_price", "entry_fees", "exit_price", "exit_fees", "direction")))
            one.update(pnl=pnl, **{"return": ret})
        one.update(id=p, parent_id=p)
        for k in TRADE_FIELDS:
            rec[k][p] = one[k]
    return rec


def drawdown_records(value):
    """vectorbt's ``get_drawdowns_nb`` on a ``[bars, columns]`` series (no NaN): one
    record per fall from a peak, recovered (back to the peak) or still active."""
    rows = []
    n = value.shape[0]
    for j in range(value.shape[1]):
        peak_i, peak, valley_i, valley, running = 0, value[0, j], 0, value[0, j], False
        for i in range(n):
            v = value[i, j]
            status = None
            if v >= peak:
                if running:
                    status = 1
                else:
                    peak_i, peak = i, v
            elif not running:
                running, valley_i, valley = True, i, v
            elif v < valley:
                valley_i, valley = i, v
            if status is None and running and i == n - 1:
                status = 0
            if status is not None:
                rows.append((j, peak_i, peak_i + 1, valley_i, i, peak, valley, v, status))
                running, peak_i, valley_i, peak, valley = False, i, i, v, v
    names = DRAWDOWN_FIELDS[1:]
    rec = {k: np.array([r[m] for r in rows], dtype=np.int64 if k in _INT_FIELDS else
                       np.float64) for m, k in enumerate(names)}
    rec["id"] = np.arange(len(rows), dtype=np.int64)
    return {k: rec[k] for k in DRAWDOWN_FIELDS}


class Records:
    """Records of a portfolio, one row each, as vectorbt's ``Records``.

    ``records``: the raw fields (a DataFrame); ``records_readable``: vectorbt's
    titled table; ``count()``: records per column.
    """

    #: title of the ``id`` field in ``records_readable``
    id_title = "Id"
    #: names of the ``status`` codes
    statuses = ()
    #: fields left out of ``records_readable``
    unreadable = ()

    def __init__(self, records, columns, index, ndim=2):
        self._rec = records
        self._columns = columns
        self._index = index
        self._ndim = ndim

    def __len__(self):
        return len(self._rec["id"])

    def __repr__(self):
        return (f"{type(self).__name__}: {len(self)} records over {len(self._columns)} "
                f"columns\n{self.records_readable!r}")

    @property
    def records(self):
        """The raw records: vectorbt's fields, ``col`` a column position, codes as ints.

        >>> pf.trades.records[["col", "entry_idx", "pnl"]]
        """
        import pandas as pd
        return pd.DataFrame({k: v.copy() for k, v in self._rec.items()})

    def _readable(self, field):
        v = self._rec[field]
        if field == "col":
            return np.asarray(self._columns, dtype=object)[v] if len(v) else v.astype(object)
        if field in _INDEX_FIELDS:
            return self._index.take(v)
        if field == "direction":
            return np.asarray(TRADE_DIRECTIONS, dtype=object)[v]
        if field == "side":
            return np.asarray(ORDER_SIDES, dtype=object)[v]
        if field == "status":
            return np.asarray(self.statuses, dtype=object)[v]
        return v

    @property
    def records_readable(self):
        """vectorbt's ``records_readable``: its titles and order, column labels,
        index values for bars, names for codes.

        >>> pf.trades.records_readable[["Column", "Entry Timestamp", "PnL"]]
        """
        import pandas as pd
        return pd.DataFrame({self.id_title if k == "id" else _TITLES[k]: self._readable(k)
                             for k in self._rec if k not in self.unreadable})

    def _per_column(self, values, name):
        return reduce_columns(values, self._columns, name, self._ndim)

    def count(self):
        """Records per column, a Series named ``count`` (vectorbt's ``count()``).

        >>> pf.trades.count()

        Returns
        -------
        Series of int64, one value per column of the portfolio (an int64 when its
        ``close`` was a Series, as in vectorbt).
        """
        n = np.bincount(self._rec["col"], minlength=len(self._columns)).astype(np.int64)
        return self._per_column(n, "count")


class MappedField:
    """One field of records per column, as vectorbt's ``MappedArray``
    (``pf.trades.pnl``, ``pf.orders.fees``): its reductions are per column.

    >>> pf.trades.pnl.sum()          # PnL per column (vectorbt's; not over all columns)
    >>> pf.trades.returns.mean(), pf.orders.fees.sum(), pf.trades.pnl.values

    Each reduction is a Series named after it, one value per column (a scalar when
    the portfolio's ``close`` was a Series): ``sum()`` (0 without records),
    ``mean()``, ``median()``, ``min()``, ``max()``, ``std(ddof=1)`` (NaN without
    records), ``count()``.
    """

    def __init__(self, values, col, columns, ndim):
        self.values = np.asarray(values)
        self._col, self._columns, self._ndim = np.asarray(col), columns, ndim

    def __len__(self):
        return len(self.values)

    def __array__(self, dtype=None, copy=None):
        return np.asarray(self.values, dtype=dtype)

    def __repr__(self):
        return f"MappedField: {len(self)} values over {len(self._columns)} columns"

    def to_numpy(self):
        """The values, in record order."""
        return self.values.copy()

    def _reduce(self, name, fn, empty=np.nan):
        out = np.array([fn(self.values[self._col == j]) if np.any(self._col == j) else empty
                        for j in range(len(self._columns))], dtype=np.float64)
        return reduce_columns(out, self._columns, name, self._ndim)

    def sum(self):
        """Sum per column (0 without records)."""
        return self._reduce("sum", _sequential_sum, 0.0)

    def mean(self):
        """Mean per column."""
        return self._reduce("mean", lambda v: _sequential_sum(v) / len(v))

    def median(self):
        """Median per column."""
        return self._reduce("median", np.median)

    def min(self):
        """Smallest value per column."""
        return self._reduce("min", np.min)

    def max(self):
        """Largest value per column."""
        return self._reduce("max", np.max)

    def std(self, ddof=1):
        """Standard deviation per column (``ddof`` 1, vectorbt's)."""
        return self._reduce("std", lambda v: np.std(v, ddof=ddof) if len(v) > ddof else np.nan)

    def count(self):
        """Records per column."""
        n = np.bincount(self._col, minlength=len(self._columns)).astype(np.int64)
        return reduce_columns(n, self._columns, "count", self._ndim)


#: vectorbt's names of the mapped fields that differ from the record fields
MAPPED_NAMES = {"returns": "return"}


class _FramedRecords(Records):
    """Records that also read as their earlier lower-case table (``frame``): indexing,
    ``len`` and the DataFrame's attributes other than ``count`` go to it.  The
    records' fields as attributes (``pnl``, ``returns``, ``fees``, ``size``,
    ``duration``, ...) are vectorbt's mapped arrays, a :class:`MappedField` each."""

    _frame = None

    @property
    def frame(self):
        """The records as one table with the column labels and names in lower case.

        >>> pf.trades.frame[["column", "entry_idx", "pnl", "direction", "status"]]
        >>> pf.orders.frame[["column", "idx", "size", "side"]]
        """
        if self._frame is None:
            self._frame = self._table()
        return self._frame

    def _table(self):
        raise NotImplementedError

    def __getitem__(self, key):
        return self.frame[key]

    def __getattr__(self, name):
        if name.startswith("_"):
            raise AttributeError(name)
        field = MAPPED_NAMES.get(name, name)
        if field in self._rec and field not in ("id", "col"):
            return MappedField(self._rec[field], self._rec["col"], self._columns, self._ndim)
        if name == "duration" and "exit_idx" in self._rec:
            return MappedField(self._rec["exit_idx"] - self._rec["entry_idx"], self._rec["col"],
                               self._columns, self._ndim)
        return getattr(self.frame, name)


class Orders(_FramedRecords):
    """vectorbt's order records (``pf.orders``): one record per filled order, per
    column by bar.  Fields: ``id, col, idx, size, price, fees, side`` (``size`` > 0,
    ``side`` 0 buy / 1 sell).

    >>> pf.orders.records_readable          # Order Id, Column, Timestamp, Size, ...
    >>> pf.orders.count(), pf.orders.buy.count(), pf.orders.fees_paid()

    For the callers of the earlier table, ``frame`` is that table (``column``,
    ``idx``, ``size``, ``price``, ``fees``, ``side`` "buy"/"sell"), and indexing,
    ``len`` and the DataFrame's attributes other than ``count`` and the fields read it:
    ``pf.orders["fees"]``, ``pf.orders[pf.orders["side"] == "buy"]``.
    """

    id_title = "Order Id"

    def _table(self):
        import pandas as pd
        r = self._rec
        return pd.DataFrame({"column": self._readable("col"), "idx": r["idx"],
                             "size": r["size"], "price": r["price"], "fees": r["fees"],
                             "side": np.where(r["side"] == 1, "sell", "buy")})

    def _select(self, keep):
        return type(self)({k: v[keep] for k, v in self._rec.items()}, self._columns,
                          self._index, self._ndim)

    @property
    def buy(self):
        """The buy orders (vectorbt's ``orders.buy``), an :class:`Orders`."""
        return self._select(self._rec["side"] == 0)

    @property
    def sell(self):
        """The sell orders (vectorbt's ``orders.sell``), an :class:`Orders`."""
        return self._select(self._rec["side"] == 1)

    def _column_sum(self, field, name):
        total = np.bincount(self._rec["col"], weights=self._rec[field],
                            minlength=len(self._columns))
        return self._per_column(total, name)

    def fees_paid(self):
        """Fees per column, vectorbt's ``orders.fees.sum()``.

        >>> pf.orders.fees_paid()

        Returns
        -------
        Series named ``fees``, one value per column (a float when ``close`` was a Series).
        """
        return self._column_sum("fees", "fees")

    def size_traded(self):
        """Shares bought and sold per column, vectorbt's ``orders.size.sum()``.

        >>> pf.orders.size_traded()

        Returns
        -------
        Series named ``size``, one value per column (a float when ``close`` was a Series).
        """
        return self._column_sum("size", "size")


class Trades(_FramedRecords):
    """vectorbt's exit trades (``pf.trades``): one record per exit (a partial exit
    of a grown position is one), then the open trade of each column at the last
    close.  Fields: ``id, col, size, entry_idx, entry_price, entry_fees, exit_idx,
    exit_price, exit_fees, pnl, return, direction, status, parent_id`` (the
    position).

    For the callers of the earlier table, ``frame`` is that table (``column``,
    ``size``, ``entry_idx``, ``entry_price``, ``entry_fees``, ``exit_idx``,
    ``exit_price``, ``exit_fees``, ``pnl``, ``return``, ``direction`` "long"/"short",
    ``status`` "closed"/"open"), and indexing, ``len`` and the DataFrame's
    attributes other than ``count`` and the fields read it: ``pf.trades["pnl"]``,
    ``pf.trades[pf.trades["status"] == "closed"]``.
    """

    id_title = "Exit Trade Id"
    statuses = TRADE_STATUSES

    def _table(self):
        import pandas as pd
        r = self._rec
        f = pd.DataFrame({"column": self._readable("col")})
        for k in ("size", "entry_idx", "entry_price", "entry_fees", "exit_idx", "exit_price",
                  "exit_fees", "pnl", "return"):
            f[k] = r[k]
        f["direction"] = np.where(r["direction"] == 1, "short", "long")
        f["status"] = np.where(r["status"] == 0, "open", "closed")
        return f

    def win_rate(self):
        """Winning trades (PnL > 0) over all trades, open ones included, per column
        (vectorbt's ``trades.win_rate()``; NaN without trades).

        >>> pf.trades.win_rate()

        Returns
        -------
        Series named ``win_rate``, one value per column (a float when ``close``
        was a Series).
        """
        n = np.bincount(self._rec["col"], minlength=len(self._columns))
        won = np.bincount(self._rec["col"], weights=self._rec["pnl"] > 0,
                          minlength=len(self._columns))
        with np.errstate(divide="ignore", invalid="ignore"):
            return self._per_column(won / n, "win_rate")


class Positions(Trades):
    """vectorbt's positions (``pf.positions``): the exit trades of one entry merged,
    sizes summed, prices size-weighted, fees summed; ``id`` = ``parent_id``.

    >>> pf.positions.records_readable
    """

    id_title = "Position Id"
    unreadable = ("parent_id",)


class Drawdowns(Records):
    """vectorbt's drawdowns of the value (``pf.drawdowns``): one record per fall from
    a peak, with its peak, start (the bar after the peak), valley and end (the
    recovery, or the last bar while still active).  Fields: ``id, col, peak_idx,
    start_idx, valley_idx, end_idx, peak_val, valley_val, end_val, status`` (0
    active, 1 recovered).

    >>> pf.drawdowns.records_readable
    """

    id_title = "Drawdown Id"
    statuses = DRAWDOWN_STATUSES

    def max_drawdown(self):
        """Deepest drawdown ``valley / peak - 1`` per column (<= 0; NaN without one),
        vectorbt's ``drawdowns.max_drawdown()``.

        >>> pf.drawdowns.max_drawdown()

        Returns
        -------
        Series named ``max_drawdown``, one value per column (a float when ``close``
        was a Series).
        """
        r = self._rec
        depth = (r["valley_val"] - r["peak_val"]) / r["peak_val"]
        out = np.full(len(self._columns), np.nan)
        for j, d in zip(r["col"], depth):
            out[j] = d if np.isnan(out[j]) else min(out[j], d)
        return self._per_column(out, "max_drawdown")
