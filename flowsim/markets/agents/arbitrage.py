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
"""
from dataclasses import dataclass, replace

import numpy as np

from ...core.lazy_tf import tf
from ..registry import AGENT_KEYS, check_keys, register
from ..values import balance, count, number
from ..venues.index_market import index_of
from .fcn import accessible

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

    high_frequency = True

    @property
    def max_time_window(self):
        return self.ttl

    @property
    def orders_per_turn(self):
        """Placement numbers of one turn: the index order's units (each component's
        order takes the first ``orderVolume`` of them in its own market)."""
        return len(self.components) * self.volume

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

    def describe(self):
        return {"name": self.name, "class": "ArbitrageAgent", "n_agents": self.n_agents,
                "index": self.index, "components": list(self.components),
                "volume": self.volume, "threshold": self.threshold, "ttl": self.ttl}

    def counted(self, offsets, K):
        """``[len(offsets), K]`` bool: which high-frequency rows (``offsets``: a row's
        position in its phase) hold an order's last unit in each market (depth counts
        an order once)."""
        u = np.asarray(offsets) % self.orders_per_turn
        units = np.full(K, self.orders_per_turn)
        units[list(self.components)] = self.volume
        return u[:, None] == units[None, :] - 1

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
        ttl = t_.fill([ctx.L], t_.constant(self.ttl, t_.int64))
        volume = None
        for u in range(self.orders_per_turn):
            cols = [t_.where(act & self._orders(k, u), sides[k], 0) for k in range(K)]
            side = t_.cast(t_.reshape(t_.stack(cols, 1), [-1]), t_.int64)
            book, price, carry, vol = ctx.process(t, q + u, side, level, ttl, book, price,
                                                  carry)
            volume = vol if volume is None else volume + vol
        return book, price, carry, volume, bad, act

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
