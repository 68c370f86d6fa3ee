"""pams's ``ArbitrageAgent`` (pams 0.3.0, ``pams/agents/arbitrage_agent.py``): a
high-frequency agent trading an IndexMarket against its components.

Keys: ``numAgents``, ``markets`` (must reach one IndexMarket), ``orderVolume``
(required, an int), ``orderThresholdPrice`` (required, in price units),
``orderTimeLength`` (default 1), ``cashAmount`` and ``assetVolume`` (required, as pams
requires them; no effect on the rule: no cash or position limits in pams's rule).

On its turn (the high-frequency phase, :mod:`flowsim.markets.hifreq`), only while the
index market and all its components run (sessions with execution), pams's rule:
with ``P`` the index market's price and ``I`` the index of its components' market
prices (:func:`flowsim.markets.venues.index_market.index_of`), if ``I - P >
orderThresholdPrice`` it buys ``len(components) * orderVolume`` on the index at ``P``
and sells ``orderVolume`` on each component at its market price; if ``P - I >
orderThresholdPrice`` the reverse.  Limit orders, time-to-live ``orderTimeLength``,
processed index first; a ``PriceLimitRule`` moves their prices as it moves every
order's in its target markets.  pams requires the components' outstanding shares to be equal
(flowsim refuses other configs when it parses them).  An agent that finds no
opportunity submits nothing, so (the agents being identical) the phase ends there.

An order of volume ``v`` is ``v`` unit orders of consecutive placement numbers at one
price: they trade one after another as pams's order does (its remaining volume keeps
its place), and the book's depth counts the order once, by its last unit.

With a ``TradingHaltRule`` its orders are processed one market after the other (index
first, then each component, each order's units their own placement numbers), a halt
checked after each order's executions, and it submits nothing while any of its
markets is halted; an ``OrderMistakeShock`` replaces its order where that is the first
of the trigger step in the target market (the order's other units are dropped).
"""
import dataclasses
from collections import namedtuple
from dataclasses import dataclass, replace

import numpy as np

from ...core.lazy_tf import tf
from ..registry import AGENT_KEYS, check_keys, register
from ..values import balance, count, number
from ..venues.index_market import index_of
from .fcn import accessible

#: A turn's orders: whether each member acts ``[M]``, each market's side ``[M]``
#: (a list over markets), levels and time-to-live ``[M K]``.
_Orders = namedtuple("_Orders", "act sides level ttl")

KEYS = AGENT_KEYS | {"orderVolume", "orderThresholdPrice", "orderTimeLength"}
#: pams's default ``orderTimeLength``.
DEFAULT_TTL = 1


@dataclass(frozen=True)
class ArbitrageGroup:
    """A group of identical arbitrage agents (see the module docstring)."""

    name: str
    n_agents: int
    venues: tuple
    volume: int
    threshold: float
    ttl: int
    index: int = None           # the IndexMarket (set by :meth:`resolve`)
    components: tuple = ()
    shares: tuple = ()
    #: :class:`~flowsim.markets.values.Dist` of each agent's starting cash and units
    #: (``cashAmount``, ``assetVolume``: its balance sheet, which the rule never reads)
    cash: object = None
    asset: object = None
    #: orders processed one market after the other (with halts, :meth:`with_halts`)
    sequential: bool = False

    high_frequency = True

    @property
    def max_time_window(self):
        return self.ttl

    @property
    def orders_per_turn(self):
        """Placement numbers of one turn: the index order's units (each component's
        order takes the first ``orderVolume`` of them in its own market), and where
        the orders are processed one market after the other, the components' units
        after them (each unit its own number: a placement fills a book row in every
        market)."""
        return len(self.components) * self.volume * (2 if self.sequential else 1)

    def units(self):
        """``[(market, placement offset, unit)]`` of a turn's unit orders in the order
        they are processed (the offsets of a turn's units are distinct where
        :attr:`sequential`, else a unit's markets share one)."""
        n = len(self.components) * self.volume
        out = [(self.index, u, u) for u in range(n)]
        for c, k in enumerate(self.components):
            start = n + c * self.volume if self.sequential else 0
            out += [(k, start + u, u) for u in range(self.volume)]
        return out if self.sequential else sorted(out, key=lambda x: x[1])

    def resolve(self, specs):
        """This group with its IndexMarket and components from the market ``specs``,
        or a ValueError naming what pams would not run."""
        names = [s.name for s in specs]
        found = [i for i in self.venues if specs[i].components]
        if len(found) != 1:
            raise ValueError(f"{self.name}.markets must reach exactly one IndexMarket "
                             f"(flowsim.markets runs one), it reaches "
                             f"{[names[i] for i in found]}: list one IndexMarket")
        i = found[0]
        comps = tuple(names.index(c) for c in specs[i].components)
        shares = tuple(specs[c].outstanding_shares for c in comps)
        if len(set(shares)) > 1:
            raise ValueError(f"{self.name}: pams's ArbitrageAgent requires the components of "
                             f"{names[i]} to have the same outstandingShares, got "
                             f"{dict(zip([names[c] for c in comps], shares))}: make them equal")
        return replace(self, index=i, components=comps, shares=shares)

    def with_halts(self):
        """This group processing its orders one market after the other (pams checks
        a halt after each order's executions, so a halt its index order triggers
        holds its components' orders)."""
        return dataclasses.replace(self, sequential=True)

    def describe(self):
        return {"name": self.name, "class": "ArbitrageAgent", "n_agents": self.n_agents,
                "index": self.index, "components": list(self.components),
                "volume": self.volume, "threshold": self.threshold, "ttl": self.ttl,
                **({"sequential": True} if self.sequential else {})}

    def counted(self, offsets, K):
        """``[len(offsets), K]`` bool: which high-frequency rows (``offsets``: a row's
        position in its phase) hold an order's last unit in each market (depth counts
        an order once)."""
        u = np.asarray(offsets) % self.orders_per_turn
        last = np.full(K, -1)
        for k, offset, _ in self.units():
            last[k] = max(last[k], offset)
        return u[:, None] == last[None, :]

    def turn(self, ctx, t, q, go, book, price, fund, carry):
        """One agent's turn where ``go`` (``[M]``) and the markets run.  Returns
        ``(book, price, carry, volume [M K], over [M K], submitted [M])``."""
        t_ = tf()
        M, K = ctx.M, ctx.K
        p = t_.reshape(price, [M, K])
        tick = t_.reshape(ctx.tick + t_.zeros([ctx.L], ctx.dtype), [M, K])
        market = p[:, self.index]
        index = index_of([p[:, c] for c in self.components], self.shares)
        buy = (market < index) & (index - market > self.threshold)
        sell = (market > index) & (market - index > self.threshold)
        act = go & carry.running & (buy | sell)
        if ctx.events is not None:      # pams's rule asks that its markets all run
            halted = t_.gather(t_.reshape(ctx.events.halted(carry), [M, K]),
                               [self.index, *self.components], axis=1)
            act = act & ~t_.reduce_any(halted, axis=1)
        sign = t_.where(buy, 1, -1)
        sides, levels, over = [], [], []
        for k in range(K):
            s = sign if k == self.index else -sign
            raw = ctx.tick_level(ctx.limit(p[:, k], k), tick[:, k], s > 0)
            sides.append(s)
            levels.append(t_.clip_by_value(raw, 1, ctx.level_cap))
            over.append(raw > ctx.level_cap)
        level = t_.reshape(t_.stack(levels, 1), [-1])
        bad = t_.reshape(t_.stack(over, 1) & act[:, None], [-1])
        orders = _Orders(act, sides, level, t_.fill([ctx.L], t_.constant(self.ttl, t_.int64)))
        book, price, carry, volume = self._process(ctx, t, q, orders, book, price, carry)
        return book, price, carry, volume, bad, act

    def _placements(self):
        """``[(markets, placement offset, units before)]``: the turn's placements (one
        unit order in each of ``markets``), in the order they are processed."""
        out = []
        for k, offset, u in self.units():
            if out and out[-1][1] == offset:
                out[-1][0].append(k)
            else:
                out.append(([k], offset, u))
        return out

    def _process(self, ctx, t, q, orders, book, price, carry):
        """Process the turn's unit orders (:meth:`_placements`).  Where
        :attr:`sequential` (halts: one market a placement, index first) the events'
        ``after`` follows each order's last unit.  An order a mistaken order replaced
        (at its first unit) places no more units."""
        t_ = tf()
        K = ctx.K
        column = t_.range(ctx.L, dtype=t_.int64) % K
        volume = t_.zeros([ctx.L], t_.int64)
        did = replaced = None
        for markets, offset, u in self._placements():
            cols = [t_.where(orders.act & (k in markets), orders.sides[k], 0) for k in range(K)]
            side = t_.cast(t_.reshape(t_.stack(cols, 1), [-1]), t_.int64)
            if replaced is not None:
                side = t_.where(replaced, t_.zeros_like(side), side)
            before = carry.mistaken
            book, price, carry, vol = ctx.process(t, q + offset, side, orders.level,
                                                  orders.ttl, book, price, carry)
            if before is not None and u == 0:
                fired = carry.mistaken & ~before
                replaced = fired if replaced is None else replaced | fired
            volume = volume + vol
            if ctx.events is not None:
                k = markets[0]
                did = (vol > 0) if u == 0 else did | (vol > 0)
                if u + 1 == self._units(k):
                    carry = ctx.events.after(t, did & (column == k), price, carry)
        return book, price, carry, volume

    def _units(self, k):
        """Unit orders of market ``k``'s order in a turn."""
        return sum(self._orders(k, u) for u in range(self.orders_per_turn))

    def _orders(self, k, u):
        """Whether market ``k`` gets unit ``u`` of the turn's order (Python bool)."""
        if k == self.index:
            return True
        return k in self.components and u < self.volume


@register("agent", "ArbitrageAgent")
def parse_arbitrage(name, g, markets, extra_keys=frozenset()):
    """:class:`ArbitrageGroup` of the (extended) settings ``g`` of group ``name``
    (``markets``: the config's market entry names to their markets' indices)."""
    check_keys(g, KEYS, name, extra_ok=extra_keys)
    venues = accessible(name, g, markets)
    cash, asset = balance(g, name)          # required, as pams requires them
    for key, example in (("orderVolume", 1), ("orderThresholdPrice", 1.0)):
        if key not in g:
            raise ValueError(f"{name}.{key} is required (ArbitrageAgent): add e.g. "
                             f"\"{key}\": {example}")
    for key in ("orderVolume", "orderTimeLength"):
        v = g.get(key, 1)
        if isinstance(v, bool) or not isinstance(v, int) or v < (1 if key == "orderVolume"
                                                                  else 0):
            raise ValueError(f"{name}.{key} must be an int (pams requires one) >= "
                             f"{1 if key == 'orderVolume' else 0}, got {v!r}")
    threshold = number(g["orderThresholdPrice"], f"{name}.orderThresholdPrice")
    return ArbitrageGroup(name, count(g, "numAgents", name), venues, g["orderVolume"],
                          threshold, g.get("orderTimeLength", DEFAULT_TTL), cash=cash,
                          asset=asset)
