"""Agent-based market ensembles: pams's CI2002 market, many at once, and a learned group.

    python examples/markets.py [--markets 512] [--plot markets.png]

1. 512 CI2002 markets (100 FCN agents each, 100 warm-up + 500 trading steps): the
   stylized facts with standard errors, and price paths of the first markets.
2. A parameter study: noise scale x chart weight, one table.
3. A learned group: 20 agents whose orders come from a tiny Keras model over the last
   returns and the mispricing, stepped beside the FCN agents in the same compiled loop.
4. pams's samples with events: a fundamental shock with a trading halt, a price limit,
   a fat-finger order (bundled as pams ships them), side by side.
"""
import argparse

import flowsim.markets as fm


def keras_policy(lags):
    """A tiny untrained Keras model: features [M, lags + 3] -> expected log return [M, 1].

    Stands in for a trained one; weights are read-only during the run and shared by all
    markets.  (Process backends pickle the policy: fm.MLP.from_keras(model) copies it
    into numpy weights.)
    """
    import keras
    keras.utils.set_random_seed(0)
    return keras.Sequential([keras.Input((lags + 3,)), keras.layers.Dense(8, activation="tanh"),
                             keras.layers.Dense(1, activation=lambda x: 0.01 * keras.ops.tanh(x))])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--markets", type=int, default=512)
    ap.add_argument("--plot", default=None, help="save paths / returns / |r| ACF (PNG)")
    args = ap.parse_args()
    cfg = fm.config_path("ci2002")

    result = fm.ensemble(cfg, args.markets, seed=1, paths=64)   # plots draw from 64 paths
    print(f"CI2002, {args.markets} markets, {result.wall_time:.1f} s (compilation included)")
    print(fm.report(result))
    if args.plot:
        from flowsim.markets import plots
        plots.save(result, args.plot, t0=fm.parse(cfg).first_execution)
        print(f"plots -> {args.plot}")

    table = fm.grid(cfg, {"noiseScale": [0.0005, 0.001, 0.002],
                          "chartWeight": [0.0, {"expon": [0.5]}]}, 256, seed=3)
    print(table[["noiseScale", "chartWeight", "volatility_1", "volatility_1_err",
                 "kurtosis_1", "abs_ac5_1", "mispricing"]].to_string(index=False))

    lags = 10
    learned = fm.LearnedAgents(keras_policy(lags), 20, time_window=[50, 100],
                               order_margin=[0.0, 0.05], lags=lags, dtype="float32",
                               name="Keras")
    mixed = fm.ensemble(cfg, 256, seed=1, learned=[learned])
    print("with 20 learned agents beside the 100 FCN agents:")
    for name in ("volatility_1", "kurtosis_1", "trades_per_step", "mispricing"):
        v, e = mixed.table[name]
        print(f"  {name:<16} {v:.5g} +/- {e:.2g}  (FCN only {result.table[name][0]:.5g})")

    print("pams's samples with events (256 markets each):")
    for name in ("trading_halt", "price_limit", "fat_finger"):
        r = fm.ensemble(fm.config_path(name), 256, seed=1, paths=5)
        cols = ("volatility_1", "kurtosis_1", "mispricing", "final_price")
        print(f"  {name:<13}" + "".join(f" {c} {r.table[c][0]:.4g}" for c in cols))
        if args.plot:
            from flowsim.markets import plots
            out = args.plot.replace(".png", f"-{name}.png")
            plots.paths(r).savefig(out, dpi=100)      # events marked on the paths
            print(f"  paths -> {out}")


if __name__ == "__main__":
    main()
