"""A batch of gym-anytrading stock-trading environments stepped in one TensorFlow call.

:class:`TradingVectorEnv` is a :class:`gymnasium.vector.VectorEnv`: the state of
``num_envs`` environments is a few arrays (tick, last trade tick, position,
totals) on one device, and :meth:`~TradingVectorEnv.step` advances all of them,
autoresets those that ended on the previous call and produces their
observations in one compiled call.  :class:`TradingEnv` is the single
environment (``gymnasium.make("flowsim/Stocks-v0")``) on the same code.
"""
import numbers
import secrets

import gymnasium
import numpy as np
from gymnasium.vector import AutoresetMode
from gymnasium.vector.utils import batch_space

from ..core import rng, tf_private
from ..core.lazy_tf import tf
from . import forex, stocks
from .stocks import ACC_DTYPE, OBS_BOUND, Market

BACKENDS = ("numpy", "tf")
INFO_KEYS = ("total_reward", "total_profit", "position")


def default_device():
    t = tf()
    return "GPU:0" if t.config.list_logical_devices("GPU") else "CPU:0"


def flat_call(concrete):
    """``concrete(*args)`` -> ``(obs or None, table)``, called through its graph function
    with the captured inputs passed directly: this skips the concrete function's
    argument binding and structuring, about half of a step call's cost from Python,
    and, when eager, goes straight to TensorFlow's executor (:func:`quick_call`).
    Falls back to the concrete function when TensorFlow lacks the (private) graph
    function (:func:`flowsim.core.tf_private.graph_function`)."""
    atomic = tf_private.graph_function(concrete)
    if atomic is None:
        return concrete
    captures = tuple(concrete.captured_inputs)
    run = quick_call(atomic, captures)

    def call(*args):
        flat = run(*args)
        return (None, flat[0]) if len(flat) == 1 else (flat[0], flat[1])
    return call


#: ``run = quick_call(atomic, captures)``: :func:`flowsim.core.tf_private.quick_call`.
quick_call = tf_private.quick_call


def reset_mask(options, n, everything):
    """The environments a vector ``reset(options=...)`` resets: ``options["reset_mask"]``
    (a numpy bool array ``[n]`` with at least one True) or ``everything``."""
    options = dict(options or {})
    mask = everything
    if "reset_mask" in options:
        mask = options.pop("reset_mask")
        if not isinstance(mask, np.ndarray) or mask.dtype != np.bool_ or mask.shape != (n,):
            raise ValueError(f"options['reset_mask'] must be a numpy bool array of shape "
                             f"({n},), got {mask!r}")
        if not mask.any():
            raise ValueError("options['reset_mask'] must have at least one True value")
    if options:
        raise ValueError(f"options: unknown keys {sorted(options)} (only 'reset_mask')")
    return mask


def env_seeds(seed, n):
    """Per-environment seeds (int or None) of a vector ``reset(seed=seed)``: an int gives
    ``seed + i`` (gymnasium's rule), a list one seed (or None) each, None keeps them."""
    if seed is None:
        seeds = [None] * n
    elif isinstance(seed, numbers.Integral) and not isinstance(seed, bool):
        seeds = [int(seed) + i for i in range(n)]
    elif isinstance(seed, (list, tuple)) and len(seed) == n:
        seeds = list(seed)
    else:
        raise ValueError(f"seed must be None, an int or a list of {n} ints/None, "
                         f"got {seed!r}")
    for s in seeds:
        if s is not None and (isinstance(s, bool) or not isinstance(s, numbers.Integral)
                              or not 0 <= s < 2**63):
            raise ValueError(f"seed: each seed must be an integer in [0, 2**63), got {s!r}")
    return seeds


def check_batch(num_envs, backend):
    """Refuse a ``num_envs`` that is not an integer >= 1 or a ``backend`` not in
    :data:`BACKENDS`, naming the argument."""
    if isinstance(num_envs, bool) or not isinstance(num_envs, numbers.Integral):
        raise TypeError(f"num_envs must be an integer, got {num_envs!r}")
    if num_envs < 1:
        raise ValueError(f"num_envs must be >= 1, got {num_envs}")
    if backend not in BACKENDS:
        raise ValueError(f"backend must be one of {BACKENDS}, got {backend!r}")


def check_discrete_actions(actions, num_envs, n_actions, what):
    """``actions`` (numpy or TF) as an int32 tensor ``[num_envs]`` of values in
    ``[0, n_actions)``; anything else is refused naming ``actions`` and the range
    (``what`` names the meaning of the values, e.g. ``"0 Sell, 1 Buy"``)."""
    t = tf()
    if not isinstance(actions, t.Tensor):
        actions = check_discrete_numpy(np.asarray(actions), num_envs, n_actions, what)
        return t.constant(actions.astype(np.int32, copy=False))
    if not (actions.dtype.is_integer or actions.dtype == t.bool):
        raise TypeError(f"actions must be integers ({what}), got dtype {actions.dtype.name}")
    if actions.shape.rank != 1 or actions.shape[0] != num_envs:
        raise ValueError(f"actions must have shape ({num_envs},), got "
                         f"{actions.shape.as_list()}")
    actions = t.cast(actions, t.int32)
    check_action_range(int(t.reduce_min(actions)), int(t.reduce_max(actions)), n_actions, what)
    return actions


def check_discrete_numpy(actions, num_envs, n_actions, what):
    """:func:`check_discrete_actions` of a numpy array: ``actions`` unchanged."""
    if actions.shape != (num_envs,):
        raise ValueError(f"actions must have shape ({num_envs},), got "
                         f"{list(actions.shape)}")
    if not (np.issubdtype(actions.dtype, np.integer) or actions.dtype == np.bool_):
        raise TypeError(f"actions must be integers ({what}), got dtype {actions.dtype}")
    if actions.size:
        check_action_range(int(actions.min()), int(actions.max()), n_actions, what)
    return actions


def check_action_range(low, high, n_actions, what):
    if low < 0 or high >= n_actions:
        bad = low if low < 0 else high
        raise ValueError(f"actions must be in [0, {n_actions - 1}] ({what}), got {bad}: "
                         f"the action space is Discrete({n_actions})")


class CompiledVectorEnv:
    """What flowsim's vector environments share: a step and a reset compiled once.

    A subclass sets ``num_envs``, ``device`` and ``jit_compile``, defines
    ``_step_fn(actions)`` and ``_reset_fn(mask, seeds, seeded)`` (both return
    ``(obs or None, table)``) and calls :meth:`compile_calls` when it builds its
    state; :meth:`reset_inputs` turns ``reset``'s arguments into the reset
    call's (``self._ones``, all True ``[num_envs]``, is the mask of a full reset).
    """

    _seeded = False

    def compile_calls(self, action_spec):
        """``self._fns``: ``step`` and ``reset`` as concrete TF functions placed on
        ``self.device`` and called through :func:`flat_call` (a call skips
        ``tf.function``'s argument binding)."""
        t = tf()
        n = self.num_envs

        def placed(fn):
            def call(*args):
                with t.device(self.device):
                    return fn(*args)
            return t.function(call, jit_compile=self.jit_compile)

        self._fns = {"step": flat_call(placed(self._step_fn).get_concrete_function(
                         action_spec)),
                     "reset": flat_call(placed(self._reset_fn).get_concrete_function(
                         t.TensorSpec([n], t.bool), t.TensorSpec([n], t.int64),
                         t.TensorSpec([n], t.bool)))}

    def reset_inputs(self, seed, options):
        """``(mask, args)`` of a ``reset(seed=, options=)``: the environments reset
        (numpy bool ``[num_envs]``) and the reset call's tensors (mask, seeds,
        which seeds are given): :meth:`reset_values` as tensors."""
        t = tf()
        mask, values, given = self.reset_values(seed, options)
        return mask, (t.constant(mask), t.constant(values), t.constant(given))

    def reset_values(self, seed, options):
        """``(mask, seeds, given)`` (numpy ``[num_envs]``) of a ``reset(seed=,
        options=)``: the environments reset, their seeds (int64) and which seeds
        are given.  An int ``seed`` also seeds gymnasium's ``np_random`` (for its
        wrappers); the first reset gives unseeded environments OS entropy."""
        mask = reset_mask(options, self.num_envs, self._ones)
        seeds = env_seeds(seed, self.num_envs)
        if isinstance(seed, numbers.Integral):
            gymnasium.vector.VectorEnv.reset(self, seed=int(seed))
        if not self._seeded:
            seeds = [secrets.randbits(62) if s is None else s for s in seeds]
            self._seeded = True
        given = np.array([s is not None for s in seeds])
        values = np.array([0 if s is None else s for s in seeds], dtype=np.int64)
        return mask, values, given


class TradingVectorEnv(CompiledVectorEnv, gymnasium.vector.VectorEnv):
    """``num_envs`` gym-anytrading ``StocksEnv`` environments, stepped together on one device.

    Parameters
    ----------
    prices : DataFrame, array, list of them, or None
        A DataFrame with a ``Close`` column (what gym-anytrading takes) or a 1-d
        array of prices; a list of those (or a 2-d array, one series per row)
        for several series at once: environment ``i`` trades series
        ``i % n_series``.  None: flowsim's bundled sample series (generated,
        1,260 daily closes).  Pass ``gym_anytrading.datasets.STOCKS_GOOGL`` to
        trade gym-anytrading's ``stocks-v0`` data.
    num_envs : int
        Environments (>= 1).  Thousands per call are cheap: the cost of a call
        is mostly fixed until the observations fill memory bandwidth.
    window_size : int
        Rows ``(price, diff)`` per observation (default 30, as ``stocks-v0``).
    frame_bound : (int, int) or None
        gym-anytrading's ``frame_bound``: the ticks ``[start, end)`` of each
        series that episodes trade (``start >= window_size``).  Default
        ``(window_size, len(series))``.
    episode_length : int or None
        None (default): every episode runs over the whole frame, as in
        gym-anytrading.  An integer: each episode is that many steps, from a
        start tick drawn uniformly per environment and episode.  The draw is a
        pure function of (environment seed, episode number), so
        ``reset(seed=s)`` fixes every later episode's start.
    backend : {"numpy", "tf"}
        What :meth:`step` and :meth:`reset` return: numpy arrays (default), or
        TensorFlow tensors left on the device (for a TF policy on a GPU: no
        copy to the host).  Actions may be either in both cases.
    device : str or None
        TensorFlow device (``"GPU:0"``, ``"CPU:0"``).  Default: the first GPU,
        else CPU:0.
    jit_compile : bool
        Compile the step with XLA (default True; the bits are the same either
        way: the rules are elementwise float32/int arithmetic).

    ``step`` follows gymnasium's next-step autoreset
    (``metadata["autoreset_mode"]``): the call after an environment's episode
    ended resets it, ignores its action and returns reward 0.  ``terminated``
    is always False; ``truncated`` is True on the step that reaches the end of
    the frame (or of the episode).  ``infos`` carries gym-anytrading's
    ``total_reward``, ``total_profit`` (float64 arrays holding its
    :data:`~flowsim.envs.stocks.ACC_DTYPE` values) and ``position``
    (int64: 0 Short, 1 Long), each with its ``_key`` mask (all True: every
    environment reports them on every call).
    """

    metadata = {"autoreset_mode": AutoresetMode.NEXT_STEP, "render_modes": []}

    def __init__(self, prices=None, num_envs=1, window_size=30, frame_bound=None,
                 episode_length=None, backend="numpy", device=None, jit_compile=True,
                 render_mode=None):
        check_batch(num_envs, backend)
        if render_mode is not None:
            raise ValueError(f"render_mode: TradingVectorEnv does not render, got "
                             f"{render_mode!r}")
        self.market = Market(prices, window_size, frame_bound)
        self.episode_length = self.market.check_episode_length(episode_length)
        self.num_envs = int(num_envs)
        self.window_size = self.market.window_size
        self.backend = backend
        self.render_mode = None
        self.single_action_space = gymnasium.spaces.Discrete(2)
        self.action_space = batch_space(self.single_action_space, self.num_envs)
        self.single_observation_space = gymnasium.spaces.Box(
            low=-OBS_BOUND, high=OBS_BOUND, shape=(self.window_size, 2), dtype=np.float32)
        self.observation_space = batch_space(self.single_observation_space, self.num_envs)
        self.device = device or default_device()
        self.jit_compile = bool(jit_compile)
        self._vars = None
        self._fns = None
        self._seeded = False
        self._ones = np.ones(self.num_envs, dtype=bool)

    # -- the rules (ForexVectorEnv changes them) -----------------------------------------
    @staticmethod
    def _fee_rows():
        return stocks.fee_factors()

    def _rule(self, *args):
        return stocks.step(*args)

    # -- state on the device -------------------------------------------------------
    # Three variables (each captured variable costs a TF call ~10 us): int32 rows
    # INTS, ACC_DTYPE rows TOTALS (the fee factors ride along as constant rows, so
    # the fee products see equal shapes: stocks.step), int64 rows KEYS.
    INTS = ("tick", "last", "position", "end", "done")
    TOTALS = ("total_reward", "total_profit", "fee_ask", "fee_bid")
    KEYS = ("seed", "episode")

    def _build(self):
        t = tf()
        n, m = self.num_envs, self.market
        # numpy observations of a CPU device: gathered by numpy from the host copy of
        # the windows (the same float32 rows; ~10x cheaper than a TF gather + copy out)
        host = self.backend == "numpy" and "CPU" in self.device.upper() and m.windows is not None
        self._host_windows = m.windows.reshape(-1, self.window_size, 2) if host else None
        self._host_rows = (np.arange(n) % m.n_series) * m.length
        with t.device(self.device):
            self._prices = t.constant(m.prices)
            self._observations = t.constant(m.observations)
            self._end_tick = t.constant(m.end_tick)
            self._series = t.constant(np.arange(n, dtype=np.int32) % m.n_series)
            totals = np.zeros((len(self.TOTALS), n), ACC_DTYPE)
            totals[2:] = self._fee_rows()[:, None]
            self._vars = (t.Variable(np.zeros((len(self.INTS), n), np.int32)),
                          t.Variable(totals),
                          t.Variable(np.zeros((len(self.KEYS), n), np.int64)))
        self.compile_calls(t.TensorSpec([n], t.int32))

    def _read(self):
        ints, totals, keys = (v.read_value() for v in self._vars)
        state = {k: ints[i] for i, k in enumerate(self.INTS)}
        state.update({k: totals[i] for i, k in enumerate(self.TOTALS)})
        state.update({k: keys[i] for i, k in enumerate(self.KEYS)})
        return state

    def _write(self, state):
        t = tf()
        state = dict(state, done=t.cast(state["done"], t.int32))
        for var, names in zip(self._vars, (self.INTS, self.TOTALS, self.KEYS)):
            var.assign(t.stack([state[k] for k in names]))

    def _fresh(self, state, mask):
        """``state`` with the environments of ``mask`` starting their next episode
        (numbered by ``state["episode"]``)."""
        t = tf()
        start, end = self._starts(self._series, self._end_tick, state["seed"],
                                  state["episode"])
        out = {"tick": start, "last": start - 1, "position": t.zeros_like(start), "end": end,
               "total_reward": t.zeros_like(state["total_reward"]),
               "total_profit": t.ones_like(state["total_profit"])}
        return dict(state, **{k: t.where(mask, x, state[k]) for k, x in out.items()})

    def _starts(self, series, end_tick, seeds, episodes):
        u = rng.uniform_keys(tf().stack([seeds, episodes]))
        return stocks.start_ticks(u, series, end_tick, self.window_size, self.episode_length)

    @property
    def ticks(self):
        """Current tick of every environment (numpy ``[num_envs]``; after ``reset``)."""
        if self._vars is None:
            raise RuntimeError("call reset() first")
        return self._vars[0][self.INTS.index("tick")].numpy()

    def start_ticks(self, seed, episode=0):
        """Start ticks ``[num_envs]`` of episode number ``episode`` (0 after a seeded
        reset, +1 at each later reset or autoreset) of every environment after
        ``reset(seed=seed)``: ``window_size`` for whole-frame episodes, else drawn."""
        t = tf()
        n = self.num_envs
        series = t.constant(np.arange(n, dtype=np.int32) % self.market.n_series)
        seeds = t.constant(np.arange(n, dtype=np.int64) + int(seed))
        start, _ = self._starts(series, t.constant(self.market.end_tick), seeds,
                                t.fill([n], t.constant(int(episode), t.int64)))
        return start.numpy()

    def _outputs(self, state, reward, truncated):
        """``(obs, table)``: observations (None when numpy gathers them on the host) and
        float64 rows reward, truncated, total_reward, total_profit, position, tick."""
        t = tf()
        obs = None
        if self._host_windows is None:
            obs = stocks.observe(self._observations, self._series, state["tick"],
                                 self.window_size)
        table = t.stack([t.cast(reward, t.float64), t.cast(truncated, t.float64),
                         t.cast(state["total_reward"], t.float64),
                         t.cast(state["total_profit"], t.float64),
                         t.cast(state["position"], t.float64),
                         t.cast(state["tick"], t.float64)])
        return obs, table

    def _step_fn(self, action):
        t = tf()
        old = self._read()
        reset = t.cast(old["done"], t.bool)
        tick, last, position, total_reward, total_profit, reward, truncated, _ = self._rule(
            self._prices, self._series, action, old["tick"], old["last"], old["position"],
            old["end"], old["total_reward"], old["total_profit"],
            (old["fee_ask"], old["fee_bid"]))
        stepped = dict(old, tick=tick, last=last, position=position,
                       total_reward=total_reward, total_profit=total_profit,
                       episode=old["episode"] + t.cast(reset, t.int64))
        state = self._fresh(stepped, reset)
        reward = t.where(reset, t.zeros_like(reward), reward)
        truncated = truncated & ~reset
        self._write(dict(state, done=truncated))
        return self._outputs(state, reward, truncated)

    def _reset_fn(self, mask, seeds, seeded):
        t = tf()
        old = self._read()
        episode = t.where(mask, t.where(seeded, t.zeros_like(old["episode"]),
                                        old["episode"] + 1), old["episode"])
        state = dict(old, seed=t.where(mask & seeded, seeds, old["seed"]), episode=episode)
        state = self._fresh(state, mask)
        state["done"] = t.cast(state["done"], t.bool) & ~mask
        self._write(state)
        return self._outputs(state, t.zeros(self.num_envs, t.float32),
                             t.zeros(self.num_envs, t.bool))

    # -- gymnasium API ---------------------------------------------------------------
    def reset(self, *, seed=None, options=None):
        """Reset every environment, or those of ``options["reset_mask"]``.

        ``seed``: an int seeds environment ``i`` with ``seed + i`` (gymnasium's
        rule), a list gives one seed (or None) per environment; None keeps an
        environment's seed and starts its next episode (a first reset without
        seed draws one from the OS).  Episode start ticks (``episode_length``)
        depend only on (seed, episode number).  Returns ``(obs, infos)``: the
        observations of all environments, and infos of those reset.
        """
        if self._vars is None:
            self._build()
        mask, args = self.reset_inputs(seed, options)
        obs, table = self._fns["reset"](*args)
        _, infos = self._finish(obs, table, mask)
        return self._observations, infos

    def step(self, actions):
        """Step every environment with ``actions`` (``[num_envs]`` of 0 Sell / 1 Buy,
        numpy or TF).  Returns ``(obs, rewards, terminations, truncations, infos)``."""
        if self._vars is None:
            raise RuntimeError("call reset() before step()")
        t = tf()
        actions = check_discrete_actions(actions, self.num_envs, 2, "0 Sell, 1 Buy")
        obs, table = self._fns["step"](actions)
        table, infos = self._finish(obs, table, self._ones)
        if self.backend == "tf":
            return (self._observations, table[0], t.zeros(self.num_envs, t.bool),
                    t.cast(table[1], t.bool), infos)
        return (self._observations, table[0], np.zeros(self.num_envs, bool),
                table[1].astype(bool), infos)

    def _finish(self, obs, table, mask):
        t = tf()
        if self.backend == "tf":
            self._observations = obs
            infos = {"total_reward": table[2], "total_profit": table[3],
                     "position": t.cast(table[4], t.int64)}
            masks = {f"_{k}": t.constant(mask) for k in INFO_KEYS}
            return table, {**infos, **masks}
        table = table.numpy()
        if obs is None:
            rows = self._host_rows + table[5].astype(np.int64)
            self._observations = np.take(self._host_windows, rows, axis=0)
        else:
            self._observations = obs.numpy()
        infos = {"total_reward": table[2], "total_profit": table[3],
                 "position": table[4].astype(np.int64)}
        if mask is not self._ones:
            infos = {k: np.where(mask, x, np.zeros_like(x)) for k, x in infos.items()}
        for k in INFO_KEYS:
            infos[f"_{k}"] = mask.copy()
        return table, infos

    def close_extras(self, **kwargs):
        self._vars = None
        self._fns = None

    def __repr__(self):
        return (f"TradingVectorEnv(num_envs={self.num_envs}, window_size={self.window_size}, "
                f"series={self.market.n_series}, backend={self.backend!r}, "
                f"device={self.device!r})")


class SingleEnv(gymnasium.Env):
    """One environment on a vector environment's code: a subclass sets ``self._vec``
    (``num_envs=1``) and ``_info(infos)`` (gymnasium's ``info`` from the vector
    ``infos``); ``_action(action)`` makes the vector action (default int64 ``[1]``)."""

    def reset(self, *, seed=None, options=None):
        """``(obs, info)`` of a new episode (``seed``: as gymnasium's)."""
        super().reset(seed=seed)
        if options:
            raise ValueError(f"options: {type(self).__name__} takes none, got "
                             f"{sorted(options)}")
        obs, infos = self._vec.reset(seed=seed)
        return obs[0], self._info(infos)

    def step(self, action):
        """``(obs, reward, terminated, truncated, info)`` after ``action``."""
        obs, reward, term, trunc, infos = self._vec.step(self._action(action))
        return obs[0], float(reward[0]), bool(term[0]), bool(trunc[0]), self._info(infos)

    @staticmethod
    def _action(action):
        return np.array([action], dtype=np.int64)

    def close(self):
        """Release the device state."""
        self._vec.close()


class TradingEnv(SingleEnv):
    """One gym-anytrading ``StocksEnv`` on :class:`TradingVectorEnv`'s code
    (``gymnasium.make("flowsim/Stocks-v0")``).

    Takes :class:`TradingVectorEnv`'s keywords except ``num_envs`` and ``backend``.
    An action is 0 (Sell) or 1 (Buy).  ``info`` holds ``total_reward``,
    ``total_profit`` (floats) and ``position`` (0 Short, 1 Long).  For speed, step
    many environments with :class:`TradingVectorEnv` instead: one call costs about
    the same for one environment or a thousand.
    """

    metadata = {"render_modes": []}

    def __init__(self, prices=None, window_size=30, frame_bound=None, episode_length=None,
                 device=None, jit_compile=True, render_mode=None):
        self._vec = TradingVectorEnv(prices, 1, window_size, frame_bound, episode_length,
                                     device=device, jit_compile=jit_compile,
                                     render_mode=render_mode)
        self.observation_space = self._vec.single_observation_space
        self.action_space = self._vec.single_action_space

    @staticmethod
    def _info(infos):
        return {"total_reward": float(infos["total_reward"][0]),
                "total_profit": float(infos["total_profit"][0]),
                "position": int(infos["position"][0])}


class ForexVectorEnv(TradingVectorEnv):
    """``num_envs`` gym-anytrading ``ForexEnv`` environments stepped together
    (``gymnasium.make_vec("flowsim/Forex-v0", ...)``).

    :class:`TradingVectorEnv`'s keywords and behaviour with ForexEnv's rewards and
    profits (:mod:`flowsim.envs.forex`): pips won on each trade (Long and Short),
    and the profit in the ``unit_side`` currency after a 0.0003 fee.  Defaults as
    ``forex-v0``: ``window_size=24``; pass
    ``gym_anytrading.datasets.FOREX_EURUSD_1H_ASK`` for its data (default: flowsim's
    bundled sample series).

    ``unit_side`` : ``"left"`` (default) or ``"right"``, as gym-anytrading's.
    """

    def __init__(self, prices=None, num_envs=1, window_size=24, frame_bound=None,
                 episode_length=None, unit_side="left", backend="numpy", device=None,
                 jit_compile=True, render_mode=None):
        if not isinstance(unit_side, str) or unit_side.lower() not in forex.UNIT_SIDES:
            raise ValueError(f"unit_side must be 'left' or 'right', got {unit_side!r}")
        self.unit_side = unit_side.lower()
        super().__init__(prices, num_envs, window_size, frame_bound, episode_length,
                         backend=backend, device=device, jit_compile=jit_compile,
                         render_mode=render_mode)

    @staticmethod
    def _fee_rows():
        return forex.fee_factors()

    def _rule(self, *args):
        return forex.step(*args, unit_side=self.unit_side)


class ForexEnv(TradingEnv):
    """One gym-anytrading ``ForexEnv`` on :class:`ForexVectorEnv`'s code
    (``gymnasium.make("flowsim/Forex-v0")``); keywords as :class:`ForexVectorEnv`
    except ``num_envs`` and ``backend``."""

    def __init__(self, prices=None, window_size=24, frame_bound=None, episode_length=None,
                 unit_side="left", device=None, jit_compile=True, render_mode=None):
        self._vec = ForexVectorEnv(prices, 1, window_size, frame_bound, episode_length,
                                   unit_side, device=device, jit_compile=jit_compile,
                                   render_mode=render_mode)
        self.observation_space = self._vec.single_observation_space
        self.action_space = self._vec.single_action_space
