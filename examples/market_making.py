"""Make a market inside pams markets: quote pairs on ``flowsim/MarketEnv-v0``.

Each of ``num_envs`` markets is pams's ci2002 sample run by flowsim.markets; the
agent quotes a bid and an ask around the mid every ``INTERVAL`` steps
(``quotes=True``: actions ``(bid offset, ask offset, volume)``), as pams's
MarketMakerAgent prices its pair, and leans its quotes against its inventory: long,
it lowers both (sells more readily); short, it raises both.  Compared: a fixed
symmetric pair and the inventory-leaning one, by mean P&L (the sum of the rewards),
round trips and the inventory left.

Run: ``python examples/market_making.py [num_envs]``.
"""
import sys

import numpy as np

import flowsim.markets as fm
from flowsim.envs.market_env import MarketVectorEnv

INTERVAL = 10
SPREAD = 0.0005                   # each side, over the mid
LEAN = 0.0001                     # per unit held
INVENTORY = 12                    # observation column: inventory (window 10)


def quotes(obs, lean):
    """Bid and ask offsets around the mid, 1 unit each, leaning against inventory."""
    held = obs[:, INVENTORY] * lean
    actions = np.empty((len(obs), 3))
    actions[:, 0] = np.maximum(SPREAD + held, 0.0)
    actions[:, 1] = np.maximum(SPREAD - held, 0.0)
    actions[:, 2] = 1.0
    return actions


def run(env, lean):
    obs, _ = env.reset(seed=1)
    pnl, traded, done = 0.0, 0, False
    while not done:
        obs, reward, terminated, _, _ = env.step(quotes(obs, lean))
        account = env.account()
        pnl, traded = pnl + reward, traded + np.minimum(account["bought"], account["sold"])
        done = terminated.all()
    return pnl, traded, env.account()["inventory"]


def main(num_envs=256):
    env = MarketVectorEnv(fm.config_path("ci2002"), num_envs=num_envs, interval=INTERVAL,
                          quotes=True, seed=1)
    for name, lean in (("symmetric pair", 0.0), ("leaning on inventory", LEAN)):
        pnl, traded, held = run(env, lean)
        print(f"{name:22s} P&L {pnl.mean():8.3f} (s.e. {pnl.std(ddof=1) / np.sqrt(len(pnl)):.3f})"
              f", round trips {traded.mean():6.1f}, |inventory| left {np.abs(held).mean():.2f}")


if __name__ == "__main__":
    main(*(int(a) for a in sys.argv[1:]))
