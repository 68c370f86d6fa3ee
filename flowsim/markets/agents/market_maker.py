"""pams's ``MarketMakerAgent`` (pams 0.3.0, ``pams/agents/market_maker_agent.py``): a
high-frequency agent quoting a buy and a sell around the best prices of its markets.

Keys: ``numAgents``, ``markets`` (the markets whose best prices it reads),
``targetMarket`` (required: the name of the market it quotes in), ``netInterestSpread``
(required), ``orderTimeLength`` (default 2), ``cashAmount`` and ``assetVolume``
(required, as pams requires them; no effect on the rule: pams's market maker has no
cash or position limits).  flowsim runs
``netInterestSpread`` and ``orderTimeLength`` as numbers (pams draws them once per agent
from a JSON random value; a distribution is refused).

On its turn (the high-frequency phase, :mod:`flowsim.markets.hifreq`), pams's rule:
``base = (max best bid + min best ask) / 2`` over its ``markets`` (both sides present
somewhere), else the target market's price; ``margin = fundamental price of the target
* netInterestSpread * 0.5``; a buy at ``base - margin`` and a sell at ``base + margin``
in the target market, volume 1, time-to-live ``orderTimeLength``, both decided before
either is processed (buy first).  Prices snap to the tick grid as every order's do
(buys down, sells up).  It quotes while its market is halted (its orders rest); a
``TradingHaltRule`` is checked after each of its orders' executions, and an
``OrderMistakeShock`` replaces its order where that is the first of the trigger step in
the target market, as pams's hooks do.
"""
from dataclasses import dataclass, replace

import numpy as np

from ...core.lazy_tf import tf
from ..registry import AGENT_KEYS, check_keys, register
from ..values import Dist, balance, count
from .fcn import accessible

KEYS = AGENT_KEYS | {"targetMarket", "netInterestSpread", "orderTimeLength"}
#: pams's default ``orderTimeLength``.
DEFAULT_TTL = 2


@dataclass(frozen=True)
class MarketMakerGroup:
    """A group of identical market makers (see the module docstring)."""

    name: str
    n_agents: int
    venues: tuple           # markets whose best prices it reads (indices)
    target_name: str
    spread: float
    ttl: int
    target: int = None      # index of ``target_name`` (set by :meth:`resolve`)
    #: :class:`~flowsim.markets.values.Dist` of each agent's starting cash and units
    #: (``cashAmount``, ``assetVolume``: its balance sheet, which the rule never reads)
    cash: object = None
    asset: object = None

    high_frequency = True
    #: unit orders one turn places
    orders_per_turn = 2

    @property
    def max_time_window(self):
        return self.ttl

    def resolve(self, specs):
        """This group with ``target`` the index of ``targetMarket`` among the market
        ``specs``, or a ValueError naming it."""
        names = [s.name for s in specs]
        if self.target_name not in names:
            raise ValueError(f"{self.name}.targetMarket names {self.target_name!r}, which "
                             f"is not a market ({', '.join(names)}): fix the name")
        return replace(self, target=names.index(self.target_name))

    def describe(self):
        return {"name": self.name, "class": "MarketMakerAgent", "n_agents": self.n_agents,
                "venues": list(self.venues), "target": self.target, "spread": self.spread,
                "ttl": self.ttl}

    def turn(self, ctx, t, q, go, book, price, fund, carry):
        """One agent's turn where ``go`` (``[M]``): its two orders (decided on the
        book as it is), processed buy first.  ``ctx`` is the compiled step's
        (:func:`flowsim.markets.kernel.hifreq_context`).  Returns ``(book, price, carry, volume
        [M K], over [M K], submitted [M])``: a market maker always submits."""
        t_ = tf()
        M, K = ctx.M, ctx.K
        bk, ak, _, _ = ctx.bests(t, book)
        reach = np.zeros(K, bool)
        reach[list(self.venues)] = True
        tick = t_.reshape(ctx.tick + t_.zeros([ctx.L], ctx.dtype), [M, K])
        bid = t_.reshape(t_.cast(t_.bitwise.right_shift(bk, ctx.tb), ctx.dtype), [M, K]) * tick
        ask = t_.reshape(t_.cast(t_.bitwise.right_shift(ak, ctx.tb), ctx.dtype), [M, K]) * tick
        has_b = reach & t_.reshape(bk != ctx.IMIN, [M, K])
        has_a = reach & t_.reshape(ak != ctx.IMAX, [M, K])
        max_buy = t_.reduce_max(t_.where(has_b, bid, -np.inf), axis=1)
        min_sell = t_.reduce_min(t_.where(has_a, ask, np.inf), axis=1)
        both = t_.reduce_any(has_b, axis=1) & t_.reduce_any(has_a, axis=1)
        k = self.target
        base = t_.where(both, (max_buy + min_sell) / 2.0, t_.reshape(price, [M, K])[:, k])
        margin = t_.reshape(fund, [M, K])[:, k] * self.spread * 0.5
        at = np.arange(K) == k
        volume = over = None
        for h, (sign, value) in enumerate(((1, base - margin), (-1, base + margin))):
            raw = ctx.tick_level(ctx.limit(value, k), tick[:, k], sign > 0)
            level = t_.clip_by_value(raw, 1, ctx.level_cap)
            side = t_.where(go[:, None] & at, sign, 0)
            side = t_.reshape(t_.cast(side, t_.int64), [-1])
            flat = ctx.spread(level)
            book, price, carry, vol = ctx.process(t, q + h, side, flat,
                                                  t_.fill([ctx.L], t_.constant(self.ttl, t_.int64)),
                                                  book, price, carry)
            if ctx.events is not None:        # a halt checked after each order
                carry = ctx.events.after(t, vol > 0, price, carry)
            bad = (side != 0) & (ctx.spread(raw) > ctx.level_cap)
            volume = vol if volume is None else volume + vol
            over = bad if over is None else over | bad
        return book, price, carry, volume, over, go


@register("agent", "MarketMakerAgent")
def parse_market_maker(name, g, markets, extra_keys=frozenset()):
    """:class:`MarketMakerGroup` of the (extended) settings ``g`` of group ``name``
    (``markets``: the config's market entry names to their markets' indices)."""
    check_keys(g, KEYS, name, extra_ok=extra_keys)
    venues = accessible(name, g, markets)
    cash, asset = balance(g, name)          # required, as pams requires them
    if not isinstance(g.get("targetMarket"), str):
        raise ValueError(f"{name}.targetMarket is required (MarketMakerAgent): the name of "
                         f"the market it quotes in, e.g. \"targetMarket\": "
                         f"{list(markets)[:1][0]!r}")
    if "netInterestSpread" not in g:
        raise ValueError(f"{name}.netInterestSpread is required (MarketMakerAgent): add "
                         f"e.g. \"netInterestSpread\": 0.02")
    spread = _constant(g["netInterestSpread"], f"{name}.netInterestSpread")
    ttl = int(_constant(g.get("orderTimeLength", DEFAULT_TTL), f"{name}.orderTimeLength"))
    if ttl < 0:
        raise ValueError(f"{name}.orderTimeLength must be >= 0 (an order's time-to-live), "
                         f"got {g['orderTimeLength']!r}")
    return MarketMakerGroup(name, count(g, "numAgents", name), venues, g["targetMarket"],
                            spread, ttl, cash=cash, asset=asset)


def _constant(value, where):
    """A number (or pams's ``{"const": [v]}``); a distribution is refused."""
    d = Dist.parse(value, where)
    if d.kind != "const":
        raise ValueError(f"{where}: flowsim.markets runs a MarketMakerAgent with a number "
                         f"here, got the distribution {d.to_json()}; give a number "
                         f"(e.g. its mean)")
    return d.args[0]
