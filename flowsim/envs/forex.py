"""gym-anytrading's ForexEnv rules, batched (the Forex twin of :mod:`flowsim.envs.stocks`).

``gym_anytrading.envs.ForexEnv`` (2.0.0) differs from ``StocksEnv`` in its
reward and profit only; data, observations, ticks and trades are the same
(:func:`flowsim.envs.stocks.step`'s):

* reward, on a trade: ``(price[tick] - price[last trade]) * 10000`` pips when it
  closes a Long, minus that when it closes a Short (float32);
* profit, on a trade or at truncation, with the fee ``0.0003`` in price units:
  ``unit_side="left"`` (default), closing a Short:
  ``profit * (price[last trade] - fee) / price[tick]``; ``unit_side="right"``,
  closing a Long: ``profit / price[last trade] * (price[tick] - fee)``.

The totals are numpy scalars in gym-anytrading: float32 under numpy >= 2
(:data:`flowsim.envs.stocks.ACC_DTYPE`), and flowsim computes them in that dtype.
"""
import numpy as np

from ..core.lazy_tf import tf
from .stocks import ACC_DTYPE, trade_prices

#: gym-anytrading ForexEnv's trade fee (price units) and pips per price unit.
TRADE_FEE, PIPS = 0.0003, 10000
UNIT_SIDES = ("left", "right")


def fee_factors():
    """``[trade fee, pips per unit]`` in :data:`ACC_DTYPE`: rows shaped like the totals,
    never constants (see :func:`flowsim.envs.stocks.step`)."""
    return np.array([TRADE_FEE, PIPS], ACC_DTYPE)


def step(prices, series, action, tick, last, position, end, total_reward, total_profit,
         fees, unit_side="left"):
    """One ForexEnv step of every environment; arguments and results as
    :func:`flowsim.envs.stocks.step`, ``fees`` the rows of :func:`fee_factors`."""
    t = tf()
    acc = total_profit.dtype
    fee, pips = fees
    tick, truncated, long, trade, current, before = trade_prices(prices, series, action,
                                                                 tick, last, position, end)
    diff = t.cast(current - before, acc)
    pips_won = t.where(long, diff * pips, -diff * pips)
    reward = t.where(trade, pips_won, t.zeros_like(pips_won))
    total_reward = total_reward + reward
    current, before = t.cast(current, acc), t.cast(before, acc)
    if unit_side == "left":
        closes = ~long
        profit = total_profit * (before - fee) / current
    else:
        closes = long
        profit = total_profit / before * (current - fee)
    total_profit = t.where((trade | truncated) & closes, profit, total_profit)
    position = t.where(trade, 1 - position, position)
    last = t.where(trade, tick, last)
    return tick, last, position, total_reward, total_profit, t.cast(reward, t.float32), \
        truncated, trade
