"""from_signals keywords that change how an order is sized or priced, and per-bar values.

    >>> from_signals(close, entries, exits, size=0.5, size_type="percent")
    >>> from_signals(close, entries, exits, fees=fees_per_bar)       # [bars, columns]

The numpy side reads the keywords as vectorbt broadcasts them (:func:`per_bar`,
:func:`size_type_codes`); the TF side (:func:`params_at`, :func:`sized`) is what the
portfolio loop of :mod:`flowsim.finance.simulate` calls on each bar.  A keyword left
at vectorbt's default adds nothing to the loop, so those runs keep their bits.
"""
import numpy as np

from ..core.lazy_tf import tf

#: vectorbt's ``SizeType`` codes from_signals takes.
SIZE_TYPES = {"amount": 0, "value": 1, "percent": 2}
#: The target kinds vectorbt's from_signals refuses too (its ``signals_to_size_nb``).
TARGET_SIZE_TYPES = {"targetamount": 3, "targetvalue": 4, "targetpercent": 5}


def enum_code(value, name, codes, refused=None, why=""):
    if isinstance(value, (int, np.integer)) and not isinstance(value, bool) \
            and int(value) in codes.values():
        return int(value)
    key = str(value).lower().replace("_", "")
    if refused and (key in refused or value in refused.values()):
        raise ValueError(f"{name}={value!r} is refused: {why}")
    if not isinstance(value, str) or key not in codes:
        raise ValueError(f"{name} must be one of {list(codes)} (or vectorbt's codes "
                         f"{list(codes.values())}), got {value!r}")
    return codes[key]


def enum_codes(value, name, n_cols, code_of):
    """A named mode (scalar or per column) as float codes ``[n_cols]``, each ``code_of(v)``."""
    vals = list(np.asarray(value.to_numpy() if hasattr(value, "to_numpy") else value,
                           dtype=object).reshape(-1))
    out = np.array([code_of(v) for v in vals], dtype=np.float64)
    if out.size == 1:
        out = np.repeat(out, n_cols)
    if out.size != n_cols:
        raise ValueError(f"{name} must be one value or one per column ({n_cols}), got "
                         f"{out.size}")
    return out


def size_type_codes(size_type, n_cols):
    """``size_type`` ("amount", "value", "percent"; scalar or per column) as codes."""
    why = ("vectorbt's from_signals takes only 'amount', 'value' and 'percent' (a target "
           "is an order, not a signal: vectorbt's from_orders)")
    return enum_codes(size_type, "size_type", n_cols,
                      lambda v: enum_code(v, "size_type", SIZE_TYPES, TARGET_SIZE_TYPES, why))


def per_bar(value, name, n_bars, n_cols, close_1d):
    """``value`` as a float64 ``[bars, columns]`` array if it varies by bar, else None.

    vectorbt broadcasts a keyword against ``close`` with numpy's rules: a
    ``[bars, columns]`` or ``[bars, 1]`` array is per bar, a 1-d array is per
    column unless ``close`` is 1-d itself (then it is per bar).  A 1-d array of
    one value per bar against a 2-d close is refused (numpy would read it as
    columns).
    """
    arr = np.asarray(value.to_numpy() if hasattr(value, "to_numpy") else value)
    if arr.ndim == 1 and close_1d and arr.shape[0] == n_bars and n_bars != n_cols:
        arr = arr[:, None]
    if arr.ndim == 1 and arr.shape[0] == n_bars and arr.shape[0] != n_cols:
        raise ValueError(f"{name} has one value per bar but close has {n_cols} columns: "
                         f"give a [bars, columns] or [bars, 1] array (vectorbt reads a "
                         f"1-d array as one value per column)")
    if arr.ndim != 2:
        return None
    if arr.shape[0] not in (1, n_bars) or arr.shape[1] not in (1, n_cols):
        raise ValueError(f"{name} has shape {list(arr.shape)}, close has "
                         f"{[n_bars, n_cols]}: give a scalar, one value per column or a "
                         f"[bars, columns] array (1 for all in either place)")
    if arr.shape[0] == 1:
        return None
    return np.broadcast_to(arr.astype(np.float64), (n_bars, n_cols)).copy()


def params_at(params, i):
    """This bar's parameters: row ``i`` of the per-bar ``[bars, columns]`` ones."""
    return {k: (v[i] if v.shape.rank == 2 else v) for k, v in params.items()}


def sized(size, size_type, val_price, pos):
    """(order size in shares or +-inf, cash fraction) of a ``size_type`` column.

    ``"value"`` sizes divide by the bar's valuation price (the order price before
    stops, vectorbt's ``val_price``); a ``"percent"`` entry from flat spends that
    fraction of the cash (``buy_nb``'s ``percent``) or shorts that fraction of the
    largest short (``sell_nb``'s); other orders use the fraction 1 (all).
    """
    t = tf()
    value = size_type == 1
    percent = size_type == 2
    one = t.ones_like(size)
    amount = t.where(value, size / t.where(value, val_price, one), size)
    amount = t.where(percent & (size > 0), one * np.inf, amount)
    fraction = t.where(percent & (pos == 0), size, one)
    return amount, fraction


#: Optional loop parameters (absent: vectorbt's default, nothing added to the loop).
ORDER_PARAMS = ("size_type", "upon_opposite_entry", "stop_entry_price", "stop_exit_price",
                "accumulate", "allow_partial", "lock_cash")

#: vectorbt's ``OppositeEntryMode``, ``StopEntryPrice`` and ``StopExitPrice``, with
#: their defaults.
MODES = {
    "upon_opposite_entry": ({"ignore": 0, "close": 1, "closereduce": 2, "reverse": 3,
                             "reversereduce": 4}, "reversereduce"),
    "stop_entry_price": ({"valprice": 0, "price": 1, "fillprice": 2, "close": 3}, "close"),
    "stop_exit_price": ({"stoplimit": 0, "stopmarket": 1, "price": 2, "close": 3},
                        "stoplimit"),
    "accumulate": ({"disabled": 0, "both": 1, "addonly": 2, "removeonly": 3}, "disabled"),
}


def _mode_code(value, name, codes):
    if isinstance(value, (bool, np.bool_)) and name == "accumulate":
        return int(bool(value))                 # True: "both", False: "disabled"
    return enum_code(value, name, codes)


def mode_params(n_cols, **given):
    """The :data:`MODES` keywords (scalar or per column) as codes, those not at their
    default (without accumulation, "closereduce" is "close" and "reverse" the default)."""
    out = {}
    for name, value in given.items():
        codes, default = MODES[name]
        out[name] = enum_codes(value, name, n_cols,
                               lambda v, c=codes, n=name: _mode_code(v, n, c))
    accumulating = np.any(out.get("accumulate", 0) != 0)
    for name in list(out):
        codes, default = MODES[name]
        same = {3, 4} if name == "upon_opposite_entry" and not accumulating \
            else {codes[default]}
        if set(out[name].tolist()) <= same:
            del out[name]
    return out


def accumulation(pos, le, se, mode, opposite=None):
    """This bar's ``accumulate`` code: off where an opposite entry closes or reverses
    (``resolve_opposite_entry_nb``'s "close" / "reverse"; the "reduce" kinds keep it)."""
    t = tf()
    against = ((pos > 0) & se) | ((pos < 0) & le) if se is not None else t.zeros_like(le)
    if opposite is None:
        return mode
    return t.where(against & ((opposite == 1) | (opposite == 3)), t.zeros_like(mode), mode)


def accumulated_order(pos, le, lx, se, sx, size, mode):
    """``signals_to_size_nb`` with ``accumulate`` codes ``mode``: (signed size,
    long-only?, short-only?).  "both" / "addonly" add ``size`` on an entry in the
    position's direction, "both" / "removeonly" take ``size`` off on an exit or an
    opposite entry (instead of closing or reversing)."""
    t = tf()
    zero = t.zeros_like(pos)
    absp = t.abs(pos)
    remove = (mode == 1) | (mode == 3)
    add = (mode == 1) | (mode == 2)
    if se is None:
        long_ = t.where(lx, t.where(remove, -size, -absp), t.where(le & add, size, zero))
        return t.where(pos > 0, long_, t.where(le, size, zero)), (pos > 0) & lx, None
    long_ = t.where(se, t.where(remove, -size, -absp - size),
                    t.where(lx, t.where(remove, -size, -absp), t.where(le & add, size, zero)))
    short_ = t.where(le, t.where(remove, size, absp + size),
                     t.where(sx, t.where(remove, size, absp), t.where(se & add, -size, zero)))
    flat = t.where(le, size, t.where(se, -size, zero))
    out = t.where(pos > 0, long_, t.where(pos < 0, short_, flat))
    return out, (pos > 0) & ~se & lx, (pos < 0) & ~le & sx


def stops_renewed(opened, fill, pos, new_pos, sl_stop, tp_stop):
    """(stop-loss, take-profit) set anew on this bar: on an entry, and when the position
    grows in its direction if the bar's stop is not NaN (vectorbt's "override")."""
    t = tf()
    grew = fill & (pos != 0) & (t.sign(new_pos) == t.sign(pos)) & (t.abs(new_pos) > t.abs(pos))
    return (opened | (grew & ~t.math.is_nan(sl_stop)),
            opened | (grew & ~t.math.is_nan(tp_stop)))


def opposite_entry(pos, le, lx, se, sx, mode):
    """``resolve_opposite_entry_nb`` without accumulation: an entry against the position
    is dropped ("ignore") or closes it ("close"); else it reverses it."""
    ignore = mode == 0
    close = (mode == 1) | (mode == 2)
    against_long = (pos > 0) & se
    against_short = (pos < 0) & le
    lx = lx | (against_long & close)
    sx = sx | (against_short & close)
    return le & ~(against_short & (ignore | close)), lx, se & ~(against_long & (ignore | close)), sx


def stop_exit_fill(hit, stop, price, close, slippage, mode):
    """(fill price, slippage) of the bar's order, a stop's by ``stop_exit_price``: at the
    stop without slippage (stop limit), at the stop with it (stop market), at the
    bar's order price or its close with it."""
    t = tf()
    fill = t.where(mode == 2, price, t.where(mode == 3, close, stop))
    slip = t.where(mode == 0, t.zeros_like(slippage), slippage)
    return t.where(hit, fill, price), t.where(hit, slip, slippage)


def stop_entry_ref(mode, close, price, fill_price):
    """What a new position's stops are measured from (``stop_entry_price``): the bar's
    order price (valuation price, order price), the fill (with slippage) or the close."""
    t = tf()
    return t.where(mode == 3, close, t.where(mode == 2, fill_price, price))


def refuse_percent_reversal(params, signals):
    """Refuse ``size_type="percent"`` where a long and a short entry may meet a position.

    vectorbt raises "SizeType.Percent does not support position reversal using
    signals" when it happens; here the columns that could reverse are refused first.
    """
    if "size_type" not in params:
        return
    percent = np.asarray(params["size_type"]) == 2
    if np.any(percent & (np.asarray(params.get("accumulate", 0)) != 0)):
        raise ValueError("size_type='percent' with accumulate is not implemented (the "
                         "fraction of an added or removed size): use 'amount' or 'value'")
    percent &= ~np.isin(params.get("upon_opposite_entry", 4), (0, 1, 2))   # reverses
    both = signals[0].any(axis=0) & signals[2].any(axis=0)
    bad = np.flatnonzero(percent & both)
    if bad.size:
        raise ValueError(f"size_type='percent' cannot reverse a position (vectorbt: "
                         f"'SizeType.Percent does not support position reversal using "
                         f"signals'); column {int(bad[0])} has long and short entries: use "
                         f"direction='longonly' or 'shortonly', upon_opposite_entry='close' "
                         f"or 'ignore', or another size_type")


def bar_keywords(keywords, index):
    """Keywords given as pandas objects on the bars' ``index`` as arrays (per bar).

    A DataFrame keyword on another index is refused, naming it, as vectorbt refuses
    it; a Series on another index stays (one value per column, by its labels).
    """
    import pandas as pd
    out = dict(keywords)
    for name, value in keywords.items():
        if not hasattr(value, "index") or not hasattr(value, "to_numpy"):
            continue
        if index is not None and value.index.equals(index):
            out[name] = value.to_numpy()
        elif np.ndim(value) == 2:
            if not value.index.equals(pd.RangeIndex(len(value))):
                raise ValueError(f"{name} has another index than the bars: give it on "
                                 f"close's index (vectorbt: 'Broadcasting index is not "
                                 f"allowed')")
            out[name] = value.to_numpy()
    return out


def locked_cash(cash, pos, debt, free, adj_price, fees, fixed, add_tolerant):
    """``buy_nb``'s cash limit with ``lock_cash``: the free cash when not short; when
    short, what covering leaves free (all of it, or the cover a partial buy can pay).
    ``add_tolerant``: vectorbt's ``add_nb`` (the loop's)."""
    t = tf()
    short = t.abs(pos)
    cover = short * adj_price * (1 + fees) + fixed
    released = free + 2 * debt
    cover_free = add_tolerant(released, -cover)
    avg = debt / t.where(pos < 0, short, t.ones_like(short))
    partial = (free - fixed) / (adj_price * (1 + fees) - 2 * avg) * adj_price * (1 + fees) + fixed
    when_short = t.where(cover_free > 0, released, t.where(cover_free < 0, partial, cash))
    return t.where(pos >= 0, free, when_short)
