"""The from-signals portfolio loop in TensorFlow: vectorbt's order semantics, bar by bar.

:func:`simulate_signals` runs one ``tf.while_loop`` over bars, each step updating
every column at once (columns are independent: one asset, one parameter row, or
both).  It reproduces ``vectorbt.portfolio.nb.simulate_from_signals_nb`` with
vectorbt's defaults (no accumulation, ``upon_*_conflict="ignore"``,
``upon_opposite_entry="reversereduce"``, stops entered at the close, exited as
stop-limit orders, ``min_size=1e-8``), its order execution (``buy_nb`` /
``sell_nb``, with its tolerant comparisons ``rel_tol=1e-9``, ``abs_tol=1e-12``),
the exit-trade records it derives from the orders and the value series its
``Portfolio`` computes from them.  The same step also keeps vectorbt's drawdown
records (peak, valley, recovery) so nothing of size ``[bars, columns]`` but the
returns leaves the loop.

Users call :func:`flowsim.finance.from_signals` or
:func:`flowsim.finance.signal_sweep`; this module is the kernel they share.
"""
import math

import numpy as np

from ..core.kernel import fusion_barrier
from ..core.lazy_tf import tf
from .orders import (
    accumulated_order,
    accumulation,
    locked_cash,
    opposite_entry,
    params_at,
    sized,
    stop_entry_ref,
    stop_exit_fill,
    stops_renewed,
)

REL_TOL = 1e-9
ABS_TOL = 1e-12

#: Per-column parameters the loop reads, in order.
COLUMN_PARAMS = ("init_cash", "size", "fees", "fixed_fees", "slippage", "sl_stop", "sl_trail",
                 "tp_stop", "min_size")

#: Per-bar outputs of the loop, each ``[bars, columns]``.
BAR_OUTPUTS = ("value", "order_size", "order_price", "order_fees", "trade_closed",
               "trade_size", "trade_entry_idx", "trade_entry_price", "trade_entry_fees",
               "trade_exit_price", "trade_exit_fees", "trade_direction")


def is_close(a, b):
    t = tf()
    finite = t.math.is_finite(a) & t.math.is_finite(b)
    tol = t.maximum(REL_TOL * t.maximum(t.abs(a), t.abs(b)), ABS_TOL)
    return (a == b) | (finite & (t.abs(a - b) <= tol))


def is_less(a, b):
    return ~is_close(a, b) & (a < b)


def close_or_less(a, b):
    return is_close(a, b) | (a < b)


def add_snapped(a, b):
    """vectorbt's ``add_nb``: ``a + b``, snapped to 0 when it nearly cancels."""
    t = tf()
    s = a + b
    opposite = t.sign(a) != t.sign(b)
    zero = t.where(opposite, is_close(t.abs(a), t.abs(b)), is_close(s, t.zeros_like(s)))
    return t.where(zero, t.zeros_like(s), s)


def add_tolerant(a, b):
    """vectorbt's ``add_nb`` (public name of :func:`add_snapped` for the metrics)."""
    return add_snapped(a, b)


def snap_zero(x):
    """``x`` with values close to 0 (vectorbt's ``is_close_nb``) set to 0."""
    t = tf()
    return t.where(is_close(x, t.zeros_like(x)), t.zeros_like(x), x)


def _barrier(i, *xs):
    """:func:`flowsim.core.kernel.fusion_barrier` at bar ``i``: without it XLA copies
    every shared sub-expression of the bar step into each of the ~60 state updates
    that use it."""
    return fusion_barrier(i >= 0, *xs)


def _buy(cash, pos, debt, free, size, price, short_only, fees, fixed, slip, min_size,
         fraction=None, lock=None):
    """``buy_nb``: (filled, size, price, fees, cash, pos, debt, free).

    ``short_only`` None: no position is ever short (``debt``, ``free`` unused, None out).
    ``fraction``: of the cash the order may spend (``buy_nb``'s ``percent``; None: all).
    ``lock``: ``lock_cash`` per column (None: off).
    """
    t = tf()
    zero = t.zeros_like(cash)
    adj = price * (1 + slip)
    base = cash
    if lock is not None and short_only is not None:
        locked = locked_cash(cash, pos, debt, free, adj, fees, fixed, add_snapped)
        base = t.minimum(t.where(lock, locked, cash), cash)
    limit = base if fraction is None else t.minimum(base, fraction * base)
    if short_only is None:
        ok, adj_size = limit != 0, size
    else:
        ok = t.where(short_only, pos != 0, limit != 0)
        adj_size = t.where(short_only, t.minimum(-pos, size), size)
    ok &= adj_size != 0
    req_cash = adj_size * adj
    req_fees = req_cash * fees + fixed
    total = req_cash + req_fees
    enough = close_or_less(total, limit)
    max_req = add_snapped(limit, -fixed) / (1 + fees)
    ok &= enough | (max_req > 0)
    final_size = t.where(enough, adj_size, max_req / adj)
    fees_paid = t.where(enough, req_fees, limit - max_req)
    final_req = t.where(enough, total, limit)
    ok &= ~is_close(adj_size, zero) & ~is_less(final_size, min_size)
    new_cash = add_snapped(cash, -final_req)
    new_pos = add_snapped(pos, final_size)
    if short_only is None:
        return ok, final_size, adj, fees_paid, new_cash, new_pos
    was_short = pos < 0
    safe_pos = t.where(was_short, t.abs(pos), t.ones_like(pos))
    short_size = t.where(new_pos < 0, final_size, t.abs(pos))
    debt_diff = short_size * (debt / safe_pos)
    new_debt = t.where(was_short, add_snapped(debt, -debt_diff), debt)
    new_free = t.where(was_short, add_snapped(free + 2 * debt_diff, -final_req),
                       add_snapped(free, -final_req))
    return ok, final_size, adj, fees_paid, new_cash, new_pos, new_debt, new_free


def _sell(cash, pos, debt, free, size, price, long_only, all_in, fees, fixed, slip, min_size,
          fraction=None, lock=None):
    """``sell_nb`` (``all_in``: size=inf with a percent; ``fraction``: its ``percent``,
    1 for none, None: 1 everywhere; ``lock``: ``lock_cash`` per column, None: off).

    ``long_only`` None: every sell closes a long (no shorts), as ``long_only=True``.
    """
    t = tf()
    zero = t.zeros_like(cash)
    adj = price * (1 - slip)
    long_limit = t.minimum(pos, size)
    if fraction is not None:
        long_limit = fraction * long_limit
    if long_only is None:
        size_limit, ok = long_limit, pos != 0
    else:
        long_size = t.maximum(pos, zero)
        total_free = add_snapped(free, long_size * adj * (1 - fees))
        max_short = add_snapped(total_free, -fixed) / (adj * (1 + fees))
        max_limit = t.where(total_free <= 0, long_size, add_snapped(long_size, max_short))
        ok_all = t.where(total_free <= 0, pos > 0, max_limit > 0)
        scaled = max_limit if fraction is None else fraction * max_limit
        limited, free_ok = size, t.ones_like(ok_all)
        if lock is not None:                       # shorts only as far as the free cash goes
            scaled = t.where(lock, t.minimum(scaled, max_limit), scaled)
            limited = t.where(lock, t.minimum(size, max_limit), size)
            free_ok = t.where(lock, ok_all, free_ok)
        size_limit = t.where(long_only, long_limit, t.where(all_in, scaled, limited))
        ok = t.where(long_only, pos != 0, t.where(all_in, ok_all, free_ok))
    ok &= ~is_close(size_limit, zero) & ~is_less(size_limit, min_size)
    acq = size_limit * adj
    fees_paid = acq * fees + fixed
    final_acq = add_snapped(acq, -fees_paid)
    ok &= final_acq >= 0
    new_cash = cash + final_acq
    new_pos = add_snapped(pos, -size_limit)
    if long_only is None:
        return ok, size_limit, adj, fees_paid, new_cash, new_pos
    short_size = t.where(pos < 0, size_limit, t.abs(new_pos))
    short_value = short_size * adj
    goes_short = new_pos < 0
    new_debt = t.where(goes_short, debt + short_value, debt)
    new_free = t.where(goes_short, add_snapped(free, add_snapped(final_acq, -2 * short_value)),
                       free + final_acq)
    return ok, size_limit, adj, fees_paid, new_cash, new_pos, new_debt, new_free


def _stop_price(pos, ref, stop, o, lo, hi, below):
    """``get_stop_price_nb``: fill price of a stop hit on this bar, NaN if none."""
    t = tf()
    nan = t.fill(t.shape(pos), t.constant(math.nan, pos.dtype))
    down = (pos > 0) == below                       # the stop lies below the reference
    level = t.where(down, ref * (1 - stop), ref * (1 + stop))
    past_open = t.where(down, o <= level, level <= o)
    inside = (lo <= level) & (level <= hi)
    out = t.where(past_open, o, t.where(inside, level, nan))
    return t.where((pos != 0) & ~t.math.is_nan(stop), out, nan)


def resolve_signals(pos, le, lx, se, sx):
    """Default conflict resolution: an entry and an exit (or two entries) cancel.

    ``se`` / ``sx`` None: no short signals (the short terms drop out exactly).
    """
    if se is None:
        clash = le & lx
        return le & ~clash, lx & ~clash, None, None
    any_entry = le | se
    long_clash = any_entry & le & lx
    short_clash = any_entry & se & sx
    le, lx = le & ~long_clash, lx & ~long_clash
    se, sx = se & ~short_clash, sx & ~short_clash
    both = any_entry & le & se
    return le & ~both, lx, se & ~both, sx


def _order_size(pos, le, lx, se, sx, size):
    """``signals_to_size_nb`` with accumulation off: (signed size, long-only?, short-only?).

    Without short signals no position is short: ``(size, long-only?, None)``.
    """
    t = tf()
    zero = t.zeros_like(pos)
    absp = t.abs(pos)
    if se is None:
        out = t.where(pos > 0, t.where(lx, -absp, zero), t.where(le, size, zero))
        return out, (pos > 0) & lx, None
    long_ = t.where(se, -absp - size, t.where(lx, -absp, zero))
    short_ = t.where(le, absp + size, t.where(sx, absp, zero))
    flat = t.where(le, size, t.where(se, -size, zero))
    out = t.where(pos > 0, long_, t.where(pos < 0, short_, flat))
    long_only = (pos > 0) & ~se & lx
    short_only = (pos < 0) & ~le & sx
    return out, long_only, short_only


def _trade_update(fill, i, is_buy, s, p, f, tr):
    """Exit-trade bookkeeping of one filled order (``get_exit_trades_nb``)."""
    t = tf()
    in_pos, tdir, eidx, esize, egross, efees = tr
    zero = t.zeros_like(s)
    opening = fill & ~in_pos
    tdir = t.where(opening, t.where(is_buy, t.ones_like(tdir), -t.ones_like(tdir)), tdir)
    eidx = t.where(opening, t.fill(t.shape(eidx), i), eidx)
    esize, egross, efees = (t.where(opening, zero, v) for v in (esize, egross, efees))
    same = fill & ((tdir > 0) == is_buy)
    reduce_ = fill & ~same
    closes = reduce_ & close_or_less(s, esize)
    exact = closes & is_close(s, esize)
    reverse = reduce_ & ~closes
    safe = t.where(esize > 0, esize, t.ones_like(esize))
    exit_size = t.where(closes, t.where(exact, esize, s), esize)
    exit_fees = t.where(closes, f, esize / t.where(s > 0, s, t.ones_like(s)) * f)
    rec = {"trade_closed": reduce_, "trade_size": exit_size,
           "trade_entry_idx": t.cast(eidx, s.dtype), "trade_entry_price": egross / safe,
           "trade_entry_fees": exit_size / safe * efees, "trade_exit_price": p,
           "trade_exit_fees": exit_fees, "trade_direction": tdir}
    frac = (esize - s) / safe
    part = closes & ~exact
    new_size = t.where(same, esize + s, t.where(part, esize * frac, t.where(reverse, s - esize,
                                                                           esize)))
    new_gross = t.where(same, egross + s * p, t.where(part, egross * frac,
                                                      t.where(reverse, (s - esize) * p, egross)))
    new_fees = t.where(same, efees + f, t.where(part, efees * frac,
                                                t.where(reverse, f - exit_fees, efees)))
    in_pos = (in_pos | opening) & ~exact
    tdir = t.where(reverse, -tdir, tdir)
    eidx = t.where(reverse, t.fill(t.shape(eidx), i), eidx)
    return (in_pos, tdir, eidx, new_size, new_gross, new_fees), rec


#: Optional parts of the loop, switched at trace time (one compiled kernel per set):
#: short signals or positions, stop-loss, take-profit, trailing stop-loss, bars
#: (open/high/low) other than the close.  Leaving a part out is exact only when
#: it is unused: no short signal, every stop NaN, no ``sl_trail``, open = high =
#: low = close.
FEATURES = ("short", "sl", "tp", "trail", "ohlc")


def features_of(params, short=True, ohlc=True):
    """The :data:`FEATURES` a run needs, from its numpy column parameters."""
    f = ["short"] if short else []
    if np.any(~np.isnan(params["sl_stop"])):
        f.append("sl")
        if np.any(np.asarray(params["sl_trail"]) != 0):
            f.append("trail")
    if np.any(~np.isnan(params["tp_stop"])):
        f.append("tp")
    return tuple(f + (["ohlc"] if ohlc else []))


def _initial_state(init, zero, features):
    t = tf()
    nan = zero + math.nan
    false = t.zeros_like(zero, dtype=t.bool)
    state = dict(cash=init, pos=zero, rcash=init, rpos=zero, peak=nan,
                 peak_i=t.zeros_like(zero, dtype=t.int32), dd_on=false, valley=nan,
                 max_dd=zero, max_dur=zero, has_dd=false)
    if "short" in features:
        state.update(debt=zero, free=init)
    if "sl" in features:
        state.update(sl_ref=nan, sl_stop=nan)
    if "trail" in features:
        state["trail"] = false
    if "tp" in features:
        state.update(tp_ref=nan, tp_stop=nan)
    state.update(_zero_sums(zero))
    state["prev_value"] = init
    return state


def stop_fill(s, pos, o, lo, hi, features):
    """(fill price of a stop hit on this bar or NaN, trailed stop-loss reference); None if
    the run has no stops."""
    t = tf()
    stop = sl_ref = None
    if "sl" in features:
        stop = _stop_price(pos, s["sl_ref"], s["sl_stop"], o, lo, hi, True)
        sl_ref = s["sl_ref"]
    if "tp" in features:
        tp_hit = _stop_price(pos, s["tp_ref"], s["tp_stop"], o, lo, hi, False)
        stop = tp_hit if stop is None else t.where(t.math.is_nan(stop), tp_hit, stop)
    if "trail" in features:
        trail = ~t.math.is_nan(s["sl_stop"]) & s["trail"]
        sl_ref = t.where(trail & (pos > 0) & (hi > s["sl_ref"]), hi, s["sl_ref"])
        sl_ref = t.where(trail & (pos < 0) & (lo < sl_ref), lo, sl_ref)
    return stop, sl_ref


def _stop_state(new, s, p, fill, pos, c, sl_ref, features):
    """The stops' references after this bar's order: set on an entry, cleared when flat."""
    t = tf()
    npos = new["pos"]
    flat = fill & (npos == 0)
    opened = fill & (npos != 0) & ((pos == 0) | (t.sign(npos) != t.sign(pos)))
    nan = t.zeros_like(c) + math.nan
    sl_on = tp_on = opened
    if "accumulate" in p:
        sl_on, tp_on = stops_renewed(opened, fill, pos, npos, p["sl_stop"], p["tp_stop"])
    if "sl" in features:
        new["sl_ref"] = t.where(flat, nan, t.where(sl_on, c, sl_ref))
        new["sl_stop"] = t.where(flat, nan, t.where(sl_on, p["sl_stop"], s["sl_stop"]))
    if "trail" in features:
        new["trail"] = t.where(flat, t.zeros_like(s["trail"]),
                               t.where(sl_on, p["sl_trail"], s["trail"]))
    if "tp" in features:
        new["tp_ref"] = t.where(flat, nan, t.where(tp_on, c, s["tp_ref"]))
        new["tp_stop"] = t.where(flat, nan, t.where(tp_on, p["tp_stop"], s["tp_stop"]))


def _order(i, s, p, pos, signals, stop, base_price, short, close=None):
    """This bar's order: (signed size, fill price, slippage, long-only?, short-only?,
    cash fraction or None)."""
    t = tf()
    le, lx, se, sx = resolve_signals(pos, *signals)
    acc = None
    if "accumulate" in p:
        acc = accumulation(pos, le, se, p["accumulate"], p.get("upon_opposite_entry"))
    if "upon_opposite_entry" in p and short:
        le, lx, se, sx = opposite_entry(pos, le, lx, se, sx, p["upon_opposite_entry"])
    slip = p["slippage"]
    price = base_price
    if stop is not None:
        hit = ~t.math.is_nan(stop)
        le = le & ~hit
        lx = t.where(hit, pos > 0, lx)
        if short:
            se = se & ~hit
            sx = t.where(hit, pos < 0, sx)
        if "stop_exit_price" in p:
            price, slip = stop_exit_fill(hit, stop, base_price, close, slip,
                                         p["stop_exit_price"])
        else:
            price = t.where(hit, stop, base_price)
            slip = t.where(hit, t.zeros_like(slip), slip)
        if acc is not None:
            acc = t.where(hit, t.zeros_like(acc), acc)
    size, fraction = p["size"], None
    if "size_type" in p:
        size, fraction = sized(size, p["size_type"], base_price, pos)
    if acc is None:
        size, long_only, short_only = _order_size(pos, le, lx, se, sx, size)
    else:
        size, long_only, short_only = accumulated_order(pos, le, lx, se, sx, size, acc)
    return size, price, slip, long_only, short_only, fraction


def _execute(i, s, p, size, price, slip, long_only, short_only, short, fraction=None):
    """Fill this bar's order: (filled?, size, price, fees, new cash/pos(/debt/free))."""
    t = tf()
    names = ("cash", "pos", "debt", "free") if short else ("cash", "pos")
    snapped = [snap_zero(s[k]) for k in names]
    cash, cpos = snapped[:2]
    debt, free = snapped[2:] if short else (None, None)
    all_in = t.math.is_inf(size) & (size < 0) if short else None
    args = _barrier(i, size, price, slip, *snapped,
                    *((long_only, short_only, all_in) if short else (long_only,)))
    size, price, slip, cash, cpos = args[:5]
    if short:
        debt, free = args[5:7]
        long_only, short_only, all_in = args[7:]
    else:
        long_only = args[5]
    lock = (p["lock_cash"] != 0) if "lock_cash" in p and short else None
    partial = (p["allow_partial"] != 0) if "allow_partial" in p else None
    fill, is_buy, pick = fill_order(
        (cash, cpos, debt, free), size, price, (p["fees"], p["fixed_fees"], slip, p["min_size"]),
        (long_only if short else None, short_only, all_in), fraction=fraction, lock=lock,
        allow_partial=partial, barrier=lambda *xs: _barrier(i, *xs))
    new = {k: t.where(fill, v, s[k]) for k, v in zip(names, pick[3:])}
    return fill, is_buy, pick[0], pick[1], pick[2], new


def fill_order(held, size, price, costs, sides, fraction=None, lock=None, allow_partial=None,
               barrier=None):
    """One order per column, vectorbt's ``buy_nb`` where ``size > 0`` else ``sell_nb``:
    ``(filled, is_buy, [size, price, fees, cash, position(, debt, free)])``.

        >>> filled, is_buy, out = fill_order((cash, pos, debt, free), size, price,
        ...                                  (fees, fixed_fees, slippage, min_size),
        ...                                  (long_only, short_only, all_in))

    ``held``: cash, position and (with shorts) debt and free cash; ``size``: signed
    shares (+-inf: all); ``sides``: sells only close longs, buys only cover shorts,
    a sell of ``inf`` goes all in (all None: no shorts); ``fraction``: ``percent``
    of the cash a buy spends or of the largest all-in sell (1: none); ``lock``:
    ``lock_cash``; ``allow_partial`` (bool, None: allowed): False refuses a finite
    order cash cannot fill whole; ``barrier``: applied to the picked outputs.
    """
    t = tf()
    cash, pos, debt, free = held
    fees, fixed, slip, min_size = costs
    long_only, short_only, all_in = sides
    b = _buy(cash, pos, debt, free, size, price, short_only, fees, fixed, slip, min_size,
             fraction, lock)
    q = _sell(cash, pos, debt, free, -size, price, long_only, all_in, fees, fixed, slip,
              min_size, fraction, lock)
    is_buy = size > 0
    pick = [t.where(is_buy, x, y) for x, y in zip(b, q)]
    if barrier is not None:
        pick = barrier(*pick)
    fill = pick[0] & (size != 0)
    if allow_partial is not None:                 # a finite size filled whole or not at all
        asked = t.abs(size)
        fill &= allow_partial | ~t.math.is_finite(asked) | ~is_less(pick[1], asked)
    return fill, is_buy, list(pick[1:])


def simulate_signals(bars, signals, params, keep_bars=True, rates=(0.0, 0.0, 0.0),
                     features=FEATURES):
    """Run the portfolio over ``bars`` (dict of ``close`` and optionally ``open, high,
    low, price``, each ``[n, a]``; column ``j`` of the ``c`` columns trades asset
    ``j % a``, so a sweep of ``c / a`` parameter rows passes each asset once).

    ``signals``: ``(long_entries, long_exits, short_entries, short_exits)`` bool
    ``[n, c]`` (the short ones may be None without ``"short"`` in ``features``);
    ``params``: dict of :data:`COLUMN_PARAMS` ``[c]`` tensors (stops NaN
    when off, ``sl_trail`` bool); ``features``: the :data:`FEATURES` the run
    uses (trace-time; leave one out only where it is unused, see
    :func:`features_of`).  Returns a dict of :data:`BAR_OUTPUTS` ``[n, c]``
    (only with ``keep_bars``) plus the end-of-run drawdown summary ``max_dd``,
    ``max_dd_duration``, ``has_dd``, the open trade ``open_*`` ``[c]`` and the
    running sums ``acc_*`` of :func:`accumulate` (``rates``: risk-free rate,
    Omega's per-bar threshold, required return) that :func:`stats_from_sums` turns
    into the metrics without any ``[n, c]`` array.
    """
    t = tf()
    features = tuple(features)
    short, ohlc = "short" in features, "ohlc" in features
    close = bars["close"]
    dtype = close.dtype
    n = t.shape(close)[0]
    le_a, lx_a, se_a, sx_a = signals
    p = params
    zero = t.zeros_like(p["init_cash"])
    static = le_a.shape[1] is not None and close.shape[1] is not None
    reps = le_a.shape[1] // close.shape[1] if static else t.shape(le_a)[1] // t.shape(close)[1]
    state = _initial_state(p["init_cash"], zero, features)
    trade = (t.zeros_like(zero, dtype=t.bool), zero, t.zeros_like(zero, dtype=t.int32),
             zero, zero, zero)
    arrays = {k: t.TensorArray(dtype if not k == "trade_closed" else t.bool, size=n)
              for k in (BAR_OUTPUTS if keep_bars else ())}

    def row(k, i):
        if static and reps == 1:
            return bars[k][i]
        x = t.tile(bars[k][i], [reps])
        x.set_shape(zero.shape)
        return x

    def body(i, s, tr, arrays):
        c = row("close", i)
        o, lo, hi = (row(k, i) for k in ("open", "low", "high")) if ohlc else (c, c, c)
        pos = s["pos"]
        stop, sl_ref = stop_fill(s, pos, o, lo, hi, features)
        sig = (le_a[i], lx_a[i]) + ((se_a[i], sx_a[i]) if short else (None, None))
        base = row("price", i) if "price" in bars else c
        pi = params_at(p, i)
        size, price, slip, long_only, short_only, frac = _order(i, s, pi, pos, sig, stop, base,
                                                                short, c)
        fill, is_buy, osize, oprice, ofees, new = _execute(i, s, pi, size, price, slip,
                                                           long_only, short_only, short, frac)
        ref = c if "stop_entry_price" not in pi else stop_entry_ref(
            pi["stop_entry_price"], c, base, oprice)
        _stop_state(new, s, pi, fill, pos, ref, sl_ref, features)
        # Value from the order records, as Portfolio.value() computes it.
        signed = t.where(fill, t.where(is_buy, osize, -osize), zero)
        flow = t.where(fill, add_snapped(zero, -signed * oprice - ofees), zero)
        new["rcash"] = add_snapped(s["rcash"], flow)
        new["rpos"] = add_snapped(s["rpos"], signed)
        value = new["rcash"] + new["rpos"] * c
        new.update(drawdown_step(i, value, s, n))
        tr, rec = _trade_update(fill, i, is_buy, osize, oprice, ofees, tr)
        rec["trade_closed"] = rec["trade_closed"] & fill
        rec.update(value=value, order_size=signed,
                   order_price=t.where(fill, oprice, zero + math.nan),
                   order_fees=t.where(fill, ofees, zero))
        names = sorted(rec)
        *vals, tr = _barrier(i, *(rec[k] for k in names), tr)
        rec = dict(zip(names, vals))
        value = rec["value"]
        new.update(accumulate(s, rec, value, s["prev_value"], rates, i))
        arrays = {k: arrays[k].write(i, rec[k]) for k in arrays}
        return i + 1, new, tr, arrays

    _, state, trade, arrays = t.while_loop(lambda i, *_: i < n, body,
                                           [t.constant(0), state, trade, arrays])
    out = {k: v.stack() for k, v in arrays.items()}
    out.update({k: v for k, v in state.items() if k.startswith("acc_")})
    out["n_bars"] = n
    out["prev_value"] = state["prev_value"]
    in_pos, tdir, eidx, esize, egross, efees = trade
    open_ = in_pos & is_less(-esize, zero)
    safe = t.where(esize > 0, esize, t.ones_like(esize))
    out.update(max_dd=state["max_dd"], max_dd_duration=state["max_dur"], has_dd=state["has_dd"],
               open_trade=open_, open_size=esize, open_entry_idx=t.cast(eidx, dtype),
               open_entry_price=egross / safe, open_entry_fees=efees, open_direction=tdir)
    return out


_SUM_NAMES = ("fees", "closed", "win", "lose", "even", "win_pnl", "lose_pnl", "win_ret",
              "lose_ret", "r", "r2", "omega_pos", "omega_neg", "down2")


def _zero_sums(zero):
    sums = {f"acc_{k}": zero for k in _SUM_NAMES}
    sums.update(acc_best=zero - math.inf, acc_worst=zero + math.inf, acc_cum=zero + 100.0,
                acc_cum_high=zero - math.inf, acc_cum_dd=zero, prev_value=None)
    return sums


def accumulate(s, rec, value, prev, rates, i=None):
    """Running sums of one bar: fees, closed-trade statistics, return moments.

    ``i`` (the bar, in the loop): compute the trade's PnL once for all the sums.

    The trades' PnL and return are ``get_trade_stats_nb``'s; bar returns are
    ``get_return_nb``'s; ``rates`` = (risk-free, Omega threshold, required return).
    """
    t = tf()
    rf, thresh, req = rates
    zero = t.zeros_like(value)
    closed = rec["trade_closed"]
    size = rec["trade_size"]
    entry_val = size * rec["trade_entry_price"]
    diff = add_snapped(size * rec["trade_exit_price"], -entry_val)
    diff = t.where(rec["trade_direction"] < 0, -diff, diff)
    pnl = diff - rec["trade_entry_fees"] - rec["trade_exit_fees"]
    ret = pnl / t.where(closed, entry_val, t.ones_like(entry_val))
    if i is not None:
        pnl, ret = _barrier(i, pnl, ret)
    win, lose = closed & (pnl > 0), closed & (pnl < 0)

    def add(name, mask, x):
        return s[name] + t.where(mask, x, zero)

    one = t.ones_like(value)
    safe = t.where(prev == 0, one, prev)
    r = (value - prev) / safe
    r = t.where(prev < 0, -r, r)
    r = t.where(prev == 0, t.where(value == 0, zero, t.sign(value) * math.inf), r)
    y = r - rf - thresh
    adj = t.minimum(r - req, 0)
    cum = s["acc_cum"] * (1 + r)
    high = t.maximum(s["acc_cum_high"], cum)
    return {"acc_fees": s["acc_fees"] + rec["order_fees"],
            "acc_closed": add("acc_closed", closed, one), "acc_win": add("acc_win", win, one),
            "acc_lose": add("acc_lose", lose, one),
            "acc_even": add("acc_even", closed & (pnl == 0), one),
            "acc_win_pnl": add("acc_win_pnl", win, pnl),
            "acc_lose_pnl": add("acc_lose_pnl", lose, pnl),
            "acc_win_ret": add("acc_win_ret", win, ret),
            "acc_lose_ret": add("acc_lose_ret", lose, ret),
            "acc_best": t.where(closed, t.maximum(s["acc_best"], ret), s["acc_best"]),
            "acc_worst": t.where(closed, t.minimum(s["acc_worst"], ret), s["acc_worst"]),
            "acc_r": s["acc_r"] + r, "acc_r2": s["acc_r2"] + r * r,
            "acc_omega_pos": add("acc_omega_pos", y > 0, y),
            "acc_omega_neg": add("acc_omega_neg", y < 0, y),
            "acc_down2": s["acc_down2"] + adj * adj,
            "acc_cum": cum, "acc_cum_high": high,
            "acc_cum_dd": t.minimum(s["acc_cum_dd"], cum / high - 1), "prev_value": value}


def drawdown_step(i, value, s, n):
    """One bar of ``get_drawdowns_nb`` on the value series: running worst and longest."""
    t = tf()
    peak, peak_i, dd_on, valley = s["peak"], s["peak_i"], s["dd_on"], s["valley"]
    up = t.math.is_nan(peak) | (value >= peak)
    recovered = up & dd_on
    new_peak = up & ~dd_on
    starts = ~up & ~dd_on
    deeper = ~up & dd_on & (value < valley)
    valley = t.where(starts | deeper, value, valley)
    dd_on2 = (dd_on | starts) & ~recovered
    last = i == n - 1
    active = last & dd_on2
    store = recovered | active
    dur = t.cast(i - peak_i, value.dtype) - t.cast(recovered, value.dtype)
    depth = (valley - peak) / peak
    has = s["has_dd"] | store
    max_dd = t.where(store & (~s["has_dd"] | (depth < s["max_dd"])), depth, s["max_dd"])
    max_dur = t.where(store & (~s["has_dd"] | (dur > s["max_dur"])), dur, s["max_dur"])
    peak = t.where(new_peak | store, value, peak)
    peak_i = t.where(new_peak | store, t.fill(t.shape(peak_i), i), peak_i)
    valley = t.where(store, value, valley)
    return dict(peak=peak, peak_i=peak_i, dd_on=dd_on2 & ~active, valley=valley,
                max_dd=max_dd, max_dur=max_dur, has_dd=has)
