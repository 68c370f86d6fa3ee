"""gym-trading-env's ``TradingEnv``, batched: a gymnasium VectorEnv stepped in one TF call.

:class:`PortfolioVectorEnv` takes gym-trading-env 0.3.5's keywords (``df``,
``positions``, ``trading_fees``, ``borrow_interest_rate``, ...) and steps
``num_envs`` environments with its rules (:mod:`flowsim.envs.portfolio`) in
one compiled call; :class:`PortfolioEnv` is one of them
(``gymnasium.make("flowsim/TradingEnv-v0", df=...)``).
"""

import gymnasium
import numpy as np
from gymnasium.vector import AutoresetMode
from gymnasium.vector.utils import batch_space

from ..core.kernel import fusion_barrier
from ..core.lazy_tf import tf
from .portfolio import NOW, PortfolioRules
from .vector import (
    CompiledVectorEnv,
    SingleEnv,
    check_batch,
    check_discrete_actions,
    check_discrete_numpy,
    default_device,
)

#: History columns reported as integers in ``infos``.
INT_COLUMNS = ("idx", "step", "position_index")
RENDER_MODES = ("rgb_array",)


def metrics_text(close_first, close_last, value_first, value_last):
    """gym-trading-env's two metrics, formatted as it formats them."""
    return {"Market Return": f"{100 * (close_last / close_first - 1):5.2f}%",
            "Portfolio Return": f"{100 * (value_last / value_first - 1):5.2f}%"}


def choose_eager(eager, num_envs, backend, dtype):
    """Whether a :class:`PortfolioVectorEnv` steps in numpy (its ``eager`` keyword)."""
    from .portfolio_eager import EAGER_MAX_ENVS
    if eager is None:
        return num_envs <= EAGER_MAX_ENVS and backend == "numpy" and dtype == "float64"
    if not isinstance(eager, bool):
        raise TypeError(f"eager must be None, True or False, got {eager!r}")
    if eager and (backend != "numpy" or dtype != "float64"):
        raise ValueError(f"eager=True steps in numpy, float64: it needs backend='numpy' "
                         f"and dtype='float64', got backend={backend!r}, dtype={dtype!r}")
    return eager


class PortfolioVectorEnv(CompiledVectorEnv, gymnasium.vector.VectorEnv):
    """``num_envs`` gym-trading-env ``TradingEnv`` environments stepped together.

    The keywords and their defaults are gym-trading-env 0.3.5's, so its
    documentation applies; flowsim adds the batch, seeds and device.

    Parameters
    ----------
    df : pandas.DataFrame
        The market: a ``close`` column (prices > 0) and feature columns, those
        whose name contains ``"feature"`` (the observation; finite numbers).
        Other numeric columns are readable by reward and feature functions as
        ``history["data_<name>", t]``; all of them, and the index (``date``),
        appear in ``infos``.
    num_envs : int
        Environments (default 1).  All trade the same ``df``, each from its
        own start row and initial position.
    positions : list of numbers
        The positions an action chooses (default ``[0, 1]``): ``-1`` all short,
        ``0`` flat, ``1`` all long, ``> 1`` leveraged, fractions in between.
        Action ``i`` targets ``positions[i]``.  Non-empty and distinct; for
        ``action_space="box"`` increasing.
    dynamic_feature_functions : list of functions or None
        Functions ``f(history)`` appended to the observation at each step
        (float32); None (default) gives gym-trading-env's two, the last
        position taken and the real position.  ``history`` is a
        :class:`flowsim.envs.portfolio_history.History`: ``history["position", -1]``
        holds the values of every environment and takes numpy operators and
        ufuncs, so a function written for gym-trading-env runs unchanged.
    reward_function : function or None
        ``f(history)`` -> the step's reward; None (default): gym-trading-env's
        ``log(valuation[-1] / valuation[-2])``.
    windows : int or None
        None (default): an observation is the current row of features.  ``N``:
        the last ``N`` rows, ``[N, n_features]``; episodes start at row
        ``N - 1`` or later.
    trading_fees : float
        Fee on each trade as a fraction (default 0; ``0.001`` is 0.1 %), in
        [0, 1).  Trades are grossed up so that the target position holds after
        the fee.
    borrow_interest_rate : float
        Interest per step on borrowed assets (shorts) and cash (leverage),
        default 0.  As in gym-trading-env it is recomputed each step from what
        is borrowed, subtracted from the valuation, and paid only in proportion
        when a short or leverage is reduced.
    portfolio_initial_value : float
        Valuation at the start of an episode (default 1000).
    initial_position : number or "random"
        A member of ``positions``, or ``"random"`` (default): drawn uniformly
        per environment and episode.
    max_episode_duration : int or "max"
        ``"max"`` (default): episodes run from the first row to the data's
        end.  ``D``: each episode starts at a row drawn uniformly in
        ``[first, len(df) - D - first)`` (gym-trading-env's range) and is
        truncated after ``D - 1`` steps.
    verbose : int
        1: print gym-trading-env's metrics line when an episode ends.  Default
        0 (a batch would print thousands).
    name : str
        The market's name (render titles).
    render_mode : None or "rgb_array"
        :meth:`render` draws environment 0's current episode (price,
        positions, portfolio valuation) as an RGB array (needs matplotlib).
    action_space : {"discrete", "box"}
        ``"discrete"`` (default, gym-trading-env's): ``Discrete(len(positions))``.
        ``"box"``: an action is the target position itself, a float in
        ``[positions[0], positions[-1]]``, with the same fee and borrowing rules.
    history_length : int
        Entries of the history readable back from the last (``-1 ..
        -history_length``; entry 0 always is); default 2.
    backend : {"numpy", "tf"}
        What :meth:`step` returns: numpy arrays (default) or TF tensors on the
        device.
    device : str or None
        TensorFlow device; default the first GPU, else CPU:0.
    jit_compile : bool
        Compile the step with XLA (default True).
    dtype : {"float64", "float32"}
        What money, prices and positions are computed in: ``"float64"`` (default,
        gym-trading-env's numbers) or ``"float32"`` (GPUs run it at full speed;
        valuations then differ from gym-trading-env's at float32's precision,
        about 1e-7 relative per step).  Observations are float32 either way.
    eager : bool or None
        Step in numpy from Python (:mod:`flowsim.envs.portfolio_eager`) instead
        of one compiled TF call: a call costs some hundred microseconds however
        few environments it steps, numpy a few per environment.  None (default):
        eager up to ``EAGER_MAX_ENVS`` (16) environments with the numpy backend
        and float64.  The same observations, rewards, infos and history, bit for
        bit, on CPUs (history functions using ``np.exp``, ``np.tanh`` and the
        like excepted: XLA computes those its own way; ``np.log`` is the same).
        ``True`` needs ``backend="numpy"`` and ``dtype="float64"``.

    Seeds: ``reset(seed=s)`` seeds environment ``i`` with ``s + i``; its start
    rows and random initial positions are a pure function of (seed, episode
    number), where gym-trading-env draws them from numpy's global generator
    whatever the seed.  Autoreset is gymnasium's next-step mode.  ``infos``
    holds gym-trading-env's ``info`` fields, each an array ``[num_envs]`` with
    its ``_key`` mask.
    """

    metadata = {"autoreset_mode": AutoresetMode.NEXT_STEP, "render_modes": list(RENDER_MODES),
                "render_fps": 4}

    def __init__(self, df, num_envs=1, positions=(0, 1), dynamic_feature_functions=None,
                 reward_function=None, windows=None, trading_fees=0, borrow_interest_rate=0,
                 portfolio_initial_value=1000, initial_position="random",
                 max_episode_duration="max", verbose=0, name="Stock", render_mode=None,
                 action_space="discrete", history_length=2, backend="numpy", device=None,
                 jit_compile=True, dtype="float64", eager=None):
        check_batch(num_envs, backend)
        if dtype not in ("float64", "float32"):
            raise ValueError(f"dtype must be 'float64' or 'float32', got {dtype!r}")
        self.dtype = np.dtype(dtype)
        self.eager = choose_eager(eager, num_envs, backend, dtype)
        if render_mode is not None and render_mode not in RENDER_MODES:
            raise ValueError(f"render_mode must be None or one of {RENDER_MODES}, got "
                             f"{render_mode!r}")
        self.portfolio = PortfolioRules(df, positions, dynamic_feature_functions, reward_function,
                                   windows, trading_fees, borrow_interest_rate,
                                   portfolio_initial_value, initial_position,
                                   max_episode_duration, action_space, history_length)
        self.num_envs = int(num_envs)
        self.positions = list(positions)
        self.verbose, self.name = int(verbose), str(name)
        self.render_mode = render_mode
        self.backend = backend
        p = self.portfolio
        if action_space == "box":
            self.single_action_space = gymnasium.spaces.Box(
                low=p.positions[0], high=p.positions[-1], shape=(), dtype=self.dtype)
        else:
            self.single_action_space = gymnasium.spaces.Discrete(len(p.positions))
        self.action_space = batch_space(self.single_action_space, self.num_envs)
        self.single_observation_space = gymnasium.spaces.Box(
            -np.inf, np.inf, shape=p.observation_shape, dtype=np.float32)
        self.observation_space = batch_space(self.single_observation_space, self.num_envs)
        self.device = device or default_device()
        self.jit_compile = bool(jit_compile)
        self.log_metrics = []
        # an ended episode's close and valuation (first, last: [4, num_envs]) and added
        # metrics; get_metrics() formats them (thousands of strings, only when asked)
        self._returns = np.zeros((4, self.num_envs))
        self._ended = np.zeros(self.num_envs, dtype=bool)
        self._added = [{} for _ in range(self.num_envs)]
        self._metrics = None
        self._mask_keys = self._info_columns = None
        self._vars = self._fns = self._eager = None
        self._seeded = False
        self._ones = np.ones(self.num_envs, dtype=bool)
        self._first = np.zeros((len(p.columns), self.num_envs))   # entry 0, for metrics
        self._recorder = None           # the episodes' entries the added metrics read
        self._kept_columns = []         # every column, after keep_history()
        self._episode = []              # environment 0's entries, for render()
        self._data = {c: p.info_frame[c].to_numpy() for c in p.info_frame.columns}

    # -- state on the device -----------------------------------------------------------
    # Three variables (each captured one costs the call some microseconds): int64 rows
    # INTS; float64 rows MONEY then the kept history (PortfolioRules.kept: entry 0's
    # columns, then the ring of entries before the last), with the rules' numbers as
    # rows (never constants: PortfolioRules.rule_rows); float32 dynamic features.
    INTS = ("idx", "step", "done", "seed", "episode")
    MONEY = ("asset", "fiat", "interest_asset", "interest_fiat", "position", *PortfolioRules.RULES)

    def _build(self):
        t = tf()
        n, p = self.num_envs, self.portfolio
        first, ring, _ = p.kept
        money = np.zeros((len(self.MONEY) + len(first) + len(ring), n), self.dtype)
        money[5:9] = p.rule_rows()[:, None]
        with t.device(self.device):
            self._c = p.in_dtype(p.constants(), self.dtype)
            self._vars = (t.Variable(np.zeros((len(self.INTS), n), np.int64)),
                          t.Variable(money),
                          t.Variable(np.zeros((n, p.window_rows, p.n_dynamic), np.float32)))
        box = p.action_space == "box"
        self.compile_calls(t.TensorSpec([n], t.as_dtype(self.dtype) if box else t.int32))

    def _read(self):
        """``(state, done, keys)`` from the variables (and the rules into ``self._c``)."""
        t = tf()
        ints, money, dyn = (v.read_value() for v in self._vars)
        n_first = len(self.portfolio.kept[0])
        self._c["rules"] = money[5:9]
        state = {"idx": t.cast(ints[0], t.int32), "step": t.cast(ints[1], t.int32),
                 "wallet": money[:4], "position": money[4], "first": money[9:9 + n_first],
                 "ring": money[9 + n_first:], "dyn": dyn}
        return state, t.cast(ints[2], t.bool), ints[3:5]

    def _write(self, state, done, keys):
        t = tf()
        ints, money, dyn = self._vars
        ints.assign(t.concat([t.cast(t.stack([state["idx"], state["step"]]), t.int64),
                              t.cast(done, t.int64)[None], keys], 0))
        money.assign(t.concat([state["wallet"], state["position"][None], self._c["rules"],
                               state["first"], state["ring"]], 0))
        dyn.assign(state["dyn"])

    def _fresh(self, state, mask, keys):
        """``(state, now)``: ``state`` with the environments of ``mask`` starting the
        episode numbered by ``keys``, and the first entry of every environment's
        next episode."""
        t = tf()
        start, index = self.portfolio.draws(keys[0], keys[1])
        # drawn once (integers: no rounding changes), not inside every kernel reading them
        start, index = fusion_barrier(keys[1][0] >= 0, start, index)
        fresh, now = self.portfolio.fresh(self._c, start, index)
        return {k: t.where(mask[:, None, None] if k == "dyn" else mask, a, state[k])
                for k, a in fresh.items()}, now

    def _outputs(self, state, now, terminated, truncated):
        """``(obs, table)``: observations and float64 rows reward, terminated, truncated
        and the entry's columns of ``infos`` (:attr:`info_columns`)."""
        t = tf()
        p = self.portfolio
        obs = p.observe(self._c, state)
        real = now["reward"].dtype
        rows = [now["reward"], t.cast(terminated, real), t.cast(truncated, real)]
        rows += [p.column(self._c, now, col) for col in self.info_columns]
        return obs, t.stack(rows)

    @property
    def info_columns(self):
        """History columns the compiled call returns for ``infos``: the entry's, less
        the reward (row 0) and, with numpy infos, the data columns (read on the
        host from ``idx``)."""
        if self._info_columns is None:
            self._info_columns = [c for c in self.portfolio.columns if c != "reward" and (
                self.backend == "tf" or not c.startswith("data_"))]
        return self._info_columns

    def _step_fn(self, action):
        t = tf()
        p = self.portfolio
        state, reset, keys = self._read()
        if p.action_space == "box":
            target, index = action, -t.ones_like(state["idx"])
        else:
            target, index = t.gather(self._c["positions"], action), action
        stepped, reward, terminated, truncated, now = p.step(self._c, state, target, index,
                                                             exact=True)
        keys = t.stack([keys[0], keys[1] + t.cast(reset, t.int64)])
        now = {k: now[k] for k in NOW}      # fresh()'s keys: the step's entry less "dyn"
        # the next episodes' state only on a step where some environment starts one
        # (its random draws and first entry cost about half of a step's kernels)
        state, now = t.cond(t.reduce_any(reset),
                            lambda: self._autoreset(stepped, now, reset, keys),
                            lambda: (stepped, now))
        terminated, truncated = terminated & ~reset, truncated & ~reset
        self._write(state, terminated | truncated, keys)
        return self._outputs(state, now, terminated, truncated)

    def _autoreset(self, stepped, now, reset, keys):
        """``(state, now)`` after a step: the environments of ``reset`` (those that
        ended on the previous step) start their next episode, numbered by ``keys``."""
        t = tf()
        state, fresh = self._fresh(stepped, reset, keys)
        now = {k: tuple(t.where(reset, x, y) for x, y in zip(a, now[k])) if k == "wallet"
               else t.where(reset, a, now[k]) for k, a in fresh.items()}
        return state, now

    def _reset_fn(self, mask, seeds, seeded):
        t = tf()
        state, done, keys = self._read()
        episode = t.where(mask, t.where(seeded, t.zeros_like(keys[1]), keys[1] + 1), keys[1])
        keys = t.stack([t.where(mask & seeded, seeds, keys[0]), episode])
        state, now = self._fresh(state, mask, keys)
        self._write(state, done & ~mask, keys)
        false = t.zeros([self.num_envs], t.bool)
        return self._outputs(state, now, false, false)

    def episode_starts(self, seed, episode=0):
        """``(rows, positions)``: the start rows and initial positions (numpy
        ``[num_envs]``) of episode number ``episode`` (0 after a seeded reset, +1 at
        each later reset or autoreset) of every environment after
        ``reset(seed=seed)``."""
        t = tf()
        n = self.num_envs
        seeds = t.constant(np.arange(n, dtype=np.int64) + int(seed))
        start, index = self.portfolio.draws(seeds, t.fill([n], t.constant(int(episode),
                                                                           t.int64)))
        return start.numpy(), self.portfolio.positions[index.numpy()]

    # -- gymnasium API -------------------------------------------------------------------
    def reset(self, *, seed=None, options=None):
        """Reset every environment, or those of ``options["reset_mask"]``; ``seed`` as
        :meth:`flowsim.envs.TradingVectorEnv.reset`.  Returns ``(obs, infos)``."""
        if self.eager:
            if self._eager is None:
                from .portfolio_eager import EagerSteps
                self._eager = EagerSteps(self.portfolio, self.num_envs, self.info_columns)
            mask, seeds, given = self.reset_values(seed, options)
            obs, table = self._eager.reset(mask, seeds, given)
        else:
            if self._vars is None:
                self._build()
            mask, args = self.reset_inputs(seed, options)
            obs, table = self._fns["reset"](*args)
        obs, _, _, _, infos = self._finish(obs, table, mask, fresh=mask)
        if mask[0]:
            self._record(infos)
        return obs, infos

    def step(self, actions):
        """Step every environment with ``actions`` ``[num_envs]``: position indices
        (discrete) or target positions (box).  Returns ``(obs, rewards, terminations,
        truncations, infos)``; rewards float64."""
        if self._vars is None and self._eager is None:
            raise RuntimeError("call reset() before step()")
        if self.eager:
            obs, table = self._eager.step(*self._eager_actions(actions))
        else:
            obs, table = self._fns["step"](self._check_actions(actions))
        out = self._finish(obs, table, self._ones)
        if self.backend == "numpy":
            self._episode_ends(out[4], out[2] | out[3])
            self._record(out[4])
        return out

    def _check_actions(self, actions):
        p = self.portfolio
        if p.action_space == "discrete":
            return check_discrete_actions(actions, self.num_envs, len(p.positions),
                                          f"indices into positions {p.positions.tolist()}")
        t = tf()
        a = actions.numpy() if isinstance(actions, t.Tensor) else np.asarray(actions)
        return t.constant(self._check_box(a))

    def _check_box(self, a):
        """Box actions ``a`` (numpy) as target positions in ``self.dtype``, refused
        naming the range when outside it."""
        p = self.portfolio
        if a.shape != (self.num_envs,) or not np.issubdtype(a.dtype, np.number):
            raise ValueError(f"actions must be {self.num_envs} target positions (numbers), "
                             f"got shape {list(a.shape)} dtype {a.dtype}")
        low, high = p.positions[0], p.positions[-1]
        bad = ~((a >= low) & (a <= high))
        if bad.any():
            raise ValueError(f"actions must be target positions in [{low}, {high}] "
                             f"(positions[0], positions[-1]), got {float(a[bad][0])!r}")
        return a.astype(self.dtype)

    def _eager_actions(self, actions):
        """``(targets, index)`` of ``actions`` for :class:`EagerSteps`: target positions
        (a list of floats) and position indices (-1 for box actions); refused as
        :meth:`_check_actions` refuses them."""
        p = self.portfolio
        a = actions.numpy() if hasattr(actions, "numpy") else np.asarray(actions)
        if p.action_space == "discrete":
            a = check_discrete_numpy(a, self.num_envs, len(p.positions),
                                     f"indices into positions {p.positions.tolist()}")
            return p.positions[a].tolist(), a
        return self._check_box(a).tolist(), np.full(self.num_envs, -1)

    def _finish(self, obs, table, mask, fresh=None):
        """gymnasium's ``(obs, rewards, terminations, truncations, infos)`` from the
        compiled call's outputs; ``fresh``: the environments that start an episode
        (default: those at step 0), whose entry 0 the metrics keep."""
        columns = self.info_columns
        if self.backend == "tf":
            return self._finish_tf(obs, table, mask)
        if not isinstance(table, np.ndarray):
            obs, table = obs.numpy(), table.numpy()
        infos = dict(zip(columns, table[3:]))
        for c in INT_COLUMNS:
            infos[c] = infos[c].astype(np.int64)
        idx = infos["idx"]
        infos["date"] = self.portfolio.index.take(idx)
        for c, values in self._data.items():
            infos[f"data_{c}"] = values.take(idx)
        infos["reward"] = table[0]
        fresh = np.flatnonzero(infos["step"] == 0 if fresh is None else fresh)
        if fresh.size:
            self._first[:, fresh] = self._entries(infos, fresh)
        if self._recorder is not None:
            self._recorder.add(infos, fresh, np.flatnonzero(mask))
        if self._mask_keys is None:
            self._mask_keys = [f"_{k}" for k in infos]
        if mask is self._ones:
            masks = np.ones((len(infos), self.num_envs), dtype=bool)
        else:
            infos = {k: np.where(mask, x, np.zeros_like(x)) for k, x in infos.items()}
            masks = np.repeat(mask[None], len(infos), axis=0)
        infos.update(zip(self._mask_keys, masks))     # one array each (rows of one block)
        return obs, table[0], table[1].astype(bool), table[2].astype(bool), infos

    def _finish_tf(self, obs, table, mask):
        """:meth:`_finish` with ``backend="tf"``: tensors on the device."""
        t = tf()
        infos = {c: table[3 + i] for i, c in enumerate(self.info_columns)}
        infos = {c: t.cast(x, t.int64) if c in INT_COLUMNS else x for c, x in infos.items()}
        infos["reward"] = table[0]
        masks = {f"_{c}": t.constant(mask) for c in infos}
        return (obs, table[0], t.cast(table[1], t.bool), t.cast(table[2], t.bool),
                {**infos, **masks})

    def _entries(self, infos, rows):
        """History entries ``[len(columns), len(rows)]`` (float64) of environments
        ``rows`` from numpy ``infos``."""
        return np.stack([np.asarray(infos[c][rows], np.float64)
                         for c in self.portfolio.columns])

    def _episode_ends(self, infos, ended):
        if not ended.any():
            return
        p = self.portfolio
        rows = np.flatnonzero(ended)
        first, last = self._first[:, rows], self._entries(infos, rows)
        value, close = p.columns.index("portfolio_valuation"), p.columns.index("data_close")
        self._returns[:, rows] = first[close], last[close], first[value], last[value]
        self._ended[rows] = True
        self._metrics = None
        for i in rows:
            self._added[i] = {}
        for i in rows if self._recorder is not None else ():
            history = self._recorder.episode(i)
            for metric in self.log_metrics:
                self._added[i][metric["name"]] = metric["function"](history)
        if self.verbose > 0:
            for i in rows:
                print("".join(f"{k} : {v}   |   " for k, v in self._metrics_of(i).items()))

    def _metrics_of(self, i):
        """Environment ``i``'s metrics of its last finished episode (a dict)."""
        if not self._ended[i]:
            return {}
        return {**metrics_text(*self._returns[:, i]), **self._added[i]}

    def add_metric(self, name, function):
        """Add a metric ``function(history)`` computed for each environment whose
        episode ends, as gym-trading-env's: ``history`` is that episode's history from
        its reset on (:class:`flowsim.envs.episode_history.EpisodeHistory`:
        ``history["position"]`` every entry's position, ``history["position", -1]`` the
        last).  The function is called once right away on a short history, so one that
        cannot work is refused now, naming it (a TypeError), not when an episode ends.
        Add metrics before :meth:`reset`: an episode already running keeps only its
        entries from the call on."""
        from .episode_history import EpisodeRecorder, check_metric
        read = check_metric(name, function, self._history_columns())
        self.log_metrics.append({"name": name, "function": function, "columns": read})
        needed = sorted({c for m in self.log_metrics for c in m["columns"]}
                        | set(self._kept_columns))
        self._recorder = EpisodeRecorder(needed, self.num_envs)

    def keep_history(self):
        """Keep every column of each environment's episode from its reset on, for
        :meth:`historical_info` (the single :class:`PortfolioEnv` does by default).
        Call it before :meth:`reset`."""
        from .episode_history import EpisodeRecorder
        self._kept_columns = self._history_columns()
        needed = sorted({c for m in self.log_metrics for c in m["columns"]}
                        | set(self._kept_columns))
        self._recorder = EpisodeRecorder(needed, self.num_envs)

    def _history_columns(self):
        return [*self.portfolio.columns, *(c for c in ("reward",)
                                           if c not in self.portfolio.columns)]

    def historical_info(self, env=0):
        """Environment ``env``'s episode so far, as gym-trading-env's
        ``historical_info`` (:class:`flowsim.envs.episode_history.EpisodeHistory`: every
        column, and ``date``), after :meth:`keep_history`."""
        from .episode_history import EpisodeHistory
        if not self._kept_columns:
            raise RuntimeError("historical_info needs keep_history() before reset()")
        episode = self._recorder.episode(env)
        arrays = {c: episode.arrays[c] for c in self._kept_columns}
        arrays["date"] = self.portfolio.index.take(arrays["idx"].astype(np.int64))
        return EpisodeHistory(arrays)

    def get_metrics(self):
        """Each environment's metrics of its last finished episode (gym-trading-env's
        ``Market Return`` and ``Portfolio Return`` strings and added metrics; an empty
        dict before its first episode ends): a list ``[num_envs]``.  Kept with the
        numpy backend only (``backend="tf"`` leaves the results on the device)."""
        if self._metrics is None:
            self._metrics = [self._metrics_of(i) for i in range(self.num_envs)]
        return self._metrics

    # -- rendering ---------------------------------------------------------------------
    def _record(self, infos):
        if self.render_mode is None or self.backend != "numpy":
            return
        if infos["step"][0] == 0:
            self._episode = []
        self._episode.append({k: infos[k][0] for k in ("idx", "position", "real_position",
                                                       "portfolio_valuation")})

    def render(self):
        """Environment 0's episode so far, as an RGB array ``[H, W, 3]`` (uint8)."""
        if self.render_mode is None:
            gymnasium.logger.warn("render() without render_mode='rgb_array' draws nothing")
            return None
        from .portfolio_render import draw_episode
        return draw_episode(self.portfolio.close, self._episode, self.name)

    def render_all(self, path=None):
        """Draw environment 0's episode (price with positions, portfolio valuation)
        into a matplotlib figure; saved to ``path`` if given.  Returns the figure."""
        from .portfolio_render import episode_figure
        return episode_figure(self.portfolio.close, self._episode, self.name, path)

    def close_extras(self, **kwargs):
        self._vars = self._fns = self._eager = None

    def __repr__(self):
        p = self.portfolio
        return (f"PortfolioVectorEnv(num_envs={self.num_envs}, positions="
                f"{p.positions.tolist()}, trading_fees={p.trading_fees}, "
                f"borrow_interest_rate={p.borrow_interest_rate}, windows={p.windows}, "
                f"backend={self.backend!r}, device={self.device!r}, eager={self.eager})")


class PortfolioEnv(SingleEnv):
    """One gym-trading-env ``TradingEnv`` on :class:`PortfolioVectorEnv`'s code
    (``gymnasium.make("flowsim/TradingEnv-v0", df=...)``).

    Takes :class:`PortfolioVectorEnv`'s keywords except ``num_envs`` and
    ``backend``; ``verbose`` defaults to 1 as in gym-trading-env.  ``info`` is
    gym-trading-env's dict (``idx``, ``step``, ``date``, ``position_index``,
    ``position``, ``real_position``, ``data_*``, ``portfolio_valuation``,
    ``portfolio_distribution_*``, ``reward``).  For speed step many at once with
    :class:`PortfolioVectorEnv`.

    With ``eager`` (default: True, float64) it steps in numpy
    (:mod:`flowsim.envs.portfolio_eager`) and builds ``info`` and the episode's
    history straight from the step's numbers, with the compiled step's values.
    """

    metadata = {"render_modes": list(RENDER_MODES), "render_fps": 4}

    def __init__(self, df, verbose=1, render_mode=None, **kwargs):
        for key in ("num_envs", "backend"):
            if key in kwargs:
                raise TypeError(f"PortfolioEnv takes no {key!r}: use PortfolioVectorEnv")
        self._vec = PortfolioVectorEnv(df, 1, verbose=verbose, render_mode=render_mode,
                                       **kwargs)
        self._vec.keep_history()
        self._info_keys = None
        self._rows = []                 # the episode's info dicts (eager)
        self._metrics = {}
        self._data = None               # the data_* columns as lists (eager)
        self.df = df
        self.render_mode = render_mode
        self.observation_space = self._vec.single_observation_space
        self.action_space = self._vec.single_action_space

    @staticmethod
    def _action(action):
        """A position index, or a target position with ``action_space="box"``."""
        return np.reshape(np.asarray(action), [1])

    def _info(self, infos):
        if self._info_keys is None:
            self._info_keys = [k for k in infos if not k.startswith("_")]
        return {k: infos[k][0] if k == "date" else infos[k].item(0) for k in self._info_keys}

    def reset(self, *, seed=None, options=None):
        """``(obs, info)`` of a new episode (``seed``: as gymnasium's)."""
        if not self._vec.eager:
            return super().reset(seed=seed, options=options)
        gymnasium.Env.reset(self, seed=seed)
        if options:
            raise ValueError(f"options: {type(self).__name__} takes none, got "
                             f"{sorted(options)}")
        vec = self._vec
        if vec._eager is None:
            from .portfolio_eager import EagerSteps
            vec._eager = EagerSteps(vec.portfolio, 1, vec.info_columns)
        vec._eager.start_episodes(*vec.reset_values(seed, None))
        return self._entry([False], [False])[0], self._rows[-1]

    def step(self, action):
        """``(obs, reward, terminated, truncated, info)`` after ``action``."""
        vec = self._vec
        if not vec.eager:
            return super().step(action)
        if vec._eager is None:
            raise RuntimeError("call reset() before step()")
        p = vec.portfolio
        if p.action_space == "discrete" and type(action) is int and \
                0 <= action < len(p.positions):
            targets, index = [p.positions.item(action)], [action]
        else:
            targets, index = vec._eager_actions(self._action(action))
            index = index.tolist()
        obs, terminated, truncated = self._entry(*vec._eager.move(targets, index))
        info = self._rows[-1]
        return obs, info["reward"], terminated, truncated, info

    def _entry(self, terminated, truncated):
        """``(obs, terminated, truncated)`` of the eager step just taken; its
        ``info`` appended to the episode (:attr:`historical_info`)."""
        vec, steps = self._vec, self._vec._eager
        info = steps.entry(0)
        idx = info["idx"]
        info["date"] = vec.portfolio.index[idx]
        if self._data is None:
            self._data = [(f"data_{c}", values.tolist()) for c, values in vec._data.items()]
        for key, values in self._data:
            info[key] = values[idx]
        info["reward"] = steps.now["reward"][0]
        if info["step"] == 0:
            self._rows = []
            vec._episode = []
        self._rows.append(info)
        if vec.render_mode is not None:
            vec._episode.append({k: info[k] for k in ("idx", "position", "real_position",
                                                      "portfolio_valuation")})
        terminated, truncated = bool(terminated[0]), bool(truncated[0])
        if terminated or truncated:
            self._episode_end()
        return steps.observe()[0], terminated, truncated

    def _episode_end(self):
        first, last = self._rows[0], self._rows[-1]
        self._metrics = metrics_text(first["data_close"], last["data_close"],
                                     first["portfolio_valuation"],
                                     last["portfolio_valuation"])
        if self._vec.log_metrics:
            history = self._history(self._vec._recorder.columns)
            for metric in self._vec.log_metrics:
                self._metrics[metric["name"]] = metric["function"](history)
        if self._vec.verbose > 0:
            print("".join(f"{k} : {v}   |   " for k, v in self._metrics.items()))

    def _history(self, columns):
        from .episode_history import EpisodeHistory
        return EpisodeHistory({c: np.array([row[c] for row in self._rows], np.float64)
                               for c in columns})

    def get_metrics(self):
        """gym-trading-env's metrics of the last finished episode."""
        if self._vec.eager:
            return self._metrics
        return self._vec.get_metrics()[0]

    def add_metric(self, name, function):
        self._vec.add_metric(name, function)

    def render(self):
        return self._vec.render()

    def render_all(self, path=None):
        return self._vec.render_all(path)

    @property
    def historical_info(self):
        """The episode so far, as gym-trading-env's ``historical_info``:
        ``historical_info["position"]``, ``["portfolio_valuation", -1]``, ``[-1]``..."""
        if not self._vec.eager:
            return self._vec.historical_info(0)
        from .episode_history import EpisodeHistory
        arrays = self._history(self._vec._kept_columns).arrays
        arrays["date"] = self._vec.portfolio.index.take(arrays["idx"].astype(np.int64))
        return EpisodeHistory(arrays)

    def save_for_render(self, dir="render_logs"):
        """Write the episode for gym-trading-env's renderer, as gym-trading-env does:
        ``df`` joined with the episode's history on the date, pickled to
        ``dir/<name>_<time>.pkl``.  Returns the file's path."""
        import datetime
        import os

        import pandas as pd
        missing = [c for c in ("open", "high", "low", "close") if c not in self.df]
        if missing:
            raise ValueError(f"save_for_render needs the DataFrame columns open, high, low "
                             f"and close (gym-trading-env's renderer draws candles); "
                             f"missing {missing}")
        history = self.historical_info
        frame = pd.DataFrame({c: history[c] for c in history.columns}).set_index("date")
        frame = self.df.join(frame.sort_index(), how="inner")
        os.makedirs(dir, exist_ok=True)
        stamp = datetime.datetime.now().strftime("%Y-%m-%d_%H-%M-%S")
        path = os.path.join(dir, f"{self._vec.name}_{stamp}.pkl")
        frame.to_pickle(path)
        return path

