"""pams's ``FundamentalPriceShock`` (``pams/events/fundamental_price_shock.py``).

Before each step ``t`` of ``[start, start + shockTimeLength)`` (``start`` = the
session's first step + ``triggerTime``) the target market's fundamental is scaled by
``1 + priceChangeRate``; the shocks compound and the fundamental walk goes on from the
shocked level (pams regenerates its walk from there: the same law).

Keys: ``target`` (a market), ``triggerTime`` (int), ``priceChangeRate``,
``shockTimeLength`` (int, default 1), ``enabled`` (default true).
"""
from ...core.lazy_tf import tf
from ..registry import register
from ..values import number
from .base import Event, integer, pams_int, read, target_market


@register("event", "FundamentalPriceShock")
class FundamentalPriceShock(Event):
    KEYS = Event.KEYS | {"target", "triggerTime", "priceChangeRate", "shockTimeLength"}

    def __init__(self, start, rate, length):
        self.start, self.rate, self.length = start, rate, length

    @classmethod
    def parse(cls, name, s, session_start, markets):
        enabled = read(cls, name, s, cls.KEYS, obsolete=("triggerDays", "numStepsOneDay"))
        target_market(s, "target", name, cls.__name__, markets)
        start = session_start + pams_int(s, "triggerTime", name, cls.__name__, 0)
        if "priceChangeRate" not in s:
            raise ValueError(f"{name}.priceChangeRate is required for {cls.__name__}: add "
                             f"e.g. \"priceChangeRate\": -0.1")
        rate = number(s["priceChangeRate"], f"{name}.priceChangeRate")
        if rate <= -1:
            raise ValueError(f"{name}.priceChangeRate must be > -1 (the fundamental is "
                             f"scaled by 1 + rate), got {rate}")
        length = integer(s.get("shockTimeLength", 1), f"{name}.shockTimeLength", 1)
        return cls(start, rate, length) if enabled else None

    def marks(self, ref):
        return [("time", self.start, f"fundamental x{1 + self.rate:g}"
                 + (f" ({self.length} steps)" if self.length > 1 else ""))]

    def before_step(self, t, fund, state):
        t_ = tf()
        on = (t >= self.start) & (t < self.start + self.length)
        return t_.where(on, fund * (1 + self.rate), fund), state
