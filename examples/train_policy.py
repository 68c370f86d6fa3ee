"""REINFORCE on the batched trading environment: a small MLP learns to trade GOOGL.

The policy (:class:`flowsim.envs.MLP`, 60-16-2: the observation scaled by its last
price, tanh, softmax over Sell/Buy) is trained with REINFORCE (policy gradient with
a per-step mean baseline over the batch) on :class:`flowsim.envs.TradingVectorEnv`:
256 environments, 64-step episodes from start ticks drawn in the first 1,800 days
of gym-anytrading's STOCKS_GOOGL (window 30), observations kept on the device
(``backend="tf"``).  Each update plays one batch of episodes and takes one Adam
step.  Then :func:`flowsim.envs.rollout` scores the trained policy in the compiled
loop on held-out data (the last 535 days), 8,192 episodes of 64 steps, against a
random policy (Buy or Sell with probability 1/2 at every step)::

    .venv/bin/python examples/train_policy.py [--updates 60] [--seeds 0 1 2] [--plot FILE]
    .venv/bin/python examples/train_policy.py --env portfolio [--updates 60] [--seeds 0 1 2]

``--env portfolio`` trains instead on :class:`flowsim.envs.PortfolioVectorEnv`
(gym-trading-env's rules): positions short / flat / long (-1, 0, 1), 0.1 % fees
per trade, borrowing at 0.02 % per step, windows of 10 rows of two features
(daily return, high-low range) plus the two default dynamic features, and
gym-trading-env's reward (the log return of the portfolio at each step, so an
episode's return is the log of its final over initial valuation, fees and
interest paid).  The policy is a 40-16-3 softmax MLP; the held-out score is the
mean episode return of :func:`flowsim.envs.portfolio_rollout` over 8,192 episodes
on the last 535 days, against a uniformly random policy (whose score fees and
interest make negative).

Prints the mean episode return (gym-anytrading's total reward: price gained on
each closed Long) per update and, per seed, the held-out score ± its standard
error; ``--plot`` draws the learning curves (needs matplotlib).

What it learns (scores in ``docs/performance.rst``): on a series that mostly
rises, gym-anytrading's reward pays for Longs closed above their entry; the
trained policies score about twice the random policy on the held-out days, which
says the policy captures more of that than chance does, not that it would trade
profitably after fees (``total_profit`` is not the objective here).
"""
import argparse
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import numpy as np  # noqa: E402

TRAIN, TEST = (30, 1800), (1800, 2335)
N_ENVS, STEPS = 256, 64


def reinforce(env, policy, params, draw, seed, updates, lr=0.01, scale=1.0,
              what="mean return"):
    """REINFORCE on ``env`` (``backend="tf"``): each update plays one batch of
    ``STEPS``-step episodes, actions ``draw(probs, rng)`` from ``policy(obs)``'s
    probabilities, and takes one Adam step on ``params`` (rewards times ``scale``,
    reward-to-go less its mean over the batch).  Returns the mean return per update."""
    import tensorflow as tf
    optimizer = tf.keras.optimizers.Adam(lr)
    rng = np.random.default_rng(seed)
    curve = []
    for update in range(updates):
        obs, _ = env.reset(seed=int(rng.integers(2**40)))
        with tf.GradientTape() as tape:
            logps, rewards = [], []
            for _ in range(STEPS):
                probs = policy(obs)
                action = draw(probs, rng)
                logps.append(tf.math.log(tf.gather(probs, action, batch_dims=1) + 1e-8))
                obs, reward, _, _, _ = env.step(action)
                rewards.append(tf.cast(reward, tf.float32) * scale)
            rewards = tf.stack(rewards)                                   # [steps, envs]
            to_go = tf.math.cumsum(rewards, axis=0, reverse=True)
            advantage = to_go - tf.reduce_mean(to_go, axis=1, keepdims=True)
            advantage /= tf.math.reduce_std(to_go) + 1e-6
            loss = -tf.reduce_mean(tf.stack(logps) * advantage)
        optimizer.apply_gradients(zip(tape.gradient(loss, params), params))
        curve.append(float(tf.reduce_mean(tf.reduce_sum(rewards, axis=0))) / scale)
        print(f"seed {seed} update {update + 1:3d}: {what} {curve[-1]:8.4f}")
    return curve


def train(seed, updates, prices, lr=0.01):
    """Train an MLP policy with REINFORCE; return it and the mean return per update."""
    import tensorflow as tf

    from flowsim.envs import MLP, TradingVectorEnv
    env = TradingVectorEnv(prices, N_ENVS, frame_bound=TRAIN, episode_length=STEPS,
                           backend="tf")
    weights = MLP.random(30, (16,), seed=seed).variables()
    params = [v for pair in weights for v in pair]

    def buy_with_probability(probs, rng):
        return tf.cast(rng.random(N_ENVS) < probs[:, 1].numpy(), tf.int32)

    curve = reinforce(env, lambda obs: MLP.forward(weights, obs), params,
                      buy_with_probability, seed, updates, lr)
    return MLP.from_variables(weights), curve


def score(policy, prices, seed=99):
    """Held-out mean episode return ± error: 8,192 episodes in the compiled loop."""
    from flowsim.envs import rollout
    out = rollout(policy, prices, 8192, frame_bound=TEST, episode_length=STEPS, seed=seed)
    return out.episode_return


# -- the same on gym-trading-env's rules: shorts and fees ----------------------------------
PORTFOLIO = dict(positions=[-1, 0, 1], trading_fees=0.001, borrow_interest_rate=0.0002,
                 windows=10, max_episode_duration=STEPS + 1)


def portfolio_frame(prices, rows):
    """STOCKS_GOOGL rows ``rows`` as a gym-trading-env DataFrame with two features."""
    df = prices.rename(columns=str.lower).iloc[rows[0] - 1:rows[1]].copy()
    df["feature_return"] = df["close"].pct_change() * 10
    df["feature_range"] = (df["high"] - df["low"]) / df["close"] * 10
    return df.dropna()


class SoftmaxMLP:
    """Probabilities over positions from the flattened window: tanh hidden layer,
    softmax.  ``weights``: [(W1, b1), (W2, b2)] arrays or variables."""

    def __init__(self, weights):
        self.weights = weights

    @classmethod
    def random(cls, n_inputs, hidden, n_out, seed):
        rng = np.random.default_rng(seed)
        sizes = [n_inputs, hidden, n_out]
        return cls([((rng.uniform(-1, 1, (a, b)) * np.sqrt(6 / (a + b))).astype(np.float32),
                     np.zeros(b, np.float32)) for a, b in zip(sizes[:-1], sizes[1:])])

    def __call__(self, obs):
        import tensorflow as tf
        (w1, b1), (w2, b2) = self.weights
        x = tf.reshape(obs, [tf.shape(obs)[0], -1])
        return tf.nn.softmax(tf.matmul(tf.tanh(tf.matmul(x, w1) + b1), w2) + b2)


class Uniform:
    """Every position with the same probability."""

    def __init__(self, k):
        self.k = k

    def __call__(self, obs):
        import tensorflow as tf
        return tf.fill([tf.shape(obs)[0], self.k], 1.0 / self.k)


def train_portfolio(seed, updates, df, lr=0.01):
    """REINFORCE on PortfolioVectorEnv (observations on the device)."""
    import tensorflow as tf

    from flowsim.envs import PortfolioVectorEnv
    env = PortfolioVectorEnv(df, N_ENVS, backend="tf", **PORTFOLIO)
    n_inputs = int(np.prod(env.single_observation_space.shape))
    init = SoftmaxMLP.random(n_inputs, 16, 3, seed)
    weights = [(tf.Variable(w), tf.Variable(b)) for w, b in init.weights]
    params = [v for pair in weights for v in pair]

    def draw(probs, rng):
        u = rng.random((N_ENVS, 1))
        return tf.reduce_sum(tf.cast(tf.cumsum(probs, axis=1)[:, :-1] <= u, tf.int32), axis=1)

    curve = reinforce(env, SoftmaxMLP(weights), params, draw, seed, updates, lr, scale=100.0,
                      what="mean log return")
    return SoftmaxMLP([(w.numpy(), b.numpy()) for w, b in weights]), curve


def score_portfolio(policy, df, seed=99):
    from flowsim.envs import portfolio_rollout
    return portfolio_rollout(policy, df, 8192, seed=seed, **PORTFOLIO).episode_return


def portfolio_main(args):
    from gym_anytrading.datasets import STOCKS_GOOGL
    train_df, test_df = portfolio_frame(STOCKS_GOOGL, TRAIN), portfolio_frame(STOCKS_GOOGL, TEST)
    random_score = score_portfolio(Uniform(3), test_df)
    rows = []
    for seed in args.seeds:
        t0 = time.perf_counter()
        policy, _ = train_portfolio(seed, args.updates, train_df)
        rows.append((seed, score_portfolio(policy, test_df), time.perf_counter() - t0))
    print(f"\nheld-out mean episode log return ({STEPS} steps, days {TEST[0]}-{TEST[1]}, "
          f"positions -1/0/1, 0.1 % fees):")
    print(f"  random policy: {random_score.value:.4f} +/- {random_score.error:.4f}")
    for seed, est, seconds in rows:
        print(f"  trained, seed {seed}: {est.value:.4f} +/- {est.error:.4f} "
              f"(trained in {seconds:.0f} s)")


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--env", choices=("stocks", "portfolio"), default="stocks",
                        help="gym-anytrading's StocksEnv rules, or gym-trading-env's "
                             "(shorts, fees)")
    parser.add_argument("--updates", type=int, default=60)
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--plot", default=None, help="save the learning curves here")
    args = parser.parse_args()
    if args.env == "portfolio":
        return portfolio_main(args)
    from gym_anytrading.datasets import STOCKS_GOOGL

    from flowsim.envs import Coin
    random_score = score(Coin(0.5), STOCKS_GOOGL)
    curves, rows = {}, []
    for seed in args.seeds:
        t0 = time.perf_counter()
        policy, curves[seed] = train(seed, args.updates, STOCKS_GOOGL)
        rows.append((seed, score(policy, STOCKS_GOOGL), time.perf_counter() - t0))
    print(f"\nheld-out mean episode return ({STEPS} steps, days {TEST[0]}-{TEST[1]}):")
    print(f"  random policy: {random_score.value:.3f} +/- {random_score.error:.3f}")
    for seed, est, seconds in rows:
        print(f"  trained, seed {seed}: {est.value:.3f} +/- {est.error:.3f} "
              f"({est.value / random_score.value:.2f}x random; trained in {seconds:.0f} s)")
    if args.plot:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        for seed, curve in curves.items():
            plt.plot(np.arange(1, len(curve) + 1), curve, label=f"seed {seed}")
        plt.axhline(random_score.value, color="gray", ls="--", label="random (held-out)")
        plt.xlabel("update")
        plt.ylabel("mean episode return")
        plt.legend()
        plt.savefig(args.plot, dpi=100)
        print(f"saved {args.plot}")


if __name__ == "__main__":
    main()
