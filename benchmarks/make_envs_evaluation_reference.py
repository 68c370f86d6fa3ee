"""Stored gym-trading-env episodes of a greedy policy, for flowsim.envs.evaluate's test.

A decisive (weights x 30) ``ActorCritic.random(12, 4, hidden=(8,), seed=2)``, the
class of ``train_ppo``'s policy, played greedily by :func:`flowsim.envs.evaluate`
on gym-trading-env 0.3.5's ``TradingEnv`` for two episodes (reset seeds 5 and 6)
over STOCKS_GOOGL rows 900-960 with two feature columns, positions -1, 0, 0.5, 2,
0.1 % fees, borrowing, windows 3, initial position 0.  Writes the table
:func:`evaluate` returns to ``tests/data/gym_trading_env_evaluate.csv`` (floats
written so they read back to the same bits)::

    .venv/bin/python benchmarks/make_envs_evaluation_reference.py
"""
import os
import sys
import warnings

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
OUT = os.path.join(ROOT, "tests", "data", "gym_trading_env_evaluate.csv")
#: The test's configuration (tests/test_envs_eager.py builds the same).
FIRST_ROW, ROWS = 900, 60
RULES = dict(positions=[-1, 0, 0.5, 2], trading_fees=0.001, borrow_interest_rate=0.0003,
             windows=3, initial_position=0)
EPISODES, SEED = 2, 5


def googl_with_features():
    """STOCKS_GOOGL rows FIRST_ROW .. FIRST_ROW + ROWS, lower-case columns, with the
    daily return and the high-low range as features (the first row dropped)."""
    with warnings.catch_warnings():
        from gym_anytrading.datasets import STOCKS_GOOGL
    df = STOCKS_GOOGL.rename(columns=str.lower).iloc[FIRST_ROW:FIRST_ROW + ROWS + 1].copy()
    df["feature_return"] = df["close"].pct_change()
    df["feature_range"] = (df["high"] - df["low"]) / df["close"]
    return df.dropna()


def main():
    saved = list(warnings.filters)
    from gym_trading_env.environments import TradingEnv
    warnings.filters[:] = saved          # its import turns every warning into an error

    from flowsim.envs import ActorCritic, evaluate
    policy = ActorCritic.random(3 * 4, 4, hidden=(8,), seed=2)
    policy = policy.with_weights([30 * w for w in policy.weights])     # decisive
    table = evaluate(policy, TradingEnv(googl_with_features(), verbose=0, **RULES),
                     episodes=EPISODES, seed=SEED)
    table.to_csv(OUT, index=False, float_format="%.17g")
    print(f"wrote {OUT}:\n{table}")


if __name__ == "__main__":
    main()
