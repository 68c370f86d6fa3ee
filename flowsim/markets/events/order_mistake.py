"""pams's ``OrderMistakeShock`` (``pams/events/order_mistake_shock.py``): a fat finger.

The first order placed in the target market at step ``start`` (the session's first
step + ``triggerTime``) is replaced by a limit order of ``orderVolume`` units at
``P (1 + priceChangeRate)`` (``P`` the market price then; a buy if the rate is > 0,
else a sell), living ``orderTimeLength`` steps.  It trades against every order it
crosses, one unit each, and rests with the rest of its volume.

Keys: ``target``, ``triggerTime`` (int), ``priceChangeRate`` (float), ``orderVolume``
(int), ``orderTimeLength`` (int), ``enabled``; ``agent`` is obsolete in pams (ignored
with a warning, as pams does).
"""
import warnings

from ...core.lazy_tf import tf
from ..registry import ConfigWarning, register
from .base import Event, pams_float, pams_int, read, target_market


@register("event", "OrderMistakeShock")
class OrderMistakeShock(Event):
    KEYS = Event.KEYS | {"target", "triggerTime", "priceChangeRate", "orderVolume",
                         "orderTimeLength", "agent"}
    extra_order = True

    def __init__(self, start, rate, volume, ttl):
        self.start, self.rate, self.volume, self.ttl = start, rate, volume, ttl

    @classmethod
    def parse(cls, name, s, session_start, markets):
        enabled = read(cls, name, s, cls.KEYS)
        if "agent" in s:
            warnings.warn(f"{name}.agent is obsolete in pams 0.3.0 and ignored",
                          ConfigWarning, stacklevel=3)
        target_market(s, "target", name, cls.__name__, markets)
        start = session_start + pams_int(s, "triggerTime", name, cls.__name__, 100)
        rate = pams_float(s, "priceChangeRate", name, cls.__name__, -0.05)
        if rate <= -1:
            raise ValueError(f"{name}.priceChangeRate must be > -1 (the order's price is "
                             f"P (1 + rate)), got {rate}")
        volume = pams_int(s, "orderVolume", name, cls.__name__, 10000, minimum=1)
        ttl = pams_int(s, "orderTimeLength", name, cls.__name__, 10000, minimum=1)
        return cls(start, rate, volume, ttl) if enabled else None

    def marks(self, ref):
        return [("time", self.start, f"mistaken order of {self.volume}")]

    def mistake_order(self, t, side, price, tick):
        from ..kernel import tick_level
        t_ = tf()
        buy = self.rate > 0.0
        fire = (t == self.start) & (side != 0)
        level = tick_level(price * (1 + self.rate), tick, t_.fill(t_.shape(price), buy))
        new_side = t_.fill(t_.shape(side), t_.constant(1 if buy else -1, t_.int64))
        return fire, new_side, level, self.ttl, self.volume
