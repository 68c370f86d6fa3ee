"""Trading environments: flowsim.envs against gym-anytrading on gymnasium, same run.

Three ways to step gym-anytrading's StocksEnv rules on its bundled STOCKS_GOOGL
data (window 30, whole-frame episodes of 2,304 steps), in this process one
after the other, each the best of a few repeats (the machine is shared):

1. gymnasium ``SyncVectorEnv`` of 64 gym-anytrading ``stocks-v0`` environments,
   actions drawn beforehand (and, as a second row, actions from a small MLP
   evaluated in numpy on the batch of observations);
2. ``flowsim.envs.TradingVectorEnv`` at 1,024 environments, ``step`` called from
   Python with actions drawn beforehand: one compiled TF call per step,
   returning numpy observations ``[1024, 30, 2]``, rewards, flags and infos;
3. ``flowsim.envs.rollout`` of a small MLP policy (60-16-2, softmax, actions
   drawn from its probabilities) over 8,192 whole episodes (two blocks of
   4,096): the policy and the environment inside one compiled loop
   (:class:`flowsim.Flow`, one device; and ``backend="threads"`` over two
   logical CPUs, one per core).  By default the MLP's first layer is computed
   once per tick of the series per block and gathered per step
   (``tick_features``); the ``tick_features=False`` row gathers every
   episode's ``[30, 2]`` observation and calls the whole policy on it.

Every row observes every step of every environment and (rows 1b, 3) evaluates
the policy for each of them; prints env-steps per second (and per CPU-second of
this process, all threads: load from other jobs changes the first, much less
the second; a row that keeps two cores busy shows it as wall rate above the CPU
rate) and the ratios to
row 1, SyncVectorEnv with random actions (targets: >= 50x for 2,
>= 500x for 3), and, for the rollouts, to row 1b (SyncVectorEnv + the same
MLP in numpy).  ``--rounds`` repeats the whole measurement in the same
process::

    .venv/bin/python benchmarks/envs.py [--steps 300] [--episodes 8192] [--rounds 3]

The portfolio rows (first; ``--only portfolio`` for them alone) compare
gym-trading-env 0.3.5's ``TradingEnv`` with flowsim on one configuration
(``PORTFOLIO``: positions -1, 0, 0.5, 1, 2; 0.1 % fees; borrowing; windows 10;
256-row episodes from random starts) and one DataFrame (STOCKS_GOOGL with two
feature columns): P1 gymnasium ``SyncVectorEnv`` of 64 of them stepped with an
action matrix drawn beforehand; P1b the same with a linear softmax policy
evaluated in numpy on every observation and actions drawn from it; P2
``flowsim.envs.PortfolioVectorEnv`` at 1,024 environments stepped from Python
with the same action matrix (P1 takes its first 64 columns); P3
``flowsim.envs.portfolio_rollout`` of P1b's policy (same weights) over 8,192
episodes in the compiled loop.  Every environment steps on from where the round
before left it (autoresets included, on both sides).  Each round times P1, P1b,
P2, P3 in turn; the table shows medians over ``--rounds`` rounds of the rates
and of the ratios taken within each round, wall and per CPU-second (this
process, all threads).  Targets: P2 >= 100x P1, P3 >= 1,000x P1.
Training: P4 is :func:`flowsim.envs.train_ppo` on the same configuration
(1,024 environments, ``PPO_OPTIONS``: 64 steps per update, 2 epochs of 2
minibatches, 40-16-5 actor and critic), env steps per second with the
gradient steps included (compiled once before timing), against P0, a
``SyncVectorEnv`` of 16 gym-trading-env environments stepped with random
actions; target P4 >= 20x P0.  P5 is the call a user makes by default
(``train_ppo(env, steps, seed)``: one epoch of 16 minibatches, hidden 32; no
other keyword), timed beside the tuned P4, never instead of it, with the same
target.
``--tf-threads 1`` runs flowsim's rows with one TensorFlow intra-op thread
(XLA then runs a step's small loops on the calling thread instead of splitting
them over the pool: fewer CPU-seconds per step; gym-trading-env's rows use no
TensorFlow)::

    .venv/bin/python benchmarks/envs.py --only portfolio --rounds 7 [--steps 150] [--tf-threads 1]

Small batches (``--only small``): one environment (gym-trading-env's
``TradingEnv`` against ``gymnasium.make("flowsim/TradingEnv-v0")``, both stepped one
action at a time, resetting when an episode ends) and 4 and 16 environments
(gymnasium ``SyncVectorEnv`` of gym-trading-env against
``flowsim.envs.PortfolioVectorEnv``, eager numpy steps by default), the same
actions, on each configuration of ``SMALL_CONFIGS`` (gym-trading-env's default
options, ``PORTFOLIO``, fractional positions with fees, a custom reward and
feature); each round times every
pair in turn; medians over ``--rounds`` of the rates and of the ratios taken within
each round, and the lowest ratio over the configurations::

    .venv/bin/python benchmarks/envs.py --only small --rounds 5 [--steps 300]

At scale (``--only scale``): ``PortfolioVectorEnv`` x 1,024 (compiled steps from
Python) against gym-trading-env's ``SyncVectorEnv`` x 64, random actions, on each
configuration of ``SCALE_CONFIGS`` (fees, leverage and features in each; one with
a custom reward and feature); medians over interleaved rounds and the lowest
ratio (target >= 100x)::

    .venv/bin/python benchmarks/envs.py --only scale --rounds 3 [--steps 150]

Needs gymnasium, gym-anytrading and gym-trading-env (the ``test`` extra).
"""
import argparse
import os
import sys
import time
import warnings

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import numpy as np  # noqa: E402
from _common import table  # noqa: E402


class Rate(float):
    """Work units per wall second, with ``.cpu``: units per CPU-second of this process."""

    def __new__(cls, wall, cpu):
        rate = super().__new__(cls, wall)
        rate.cpu = cpu
        return rate


def best_rate(fn, work, repeat=5):
    """Most ``work`` units per second over ``repeat`` timed calls of ``fn`` (and the most
    per CPU-second of this process, all its threads)."""
    best, best_cpu = 0.0, 0.0
    for _ in range(repeat):
        t0, c0 = time.perf_counter(), time.process_time()
        fn()
        best = max(best, work / (time.perf_counter() - t0))
        best_cpu = max(best_cpu, work / max(time.process_time() - c0, 1e-9))
    return Rate(best, best_cpu)


def numpy_mlp(weights, obs):
    """The MLP policy's probability of Buy, in numpy, for a batch of observations."""
    last = obs[:, -1:, 0:1]
    x = np.concatenate([obs[:, :, 0:1] / last - 1.0, obs[:, :, 1:2] / last], axis=2)
    x = x.reshape(len(obs), -1) * 10.0
    for i, (w, b) in enumerate(weights):
        x = x @ w + b
        if i < len(weights) - 1:
            x = np.tanh(x)
    e = np.exp(x - x.max(axis=1, keepdims=True))
    return e[:, 1] / e.sum(axis=1)


def gym_anytrading_rates(n_steps, weights):
    import gym_anytrading  # noqa: F401  (registers stocks-v0)
    import gymnasium
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        env = gymnasium.make_vec("stocks-v0", num_envs=64, vectorization_mode="sync")
        env.reset(seed=0)
        actions = np.random.default_rng(0).integers(0, 2, (n_steps, 64))

        def random_actions():
            for a in actions:
                env.step(a)

        rng = np.random.default_rng(1)
        state = {"obs": env.reset(seed=0)[0]}

        def mlp_actions():
            for _ in range(n_steps):
                p = numpy_mlp(weights, state["obs"])
                state["obs"] = env.step((rng.random(64) < p).astype(np.int64))[0]

        single = gymnasium.make("stocks-v0").unwrapped
        single.reset(seed=0)

        def one_env():
            for i in range(n_steps * 10):
                if single.step(i % 2)[3]:
                    single.reset()

        return (best_rate(random_actions, 64 * n_steps), best_rate(mlp_actions, 64 * n_steps),
                best_rate(one_env, 10 * n_steps))


def flowsim_step_rate(n_steps, n_envs=1024):
    from gym_anytrading.datasets import STOCKS_GOOGL

    from flowsim.envs import TradingVectorEnv
    env = TradingVectorEnv(STOCKS_GOOGL, n_envs)
    env.reset(seed=0)
    actions = np.random.default_rng(0).integers(0, 2, (n_steps, n_envs))
    env.step(actions[0])                        # compile

    def run():
        for a in actions:
            obs, rewards, term, trunc, infos = env.step(a)

    return best_rate(run, n_envs * n_steps), env.device


def flowsim_rollout_rate(n_episodes, policy, backend=None, tick_features=None):
    from gym_anytrading.datasets import STOCKS_GOOGL

    from flowsim.envs import rollout

    def run():
        return rollout(policy, STOCKS_GOOGL, n_episodes, seed=1, backend=backend,
                       tick_features=tick_features)

    t0 = time.perf_counter()
    first = run()
    cold = time.perf_counter() - t0
    steps = n_episodes * (len(STOCKS_GOOGL) - 31)
    rate = best_rate(run, steps, repeat=3)
    again = run()
    assert again.episode_return == first.episode_return      # same bits, run after run
    return rate, cold, first


# -- gym-trading-env's TradingEnv against flowsim's PortfolioVectorEnv ------------------
#: One configuration for every portfolio row (data: portfolio_frame()).
PORTFOLIO = dict(positions=[-1, 0, 0.5, 1, 2], trading_fees=0.001, borrow_interest_rate=0.0003,
                 windows=10, max_episode_duration=256)
N_SYNC, N_ENVS = 64, 1024
#: gymnasium SyncVectorEnv size of the row training is compared with (P0).
N_SMALL_SYNC = 16
#: The training row's PPO options (flowsim.envs.train_ppo on PORTFOLIO, N_ENVS envs) and
#: updates per timed run.
PPO_OPTIONS = dict(n_steps=64, epochs=2, minibatches=2, hidden=(16,))
PPO_UPDATES = 4


def portfolio_frame():
    """gym-anytrading's STOCKS_GOOGL as a gym-trading-env DataFrame (2,334 rows, two
    feature columns)."""
    from gym_anytrading.datasets import STOCKS_GOOGL
    df = STOCKS_GOOGL.rename(columns=str.lower).copy()
    df["feature_return"] = df["close"].pct_change()
    df["feature_range"] = (df["high"] - df["low"]) / df["close"]
    return df.dropna()


class LinearSoftmax:
    """A linear softmax policy over the flattened [10, 4] observation: TF for the
    rollout, :meth:`numpy` for gym-trading-env (the same weights)."""

    def __init__(self, n_inputs, n_positions, seed=0):
        rng = np.random.default_rng(seed)
        self.w = rng.normal(0, 0.3, (n_inputs, n_positions)).astype(np.float32)

    def __call__(self, obs):
        import tensorflow as tf
        flat = tf.reshape(obs, [tf.shape(obs)[0], -1])
        return tf.nn.softmax(tf.matmul(flat, self.w))

    def numpy(self, obs):
        x = obs.reshape(len(obs), -1).astype(np.float32) @ self.w
        e = np.exp(x - x.max(axis=1, keepdims=True))
        return e / e.sum(axis=1, keepdims=True)


def timed(fn):
    """``(wall seconds, CPU seconds of this process, all threads)`` of ``fn()``."""
    t0, c0 = time.perf_counter(), time.process_time()
    fn()
    return time.perf_counter() - t0, time.process_time() - c0


class PortfolioRows:
    """The four portfolio rows, built once; :meth:`round` times each once (in turn)
    and returns ``{row: (wall, cpu)}`` env-steps per second.  Every row steps the
    same data with the same configuration; P1 and P2 take the same action matrix
    (P1 its first 64 columns); P1b and P3 evaluate the same linear softmax policy
    on every observation and draw the action from its probabilities."""

    def __init__(self, df, steps, episodes):
        import gymnasium
        saved = list(warnings.filters)
        from gym_trading_env.environments import TradingEnv
        warnings.filters[:] = saved          # its import turns every warning into an error

        from flowsim.envs import PortfolioVectorEnv
        self.df, self.steps, self.episodes = df, steps, episodes
        self.sync_steps = max(steps // 3, 30)
        self.sync = gymnasium.vector.SyncVectorEnv(
            [lambda: TradingEnv(df, verbose=0, **PORTFOLIO) for _ in range(N_SYNC)])
        self.sync_obs = self.sync.reset(seed=0)[0]
        self.small_sync = gymnasium.vector.SyncVectorEnv(
            [lambda: TradingEnv(df, verbose=0, **PORTFOLIO) for _ in range(N_SMALL_SYNC)])
        self.small_sync.reset(seed=0)
        self.small_sync_steps = steps          # 16 environments: more steps, as long a run
        self.env = PortfolioVectorEnv(df, N_ENVS, **PORTFOLIO)
        self.env.reset(seed=0)
        k = len(PORTFOLIO["positions"])
        self.actions = np.random.default_rng(0).integers(0, k, (steps, N_ENVS))
        self.env.step(self.actions[0])          # compile
        self.policy = LinearSoftmax(10 * 4, k)
        self.rng = np.random.default_rng(1)
        self.first = self._rollout()            # compile
        assert self._rollout().episode_return == self.first.episode_return   # same bits
        self.trained = self._train(1)           # compile
        self.train_steps = self._train(PPO_UPDATES).env_steps
        self._train_default(1)                  # compile
        self.default_steps = self._train_default().env_steps

    def _train(self, updates=PPO_UPDATES):
        from flowsim.envs import train_ppo
        steps = N_ENVS * PPO_OPTIONS["n_steps"] * updates
        return train_ppo(self.env, steps, seed=1, **PPO_OPTIONS)

    def _train_default(self, updates=PPO_UPDATES):
        from flowsim.envs import train_ppo
        from flowsim.envs.ppo import DEFAULTS
        return train_ppo(self.env, N_ENVS * DEFAULTS["n_steps"] * updates, seed=1)

    def _small_sync_random(self):
        for a in self.actions[:self.small_sync_steps, :N_SMALL_SYNC]:
            self.small_sync.step(a)

    def _rollout(self):
        from flowsim.envs import portfolio_rollout
        return portfolio_rollout(self.policy, self.df, self.episodes, seed=1, **PORTFOLIO)

    def _sync_random(self):
        for a in self.actions[:self.sync_steps, :N_SYNC]:
            self.sync_obs = self.sync.step(a)[0]

    def _sync_policy(self):
        obs = self.sync_obs
        for _ in range(self.sync_steps):
            p = self.policy.numpy(obs)
            u = self.rng.random(N_SYNC)[:, None]
            action = (p.cumsum(axis=1)[:, :-1] <= u).sum(axis=1)
            obs = self.sync.step(action)[0]
        self.sync_obs = obs

    def _step(self):
        for a in self.actions:
            self.env.step(a)

    def round(self):
        work = {"P0": N_SMALL_SYNC * self.small_sync_steps, "P1": N_SYNC * self.sync_steps,
                "P1b": N_SYNC * self.sync_steps, "P2": N_ENVS * self.steps,
                "P3": self.episodes * (PORTFOLIO["max_episode_duration"] - 1),
                "P4": self.train_steps, "P5": self.default_steps}
        runs = {"P0": self._small_sync_random, "P1": self._sync_random,
                "P1b": self._sync_policy, "P2": self._step, "P3": self._rollout,
                "P4": self._train, "P5": self._train_default}
        out = {}
        for name, run in runs.items():
            wall, cpu = timed(run)
            out[name] = (work[name] / wall, work[name] / max(cpu, 1e-9))
        return out


PORTFOLIO_ROWS = {
    "P0": f"gym-trading-env TradingEnv, SyncVectorEnv x {N_SMALL_SYNC}, random actions",
    "P1": "gym-trading-env TradingEnv, SyncVectorEnv x 64, random actions",
    "P1b": "same + linear softmax policy in numpy",
    "P2": f"flowsim PortfolioVectorEnv x {N_ENVS}, step() from Python, P1's actions",
    "P3": "flowsim portfolio_rollout, P1b's policy in the compiled loop",
    "P4": f"flowsim train_ppo x {N_ENVS} envs, updates included ({PPO_OPTIONS})",
    "P5": f"flowsim train_ppo x {N_ENVS} envs, updates included, default options",
}


def portfolio_main(args):
    """Rows P1-P3 timed in turn in each round; ratios within a round; medians."""
    rows = PortfolioRows(portfolio_frame(), args.steps, args.portfolio_episodes)
    import tensorflow as tf
    threads = tf.config.threading.get_intra_op_parallelism_threads() or "default"
    print(f"portfolio: STOCKS_GOOGL, {PORTFOLIO}; TF intra-op threads {threads}; rollout "
          f"{args.portfolio_episodes} episodes: {rows.first}")
    rounds = []
    for r in range(args.rounds):
        rates = rows.round()
        rounds.append(rates)
        ratio = {k: (w / rates["P1"][0], c / rates["P1"][1]) for k, (w, c) in rates.items()}
        print(f"round {r + 1}/{args.rounds} (load average {os.getloadavg()[0]:.1f}): " +
              ", ".join(f"{k} {ratio[k][0]:.0f}x / {ratio[k][1]:.0f}x per CPU-s"
                        for k in ("P2", "P3")) +
              f", P3 vs P1b {rates['P3'][1] / rates['P1b'][1]:.0f}x per CPU-s"
              f", P4 (training) vs P0 {rates['P4'][0] / rates['P0'][0]:.1f}x"
              f", P5 (default training) vs P0 {rates['P5'][0] / rates['P0'][0]:.1f}x")

    def median(f):
        return float(np.median([f(r) for r in rounds]))

    out = []
    for k, what in PORTFOLIO_ROWS.items():
        wall, cpu = median(lambda r, k=k: r[k][0]), median(lambda r, k=k: r[k][1])
        out.append((f"{k} {what}", f"{wall:,.0f}",
                    f"{median(lambda r, k=k: r[k][0] / r['P1'][0]):,.0f}x", f"{cpu:,.0f}",
                    f"{median(lambda r, k=k: r[k][1] / r['P1'][1]):,.0f}x"))
    print(f"\nmedians over {args.rounds} interleaved rounds (ratios taken within each round)")
    table(out, ["what", "env-steps/s", "vs P1", "per CPU-s", "vs P1, per CPU-s"])
    step_cpu = median(lambda r: r["P2"][1] / r["P1"][1])
    roll_cpu = median(lambda r: r["P3"][1] / r["P1"][1])
    print(f"targets vs P1 (median, per CPU-s): step >= 100x "
          f"({'met' if step_cpu >= 100 else 'NOT met'}: {step_cpu:.0f}x), rollout >= 1000x "
          f"({'met' if roll_cpu >= 1000 else 'NOT met'}: {roll_cpu:.0f}x)")
    for row, what in (("P4", "tuned"), ("P5", "default call")):
        wall = median(lambda r, row=row: r[row][0] / r["P0"][0])
        cpu = median(lambda r, row=row: r[row][1] / r["P0"][1])
        print(f"target vs P0 (median): training ({what}, {row}) >= 20x "
              f"({'met' if wall >= 20 else 'NOT met'}: {wall:.1f}x wall, {cpu:.1f}x per CPU-s)")


def drift_feature(history):
    """A custom dynamic feature: the price relative to the episode's first price."""
    return history["data_close", -1] / history["data_close", 0] - 1


def value_ratio_reward(history):
    """A custom reward: the step's gain relative to the first valuation, less a penalty
    on leverage."""
    gain = (history["portfolio_valuation", -1] - history["portfolio_valuation", -2]) / \
        history["portfolio_valuation", 0]
    return gain - np.where(np.abs(history["position", -1]) > 1, 0.0001, 0.0)


#: Configurations of the small-batch rows (``--only small``): name -> keywords.  The
#: last has its own reward and feature functions (flowsim runs them on its batched
#: history, gym-trading-env on its own).
SMALL_CONFIGS = {
    "defaults": dict(),
    "fees, leverage, windows": dict(PORTFOLIO),
    "fractional, fees": dict(positions=[-0.5, 0, 0.25, 0.5, 0.75, 1], trading_fees=0.002),
    "custom reward and feature": dict(positions=[-1, 0, 1, 2], trading_fees=0.0005, windows=3,
                                      dynamic_feature_functions=[drift_feature],
                                      reward_function=value_ratio_reward),
}
SMALL_SIZES = (1, 4, 16)


class SmallRows:
    """gym-trading-env against flowsim at 1, 4 and 16 environments on one
    configuration; :meth:`round` times each pair once and returns ``{size: (theirs,
    ours)}`` env-steps per second, each ``(wall, per CPU-second of this process)``."""

    def __init__(self, df, config, steps):
        import gymnasium
        saved = list(warnings.filters)
        from gym_trading_env.environments import TradingEnv
        warnings.filters[:] = saved          # its import turns every warning into an error

        import flowsim.envs  # noqa: F401  (registers flowsim/TradingEnv-v0)
        from flowsim.envs import PortfolioVectorEnv
        self.steps = steps
        k = len(config.get("positions", [0, 1]))
        self.actions = np.random.default_rng(0).integers(0, k, (steps, max(SMALL_SIZES)))
        self.pairs = {1: (TradingEnv(df, verbose=0, **config),
                          gymnasium.make("flowsim/TradingEnv-v0", df=df, verbose=0,
                                         **config).unwrapped)}
        for n in SMALL_SIZES[1:]:
            self.pairs[n] = (gymnasium.vector.SyncVectorEnv(
                [lambda: TradingEnv(df, verbose=0, **config) for _ in range(n)]),
                PortfolioVectorEnv(df, n, **config))
        for theirs, ours in self.pairs.values():
            theirs.reset(seed=0)
            ours.reset(seed=0)

    def _single(self, env):
        for a in self.actions[:, 0].tolist():
            if any(env.step(a)[2:4]):
                env.reset()

    def _vector(self, env, n):
        for a in self.actions[:, :n]:
            env.step(a)

    def round(self):
        out = {}
        for n, pair in self.pairs.items():
            rates = []
            for env in pair:
                wall, cpu = timed(lambda env=env, n=n: self._single(env) if n == 1
                                  else self._vector(env, n))
                rates.append((n * self.steps / wall, n * self.steps / max(cpu, 1e-9)))
            out[n] = tuple(rates)
        return out


def interleaved_rounds(rows_class, configs, args):
    """``{configuration: [round results]}``: ``rows_class(df, config, steps)`` built for
    each of ``configs``, then ``args.rounds`` rounds timing each in turn."""
    df = portfolio_frame()
    rows = {name: rows_class(df, config, args.steps) for name, config in configs.items()}
    rounds = {name: [] for name in rows}
    for r in range(args.rounds):
        for name, row in rows.items():
            rounds[name].append(row.round())
        print(f"round {r + 1}/{args.rounds} (load average {os.getloadavg()[0]:.1f})")
    return rounds


def small_main(args):
    """One, 4 and 16 environments against gym-trading-env, each configuration of
    :data:`SMALL_CONFIGS`; medians over interleaved rounds."""
    rounds = interleaved_rounds(SmallRows, SMALL_CONFIGS, args)
    out, lowest = [], {}
    for name, results in rounds.items():
        for n in SMALL_SIZES:
            theirs = float(np.median([x[n][0][0] for x in results]))
            ours = float(np.median([x[n][1][0] for x in results]))
            ratio = [float(np.median([x[n][1][i] / x[n][0][i] for x in results]))
                     for i in (0, 1)]
            lowest[n] = np.minimum(lowest.get(n, np.inf), ratio)
            what = "one env" if n == 1 else f"{n} envs (SyncVectorEnv x {n})"
            out.append((f"{name}: {what}", f"{theirs:,.0f}", f"{ours:,.0f}",
                        f"{ratio[0]:.2f}x", f"{ratio[1]:.2f}x"))
    print(f"\nmedians over {args.rounds} interleaved rounds, {args.steps} steps per run")
    table(out, ["configuration, size", "gym-trading-env steps/s", "flowsim steps/s",
                "flowsim / gym-trading-env", "same, per CPU-s"])
    print("lowest ratio over the configurations (target >= 1x), wall / per CPU-s: " +
          ", ".join(f"{n} env{'s' if n > 1 else ''} {lowest[n][0]:.2f}x / {lowest[n][1]:.2f}x"
                    for n in SMALL_SIZES))


#: Configurations of the 1,024-environment rows (``--only scale``): fees, leverage
#: (borrowing) and features in each, one with its own reward and feature functions.
SCALE_CONFIGS = {
    "fees, leverage, windows": dict(PORTFOLIO),
    "fractional, leverage, fees": dict(positions=[-0.5, 0, 0.25, 0.5, 1, 1.5],
                                       trading_fees=0.002, borrow_interest_rate=0.0005,
                                       windows=5),
    "custom reward and feature": dict(SMALL_CONFIGS["custom reward and feature"],
                                      borrow_interest_rate=0.0003),
}


class ScaleRows:
    """gym-trading-env's ``SyncVectorEnv`` of ``N_SYNC`` environments against
    ``PortfolioVectorEnv`` of ``N_ENVS`` (compiled steps from Python) on one
    configuration, random actions (the first ``N_SYNC`` columns for gym-trading-env);
    :meth:`round` times each once and returns ``(theirs, ours)``: env-steps per
    second, each ``(wall, per CPU-second of this process)``."""

    def __init__(self, df, config, steps):
        import gymnasium
        saved = list(warnings.filters)
        from gym_trading_env.environments import TradingEnv
        warnings.filters[:] = saved          # its import turns every warning into an error

        from flowsim.envs import PortfolioVectorEnv
        self.steps, self.sync_steps = steps, max(steps // 3, 30)
        k = len(config["positions"])
        self.actions = np.random.default_rng(0).integers(0, k, (steps, N_ENVS))
        self.sync = gymnasium.vector.SyncVectorEnv(
            [lambda: TradingEnv(df, verbose=0, **config) for _ in range(N_SYNC)])
        self.env = PortfolioVectorEnv(df, N_ENVS, **config)
        self.sync.reset(seed=0)
        self.env.reset(seed=0)
        self.env.step(self.actions[0])          # compile

    def _sync(self):
        for a in self.actions[:self.sync_steps, :N_SYNC]:
            self.sync.step(a)

    def _flowsim(self):
        for a in self.actions:
            self.env.step(a)

    def round(self):
        rates = []
        for run, work in ((self._sync, N_SYNC * self.sync_steps),
                          (self._flowsim, N_ENVS * self.steps)):
            wall, cpu = timed(run)
            rates.append((work / wall, work / max(cpu, 1e-9)))
        return tuple(rates)


def scale_main(args):
    """1,024 environments against ``SyncVectorEnv(64)`` on each configuration of
    :data:`SCALE_CONFIGS`; medians over interleaved rounds, the lowest ratio."""
    rounds = interleaved_rounds(ScaleRows, SCALE_CONFIGS, args)
    out, ratios = [], []
    for name, results in rounds.items():
        ratio = [float(np.median([ours[i] / theirs[i] for theirs, ours in results]))
                 for i in (0, 1)]
        ratios.append(ratio)
        out.append((name, f"{np.median([x[0][0] for x in results]):,.0f}",
                    f"{np.median([x[1][0] for x in results]):,.0f}", f"{ratio[0]:.0f}x",
                    f"{ratio[1]:.0f}x"))
    print(f"\nmedians over {args.rounds} interleaved rounds, {args.steps} steps per run "
          f"(gym-trading-env {max(args.steps // 3, 30)})")
    table(out, ["configuration", f"gym-trading-env SyncVectorEnv x {N_SYNC} steps/s",
                f"flowsim PortfolioVectorEnv x {N_ENVS} steps/s", "ratio",
                "ratio per CPU-s"])
    print(f"lowest ratio over the configurations (target >= 100x): "
          f"{min(r[0] for r in ratios):.0f}x wall, {min(r[1] for r in ratios):.0f}x per CPU-s")


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--steps", type=int, default=300, help="steps per timed vector run")
    parser.add_argument("--episodes", type=int, default=8192, help="episodes per rollout")
    parser.add_argument("--rounds", type=int, default=1, help="whole measurements, same run")
    parser.add_argument("--portfolio-episodes", type=int, default=8192,
                        help="episodes per portfolio rollout")
    parser.add_argument("--only", choices=("all", "stocks", "portfolio", "small", "scale"),
                        default="all",
                        help="the gym-anytrading rows, the gym-trading-env rows, both, "
                             "the small-batch rows against gym-trading-env, or its "
                             "1,024-environment rows on several configurations")
    parser.add_argument("--tf-threads", type=int, default=0,
                        help="TensorFlow intra-op threads for flowsim's rows (0: its "
                             "default, every core; gym-trading-env's rows do not use TF)")
    args = parser.parse_args()
    if args.tf_threads:
        from flowsim.core.backend import set_threads
        set_threads(args.tf_threads, strict=True, who="--tf-threads")
    if args.only in ("small", "scale"):
        (small_main if args.only == "small" else scale_main)(args)
        return
    if args.only != "stocks":
        portfolio_main(args)
    if args.only == "portfolio":
        return
    import flowsim
    flowsim.set_virtual_cpus(2)         # for the threads row; Flow and the env use CPU:0
    from flowsim.envs import MLP
    policy = MLP.random(30, (16,), seed=0)
    summary = []
    for r in range(args.rounds):
        sync, sync_mlp, single = gym_anytrading_rates(args.steps, policy.weights)
        step, device = flowsim_step_rate(args.steps)
        roll, cold, result = flowsim_rollout_rate(args.episodes, policy)
        plain, cold_plain, result_plain = flowsim_rollout_rate(args.episodes, policy,
                                                               tick_features=False)
        roll2, _, result2 = flowsim_rollout_rate(args.episodes, policy, backend="threads")
        assert result2.episode_return == result.episode_return   # same bits on both backends
        def row(what, rate, vs_1b=True, sync=sync, sync_mlp=sync_mlp):
            return (what, f"{rate:,.0f}", f"{rate / sync:.0f}x" if rate > 10 * sync
                    else f"{rate / sync:.2f}x", f"{rate / sync_mlp:.0f}x" if vs_1b else "",
                    f"{rate.cpu:,.0f}", f"{rate.cpu / sync.cpu:.0f}x")

        rows = [
            row("gym-anytrading stocks-v0, one env", single, False),
            row("1  gymnasium SyncVectorEnv x 64 (random actions)", sync, False),
            row("1b gymnasium SyncVectorEnv x 64 + numpy MLP policy", sync_mlp),
            row("2  flowsim TradingVectorEnv x 1024, step() from Python", step, False),
            row("3  flowsim rollout, MLP 60-16-2 in the compiled loop", roll),
            row("   same, ThreadPoolFlow over 2 logical CPUs", roll2),
            row("   same, tick_features=False (policy on [n, 30, 2])", plain),
        ]
        print(f"\nround {r + 1}/{args.rounds}: STOCKS_GOOGL, window 30; flowsim on {device}; "
              f"best of repeats; load average {os.getloadavg()[0]:.1f}")
        table(rows, ["what", "env-steps/s", "vs 1 (SyncVectorEnv)", "vs 1b (+ numpy MLP)",
                     "per CPU-s", "vs 1, per CPU-s"])
        best = max(roll, roll2)
        summary.append((step / sync, best / sync, best / sync_mlp, plain / sync))
        if r == 0:
            print(f"rollout cold start (trace + XLA compile + first run): {cold:.1f} s "
                  f"(tick_features=False: {cold_plain:.1f} s)")
            print(f"MLP rollout: {result}")
            print(f"  tick_features=False: {result_plain}")
        print(f"targets vs row 1: step >= 50x ({'met' if step / sync >= 50 else 'NOT met'}), "
              f"rollout >= 500x ({'met' if best / sync >= 500 else 'NOT met'})")
    if args.rounds > 1:
        print("\nper round: step / row 1, best rollout / row 1, best rollout / row 1b, "
              "tick_features=False / row 1")
        for r, (a, b, c, d) in enumerate(summary):
            print(f"  round {r + 1}: {a:.0f}x  {b:.0f}x  {c:.0f}x  {d:.0f}x")


if __name__ == "__main__":
    main()
