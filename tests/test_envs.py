"""flowsim.envs: TradingVectorEnv equals gym-anytrading's StocksEnv bit for bit, step by
step; it follows gymnasium's vector conventions; rollouts of policies give the same bits
on every backend and agree with the environment stepped from Python."""
import warnings

import gym_anytrading  # noqa: F401  (registers stocks-v0)
import gymnasium
import numpy as np
import pytest
from gym_anytrading.datasets import STOCKS_GOOGL
from helpers import run_python

import flowsim
import flowsim.envs as fe
from flowsim.envs import (
    MLP,
    Coin,
    Momentum,
    PortfolioEnv,
    PortfolioVectorEnv,
    TradingVectorEnv,
    rollout,
)
from flowsim.envs.stocks import ACC_DTYPE
from flowsim.testing.cases_envs import CASES, coin_rollout

pytestmark = pytest.mark.costly

GOOGL_STEPS = len(STOCKS_GOOGL) - 30 - 1        # steps of a full stocks-v0 episode


def sequences(n_steps):
    """Named action sequences [n_steps] (>= 8 of them)."""
    out = {"always_long": np.ones(n_steps, int), "never_trade": np.zeros(n_steps, int),
           "flip_every_step": np.arange(n_steps) % 2,
           "flip_every_7": (np.arange(n_steps) // 7) % 2,
           "hold_long_then_sell": (np.arange(n_steps) < n_steps // 2).astype(int)}
    for seed in (0, 1, 2, 3):
        out[f"random_{seed}"] = np.random.default_rng(seed).integers(0, 2, n_steps)
    out["mostly_long"] = (np.random.default_rng(9).random(n_steps) < 0.9).astype(int)
    return out


def reference_env(**kwargs):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return gymnasium.make("stocks-v0", **kwargs)


def compare_step_by_step(names, actions, ours, ref, n_steps):
    """Step both vector envs with ``actions`` [n_steps, n] and assert equal bits."""
    obs_ref, info_ref = ref.reset(seed=5)
    obs, info = ours.reset(seed=5)
    assert obs.dtype == obs_ref.dtype == np.float32
    assert np.array_equal(obs, obs_ref)
    for k in ("total_reward", "total_profit"):
        assert np.array_equal(info[k], np.asarray(info_ref[k], np.float64))
    for step in range(n_steps):
        a = actions[step]
        o_ref, r_ref, te_ref, tr_ref, i_ref = ref.step(a)
        o, r, te, tr, i = ours.step(a)
        where = f"step {step}"
        assert np.array_equal(o, o_ref), where
        assert r.dtype == np.float64 and np.array_equal(r, r_ref), (where, r, r_ref)
        assert np.array_equal(te, te_ref) and np.array_equal(tr, tr_ref), where
        for k in ("total_reward", "total_profit"):
            theirs = np.array([np.float64(x) for x in i_ref[k]])
            bad = np.flatnonzero(i[k] != theirs)
            assert bad.size == 0, (where, k, [names[j] for j in bad], i[k][bad], theirs[bad])
        assert np.array_equal(i["position"], [p.value for p in i_ref["position"]]), where
        assert all(i[f"_{k}"].all() for k in ("total_reward", "total_profit", "position"))
    return tr


@pytest.mark.timeout(600)
def test_equals_gym_anytrading_bit_for_bit_on_googl():
    """Ten action sequences over a whole stocks-v0 episode and 40 steps past its end
    (next-step autoreset included): observations, rewards, truncations, total reward,
    total profit and position equal gym-anytrading's at every step."""
    n_steps = GOOGL_STEPS + 40
    named = sequences(n_steps)
    names = list(named)
    actions = np.stack([named[k] for k in names], axis=1)
    ref = gymnasium.vector.SyncVectorEnv([reference_env for _ in names])
    ours = TradingVectorEnv(STOCKS_GOOGL, len(names))
    tr = compare_step_by_step(names, actions, ours, ref, n_steps)
    assert not tr.any()
    # the episode really ended once in the run, on the same step for every sequence
    assert ours.ticks.max() < 30 + 40 + 2


@pytest.mark.timeout(600)
def test_equals_gym_anytrading_other_window_frame_and_no_xla():
    """Another window size and frame_bound, and the step without XLA: same bits."""
    window, bound = 10, (50, 300)
    n_steps = bound[1] - bound[0] + 30
    named = sequences(n_steps)
    names = list(named)
    actions = np.stack([named[k] for k in names], axis=1)

    def make():
        return reference_env(window_size=window, frame_bound=bound)

    ref = gymnasium.vector.SyncVectorEnv([make for _ in names])
    ours = TradingVectorEnv(STOCKS_GOOGL, len(names), window_size=window, frame_bound=bound,
                            jit_compile=False)
    compare_step_by_step(names, actions, ours, ref, n_steps)


@pytest.mark.timeout(600)
@pytest.mark.parametrize("unit_side,bound,jit", [("left", (24, 1600), True),
                                                  ("right", (100, 700), False)])
def test_forex_equals_gym_anytrading_bit_for_bit(unit_side, bound, jit):
    """ForexEnv on gym-anytrading's bundled FOREX_EURUSD_1H_ASK: ten action sequences over
    a whole episode and past its end, both unit sides, with and without XLA: the same
    bits as gym-anytrading's forex-v0 at every step."""
    from gym_anytrading.datasets import FOREX_EURUSD_1H_ASK

    from flowsim.envs import ForexVectorEnv
    n_steps = bound[1] - bound[0] + 20
    named = sequences(n_steps)
    names = list(named)
    actions = np.stack([named[k] for k in names], axis=1)

    def make():
        return reference_env_id("forex-v0", frame_bound=bound, unit_side=unit_side)

    ref = gymnasium.vector.SyncVectorEnv([make for _ in names])
    ours = ForexVectorEnv(FOREX_EURUSD_1H_ASK, len(names), frame_bound=bound,
                          unit_side=unit_side, jit_compile=jit)
    compare_step_by_step(names, actions, ours, ref, n_steps)
    env = gymnasium.make("flowsim/Forex-v0", prices=FOREX_EURUSD_1H_ASK)
    assert env.unwrapped._vec.unit_side == "left" and env.observation_space.shape == (24, 2)


def reference_env_id(env_id, **kwargs):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return gymnasium.make(env_id, **kwargs)


def test_totals_follow_numpy_promotion():
    """gym-anytrading's totals are numpy scalars: float32 under NEP 50 (numpy >= 2)."""
    expected = np.float32 if np.lib.NumpyVersion(np.__version__) >= "2.0.0" else np.float64
    assert ACC_DTYPE == expected


def test_single_env_passes_gymnasium_env_checker():
    from gymnasium.utils.env_checker import check_env
    env = gymnasium.make("flowsim/Stocks-v0", prices=STOCKS_GOOGL)
    check_env(env.unwrapped)
    obs, info = env.reset(seed=3)
    assert obs.shape == (30, 2) and info == {"total_reward": 0.0, "total_profit": 1.0,
                                             "position": 0}
    ref = reference_env()
    ref_obs, _ = ref.reset(seed=3)
    assert np.array_equal(obs, ref_obs)
    for a in (1, 1, 0, 1, 0):
        mine, theirs = env.step(a), ref.step(a)
        assert np.array_equal(mine[0], theirs[0]) and mine[1] == theirs[1]
        assert mine[4]["total_profit"] == theirs[4]["total_profit"]


def test_make_vec_uses_the_vector_entry_point():
    """After `import flowsim.envs`, gymnasium.make_vec builds a TradingVectorEnv."""
    env = gymnasium.make_vec("flowsim/Stocks-v0", num_envs=1024)
    assert isinstance(env.unwrapped, TradingVectorEnv) and env.num_envs == 1024
    assert env.metadata["autoreset_mode"] == gymnasium.vector.AutoresetMode.NEXT_STEP
    assert env.single_observation_space.shape == (30, 2)
    assert env.single_action_space == gymnasium.spaces.Discrete(2)
    obs, _ = env.reset(seed=0)
    assert obs.shape == (1024, 30, 2) and env.observation_space.contains(obs)
    obs, rew, term, trunc, infos = env.step(env.action_space.sample())
    assert rew.shape == (1024,) and not term.any() and not trunc.any()
    # the bundled sample series by default
    assert np.array_equal(obs[0, :, 0], fe.sample_prices()[2:32].astype(np.float32))


def test_module_id_form_imports_flowsim_envs():
    out = run_python("import gymnasium\n"
                     "env = gymnasium.make_vec('flowsim.envs:flowsim/Stocks-v0', num_envs=3)\n"
                     "print(type(env.unwrapped).__name__, env.num_envs)")
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["TradingVectorEnv", "3"]


def test_import_flowsim_envs_loads_no_tensorflow():
    out = run_python("import sys, flowsim.envs\n"
                     "print('tensorflow' in sys.modules, 'gymnasium' in sys.modules)")
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["False", "True"]


def test_next_step_autoreset_ignores_the_action_and_pays_nothing():
    env = TradingVectorEnv(STOCKS_GOOGL, 2, frame_bound=(30, 40))
    obs0, _ = env.reset(seed=1)
    for _ in range(9):
        _, _, _, trunc, _ = env.step(np.array([1, 0]))
    assert trunc.all()
    # the step after: reset, action ignored (Sell while Long would pay a reward)
    obs, rew, term, trunc, infos = env.step(np.array([0, 1]))
    assert np.array_equal(obs, obs0) and not rew.any() and not trunc.any() and not term.any()
    assert (infos["position"] == 0).all() and (infos["total_profit"] == 1).all()
    assert (infos["total_reward"] == 0).all()
    _, _, _, _, infos = env.step(np.array([1, 1]))
    assert (infos["position"] == 1).all()


def test_reset_mask_resets_only_those_environments():
    env = TradingVectorEnv(STOCKS_GOOGL, 4, episode_length=50)
    obs0, _ = env.reset(seed=7)
    for _ in range(5):
        obs5, *_ = env.step(np.ones(4, int))
    mask = np.array([True, False, True, False])
    obs, infos = env.reset(seed=7, options={"reset_mask": mask})
    assert np.array_equal(obs[mask], obs0[mask]) and np.array_equal(obs[~mask], obs5[~mask])
    assert np.array_equal(infos["_total_profit"], mask)
    assert np.array_equal(infos["position"], [0, 0, 0, 0])
    ticks = env.ticks
    assert np.array_equal(ticks[~mask] - 5, TradingVectorEnv(STOCKS_GOOGL, 4, episode_length=50)
                          .start_ticks(7)[~mask])
    with pytest.raises(ValueError, match="reset_mask"):
        env.reset(options={"reset_mask": np.array([1, 0, 1, 0])})
    with pytest.raises(ValueError, match="reset_mask"):
        env.reset(options={"reset_mask": np.zeros(4, bool)})


def test_random_start_ticks_are_fixed_by_the_seed():
    """Start ticks are a function of (environment seed, episode number): env i of a
    reset(seed=s) is env 0 of another batch reset with seed s + i; an unseeded reset
    continues with the next episodes."""
    env = TradingVectorEnv(STOCKS_GOOGL, 8, episode_length=100)
    a = env.start_ticks(3)
    assert np.array_equal(a, env.start_ticks(3))
    assert len(set(a)) > 4 and a.min() >= 30 and a.max() <= GOOGL_STEPS + 30 - 100
    assert not np.array_equal(a, env.start_ticks(4))
    one = TradingVectorEnv(STOCKS_GOOGL, 1, episode_length=100)
    assert one.start_ticks(3 + 5)[0] == a[5]
    env.reset(seed=3)
    env.reset()
    second = env.ticks
    assert not np.array_equal(second, a)
    env.reset(seed=3)
    for _ in range(100):
        env.step(np.zeros(8, int))
    env.step(np.zeros(8, int))              # the autoreset: episode 1 of every env
    assert np.array_equal(env.ticks, second)
    # unseeded first reset: OS entropy, so two batches differ
    assert not np.array_equal(TradingVectorEnv(STOCKS_GOOGL, 8, episode_length=100).reset()[0],
                              TradingVectorEnv(STOCKS_GOOGL, 8, episode_length=100).reset()[0])


def test_several_price_series_reset_like_separate_envs():
    prices = STOCKS_GOOGL["Close"].to_numpy()
    series = [prices[:800], prices[700:1600] * 0.5, prices[1000:]]
    both = TradingVectorEnv(series, 6, window_size=20, episode_length=60)
    alone = [TradingVectorEnv(s, 1, window_size=20, episode_length=60) for s in series]
    obs, _ = both.reset(seed=2)
    for i in range(6):
        o, _ = alone[i % 3].reset(seed=2 + i)
        assert np.array_equal(obs[i], o[0])
    with pytest.raises(ValueError, match=r"prices\[1\]"):
        TradingVectorEnv([prices, prices[:10]], 2, window_size=20)


def test_several_series_rewards_equal_single_series_envs():
    prices = STOCKS_GOOGL["Close"].to_numpy()
    series = [prices[:400], prices[300:900]]
    both = TradingVectorEnv(series, 2, window_size=15)
    first = TradingVectorEnv(series[0], 1, window_size=15)
    second = TradingVectorEnv(series[1], 1, window_size=15)
    both.reset(seed=0), first.reset(seed=0), second.reset(seed=1)
    rng = np.random.default_rng(4)
    for _ in range(700):
        a = rng.integers(0, 2, 2)
        o, r, _, tr, info = both.step(a)
        o1, r1, _, tr1, i1 = first.step(a[:1])
        o2, r2, _, tr2, i2 = second.step(a[1:])
        assert np.array_equal(o, np.concatenate([o1, o2]))
        assert np.array_equal(r, np.concatenate([r1, r2]))
        assert np.array_equal(tr, np.concatenate([tr1, tr2]))
        assert np.array_equal(info["total_profit"],
                              np.concatenate([i1["total_profit"], i2["total_profit"]]))


def test_tf_backend_gives_tensors_with_the_numpy_values():
    import tensorflow as tf
    a = TradingVectorEnv(STOCKS_GOOGL, 16, episode_length=40)
    b = TradingVectorEnv(STOCKS_GOOGL, 16, episode_length=40, backend="tf")
    oa, _ = a.reset(seed=1)
    ob, ib = b.reset(seed=1)
    assert isinstance(ob, tf.Tensor) and np.array_equal(oa, ob.numpy())
    rng = np.random.default_rng(1)
    for _ in range(60):
        act = rng.integers(0, 2, 16)
        ra = a.step(act)
        rb = b.step(tf.constant(act))
        assert isinstance(rb[0], tf.Tensor) and rb[1].dtype == tf.float64
        for x, y in zip(ra[:4], rb[:4]):
            assert np.array_equal(x, y.numpy())
        for k in ("total_reward", "total_profit", "position", "_position"):
            assert np.array_equal(ra[4][k], rb[4][k].numpy()), k


def test_bad_inputs_name_the_argument():
    with pytest.raises(ValueError, match="window_size"):
        TradingVectorEnv(np.arange(1.0, 20.0), 4, window_size=30)
    with pytest.raises(ValueError, match="num_envs"):
        TradingVectorEnv(STOCKS_GOOGL, 0)
    with pytest.raises(TypeError, match="num_envs"):
        TradingVectorEnv(STOCKS_GOOGL, 2.0)
    with pytest.raises(ValueError, match="Close"):
        TradingVectorEnv(STOCKS_GOOGL.drop(columns=["Close"]), 2)
    with pytest.raises(ValueError, match="frame_bound"):
        TradingVectorEnv(STOCKS_GOOGL, 2, frame_bound=(10, 100))
    with pytest.raises(ValueError, match="frame_bound"):
        TradingVectorEnv(STOCKS_GOOGL, 2, frame_bound=(30, 10**6))
    with pytest.raises(ValueError, match="episode_length"):
        TradingVectorEnv(STOCKS_GOOGL, 2, episode_length=10**6)
    with pytest.raises(ValueError, match="backend"):
        TradingVectorEnv(STOCKS_GOOGL, 2, backend="torch")
    with pytest.raises(ValueError, match="finite"):
        TradingVectorEnv(np.array([1.0, np.nan] * 40), 2)
    env = TradingVectorEnv(STOCKS_GOOGL, 3)
    with pytest.raises(RuntimeError, match="reset"):
        env.step(np.zeros(3, int))
    env.reset(seed=0)
    with pytest.raises(ValueError, match="actions"):
        env.step(np.zeros(4, int))
    with pytest.raises(TypeError, match="actions"):
        env.step(np.zeros(3))
    with pytest.raises(ValueError, match="seed"):
        env.reset(seed=-1)
    with pytest.raises(TypeError, match="policy"):
        rollout("not a policy", STOCKS_GOOGL, 64)
    with pytest.raises(ValueError, match="n_episodes"):
        rollout(Coin(), STOCKS_GOOGL, 0)
    with pytest.raises(ValueError, match="params"):
        rollout(Momentum(), STOCKS_GOOGL, 64, params=np.zeros((0, 1)))


# -- rollouts -----------------------------------------------------------------------
def play(env, policy, steps):
    """Step ``env`` (1 env) with a numpy policy for ``steps``; return the last infos and
    the number of trades."""
    obs, _ = env.reset(seed=0)
    trades, position = 0, 0
    for _ in range(steps):
        a = policy(obs)
        trades += int(a[0] != position)
        position = int(a[0])
        obs, _, _, trunc, info = env.step(a)
    assert trunc.all()
    return info, trades


def test_rollout_equals_the_environment_stepped_from_python():
    """A deterministic rule: every rollout episode is the environment's episode, so the
    mean return, profit and trade count are its final total_reward, total_profit and
    number of trades, exactly (error 0)."""
    env = TradingVectorEnv(STOCKS_GOOGL, 1)
    info, trades = play(env, lambda obs: (obs[:, -1, 1] > 0.5).astype(int), GOOGL_STEPS)
    out = rollout(Momentum(0.5), STOCKS_GOOGL, 128, seed=1)
    assert out.episode_return == (info["total_reward"][0], 0.0)
    assert out.total_profit == (info["total_profit"][0], 0.0)
    assert out.trades == (trades, 0.0)


def test_rollout_sweep_rows_equal_separate_rollouts():
    grid = np.array([[-1.0], [0.0], [0.25], [2.0]])
    swept = rollout(Momentum(), STOCKS_GOOGL, 64, params=grid, episode_length=300, seed=4,
                    block_size=64)
    assert swept.episode_return.value.shape == (4,)
    for row, (threshold,) in enumerate(grid):
        alone = rollout(Momentum(threshold), STOCKS_GOOGL, 64, episode_length=300, seed=4,
                        block_size=64)
        # row r's episodes are events r*64.. of the swept run: its start ticks are those
        # of blocks r of the same stream, so compare statistics, not bits
        assert np.isfinite(alone.episode_return.value)
        assert swept.trades.error[row] >= 0
    # full-frame episodes of a deterministic rule do not depend on the stream: equal
    full = rollout(Momentum(), STOCKS_GOOGL, 64, params=grid, seed=4, block_size=64)
    for row, (threshold,) in enumerate(grid):
        alone = rollout(Momentum(threshold), STOCKS_GOOGL, 64, seed=9, block_size=64)
        assert full.episode_return.value[row] == alone.episode_return.value
        assert full.total_profit.value[row] == alone.total_profit.value
        assert full.trades.value[row] == alone.trades.value


def test_rollout_per_episode_values_and_probabilities():
    out = rollout(Coin(0.5), STOCKS_GOOGL, 256, episode_length=120, seed=3, episodes=True)
    per = out.episodes
    assert set(per) == {"episode_return", "total_profit", "trades"}
    assert per["trades"].shape == (256,)
    assert out.trades.value == pytest.approx(per["trades"].mean(), rel=1e-12)
    # about one trade every other step for a fair coin: 120/2 steps, spread ~ sqrt
    assert abs(out.trades.value - 60) < 5 * out.trades.error + 1
    again = rollout(Coin(0.5), STOCKS_GOOGL, 256, episode_length=120, seed=3)
    assert again.episode_return == out.episode_return
    other = rollout(Coin(0.5), STOCKS_GOOGL, 256, episode_length=120, seed=4)
    assert other.episode_return != out.episode_return
    always = rollout(Coin(1.0), STOCKS_GOOGL, 64, episode_length=120, seed=3)
    assert always.trades == (1.0, 0.0)


def test_rollout_keras_model_policy():
    keras = pytest.importorskip("keras")
    model = keras.Sequential([keras.Input((30, 2)), keras.layers.Flatten(),
                              keras.layers.Dense(4, activation="tanh"),
                              keras.layers.Dense(2, activation="softmax")])
    out = rollout(model, STOCKS_GOOGL, 128, episode_length=50, seed=2)
    assert 0 < out.trades.value <= 50 and np.isfinite(out.episode_return.error)


def test_rollout_bits_do_not_depend_on_events_limit(tmp_path):
    """Every envs conformance case on Flow: chunks of one block give the bits of the
    case's chunks (values, errors, per-episode values, timeline).  The kernels compile
    once per process, shared with tests/test_conformance.py's prototypes; that suite
    runs the same cases on threads over two logical CPUs, joblib loky, MPI and Spark."""
    from helpers import conformance
    protos = conformance.prototypes()

    def flow(events_limit=None):
        def make(sim, **spec):
            if events_limit is not None:
                spec["events_limit"] = events_limit
            return flowsim.Flow(sim, quiet=True, **spec)
        return make

    for name, spec in CASES.items():
        want = conformance.run_case(name, flow(), protos, str(tmp_path), "flow")
        assert "raised" not in want, (name, want)
        one = flow(spec["block_size"])
        assert conformance.run_case(name, one, protos, str(tmp_path), "one") == want, name
        sim = protos.fresh(name)
        if sim.keep_episodes:
            kwargs = {k: spec[k] for k in ("n_events", "block_size", "seed")}
            ref, got = (flowsim.Flow(s, quiet=True, events_limit=limit, **kwargs).run(1)
                        .iterations[0]["episodes"] for s, limit in (
                            (sim, spec["events_limit"]), (protos.fresh(name),
                                                          spec["block_size"])))
            assert np.array_equal(got, ref) and np.ptp(ref) > 0, name


def test_rollout_is_a_flowsim_simulation():
    sim = coin_rollout()
    assert isinstance(sim, flowsim.Simulation) and sim.n_events == CASES["rollout_coin"][
        "n_events"] and sim.block_size == CASES["rollout_coin"]["block_size"]
    with pytest.raises(ValueError, match="block_size"):
        flowsim.Flow(sim, sim.n_events, seed=1, block_size=64, quiet=True).run(1)


def test_mlp_policy_pickles_and_gives_probabilities():
    import pickle

    import tensorflow as tf
    pol = MLP.random(30, (8,), seed=1)
    again = pickle.loads(pickle.dumps(pol))
    obs = tf.constant(TradingVectorEnv(STOCKS_GOOGL, 4, episode_length=20).reset(seed=0)[0])
    p = again(obs).numpy()
    assert p.shape == (4, 2) and np.allclose(p.sum(axis=1), 1) and np.array_equal(p, pol(obs))


# -- rollout estimates: pulls over seeds against exact expectations ---------------------
def coin_expectations(p, prices, window, length):
    """Exact means of (total reward, total profit, trades) of ``length``-step episodes of
    a policy buying with probability ``p`` at every step, whatever it observes, from a
    start tick uniform over the frame (:func:`flowsim.envs.stocks.start_ticks`).

    The position after each step is that step's action (a trade happens when the action
    differs from the position), so actions are independent Bernoulli(p) draws.  A Long
    opened at step j and closed at step k pays ``price[s+k] - price[s+j]`` and multiplies
    the profit by ``(1 - 0.005) (1 - 0.01) price[s+k] / price[s+j]``; at the last step a
    Long still open is marked to the price the same way (gym-anytrading's rules).
    """
    prices = np.asarray(prices, np.float64)
    choices = len(prices) - 1 - window - length + 1
    s = window + np.arange(choices)                            # start ticks
    at = prices[s[:, None] + np.arange(length + 1)[None, :]]   # [start, step 0..length]
    fee = (1 - 0.005) * (1 - 0.01)
    q = np.full(length + 1, 1 - p)
    q[1] = 1.0                                  # position before step 1 is Short for sure
    reward = np.zeros(choices)
    for j in range(1, length):
        for k in range(j + 1, length + 1):
            reward += q[j] * p ** (k - j) * (1 - p) * (at[:, k] - at[:, j])
    short = np.ones(choices)                    # E[profit; Short] after the step
    long = np.zeros((choices, length + 1))      # E[profit; Long opened at step j]
    for k in range(1, length + 1):
        factor = fee * at[:, k:k + 1] / at                     # [start, j]: close at k
        closing = (long * factor).sum(axis=1)
        new_long = p * (long * factor if k == length else long)
        new_long[:, k] = p * short
        short = (1 - p) * short + (1 - p) * closing
        long = new_long
    profit = short + long.sum(axis=1)
    trades = p + (length - 1) * 2 * p * (1 - p)
    return reward.mean(), profit.mean(), trades


@pytest.mark.timeout(600)
def test_rollout_errors_are_honest_over_seeds():
    """50 seeds of a Coin(0.3) rollout, 512 episodes of 32 steps from drawn start ticks:
    the pulls (value - exact) / error of the mean return, profit (a product of price
    ratios: skewed) and trade count have mean ~ 0 and rms ~ 1 (bounds as tests/test_pulls.py:
    |mean| <= 0.5, 0.7 <= rms <= 1.4, at most 2 of 50 beyond 3 sigma)."""
    window, length, p = 10, 32, 0.3
    policy = Coin(p)
    p32 = float(np.float32(p))                  # Coin gives a float32 probability
    prices = np.asarray(STOCKS_GOOGL["Close"], np.float32)[30 - window:]
    exact = coin_expectations(p32, prices, window, length)
    pulls = []
    for seed in range(1000, 1050):
        out = rollout(policy, STOCKS_GOOGL, 512, window_size=window, frame_bound=(30, len(
            STOCKS_GOOGL)), episode_length=length, seed=seed, block_size=256)
        pulls.append([(est.value - x) / est.error for est, x in
                      zip((out.episode_return, out.total_profit, out.trades), exact)])
    from test_pulls import MAX_BEYOND_3, MAX_MEAN, RMS_RANGE, pull_summary
    for name, column in zip(("episode_return", "total_profit", "trades"), np.array(pulls).T):
        s = pull_summary(column)
        assert (abs(s["mean"]) <= MAX_MEAN and RMS_RANGE[0] <= s["rms"] <= RMS_RANGE[1]
                and s["beyond3"] <= MAX_BEYOND_3), (name, s)


# -- PortfolioVectorEnv against gym-trading-env 0.3.5 ----------------------------------
@pytest.fixture(scope="module")
def gte():
    """gym-trading-env's TradingEnv class.  Importing gym_trading_env runs
    ``warnings.filterwarnings("error")`` for the whole process: the filters are put
    back as they were (and checked)."""
    import sys
    fresh = "gym_trading_env" not in sys.modules
    before = list(warnings.filters)
    import gym_trading_env.environments as module
    if fresh:
        assert list(warnings.filters) != before     # it did turn warnings into errors
    warnings.filters[:] = before
    warnings._filters_mutated()
    yield module.TradingEnv
    # other imports may add their own filters meanwhile; the catch-all error is gone
    assert not [f for f in warnings.filters if f[0] == "error" and f[2] is Warning]


def market_frame(rows=260, start=0):
    """A gym-trading-env DataFrame from STOCKS_GOOGL: OHLCV and two feature columns."""
    df = STOCKS_GOOGL.rename(columns=str.lower).iloc[start:start + rows + 1].copy()
    df["feature_return"] = df["close"].pct_change()
    df["feature_range"] = (df["high"] - df["low"]) / df["close"]
    return df.dropna()


def value_ratio_reward(history):
    """A custom reward: the step's gain relative to the episode's first valuation, with
    a penalty for holding more than one unit of exposure (np.where, np.abs)."""
    gain = (history["portfolio_valuation", -1] - history["portfolio_valuation", -2]) / \
        history["portfolio_valuation", 0]
    return gain - np.where(np.abs(history["position", -1]) > 1, 0.0001, 0.0)


def drift_feature(history):
    """A custom dynamic feature: the price relative to the episode's first price."""
    return history["data_close", -1] / history["data_close", 0] - 1


#: The metrics of gym-trading-env's README, as its users add them.
README_METRICS = {"Position Changes": lambda history: np.sum(np.diff(history["position"]) != 0),
                  "Episode Lenght": lambda history: len(history["position"])}


#: name -> (PortfolioVectorEnv / TradingEnv keywords, how actions are drawn)
PORTFOLIO_CASES = {
    "random_long_flat": dict(),
    "shorts_and_leverage": dict(positions=[-1, 0, 1, 2], borrow_interest_rate=0.0003,
                                windows=10, initial_position=0),
    "fractional_positions": dict(positions=[-0.5, 0, 0.25, 0.5, 0.75, 1],
                                 trading_fees=0.002),
    "fees_and_borrowing": dict(positions=[-2, -1, 0, 1, 3], trading_fees=0.001,
                               borrow_interest_rate=0.001, initial_position=3),
    "custom_feature": dict(positions=[-1, 0, 1], windows=4, trading_fees=0.0005,
                           dynamic_feature_functions=[drift_feature]),
    "custom_reward_random_starts": dict(positions=[-1, 0, 0.5, 1, 1.5], trading_fees=0.001,
                                        borrow_interest_rate=0.0005,
                                        reward_function=value_ratio_reward,
                                        max_episode_duration=60, windows=3),
}


def portfolio_actions(n_positions, n_steps, n_envs, seed):
    """Action sequences [n_steps, n_envs]: random every step, random held for 5 steps,
    always the last position, alternating first and last."""
    rng = np.random.default_rng(seed)
    out = [rng.integers(0, n_positions, n_steps),
           np.repeat(rng.integers(0, n_positions, n_steps // 5 + 1), 5)[:n_steps],
           np.full(n_steps, n_positions - 1), (np.arange(n_steps) % 2) * (n_positions - 1)]
    return np.stack(out[:n_envs], axis=1)


class patched_draws:
    """Make gym-trading-env's reset draw ``start`` and ``position`` (it draws from
    numpy's global generator, whatever reset's seed) after checking it asks for
    flowsim's range."""

    def __init__(self, start, position, low, high):
        self.values = start, position
        self.range = low, high

    def __enter__(self):
        self.saved = np.random.randint, np.random.choice
        start, position = self.values

        def randint(low, high):
            assert (low, high) == self.range
            return int(start)

        np.random.randint = randint
        np.random.choice = lambda positions: position
        return self

    def __exit__(self, *exc):
        np.random.randint, np.random.choice = self.saved


def assert_close(mine, theirs, what, rel=1e-12, scale=0.0):
    """``|mine - theirs| <= rel * max(|theirs|, scale)``."""
    mine, theirs = np.float64(mine), np.float64(theirs)
    assert abs(mine - theirs) <= rel * max(abs(theirs), scale, 1e-300), (what, mine, theirs)


def compare_info(info, ref_info, i, where):
    """Every field of gym-trading-env's info.  Amounts that cancel to about 0 (cash
    after a trade back to position 1: a rounding residue) are compared relative to
    the portfolio's size: cash to its valuation, assets to valuation / price, the
    real position to 1."""
    value = ref_info["portfolio_valuation"]
    scales = {"real_position": 1.0, "reward": 1e-3}
    for key, theirs in ref_info.items():
        mine = info[key][i]
        if key == "date":
            assert mine == theirs, (where, key)
        elif key in ("idx", "step", "position_index"):
            assert int(mine) == int(theirs), (where, key, mine, theirs)
        else:
            scale = scales.get(key, value / ref_info["data_close"] if "asset" in key
                               else value if key.startswith("portfolio") else 0.0)
            assert_close(mine, theirs, (where, key), scale=scale)


def compare_history(mine, theirs, where):
    """gym-trading-env's ``historical_info`` of an episode: the same columns (its
    ``date_*`` duplicates aside), the same entries, values to 1e-12 relative (the
    valuation to its own size, as :func:`compare_info`)."""
    columns = [c for c in theirs.columns if not c.startswith("date_")]
    assert set(columns) == set(mine.columns), (where, set(columns) ^ set(mine.columns))
    assert len(mine) == len(theirs), where
    assert list(mine["date"]) == list(theirs["date"]), where
    scale = float(np.max(np.abs(np.asarray(theirs["portfolio_valuation"], float))))
    for c in columns:
        if c == "date":
            continue
        got, want = np.asarray(mine[c], float), np.asarray(theirs[c], float)
        np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12 * scale,
                                   err_msg=str((where, c)))


@pytest.mark.timeout(600)
@pytest.mark.parametrize("case", list(PORTFOLIO_CASES))
def test_portfolio_env_equals_gym_trading_env(gte, case):
    """Four action sequences per configuration over a whole episode: observations,
    rewards, terminated/truncated, every info field (valuation, position, real
    position, distribution, data, date) and the metrics equal gym-trading-env's (float64
    to 1e-12 relative; observations float32, to 1 float32 ulp: XLA contracts a*b + c
    into one rounding, so a valuation may differ from gym-trading-env's in its last
    bit, and a dynamic feature computed from it in its last float32 bit)."""
    kwargs = PORTFOLIO_CASES[case]
    df = market_frame(start=300)
    n_envs = 4
    env = PortfolioVectorEnv(df, n_envs, **kwargs)
    p = env.portfolio
    n_steps = (p.length - 1 - p.first_row if p.max_episode_duration == "max"
               else p.max_episode_duration - 1)
    actions = portfolio_actions(len(p.positions), n_steps, n_envs, seed=len(case))
    for name, metric in README_METRICS.items():
        env.add_metric(name, metric)
    env.keep_history()
    obs, info = env.reset(seed=21)
    starts, initial = env.episode_starts(21)
    refs = []
    for i in range(n_envs):
        ref = gte(df, verbose=0, **kwargs)
        for name, metric in README_METRICS.items():
            ref.add_metric(name, metric)
        with patched_draws(starts[i], initial[i], p.start_low,
                           p.start_high if p.start_high > p.start_low else None):
            o, ref_info = ref.reset(seed=21 + i)
        refs.append(ref)
        np.testing.assert_allclose(obs[i], o, rtol=2 ** -23, atol=0)
        compare_info(info, ref_info, i, "reset")
    for step in range(n_steps):
        obs, reward, term, trunc, info = env.step(actions[step])
        for i, ref in enumerate(refs):
            o, r, te, tr, ref_info = ref.step(int(actions[step, i]))
            where = (case, step, i)
            assert obs[i].dtype == o.dtype == np.float32
            np.testing.assert_allclose(obs[i], o, rtol=2 ** -23, atol=1e-30, err_msg=where)
            # a log return of a ratio near 1: to 1e-12 relative or 1e-15 (a few ulps of
            # the ratio) absolute
            assert_close(reward[i], r, (where, "reward"), scale=1e-3)
            assert (term[i], trunc[i]) == (te, tr), where
            compare_info(info, ref_info, i, where)
    assert trunc.all()
    for i, ref in enumerate(refs):
        assert env.get_metrics()[i] == ref.get_metrics()
        assert set(README_METRICS) <= set(env.get_metrics()[i])
        compare_history(env.historical_info(i), ref.historical_info, (case, i))
    # the next step starts episode 1 (next-step autoreset), with the action ignored
    _, reward, term, trunc, info = env.step(actions[0])
    assert not reward.any() and not term.any() and not trunc.any()
    assert (info["step"] == 0).all() and (info["portfolio_valuation"] == 1000).all()
    assert np.array_equal(info["idx"], env.episode_starts(21, episode=1)[0])


@pytest.mark.parametrize("eager", [True, False])
def test_portfolio_env_without_xla_has_gym_trading_envs_valuations_bit_for_bit(gte, eager):
    """Stepped in numpy (eager) or compiled by XLA (each product rounded on its own: no
    a*b + c contraction), every valuation, position and distribution equals
    gym-trading-env's bit for bit; rewards (a log) to 1e-15."""
    kwargs = PORTFOLIO_CASES["fees_and_borrowing"]
    df = market_frame(rows=120)
    env = PortfolioVectorEnv(df, 2, eager=eager, **kwargs)
    assert env.eager == eager and env.jit_compile
    env.reset(seed=0)
    refs = [gte(df, verbose=0, **kwargs) for _ in range(2)]
    for ref in refs:
        ref.reset()
    actions = portfolio_actions(5, 119, 2, seed=3)
    for a in actions:
        _, reward, _, _, info = env.step(a)
        for i, ref in enumerate(refs):
            _, r, _, _, ref_info = ref.step(int(a[i]))
            for key in ("portfolio_valuation", "real_position",
                        "portfolio_distribution_asset", "portfolio_distribution_fiat",
                        "portfolio_distribution_interest_asset"):
                assert info[key][i] == ref_info[key], key
            assert_close(reward[i], r, "reward", rel=1e-15)


def test_portfolio_env_random_starts_follow_the_seed():
    """Start rows and random initial positions are a function of (seed, episode), in
    gym-trading-env's ranges; gym-trading-env's own ignore reset(seed=)."""
    df = market_frame()
    env = PortfolioVectorEnv(df, 64, positions=[-1, 0, 1], max_episode_duration=40, windows=5)
    rows, positions = env.episode_starts(3)
    again, same = env.episode_starts(3)
    assert np.array_equal(rows, again) and np.array_equal(positions, same)
    assert rows.min() >= 4 and rows.max() < len(df) - 40 - 4 and len(set(rows)) > 20
    assert set(positions) == {-1.0, 0.0, 1.0}
    assert not np.array_equal(rows, env.episode_starts(4)[0])
    _, info = env.reset(seed=3)
    assert np.array_equal(info["idx"], rows) and np.array_equal(info["position"], positions)


def test_portfolio_history_functions_run_on_numpy_and_tf():
    """A function written for gym-trading-env (numpy operators and ufuncs on
    history[column, t]) gives the same numbers on flowsim's batched history."""
    import tensorflow as tf

    from flowsim.envs.portfolio_history import History, log_return
    columns = ["portfolio_valuation", "position"]
    first = np.array([[1000.0, 1000.0], [0.0, 1.0]])
    last = [np.array([[1010.0, 990.0], [1.0, -1.0]]), np.array([[1005.0, 1000.0], [1, 1.0]])]
    numpy_h = History(columns, first, last)
    tf_h = History(columns, tf.constant(first), [tf.constant(x) for x in last])
    for f in (log_return, value_ratio_reward,
              lambda h: np.clip(h["position", -1] * 2, -1, 1) + np.sqrt(h["position", -2] ** 2)):
        expected = np.asarray(f(numpy_h).x)
        got = f(tf_h).x.numpy()
        np.testing.assert_allclose(got, expected, rtol=1e-15)
    assert np.allclose(log_return(numpy_h).x, np.log([1010 / 1005, 990 / 1000]))
    with pytest.raises(IndexError, match="history_length"):
        tf_h["position", -3]
    with pytest.raises(ValueError, match="does not exist"):
        tf_h["volume", -1]
    with pytest.raises(TypeError, match="np.where"):
        bool(tf_h["position", -1] > 0)


def test_portfolio_steps_keep_only_the_history_the_functions_read():
    """The reward and feature functions are traced once when the env is built: the
    steps keep just the columns and entries they read, and a bad read is refused
    then, with gym-trading-env's message."""
    df = market_frame(rows=50)
    env = PortfolioVectorEnv(df, 2, reward_function=value_ratio_reward,
                             dynamic_feature_functions=[drift_feature])
    first, ring, now = env.portfolio.kept
    assert first == ["portfolio_valuation", "data_close"]
    assert now == ["position", "portfolio_valuation", "data_close"]
    assert ring == [("portfolio_valuation", 2)]
    default = PortfolioVectorEnv(df, 2).portfolio.kept
    assert default == ([], [("portfolio_valuation", 2)],
                       ["position", "real_position", "portfolio_valuation"])
    with pytest.raises(ValueError, match="Feature volume does not exist"):
        PortfolioVectorEnv(df, reward_function=lambda h: h["volume", -1])
    with pytest.raises(IndexError, match="history_length=2"):
        PortfolioVectorEnv(df, dynamic_feature_functions=[lambda h: h["position", -3]])
    deep = PortfolioVectorEnv(df, history_length=3,
                              dynamic_feature_functions=[lambda h: h["position", -3]])
    assert ("position", 3) in deep.portfolio.kept[1]


def test_portfolio_env_bad_configuration_names_the_argument():
    df = market_frame(rows=50)
    cases = [
        (dict(positions=[]), "positions must not be empty"),
        (dict(positions=[0, 1, 1]), "positions must be distinct"),
        (dict(positions=[1, 0, -1], action_space="box"), "increasing order"),
        (dict(positions=[0, float("nan")]), r"positions\[1\]"),
        (dict(trading_fees=-0.01), "trading_fees must be >= 0"),
        (dict(trading_fees=0.6, positions=[-1, 0, 3]), "trading_fees=0.6"),
        (dict(borrow_interest_rate=-1), "borrow_interest_rate"),
        (dict(portfolio_initial_value=0), "portfolio_initial_value must be > 0"),
        (dict(initial_position=0.5), "initial_position"),
        (dict(windows=50), "windows=50 is longer"),
        (dict(max_episode_duration=50), "max_episode_duration=50"),
        (dict(reward_function="log"), "reward_function"),
        (dict(dynamic_feature_functions=drift_feature), "dynamic_feature_functions"),
        (dict(action_space="continuous"), "action_space"),
        (dict(num_envs=0), "num_envs"),
    ]
    for kwargs, message in cases:
        with pytest.raises((ValueError, TypeError), match=message):
            PortfolioVectorEnv(df, **kwargs)
    nan = df.copy()
    nan.iloc[7, nan.columns.get_loc("feature_range")] = np.nan
    with pytest.raises(ValueError, match=r"df\['feature_range'\] has 1 NaN.*row 7.*dropna"):
        PortfolioVectorEnv(nan)
    with pytest.raises(ValueError, match="'close' column"):
        PortfolioVectorEnv(df.drop(columns=["close"]))


def test_portfolio_env_refuses_actions_outside_the_action_space():
    import tensorflow as tf
    df = market_frame(rows=50)
    env = PortfolioVectorEnv(df, 4, positions=[-1, 0, 1])
    env.reset(seed=0)
    for bad, value in ((np.array([5, 0, 1, 0]), "5"), (np.array([0, -1, 1, 0]), "-1"),
                       (tf.constant([0, 3, 0, 0]), "3")):
        with pytest.raises(ValueError, match=rf"actions must be in \[0, 2\].*got {value}"):
            env.step(bad)
    with pytest.raises(TypeError, match="actions"):
        env.step(np.array([0.5, 0, 0, 0]))
    box = PortfolioVectorEnv(df, 2, positions=[-1, 0, 2], action_space="box")
    box.reset(seed=0)
    with pytest.raises(ValueError, match=r"\[-1.0, 2.0\].*got 2.5"):
        box.step(np.array([0.0, 2.5]))
    with pytest.raises(ValueError, match="target positions"):
        box.step(np.array([0.0, np.nan]))


def test_stocks_env_refuses_actions_outside_the_action_space():
    """step(np.array([5, 0, 1, 0])) and -1 are refused, not accepted silently."""
    import tensorflow as tf
    env = TradingVectorEnv(STOCKS_GOOGL, 4)
    env.reset(seed=0)
    for bad, value in ((np.array([5, 0, 1, 0]), "5"), (np.array([0, -1, 1, 0]), "-1"),
                       (tf.constant([0, 0, 2, 0]), "2")):
        with pytest.raises(ValueError, match=rf"actions must be in \[0, 1\] \(0 Sell, 1 Buy\), "
                                             rf"got {value}"):
            env.step(bad)
    single = gymnasium.make("flowsim/Stocks-v0", prices=STOCKS_GOOGL).unwrapped
    single.reset(seed=0)
    with pytest.raises(ValueError, match="got -1"):
        single.step(-1)


def test_rollout_policy_of_another_window_size_names_window_size():
    """A policy built for another window gets this message, not a TF shape error."""
    with pytest.raises(ValueError, match=r"window_size=10.*MLP\(60-16-2\).*window_size=30"):
        rollout(MLP.random(30, (16,), seed=0), STOCKS_GOOGL, 64, window_size=10)
    keras = pytest.importorskip("keras")
    model = keras.Sequential([keras.Input((30, 2)), keras.layers.Flatten(),
                              keras.layers.Dense(2, activation="softmax")])
    with pytest.raises(ValueError, match=r"window_size=20.*\[batch, 20, 2\]"):
        rollout(model, STOCKS_GOOGL, 64, window_size=20)


def test_portfolio_box_actions_follow_gym_trading_env_rules(gte):
    """action_space="box": a continuous target position, with the rules of a
    gym-trading-env whose positions list holds exactly those targets."""
    df = market_frame(rows=150, start=900)
    rng = np.random.default_rng(8)
    targets = np.round(rng.uniform(-1.5, 2.5, (149, 2)), 3)
    targets[40:60] = 0.75                           # held: no trade, interest recomputed
    levels = sorted(set(targets.ravel()) | {-1.5, 2.5})
    kwargs = dict(trading_fees=0.001, borrow_interest_rate=0.0004, initial_position=0)
    env = PortfolioVectorEnv(df, 2, positions=[-1.5, 0, 2.5], action_space="box", **kwargs)
    assert env.single_action_space == gymnasium.spaces.Box(-1.5, 2.5, (), np.float64)
    _, info = env.reset(seed=0)
    refs = [gte(df, positions=levels, verbose=0, **kwargs) for _ in range(2)]
    for ref in refs:
        ref.reset()
    for a in targets:
        obs, reward, term, trunc, info = env.step(a)
        for i, ref in enumerate(refs):
            o, r, te, tr, ref_info = ref.step(levels.index(a[i]))
            np.testing.assert_allclose(obs[i], o, rtol=2 ** -23)
            assert_close(reward[i], r, "reward", scale=1e-3)
            ref_info.pop("position_index")
            compare_info(info, ref_info, i, "box")
    assert trunc.all() and (info["position_index"] == -1).all()


def test_portfolio_env_under_gymnasium_vector_wrappers_and_make_vec():
    from gymnasium.wrappers.vector import (
        NormalizeObservation,
        RecordEpisodeStatistics,
        TransformReward,
    )
    df = market_frame(rows=60)
    env = gymnasium.make_vec("flowsim/TradingEnv-v0", num_envs=8, df=df,
                             positions=[-1, 0, 1], max_episode_duration=20)
    assert isinstance(env.unwrapped, PortfolioVectorEnv) and env.num_envs == 8
    env = TransformReward(NormalizeObservation(RecordEpisodeStatistics(env)),
                          lambda r: 100 * r)
    obs, _ = env.reset(seed=1)
    assert obs.shape == (8, 4) and np.isfinite(obs).all()
    returns = np.zeros(8)
    for _ in range(19):
        obs, reward, term, trunc, infos = env.step(env.action_space.sample())
        returns += reward
    assert trunc.all() and "episode" in infos and infos["_episode"].all()
    # the statistics are recorded inside, before the reward is scaled
    np.testing.assert_allclose(infos["episode"]["r"], returns / 100, rtol=1e-6)
    assert (infos["episode"]["l"] == 19).all()


def test_portfolio_single_env_passes_env_checker_and_renders(tmp_path):
    from gymnasium.utils.env_checker import check_env
    df = market_frame(rows=40)
    env = gymnasium.make("flowsim/TradingEnv-v0", df=df, positions=[-1, 0, 1, 2],
                         verbose=0, render_mode="rgb_array", trading_fees=0.001)
    check_env(env.unwrapped)
    obs, info = env.reset(seed=0)
    assert info["portfolio_valuation"] == 1000 and isinstance(info["idx"], int)
    for a in (3, 3, 0, 1, 2, 2):
        obs, reward, term, trunc, info = env.step(a)
    image = env.render()
    assert image.dtype == np.uint8 and image.ndim == 3 and image.shape[2] == 3
    assert image.std() > 0                      # something was drawn
    fig = env.unwrapped.render_all(tmp_path / "episode.png")
    assert (tmp_path / "episode.png").stat().st_size > 1000 and len(fig.axes) == 2
    while not trunc:
        *_, trunc, _ = env.step(1)
    assert set(env.unwrapped.get_metrics()) == {"Market Return", "Portfolio Return"}


def test_portfolio_rollout_equals_the_environment_stepped_from_python():
    """A deterministic rule on whole-data episodes from a fixed initial position: every
    rollout episode is the environment's episode, so the means are its sum of rewards,
    final valuation / 1000 and trade count (error 0)."""
    import tensorflow as tf

    from flowsim.envs import portfolio_rollout
    df = market_frame(rows=120, start=50)
    kwargs = dict(positions=[-1, 0, 2], trading_fees=0.001, borrow_interest_rate=0.0003,
                  windows=4, initial_position=0, reward_function=value_ratio_reward)

    def policy(obs):                # short after a fall, leveraged long after a rise
        r = obs[:, -1, 0]
        return tf.where(r < -0.005, 0, tf.where(r > 0.005, 2, 1))

    env = PortfolioVectorEnv(df, 1, **kwargs)
    obs, info = env.reset(seed=0)
    total, trades, position = 0.0, 0, info["position"][0]
    trunc = np.zeros(1, bool)
    while not trunc[0]:
        a = policy(tf.constant(obs)).numpy()
        trades += int(env.portfolio.positions[a[0]] != position)
        obs, reward, _, trunc, info = env.step(a)
        total += reward[0]
        position = info["position"][0]
    out = portfolio_rollout(policy, df, 128, seed=3, episodes=True, **kwargs)
    assert out.episode_return.value == pytest.approx(total, rel=1e-12, abs=1e-15)
    assert out.total_profit.value == pytest.approx(info["portfolio_valuation"][0] / 1000,
                                                   rel=1e-12)
    assert out.trades == (trades, 0.0) and trades > 10
    assert np.ptp(out.episodes["episode_return"]) == 0     # every episode the same


@pytest.mark.parametrize("windows", [None, 3])
def test_portfolio_observe_next_and_fenced_step_equal_observe_and_step(windows):
    """The window a rollout carries (PortfolioRules.observe_next) is PortfolioRules.observe of
    the stepped state, and a step behind the fence (XLA barriers) keeps the state,
    rewards and observations of the unfenced step (to an FMA's rounding under XLA;
    bit for bit here, outside XLA)."""
    import tensorflow as tf

    from flowsim.envs.portfolio import PortfolioRules
    p = PortfolioRules(market_frame(rows=60, start=10), positions=[-1, 0, 0.5, 2],
                  trading_fees=0.001, borrow_interest_rate=0.0003, windows=windows)
    c = dict(p.constants(), rules=tf.tile(tf.constant(p.rule_rows())[:, None], [1, 8]))
    state, _ = p.fresh(c, tf.constant([0, 3, 5, 9, 20, 30, 40, 50], tf.int32),
                       tf.constant([0, 1, 2, 3, 0, 1, 2, 3], tf.int32))
    obs, fenced_obs = p.observe(c, state), p.observe(c, state)
    fenced = dict(state)
    del fenced["dyn"]
    rng = np.random.default_rng(0)
    for _ in range(6):
        target = tf.constant(p.positions[rng.integers(0, 4, 8)])
        index = -tf.ones([8], tf.int32)
        state, reward, *_, now = p.step(c, state, target, index)
        fenced, fenced_reward, *_, fenced_now = p.step(c, fenced, target, index,
                                                       tf.constant(True))
        fenced_obs = p.observe_next(c, fenced_obs, fenced["idx"], fenced_now["dyn"])
        obs = p.observe(c, state)
        np.testing.assert_array_equal(fenced_obs.numpy(), obs.numpy())
        np.testing.assert_array_equal(fenced_reward.numpy(), reward.numpy())
        np.testing.assert_array_equal(fenced["wallet"].numpy(), state["wallet"].numpy())
    assert obs.shape == (8, *p.observation_shape) and "dyn" not in fenced


# -- several assets: against a numpy implementation of the documented equations -------
def multi_asset_reference(prices, weights, start, fee, rate, v0):
    """flowsim.envs.assets's equations in numpy, one environment: valuations, rewards,
    fees and interest per step for target weights ``weights`` [steps, k]."""
    units, cash = np.zeros(prices.shape[1]), v0
    out = []
    for step, w in enumerate(weights):
        t = start + step
        value = cash + units @ prices[t]
        traded = w * value - units * prices[t]
        fees = fee * np.abs(traded).sum()
        units = w * value / prices[t]
        cash = (1 - w.sum()) * value - fees
        interest = rate * (np.maximum(0, -units * prices[t + 1]).sum() + max(0.0, -cash))
        cash -= interest
        new = cash + units @ prices[t + 1]
        out.append((new, np.log(new / value), fees, interest, units * prices[t + 1] / new))
    return out


def test_multi_asset_env_follows_its_equations():
    from flowsim.envs import MultiAssetVectorEnv
    rng = np.random.default_rng(2)
    prices = 100 * np.exp(np.cumsum(rng.normal(0, 0.02, (120, 3)), axis=0))
    env = MultiAssetVectorEnv(prices, 5, window_size=6, episode_length=40, trading_fees=0.002,
                              borrow_interest_rate=0.001, min_weight=-1, max_weight=1.5,
                              max_leverage=2.0)
    obs, info = env.reset(seed=4)
    start = info["idx"].copy()
    assert obs.shape == (5, 7, 3) and not obs[:, -1].any()       # all cash at the start
    w = rng.uniform(-1, 1.5, (40, 5, 3))
    w /= np.maximum(1, np.abs(w).sum(axis=2, keepdims=True) / 2.0)   # |w| <= 2
    w[10:15] = w[10]                                  # held: only price drift trades
    steps = []
    for a in w:
        steps.append(env.step(a))
    for i in range(5):
        ref = multi_asset_reference(prices, w[:, i], start[i], 0.002, 0.001, 1000.0)
        for (obs, reward, _, _, info), (value, r, fees, interest, held) in zip(steps, ref):
            np.testing.assert_allclose(info["portfolio_valuation"][i], value, rtol=1e-12)
            np.testing.assert_allclose(reward[i], r, rtol=1e-10, atol=1e-15)
            np.testing.assert_allclose([info["fees"][i], info["interest"][i]],
                                       [fees, interest], rtol=1e-12, atol=1e-12)
            np.testing.assert_allclose(info["weights"][i], held, rtol=1e-12, atol=1e-15)
            np.testing.assert_allclose(obs[i, -1], held, rtol=1e-6, atol=1e-7)
        assert steps[-1][3][i] and not any(s[3][i] for s in steps[:-1])
    np.testing.assert_allclose(steps[0][0][0, :-1],
                               (prices[start[0] - 5:start[0] + 2] /
                                prices[start[0] - 6:start[0] + 1] - 1)[1:], rtol=1e-6)
    with pytest.raises(ValueError, match="max_leverage=2.0"):
        env.step(np.full((5, 3), 1.0))
    with pytest.raises(ValueError, match="min_weight"):
        env.step(np.full((5, 3), -1.5))
    with pytest.raises(ValueError, match="window_size=200"):
        MultiAssetVectorEnv(prices, window_size=200)


def test_quick_call_follows_tf_config_changed_after_it_was_made(monkeypatch):
    """The env's direct executor call rebuilds its attributes when TensorFlow makes new
    function call options (every ``tf.config`` change), in the calling thread."""
    import tensorflow as tf
    from tensorflow.python.eager import context, execute

    from flowsim.envs.vector import quick_call
    passed, real = [], execute.quick_execute

    def recording(name, n_out, inputs, attrs, ctx):
        passed.append(dict(zip(attrs[::2], attrs[1::2])))
        return real(name, n_out, inputs, attrs, ctx)
    monkeypatch.setattr(execute, "quick_execute", recording)
    concrete = tf.function(lambda x: x * 2.0).get_concrete_function(
        tf.TensorSpec([3], tf.float64))
    run = quick_call(concrete._inference_function, tuple(concrete.captured_inputs))
    x = tf.constant([1.0, 2.0, 3.0], tf.float64)
    was = tf.config.get_soft_device_placement()
    try:
        for soft in (was, not was):
            tf.config.set_soft_device_placement(soft)
            np.testing.assert_array_equal(run(x)[0].numpy(), [2.0, 4.0, 6.0])
            expected = context.context().function_call_options.as_attrs()
            assert passed[-1] == expected
    finally:
        tf.config.set_soft_device_placement(was)
    assert passed[0]["config_proto"] != passed[1]["config_proto"]


def test_a_metric_that_cannot_work_is_refused_when_added_naming_it():
    """gym-trading-env would fail only when the first episode ends; flowsim calls the
    metric on a short history at once."""
    env = PortfolioVectorEnv(market_frame(rows=40), 2)

    def wealth_ratio(history):
        return history["portfolio_value", -1] / history["portfolio_value", 0]

    with pytest.raises(TypeError, match=r"add_metric\('Wealth', wealth_ratio\): calling it "
                                        r"on an episode's history .* raised ValueError: "
                                        r"Feature portfolio_value does not exist"):
        env.add_metric("Wealth", wealth_ratio)
    with pytest.raises(TypeError, match=r"add_metric\('x', \.\.\.\): the metric must be a "
                                        r"function of the history, got 3"):
        env.add_metric("x", 3)
    assert env.log_metrics == []


def test_metrics_see_each_environments_whole_episode():
    """Episodes of different lengths in one batch (random starts): each environment's
    metrics see its own episode, from its reset to its last entry."""
    env = PortfolioVectorEnv(market_frame(rows=80), 3, max_episode_duration=20)
    env.add_metric("length", lambda history: len(history))
    env.add_metric("first step", lambda history: history["step", 0])
    env.add_metric("steps", lambda history: history[["step"]][:, 0].tolist())
    env.reset(seed=3)
    for _ in range(19):
        env.step(np.zeros(3, dtype=np.int64))
    for metrics in env.get_metrics():
        assert metrics["length"] == 20 and metrics["first step"] == 0
        assert metrics["steps"] == list(range(20))


def test_single_env_saves_for_gym_trading_envs_renderer(gte, tmp_path):
    """``save_for_render`` writes what gym-trading-env writes: the DataFrame joined with
    the episode's history on the date (the same columns and rows)."""
    import pandas as pd
    df = market_frame(rows=40)
    mine = PortfolioEnv(df, verbose=0, positions=[-1, 0, 1])
    ref = gte(df, verbose=0, positions=[-1, 0, 1])
    _, info = mine.reset(seed=3)
    with patched_draws(info["idx"], info["position"], mine._vec.portfolio.start_low, None):
        ref.reset(seed=3)
    for step in range(12):
        mine.step(step % 3)
        ref.step(step % 3)
    compare_history(mine.historical_info, ref.historical_info, "single")
    path = mine.save_for_render(tmp_path / "mine")
    ref.save_for_render(str(tmp_path / "theirs"))
    (theirs_path,) = (tmp_path / "theirs").iterdir()
    got, want = pd.read_pickle(path), pd.read_pickle(theirs_path)
    assert len(got) == len(want) == 13 and list(got.index) == list(want.index)
    assert set(want.columns) <= set(got.columns) | {c for c in want.columns
                                                    if c.startswith("dynamic_feature")}
    np.testing.assert_allclose(got["portfolio_valuation"].astype(float),
                               want["portfolio_valuation"].astype(float), rtol=1e-12)
    with pytest.raises(ValueError, match="save_for_render needs the DataFrame columns open, "
                                         "high, low and close"):
        PortfolioEnv(df[["close", "feature_return"]], verbose=0).save_for_render(tmp_path)


@pytest.mark.parametrize("eager", [True, False])
def test_partial_reset_appends_only_to_the_reset_environments_history(eager):
    """After ``reset(options={"reset_mask": ...})`` the reset environment's history holds
    its reset entry alone; the others' histories run on, without an extra row."""
    env = PortfolioVectorEnv(market_frame(rows=50), 3, eager=eager, positions=[0, 1])
    env.keep_history()
    env.reset(seed=5)
    for _ in range(4):
        env.step(np.array([1, 0, 1]))
    before = [env.historical_info(i) for i in range(3)]
    env.reset(options={"reset_mask": np.array([False, True, False])})
    after = [env.historical_info(i) for i in range(3)]
    assert [len(h) for h in before] == [5, 5, 5] and [len(h) for h in after] == [5, 1, 5]
    for i in (0, 2):
        assert np.array_equal(after[i]["portfolio_valuation"], before[i]["portfolio_valuation"])
    env.step(np.array([0, 1, 0]))
    assert [len(env.historical_info(i)) for i in range(3)] == [6, 2, 6]
