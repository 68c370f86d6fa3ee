"""What an event contributes to the compiled market step (:func:`flowsim.markets.kernel.step`).

The step calls, for every event of the config, in the config's order:

* ``before_step(t, fund, state)`` at the start of step ``t`` (pams's
  ``hooked_before_step_for_market``): may rescale the fundamental ``fund [M]``;
* ``limit_price(value, ref)`` on every order's price before it is snapped to the
  tick grid (pams's ``hooked_before_order``), ``ref`` the market price at t = 0;
* ``mistake_order(t, side, price, tick)``: ``None``, or an order replacing the one
  placed at ``t`` (``(fire [M], side [M], level [M], ttl, volume)``), kept outside the
  ring book because it may outlive it;
* ``after_match(t, active, did, price, ref, state, across)`` after each order's
  matching (pams's ``hooked_after_execution``); ``across(x)``: with several markets,
  whether ``x [M K]`` holds in any of the member's target markets, on each target
  market (None with one market);
* ``halted(state)``: ``[M]`` bool, markets whose execution is halted, or ``None``;
  ``resumed(state)``: markets whose halt ended at this step (their crossed book
  clears), or ``None``.

``state`` is the event's own dict of ``[M]`` tensors (``init_state(M)``), carried by
the loop.  Events hold Python numbers only: their values are part of the trace key.
"""
import warnings

from ..registry import GROUP_KEYS, ConfigWarning, check_keys
from ..values import flag, integer


class Event:
    """No-op hooks; subclasses override what their pams class does."""

    #: Uses the kernel's per-market halt mask (matching loops over the whole book).
    halts = False
    #: Places one order of volume > 1 outside the ring book.
    extra_order = False
    #: Moves orders' prices (:meth:`limit_price` is not the identity).
    limits_prices = False
    KEYS = GROUP_KEYS | {"enabled"}

    def trace_key(self):
        return (type(self).__name__,) + tuple(sorted(vars(self).items()))

    def describe(self):
        return {"class": type(self).__name__, **vars(self)}

    def init_state(self, M):
        return {}

    def before_step(self, t, fund, state):
        return fund, state

    def limit_price(self, value, ref):
        return value

    def mistake_order(self, t, side, price, tick):
        return None

    def after_match(self, t, active, did, price, ref, state, across=None):
        return state

    def halted(self, state):
        return None

    def resumed(self, state):
        return None

    def marks(self, ref):
        """What a plot of paths marks: ``[("time", t, label)]`` or ``[("price", p,
        label)]`` (``ref`` the market price at t = 0)."""
        return []


def read(cls, name, settings, keys, obsolete=()):
    """Check ``settings`` against ``keys`` (refusing pams's obsolete keys it refuses
    itself, as pams does); ``enabled`` as pams reads it (default true)."""
    for key in obsolete:
        if key in settings:
            raise ValueError(f"{name}: {key} is obsolete in pams 0.3.0 (pams refuses it "
                             f"too); give triggerTime relative to the session instead")
    check_keys(settings, keys | cls.KEYS, name)
    return flag(settings.get("enabled", True), f"{name}.enabled")


def required(settings, key, name, cls_name, example):
    if key not in settings:
        raise ValueError(f"{name}.{key} is required for {cls_name}: add e.g. "
                         f"\"{key}\": {example}")
    return settings[key]


def pams_float(settings, key, name, cls_name, example):
    """A value pams checks with ``isinstance(x, float)`` (JSON ``1`` is refused: write
    ``1.0``)."""
    value = required(settings, key, name, cls_name, example)
    if isinstance(value, bool) or not isinstance(value, float):
        raise ValueError(f"{name}.{key} must be a float as pams requires (write "
                         f"{float(value) if isinstance(value, int) else example}), "
                         f"got {value!r}")
    return value


def pams_int(settings, key, name, cls_name, example, minimum=0):
    value = required(settings, key, name, cls_name, example)
    return integer(value, f"{name}.{key}", minimum)


def target_market(settings, key, name, cls_name, markets):
    """The one target market name (``key`` ``target``) or list (``targetMarkets``)."""
    value = required(settings, key, name, cls_name,
                     f"\"{markets[0]}\"" if key == "target" else f"[\"{markets[0]}\"]")
    names = [value] if key == "target" else value
    if key != "target" and (not isinstance(value, list) or not value):
        raise ValueError(f"{name}.{key} must be a non-empty list of market names, got "
                         f"{value!r}")
    for m in names:
        if m not in markets:
            raise ValueError(f"{name}.{key} names {m!r}, which is not a market of the "
                             f"config ({', '.join(markets)})")
    return names


def read_rule(cls, name, settings, markets):
    """``(enabled, triggerChangeRate)`` of a circuit-breaker rule (``PriceLimitRule``,
    ``TradingHaltRule``): its keys checked, ``targetMarkets`` checked, and the obsolete
    ``referenceMarket`` warned about and ignored, as pams does."""
    enabled = read(cls, name, settings, cls.KEYS)
    if "referenceMarket" in settings:
        warnings.warn(f"{name}.referenceMarket is obsolete in pams 0.3.0 and ignored",
                      ConfigWarning, stacklevel=4)
    target_market(settings, "targetMarkets", name, cls.__name__, markets)
    return enabled, pams_float(settings, "triggerChangeRate", name, cls.__name__, 0.05)
