"""pams's ``IndexMarket`` (``pams/index_market.py``, ``pams/simulator.py``): a market
whose fundamental is the index of its components' fundamentals.

Keys: those of ``Market`` (:mod:`.market`) and ``markets`` (required: the component
market names; each needs ``outstandingShares``, as pams asserts); ``requires`` is
obsolete in pams (it warns and ignores it; so does flowsim).  The index of values
``v_i`` is ``sum_i shares_i v_i / sum_i shares_i`` (summed in the components'
order).  pams sets the index market's fundamental at each time from the components'
fundamentals of that time when its clock moves, before the next step's events: a
``FundamentalPriceShock`` of a component reaches the index one step later.  At
t = 0 the fundamental is the index of the components' initial fundamentals (the
index market's own ``fundamentalPrice`` is not used); its ``fundamentalDrift`` and
``fundamentalVolatility`` are not used either.
"""
import dataclasses
import warnings

from ..registry import ConfigWarning, check_keys, register
from .market import KEYS, parse_market


@register("market", "IndexMarket")
def parse_index_market(name, market, extra_keys=frozenset()):
    """:class:`~.market.MarketSpec` list of index market group ``name``, with its
    components' names (resolved by :func:`resolve`)."""
    check_keys(market, KEYS | {"markets", "requires"}, name, extra_ok=extra_keys)
    if "requires" in market:
        warnings.warn(f"{name}.requires is obsolete in pams 0.3.0 and ignored",
                      ConfigWarning, stacklevel=4)
    parts = market.get("markets")
    if not isinstance(parts, list) or not parts or not all(isinstance(m, str) for m in parts):
        raise ValueError(f"{name}.markets is required for an IndexMarket: the list of its "
                         f"component market names")
    plain = {k: v for k, v in market.items() if k not in ("markets", "requires")}
    if "marketPrice" not in plain and "fundamentalPrice" not in plain:
        raise ValueError(f"{name}: marketPrice or fundamentalPrice is required: add e.g. "
                         f"\"marketPrice\": 300.0")
    return [dataclasses.replace(s, components=tuple(parts), fundamental_volatility=0.0,
                                fundamental_drift=0.0)
            for s in parse_market(name, plain, extra_keys)]


def resolve(specs):
    """``(specs with each index's initial fundamental, ((index, (components), (shares)),
    ...))``: component names to indices, checked as pams checks them."""
    names = [s.name for s in specs]
    out, indexes = list(specs), []
    for i, s in enumerate(specs):
        if not s.components:
            continue
        comps = []
        for m in s.components:
            if m not in names:
                raise ValueError(f"{s.name}.markets names {m!r}, which is not a market of "
                                 f"the config ({', '.join(names)})")
            c = names.index(m)
            if c in comps:
                raise ValueError(f"{s.name}.markets lists {m!r} twice (pams refuses it)")
            if specs[c].components:
                raise ValueError(f"{s.name}.markets: {m} is an IndexMarket; an index of "
                                 f"indexes is not implemented: list spot markets")
            if specs[c].outstanding_shares is None:
                raise ValueError(f"{m}.outstandingShares is required: it is a component "
                                 f"of the IndexMarket {s.name} (pams requires it)")
            comps.append(c)
        shares = tuple(specs[c].outstanding_shares for c in comps)
        out[i] = dataclasses.replace(s, fundamental_price=index_of(
            [specs[c].fundamental_price for c in comps], shares))
        indexes.append((i, tuple(comps), shares))
    return tuple(out), tuple(indexes)


def index_of(values, shares):
    """pams's ``compute_fundamental_index`` of ``values`` (floats or tensors)."""
    total, count = 0, 0
    for v, w in zip(values, shares):
        total = total + v * w
        count += w
    return total / count
