"""Episodes of a TF policy inside a compiled flowsim kernel: one event is one episode.

:class:`Rollout` is a :class:`flowsim.Simulation`.  A block of ``block_size``
episodes runs as one batch: a ``tf.while_loop`` over steps observes every
episode, calls the policy on the batch of observations, draws actions from its
probabilities with counter-based uniforms (:func:`flowsim.core.rng.uniform_step`)
and steps gym-anytrading's StocksEnv rules (:mod:`flowsim.envs.stocks`).  The
block returns per-row sums of the episode return, total profit and trade count,
so, like every flowsim simulation, the result has the same bits on every
backend, device count and ``events_limit``.
"""
import collections
import math
from collections import namedtuple

import numpy as np

from ..core import rng
from ..core.blocks import check_count
from ..core.lazy_tf import tf
from ..core.simulation import Simulation
from ..core.sums import block_sum
from . import stocks
from .policies import check_window
from .stocks import ACC_DTYPE, Market

#: The per-episode quantities, in the order of ``Result.value``'s last axis.
COLUMNS = ("episode_return", "total_profit", "trades")
#: Default most episodes per block (a step of the loop has a fixed cost, which
#: 4,096 episodes per step spread thinner than 1,024).
MAX_BLOCK = 4096

Estimate = namedtuple("Estimate", "value error")


def actions_from(out, u):
    """Actions (int32 ``[n]``) from a policy's output ``out`` and uniforms ``u`` ``[n]``.

    Integer or bool output: the actions themselves.  Float ``[n, 2]``:
    probabilities of (Sell, Buy), Buy when ``u < p[:, 1]``.  Float ``[n]`` or
    ``[n, 1]``: the probability of Buy (so 0.0 / 1.0 act deterministically).
    """
    t = tf()
    out = t.convert_to_tensor(out)
    if out.dtype.is_integer or out.dtype == t.bool:
        return t.reshape(t.cast(out, t.int32), [-1])
    if out.shape.rank == 2 and out.shape[-1] == 2:
        p = out[:, 1]
    else:
        p = t.reshape(out, [-1])
    return t.cast(u < t.cast(p, u.dtype), t.int32)


class Rollout(Simulation):
    """Episodes of ``policy`` on gym-anytrading's StocksEnv rules; one event = one episode.

    Parameters
    ----------
    policy : callable
        TF-traceable ``policy(obs)`` (or ``policy(obs, params)`` with ``params``)
        with ``obs`` float32 ``[batch, window_size, 2]`` and ``params`` the
        rows of ``params`` of each episode, ``[batch, n_params]``.  It returns
        actions (int or bool ``[batch]``), probabilities of (Sell, Buy)
        ``[batch, 2]`` (a Keras model ending in a softmax) or the probability
        of Buy ``[batch]``; see :func:`actions_from`.
    prices, window_size, frame_bound, episode_length
        As :class:`flowsim.envs.TradingVectorEnv`; episode ``j`` of a row
        trades series ``j % n_series``.  With ``episode_length`` each episode
        starts at a tick drawn from the block's counter-based stream.
    n_episodes : int
        Episodes per parameter row.  A Flow running this simulation must run
        ``n_episodes * n_rows`` events with ``block_size=self.block_size``.
    params : array [n_rows, n_params] or None
        Policy parameters: every row gets ``n_episodes`` episodes and its own
        estimates (a sweep over policy parameters).
    episodes : bool
        Also keep the per-episode values (``Result.iterations[i]["episodes"]``,
        ``[n_rows * n_episodes, 3]``).
    block_size : int or None
        Episodes per block (a multiple of 64); part of the random stream.
        Default: even blocks of at most :data:`MAX_BLOCK` episodes.
    tick_features : bool or None
        For a *split policy*, one with methods ``observation_features(obs)``
        and ``head(features)`` such that ``policy(obs)`` is
        ``head(observation_features(obs))`` row by row (:class:`~flowsim.envs.MLP`:
        its first layer, then the rest): compute the features of every tick's
        observation once per block and gather each episode's row per step,
        instead of gathering its ``[window_size, 2]`` observation and computing
        them per step.  An observation is a function of (series, tick) alone, so
        the policy's outputs are those of ``policy(obs)`` up to the rounding of
        the first product.  None (default): when the policy is split, has no
        ``params`` and the observation table is precomputed.
    """

    dim = 0
    #: Most episodes per block by default.
    max_block = MAX_BLOCK

    def __init__(self, policy, prices=None, n_episodes=1024, window_size=30, frame_bound=None,
                 episode_length=None, params=None, episodes=False, block_size=None,
                 tick_features=None):
        self.set_episodes(policy, n_episodes, params, episodes, block_size)
        self.market = Market(prices, window_size, frame_bound)
        check_window(policy, self.market.window_size)
        self.episode_length = self.market.check_episode_length(episode_length)
        split = (callable(getattr(policy, "observation_features", None))
                 and callable(getattr(policy, "head", None)))
        if tick_features is None:
            tick_features = split and params is None and self.market.windows is not None
        elif tick_features:
            if not split:
                raise ValueError(f"tick_features=True needs a policy with observation_features "
                                 f"and head methods, got {policy!r}")
            if params is not None:
                raise ValueError("tick_features=True: not with params")
            if self.market.windows is None:
                raise ValueError("tick_features=True: the observation table is too large to "
                                 "precompute (stocks.WINDOWS_BYTES)")
        self.tick_features = bool(tick_features)

    def set_episodes(self, policy, n_episodes, params, episodes, block_size):
        """Check and set what every rollout takes (as :class:`Rollout`'s arguments):
        ``policy``, ``n_episodes``, ``params`` (rows), ``episodes`` (keep them) and
        ``block_size`` (default: even blocks of at most :attr:`max_block`)."""
        if not callable(policy):
            raise TypeError(f"policy must be a TF callable obs -> actions or probabilities, "
                            f"got {policy!r}")
        self.policy = policy
        self.n_episodes = check_count("n_episodes", n_episodes)
        if params is not None:
            from ..algorithms.sweep import param_rows
            params = param_rows(params)
        self.params = params
        self.n_rows = 1 if params is None else params.shape[0]
        if not isinstance(episodes, bool):
            raise TypeError(f"episodes must be True or False, got {episodes!r}")
        self.keep_episodes = episodes
        if block_size is None:
            from ..core.blocks import default_block_size
            block_size = default_block_size(self.n_events, max_block=self.max_block)
        self.block_size = check_count("block_size", block_size)
        self._episodes = None

    @property
    def n_events(self):
        return self.n_rows * self.n_episodes

    def accumulators(self):
        acc = {"sum": (self.n_rows, 3), "sum2": (self.n_rows, 3)}
        if self.keep_episodes:
            acc["episodes"] = (self.block_size * 3,)
        return acc

    def state(self):
        m = self.market
        out = {"prices": m.prices, "observations": m.observations, "end_tick": m.end_tick,
               "fees": stocks.fee_factors()}
        if self.params is not None:
            out["params"] = self.params
        return out

    def inputs(self, key, first_event, size, dtype, state):
        if size != self.block_size:
            raise ValueError(f"this Rollout was built for block_size={self.block_size}, "
                             f"the Flow uses {size}")
        return key, first_event, dtype

    def episodes_of(self, key, first_event, size, dtype, state):
        """``[size, 3]`` float64: return, profit and trades of episodes ``first_event ..``."""
        t = tf()
        m = self.market
        window = m.window_size
        event = first_event + t.range(size, dtype=t.int64)
        series = t.cast(event % self.n_episodes % m.n_series, t.int32)
        u = rng.uniform(key, [size], t.float64)
        tick, end = stocks.start_ticks(u, series, state["end_tick"], window,
                                       self.episode_length)
        if self.params is not None:
            row = t.minimum(event // self.n_episodes, self.n_rows - 1)
            params = t.gather(state["params"], row)
        acc = t.as_dtype(ACC_DTYPE)
        fees = (t.fill([size], state["fees"][0]), t.fill([size], state["fees"][1]))
        carry = (t.constant(0, t.int32), tick, tick - 1, t.zeros([size], t.int32),
                 t.zeros([size], acc), t.ones([size], acc), t.zeros([size], t.int32))
        if self.tick_features:
            # every tick's observation features, once per block: [series * length, k]
            table = self.policy.observation_features(
                t.reshape(state["observations"], [-1, window, 2]))
            length = t.shape(state["observations"], out_type=t.int32)[1]

        def policy_out(tick):
            if self.tick_features:
                return self.policy.head(t.gather(table, series * length + tick))
            obs = stocks.observe(state["observations"], series, tick, window)
            return self.policy(obs) if self.params is None else self.policy(obs, params)

        def action_at(i, tick):
            return actions_from(policy_out(tick), rng.uniform_step(key, i, [size], dtype,
                                                                    stream=1))

        # The action of step i + 1 is computed at the end of step i and carried: XLA
        # fuses a cheap producer into each of its consumers, and the action feeds
        # every piece of the state, so computed in the step that uses it the action
        # draw ran five times per step.
        def body(i, action, tick, last, position, total_reward, total_profit, trades):
            active = tick < end
            new = stocks.step(state["prices"], series, action, tick, last, position, end,
                              total_reward, total_profit, fees)
            kept = [t.where(active, a, b) for a, b in
                    zip(new[:5], (tick, last, position, total_reward, total_profit))]
            trades = trades + t.cast(new[7] & active, t.int32)
            return (i + 1, action_at(i + 1, kept[0]), *kept, trades)

        carry = (carry[0], action_at(carry[0], tick), *carry[1:])
        steps = self.market.max_steps(self.episode_length)
        final = t.while_loop(lambda i, *_: i < steps, body, carry)
        return t.stack([t.cast(final[5], t.float64), t.cast(final[6], t.float64),
                        t.cast(final[7], t.float64)], axis=1)

    def block(self, inputs, valid, state):
        t = tf()
        key, first_event, dtype = inputs
        size = int(valid.shape[0])
        values = self.episodes_of(key, first_event, size, dtype, state)
        values = t.where(valid[:, None], values, t.zeros_like(values))
        if self.n_rows == 1:
            sums, sums2 = block_sum(values)[None], block_sum(values * values)[None]
        else:
            event = first_event + t.range(size, dtype=t.int64)
            row = t.minimum(event // self.n_episodes, self.n_rows - 1)
            onehot = t.one_hot(row, self.n_rows, dtype=t.float64)[:, :, None]    # [n, rows, 1]
            sums = block_sum(onehot * values[:, None, :])
            sums2 = block_sum(onehot * (values * values)[:, None, :])
        out = {"sum": sums, "sum2": sums2}
        if self.keep_episodes:
            out["episodes"] = t.reshape(values, [-1])
        return out

    def combine(self, rows, n_events):
        """Block totals added in block order; with ``episodes=True`` the per-episode
        values are also gathered in event order (kept for :meth:`estimate`)."""
        from ..core.blocks import reduce_rows
        from ..core.kernel import layout
        rows = np.asarray(rows)
        if self.keep_episodes:
            (a, b), = [(a, b) for name, _, a, b in layout(self)[0] if name == "episodes"]
            self._episodes = rows[:, a:b].reshape(-1, 3)[:n_events].copy()
        return reduce_rows(rows)

    def estimate(self, totals, n_events):
        n = float(self.n_episodes)
        mean = totals["sum"] / n
        var = np.maximum(totals["sum2"] / n - mean * mean, 0.0)
        error = np.sqrt(var / (n - 1)) if n > 1 else np.full_like(mean, math.inf)
        if self.params is None:
            mean, error = mean[0], error[0]
        out = {"value": mean, "error": error}
        if self.keep_episodes and self._episodes is not None:
            episodes, self._episodes = self._episodes, None
            out["episodes"] = episodes
        return out

    def config(self):
        from ..core.fingerprint import digest, fingerprint
        m = self.market
        return {"class": "Rollout", "policy": fingerprint(self.policy),
                "prices": {"content": digest({"prices": m.prices, "end": m.end_tick})},
                "window_size": m.window_size, "episode_length": self.episode_length,
                "n_episodes": self.n_episodes, "block_size": self.block_size,
                "tick_features": self.tick_features,
                "params": {"content": digest({} if self.params is None
                                             else {"params": self.params})},
                "kernel": {"code": digest(type(self))}}


class RolloutResult:
    """What :func:`rollout` returns.

    Attributes
    ----------
    episode_return, total_profit, trades : Estimate
        ``(value, error)``: the mean over episodes of gym-anytrading's
        ``total_reward`` at the end of an episode, of its ``total_profit``, and
        of the number of trades, each with its standard error.  Floats, or
        arrays ``[n_rows]`` with ``params``.
    episodes : dict or None
        With ``episodes=True``: ``{"episode_return", "total_profit", "trades"}``
        arrays ``[n_episodes]`` (``[n_rows, n_episodes]`` with ``params``).
    result : flowsim.Result
        The run itself (``meta``, ``wall_time``, ``timeline``).
    """

    def __init__(self, result, sim):
        self.result = result
        value = np.asarray(result.value, dtype=np.float64)
        error = np.asarray(result.error, dtype=np.float64)
        for i, name in enumerate(COLUMNS):
            v, e = value[..., i], error[..., i]
            setattr(self, name, Estimate(float(v) if v.ndim == 0 else v,
                                         float(e) if e.ndim == 0 else e))
        self.episodes = None
        per = result.iterations[-1].get("episodes")
        if per is not None:
            per = np.asarray(per, dtype=np.float64)
            shape = [sim.n_episodes] if sim.params is None else [sim.n_rows, sim.n_episodes]
            self.episodes = {name: per[:, i].reshape(shape) for i, name in enumerate(COLUMNS)}

    @property
    def episodes_per_second(self):
        return self.result.events_per_second

    def __repr__(self):
        def fmt(est):
            return " +/- ".join(np.array2string(np.asarray(x), formatter={
                "float_kind": lambda v, d=d: f"{v:.{d}g}"}) for x, d in zip(est, (7, 2)))
        return (f"RolloutResult(episode_return={fmt(self.episode_return)}, "
                f"total_profit={fmt(self.total_profit)}, trades={fmt(self.trades)})")


#: (policy, settings) -> trace token of the last Rollout built for them: repeated calls
#: with the same policy reuse its compiled kernel (prices and params are kernel arguments).
_TOKENS = collections.OrderedDict()


def share_kernel(sim, key=None):
    """Give ``sim`` the trace token of the last rollout built with the same policy and
    settings ``key`` (default: a :class:`Rollout`'s), so that it reuses that compiled
    kernel; the data and params are kernel arguments."""
    if key is None:
        m = sim.market
        key = (m.window_size, m.n_series, m.prices.shape, sim.episode_length,
               sim.tick_features)
    key = (type(sim).__name__, id(sim.policy), sim.n_episodes, sim.n_rows,
           None if sim.params is None else sim.params.shape, sim.keep_episodes,
           sim.block_size, *key)
    entry = _TOKENS.get(key)
    if entry is not None and entry[0] is sim.policy:
        sim.__dict__["_trace_token"], sim.__dict__["_trace_names"] = entry[1:]
        _TOKENS.move_to_end(key)
    else:
        _TOKENS[key] = (sim.policy, sim.trace_key(), sim.__dict__.get("_trace_names"))
        while len(_TOKENS) > 16:
            _TOKENS.popitem(last=False)


def rollout(policy, prices=None, n_episodes=1024, *, params=None, window_size=30,
            frame_bound=None, episode_length=None, seed=None, episodes=False, backend=None,
            block_size=None, tick_features=None, **flow_kwargs):
    """Roll out ``n_episodes`` episodes of ``policy`` inside a compiled flowsim kernel.

    Parameters
    ----------
    policy : callable
        TF-traceable ``obs -> actions or probabilities`` (``policy(obs, params)``
        with ``params``); e.g. a Keras model ending in a 2-way softmax.  See
        :class:`Rollout`.
    prices : DataFrame, array, list of them, or None
        As :class:`flowsim.envs.TradingVectorEnv` (None: the bundled sample).
    n_episodes : int
        Episodes (per parameter row with ``params``).
    params : array [n_rows, n_params] or None
        A sweep over policy parameters: ``n_episodes`` episodes per row,
        estimates per row.
    window_size, frame_bound, episode_length
        As :class:`flowsim.envs.TradingVectorEnv`.
    seed : int or None
        Seed of the episodes' start ticks and of the actions drawn from the
        policy's probabilities.  Same seed, same bits on every backend.
    episodes : bool
        Also return the per-episode values.
    backend : None or str
        ``None`` (one device), ``"threads"``, ``"joblib"``, ``"mpi"`` or
        ``"spark"`` (:mod:`flowsim.distribution`).  The policy must pickle for
        the process backends (module-level functions, ``cloudpickle`` for
        closures).
    block_size : int or None
        Episodes per block; part of the random stream (default: at most
        :data:`MAX_BLOCK`).
    tick_features : bool or None
        For a split policy (:class:`~flowsim.envs.MLP`), its observation features
        computed once per tick per block and gathered per step (default when
        possible); see :class:`Rollout`.
    **flow_kwargs
        Passed to the Flow: ``events_limit`` (does not change the bits),
        ``device``, ``dtype`` (of the uniforms deciding actions), ``jit_compile``,
        ``rng``, and backend keywords (``n_jobs``, ``devices`` ...).

    Returns a :class:`RolloutResult`.
    """
    sim = Rollout(policy, prices, n_episodes, window_size, frame_bound, episode_length,
                  params=params, episodes=episodes, block_size=block_size,
                  tick_features=tick_features)
    share_kernel(sim)
    return run_rollout(sim, seed, backend, flow_kwargs)


def run_rollout(sim, seed, backend, flow_kwargs):
    """Run the rollout ``sim`` (one iteration) on the Flow of ``backend`` with
    ``flow_kwargs`` (``events_limit`` default 16 blocks) and return its
    :class:`RolloutResult`."""
    from ..distribution.registry import flow_class
    flow_kwargs = dict(flow_kwargs or {})
    flow_kwargs.setdefault("events_limit", 16 * sim.block_size)
    flow = flow_class(backend)(sim, n_events=sim.n_events, seed=seed, quiet=True,
                               block_size=sim.block_size, **flow_kwargs)
    try:
        result = flow.run(1)
    finally:
        flow.close()
    result.meta.update({"n_episodes": sim.n_episodes, "n_rows": sim.n_rows,
                        "columns": list(COLUMNS)})
    return RolloutResult(result, sim)
