"""A policy's episodes on any gymnasium trading environment, one row per episode.

Usage::

    import gymnasium
    import flowsim.envs
    from flowsim.envs import evaluate, train_ppo

    trained = train_ppo(flowsim.envs.PortfolioVectorEnv(train_df, 256, **rules), 100_000,
                        seed=1)
    env = gymnasium.make("flowsim/TradingEnv-v0", df=test_df, verbose=0, **rules)
    evaluate(trained.policy, env, episodes=5, seed=0)     # a pandas DataFrame

    from gym_trading_env.environments import TradingEnv   # the same policy there
    evaluate(trained.policy, TradingEnv(test_df, verbose=0, **rules), episodes=5, seed=0)

:func:`evaluate` steps one gymnasium ``Env`` (flowsim's ``flowsim/TradingEnv-v0``,
gym-trading-env's ``TradingEnv``, or any env whose ``info`` has gym-trading-env's
``portfolio_valuation``) with a policy that maps a batch of observations to
probabilities of each action (:attr:`flowsim.envs.PPOResult.policy`, an
:class:`~flowsim.envs.MLP`, a Keras model, a function), greedily or by drawing.
"""
import numpy as np

#: Columns of :func:`evaluate`'s table, before the environment's own metrics.
COLUMNS = ("episode", "steps", "return", "portfolio_valuation", "portfolio_return",
           "market_return", "position_changes")


def choose_action(policy, obs, greedy, rng):
    """The action for one observation: the most probable under ``policy`` (the first
    of ties), or one drawn from its probabilities with ``rng``."""
    probs = np.asarray(policy(np.asarray(obs, np.float32)[None]), np.float64)[0]
    if greedy:
        return int(np.argmax(probs))
    return int(min(np.searchsorted(np.cumsum(probs), rng.random() * probs.sum(),
                                   side="right"), len(probs) - 1))


def play_episode(policy, env, seed, greedy, rng, max_steps):
    """One episode from ``env.reset(seed=seed)``: a row of :data:`COLUMNS` (less
    ``episode``) and the environment's metrics."""
    obs, info = env.reset(seed=seed)
    first, total, steps, changes = info, 0.0, 0, 0
    position = info.get("position")
    done = False
    while not done and steps < max_steps:
        obs, reward, terminated, truncated, info = env.step(choose_action(policy, obs,
                                                                          greedy, rng))
        total += float(reward)
        steps += 1
        changes += int(info.get("position") != position)
        position = info.get("position")
        done = terminated or truncated
    row = {"steps": steps, "return": total,
           "portfolio_valuation": float(info["portfolio_valuation"]),
           "portfolio_return": info["portfolio_valuation"] / first["portfolio_valuation"] - 1,
           "market_return": (info["data_close"] / first["data_close"] - 1
                             if "data_close" in info else np.nan),
           "position_changes": changes}
    metrics = getattr(env.unwrapped, "get_metrics", None)
    return row, dict(metrics() or {}) if done and metrics is not None else {}


def evaluate(policy, env, episodes=1, seed=0, greedy=True, max_steps=None):
    """Play ``episodes`` episodes of ``policy`` on the gymnasium ``env``; a pandas
    DataFrame, one row per episode.

    Parameters
    ----------
    policy : callable
        ``policy(obs)`` with ``obs`` float32 ``[1, *observation_shape]`` returns the
        probabilities of each action ``[1, n_actions]`` (a tensor or array):
        :attr:`flowsim.envs.PPOResult.policy`, :class:`flowsim.envs.MLP`, a Keras
        model.
    env : gymnasium.Env
        One environment with a ``Discrete`` action space whose ``info`` holds
        ``portfolio_valuation`` (and ``data_close``, ``position``), as
        ``gymnasium.make("flowsim/TradingEnv-v0", ...)`` and gym-trading-env's
        ``TradingEnv``.  Not closed.
    episodes : int
        Episodes to play (default 1); episode ``e`` starts from
        ``env.reset(seed=seed + e)`` (gym-trading-env ignores the seed for its start
        row and random initial position: fix ``initial_position`` and use whole-data
        episodes to compare it with flowsim).
    seed : int
        The first episode's reset seed, and the seed of the action draws when not
        ``greedy``.
    greedy : bool
        True (default): the most probable action, a deterministic policy; False:
        actions drawn from the probabilities.
    max_steps : int or None
        Stop an episode after this many steps (None: when it terminates or is
        truncated).

    Returns
    -------
    pandas.DataFrame
        Columns ``episode``, ``steps``, ``return`` (the sum of the rewards),
        ``portfolio_valuation`` (the last), ``portfolio_return`` (last / first
        valuation - 1), ``market_return`` (last / first close - 1),
        ``position_changes`` (steps whose position differs from the step
        before's), then the environment's ``get_metrics()`` of each finished
        episode (gym-trading-env's ``Market Return`` and ``Portfolio Return``
        strings and added metrics).
    """
    import pandas as pd
    for name, value in (("episodes", episodes), ("seed", seed)):
        if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < (
                1 if name == "episodes" else 0):
            raise ValueError(f"{name} must be an integer >= {1 if name == 'episodes' else 0}"
                             f", got {value!r}")
    if not hasattr(env, "reset") or not hasattr(env.action_space, "n"):
        raise TypeError(f"env must be one gymnasium Env with a Discrete action space, got "
                        f"{type(env).__name__} with action_space "
                        f"{getattr(env, 'action_space', None)!r}")
    if not callable(policy):
        raise TypeError(f"policy must be callable (observations -> probabilities), got "
                        f"{policy!r}")
    rng = np.random.default_rng(seed)
    rows = []
    for e in range(int(episodes)):
        row, metrics = play_episode(policy, env, int(seed) + e, greedy, rng,
                                    np.inf if max_steps is None else int(max_steps))
        rows.append({"episode": e, **row, **metrics})
    return pd.DataFrame(rows)
