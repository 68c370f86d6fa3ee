"""A user's own agent rule as a TensorFlow function of the book state, beside pams's FCN agents.

    python examples/markets_book_agent.py [--markets 256]

No pams class trades on the book's imbalance; here a group of 20 agents does: when
more bids than asks rest in the book it expects the price to rise and buys at the
best ask (a market-taking limit order), and the reverse.  The rule is a plain
function of the features :class:`flowsim.markets.LearnedAgents` gives it with
``book=True`` (the last returns, ``ln(F/P)``, the agent's time window and margin,
then ``ln(best bid / P)``, ``ln(best ask / P)``, bid depth, ask depth), stepped in the
same compiled loop as the FCN agents.  The market's statistics with and without
them follow.
"""
import argparse

import flowsim.markets as fm


def imbalance_taker(features):
    """``[M, 2]``: expected log return and order margin from the book's last 4 features.

    Buy at the best ask where bids outnumber asks, sell at the best bid where asks
    outnumber bids, margin 0; no view (expected return 0: no order) on a balanced book.
    A module-level function: process backends pickle it.
    """
    from flowsim.core.lazy_tf import tf
    t = tf()
    bid, ask, n_bid, n_ask = (features[:, i] for i in range(-4, 0))
    r = t.where(n_bid > n_ask, ask, t.where(n_ask > n_bid, bid, t.zeros_like(bid)))
    return t.stack([r, t.zeros_like(r)], 1)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--markets", type=int, default=256)
    args = ap.parse_args()
    takers = fm.LearnedAgents(imbalance_taker, 20, time_window=[20, 60], lags=1, book=True,
                              name="ImbalanceTakers")
    cfg = fm.config_path("ci2002")
    plain = fm.ensemble(cfg, args.markets, seed=5)
    mixed = fm.ensemble(cfg, args.markets, seed=5, learned=[takers])
    print(f"ci2002 with {takers.n_agents} imbalance takers, {args.markets} markets")
    for name in ("volatility_1", "kurtosis_1", "trades_per_step", "depth_bid", "mispricing"):
        print(f"  {name:<14} {plain.table[name][0]:>10.4g} -> {mixed.table[name][0]:>10.4g}"
              f" +/- {mixed.table[name][1]:.2g}")


if __name__ == "__main__":
    main()
