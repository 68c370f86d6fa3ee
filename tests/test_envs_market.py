"""flowsim/MarketEnv-v0: a trading agent inside batched pams markets."""
import json

import numpy as np
import pytest

gymnasium = pytest.importorskip("gymnasium")

import flowsim.envs.market_env as market_env  # noqa: E402  (registers the ids)
import flowsim.markets as fm  # noqa: E402
from flowsim.envs.market_env import MarketVectorEnv  # noqa: E402

SEED = 7
BLOCK = 64
N = 2 * BLOCK
INTERVAL = 25


def short_ci2002():
    """pams's ci2002 sample, its sessions shortened (20 warm-up steps, 80 running)."""
    with open(fm.config_path("ci2002")) as f:
        cfg = json.load(f)
    cfg["simulation"]["sessions"][0]["iterationSteps"] = 20
    cfg["simulation"]["sessions"][1]["iterationSteps"] = 80
    return cfg


def run_episode(env, policy):
    """Every step of one episode: ``(observations, rewards, last info)``."""
    obs, _ = env.reset()
    observations, rewards, done, info = [obs], [], False, {}
    while not done:
        obs, reward, terminated, truncated, info = env.step(policy(obs))
        observations.append(obs)
        rewards.append(reward)
        done = terminated.all()
        assert terminated.all() == terminated.any() and not truncated.any()
    return np.stack(observations), np.stack(rewards), info


def nothing(obs):
    return np.zeros((len(obs), 3))


def seller(obs):
    """Sell 2 units: market orders in even markets, limit orders a tick-percent below
    the last price in odd ones."""
    price = obs[:, 9] * 300.0
    actions = np.zeros((len(obs), 3))
    actions[:, 0], actions[:, 1] = -1.0, 2.0
    actions[1::2, 2] = price[1::2] * 0.999
    return actions


@pytest.fixture(scope="module")
def idle():
    env = MarketVectorEnv(short_ci2002(), num_envs=N, interval=INTERVAL, seed=SEED,
                          block_markets=BLOCK)
    _, rewards, info = run_episode(env, nothing)
    return env, rewards, info


@pytest.fixture(scope="module")
def selling():
    out = {}
    for backend in ("flow", "threads"):
        env = MarketVectorEnv(short_ci2002(), num_envs=N, interval=INTERVAL, seed=SEED,
                              block_markets=BLOCK, backend=backend, inventory=40.0)
        obs, rewards, _ = run_episode(env, seller)
        out[backend] = (env, obs, rewards)
    return out


def test_a_do_nothing_agent_leaves_flowsims_pams_markets_bit_for_bit(idle):
    env, rewards, info = idle
    ens = fm.ensemble(short_ci2002(), N, seed=SEED, paths=N, block_markets=BLOCK,
                      backend="flow")
    assert np.array_equal(env.prices(), ens.paths["market_price"])
    assert np.array_equal(info["statistics"], ens.per_market, equal_nan=True)
    assert np.isfinite(ens.per_market[:, fm.NAMES.index("trades_per_step")]).all()
    assert (rewards == 0.0).all()
    account = env.account()
    assert (account["cash"] == 0).all() and (account["inventory"] == 0).all()


def test_same_bits_in_process_and_on_threads(selling):
    _, obs_flow, rewards_flow = selling["flow"]
    _, obs_threads, rewards_threads = selling["threads"]
    assert np.array_equal(obs_flow, obs_threads)
    assert np.array_equal(rewards_flow, rewards_threads)
    assert np.array_equal(selling["flow"][0].prices(), selling["threads"][0].prices())


def test_the_agents_sells_are_accounted_and_move_the_markets(selling, idle):
    env, obs, rewards = selling["flow"]
    account = env.account()
    sold = 40.0 - account["inventory"]
    assert (sold >= 0).all() and (sold <= 2 * 4).all() and sold[::2].min() > 0
    assert np.array_equal(obs[-1][:, 12], account["inventory"])
    # each unit sold for a positive price, cash = the sum of those prices
    assert (account["cash"] > 0).all() == (sold > 0).all()
    assert ((account["cash"] > 0) == (sold > 0)).all()
    # the rewards add up to the change of mark-to-market value
    start = 40.0 * 300.0
    assert np.allclose(rewards.sum(axis=0), account["value"] - start, rtol=0, atol=1e-6)
    assert not np.array_equal(env.prices(), idle[0].prices())
    # the warm-up session does not execute: no market order sold in the first step
    assert (obs[1][::2, 12] == 40.0).all()


def test_the_episode_autoresets_on_the_next_step(selling):
    env = selling["flow"][0]
    obs, reward, terminated, truncated, _ = env.step(seller(np.ones((N, 15))))
    assert (reward == 0).all() and not terminated.any()
    assert (obs[:, 12] == 40.0).all() and env.episode == 1


def test_registered_with_gymnasium():
    env = gymnasium.make_vec("flowsim/MarketEnv-v0", num_envs=BLOCK,
                             vectorization_mode="vector_entry_point",
                             config=fm.config_path("ci2002"), interval=10)
    assert env.observation_space.shape == (BLOCK, 15)
    assert env.action_space.shape == (BLOCK, 3)


@pytest.mark.parametrize("config, kwargs, message", [
    (fm.config_path("test"), {}, "several markets per member"),
    (fm.config_path("fat_finger"), {}, "events"),
    (None, {"backend": "joblib"}, "backend must be one of ('flow', 'threads')"),
    (None, {"block_markets": 96}, "block_markets must be a multiple of 64"),
])
def test_refuses_what_it_does_not_support(config, kwargs, message):
    with pytest.raises(ValueError) as err:
        MarketVectorEnv(config or short_ci2002(), num_envs=N, **kwargs)
    assert message in str(err.value)


def test_bad_actions_are_refused_with_their_shape(idle):
    env = idle[0]
    env.reset()
    with pytest.raises(ValueError, match=r"actions must have shape \(128, 3\)"):
        env.step(np.zeros((N, 2)))


def test_warns_at_construction_where_its_orders_differ_from_pams():
    with pytest.warns(market_env.MarketEnvWarning) as caught:
        MarketVectorEnv(short_ci2002(), num_envs=BLOCK)
    message = str(caught[0].message)
    assert message == market_env.PAMS_DIFFERENCE
    assert "cancels the unfilled rest of a market order at once" in message
    assert "pams 0.3.0 leaves it resting in the book" in message
