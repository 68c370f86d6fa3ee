"""The compiled step of :class:`flowsim.envs.market_env.MarketVectorEnv`: a learning
agent's order inside the batched pams markets of :mod:`flowsim.markets.kernel`.

Usage (inside one compiled call per block of markets)::

    S = agent_structure(market, block_markets)      # checks what is supported
    ctx = kernel.StepContext(S, key, M, state, tf.float64)
    loop, agent = start(ctx, inventory, cash)       # t = 0, the empty book
    loop, agent, fills = submit(ctx, loop, agent, action, interval, max_volume)
    loop, agent = run_interval(ctx, loop, agent, interval)
    obs = observe(ctx, loop, agent, window)

The market's own steps are :func:`flowsim.markets.kernel.step`, unchanged; the agent
adds, between two steps, one order or a quote pair per market kept outside the ring
book (the kernel's :class:`~flowsim.markets.book_chunks.Extra`, which the matching
already reads: a bid key, an ask key and one volume, the pair's units left per side
kept by :class:`Agent`), so that with no agent order every market is the bit-for-bit market of
:class:`flowsim.markets.MarketEnsemble` (the tests assert it).

Placement numbers: the markets' order of step ``t`` is number ``2 t + 1`` (not ``t``),
the agent's order placed before step ``t`` number ``2 t``, so that time priority and
the price of a trade (the earlier order's) see the agent's order after every order of
step ``t - 1`` and before step ``t``'s, as pams would receive it.  Only the comparison
of numbers matters to the market, so its bits do not change.
"""
from typing import NamedTuple

import numpy as np

from ..core.lazy_tf import tf
from ..markets import kernel
from ..markets.book_chunks import Extra
from ..markets.events.base import Event
from ..markets.hifreq import Layout

_IMIN = np.iinfo(np.int64).min
_IMAX = np.iinfo(np.int64).max


class AgentOrderSlot(Event):
    """The kernel's hook for an order outside the ring: present so that the matching
    reads :attr:`Book.extra` (the agent's order); it never places an order itself."""

    extra_order = True

    def mistake_order(self, t, side, price, tick):
        t_ = tf()
        none = t_.zeros_like(side, dtype=t_.bool)
        return none, side, t_.ones_like(side), 1, 0


class AgentLayout(Layout):
    """One market order a step, placement number ``2 t + 1``, the agent's ``2 t``."""

    def __init__(self, steps):
        super().__init__(1, 0, steps)
        self.P = 2

    def normal(self, t, j):
        return 2 * t + 1

    def slot(self, q):
        return (q // 2) % self.normal_rows


#: What :func:`agent_structure` refuses, each with its reason.
UNSUPPORTED = {
    "n_venues": "several markets per member (the agent trades one market)",
    "max_orders": "maxNormalOrders > 1 (fills are priced by the one arrival of a step)",
    "hifreq": "high-frequency agents (their passes would price the agent's fills)",
    "events": "events (halts, limits and mistaken orders use the order slot the agent "
              "takes)",
    "learned": "learned groups",
}


def agent_structure(market, block_markets):
    """The kernel's :class:`~flowsim.markets.kernel.Structure` of a parsed pams config
    with the agent's order slot; ``ValueError`` naming what it does not support."""
    S = kernel.Structure(market, (), block_markets, 0)
    refused = {"n_venues": S.n_venues > 1, "max_orders": max(S.orders + (S.max_orders,)) > 1,
               "hifreq": bool(S.hifreq), "events": bool(S.events), "learned": bool(S.learned)}
    for name, bad in refused.items():
        if bad:
            raise ValueError(f"MarketEnv-v0 does not support {UNSUPPORTED[name]}; this "
                             "config has them")
    S.events = (AgentOrderSlot(),)
    S.extra_order = True
    S.layout = AgentLayout(S.capacity)
    S.time_bits = kernel.time_bits(S.n_steps, S.layout.P)
    S.level_bits = kernel.level_bits(S.n_steps, S.layout.P)
    return S


class Agent(NamedTuple):
    """The agent's account per market ``[M]``: cash, inventory (units), the side of
    its resting order (+1 a bid, -1 an ask, 0 none or a quote pair), its last
    mark-to-market value, the units left of its resting bid and ask, their prices (0
    where none was placed this env step) and the units it bought and sold this env
    step."""
    cash: object
    inventory: object
    side: object
    value: object
    bid_left: object
    ask_left: object
    bid_price: object
    ask_price: object
    bought: object
    sold: object


def start(ctx, inventory, cash):
    """``(Loop, Agent)`` at ``t = 0``: the kernel's empty book and initial prices (as
    :func:`flowsim.markets.kernel.run` starts), no agent order."""
    t_ = tf()
    L, T, real, i64 = ctx.L, ctx.T, ctx.dtype, t_.int64
    zero = t_.zeros([L], real)
    acc = {k: zero for k in ("mispricing", "trades", "clearing", "depth_bid", "depth_ask")}
    acc["overflow"] = t_.zeros([L], t_.bool)
    acc["events"] = tuple(e.init_state(L) for e in ctx.S.events)
    book = ctx.chunks.new_book(L)._replace(extra=no_order(L))
    loop = kernel.Loop(t_.constant(0, i64), zero + ctx.p0, t_.zeros([L], t_.bool),
                       zero + ctx.f0, book, t_.zeros([T + 1, L], real), t_.zeros([0], real),
                       acc)
    price = loop.price
    inv = zero + inventory
    money = zero + cash
    units = t_.zeros([L], i64)
    return loop, Agent(money, inv, units, money + inv * price, units, units, zero, zero,
                       units, units)


def no_order(L):
    t_ = tf()
    i64 = t_.int64
    return Extra(t_.fill([L], t_.constant(_IMIN, i64)), t_.fill([L], t_.constant(_IMAX, i64)),
                 t_.zeros([L], i64), t_.fill([L], t_.constant(-1, i64)))


def decode(ctx, t, action, max_volume):
    """``(side, volume, level, market)`` ``[M]`` of actions ``[M, 3]`` (side's sign,
    volume rounded and clipped to ``[0, max_volume]``, price; price <= 0: a market
    order); no order where the session places none or the run is over."""
    t_ = tf()
    i64 = t_.int64
    action = t_.cast(action, ctx.dtype)
    side = t_.cast(t_.sign(t_.round(action[:, 0])), i64)
    volume = t_.cast(t_.clip_by_value(t_.round(action[:, 1]), 0.0, float(max_volume)), i64)
    price = action[:, 2]
    placing = at_step(ctx.place_at, t, ctx.T)
    side = t_.where((volume > 0) & placing & t_.math.is_finite(price), side, 0)
    market = price <= 0.0
    buy = side > 0
    limit = t_.clip_by_value(kernel.tick_level(t_.where(market, ctx.tick, price), ctx.tick,
                                               buy), 1, ctx.level_cap)
    cap = t_.constant(ctx.level_cap, i64)
    level = t_.where(market, t_.where(buy, cap, t_.ones_like(cap)), limit)
    return side, t_.where(side != 0, volume, 0), level, market


def at_step(flags, t, T):
    """``flags[t]`` (False from ``T`` on) by a gather: a slice at a call's argument
    would make XLA compile the call once per step."""
    t_ = tf()
    return t_.gather(flags, t_.minimum(t, T - 1)) & (t < T)


def decode_quotes(ctx, loop, action, max_volume):
    """``(bid level, ask level, volume)`` ``[M]`` of quote actions ``[M, 3]``
    ``(bid offset, ask offset, volume)``, priced as pams's ``MarketMakerAgent`` prices
    its pair: around the mid of the best bid and ask of the book (the market price
    where a side is empty), ``base x (1 - bid offset)`` snapped down and ``base x (1 +
    ask offset)`` snapped up, the ask at least a tick above the bid (offsets below 0
    count as 0); no quotes where the market does not execute at ``loop.t``."""
    t_ = tf()
    i64, real, t = t_.int64, ctx.dtype, loop.t
    action = t_.cast(action, real)
    volume = t_.cast(t_.clip_by_value(t_.round(action[:, 2]), 0.0, float(max_volume)), i64)
    bk, ak, _, _ = ctx.chunks.bests(t, loop.book)
    has_both = (bk != _IMIN) & (ak != _IMAX)
    mid = (t_.cast(t_.bitwise.right_shift(bk, ctx.tb), real) * ctx.tick
           + t_.cast(t_.bitwise.right_shift(ak, ctx.tb), real) * ctx.tick) / 2.0
    base = t_.where(has_both, mid, loop.price)
    bid = base * (1.0 - t_.maximum(action[:, 0], 0.0))
    ask = base * (1.0 + t_.maximum(action[:, 1], 0.0))
    cap = ctx.level_cap
    bid_level = t_.clip_by_value(kernel.tick_level(bid, ctx.tick, True), 1, cap - 1)
    ask_level = t_.clip_by_value(t_.maximum(kernel.tick_level(ask, ctx.tick, False),
                                            bid_level + 1), 2, cap)
    quoting = t_.math.is_finite(bid) & t_.math.is_finite(ask) & at_step(ctx.run_at, t, ctx.T)
    return bid_level, ask_level, t_.where(quoting, volume, 0)


def executing_until(S):
    """``[T]`` int64: for each step ``t``, the last step of the run of executing steps
    from ``t`` (``t - 1`` where the market does not execute at ``t``)."""
    running = (np.array(S.flags, np.int64) & 2) > 0
    T = len(running)
    until = np.zeros(T, np.int64)
    for t in range(T - 1, -1, -1):
        if not running[t]:
            until[t] = t - 1
        else:
            until[t] = until[t + 1] if t + 1 < T and running[t + 1] else t
    return until


class Orders(NamedTuple):
    """The agent's bid and ask of an env step ``[M]``: tick levels, volumes (0: none),
    whether each is a market order, and their last step of life."""
    bid_level: object
    bid_volume: object
    bid_market: object
    ask_level: object
    ask_volume: object
    ask_market: object
    last: object


def orders(ctx, loop, action, interval, max_volume, quoting):
    """The :class:`Orders` of actions ``[M, 3]``: one order ``(side, volume, price)``
    (:func:`decode`), or where ``quoting`` (a bool scalar) a quote pair
    (:func:`decode_quotes`), which lives while the market executes."""
    t_ = tf()
    t, quoting = loop.t, t_.convert_to_tensor(quoting)
    side, volume, level, market = decode(ctx, t, action, max_volume)
    bid_level, ask_level, quoted = decode_quotes(ctx, loop, action, max_volume)
    none = t_.zeros_like(market)
    end = t + interval - 1
    until = t_.gather(t_.constant(executing_until(ctx.S)), t_.minimum(t, ctx.T - 1))

    def pick(quote, single):
        return t_.where(quoting, quote, single)

    return Orders(pick(bid_level, level), pick(quoted, t_.where(side > 0, volume, 0)),
                  pick(none, market), pick(ask_level, level),
                  pick(quoted, t_.where(side < 0, volume, 0)), pick(none, market),
                  pick(t_.minimum(end, until), end))


def arrive(ctx, loop, extra, active):
    """``loop`` after the agent's order ``extra`` (an :class:`Extra`) arrived, executed
    against the book as pams executes an arrival where ``active``: ``(loop, units
    left, units filled, the execution's price)``."""
    t_ = tf()
    t, i64 = loop.t, t_.int64
    book = loop.book._replace(extra=extra)

    def execute():
        return kernel.clearing(ctx, t, book, active)

    def nothing():
        zero = t_.zeros([ctx.L], i64)
        return (book, zero + _IMIN, zero + _IMAX, zero, zero, zero, zero)

    book, bk, ak, _, _, vol, lvl = t_.cond(t_.reduce_any(active), execute, nothing)
    did = vol > 0
    has_both = (bk != _IMIN) & (ak != _IMAX)
    mid = (t_.cast(t_.bitwise.right_shift(bk, ctx.tb), ctx.dtype)
           + t_.cast(t_.bitwise.right_shift(ak, ctx.tb), ctx.dtype)) * ctx.tick / 2.0
    trade_price = t_.cast(lvl, ctx.dtype) * ctx.tick
    new_price = t_.where(did, trade_price, t_.where(~loop.traded & has_both, mid, loop.price))
    price = t_.where(active, new_price, loop.price)
    loop = loop._replace(book=book, price=price, traded=loop.traded | did)
    left = book.extra.volume
    return loop, left, extra.volume - left, trade_price


def submit(ctx, loop, agent, action, interval, max_volume, quoting=False):
    """The agent's orders before step ``loop.t``: its previous ones cancelled, the new
    bid then ask (:func:`orders`) placed outside the ring (placement number ``2 t``)
    and each executed against the book as pams executes an arrival (where the market
    runs); a market order's unfilled rest cancelled.  Returns ``(loop, agent,
    fills)``, ``fills`` the units traded."""
    t_ = tf()
    t, i64 = loop.t, t_.int64
    o = orders(ctx, loop, action, interval, max_volume, quoting)
    q = 2 * t
    bid_key = t_.bitwise.bitwise_or(t_.bitwise.left_shift(o.bid_level, ctx.tb), ctx.tmax - q)
    ask_key = t_.bitwise.bitwise_or(t_.bitwise.left_shift(o.ask_level, ctx.tb), q)
    placed = (o.bid_volume > 0) | (o.ask_volume > 0)
    expiry = t_.where(placed, o.last, t_.constant(-1, i64))
    running = at_step(ctx.run_at, t, ctx.T)
    imin, imax = t_.zeros_like(bid_key) + _IMIN, t_.zeros_like(ask_key) + _IMAX
    bid = Extra(t_.where(o.bid_volume > 0, bid_key, _IMIN), imax, o.bid_volume, expiry)
    loop, bid_left, bought, bid_at = arrive(ctx, loop, bid, (o.bid_volume > 0) & running)
    ask = Extra(imin, t_.where(o.ask_volume > 0, ask_key, _IMAX), o.ask_volume, expiry)
    loop, ask_left, sold, ask_at = arrive(ctx, loop, ask, (o.ask_volume > 0) & running)
    bid_left = t_.where(o.bid_market, t_.zeros_like(bid_left), bid_left)
    ask_left = t_.where(o.ask_market, t_.zeros_like(ask_left), ask_left)
    extra = Extra(t_.where(bid_left > 0, bid_key, _IMIN), t_.where(ask_left > 0, ask_key, _IMAX),
                  bid_left + ask_left, expiry)
    loop = loop._replace(book=loop.book._replace(extra=extra))
    agent = account(agent, 1, bought, bid_at)
    agent = account(agent, -1, sold, ask_at)
    side = t_.cast(o.bid_volume > 0, i64) - t_.cast(o.ask_volume > 0, i64)
    real = ctx.dtype
    agent = agent._replace(
        side=side, bid_left=bid_left, ask_left=ask_left,
        bid_price=t_.where(o.bid_volume > 0, t_.cast(o.bid_level, real) * ctx.tick, 0.0),
        ask_price=t_.where(o.ask_volume > 0, t_.cast(o.ask_level, real) * ctx.tick, 0.0),
        bought=bought, sold=sold)
    return loop, agent, bought + sold


def account(agent, side, fills, price):
    """``agent`` after ``fills`` units bought (``side`` +1) or sold (-1) at ``price``."""
    t_ = tf()
    signed = t_.cast(side * fills, price.dtype)
    return agent._replace(cash=agent.cash - signed * price,
                          inventory=agent.inventory + signed)


def run_interval(ctx, loop, agent, interval):
    """Up to ``interval`` market steps (:func:`flowsim.markets.kernel.step`, unchanged),
    the agent's resting orders filled at each step's execution price (pams executes
    all of an execution's pairs at one price).  One execution trades at most one side
    of a quote pair (a bid ``B`` below the ask ``A``: pairs at prices ``<= B`` or
    ``>= A``), so the price tells which; the side whose units are gone leaves the
    book.  The last price is written at ``T`` when the run ends, as
    :func:`flowsim.markets.kernel.run` does.  Returns ``(loop, agent)`` with
    ``agent.value`` the new mark-to-market value."""
    t_ = tf()
    end = t_.minimum(loop.t + interval, ctx.T)

    def body(loop, agent):
        extra = loop.book.extra
        ask_at = t_.cast(t_.bitwise.right_shift(extra.ask, ctx.tb), ctx.dtype) * ctx.tick
        loop = kernel.step(ctx, loop)
        fills = extra.volume - loop.book.extra.volume
        bought = (extra.bid != _IMIN) & ((extra.ask == _IMAX) | (loop.price < ask_at))
        none = t_.zeros_like(fills)
        buys, sells = t_.where(bought, fills, none), t_.where(bought, none, fills)
        agent = account(agent, 1, buys, loop.price)
        agent = account(agent, -1, sells, loop.price)
        agent = agent._replace(bid_left=agent.bid_left - buys, ask_left=agent.ask_left - sells,
                               bought=agent.bought + buys, sold=agent.sold + sells)
        left = loop.book.extra
        left = left._replace(bid=t_.where(agent.bid_left > 0, left.bid, _IMIN),
                             ask=t_.where(agent.ask_left > 0, left.ask, _IMAX))
        return loop._replace(book=loop.book._replace(extra=left)), agent

    loop, agent = t_.while_loop(lambda loop, agent: loop.t < end, body, (loop, agent))
    T = ctx.T
    last = t_.where(loop.t >= T, loop.price, loop.hist[T])
    loop = loop._replace(hist=t_.tensor_scatter_nd_update(loop.hist, [[T]], last[None]))
    return loop, agent._replace(value=agent.cash + agent.inventory * loop.price)


def observe(ctx, loop, agent, window):
    """``[M, window + 5]``: the last ``window`` market prices (before step ``t``; the
    initial price before 0) over the initial price, the best bid and ask over it (the
    market's orders alive at ``t``; 0 where a side is empty), inventory, cash over the
    initial price, and the fraction of the run left."""
    t_ = tf()
    t, real = loop.t, ctx.dtype
    rows = loop.t - window + t_.range(window, dtype=t_.int64)
    past = t_.gather(loop.hist, t_.maximum(rows, 0))
    past = t_.where((rows >= 0)[:, None], past, ctx.p0 + t_.zeros_like(past))
    bk, ak, _, _ = ctx.chunks.bests(t, loop.book)

    def quote(key, empty):
        level = t_.cast(t_.bitwise.right_shift(key, ctx.tb), real)
        return t_.where(key != empty, level * ctx.tick / ctx.p0, 0.0)

    left = t_.cast(ctx.T - t, real) / float(ctx.T) + t_.zeros([ctx.L], real)
    cols = [t_.transpose(past) / ctx.p0, quote(bk, _IMIN)[:, None], quote(ak, _IMAX)[:, None],
            agent.inventory[:, None], (agent.cash / ctx.p0)[:, None], left[:, None]]
    return t_.concat(cols, axis=1)


def statistics(ctx, loop):
    """``[M, len(NAMES)]``: the markets' statistics of :mod:`flowsim.markets.stats`
    (meaningful once the run ended)."""
    return kernel.venue_statistics(ctx.S, ctx.M, loop.hist, loop.acc)
