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

With ``quotes=True`` the action is a market maker's quote pair ``(bid offset, ask
offset, volume)``, priced as pams's ``MarketMakerAgent`` prices its pair: around the
base price, the mid of the best bid and ask (the market price where a side is
empty), a bid at ``base x (1 - bid offset)`` snapped down and an ask at ``base x (1 +
ask offset)`` snapped up (at least a tick above the bid; offsets below 0 count as
0), ``volume`` units each (rounded, clipped to ``[0, max_volume]``).  The bid
arrives, then the ask (the order of pams's pair), each executed on arrival as above;
their rest stays ``interval`` steps, filled at the price of each execution that hits
them, then the next env step's pair replaces them (where a pams market maker's
pair would expire after its ``orderTimeLength`` steps).  Quotes are placed only
where the market executes and live only while it does.
:meth:`MarketVectorEnv.account` gives the pair's prices, its units left, and the
units bought and sold in the last env step.

Without an order (an action ``(0, 0, 0)``, or ``volume`` 0) each market is, bit for
bit, market ``i`` of ``flowsim.Flow(fm.from_pams(config, block_markets=B), n,
seed=seed, block_size=B).run(1)`` (``B`` the env's ``block_markets``; episode ``k``
is that run's iteration ``k``): the markets flowsim checks against pams's statistics.

Not supported (refused, named): configs with several markets per member, more than
one normal order a step, high-frequency agents, events or learned groups; backends
other than :data:`BACKENDS`.
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
#: process, each block in its own thread, or the blocks as joblib tasks.
BACKENDS = ("flow", "threads", "joblib")
#: Observation columns after the recent prices.
OBS_COLUMNS = ("best_bid", "best_ask", "inventory", "cash", "time_left")
#: The keys of :meth:`MarketVectorEnv.account`.
ACCOUNT = ("cash", "inventory", "value", "bid_price", "ask_price", "bid_left", "ask_left",
           "bought", "sold")
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
        ``"flow"`` (blocks one after the other), ``"threads"`` (a thread a block,
        ``n_jobs`` at a time) or ``"joblib"`` (the blocks in ``n_jobs`` contiguous
        shares, a joblib task each, on the active joblib backend: loky's worker
        processes by default): the same bits.  On joblib the markets' state travels
        with every call, as numpy arrays, and each worker process compiles the calls
        once (tens of seconds): it pays for many blocks of many markets.
    classes : dict or None
        User classes of the config (:func:`flowsim.markets.config.parse`).
    quotes : bool
        The action is a market maker's quote pair ``(bid offset, ask offset, volume)``
        instead of one order (see the module's docstring).

    Observation ``[num_envs, window + 5]`` (float64): the last ``window`` market prices
    over the initial one, then :data:`OBS_COLUMNS` (best bid and ask over the initial
    price, 0 where a side is empty; inventory; cash over the initial price; fraction
    of the run left).  Action ``[num_envs, 3]``: ``(side, volume, price)``, or with
    ``quotes`` ``(bid offset, ask offset, volume)``.  All
    episodes end together after ``ceil(T / interval)`` steps (``T`` the config's pams
    steps); the next ``step`` resets (gymnasium's next-step autoreset).  The final
    step's ``info`` holds ``"statistics"``, ``[num_envs, len(NAMES)]`` of
    :data:`flowsim.markets.NAMES`.
    """

    metadata = {"autoreset_mode": AutoresetMode.NEXT_STEP, "render_modes": []}

    def __init__(self, config, num_envs=64, interval=10, max_volume=10, inventory=0.0,
                 cash=0.0, window=10, seed=0, block_markets=None, backend="flow", n_jobs=2,
                 classes=None, quotes=False):
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
        self.quotes = bool(quotes)
        low, high = ([0.0, 0.0, 0.0], [1.0, np.inf, float(self.max_volume)]) if self.quotes \
            else ([-1.0, 0.0, 0.0], [1.0, float(self.max_volume), np.inf])
        self.single_action_space = gymnasium.spaces.Box(np.array(low), np.array(high),
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
        self._account = (t.constant(self.inventory, t.float64),
                         t.constant(self.cash, t.float64))
        if self.backend == "joblib":           # the workers compile
            self._fns = {}
            return
        self._state_tensors = {k: t.constant(v) for k, v in self._state.items()}
        self._fns = calls_of(self.structure, self.block_markets, self.interval,
                             self.max_volume, self.window)

    def _key(self, block):
        return np.array([self.seed, (self.episode << 32) + block], np.int64)

    def _call(self, name, per_block):
        """The compiled call ``name`` of every block ``b``, ``(key_b, state,
        *per_block[b])``, on the env's backend, in block order."""
        n = len(per_block)
        if self.backend == "joblib":
            return self._on_joblib(name, per_block)
        fn, state = self._fns[name], self._state_tensors

        def one(b):
            return fn(tf().constant(self._key(b)), state, *per_block[b])

        if self.backend == "threads" and n > 1:
            with concurrent.futures.ThreadPoolExecutor(max(1, self.n_jobs)) as pool:
                return list(pool.map(one, range(n)))
        return [one(b) for b in range(n)]

    def _on_joblib(self, name, per_block):
        """:meth:`_call` as joblib tasks: the blocks in ``n_jobs`` contiguous shares,
        their arguments and results as numpy arrays (the markets' state travels)."""
        import joblib
        n = len(per_block)
        workers = max(1, min(self.n_jobs, n))
        spec = (self.market, self.block_markets, self.interval, self.max_volume,
                self.window, self._state)
        bounds = [n * w // workers for w in range(workers + 1)]
        tasks = [joblib.delayed(block_calls)(
            spec, name, [(self._key(b), as_numpy(per_block[b])) for b in range(lo, hi)])
            for lo, hi in zip(bounds, bounds[1:]) if hi > lo]
        with joblib.Parallel(n_jobs=workers) as parallel:
            return [got for share in parallel(tasks) for got in share]

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
        out = self._call("reset", [self._account] * (self.num_envs // self.block_markets))
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
            what = "(bid offset, ask offset, volume)" if self.quotes else "(side, volume, price)"
            raise ValueError(f"actions must have shape ({self.num_envs}, 3): {what} per "
                             f"market, got {actions.shape}")
        M = self.block_markets
        quoting = tf().constant(self.quotes)
        out = self._call("advance", [(loop, agent, actions[b * M:(b + 1) * M], quoting)
                                     for b, (loop, agent) in enumerate(self._blocks)])
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
        return self._concat(self._call("statistics", [(loop,) for loop, _ in self._blocks]))

    def prices(self):
        """``[num_envs, T + 1]``: each market's price at pams times ``0 .. T`` (as
        :func:`flowsim.markets.ensemble`'s ``paths``; steps not run yet are 0)."""
        return self._concat([np.asarray(loop.hist).T for loop, _ in self._blocks])

    def account(self):
        """``{"cash", "inventory", "value", ...}``, each ``[num_envs]``: the agents'
        accounts, and of the last env step (:data:`ACCOUNT` names them all): the prices
        of the bid and ask placed (0: none), their units left resting, the units bought
        and sold."""
        return {k: self._concat([np.asarray(getattr(agent, k)) for _, agent in self._blocks])
                for k in ACCOUNT}

    @staticmethod
    def _concat(parts):
        return np.concatenate([np.asarray(p) for p in parts], axis=0)


#: The compiled calls of the envs alike (structure, interval, sizes).
_COMPILED = {}


def calls_of(S, M, interval, max_volume, window):
    """:func:`compiled_calls`, once per process for envs alike."""
    key = (S.key(), interval, max_volume, window)
    fns = _COMPILED.get(key)
    if fns is None:
        fns = _COMPILED.setdefault(key, compiled_calls(S, M, interval, max_volume, window))
    return fns


def as_numpy(structure):
    """``structure`` (tuples, named tuples, dicts of tensors) with numpy leaves."""
    return tf().nest.map_structure(np.asarray, structure)


def block_calls(spec, name, calls):
    """In a joblib worker: the compiled call ``name`` of the blocks ``calls``, each
    ``(key, args)``, of the env ``spec`` ``(market, block_markets, interval,
    max_volume, window, state)``; results as numpy arrays."""
    t = tf()
    market, M, interval, max_volume, window, state = spec
    S = market_orders.agent_structure(market, M)
    fn = calls_of(S, M, interval, max_volume, window)[name]
    state = {k: t.constant(v) for k, v in state.items()}
    return [as_numpy(fn(t.constant(key), state, *t.nest.map_structure(t.convert_to_tensor,
                                                                       args)))
            for key, args in calls]


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

    def advance(key, state, loop, agent, action, quoting):
        with rng.using("splitmix"):
            ctx = context(key, state)
            loop, agent, _ = market_orders.submit(ctx, loop, agent, action, interval,
                                                  max_volume, quoting)
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
        """Place ``action`` ``(side, volume, price)`` (with ``quotes``: ``(bid offset,
        ask offset, volume)``), run ``interval`` pams steps:
        ``(obs, reward, terminated, truncated, info)``."""
        actions = np.zeros((self._vec.num_envs, 3))
        actions[0] = action
        obs, reward, terminated, truncated, info = self._vec.step(actions)
        return obs[0], float(reward[0]), bool(terminated[0]), bool(truncated[0]), {}
