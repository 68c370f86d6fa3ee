"""pams's ``Market`` (``pams/market.py``, ``pams/runners/sequential.py``): its keys and
defaults.  The continuous double auction itself is the compiled step's
(:mod:`flowsim.markets.kernel`).

Keys: ``tickSize`` (required), ``marketPrice`` and/or ``fundamentalPrice`` (each the
other's default), ``fundamentalDrift`` and ``fundamentalVolatility`` (default 0: the
fundamental's log-return per step is ``drift + volatility * N(0, 1)``),
``outstandingShares`` (no effect on one market), ``numMarkets`` 1, ``prefix``.
"""
from dataclasses import dataclass

from ..registry import GROUP_KEYS, check_keys, register
from ..values import count, integer, number, positive

#: Market prices are integer tick levels packed with the placement time in an int64
#: (``level * 2**TIME_BITS + time``): the initial level must leave this much headroom.
TIME_BITS = 21
MAX_LEVEL = 2 ** (62 - TIME_BITS - 10)
KEYS = GROUP_KEYS | {"tickSize", "marketPrice", "fundamentalPrice", "fundamentalDrift",
                     "fundamentalVolatility", "outstandingShares", "numMarkets"}
#: Keys pams's IndexMarket reads (refused with the class).
PAMS_ONLY = {"markets", "requires"}


@dataclass(frozen=True)
class MarketSpec:
    name: str
    tick_size: float
    market_price: float
    fundamental_price: float
    fundamental_drift: float
    fundamental_volatility: float


@register("market", "Market")
def parse_market(name, market, extra_keys=frozenset()):
    """:class:`MarketSpec` of the (extended) settings of market ``name``."""
    check_keys(market, KEYS, name, pams_only=PAMS_ONLY, extra_ok=extra_keys)
    if count(market, "numMarkets", name) != 1:
        raise ValueError(f"{name}.numMarkets: flowsim.markets runs one market; set it to 1 "
                         f"or drop it")
    if "tickSize" not in market:
        raise ValueError(f"{name}.tickSize is required: add e.g. \"tickSize\": 0.00001")
    tick = positive(market["tickSize"], f"{name}.tickSize")
    if "marketPrice" not in market and "fundamentalPrice" not in market:
        raise ValueError(f"{name}: marketPrice or fundamentalPrice is required: add e.g. "
                         f"\"marketPrice\": 300.0")
    fundamental = positive(market.get("fundamentalPrice", market.get("marketPrice")),
                           f"{name}.fundamentalPrice")
    price = positive(market.get("marketPrice", market.get("fundamentalPrice")),
                     f"{name}.marketPrice")
    drift = number(market.get("fundamentalDrift", 0.0), f"{name}.fundamentalDrift")
    vol = number(market.get("fundamentalVolatility", 0.0), f"{name}.fundamentalVolatility")
    if vol < 0:
        raise ValueError(f"{name}.fundamentalVolatility must be >= 0, got {vol}")
    if "outstandingShares" in market:
        integer(market["outstandingShares"], f"{name}.outstandingShares", 1)
    for what, p in (("marketPrice", price), ("fundamentalPrice", fundamental)):
        if p / tick >= MAX_LEVEL:
            raise ValueError(f"{name}.{what} / tickSize = {p / tick:.3g} ticks; "
                             f"flowsim.markets needs fewer than {MAX_LEVEL:.3g} "
                             f"(2**{62 - TIME_BITS - 10}) for integer tick levels with room "
                             f"to move: use a larger tickSize")
    return MarketSpec(name, tick, price, fundamental, drift, vol)
