"""pams's ``MarketShareFCNAgent`` (pams 0.3.0, ``pams/agents/market_share_fcn_agent.py``):
an FCN agent that, on its turn, orders in ONE of its markets, picked at random with
weights the volume each market executed over its recent past.

Keys: those of ``FCNAgent`` (:mod:`.fcn`), with the same meaning.  The pick (pams's
``submit_orders``): among the agent's markets (``markets``, config order), market ``k``
has weight ``V_k + 1e-10``, ``V_k`` the volume executed in it at times ``max(0, t -
timeWindowSize) .. t`` (step ``t``'s own orders are all collected before any is
processed, so step ``t`` adds nothing yet), drawn as Python's ``random.choices`` draws
(``u * total`` against the cumulative weights).  Then the FCN order rule on that
market only.  A market's initial volume (the ``market_share`` sample's
``ExtendedMarket`` and its ``tradeVolume``, :mod:`flowsim.markets.venues.market`)
counts at t = 0, so it steers the picks until ``t`` passes the agent's window.
"""
import dataclasses

import numpy as np

from ...core.lazy_tf import tf
from ..registry import register
from .fcn import parse_group

#: What pams adds to every weight (a market without recent volume can still be picked).
EPSILON = 1e-10


@register("agent", "MarketShareFCNAgent")
def parse_market_share_group(name, g, markets, extra_keys=frozenset()):
    """:class:`~.fcn.FCNGroup` of MarketShareFCNAgent group ``name``, flagged to pick one
    market by volume (``by_volume``)."""
    return dataclasses.replace(parse_group(name, g, markets, extra_keys), by_volume=True)


def window_volume(vcum, total, back, columns):
    """Volume each market executed at times ``back .. t - 1`` (``[M K]``), from
    ``vcum [T + 1, M K]`` (``vcum[s]``: the volume executed before step ``s``, the
    initial volume counted at step 0 so ``vcum[0] = 0``) and ``total [M K]`` (all the
    volume so far, initial volume included); ``back`` ``[M K]`` int64."""
    t = tf()
    return total - t.gather_nd(vcum, t.stack([back, columns], 1))


def choose(u, volume, access):
    """One-hot ``[M, K]`` of the market picked among ``access [M, K]`` with weights
    ``volume [M, K] + 1e-10`` (Python's ``random.choices``: the first accessible market
    whose cumulative weight exceeds ``u * total``, else the last), ``u [M]`` (the
    weights in its dtype)."""
    t = tf()
    w = t.where(access, t.cast(volume, u.dtype) + EPSILON, 0.0)
    cum = t.cumsum(w, axis=1)
    x = u * cum[:, -1]
    above = access & (cum > x[:, None])
    first = above & (t.cumsum(t.cast(above, t.int32), axis=1) == 1)
    last = access & (t.cumsum(t.cast(access, t.int32), axis=1, reverse=True) == 1)
    none = ~t.reduce_any(above, axis=1, keepdims=True)
    return t.where(none, last, first)


def flags(groups, gid):
    """``[N]`` bool numpy: which agents (group ids ``gid``) belong to the groups
    ``groups`` (indices) that pick one market by volume."""
    return np.isin(np.asarray(gid), np.asarray(groups, np.int64))
