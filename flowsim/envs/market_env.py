"""A learning agent trading inside batched pams markets: ``flowsim/MarketEnv-v0``.

::

    import gymnasium, flowsim.envs, flowsim.markets as fm
    env = gymnasium.make_vec("flowsim/MarketEnv-v0", num_envs=1024,
                             config=fm.config_path("ci2002"), interval=10, seed=1)
    obs, info = env.reset()
    obs, reward, terminated, truncated, info = env.step(actions)   # actions [1024, 3]

Each environment is one market of a pams config run by :mod:`flowsim.markets` (the
compiled step of :func:`flowsim.markets.from_pams`), the markets of a block stepped
together in one compiled call.  A :meth:`~MarketVectorEnv.step` places the agent's
order (an action ``(side, volume, price)``), then runs ``interval`` pams steps; the
reward is the change of the agent's mark-to-market value ``cash + inventory *
market price``.  Semantics of the agent's order, in pams's terms
(:mod:`flowsim.envs.market_orders`):

* It is submitted before the pams step ``t`` at which the env step starts, after
  every order of step ``t - 1`` and before step ``t``'s (time priority and the trade
  price, the earlier order's, follow from that), and only where the session places
  orders.
* ``side``: the sign of the rounded value (+1 buy, -1 sell, 0 none); ``volume``:
  rounded, clipped to ``[0, max_volume]`` (0: no order); ``price``: a limit price
  snapped to the tick grid as pams snaps a buy (down) or a sell (up); ``price <= 0``:
  a market order.
* Where the market executes, the order executes on arrival against the orders it
  crosses, best price then earliest first, one unit per pair, all of the arrival's
  volume at one price (the earlier order's of the last pair), as the compiled step
  executes every arrival (pams's ``Market._execution``).  The rest of a limit order
  rests in the book for ``interval`` steps (then it is cancelled: the next env step
  replaces it: a pams agent cancelling its order at its next decision); each later
  fill is at the price of the step's execution that hits it.  The rest of a market
  order is cancelled at once, where pams 0.3.0 leaves it resting in the book, first
  in priority, until it fills or its ttl ends: every env warns so at construction
  (:class:`MarketEnvWarning`, :data:`PAMS_DIFFERENCE`).
* The agent has no cash or position limit.  Its executions move the market price
  and the book the FCN agents see, but do not count in the markets' statistics
  (``trades`` and the rest count the FCN agents' orders).

Without an order (an action ``(0, 0, 0)``, or ``volume`` 0) each market is, bit for
bit, market ``i`` of ``flowsim.Flow(fm.from_pams(config, block_markets=B), n,
seed=seed, block_size=B).run(1)`` (``B`` the env's ``block_markets``; episode ``k``
is that run's iteration ``k``): the markets flowsim checks against pams's statistics.

Not supported (refused, named): configs with several markets per member, more than
one normal order a step, high-frequency agents, events or learned groups; a
market-making quote pair (one order a market per env step); ``backend="joblib"``.
"""
import concurrent.futures
import warnings

import gymnasium
import numpy as np
from gymnasium.vector import AutoresetMode
from gymnasium.vector.utils import batch_space

from ..core import rng
from ..core.blocks import BLOCK_QUANTUM, check_count
from ..core.lazy_tf import tf
from ..markets import config as market_config
from . import market_orders

#: Backends a :class:`MarketVectorEnv` steps its blocks on: one after the other in this
#: process, or each block in its own thread.
BACKENDS = ("flow", "threads")
#: Observation columns after the recent prices.
OBS_COLUMNS = ("best_bid", "best_ask", "inventory", "cash", "time_left")
#: What every :class:`MarketVectorEnv` warns of at construction: where its agent's orders
#: are not what pams 0.3.0 would do with them.
PAMS_DIFFERENCE = (
    "MarketEnv-v0 cancels the unfilled rest of a market order at once, where pams 0.3.0 "
    "leaves it resting in the book, first in priority, until it fills at the price of "
    "the limit orders it meets or its ttl ends; the agent's limit orders rest for "
    "`interval` pams steps, then are cancelled (a pams agent cancelling its order at its "
    "next decision)")


class MarketEnvWarning(UserWarning):
    """Where the orders of a :class:`MarketVectorEnv`'s agent differ from pams's
    (:data:`PAMS_DIFFERENCE`); warned once per place by Python's default filter.  To
    silence it: ``warnings.simplefilter("ignore", MarketEnvWarning)``."""


class MarketVectorEnv(gymnasium.vector.VectorEnv):
    """``num_envs`` pams markets of ``config``, each with one trading agent.

    Parameters
    ----------
    config : dict, path or MarketConfig
        A pams config (:func:`flowsim.markets.config.parse`), one market.
    num_envs : int
        Markets (a multiple of ``block_markets``).
    interval : int
        pams steps per env step (the agent decides every ``interval`` steps).
    max_volume : int
        Largest order volume.
    inventory, cash : float
        The agent's units and cash at each reset (an execution task starts with the
        block to sell as ``inventory``).
    window : int
        Recent market prices in the observation.
    seed : int
        The markets' seed (also ``reset(seed=...)``).
    block_markets : int or None
        Markets per compiled call, a multiple of 64 (default: ``num_envs``, all in one
        call).  Part of the random stream, as for :func:`flowsim.markets.ensemble`.
    backend : str
        ``"flow"`` (blocks one after the other) or ``"threads"`` (a thread a block,
        ``n_jobs`` at a time): the same bits.
    classes : dict or None
        User classes of the config (:func:`flowsim.markets.config.parse`).

    Observation ``[num_envs, window + 5]`` (float64): the last ``window`` market prices
    over the initial one, then :data:`OBS_COLUMNS` (best bid and ask over the initial
    price, 0 where a side is empty; inventory; cash over the initial price; fraction
    of the run left).  Action ``[num_envs, 3]``: ``(side, volume, price)``.  All
    episodes end together after ``ceil(T / interval)`` steps (``T`` the config's pams
    steps); the next ``step`` resets (gymnasium's next-step autoreset).  The final
    step's ``info`` holds ``"statistics"``, ``[num_envs, len(NAMES)]`` of
    :data:`flowsim.markets.NAMES`.
    """

    metadata = {"autoreset_mode": AutoresetMode.NEXT_STEP, "render_modes": []}

    def __init__(self, config, num_envs=64, interval=10, max_volume=10, inventory=0.0,
                 cash=0.0, window=10, seed=0, block_markets=None, backend="flow", n_jobs=2,
                 classes=None):
        from ..markets.ensembles import MarketEnsemble
        self.num_envs = check_count("num_envs", num_envs)
        block = self.num_envs if block_markets is None else check_count("block_markets",
                                                                         block_markets)
        if block % BLOCK_QUANTUM or self.num_envs % block:
            raise ValueError(f"block_markets must be a multiple of {BLOCK_QUANTUM} dividing "
                             f"num_envs={self.num_envs}, got {block}")
        if backend not in BACKENDS:
            raise ValueError(f"backend must be one of {BACKENDS}, got {backend!r}")
        self.block_markets, self.backend, self.n_jobs = block, backend, n_jobs
        self.market = market_config.parse(config, classes=classes)
        self.structure = market_orders.agent_structure(self.market, block)
        self._state = MarketEnsemble(self.market).state()
        self.interval = check_count("interval", interval)
        self.max_volume = check_count("max_volume", max_volume)
        self.window = check_count("window", window)
        self.inventory, self.cash = float(inventory), float(cash)
        self.seed, self.episode = int(seed), -1
        self.n_steps = -(-self.market.n_steps // self.interval)
        self.single_action_space = gymnasium.spaces.Box(
            np.array([-1.0, 0.0, 0.0]), np.array([1.0, float(self.max_volume), np.inf]),
            dtype=np.float64)
        self.action_space = batch_space(self.single_action_space, self.num_envs)
        self.single_observation_space = gymnasium.spaces.Box(
            -np.inf, np.inf, (self.window + len(OBS_COLUMNS),), np.float64)
        self.observation_space = batch_space(self.single_observation_space, self.num_envs)
        self._blocks = None
        self._fns = None
        self._ended = False
        self.t = 0
        warnings.warn(PAMS_DIFFERENCE, MarketEnvWarning, stacklevel=2)

    # -- the compiled calls --------------------------------------------------------------
    def _compile(self):
        t = tf()
        self._state_tensors = {k: t.constant(v) for k, v in self._state.items()}
        self._account = (t.constant(self.inventory, t.float64),
                         t.constant(self.cash, t.float64))
        key = (self.structure.key(), self.interval, self.max_volume, self.window)
        self._fns = _COMPILED.get(key)
        if self._fns is None:
            self._fns = _COMPILED.setdefault(key, compiled_calls(
                self.structure, self.block_markets, self.interval, self.max_volume,
                self.window))

    def _key(self, block):
        return tf().constant([self.seed, (self.episode << 32) + block], tf().int64)

    def _map(self, fn, *per_block):
        """``fn(b, *args_b)`` for every block ``b``, on the env's backend, in block order."""
        n = len(per_block[0]) if per_block else self.num_envs // self.block_markets
        args = [(b,) + tuple(p[b] for p in per_block) for b in range(n)]
        if self.backend == "threads" and n > 1:
            with concurrent.futures.ThreadPoolExecutor(max(1, self.n_jobs)) as pool:
                return list(pool.map(lambda a: fn(*a), args))
        return [fn(*a) for a in args]

    # -- gymnasium -----------------------------------------------------------------------
    def reset(self, *, seed=None, options=None):
        """Start the next episode of every market (``seed``: restart from episode 0 of
        that seed).  Returns ``(obs, info)``."""
        if options:
            raise ValueError(f"MarketEnv-v0 resets all its markets together; options "
                             f"{sorted(options)} are not supported")
        if self._fns is None:
            self._compile()
        if seed is not None:
            self.seed, self.episode = int(seed), -1
        self.episode += 1
        state = self._state_tensors
        out = self._map(lambda b: self._fns["reset"](self._key(b), state, *self._account))
        self._blocks = [(loop, agent) for loop, agent, _ in out]
        self._ended = False
        self.t = 0
        return self._concat([o for _, _, o in out]), {}

    def step(self, actions):
        """Place each market's order, run ``interval`` pams steps: ``(obs, reward,
        terminated, truncated, info)``."""
        if self._blocks is None:
            raise RuntimeError("call reset() before step()")
        if self._ended:
            obs, info = self.reset()
            zeros = np.zeros(self.num_envs, bool)
            return obs, np.zeros(self.num_envs), zeros, zeros, info
        actions = np.asarray(actions, np.float64)
        if actions.shape != (self.num_envs, 3):
            raise ValueError(f"actions must have shape ({self.num_envs}, 3): (side, volume, "
                             f"price) per market, got {actions.shape}")
        M = self.block_markets
        state = self._state_tensors
        per_block = [actions[b * M:(b + 1) * M] for b in range(len(self._blocks))]
        out = self._map(lambda b, lb, a: self._fns["advance"](self._key(b), state, *lb, a),
                        self._blocks, per_block)
        self._blocks = [(loop, agent) for loop, agent, _, _ in out]
        self.t += 1
        self._ended = self.t >= self.n_steps
        info = {}
        if self._ended:
            info["statistics"] = self.statistics()
        done = np.full(self.num_envs, self._ended)
        return (self._concat([o for _, _, o, _ in out]), self._concat([r for *_, r in out]),
                done, np.zeros(self.num_envs, bool), info)

    # -- what the markets hold -----------------------------------------------------------
    def statistics(self):
        """``[num_envs, len(NAMES)]``: each market's statistics
        (:data:`flowsim.markets.NAMES`) of the episode so far (pams's, once it ended)."""
        state = self._state_tensors
        return self._concat(self._map(
            lambda b, lb: self._fns["statistics"](self._key(b), state, lb[0]), self._blocks))

    def prices(self):
        """``[num_envs, T + 1]``: each market's price at pams times ``0 .. T`` (as
        :func:`flowsim.markets.ensemble`'s ``paths``; steps not run yet are 0)."""
        return self._concat([np.asarray(loop.hist).T for loop, _ in self._blocks])

    def account(self):
        """``{"cash", "inventory", "value"}``, each ``[num_envs]``: the agents' accounts."""
        return {k: self._concat([np.asarray(getattr(agent, k)) for _, agent in self._blocks])
                for k in ("cash", "inventory", "value")}

    @staticmethod
    def _concat(parts):
        return np.concatenate([np.asarray(p) for p in parts], axis=0)


#: The compiled calls of the envs alike (structure, interval, sizes).
_COMPILED = {}


def compiled_calls(S, M, interval, max_volume, window):
    """``{"reset", "advance", "statistics"}``: the compiled calls of a block of ``M``
    markets of Structure ``S`` (:func:`flowsim.envs.market_orders.agent_structure`)."""
    t = tf()

    def context(key, state):
        from ..markets.kernel import StepContext
        return StepContext(S, key, M, state, t.float64)

    def reset(key, state, inventory, cash):
        with rng.using("splitmix"):
            ctx = context(key, state)
            loop, agent = market_orders.start(ctx, inventory, cash)
            return loop, agent, market_orders.observe(ctx, loop, agent, window)

    def advance(key, state, loop, agent, action):
        with rng.using("splitmix"):
            ctx = context(key, state)
            loop, agent, _ = market_orders.submit(ctx, loop, agent, action, interval,
                                                  max_volume)
            value = agent.value
            loop, agent = market_orders.run_interval(ctx, loop, agent, interval)
            obs = market_orders.observe(ctx, loop, agent, window)
            return loop, agent, obs, agent.value - value

    def statistics(key, state, loop):
        return market_orders.statistics(context(key, state), loop)

    def compiled(fn):
        return t.function(t.autograph.experimental.do_not_convert(fn), jit_compile=True,
                          autograph=False)

    return {"reset": compiled(reset), "advance": compiled(advance),
            "statistics": compiled(statistics)}


class MarketEnv(gymnasium.Env):
    """One market of :class:`MarketVectorEnv` (``gymnasium.make("flowsim/MarketEnv-v0",
    config=...)``): its blocks hold 64 markets, this env is the first."""

    metadata = {"render_modes": []}

    def __init__(self, config, **kwargs):
        self._vec = MarketVectorEnv(config, num_envs=BLOCK_QUANTUM, **kwargs)
        self.observation_space = self._vec.single_observation_space
        self.action_space = self._vec.single_action_space

    def reset(self, *, seed=None, options=None):
        """The next episode of the market: ``(obs, info)``."""
        obs, info = self._vec.reset(seed=seed, options=options)
        return obs[0], info

    def step(self, action):
        """Place ``action`` ``(side, volume, price)``, run ``interval`` pams steps:
        ``(obs, reward, terminated, truncated, info)``."""
        actions = np.zeros((self._vec.num_envs, 3))
        actions[0] = action
        obs, reward, terminated, truncated, info = self._vec.step(actions)
        return obs[0], float(reward[0]), bool(terminated[0]), bool(truncated[0]), {}
