"""PortfolioVectorEnv / PortfolioEnv stepped in numpy (eager) against the compiled step."""
import os
import warnings

import numpy as np
import pytest

pytest.importorskip("gymnasium")

from flowsim.envs import PortfolioEnv, PortfolioVectorEnv  # noqa: E402
from flowsim.envs.portfolio_eager import EAGER_MAX_ENVS, uniform_key  # noqa: E402

with warnings.catch_warnings():
    from gym_anytrading.datasets import STOCKS_GOOGL


def market_frame(rows, start=300):
    df = STOCKS_GOOGL.rename(columns=str.lower).iloc[start:start + rows + 1].copy()
    df["feature_return"] = df["close"].pct_change()
    df["feature_range"] = (df["high"] - df["low"]) / df["close"]
    return df.dropna()


def drift_feature(history):
    return history["data_close", -1] / history["data_close", 0] - 1


def log_value_feature(history):
    return np.log2(history["portfolio_valuation", -1] / history["portfolio_valuation", 0])


def three_step_log_reward(history):
    return np.log(history["portfolio_valuation", -1]) - np.log(
        history["portfolio_valuation", -3]) - 0.0001 * np.abs(history["position", -1])


METRICS = {"Position Changes": lambda h: np.sum(np.diff(h["position"]) != 0),
           "Episode Lenght": lambda h: len(h["position"])}

#: name -> keywords: gym-trading-env's default functions (the eager shortcut) with
#: fees, borrowing, shorts, leverage, fractions and windows; custom functions (np.log,
#: np.log2, an entry 3 steps back) with random starts; box actions.
CASES = {
    "defaults_fees_leverage_windows": dict(positions=[-1, 0, 0.25, 0.5, 1, 2],
                                           trading_fees=0.001, borrow_interest_rate=0.0003,
                                           windows=5),
    "custom_functions_random_starts": dict(positions=[-2, -0.5, 0, 1, 3], trading_fees=0.002,
                                           borrow_interest_rate=0.001,
                                           dynamic_feature_functions=[drift_feature,
                                                                      log_value_feature],
                                           reward_function=three_step_log_reward,
                                           history_length=3, max_episode_duration=25),
    "box": dict(positions=[-1.5, 0, 2.5], action_space="box", trading_fees=0.001,
                borrow_interest_rate=0.0004, initial_position=0),
}


def assert_same(mine, theirs, where):
    """Equal values, dtypes and shapes (NaN equal to NaN), recursively."""
    if isinstance(mine, dict):
        assert list(mine) == list(theirs), where
        for k in mine:
            assert_same(mine[k], theirs[k], (where, k))
    elif isinstance(mine, tuple):
        for i, (a, b) in enumerate(zip(mine, theirs, strict=True)):
            assert_same(a, b, (where, i))
    else:
        a, b = np.asarray(mine), np.asarray(theirs)
        assert (a.dtype, a.shape) == (b.dtype, b.shape), where
        assert np.array_equal(a, b, equal_nan=a.dtype.kind == "f"), (where, a, b)


def actions_for(env, n_steps, seed):
    p, rng = env.portfolio, np.random.default_rng(seed)
    if p.action_space == "box":
        targets = rng.uniform(p.positions[0], p.positions[-1], (n_steps, env.num_envs))
        targets[5:12] = 0.5                        # held: no trade, interest recomputed
        return np.round(targets, 3)
    return rng.integers(0, len(p.positions), (n_steps, env.num_envs))


@pytest.mark.parametrize("case", list(CASES))
def test_eager_steps_equal_the_compiled_steps_bit_for_bit(case):
    """Observations, rewards, flags, every info field, the metrics and each
    environment's history: the same bits in numpy as in the compiled (XLA) step,
    through episode ends and next-step autoresets, after a partial reset."""
    df = market_frame(40)
    envs = [PortfolioVectorEnv(df, 3, eager=eager, **CASES[case]) for eager in (True, False)]
    for env in envs:
        for name, metric in METRICS.items():
            env.add_metric(name, metric)
        env.keep_history()
    assert envs[0].eager and not envs[1].eager
    assert_same(*(env.reset(seed=7) for env in envs), "reset")
    actions = actions_for(envs[0], 2 * envs[0].portfolio.max_steps + 3, seed=len(case))
    for step, a in enumerate(actions):
        if step == 9:
            mask = np.array([False, True, False])
            assert_same(*(env.reset(options={"reset_mask": mask}) for env in envs), "mask")
        assert_same(*(env.step(a) for env in envs), (case, step))
    assert all(envs[0].get_metrics()) and envs[0].get_metrics() == envs[1].get_metrics()
    for i in range(3):
        assert_same(envs[0].historical_info(i).arrays, envs[1].historical_info(i).arrays, i)


def switch_feature(history):
    """np.where, np.maximum, a comparison and reflected operators (one env: on floats)."""
    change = 1 - history["portfolio_valuation", -1] / history["portfolio_valuation", -2]
    return np.where(history["position", -1] > 0, np.maximum(change, -0.5),
                    2 / history["data_close", -1])


#: The single-env cases: gym-trading-env's default functions, and custom ones.
SINGLE = {"defaults": CASES["defaults_fees_leverage_windows"],
          "custom": {**CASES["custom_functions_random_starts"], "windows": 2,
                     "dynamic_feature_functions": [drift_feature, log_value_feature,
                                                   switch_feature]}}


@pytest.mark.parametrize("case", list(SINGLE))
def test_single_eager_env_equals_the_compiled_one(case):
    """PortfolioEnv's eager info dicts (values and Python types), historical_info and
    metrics are the compiled env's."""
    df = market_frame(30)
    kwargs = SINGLE[case]
    envs = [PortfolioEnv(df, verbose=0, eager=eager, **kwargs) for eager in (True, False)]
    for env in envs:
        env.add_metric("Position Changes", METRICS["Position Changes"])
    first = [env.reset(seed=3) for env in envs]
    assert_same(first[0][0], first[1][0], "obs") and first[0][1] == first[1][1]
    k = len(kwargs["positions"])
    for step, a in enumerate(np.random.default_rng(0).integers(0, k, 40).tolist()):
        mine, theirs = (env.step(a) for env in envs)
        assert_same(mine[0], theirs[0], step)
        assert mine[1:] == theirs[1:], step
        assert [type(v) for v in mine[4].values()] == [type(v) for v in theirs[4].values()]
        if step == 20:
            assert_same(envs[0].historical_info.arrays, envs[1].historical_info.arrays, step)
    assert envs[0].get_metrics() == envs[1].get_metrics() and envs[0].get_metrics()


def test_one_env_values_compute_as_numpy_does():
    """LibmScalar (one environment's history values, Python floats) gives numpy's
    float64 numbers (the C library's log) for every operator and ufunc it computes
    itself, through signed zeros, infinities and NaN (a NaN's sign is the
    processor's choice), and falls back to numpy for the others."""
    import itertools

    from flowsim.envs.portfolio_history import LibmScalar, LibmValues
    numbers = [0.0, -0.0, 1.0, -2.5, np.nan, np.inf, -np.inf, 3, 0, 1e308, 1e-308,
               1.0164649682061877]                  # numpy's log: not the C library's
    operations = [lambda a, b: a + b, lambda a, b: a - b, lambda a, b: a * b,
                  lambda a, b: a / b, lambda a, b: b - a, lambda a, b: b / a,
                  lambda a, b: a > b, lambda a, b: a <= b, lambda a, b: a == b,
                  lambda a, b: a != b, np.maximum, np.minimum, np.fmax, lambda a, b: a ** b,
                  lambda a, b: np.where(a > b, a, b), lambda a, b: np.log(a) * b,
                  lambda a, b: np.abs(a) - b, lambda a, b: -a + b, lambda a, b: np.exp(a) + b,
                  lambda a, b: np.log2(a) + b]

    def result(op, a, b, wrap):
        out = op(wrap(float(a)), b)
        return np.asarray(out.x if hasattr(out, "x") else out, np.float64)

    with np.errstate(all="ignore"):
        for (i, op), a, b in itertools.product(enumerate(operations), numbers, numbers):
            mine, theirs = (result(op, a, b, wrap) for wrap in (LibmScalar, LibmValues))
            assert mine.dtype == theirs.dtype and np.array_equal(mine, theirs, equal_nan=True) \
                and (np.isnan(mine) or np.signbit(mine) == np.signbit(theirs)), (i, a, b)
    assert type((LibmScalar(1.0) - 2.0).x) is float
    assert type(np.exp(LibmScalar(1.0)).x) is float           # numpy's, back to a float
    assert type((LibmScalar(1.0) + np.ones(2)).x) is np.ndarray


def test_eager_is_chosen_by_size_and_can_be_forced():
    df = market_frame(20)
    assert PortfolioVectorEnv(df, EAGER_MAX_ENVS).eager
    assert not PortfolioVectorEnv(df, EAGER_MAX_ENVS + 1).eager
    assert not PortfolioVectorEnv(df, 2, backend="tf").eager
    assert not PortfolioVectorEnv(df, 2, dtype="float32").eager
    assert PortfolioVectorEnv(df, 64, eager=True).eager
    assert not PortfolioVectorEnv(df, 1, eager=False).eager
    with pytest.raises(ValueError, match="eager=True steps in numpy.*backend='tf'"):
        PortfolioVectorEnv(df, 2, backend="tf", eager=True)
    with pytest.raises(TypeError, match="eager must be None, True or False, got 'yes'"):
        PortfolioVectorEnv(df, 2, eager="yes")
    env = PortfolioVectorEnv(df, 2, positions=[-1, 0, 1])
    env.reset(seed=0)
    with pytest.raises(ValueError, match=r"actions must be in \[0, 2\].*got 3"):
        env.step(np.array([0, 3]))


def test_uniform_key_is_the_compiled_generators():
    import tensorflow as tf

    from flowsim.core import rng
    seeds = np.array([0, 1, 7, 2**40 + 3, 2**62 - 1], np.int64)
    words = np.array([0, 5, 2, 11, 2**31], np.int64)
    expected = rng.uniform_keys(tf.constant(np.stack([seeds, words]))).numpy()
    got = [uniform_key(int(s), int(w)) for s, w in zip(seeds, words)]
    assert got == expected.tolist()


# -- evaluate: one policy on flowsim/TradingEnv-v0 against gym-trading-env's table ----
#: gym-trading-env's episodes of the test's policy
#: (benchmarks/make_envs_evaluation_reference.py).
EVALUATED = os.path.join(os.path.dirname(__file__), "data", "gym_trading_env_evaluate.csv")


def test_evaluate_gives_gym_trading_envs_episode_returns_for_a_greedy_policy():
    """A deterministic (greedy) ActorCritic, the class of train_ppo's policy, played
    on gymnasium.make("flowsim/TradingEnv-v0") gives the table gym-trading-env's
    TradingEnv gave over the same data (stored): the same actions, so the same
    episodes (valuations bit for bit, returns to a log's last bit) and metrics."""
    import gymnasium
    import pandas as pd

    from flowsim.envs import ActorCritic, evaluate
    df = market_frame(60, start=900)
    rules = dict(positions=[-1, 0, 0.5, 2], trading_fees=0.001, borrow_interest_rate=0.0003,
                 windows=3, initial_position=0)
    policy = ActorCritic.random(3 * 4, 4, hidden=(8,), seed=2)
    policy = policy.with_weights([30 * w for w in policy.weights])     # decisive
    flowsim_env = gymnasium.make("flowsim/TradingEnv-v0", df=df, verbose=0, **rules)
    ours = evaluate(policy, flowsim_env, episodes=2, seed=5)
    theirs = pd.read_csv(EVALUATED)
    assert list(ours.columns) == list(theirs.columns) == [
        "episode", "steps", "return", "portfolio_valuation", "portfolio_return",
        "market_return", "position_changes", "Market Return", "Portfolio Return"]
    assert (ours["steps"] == len(df) - 3).all() and (ours["position_changes"] > 5).all()
    for column in ("episode", "steps", "portfolio_valuation", "portfolio_return",
                   "market_return", "position_changes", "Market Return", "Portfolio Return"):
        assert ours[column].tolist() == theirs[column].tolist(), column
    np.testing.assert_allclose(ours["return"], theirs["return"], rtol=1e-13)
    drawn = evaluate(policy, flowsim_env, episodes=1, seed=5, greedy=False)
    assert drawn["steps"].tolist() == [len(df) - 3]
    with pytest.raises(ValueError, match="episodes must be an integer >= 1, got 0"):
        evaluate(policy, flowsim_env, episodes=0)
