"""pams events flowsim.markets runs, one module each (registered by class name).

An event is parsed from its settings and the session it belongs to (pams's trigger
times are relative to the session's first step) and contributes its part of the
compiled step through the hooks of :class:`flowsim.markets.events.base.Event`.
"""
from . import fundamental_shock, order_mistake, price_limit, trading_halt  # noqa: F401
