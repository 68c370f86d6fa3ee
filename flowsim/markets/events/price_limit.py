"""pams's ``PriceLimitRule`` (``pams/events/price_limit_rule.py``).

Every order of a target market, at every step of the run (pams registers the hook
for all times, whatever the session it is listed in), whose price is at least
``triggerChangeRate * ref`` away from ``ref`` (the market price at t = 0) is moved to
``[ref (1 - rate), ref (1 + rate)]``, before its price is snapped to the tick grid.

Keys: ``targetMarkets`` (list), ``triggerChangeRate`` (float), ``enabled``;
``referenceMarket`` is obsolete in pams (it warns and ignores it; so does flowsim).
"""
from ...core.lazy_tf import tf
from ..registry import register
from .base import Event, read_rule


@register("event", "PriceLimitRule")
class PriceLimitRule(Event):
    limits_prices = True
    KEYS = Event.KEYS | {"targetMarkets", "triggerChangeRate", "referenceMarket"}

    def __init__(self, rate):
        self.rate = rate

    @classmethod
    def parse(cls, name, s, session_start, markets):
        enabled, rate = read_rule(cls, name, s, markets)
        return cls(rate) if enabled else None

    def marks(self, ref):
        return [("price", ref * (1 + self.rate), "price limit"),
                ("price", ref * (1 - self.rate), None)]

    def limit_price(self, value, ref):
        t_ = tf()
        threshold = t_.abs(ref * self.rate)
        limited = t_.minimum(t_.maximum(value, ref * (1 - self.rate)), ref * (1 + self.rate))
        return t_.where(t_.abs(value - ref) >= threshold, limited, value)
