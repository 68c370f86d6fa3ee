"""Small policy rollouts: cases of :func:`flowsim.testing.check_executor` (and tests/test_envs.py).

``CASES[name]`` = ``dict(factory="module:function", n_events=..., n_iters=...,
block_size=...)``: the factory (importable, no arguments) returns a
:class:`flowsim.envs.Rollout`; a conformance run builds any Flow on it with
``n_events`` episodes per iteration (``sim.n_events``) and ``block_size`` episodes per
block (``sim.block_size``, which the Flow must use), and runs ``n_iters``
iterations: every backend must give the bits of ``Flow``.  The policies are
:mod:`flowsim.envs.policies` objects, so the simulations pickle to any worker.
"""
import numpy as np

#: Episodes per case: 5 blocks of 128.
EPISODES, BLOCK = 640, 128


def coin_rollout():
    """A random policy on 64-step episodes from drawn start ticks of the bundled series."""
    from flowsim.envs import Coin, Rollout
    return Rollout(Coin(0.5), None, EPISODES, window_size=10, episode_length=64,
                   block_size=BLOCK)


def mlp_rollout():
    """A small MLP (softmax probabilities) on two series, per-episode values kept."""
    from flowsim.envs import MLP, Rollout, sample_prices
    prices = sample_prices()
    series = [prices[:700], prices[500:]]
    return Rollout(MLP.random(10, (8,), seed=3), series, EPISODES, window_size=10,
                   episode_length=48, episodes=True, block_size=BLOCK)


def momentum_sweep():
    """A parametrised rule swept over 4 thresholds (160 episodes each)."""
    from flowsim.envs import Momentum, Rollout
    return Rollout(Momentum(), None, EPISODES // 4, window_size=10, episode_length=40,
                   params=np.array([[-0.5], [0.0], [0.5], [1.0]]), block_size=BLOCK)


def sample_frame(rows=400):
    """flowsim's bundled sample bars as a gym-trading-env DataFrame: OHLCV and two
    feature columns."""
    import pandas as pd

    from flowsim.envs.stocks import SAMPLE
    df = pd.read_csv(SAMPLE).iloc[:rows + 1]
    df.columns = [c.lower() for c in df.columns]
    df["feature_return"] = df["close"].pct_change()
    df["feature_range"] = (df["high"] - df["low"]) / df["close"]
    return df.dropna()


def portfolio_coin():
    """A coin between short and long (fees, borrowing, random starts and initial
    positions, a window of 5 rows)."""
    from flowsim.envs import Coin, PortfolioRollout
    return PortfolioRollout(Coin(0.4), sample_frame(), EPISODES, positions=[-1, 1],
                            trading_fees=0.001, borrow_interest_rate=0.0002, windows=5,
                            max_episode_duration=40, block_size=BLOCK)


def portfolio_sweep():
    """A parametrised rule (long when the last range feature exceeds it) swept over 4
    thresholds, per-episode values kept."""
    from flowsim.envs import Momentum, PortfolioRollout
    return PortfolioRollout(Momentum(), sample_frame(), EPISODES // 4,
                            positions=[0, 1], trading_fees=0.0005, max_episode_duration=30,
                            windows=3, params=np.array([[-0.01], [0.0], [0.01], [0.02]]),
                            episodes=True, block_size=BLOCK)


CASES = {
    "rollout_coin": dict(
        factory="flowsim.testing.cases_envs:coin_rollout",
        n_events=EPISODES, n_iters=2, block_size=BLOCK, events_limit=2 * BLOCK, seed=11),
    "rollout_mlp": dict(
        factory="flowsim.testing.cases_envs:mlp_rollout",
        n_events=EPISODES, n_iters=1, block_size=BLOCK, events_limit=2 * BLOCK, seed=12),
    "portfolio_coin": dict(
        factory="flowsim.testing.cases_envs:portfolio_coin",
        n_events=EPISODES, n_iters=1, block_size=BLOCK, events_limit=2 * BLOCK, seed=14),
    "portfolio_sweep": dict(
        factory="flowsim.testing.cases_envs:portfolio_sweep",
        n_events=EPISODES, n_iters=1, block_size=BLOCK, events_limit=2 * BLOCK, seed=15),
    "rollout_sweep": dict(
        factory="flowsim.testing.cases_envs:momentum_sweep",
        n_events=EPISODES, n_iters=1, block_size=BLOCK, events_limit=2 * BLOCK, seed=13),
}
