"""pams's ``Market`` (``pams/market.py``, ``pams/runners/sequential.py``): its keys and
defaults.  The continuous double auction itself is the compiled step's
(:mod:`flowsim.markets.kernel`).

Keys: ``tickSize`` (required), ``marketPrice`` and/or ``fundamentalPrice`` (each the
other's default), ``fundamentalDrift`` and ``fundamentalVolatility`` (default 0: the
fundamental's log-return per step is ``drift + volatility * N(0, 1)``),
``outstandingShares`` (no effect: pams's FCN agents have no position limits),
``numMarkets`` (or ``from``/``to``) and ``prefix``: a group of markets named as pams
names them (``prefix`` + index when there are several, ``SpotMarket-0``,
``SpotMarket-1`` ...; the prefix defaults to the entry's name, with ``-`` for a group).

``tradeVolume`` is not a pams ``Market`` key (pams ignores it, and so does flowsim,
with a warning); a user class that reads it, as the ``market_share`` sample's
``ExtendedMarket`` does (``self._executed_volumes = [tradeVolume]``: an executed
volume at t = 0, an int), runs with ``classes={"ExtendedMarket": ("Market",
["tradeVolume"])}``: that volume then counts at t = 0 for the agents that weigh
markets by recent volume (:mod:`flowsim.markets.agents.market_share_fcn`).
"""
from dataclasses import dataclass

from ..registry import GROUP_KEYS, check_keys, register
from ..values import count, integer, number, positive

#: Market prices are integer tick levels packed with the placement sequence number in
#: an int64 (``level * 2**bits + number``, :func:`time_bits`); the initial level must be
#: below ``MAX_LEVEL``, which leaves every run at least 2**10 of headroom.
TIME_BITS = 21
MAX_LEVEL = 2 ** (62 - TIME_BITS - 10)


def time_bits(n_steps, orders_per_step=1):
    """Bits of the placement number in a packed order key: enough for ``n_steps *
    orders_per_step`` orders (the rest of the int64 holds the tick level)."""
    return max(int(n_steps * orders_per_step).bit_length(), 1)


def level_bits(n_steps, orders_per_step=1):
    """Bits left for tick levels: ``62 - time_bits``, at most 53 (levels times the tick
    stay exact in float64)."""
    return min(62 - time_bits(n_steps, orders_per_step), 53)
KEYS = GROUP_KEYS | {"tickSize", "marketPrice", "fundamentalPrice", "fundamentalDrift",
                     "fundamentalVolatility", "outstandingShares", "numMarkets"}
#: Keys pams's IndexMarket reads (:mod:`.index_market`).
PAMS_ONLY = {"markets", "requires"}


@dataclass(frozen=True)
class MarketSpec:
    name: str
    tick_size: float
    market_price: float
    fundamental_price: float
    fundamental_drift: float
    fundamental_volatility: float
    outstanding_shares: int = None
    #: an IndexMarket's component market names (:mod:`.index_market`)
    components: tuple = ()
    #: executed volume at t = 0 (``tradeVolume`` of a user class that reads it)
    trade_volume: int = 0


def market_names(name, market):
    """pams's names of the markets of group ``name`` (``runners/sequential.py``,
    ``_parse_group``): ``prefix`` + index when numbered (several, or ``from``/``to``)."""
    n = count(market, "numMarkets", name)
    first = int(market["from"]) if "from" in market else 0
    numbered = n != 1 or "from" in market
    prefix = market.get("prefix", name + ("-" if n > 1 else ""))
    if not isinstance(prefix, str):
        raise ValueError(f"{name}.prefix must be a string, got {prefix!r}")
    return [prefix + (str(i) if numbered else "") for i in range(first, first + n)]


@register("market", "Market")
def parse_market(name, market, extra_keys=frozenset()):
    """:class:`MarketSpec` list of the (extended) settings of market group ``name``."""
    check_keys(market, KEYS, name, pams_only=PAMS_ONLY, extra_ok=extra_keys)
    names = market_names(name, market)
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
    shares = None
    if "outstandingShares" in market:
        shares = integer(market["outstandingShares"], f"{name}.outstandingShares", 1)
    for what, p in (("marketPrice", price), ("fundamentalPrice", fundamental)):
        if p / tick >= MAX_LEVEL:
            raise ValueError(f"{name}.{what} / tickSize = {p / tick:.3g} ticks; "
                             f"flowsim.markets needs fewer than {MAX_LEVEL:.3g} "
                             f"(2**{62 - TIME_BITS - 10}) for integer tick levels with room "
                             f"to move: use a larger tickSize")
    volume = _trade_volume(name, market, extra_keys)
    return [MarketSpec(n, tick, price, fundamental, drift, vol, shares, trade_volume=volume)
            for n in names]


def _trade_volume(name, market, extra_keys):
    """``tradeVolume`` where the ``classes=`` mapping says the class reads it, else 0."""
    if "tradeVolume" not in extra_keys or "tradeVolume" not in market:
        return 0
    v = market["tradeVolume"]
    if isinstance(v, bool) or not isinstance(v, int) or v < 0:
        raise ValueError(f"{name}.tradeVolume must be an int >= 0 (as ExtendedMarket "
                         f"requires), got {v!r}: write e.g. \"tradeVolume\": 90")
    return v
