"""pams's ``TradingHaltRule`` (``pams/events/trading_halt_rule.py``).

After an order's executions in a target market that is running and not halted, if
``|ref - P| >= ref * triggerChangeRate * (halts so far + 1)`` (``ref`` the market
price at t = 0, ``P`` the market price after the order's executions; checked after
each order, in each target market), execution halts in every target market:
orders are still placed and rest in the book, the market price stays, nothing
trades.  It resumes at the first step ``t > halt step + haltingTimeLength``, and the
first order then clears the crossed book (the opening clearing again).  The
threshold grows with each halt.

Keys: ``targetMarkets`` (list), ``triggerChangeRate`` (float), ``haltingTimeLength``
(int, required), ``enabled``.
"""
from ...core.lazy_tf import tf
from ..registry import register
from .base import Event, pams_int, read_rule


@register("event", "TradingHaltRule")
class TradingHaltRule(Event):
    KEYS = Event.KEYS | {"targetMarkets", "triggerChangeRate", "haltingTimeLength",
                         "referenceMarket"}
    halts = True

    def __init__(self, rate, length):
        self.rate, self.length = rate, length

    @classmethod
    def parse(cls, name, s, session_start, markets):
        enabled, rate = read_rule(cls, name, s, markets)
        length = pams_int(s, "haltingTimeLength", name, cls.__name__, 100)
        return cls(rate, length) if enabled else None

    def init_state(self, M):
        t_ = tf()
        zero = t_.zeros([M], t_.int64)
        return {"halted": t_.zeros([M], t_.bool), "resumed": t_.zeros([M], t_.bool),
                "since": zero, "count": zero}

    def before_step(self, t, fund, state):
        resume = state["halted"] & (t > state["since"] + self.length)
        return fund, dict(state, halted=state["halted"] & ~resume, resumed=resume)

    def after_match(self, t, active, did, price, ref, state, across=None):
        t_ = tf()
        threshold = ref * self.rate * t_.cast(state["count"] + 1, price.dtype)
        fire = active & did & ~state["halted"] & (t_.abs(ref - price) >= t_.abs(threshold))
        if across is not None:          # a trade in one target market halts them all
            fire = across(fire)
        return {"halted": state["halted"] | fire, "resumed": state["resumed"],
                "since": t_.where(fire, t + 0 * state["since"], state["since"]),
                "count": state["count"] + t_.cast(fire, t_.int64)}

    def halted(self, state):
        return state["halted"]

    def resumed(self, state):
        return state["resumed"]
