"""Sell a block inside pams markets: an execution task on ``flowsim/MarketEnv-v0``.

Each of ``num_envs`` markets is pams's ci2002 sample (100 FCN agents, 100 warm-up
steps, 500 trading steps) run by flowsim.markets; the agent starts with ``BLOCK``
units and must sell them before the run ends.  Two schedules are compared with the
arrival price (the market price when trading opens) as the benchmark:

* TWAP with market orders: an equal slice at every decision;
* TWAP with limit orders one tenth of a percent below the last price, the rest
  dumped by market orders in the last decisions.

The reward is the change of mark-to-market value (cash + inventory x market price);
what matters for execution is the implementation shortfall, ``BLOCK x arrival price
- cash received`` (per unit, in basis points of the arrival price), and what is left.

Run: ``python examples/market_execution.py [num_envs]``.
"""
import sys

import numpy as np

import flowsim.markets as fm
from flowsim.envs.market_env import MarketVectorEnv

BLOCK = 40
INTERVAL = 25
PRICE, INVENTORY = 9, 12          # observation columns: last price / p0, inventory


def twap(obs, steps_left, limit):
    """Sell ``inventory / decisions left`` (at least 1) now."""
    inventory = obs[:, INVENTORY]
    volume = np.ceil(inventory / max(steps_left, 1))
    actions = np.zeros((len(obs), 3))
    actions[:, 0], actions[:, 1] = -1.0, volume
    if limit and steps_left > 2:
        actions[:, 2] = obs[:, PRICE] * 300.0 * 0.999
    return actions


def shortfall(env, limit):
    obs, _ = env.reset(seed=1)
    first_trading = fm.parse(fm.config_path("ci2002")).first_execution // INTERVAL
    arrival, done = None, False
    while not done:
        left = env.n_steps - env.t
        trading = env.t >= first_trading
        actions = twap(obs, left, limit) if trading else np.zeros((env.num_envs, 3))
        if trading and arrival is None:
            arrival = obs[:, PRICE] * 300.0
        obs, _, terminated, _, info = env.step(actions)
        done = terminated.all()
    account = env.account()
    sold = BLOCK - account["inventory"]
    cost = (sold * arrival - account["cash"]) / np.maximum(sold, 1) / arrival * 1e4
    return cost, account["inventory"], info["statistics"]


def main(num_envs=256):
    env = MarketVectorEnv(fm.config_path("ci2002"), num_envs=num_envs, interval=INTERVAL,
                          max_volume=BLOCK, inventory=float(BLOCK), seed=1)
    for name, limit in (("TWAP, market orders", False), ("TWAP, limit orders", True)):
        cost, left, stats = shortfall(env, limit)
        print(f"{name:22s} shortfall {cost.mean():7.2f} bp/unit "
              f"(s.e. {cost.std(ddof=1) / np.sqrt(len(cost)):.2f}), "
              f"unsold {left.mean():.2f} of {BLOCK}, final price "
              f"{stats[:, fm.NAMES.index('final_price')].mean():.3f}")


if __name__ == "__main__":
    main(*(int(a) for a in sys.argv[1:]))
