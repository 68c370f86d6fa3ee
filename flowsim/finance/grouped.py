"""Grouped portfolios: vectorbt's ``group_by``, ``cash_sharing`` and ``call_seq``, and
``from_orders``.

    >>> pf = from_signals(close, entries, exits, group_by=True, cash_sharing=True,
    ...                   call_seq="auto")           # one cash balance for all assets
    >>> pf.value()                                    # one column per group
    >>> pf = from_orders(close, size=weights, size_type="targetpercent",
    ...                  group_by=True, cash_sharing=True, call_seq="auto")

The loop is :func:`flowsim.finance.groups.simulate_groups`; this module reads the
inputs as vectorbt reads them and reports per group as vectorbt's grouped
``Portfolio`` does (value, returns, cash, orders, the value-based metrics).
"""
import math
import numbers

import numpy as np

from ..core.lazy_tf import tf
from .accessors import MappedField, Orders, reduce_columns
from .groups import SIGNAL_MODES, simulate_groups

#: vectorbt's ``SizeType`` names from_orders takes.
ORDER_SIZE_TYPES = {"amount": 0, "value": 1, "percent": 2, "targetamount": 3,
                    "targetvalue": 4, "targetpercent": 5}
#: vectorbt's ``CallSeqType`` names; "random" is refused (vectorbt shuffles with numba's RNG).
CALL_SEQ_TYPES = ("default", "reversed", "auto")
#: vectorbt's from_orders keywords flowsim does not implement (refused by name when given).
REFUSED_ORDER_KEYWORDS = ("max_size", "size_granularity", "reject_prob", "raise_reject", "log",
                          "val_price", "ffill_val_price", "update_value", "max_orders",
                          "max_logs", "seed", "group_select", "broadcast_kwargs",
                          "wrapper_kwargs", "attach_call_seq", "engine")
#: The stop parts of the grouped signal loop (always in: a stop off is NaN).
STOP_FEATURES = ("sl", "trail", "tp")
#: The codes of vectorbt's defaults of :data:`~flowsim.finance.groups.SIGNAL_MODES`: a grouped
#: from_signals run always passes them (one compiled loop, the same bits as without them),
#: and all its keywords per bar when one is.
SIGNAL_MODE_DEFAULTS = dict(zip(SIGNAL_MODES, (0.0, 4.0, 3.0, 0.0, 0.0)))
#: from_signals keywords a shared-cash sweep refuses when they are not vectorbt's defaults
#: (grouped :func:`~flowsim.finance.from_signals` takes them).
GROUP_REFUSED = ("upon_opposite_entry", "stop_entry_price", "stop_exit_price", "accumulate",
                 "lock_cash")


# -- grouping ------------------------------------------------------------------------------
def is_grouped(group_by, cash_sharing):
    """Whether a run is grouped: ``group_by`` given (not None / False) or cash shared."""
    return bool(cash_sharing) or not (group_by is None or group_by is False)


def group_codes(columns, group_by):
    """``(codes, labels)``: each column's group (0, 1, ...) and the groups' labels, as
    vectorbt's ``ColumnGrouper`` reads ``group_by``: True (one group), a column level
    (name or number) of MultiIndex columns, or one label per column; the groups must
    be contiguous, as vectorbt requires."""
    import pandas as pd
    n = len(columns)
    if group_by is True:
        by = pd.Index(["group"] * n)
    elif isinstance(group_by, (numbers.Integral, str)) and not isinstance(group_by, bool):
        if not isinstance(columns, pd.MultiIndex):
            raise ValueError(f"group_by={group_by!r} names a column level, but the columns "
                             f"have no levels: give one group label per column or True")
        by = columns.get_level_values(group_by)
    else:
        by = pd.Index(list(group_by) if not isinstance(group_by, pd.Index) else group_by)
    if len(by) != n:
        raise ValueError(f"group_by has {len(by)} labels but there are {n} columns "
                         f"(vectorbt: 'group_by and index must have the same length')")
    codes, uniques = pd.factorize(by)
    if np.any(np.diff(codes) < 0):
        raise ValueError("group_by must put each group's columns next to each other (vectorbt: "
                         "'Groups must be coherent and sorted (such as [0, 0, 1, 2, 2, ...])')")
    labels = pd.Index(uniques, name=by.name)
    return codes.astype(np.int64), labels


def layout(codes):
    """``(n_groups, width, group, slot)`` of columns grouped by ``codes`` (contiguous)."""
    n_groups = int(codes.max()) + 1 if codes.size else 0
    lens = np.bincount(codes, minlength=n_groups)
    starts = np.concatenate([[0], np.cumsum(lens)[:-1]])
    slot = np.arange(codes.size) - starts[codes]
    return n_groups, int(lens.max()), codes, slot


def to_slots(arr, lay, fill):
    """``arr`` ``[..., columns]`` as ``[..., groups, width]`` (pad slots ``fill``)."""
    n_groups, width, group, slot = lay
    out = np.full(arr.shape[:-1] + (n_groups, width), fill, dtype=arr.dtype)
    out[..., group, slot] = arr
    return out


def from_slots(arr, lay):
    """The inverse of :func:`to_slots`: ``[..., groups, width]`` -> ``[..., columns]``."""
    _, _, group, slot = lay
    return arr[..., group, slot]


def call_sequence(call_seq, shape, codes):
    """``(auto, given [bars, columns])`` for vectorbt's ``call_seq``: sort by order value,
    or the given order of each group's columns on each bar."""
    if isinstance(call_seq, str):
        key = call_seq.lower()
        if key == "random":
            raise ValueError("call_seq='random' is not implemented (vectorbt shuffles with "
                             "numba's generator): give the order as an array")
        if key not in CALL_SEQ_TYPES:
            raise ValueError(f"call_seq must be one of {list(CALL_SEQ_TYPES)} or an array of "
                             f"each group's call order per bar, got {call_seq!r}")
        slot = layout(codes)[3][None, :]
        if key == "reversed":
            return False, np.broadcast_to(np.bincount(codes)[codes] - 1 - slot, shape)
        return key == "auto", np.broadcast_to(slot, shape)
    given = np.asarray(call_seq.to_numpy() if hasattr(call_seq, "to_numpy") else call_seq)
    given = np.broadcast_to(given, shape).astype(np.int64)
    lens = np.bincount(codes)[codes]
    for row in range(shape[0]):
        bad = (given[row] < 0) | (given[row] >= lens)
        if bad.any():
            raise ValueError(f"call_seq bar {row}, column {int(np.argmax(bad))} is "
                             f"{int(given[row][bad][0])}: each entry is a position in "
                             f"its group (vectorbt: 'Call index exceeds bounds of the group')")
    return False, given


def _call_slots(given, lay):
    """A given call order ``[n, columns]`` as ``[n, groups, width]`` (pads called last)."""
    n_groups, width, group, slot = lay
    out = np.broadcast_to(np.arange(width, dtype=np.int32), (given.shape[0], n_groups, width))
    out = out.copy()
    out[:, group, slot] = given
    return out


# -- the run -------------------------------------------------------------------------------
_COMPILED = {}


def compiled_groups(mode, keep_bars, features, shorts=True, auto=None):
    """:func:`simulate_groups` compiled once per (mode, outputs, stops, shorts, call
    order): ``auto`` a bool fixes vectorbt's "auto" call order at trace time (None:
    the run's ``auto`` tensor says)."""
    key = (mode, keep_bars, tuple(features), shorts, auto)
    fn = _COMPILED.get(key)
    if fn is None:
        def run(bars, signals, params, call_seq, auto_tensor):
            return simulate_groups(bars, signals, params, call_seq,
                                   auto_tensor if auto is None else auto, mode=mode,
                                   keep_bars=keep_bars, features=features, shorts=shorts)
        fn = _COMPILED[key] = tf().function(run, jit_compile=True, autograph=False)
    return fn


def run_groups(bars, signals, params, lay, call, *, mode, keep_bars=True, features=(),
               dtype="float64"):
    """Lay ``[n, columns]`` inputs out by group, run, return the numpy outputs."""
    t = tf()
    dt = t.as_dtype(dtype)
    b = {k: t.constant(to_slots(v, lay, 1.0), dt) for k, v in bars.items()}
    sig = None
    if signals is not None:
        sig = tuple(t.constant(to_slots(np.asarray(x), lay, False)) for x in signals)
    p = {}
    for k, v in params.items():
        if k == "init_cash":
            p[k] = t.constant(v, dt)
            continue
        fill = {"pad": True, "size": math.nan}.get(k, 0.0)
        arr = to_slots(np.asarray(v), lay, fill)
        p[k] = t.constant(arr) if arr.dtype == bool else t.constant(arr, dt)
    auto, given = call
    seq = t.constant(_call_slots(np.asarray(given), lay))
    fn = compiled_groups(mode, keep_bars, tuple(features))
    out = fn(b, sig, p, seq, t.constant(bool(auto)))
    return {k: np.asarray(v) for k, v in out.items()}


def returns_of(value, init_cash):
    """vectorbt's ``returns_nb``: bar returns of ``value`` ``[n, c]`` from ``init_cash``."""
    prev = np.concatenate([np.asarray(init_cash, dtype=value.dtype)[None, :], value[:-1]])
    with np.errstate(divide="ignore", invalid="ignore"):
        r = (value - prev) / np.where(prev == 0, 1.0, prev)
    r = np.where(prev < 0, -r, r)
    return np.where(prev == 0, np.where(value == 0, 0.0, np.sign(value) * np.inf), r)


def _group_sum(a, codes):
    """Sum the columns of ``a`` ``[..., columns]`` by contiguous group ``codes``."""
    starts = np.flatnonzero(np.concatenate([[True], np.diff(codes) != 0]))
    return np.add.reduceat(a, starts, axis=-1)


class GroupOrders(Orders):
    """vectorbt's order records of a grouped portfolio (``pf.orders`` of
    :class:`GroupPortfolio`): the records of :class:`~flowsim.finance.accessors.Orders`
    in vectorbt's record order (group, bar, call order), reduced per group.

    >>> pf.orders.count()                 # orders per group (a scalar for one group)
    >>> pf.orders.buy.count(), pf.orders.fees.sum(), pf.orders.fees_paid()
    >>> pf.orders.records_readable        # Order Id, Column, Timestamp, Size, ...
    >>> pf.orders["col"], pf.orders["side"], len(pf.orders)   # the table, ``frame``

    ``frame`` holds ``id, column, col, idx, size, price, fees, side`` ("buy" / "sell").
    """

    def __init__(self, records, columns, index, ndim, groups):
        super().__init__(records, columns, index, ndim)
        #: (group of each column, group labels, vectorbt's ``grouped_ndim``)
        self._groups = groups

    def _readable(self, field):
        if field != "col":
            return super()._readable(field)
        labels = np.empty(len(self._columns), dtype=object)
        labels[:] = list(self._columns)          # tuples of a column MultiIndex stay whole
        return labels[self._rec["col"]]

    def _table(self):
        frame = super()._table()
        frame.insert(0, "id", self._rec["id"])
        frame.insert(2, "col", self._rec["col"])
        return frame

    def _select(self, keep):
        return type(self)({k: v[keep] for k, v in self._rec.items()}, self._columns,
                          self._index, self._ndim, self._groups)

    def _per_column(self, values, name):
        codes, labels, ndim = self._groups
        per_group = np.zeros(len(labels), dtype=np.asarray(values).dtype)
        np.add.at(per_group, codes, values)
        return reduce_columns(per_group, labels, name, ndim)

    def __getattr__(self, name):
        field = super().__getattr__(name)
        if isinstance(field, MappedField):
            codes, labels, ndim = self._groups
            return MappedField(field.values, codes[self._rec["col"]], labels, ndim)
        return field


class GroupPortfolio:
    """Result of a grouped :func:`from_signals` or of :func:`from_orders`.

    ``value()``, ``returns()``, ``cash()`` and the metrics are per group (per column
    when ungrouped), as vectorbt's grouped ``Portfolio`` reports them; ``orders``
    (:class:`GroupOrders`) counts and sums per group and lists its records per column;
    ``call_seq()`` is per column.
    """

    def __init__(self, out, close, grouping, init_cash, index, ann, freq=None,
                 freq_assumed=False, risk_free=0.0, ndim=2, grouped=True):
        #: vectorbt's ``wrapper.ndim`` (1: every input one-dimensional) and its
        #: ``grouped_ndim``: 1 for one group, as the results per group are shaped
        self.ndim = ndim
        self.grouped_ndim = (1 if len(grouping[3]) == 1 else 2) if grouped else ndim
        self._out = out
        self._close = close
        (self._lay, self._cash_codes, self._codes, self.group_labels, self.columns,
         self.cash_sharing) = grouping
        self._init_cash = np.asarray(init_cash, dtype=np.float64)
        self.index = index
        self.ann_factor, self.freq, self.freq_assumed = ann, freq, bool(freq_assumed)
        self.risk_free = risk_free

    def _frame(self, a, labels=None):
        from .accessors import wrap_bars
        if labels is None:
            return wrap_bars(a, self.index, self.group_labels, self.grouped_ndim)
        return wrap_bars(a, self.index, labels, self.ndim)

    def _column(self, name):
        return from_slots(self._out[name], self._lay)

    def init_cash(self):
        """Starting cash per group (the sum of its columns' without cash sharing)."""
        if self.cash_sharing:
            return self._init_cash
        return _group_sum(self._init_cash, self._codes)

    def _values(self):
        if self.cash_sharing:
            return self._out["value"]
        return _group_sum(self._out["value"][:, self._lay[2]], self._codes)

    def value(self):
        """Value per group and bar (cash + positions at the close), a DataFrame."""
        return self._frame(self._values())

    def cash(self):
        """Cash per group after each bar's orders."""
        if self.cash_sharing:
            return self._frame(self._out["cash"])
        return self._frame(_group_sum(self._out["cash"][:, self._lay[2]], self._codes))

    def assets(self):
        """Position per column after each bar (shares; negative when short)."""
        return self._frame(self._column("position"), self.columns)

    def returns(self):
        """Bar returns of :meth:`value` (the first against the starting cash)."""
        return self._frame(returns_of(self._values(), self.init_cash()))

    def call_seq(self):
        """vectorbt's ``call_seq``: per bar and column, the column of its group called in
        that place (0 = the group's first column); without cash sharing the columns do
        not wait for each other and this is each column's place in its group."""
        if self.cash_sharing:
            return self._frame(self._column("call_seq"), self.columns)
        places = np.broadcast_to(layout(self._codes)[3], (len(self.index), len(self.columns)))
        return self._frame(places, self.columns)

    @property
    def orders(self):
        """Filled orders (vectorbt's ``pf.orders``) in vectorbt's record order (group, bar,
        call order), a :class:`GroupOrders`: ``count()`` and the fields' reductions per
        group, as vectorbt's grouped portfolio gives them.

        >>> pf.orders.count(), pf.orders.buy.count(), pf.orders.records_readable
        >>> pf.orders["col"], pf.orders["side"]     # the table: "buy" / "sell"
        """
        seq = self._out["call_seq"].astype(np.int64)
        by_call = {k: np.take_along_axis(self._out[k], seq, axis=2).transpose(1, 0, 2)
                   for k in ("order_size", "order_price", "order_fees")}
        g, i, s = np.nonzero(by_call["order_size"])
        slot = seq.transpose(1, 0, 2)[g, i, s]
        col_of = np.full(self._lay[:2], -1)
        col_of[self._lay[2], self._lay[3]] = np.arange(len(self.columns))
        size = by_call["order_size"][g, i, s]
        records = {"id": np.arange(size.size, dtype=np.int64),
                   "col": col_of[g, slot].astype(np.int64), "idx": i.astype(np.int64),
                   "size": np.abs(size), "price": by_call["order_price"][g, i, s],
                   "fees": by_call["order_fees"][g, i, s], "side": (size < 0).astype(np.int64)}
        groups = (np.asarray(self._codes, dtype=np.int64), self.group_labels,
                  self.grouped_ndim)
        return GroupOrders(records, self.columns, self.index, self.ndim, groups)

    def _series(self, a, name):
        from .accessors import reduce_columns
        return reduce_columns(a, self.group_labels, name, self.grouped_ndim)

    @property
    def close(self):
        """The close per bar and column (vectorbt's ``pf.close``), shaped as :meth:`assets`."""
        return self._frame(np.asarray(self._close), self.columns)

    def column_groups(self):
        """Each column's group, its position in :attr:`group_labels` (vectorbt's
        ``pf.wrapper.grouper.get_groups()``), an int64 array."""
        return np.asarray(self._codes, dtype=np.int64).copy()

    def final_value(self):
        """Value at the last bar per group (a scalar for one group, as vectorbt's)."""
        return self._series(self._values()[-1], "final_value")

    def total_return(self):
        """``final_value / init_cash - 1`` per group (a scalar for one group)."""
        init = self.init_cash()
        return self._series((self._values()[-1] - init) / init, "total_return")

    def max_drawdown(self):
        """Worst fall from a running peak of :meth:`value` (negative), per group."""
        cum = np.cumprod(1 + returns_of(self._values(), self.init_cash()), axis=0)
        return self._series(np.min(cum / np.maximum.accumulate(cum, axis=0) - 1, axis=0),
                            "max_drawdown")

    def sharpe_ratio(self):
        """Annualised Sharpe ratio of :meth:`returns` (ddof 1, vectorbt's)."""
        r = returns_of(self._values(), self.init_cash()) - self.risk_free
        with np.errstate(divide="ignore", invalid="ignore"):
            return self._series(np.mean(r, axis=0) / np.std(r, axis=0, ddof=1)
                                * np.sqrt(self.ann_factor), "sharpe_ratio")

    def stats(self):
        """vectorbt's 28 ``stats()`` metrics per group, under the names and in the order
        of :data:`~flowsim.finance.portfolio.PORTFOLIO_STATS`, then ``total_orders``.

        >>> pf.stats()                  # DataFrame, one row per group
        >>> pf.stats()["max_gross_exposure"]

        vectorbt's group semantics (:mod:`flowsim.finance.group_metrics`): the value,
        returns and drawdowns of the group's value; the benchmark splits the group's
        cash evenly over its assets; the trades are every exit trade of its columns.
        ``attrs`` holds ``freq``, ``freq_assumed`` and ``ann_factor``.
        """
        from .group_metrics import group_stats_frame
        frame = group_stats_frame(self, returns_of(self._values(), self.init_cash()))
        frame.attrs.update(freq=self.freq, freq_assumed=self.freq_assumed,
                           ann_factor=self.ann_factor)
        if self.grouped_ndim == 1:
            from .accessors import series_name
            row = frame.iloc[0].rename(series_name(self.group_labels))
            row.attrs.update(frame.attrs)
            return row
        return frame


# -- inputs --------------------------------------------------------------------------------
def grouping(labels, column_index, group_by, cash_sharing):
    """``(layout, cash codes, group codes, group labels, column labels, cash_sharing)``."""
    import pandas as pd
    cols = column_index if column_index is not None else pd.Index(labels, tupleize_cols=False)
    if cash_sharing and (group_by is None or group_by is False):
        group_by = True                       # vectorbt: cash sharing groups all columns
    if group_by is None or group_by is False:
        codes, group_labels = np.arange(len(labels)), cols
    else:
        codes, group_labels = group_codes(cols, group_by)
    cash_codes = codes if cash_sharing else np.arange(len(labels))
    return layout(cash_codes), cash_codes, codes, group_labels, list(labels), bool(cash_sharing)


def group_init_cash(init_cash, n_cash_groups):
    """``init_cash`` (scalar or one per cash group) as float64 ``[groups]``, checked."""
    if isinstance(init_cash, str):
        raise ValueError(f"init_cash={init_cash!r} is not implemented for grouped portfolios: "
                         f"give the cash (a number, or one per group)")
    arr = np.asarray(init_cash, dtype=np.float64).reshape(-1)
    if arr.size not in (1, n_cash_groups):
        raise ValueError(f"init_cash must be a scalar or one value per cash group "
                         f"({n_cash_groups}), got {arr.size} values")
    if not np.all(np.isfinite(arr)) or np.any(arr <= 0):
        raise ValueError(f"init_cash must be finite and > 0, got {arr.tolist()[:5]}")
    return np.broadcast_to(arr, (n_cash_groups,)).copy()


def _order_keyword(value, name, n_bars, n_cols, close_1d, lo=None, allow_nan=False):
    """A from_orders keyword as float64 ``[columns]`` or ``[bars, columns]``, checked."""
    from .orders import per_bar
    arr = per_bar(value, name, n_bars, n_cols, close_1d)
    if arr is None:
        arr = np.asarray(value.to_numpy() if hasattr(value, "to_numpy") else value,
                         dtype=np.float64).reshape(-1)
        if arr.size not in (1, n_cols):
            raise ValueError(f"{name} must be a scalar, one value per column ({n_cols}) or "
                             f"[bars, columns], got {arr.size} values")
        arr = np.broadcast_to(arr, (n_cols,)).copy()
    finite = np.isfinite(arr) | (np.isnan(arr) if allow_nan else False)
    if name == "size":
        finite = ~np.isnan(arr) | allow_nan
    if not np.all(finite) or (lo is not None and np.any(arr[~np.isnan(arr)] < lo)):
        bound = f" and >= {lo}" if lo is not None else ""
        raise ValueError(f"{name} must be finite{bound}, got {np.ravel(arr)[:5].tolist()}")
    return arr


def order_size_type_codes(size_type, n_cols):
    """``size_type`` of from_orders (all of vectorbt's kinds) as codes ``[columns]``."""
    from .orders import enum_code, enum_codes
    return enum_codes(size_type, "size_type", n_cols,
                      lambda v: enum_code(v, "size_type", ORDER_SIZE_TYPES))


def _ann(freq, year_freq, index):
    from .align import bar_length
    from .inputs import ann_factor
    ann_factor(freq, year_freq)
    step, assumed = bar_length(freq, index, stacklevel=4)
    return ann_factor(step, year_freq), step, assumed


def _finish(out, bars, grouped, init, index, timing, dtype, shape=(2, True)):
    """The :class:`GroupPortfolio`; ``shape``: (vectorbt's ``ndim`` of the inputs,
    whether ``group_by`` / ``cash_sharing`` grouped the columns)."""
    import pandas as pd
    ann, step, assumed = timing
    if index is None:
        index = pd.RangeIndex(bars["close"].shape[0])
    return GroupPortfolio(out, bars["close"].astype(dtype), grouped, init, index, ann,
                          freq=step, freq_assumed=assumed, ndim=shape[0], grouped=shape[1])


def from_orders(close, size=math.inf, size_type="amount", direction="both", price=None,
                fees=0.0, fixed_fees=0.0, slippage=0.0, min_size=1e-8, allow_partial=True,
                init_cash=100.0, group_by=None, cash_sharing=False, call_seq="default",
                freq=None, year_freq="365 days", dtype="float64", lock_cash=False, **refused):
    """Simulate orders the way vectorbt's ``Portfolio.from_orders`` does.

    Every bar and column is an order of ``size`` (NaN: no order) read by
    ``size_type``: "amount" (shares; ``inf`` all the cash, ``-inf`` all in
    short), "value" (cash), "percent" (of the cash, or of the position for a
    sell), "targetamount", "targetvalue" or "targetpercent" (of the group's
    value: rebalancing).  ``direction``: "both" (default), "longonly",
    "shortonly".  Orders fill at ``price`` (default the close) with ``slippage``
    against the trade and ``fees * size * price + fixed_fees``; ``min_size``
    (vectorbt's 1e-8) rejects smaller orders, ``allow_partial=False`` those cash
    cannot fill whole.

    ``group_by`` (True, a column level, or one label per column) groups the
    columns; ``cash_sharing=True`` gives each group one cash balance (``init_cash``
    per group) and runs its columns on each bar in ``call_seq`` order: "default"
    (column order), "reversed", "auto" (sells before buys: sorted by each order's
    approximate value, as vectorbt) or an array of each group's call order per
    bar.  ``size``, ``fees``, ``fixed_fees``, ``slippage``, ``min_size`` and
    ``lock_cash`` (True: shorts only as far as the free cash covers them, buys
    spend only free cash) may be scalars, one per column or ``[bars, columns]``.
    ``init_cash="auto"`` / ``"autoalign"`` (with ``cash_sharing``, or ungrouped):
    vectorbt's cash found from the orders run with infinite cash, see
    :func:`auto_group_cash`.

    Returns a :class:`GroupPortfolio` (value, returns and metrics per group).
    """
    if refused:
        names = sorted(refused)
        unknown = [k for k in names if k not in REFUSED_ORDER_KEYWORDS]
        if unknown:
            raise TypeError(f"from_orders() got unexpected keyword arguments {unknown}")
        raise ValueError(f"from_orders: {names} not implemented in flowsim (vectorbt's "
                         f"defaults are used: leave them out)")
    from .align import conform
    from .inputs import bar_arrays, direction_codes
    given, index, columns = conform({"size": size, "price": price, "close": close})
    bars, labels = bar_arrays(given["close"], None, None, None, {}, given["price"])
    n, c = bars["close"].shape
    bars["price"] = bars.get("price", bars["close"])
    close_1d = np.ndim(close) == 1
    labels = list(columns) if columns is not None and len(columns) == c else (
        labels if labels is not None and len(labels) == c else list(range(c)))
    grouped = grouping(labels, columns if columns is not None and len(columns) == c else None,
                       group_by, cash_sharing)
    from .inputs import init_cash_mode
    cash_mode = _auto_cash_mode(init_cash_mode(init_cash), group_by, cash_sharing)
    init = group_init_cash(1.0 if cash_mode else init_cash, grouped[0][0])
    params = {"size": _order_keyword(given["size"], "size", n, c, close_1d, allow_nan=True),
              "fees": _order_keyword(fees, "fees", n, c, close_1d),
              "fixed_fees": _order_keyword(fixed_fees, "fixed_fees", n, c, close_1d),
              "slippage": _order_keyword(slippage, "slippage", n, c, close_1d, lo=0),
              "min_size": _order_keyword(min_size, "min_size", n, c, close_1d, lo=0),
              "allow_partial": _order_keyword(allow_partial, "allow_partial", n, c, close_1d),
              "lock_cash": _order_keyword(lock_cash, "lock_cash", n, c, close_1d),
              "size_type": order_size_type_codes(size_type, c),
              "direction": direction_codes(direction, c).astype(np.float64),
              "pad": np.zeros(c, dtype=bool), "init_cash": init}
    call = call_sequence(call_seq, (n, c), grouped[1])
    bar_in = {"close": bars["close"], "price": bars["price"]}

    def run(p):
        return run_groups(bar_in, None, p, grouped[0], call, mode="orders", dtype=dtype)

    if cash_mode:
        params["init_cash"] = init = auto_group_cash(run, params, grouped[0], cash_mode)
    from .accessors import result_ndim
    shape = (result_ndim([close, size, price, fees, fixed_fees, slippage, min_size]),
             is_grouped(group_by, cash_sharing))
    return _finish(run(params), bars, grouped, init, index, _ann(freq, year_freq, index), dtype,
                   shape)


def _auto_cash_mode(mode, group_by, cash_sharing):
    """``mode`` ("auto", "autoalign" or None), refused where a group's cash would not be
    any cash balance's (groups without cash sharing)."""
    if mode is not None and is_grouped(group_by, False) and not cash_sharing:
        raise ValueError(f"init_cash={mode!r} with group_by but without cash_sharing is not "
                         f"implemented (vectorbt takes each group's cash from its summed "
                         f"flows): use cash_sharing=True or give the cash")
    return mode


def grouped_signals(bars, signals, params, labels, columns, index, *, group_by, cash_sharing,
                    call_seq, timing, dtype, init_cash_mode=None, ndim=2):
    """The grouped run of :func:`flowsim.finance.from_signals` (checked inputs in).

    ``init_cash_mode`` "auto" / "autoalign" (vectorbt's ``InitCashMode``): each cash
    group (each column without cash sharing) starts with the most cash its orders
    spend, see :func:`auto_group_cash`.
    """
    _auto_cash_mode(init_cash_mode, group_by, cash_sharing)
    n, c = bars["close"].shape
    grouped = grouping(labels, columns, group_by, cash_sharing)
    init = params["init_cash"]
    if cash_sharing:
        first = np.flatnonzero(np.concatenate([[True], np.diff(grouped[1]) != 0]))
        init = init[first]
    p = {k: np.asarray(params[k], dtype=np.float64) for k in
         ("size", "fees", "fixed_fees", "slippage", "min_size", "sl_stop", "tp_stop")}
    p.update(size_type=np.asarray(params.get("size_type", np.zeros(c)), dtype=np.float64),
             allow_partial=np.asarray(params.get("allow_partial", np.ones(c))),
             sl_trail=np.asarray(params["sl_trail"]) != 0, pad=np.zeros(c, dtype=bool),
             init_cash=init)
    p.update({k: np.asarray(params.get(k, default), dtype=np.float64)
              for k, default in SIGNAL_MODE_DEFAULTS.items()})
    if any(np.ndim(v) == 2 for v in p.values()):
        p.update({k: np.broadcast_to(v, (n, c)) for k, v in p.items()
                  if k not in ("init_cash", "pad")})
    features = STOP_FEATURES          # off where NaN: one compiled loop for every run
    bar_in = dict(bars)
    bar_in["price"] = bars.get("price", bars["close"])
    call = call_sequence(call_seq, (n, c), grouped[1])

    def run(p):
        return run_groups(bar_in, signals, p, grouped[0], call, mode="signals",
                          features=tuple(features), dtype=dtype)

    if init_cash_mode is not None:
        p["init_cash"] = init = auto_group_cash(run, p, grouped[0], init_cash_mode)
    return _finish(run(p), bars, grouped, init, index, timing, dtype, (ndim, True))


def auto_group_cash(run, params, lay, mode):
    """vectorbt's automatic ``init_cash`` of each cash group: ``run(params)`` with
    infinite cash gives the orders; the lowest point of the group's cumulative cash
    flow (its columns' flows summed per bar) is the cash (1 if it never goes below
    0; ``mode="autoalign"``: the largest over the groups)."""
    size = np.asarray(params["size"])
    if np.isinf(size[~np.isnan(size)]).any():
        raise ValueError(f"init_cash={mode!r} needs a finite size: with infinite cash, "
                         f"size=inf buys without limit (vectorbt: 'Attempt to go in long "
                         f"direction infinitely')")
    out = run(dict(params, init_cash=np.full_like(params["init_cash"], np.inf)))
    filled = out["order_size"] != 0
    flow = np.where(filled, -out["order_size"] * np.where(filled, out["order_price"], 0.0)
                    - out["order_fees"], 0.0)
    flow = np.where(np.abs(flow) <= 1e-12, 0.0, flow)         # add_nb(0, flow)
    low = np.min(np.cumsum(np.sum(flow, axis=2), axis=0), axis=0)
    cash = np.where(low < 0, np.abs(low), 1.0)
    if mode == "autoalign":
        cash = np.full_like(cash, np.max(cash))
    return cash


# -- sweeps of whole groups ----------------------------------------------------------------
#: Metrics of a shared-cash sweep, one per parameter row (the row's assets are one group).
GROUP_STATS = ("start_value", "end_value", "total_return", "total_fees_paid", "max_drawdown",
               "total_orders", "sharpe_ratio")


class GroupSignalKernel:
    """``kernel(params, data)`` of a shared-cash :func:`~flowsim.finance.signal_sweep`:
    each parameter row trades all the assets from one cash balance (vectorbt's
    ``group_by`` of the row's columns with ``cash_sharing=True``).

    ``fixed``: the per-column keywords (one per asset); ``row_keywords`` the ones
    ``params`` sets per row; ``auto``: vectorbt's ``call_seq="auto"`` (else column
    order).  Picklable when ``strategy`` is a module-level function.
    """

    def __init__(self, base, auto):
        self.base, self.auto = base, bool(auto)
        self.ann = base.ann

    def __call__(self, params, data):
        return tf().autograph.experimental.do_not_convert(self._run)(params, data)

    def _params(self, params, rows, assets, dtype):
        t = tf()
        base = self.base
        p = {}
        for k in ("size", "fees", "fixed_fees", "slippage", "min_size", "sl_stop", "tp_stop",
                  "sl_trail", "init_cash", "size_type", "allow_partial"):
            if k in base.row_keywords:
                col = t.cast(params[:, base.n_strategy + base.row_keywords.index(k)], dtype)
                p[k] = t.tile(col[:, None], [1, assets])
            else:
                fixed = base.fixed.get(k, np.asarray({"size_type": 0.0}.get(k, 1.0)))
                p[k] = t.zeros([rows, assets], dtype) + t.constant(fixed, dtype)
        p["init_cash"] = p["init_cash"][:, 0]
        p["sl_trail"] = p["sl_trail"] != 0
        p["pad"] = t.zeros([rows, assets], t.bool)
        return p

    def _run(self, params, data):
        t = tf()
        base = self.base
        close = data["close"]
        dtype = close.dtype
        rows = t.shape(params)[0]
        assets = int(close.shape[1])
        signals = base._signals(params, data, rows * assets)
        n = t.shape(close)[0]
        shorts = signals[2] is not None
        if not shorts:
            signals = signals[:2] + (t.zeros_like(signals[0]),) * 2
        sig = tuple(t.reshape(x, [n, rows, assets]) for x in signals)
        ohlc = "ohlc" in base.features
        bars = {k: t.cast(data[k if ohlc else "close"], dtype)
                for k in ("close", "open", "high", "low")}
        bars["price"] = t.cast(data["price"], dtype) if "price" in data else bars["close"]
        p = self._params(params, rows, assets, dtype)
        seq = t.zeros([1, rows, assets], t.int32) + t.range(assets, dtype=t.int32)
        stops = tuple(f for f in STOP_FEATURES if f in base.features)
        run = compiled_groups("signals", False, stops, shorts, self.auto)
        out = run(bars, sig, p, seq, t.constant(self.auto))
        return group_stats(out, p["init_cash"], base.ann, base.risk_free)

    def key(self):
        """What the compiled graph depends on."""
        return ("group", self.auto) + self.base.key()


def group_stats(out, init_cash, ann, risk_free=0.0):
    """:data:`GROUP_STATS` ``{name: [groups]}`` from the loop's running sums."""
    t = tf()
    end = out["prev_value"]
    s1, s2 = out["acc_r"], out["acc_r2"]
    nb = t.cast(out["n_bars"], end.dtype)
    mean = s1 / nb - risk_free
    var = t.maximum(s2 - s1 * (s1 / nb), 0) / (nb - 1)
    std = t.sqrt(var)
    sharpe = t.where(std == 0, t.zeros_like(std) + math.inf, mean / t.where(std == 0,
                                                                        t.ones_like(std), std))
    sharpe = sharpe * math.sqrt(ann)
    return {"start_value": init_cash, "end_value": end,
            "total_return": (end - init_cash) / init_cash,
            "total_fees_paid": out["acc_fees"],
            "max_drawdown": t.where(out["has_dd"], out["max_dd"], t.zeros_like(end)),
            "total_orders": out["acc_orders"], "sharpe_ratio": sharpe}
