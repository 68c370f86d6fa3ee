"""Shared-cash groups: the bar loop of vectorbt's ``cash_sharing=True`` portfolios.

    >>> out = simulate_groups(bars, signals, params, call_seq, auto)

Columns are laid out ``[groups, slots]``: each group shares one cash balance (and
free cash), its slots are its assets (groups shorter than the widest are padded
with slots that never trade).  On every bar each column's order is made first
(from signals or given), then the slots run one after the other in the bar's
call order: column order (``call_seq="default"``), a given order, or vectorbt's
``call_seq="auto"``: sorted by the orders' approximate values (sells first), in
the order vectorbt's ``insert_argsort_nb`` gives.  Every step is
vectorized over the groups, so a sweep of ``g`` parameter rows over the same
assets is one loop over ``[g, assets]``.

The order execution is ``execute_order_nb`` / ``buy_nb`` / ``sell_nb`` for every
``size_type`` and ``direction`` (vectorbt's tolerant comparisons, the same
arithmetic in the same order), so the orders are vectorbt's.
"""
import math

from ..core.lazy_tf import tf
from .orders import accumulation, opposite_entry, stop_entry_ref, stop_exit_fill, stops_renewed
from .simulate import drawdown_step, fill_order, resolve_signals, snap_zero, stop_fill

#: vectorbt's ``SizeType`` codes.
AMOUNT, VALUE, PERCENT, TARGET_AMOUNT, TARGET_VALUE, TARGET_PERCENT = range(6)
#: vectorbt's ``Direction`` codes.
LONG_ONLY, SHORT_ONLY, BOTH = range(3)

#: Per-bar outputs of :func:`simulate_groups` with ``keep_bars``.
GROUP_BAR_OUTPUTS = ("order_size", "order_price", "order_fees", "call_seq", "cash",
                     "position", "value")


def _where(cond, a, b):
    t = tf()
    return t.where(cond, a, b)


def _resolve_size(size, size_type, direction, pos, val_price, value):
    """``execute_order_nb``'s size conversions: (size in shares or +-inf, percent or NaN,
    whether the order may run).  ``size`` is already signed for ``ShortOnly``; ``value``
    None: no order is a target percent."""
    t = tf()
    ok, kind = t.ones_like(size, dtype=t.bool), size_type
    if value is not None:
        target_pct = size_type == TARGET_PERCENT
        ok = ~target_pct | (~t.math.is_nan(value) & (value > 0))
        size = _where(target_pct, size * value, size)
        kind = _where(target_pct, t.zeros_like(size_type) + TARGET_VALUE, size_type)
    in_value = (kind == VALUE) | (kind == TARGET_VALUE)
    ok &= ~(in_value & t.math.is_nan(val_price))
    size = _where(in_value, size / _where(in_value, val_price, t.ones_like(val_price)), size)
    target = (kind == TARGET_AMOUNT) | (kind == TARGET_VALUE)
    size = _where(target, size - pos, size)
    amount = (kind == AMOUNT) | (kind == VALUE) | target
    all_short = amount & (direction != LONG_ONLY) & (size < 0) & t.math.is_inf(size)
    size = _where(all_short, -t.ones_like(size), size)
    pct = (kind == PERCENT) | all_short
    percent = _where(pct, t.abs(size), t.zeros_like(size) + math.nan)
    size = _where(pct, t.sign(size) * math.inf, size)
    return size, percent, ok


def execute_order(state, order, process, shorts=True):
    """One slot of every group: ``process_order_nb`` where ``process``.

    ``state``: cash, position, val_price, value (None: no target orders) and with
    ``shorts`` debt, free (cash) ``[g]`` (without, no position is ever short);
    ``order``: size (signed: vectorbt's ShortOnly flip already applied), price,
    size_type, direction, fees, fixed_fees, slippage, min_size, allow_partial (and
    optionally lock_cash, bool) ``[g]``.
    Returns (filled, size, price, fees, new state).
    """
    t = tf()
    names = ("cash", "position", "debt", "free") if shorts else ("cash", "position")
    snapped = {k: snap_zero(state[k]) for k in names + ("val_price",)}
    value = None if state["value"] is None else snap_zero(state["value"])
    size, percent, ok = _resolve_size(order["size"], order["size_type"], order["direction"],
                                      snapped["position"], snapped["val_price"], value)
    lock = order.get("lock_cash") if shorts else None
    ok &= ~t.math.is_nan(order["size"]) & ~t.math.is_nan(order["price"])
    has_pct = ~t.math.is_nan(percent)
    sides = (order["direction"] == LONG_ONLY, order["direction"] == SHORT_ONLY,
             t.math.is_inf(-size) & has_pct) if shorts else (None, None, None)
    costs = (order["fees"], order["fixed_fees"], order["slippage"], order["min_size"])
    held = [snapped[k] for k in names] + [None] * (4 - len(names))
    filled, is_buy, pick = fill_order(
        held, size, order["price"], costs, sides,
        fraction=_where(has_pct, percent, t.ones_like(percent)), lock=lock,
        allow_partial=order["allow_partial"])
    fill = filled & ok & process
    new = {k: _where(fill, v, _where(process, snapped[k], state[k]))
           for k, v in zip(names, pick[3:])}
    return fill, is_buy, pick[0], pick[1], pick[2], new


# -- call order -----------------------------------------------------------------------
def insert_argsort(values, pad):
    """The call order vectorbt's ``insert_argsort_nb`` gives each row of ``values``
    ``[g, k]``: the slots in order, int32 ``[g, k]``.

    That insertion sort is stable and sorts NaN last, each NaN ahead of the NaNs
    before it; the rank of each value under those rules gives the same order
    without the loop.  ``pad`` (bool ``[g, k]``): slots after a group's columns,
    which keep their places.
    """
    t = tf()
    k = values.shape[1]
    idx = t.range(k, dtype=t.int32)[None, :]
    real = ~pad
    nan = t.math.is_nan(values) & real
    counted = real & ~nan
    zero = t.zeros_like(idx + t.cast(pad, t.int32))
    rank_value, later_nan, n_values = zero, zero, zero[:, :1]
    for j in range(k):                 # k is small: one [g, k] step per slot, no [g, k, k]
        vj, cj = values[:, j:j + 1], counted[:, j:j + 1]
        ahead = (vj < values) | ((vj == values) & (j < idx))
        rank_value += t.cast(cj & ahead, t.int32)
        later_nan += t.cast(nan[:, j:j + 1] & (j > idx), t.int32)
        n_values += t.cast(cj, t.int32)
    rank = _where(pad, idx + zero, _where(nan, n_values + later_nan, rank_value))
    return _slots_at(rank, idx + zero, k)


def _slots_at(place, slot, k):
    """``order[g, p]`` = the ``slot`` whose ``place`` is ``p`` (each place once)."""
    t = tf()
    idx = t.range(k, dtype=t.int32)[None, :]
    order = t.zeros_like(place)
    for s in range(k):
        order += _where(place[:, s:s + 1] == idx, slot[:, s:s + 1] + order * 0, order * 0)
    return order


def approx_order_value(size, size_type, direction, cash, pos, free, val_price, value):
    """``approx_order_value_nb`` ``[g, k]`` (the group's cash, free cash, value ``[g, 1]``)."""
    t = tf()
    size = _where(direction == SHORT_ONLY, -size, size)
    asset = pos * val_price
    zero = t.zeros_like(asset)
    pct_sell = _where(direction == LONG_ONLY, size * asset,
                      size * (2 * t.maximum(asset, zero) + t.maximum(free + zero, zero)))
    by_kind = [size * val_price, size + zero, _where(size >= 0, size * cash, pct_sell),
               size * val_price - asset, size - asset, size * value - asset]
    out = zero + math.nan
    for code, v in enumerate(by_kind):
        out = _where(size_type == code, v, out)
    return out


def signal_order_value(size, size_type, direction, cash, pos, free, val_price):
    """from_signals' approximate order value (``simulate_from_signals_nb``): 0 without
    an order, else by the order's size type (amount, value or percent)."""
    t = tf()
    asset = pos * val_price
    zero = t.zeros_like(asset)
    pct_sell = _where(direction == LONG_ONLY, size * asset,
                      size * (2 * t.maximum(asset, zero) + t.maximum(free + zero, zero)))
    pct = _where(size >= 0, size * cash, pct_sell)
    out = _where(size_type == AMOUNT, size * val_price, _where(size_type == VALUE, size + zero,
                                                              pct))
    return _where(size == 0, zero, out)


def group_value(cash, pos, val_price):
    """``get_group_value_nb``: cash plus each held position at its valuation price, in
    column order."""
    t = tf()
    value = cash
    for k in range(pos.shape[1]):
        held = pos[:, k] != 0
        value = value + _where(held, pos[:, k] * val_price[:, k], t.zeros_like(value))
    return value


# -- signals to orders ----------------------------------------------------------------
def signal_orders(pos, signals, size, size_type, val_price):
    """``signals_to_size_nb`` without accumulation, after the default conflict rules:
    (signed size, size type, direction) of every column."""
    t = tf()
    le, lx, se, sx = resolve_signals(pos, *signals)
    absp, zero, rev = t.abs(pos), t.zeros_like(pos), _reversal_size(size, size_type, val_price)
    amount, both, long_only, short_only = _order_codes(size_type)
    long_size = _where(se, -absp - rev, _where(lx, -absp, zero))
    long_type = _where(se | lx, amount, size_type)
    long_dir = _where(se, both, long_only)
    short_size = _where(le, absp + rev, _where(sx, absp, zero))
    short_type = _where(le | sx, amount, size_type)
    short_dir = _where(le, both, short_only)
    return _by_position(pos, (le, se), size, size_type, (long_size, long_type, long_dir),
                        (short_size, short_type, short_dir))


def accumulated_signal_orders(pos, signals, size, size_type, val_price, mode):
    """``signals_to_size_nb`` with ``accumulate`` codes ``mode`` (0 off, 1 "both",
    2 "addonly", 3 "removeonly") on resolved signals: (signed size, size type,
    direction) of every column.  An add or a removal keeps the size type; a close or
    a reversal is in shares."""
    t = tf()
    le, lx, se, sx = signals
    remove = (mode == 1) | (mode == 3)
    add = (mode == 1) | (mode == 2)
    absp, zero, rev = t.abs(pos), t.zeros_like(pos), _reversal_size(size, size_type, val_price)
    amount, both, long_only, short_only = _order_codes(size_type)
    long_size = _where(se, _where(remove, -size, -absp - rev),
                       _where(lx, _where(remove, -size, -absp), _where(le & add, size, zero)))
    long_type = _where((se | lx) & ~remove, amount, size_type)
    long_dir = _where(se, both, _where(lx | le, long_only, both))
    short_size = _where(le, _where(remove, size, absp + rev),
                        _where(sx, _where(remove, size, absp), _where(se & add, -size, zero)))
    short_type = _where((le | sx) & ~remove, amount, size_type)
    short_dir = _where(le, both, _where(sx | se, short_only, both))
    return _by_position(pos, (le, se), size, size_type, (long_size, long_type, long_dir),
                        (short_size, short_type, short_dir))


def _reversal_size(size, size_type, val_price):
    """The size a reversal adds beyond closing, in shares."""
    return _where(size_type == VALUE, size / val_price, size)


def _order_codes(size_type):
    """The codes ``AMOUNT``, ``BOTH``, ``LONG_ONLY``, ``SHORT_ONLY`` shaped as ``size_type``."""
    t = tf()
    amount = t.zeros_like(size_type) + AMOUNT
    both = t.zeros_like(size_type) + BOTH
    return amount, both, both - 2, both - 1


def _by_position(pos, entries, size, size_type, long_, short_):
    """(size, size type, direction) of each column: ``long_`` where the position is long,
    ``short_`` where short, from flat the entry's ``size`` (both directions)."""
    t = tf()
    le, se = entries
    flat_size = _where(le, size, _where(se, -size, t.zeros_like(pos)))
    both = t.zeros_like(size_type) + BOTH
    is_long, is_short = pos > 0, pos < 0
    out_size = _where(is_long, long_[0], _where(is_short, short_[0], flat_size))
    out_type = _where(is_long, long_[1], _where(is_short, short_[1], size_type))
    out_dir = _where(is_long, long_[2], _where(is_short, short_[2], both))
    return out_size, out_type, out_dir


def _stops_after(s, new_pos, pos, fill, ref, sl_ref, params, features):
    """The stops after the bar's orders: set where a position opened or reversed (with
    ``accumulate``, also where it grew and the bar's stop is set), cleared where it
    closed, else kept (the trailed reference).  ``ref``: what a new stop is measured
    from (the close, or by ``stop_entry_price``)."""
    t = tf()
    nan = t.zeros_like(new_pos) + math.nan
    flat = fill & (new_pos == 0)
    opened = fill & ~flat & ((pos == 0) | (t.sign(new_pos) != t.sign(pos)))
    sl_on = tp_on = opened
    if "accumulate" in params:
        sl_on, tp_on = stops_renewed(opened, fill, pos, new_pos, params["sl_stop"],
                                     params["tp_stop"])
    out = {}
    if "sl" in features:
        out["sl_ref"] = _where(flat, nan, _where(sl_on, ref, sl_ref))
        out["sl_stop"] = _where(flat, nan, _where(sl_on, params["sl_stop"], s["sl_stop"]))
    if "trail" in features:
        out["trail"] = _where(flat, t.zeros_like(s["trail"]),
                              _where(sl_on, params["sl_trail"], s["trail"]))
    if "tp" in features:
        out["tp_ref"] = _where(flat, nan, _where(tp_on, ref, s["tp_ref"]))
        out["tp_stop"] = _where(flat, nan, _where(tp_on, params["tp_stop"], s["tp_stop"]))
    return out


#: from_signals keywords the grouped loop reads when given (absent: vectorbt's defaults).
SIGNAL_MODES = ("accumulate", "upon_opposite_entry", "stop_entry_price", "stop_exit_price",
                "lock_cash")


def _mode_signals(pos, sig, p):
    """Resolved signals after ``upon_opposite_entry`` and this bar's ``accumulate`` code
    (None without it), as ``resolve_opposite_entry_nb`` leaves them."""
    le, lx, se, sx = resolve_signals(pos, *sig)
    acc = None
    if "accumulate" in p:
        acc = accumulation(pos, le, se, p["accumulate"], p.get("upon_opposite_entry"))
    if "upon_opposite_entry" in p:
        le, lx, se, sx = opposite_entry(pos, le, lx, se, sx, p["upon_opposite_entry"])
    return (le, lx, se, sx), acc


def _signal_bar(s, p, sig, bar, features):
    """One bar of from_signals: every column's order, its fill price, slippage and
    approximate value; the trailed stop reference."""
    t = tf()
    pos = s["position"]
    price = bar["price"]
    slip = p["slippage"]
    stop, sl_ref = stop_fill(s, pos, bar["open"], bar["low"], bar["high"], features)
    acc = None
    if any(k in p for k in SIGNAL_MODES[:2]):
        sig, acc = _mode_signals(pos, sig, p)
    le, lx, se, sx = sig
    if stop is not None:
        hit = ~t.math.is_nan(stop)
        le, se = le & ~hit, se & ~hit
        lx, sx = _where(hit, pos > 0, lx), _where(hit, pos < 0, sx)
        if "stop_exit_price" in p:
            price, slip = stop_exit_fill(hit, stop, price, bar["close"], slip,
                                         p["stop_exit_price"])
        else:
            price = _where(hit, stop, price)
            slip = _where(hit, t.zeros_like(slip), slip)
        if acc is not None:
            acc = _where(hit, t.zeros_like(acc), acc)
    if acc is None:
        size, size_type, direction = signal_orders(pos, (le, lx, se, sx), p["size"],
                                                   p["size_type"], s["val_price"])
    else:
        size, size_type, direction = accumulated_signal_orders(
            pos, (le, lx, se, sx), p["size"], p["size_type"], s["val_price"], acc)
    value = signal_order_value(size, size_type, direction, s["cash"][:, None], pos,
                               s["free"][:, None], s["val_price"])
    order = {"size": size, "size_type": size_type, "direction": direction, "price": price,
             "slippage": slip}
    return order, value, sl_ref, size != 0


def _given_bar(s, p, bar):
    """One bar of from_orders: the given orders and their approximate values."""
    t = tf()
    pos = s["position"]
    value = group_value(s["cash"], pos, s["val_price"])
    size = p["size"]
    approx = approx_order_value(size, p["size_type"], p["direction"], s["cash"][:, None], pos,
                                s["free"][:, None], s["val_price"], value[:, None])
    order = {"size": _where(p["direction"] == SHORT_ONLY, -size, size),
             "size_type": p["size_type"], "direction": p["direction"], "price": bar["price"],
             "slippage": p["slippage"]}
    return order, approx, None, t.ones_like(pos, dtype=t.bool), value


def active_first(seq, process):
    """``(order, count)``: the call order ``seq`` ``[g, k]`` with the slots that have an
    order (``process``) first, in their call order, and the most such slots of any group.

    A slot without an order changes nothing, so the loop over the slots stops after
    ``count`` of them (with sparse signals one or two of a group's assets).
    """
    t = tf()
    k = seq.shape[1]
    active = seq < 0
    for s in range(k):
        active |= (seq == s) & process[:, s:s + 1]
    act = t.cast(active, t.int32)
    ahead_active, ahead_idle, columns = act[:, :1] * 0, act[:, :1] * 0, []
    for p in range(k):
        columns.append(t.where(active[:, p:p + 1], ahead_active, ahead_idle))
        ahead_active += act[:, p:p + 1]
        ahead_idle += 1 - act[:, p:p + 1]
    n_active = ahead_active
    place = t.where(active, t.concat(columns, 1), n_active + t.concat(columns, 1))
    return _slots_at(place, seq, k), t.reduce_max(n_active)


def _column(x, at):
    """``x[g, c]`` for the one column ``c`` where ``at`` (bool ``[g, k]`` or ``[k]``)."""
    out = x[:, 0]
    for c in range(1, x.shape[1]):
        out = _where(at[..., c], x[:, c], out)
    return out


def _run_slots(s, p, order, process, value, seq, count=None, shorts=True):
    """Run the slots of every group in the order ``seq`` (a loop over the first ``count``
    slots, all without it): (new state, per-column order outputs).  ``value`` None: no
    target orders; ``shorts`` False: no position is ever short (no debt or free cash)."""
    t = tf()
    k = s["position"].shape[1]
    if count is None:
        count = t.constant(k)
    cols = t.range(k, dtype=t.int32)[None, :]
    full = dict(order, fees=p["fees"], fixed_fees=p["fixed_fees"], min_size=p["min_size"],
                allow_partial=p["allow_partial"] != 0, process=process)
    if "lock_cash" in p:
        full["lock_cash"] = p["lock_cash"] != 0
    zero = t.zeros_like(s["position"])
    group_keys, col_keys = (("cash", "free"), ("position", "debt")) if shorts else (
        ("cash",), ("position",))

    def slot(j, held, rec):
        col = _column(seq, j == cols[0])
        mask = t.equal(col[:, None], cols)

        def pick(x):                   # x[g, col[g]]: k selects (XLA's gather is slower)
            return _column(x, mask)

        state = {k: held[k] for k in group_keys}
        state.update({k: pick(held[k]) for k in col_keys}, value=value,
                     val_price=pick(s["val_price"]))
        ordered = {name: pick(v) for name, v in full.items()}
        fill, is_buy, osize, oprice, ofees, new = execute_order(state, ordered,
                                                                ordered.pop("process"), shorts)

        def put(x, new_x):
            return _where(mask, new_x[:, None], x)

        held = dict({k: new[k] for k in group_keys},
                    **{k: put(held[k], new[k]) for k in col_keys})
        signed = _where(fill, _where(is_buy, osize, -osize), t.zeros_like(osize))
        rec = {"filled": rec["filled"] | (mask & fill[:, None]), "size": put(rec["size"], signed),
               "price": put(rec["price"], oprice), "fees": put(rec["fees"], ofees)}
        return j + 1, held, rec

    held = {k: s[k] for k in group_keys + col_keys}
    rec = {"filled": t.zeros_like(process), "size": zero, "price": zero, "fees": zero}
    _, held, rec = t.while_loop(lambda j, *_: j < count, slot, (t.constant(0), held, rec))
    return dict(s, **held), rec


def _initial(init_cash, k, features, shorts):
    t = tf()
    g = init_cash.shape[0] if init_cash.shape[0] is not None else t.shape(init_cash)[0]
    zero = t.zeros([g, k], init_cash.dtype)
    nan = zero + math.nan
    s = {"cash": init_cash, "position": zero, "val_price": nan, "peak": init_cash * math.nan,
         "peak_i": t.zeros_like(init_cash, dtype=t.int32),
         "dd_on": t.zeros_like(init_cash, dtype=t.bool), "valley": init_cash * math.nan,
         "max_dd": init_cash * 0, "max_dur": init_cash * 0,
         "has_dd": t.zeros_like(init_cash, dtype=t.bool), "prev_value": init_cash,
         "acc_r": init_cash * 0, "acc_r2": init_cash * 0, "acc_fees": init_cash * 0,
         "acc_orders": init_cash * 0}
    if shorts:
        s.update(free=init_cash, debt=zero)
    if "sl" in features:
        s.update(sl_ref=nan, sl_stop=nan)
    if "trail" in features:
        s["trail"] = t.zeros_like(zero, dtype=t.bool)
    if "tp" in features:
        s.update(tp_ref=nan, tp_stop=nan)
    return s


def _bar_inputs(bars, i, shape):
    """Row ``i`` of each bar input, broadcast to ``[g, k]`` (they may be ``[n, k]``)."""
    t = tf()
    return {name: t.broadcast_to(x[i], shape) for name, x in bars.items()}


def _sums(s, value, rec, i, n):
    """Running value statistics of each group: drawdown, return moments, fees, orders."""
    t = tf()
    prev = s["prev_value"]
    safe = _where(prev == 0, t.ones_like(prev), prev)
    r = (value - prev) / safe
    r = _where(prev < 0, -r, r)
    r = _where(prev == 0, _where(value == 0, t.zeros_like(r), t.sign(value) * math.inf), r)
    out = drawdown_step(i, value, s, n)
    out.update(prev_value=value, acc_r=s["acc_r"] + r, acc_r2=s["acc_r2"] + r * r,
               acc_fees=s["acc_fees"] + t.reduce_sum(_where(rec["filled"], rec["fees"],
                                                             t.zeros_like(rec["fees"])), 1),
               acc_orders=s["acc_orders"] + t.reduce_sum(t.cast(rec["filled"], value.dtype),
                                                         1))
    return out


def _call_order(auto, approx, pad, call_seq, i):
    """This bar's call order ``[g, k]``: sorted by ``approx`` where ``auto`` (a bool
    tensor, or a Python bool that leaves the other out of the graph), else given."""
    t = tf()
    if auto is False:
        return call_seq[t.minimum(i, t.shape(call_seq)[0] - 1)]
    if auto is True:
        return insert_argsort(approx, pad)
    given = call_seq[t.minimum(i, t.shape(call_seq)[0] - 1)]
    return _where(auto, insert_argsort(approx, pad), given)


def simulate_groups(bars, signals, params, call_seq, auto, *, mode="signals",
                    keep_bars=True, features=(), shorts=True):
    """Run shared-cash groups bar by bar.

    ``bars``: ``close``, ``price`` (where orders fill), ``open``, ``low``, ``high``,
    each ``[n, k]`` or ``[n, g, k]``; ``signals``: ``(le, lx, se, sx)`` bool
    ``[n, g, k]`` (``mode="signals"``) or None (``mode="orders"``: ``params``' size,
    size_type, direction are the orders); ``params``: ``[g, k]`` or ``[n, g, k]``
    tensors of size, size_type, direction, fees, fixed_fees, slippage, min_size,
    allow_partial, sl_stop, sl_trail, tp_stop (signals), ``pad`` (bool, slots that
    never trade) and ``init_cash`` ``[g]``; ``call_seq``: int32 ``[m, g, k]``, the
    slots' call order on each bar (``m = 1``: the same on every bar); ``auto``
    (scalar bool tensor, or a Python bool fixed at trace time): sort by order value
    instead (vectorbt's "auto").  ``features``: the stops used ("sl", "tp", "trail");
    ``shorts`` False (signals without short entries or exits only): no position is
    ever short, so the loop leaves out debt and free cash (free cash is the cash).
    Returns per-bar :data:`GROUP_BAR_OUTPUTS` (with ``keep_bars``) and the
    groups' end value, drawdown and return sums.
    """
    t = tf()
    init = params["init_cash"]
    k = params["pad"].shape[1]
    n = t.shape(bars["close"])[0]
    g = init.shape[0]
    shape = [g, k] if g is not None else t.stack([t.shape(init)[0], k])
    state = _initial(init, k, features, shorts)
    names = GROUP_BAR_OUTPUTS if keep_bars else ()
    arrays = {name: t.TensorArray(t.int32 if name == "call_seq" else init.dtype, size=n)
              for name in names}

    def body(i, s, arrays):
        p = {name: (v[i] if v.shape.rank == 3 else v) for name, v in params.items()
             if name != "init_cash"}
        bar = _bar_inputs(bars, i, shape)
        s = dict(s, val_price=bar["price"])
        seen = s if shorts else dict(s, free=s["cash"])
        if mode == "signals":             # signals are never target orders: no value
            sig = tuple(x[i] for x in signals)
            order, approx, sl_ref, process = _signal_bar(seen, p, sig, bar, features)
            value = None
        else:
            order, approx, sl_ref, process, value = _given_bar(seen, p, bar)
        process &= ~p["pad"]
        seq = _call_order(auto, approx, p["pad"], call_seq, i)
        if mode == "signals":             # bars without an order skip their slots
            run_seq, count = active_first(seq, process)
        else:
            run_seq, count = seq, None
        new, rec = _run_slots(s, p, order, process, value, run_seq, count, shorts)
        if features:
            ref = bar["close"] if "stop_entry_price" not in p else stop_entry_ref(
                p["stop_entry_price"], bar["close"], bar["price"], rec["price"])
            new.update(_stops_after(s, new["position"], s["position"], rec["filled"], ref,
                                    sl_ref, p, features))
        bar_value = group_value(new["cash"], new["position"], bar["close"])
        new.update(_sums(s, bar_value, rec, i, n))
        outs = {"order_size": rec["size"],
                "order_price": _where(rec["filled"], rec["price"], rec["price"] * math.nan),
                "order_fees": _where(rec["filled"], rec["fees"], t.zeros_like(rec["fees"])),
                "call_seq": seq, "cash": new["cash"],
                "position": new["position"], "value": bar_value}
        arrays = {name: arrays[name].write(i, outs[name]) for name in arrays}
        return i + 1, new, arrays

    _, state, arrays = t.while_loop(lambda i, *_: i < n, body, [t.constant(0), state, arrays])
    out = {name: a.stack() for name, a in arrays.items()}
    out.update({name: state[name] for name in ("prev_value", "max_dd", "max_dur", "has_dd",
                                               "acc_r", "acc_r2", "acc_fees", "acc_orders")})
    out["n_bars"] = n
    return out
