"""Episodes of a TF policy on gym-trading-env's rules inside a compiled flowsim kernel.

:class:`PortfolioRollout` is :class:`flowsim.envs.Rollout` for
:class:`flowsim.envs.PortfolioVectorEnv`'s rules (:mod:`flowsim.envs.portfolio`):
one event is one episode, a block of episodes runs as one ``tf.while_loop``
(observe, call the policy, draw the action, step), and the block returns
per-row sums, so the result has the same bits on every backend, device count
and ``events_limit``.
"""
from ..core import rng
from ..core.kernel import fusion_barrier
from ..core.lazy_tf import tf
from .portfolio import PortfolioRules
from .rollout import Rollout, run_rollout, share_kernel


def choose(out, u, n_positions, box=None, fence=None):
    """Actions from a policy's output ``out`` and uniforms ``u`` ``[n]``.

    Integer or bool ``[n]``: position indices (clipped to ``[0, n_positions)``).
    Float ``[n, n_positions]``: probabilities of each position (drawn with ``u``).
    Float ``[n]`` with two positions: the probability of the second.  With
    ``box = (low, high)``: float ``[n]`` target positions, clipped to the range.
    ``fence`` (default None): a scalar bool tensor that is true and that XLA cannot
    fold (:func:`flowsim.core.kernel.fusion_barrier`); the probabilities are then
    computed once, before the draw.
    """
    t = tf()
    out = t.convert_to_tensor(out)
    if box is not None:
        return t.clip_by_value(t.reshape(t.cast(out, u.dtype), [-1]), box[0], box[1])
    if out.dtype.is_integer or out.dtype == t.bool:
        return t.clip_by_value(t.reshape(t.cast(out, t.int32), [-1]), 0, n_positions - 1)
    if out.shape.rank == 2 and out.shape[-1] == n_positions:
        # the cumulative sums column by column (the order of tf.cumsum's adds, so the
        # same bits): XLA emits tf.cumsum as a scalar reduce-window loop; the
        # probabilities behind a fusion barrier, so the softmax's divisions run once
        # in a vectorised kernel, not in the scalar loop of the draw.  The Python loop
        # grows the graph with len(positions), but it also fixes the order of the adds:
        # XLA's tf.cumsum gives the same bits at some numbers of positions and other
        # bits at others
        p, = fusion_barrier(fence, t.cast(out, u.dtype))
        cum = [p[:, 0]]
        for j in range(1, n_positions):
            cum.append(cum[-1] + p[:, j])
        level = u * cum[-1]
        below = [t.cast(c <= level, t.int32) for c in cum[:-1]]
        return t.add_n(below) if below else t.zeros_like(t.cast(u, t.int32))
    if n_positions != 2:
        raise ValueError(f"policy: with {n_positions} positions a float output must be "
                         f"probabilities [batch, {n_positions}], got shape "
                         f"{out.shape.as_list()}")
    return t.cast(u < t.cast(t.reshape(out, [-1]), u.dtype), t.int32)


class PortfolioRollout(Rollout):
    """Episodes of ``policy`` on :class:`flowsim.envs.PortfolioVectorEnv`'s rules;
    one event = one episode.

    Parameters
    ----------
    policy : callable
        TF-traceable ``policy(obs)`` (``policy(obs, params)`` with ``params``),
        ``obs`` float32 ``[batch, windows, n_features]`` (``[batch, n_features]``
        without windows).  It returns position indices (int), probabilities of
        each position ``[batch, len(positions)]`` (a softmax), or with
        ``action_space="box"`` target positions (float ``[batch]``); see
        :func:`choose`.
    df : pandas.DataFrame
        As :class:`~flowsim.envs.PortfolioVectorEnv`.
    n_episodes, params, episodes, block_size
        As :class:`~flowsim.envs.Rollout`, except that ``block_size`` defaults to
        even blocks of at most :attr:`max_block` (1,024) episodes.
    **env_kwargs
        :class:`~flowsim.envs.PortfolioVectorEnv`'s rule keywords (``positions``,
        ``trading_fees``, ``borrow_interest_rate``, ``windows``,
        ``max_episode_duration``, ``reward_function``, ...).  Start rows and
        random initial positions are drawn from the block's counter-based stream.

    Per episode: ``episode_return`` (the sum of the rewards), ``total_profit``
    (the final valuation over ``portfolio_initial_value``) and ``trades`` (steps
    whose target differed from the position held).
    """

    #: Most episodes per block by default: a portfolio episode's state is larger than
    #: a StocksEnv one's, and blocks of 1,024 ran faster per episode than 4,096
    #: (they stay in cache).
    max_block = 1024

    def __init__(self, policy, df, n_episodes=1024, params=None, episodes=False,
                 block_size=None, **env_kwargs):
        self.set_episodes(policy, n_episodes, params, episodes, block_size)
        self.portfolio = PortfolioRules(df, **env_kwargs)
        self.tick_features = False

    def state(self):
        p = self.portfolio
        c = p.constants()
        out = {k: v.numpy() for k, v in c.items()}
        out["rules"] = p.rule_rows()
        if self.params is not None:
            out["params"] = self.params
        return out

    def episodes_of(self, key, first_event, size, dtype, state):
        """``[size, 3]`` float64: return, valuation ratio and trades of episodes, the
        rules computed in ``dtype``."""
        t = tf()
        p = self.portfolio
        c = p.in_dtype(dict(state, rules=t.tile(state["rules"][:, None], [1, size])), dtype)
        start, index = p.starts(rng.uniform(key, [size], t.float64),
                                rng.uniform(key, [size], t.float64, stream=2))
        if self.params is not None:
            event = first_event + t.range(size, dtype=t.int64)
            params = t.gather(state["params"], t.minimum(event // self.n_episodes,
                                                         self.n_rows - 1))
        box = (p.positions[0], p.positions[-1]) if p.action_space == "box" else None

        def body(i, s, obs, value, total, trades, active):
            out = self.policy(obs) if self.params is None else self.policy(obs, params)
            u = rng.uniform_step(key, i, [size], dtype, stream=1)
            action = choose(out, u, len(p.positions), box, i >= 0)
            if box is None:
                target, index = t.gather(c["positions"], action), action
            else:
                target, index = action, -t.ones_like(s["idx"])
            new, reward, terminated, truncated, now = p.step(c, s, target, index, i >= 0)
            trades = trades + t.cast(active & t.not_equal(target, s["position"]), dtype)
            total = total + t.where(active, reward, t.zeros_like(reward))
            value = t.where(active, now["value"], value)
            s = {k: t.where(active, new[k], s[k]) for k in s}
            # the next observations from these (an ended episode's no longer matter)
            obs = p.observe_next(c, obs, s["idx"], now["dyn"])
            return i + 1, s, obs, value, total, trades, active & ~(terminated | truncated)

        s, now = p.fresh(c, start, index)
        obs = p.observe(c, s)
        del s["dyn"]            # carried as obs (PortfolioRules.observe_next)
        zero = t.zeros([size], dtype)
        carry = (t.constant(0, t.int32), s, obs, now["value"], zero, zero,
                 t.ones([size], t.bool))
        _, s, _, value, total, trades, _ = t.while_loop(lambda i, *_: i < p.max_steps, body,
                                                        carry)
        profit = value / p.portfolio_initial_value
        return t.cast(t.stack([total, profit, trades], axis=1), t.float64)

    def kernel_key(self):
        """What the compiled kernel depends on besides the data and params (kernel
        arguments): the functions, the rules' structure and the shapes."""
        p = self.portfolio
        return (id(p.reward_function), *map(id, p.dynamic_feature_functions), p.windows,
                p.max_episode_duration, p.start_low, p.start_high, p.initial_index,
                p.history_length, p.action_space, p.positions.tobytes(),
                p.portfolio_initial_value, tuple(p.columns), p.features.shape, p.length)

    def config(self):
        from ..core.fingerprint import digest, fingerprint
        p = self.portfolio
        return {"class": "PortfolioRollout", "policy": fingerprint(self.policy),
                "data": {"content": digest({"close": p.close, "features": p.features,
                                            "data": p.data, "positions": p.positions,
                                            "rules": p.rule_rows()})},
                "windows": p.windows, "max_episode_duration": p.max_episode_duration,
                "initial": -1 if p.initial_index is None else p.initial_index,
                "functions": fingerprint([p.reward_function, *p.dynamic_feature_functions]),
                "n_episodes": self.n_episodes, "block_size": self.block_size,
                "params": {"content": digest({} if self.params is None
                                             else {"params": self.params})},
                "kernel": {"code": digest(type(self))}}


def portfolio_rollout(policy, df, n_episodes=1024, *, params=None, seed=None, episodes=False,
                      backend=None, block_size=None, flow_kwargs=None, **env_kwargs):
    """Roll out ``n_episodes`` episodes of ``policy`` on
    :class:`~flowsim.envs.PortfolioVectorEnv`'s rules inside a compiled flowsim kernel.

    ``env_kwargs`` are the environment's rule keywords (``positions``,
    ``trading_fees``, ...); ``seed``, ``backend``, ``params``, ``episodes`` and
    ``block_size`` as :func:`flowsim.envs.rollout`; ``flow_kwargs`` (a dict) goes
    to the Flow (``events_limit``, ``device``, ``jit_compile``, backend keywords).
    Returns a :class:`~flowsim.envs.RolloutResult` whose ``episode_return`` is the
    mean sum of rewards, ``total_profit`` the mean final valuation over the initial
    one, ``trades`` the mean number of trades.
    """
    sim = PortfolioRollout(policy, df, n_episodes, params=params, episodes=episodes,
                           block_size=block_size, **env_kwargs)
    share_kernel(sim, sim.kernel_key())
    return run_rollout(sim, seed, backend, flow_kwargs)
