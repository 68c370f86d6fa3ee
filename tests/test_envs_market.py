"""flowsim/MarketEnv-v0: a trading agent inside batched pams markets."""
import json

import numpy as np
import pytest

pytestmark = pytest.mark.filterwarnings("ignore::flowsim.envs.market_env.MarketEnvWarning")

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


def test_same_bits_as_joblib_tasks(selling):
    """The blocks as joblib tasks, their state shipped as numpy arrays each call (here
    on joblib's threading backend, sharing this process's compiled calls)."""
    joblib = pytest.importorskip("joblib")
    env_flow, obs_flow, rewards_flow = selling["flow"]
    env = MarketVectorEnv(short_ci2002(), num_envs=N, interval=INTERVAL, seed=SEED,
                          block_markets=BLOCK, backend="joblib", n_jobs=2, inventory=40.0)
    with joblib.parallel_config(backend="threading"):
        obs, rewards, info = run_episode(env, seller)
    assert np.array_equal(obs, obs_flow) and np.array_equal(rewards, rewards_flow)
    assert np.array_equal(env.prices(), env_flow.prices())
    assert np.array_equal(info["statistics"], env_flow.statistics(), equal_nan=True)
    for key, value in env.account().items():
        assert np.array_equal(value, env_flow.account()[key]), key


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
    (None, {"backend": "mpi"}, "backend must be one of ('flow', 'threads', 'joblib')"),
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


def quoter(obs):
    """A market maker's pair: 5 and 5 basis points around the mid, 1 unit each, in even
    markets; 20 below and 10 above, 2 units each, in odd ones."""
    actions = np.zeros((len(obs), 3))
    actions[::2] = 0.0005, 0.0005, 1.0
    actions[1::2] = 0.002, 0.001, 2.0
    return actions


@pytest.fixture(scope="module")
def quoting(idle):
    env = MarketVectorEnv(short_ci2002(), num_envs=N, interval=INTERVAL, seed=SEED,
                          block_markets=BLOCK, quotes=True)
    obs, _ = env.reset()
    steps, done = [], False
    while not done:
        price = env._concat([np.asarray(loop.price) for loop, _ in env._blocks])
        before, t = env.account(), env.t * INTERVAL          # the pams step it starts at
        obs_next, reward, terminated, _, _ = env.step(quoter(obs))
        steps.append((t, obs, price, before, env.account(), reward))
        obs, done = obs_next, terminated.all()
    return env, steps


def test_quote_pairs_are_priced_around_the_mid_as_pams_market_maker_prices_them(quoting):
    env, steps = quoting
    tick, p0 = env.market.tick_size, env.market.market_price
    offsets = quoter(np.zeros((N, 1)))
    placed = 0
    for t, obs, price, _, after, _ in steps:
        quoted = after["bid_price"] > 0
        if t < env.market.first_execution:      # the warm-up does not execute: no quotes
            assert not quoted.any()
            continue
        assert (quoted == (after["ask_price"] > 0)).all()
        bid, ask = obs[:, 10] * p0, obs[:, 11] * p0
        base = np.where((bid > 0) & (ask > 0), (bid + ask) / 2, price)
        low, high = base * (1 - offsets[:, 0]), base * (1 + offsets[:, 1])
        eps = 1e-9 * base
        q = quoted
        # snapped as pams snaps a buy (down) and a sell (up), on the tick grid
        assert (after["bid_price"][q] <= low[q] + eps[q]).all()
        assert (after["bid_price"][q] > low[q] - tick - eps[q]).all()
        assert (after["ask_price"][q] >= high[q] - eps[q]).all()
        assert (after["ask_price"][q] < high[q] + tick + eps[q]).all()
        assert np.allclose(np.round(after["bid_price"][q] / tick) * tick, after["bid_price"][q],
                           rtol=1e-12, atol=0)
        placed += q.sum()
    assert placed > N


def test_quote_pairs_fill_at_their_own_prices_and_the_rewards_add_up(quoting):
    env, steps = quoting
    p0 = env.market.market_price
    volume = quoter(np.zeros((N, 1)))[:, 2]
    paths = env.prices()
    fills = 0
    for t, obs, _, before, after, reward in steps:
        bought, sold = after["bought"], after["sold"]
        # the pair is replaced each env step: its units left are its volume less its fills
        quoted = after["bid_price"] > 0
        assert (after["bid_left"] == np.where(quoted, volume - bought, 0)).all()
        assert (after["ask_left"] == np.where(quoted, volume - sold, 0)).all()
        assert (after["inventory"] - before["inventory"] == bought - sold).all()
        # with both sides of the book present neither quote crosses on arrival: each fill
        # is an execution at the quote's own price (it is the earlier order), which
        # becomes the market price of that pams step
        both = (obs[:, 10] > 0) & (obs[:, 11] > 0)
        cash = -bought * after["bid_price"] + sold * after["ask_price"]
        assert np.allclose((after["cash"] - before["cash"])[both], cash[both], rtol=0,
                           atol=1e-9)
        window = paths[:, t:t + INTERVAL + 1]
        for side, at in ((bought, "bid_price"), (sold, "ask_price")):
            hit = both & (side > 0)
            assert (window[hit] == after[at][hit, None]).any(axis=1).all()
            fills += hit.sum()
        assert np.allclose(reward, after["value"] - before["value"], rtol=0, atol=1e-9)
    assert fills > N
    account = env.account()
    rewards = np.sum([s[-1] for s in steps], axis=0)
    assert np.allclose(rewards, account["value"], rtol=0, atol=1e-6)
    final = paths[:, -1]
    assert np.allclose(account["value"], account["cash"] + account["inventory"] * final,
                       rtol=0, atol=1e-9)
    assert p0 > 0
