"""gym-trading-env's portfolio rules, batched: the data, the configuration and one step.

:class:`flowsim.envs.PortfolioVectorEnv` (stepped from Python) and
:func:`flowsim.envs.rollout` (episodes inside a compiled kernel) both use
:class:`PortfolioRules`, whose rules are those of gym-trading-env 0.3.5
(``gym_trading_env.environments.TradingEnv`` with its ``TargetPortfolio``), in
float64 (or in float32: :meth:`PortfolioRules.in_dtype`), for every environment at
once.  With price ``p``, asset ``a``, fiat (cash) ``f`` and borrow interests ``ia``
(in asset) and ``if`` (in fiat):

* valuation ``v = a p + f - ia p - if``; position ``a p / v``; real position
  ``(a - ia) p / v``.
* reset: position ``x0`` (``initial_position``, or drawn uniformly from
  ``positions``), ``a = x0 V0 / p``, ``f = (1 - x0) V0``, no interest.
* step with target position ``x``: when ``x`` differs from the position held,
  trade at the current price: first repay interest in proportion to the
  reduction of a short (``x <= 0`` and position ``< 0``: ratio
  ``min(1, x / position)``) or of a leverage (``x >= 1`` and position ``> 1``:
  ``min(1, (x - 1) / (position - 1))``) -- interest not repaid then is never
  charged; then buy ``d = (x v / p - a) / (1 - fee + fee x)`` assets, of which
  ``d (1 - fee)`` arrive, for ``d p`` cash (``d > 0``), or sell
  ``d = (x v / p - a) / (1 - fee x)`` for ``-d p (1 - fee)`` cash.  Then the
  tick advances, the interests are recomputed (not accumulated):
  ``ia = max(0, -a) r``, ``if = max(0, -f) r`` with ``r`` the
  ``borrow_interest_rate``, and the step's valuation is taken.
* terminated when the valuation is ``<= 0``; truncated at the data's last
  row or, with ``max_episode_duration = D``, at step ``D - 1``.
* reward: ``reward_function(history)`` (default log of the valuation's
  return), not computed (0) on a terminating step.
* observation: the rows of the ``feature`` columns (float32) and the dynamic
  features ``f(history)`` computed at each row's step, the last ``windows``
  rows (or the current row without ``windows``).
"""
import numbers

import numpy as np

from ..core import rng
from ..core.kernel import fusion_barrier
from ..core.lazy_tf import tf
from .portfolio_history import (
    History,
    Values,
    last_position_taken,
    log_return,
    reads,
    real_position,
)

#: Columns of a history entry before the DataFrame's ``data_<column>`` ones.
DISTRIBUTION = ("asset", "fiat", "borrowed_asset", "borrowed_fiat", "interest_asset",
                "interest_fiat")
ENTRY = ("idx", "step", "position_index", "position", "real_position", "portfolio_valuation",
         *(f"portfolio_distribution_{k}" for k in DISTRIBUTION), "reward")
#: Keys of a step's entry as :meth:`PortfolioRules.column` reads it (``now`` of
#: :meth:`PortfolioRules.fresh` and :meth:`PortfolioRules.step`, which adds ``dyn``): both
#: build it from this tuple, so an environment's autoreset branches keep one structure.
NOW = ("idx", "step", "position_index", "position", "real", "value", "wallet", "reward")
#: gym-trading-env's default dynamic features.
DEFAULT_FEATURES = (last_position_taken, real_position)
ACTION_SPACES = ("discrete", "box")


def check_number(name, value, low=None, low_open=False, high=None):
    """``value`` as a finite float, checked against ``low`` (``low_open``: excluded)."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real) or not np.isfinite(value):
        raise ValueError(f"{name} must be a finite number, got {value!r}")
    value = float(value)
    if low is not None and (value < low or (low_open and value == low)):
        raise ValueError(f"{name} must be {'>' if low_open else '>='} {low}, got {value!r}")
    if high is not None and value >= high:
        raise ValueError(f"{name} must be < {high}, got {value!r}")
    return value


def check_positions(positions, action_space):
    """``positions`` as a float64 array (non-empty, finite, distinct; sorted for a box)."""
    if isinstance(positions, (str, bytes)) or not hasattr(positions, "__len__"):
        raise ValueError(f"positions must be a list of numbers (e.g. [-1, 0, 1]), got "
                         f"{positions!r}")
    if len(positions) == 0:
        raise ValueError("positions must not be empty: give the positions an action may "
                         "choose, e.g. [0, 1] (flat, long) or [-1, 0, 1, 2]")
    values = [check_number(f"positions[{i}]", p) for i, p in enumerate(positions)]
    if len(set(values)) != len(values):
        raise ValueError(f"positions must be distinct (an action is an index into them), "
                         f"got {list(positions)}")
    if action_space == "box":
        if len(values) < 2 or values != sorted(values):
            raise ValueError(f"positions: action_space='box' takes a target in "
                             f"[positions[0], positions[-1]]; give at least two positions "
                             f"in increasing order, got {list(positions)}")
    return np.array(values, np.float64)


def check_fees(trading_fees, positions):
    """``trading_fees`` in [0, 1) such that gym-trading-env's grossed-up trade sizes stay
    finite for every position (``1 - fee + fee x > 0`` and ``1 - fee x > 0``)."""
    fee = check_number("trading_fees", trading_fees, low=0.0, high=1.0)
    for x in (positions.min(), positions.max()):
        if not (1 - fee + fee * x > 0 and 1 - fee * x > 0):
            raise ValueError(f"trading_fees={fee} with position {x}: the trade size is "
                             f"divided by 1 - fee + fee*x and 1 - fee*x, which must be > 0; "
                             f"lower the fees or the leverage")
    return fee


def _frame(df):
    if not hasattr(df, "columns"):
        raise TypeError(f"df must be a pandas DataFrame with a 'close' column and feature "
                        f"columns (names containing 'feature'), got {type(df).__name__}")
    if "close" not in df.columns:
        raise ValueError(f"df must have a 'close' column (gym-trading-env's price), has "
                         f"{list(df.columns)}")
    close = np.asarray(df["close"])
    if not np.issubdtype(close.dtype, np.number) or not np.all(np.isfinite(close)) or not \
            np.all(close > 0):
        raise ValueError("df['close'] must hold finite prices > 0 (drop or fill the rows "
                         "with NaN, e.g. df.dropna())")
    features = [c for c in df.columns if "feature" in str(c)]
    for c in features:
        column = np.asarray(df[c])
        if not np.issubdtype(column.dtype, np.number) and column.dtype != np.bool_:
            raise ValueError(f"df[{c!r}]: a feature column must be numeric, got dtype "
                             f"{column.dtype}")
        bad = ~np.isfinite(column.astype(np.float64))
        if bad.any():
            raise ValueError(f"df[{c!r}] has {int(bad.sum())} NaN/Inf value(s) (first at "
                             f"row {int(np.argmax(bad))}): features must be finite; drop "
                             f"those rows (df.dropna()) or fill them")
    return close.astype(np.float64), features


class PortfolioRules:
    """A DataFrame and a gym-trading-env configuration, prepared for batched steps.

    Takes :class:`flowsim.envs.PortfolioVectorEnv`'s data and rule keywords and
    checks them (refusing bad values with the argument's name).  Attributes:
    ``close`` float64 ``[L]``, ``features`` float32 ``[L, n_static]``,
    ``feature_columns`` (static then ``dynamic_feature__i``), ``data_columns``
    (numeric non-feature columns, read in the history as ``data_<name>``),
    ``columns`` (the history entry's), ``positions`` float64, ``start_low`` /
    ``start_high`` (episode start rows drawn in ``[low, high)``).
    """

    def __init__(self, df, positions=(0, 1), dynamic_feature_functions=None,
                 reward_function=None, windows=None, trading_fees=0, borrow_interest_rate=0,
                 portfolio_initial_value=1000, initial_position="random",
                 max_episode_duration="max", action_space="discrete", history_length=2):
        if action_space not in ACTION_SPACES:
            raise ValueError(f"action_space must be one of {ACTION_SPACES}, got "
                             f"{action_space!r}")
        self.action_space = action_space
        self.positions = check_positions(positions, action_space)
        self.trading_fees = check_fees(trading_fees, self.positions)
        self.borrow_interest_rate = check_number("borrow_interest_rate", borrow_interest_rate, 0.0)
        self.portfolio_initial_value = check_number("portfolio_initial_value",
                                               portfolio_initial_value, 0.0, low_open=True)
        self.initial_index = self._initial(initial_position)
        self.close, static = _frame(df)
        self.length = len(self.close)
        self.windows = self._windows(windows)
        self.max_episode_duration = self._duration(max_episode_duration)
        self._functions(dynamic_feature_functions, reward_function)
        self.history_length = _count("history_length", history_length)
        self.features = np.asarray(df[static], dtype=np.float32).reshape(self.length, -1)
        self.feature_columns = static + [f"dynamic_feature__{i}" for i in
                                         range(len(self.dynamic_feature_functions))]
        self.data_columns = [c for c in df.columns if c not in static and
                             np.issubdtype(np.asarray(df[c]).dtype, np.number)]
        self.data = np.stack([np.asarray(df[c], np.float64) for c in self.data_columns], 1)
        self.columns = list(ENTRY) + [f"data_{c}" for c in self.data_columns]
        self.index = df.index.values
        self.info_frame = df[[c for c in df.columns if c not in static]]
        self._kept = None
        self._kept = self.kept          # trace the functions now: their errors surface here

    def _initial(self, initial_position):
        if isinstance(initial_position, str) and initial_position == "random":
            return None
        value = check_number("initial_position", initial_position)
        hits = np.flatnonzero(self.positions == value)
        if hits.size == 0:
            raise ValueError(f"initial_position must be 'random' or one of positions "
                             f"{self.positions.tolist()}, got {initial_position!r}")
        return int(hits[0])

    def _windows(self, windows):
        if windows is None:
            return None
        windows = _count("windows", windows)
        if windows > self.length - 1:
            raise ValueError(f"windows={windows} is longer than the data allows: df has "
                             f"{self.length} rows and an episode needs the window plus one "
                             f"step (windows <= {self.length - 1})")
        return windows

    @property
    def first_row(self):
        """Row of the first observation: ``windows - 1`` (0 without windows)."""
        return 0 if self.windows is None else self.windows - 1

    def _duration(self, duration):
        if isinstance(duration, str) and duration == "max":
            self.start_low = self.start_high = self.first_row
            return "max"
        duration = _count("max_episode_duration", duration)
        # gym-trading-env: np.random.randint(low=first, high=len - duration - first)
        high = self.length - duration - self.first_row
        if high <= self.first_row:
            raise ValueError(f"max_episode_duration={duration} is too long for {self.length} "
                             f"rows with windows={self.windows}: start rows are drawn in "
                             f"[{self.first_row}, len(df) - max_episode_duration - "
                             f"{self.first_row}), which is empty; use at most "
                             f"{self.length - 2 * self.first_row - 1} or 'max'")
        self.start_low, self.start_high = self.first_row, high
        return duration

    def _functions(self, features, reward):
        features = DEFAULT_FEATURES if features is None else features
        if callable(features) or not all(callable(f) for f in features):
            raise TypeError(f"dynamic_feature_functions must be a list of functions "
                            f"f(history), got {features!r}")
        if reward is None:
            reward = log_return
        if not callable(reward):
            raise TypeError(f"reward_function must be a function f(history), got {reward!r}")
        self.dynamic_feature_functions = list(features)
        self.reward_function = reward

    @property
    def n_features(self):
        return len(self.feature_columns)

    @property
    def n_dynamic(self):
        return len(self.dynamic_feature_functions)

    @property
    def window_rows(self):
        return 1 if self.windows is None else self.windows

    @property
    def observation_shape(self):
        if self.windows is None:
            return (self.n_features,)
        return (self.windows, self.n_features)

    # -- tensors ----------------------------------------------------------------------
    def constants(self):
        """The tensors the rules read (build them inside the device scope)."""
        t = tf()
        window = self.window_rows
        # static feature rows padded with window - 1 zero rows in front, so that the
        # window of any row r is rows r .. r + window - 1 of the padded table
        padded = np.concatenate([np.zeros((window - 1, self.features.shape[1]), np.float32),
                                 self.features])
        return {"close": t.constant(self.close), "features": t.constant(padded),
                "data": t.constant(self.data.reshape(self.length, -1)),
                "positions": t.constant(self.positions)}

    #: The constants (and :meth:`rule_rows`) holding money, prices or positions.
    REAL = ("close", "data", "positions", "rules")

    @classmethod
    def in_dtype(cls, c, dtype):
        """The constants ``c`` with :data:`REAL` cast to ``dtype``: the rules then compute
        in ``dtype`` (float32 on GPUs; gym-trading-env computes in float64)."""
        t = tf()
        return {k: t.cast(v, dtype) if k in cls.REAL else v for k, v in c.items()}

    #: Rows of :meth:`rule_rows`.
    RULES = ("fee", "keep", "rate", "one")

    def rule_rows(self):
        """The rules' numbers ``[fee, 1 - fee, borrow rate, 1]`` (float64).  The steps read
        them from rows shaped like the state (``rules [4, n]``, a variable or a kernel
        input), never as constants: with constants, TensorFlow's graph optimizer
        (constant push-down and broadcast minimisation, with or without XLA)
        reassociates products such as ``(-d * p) * (1 - fee)`` and changes
        gym-trading-env's rounding."""
        fee = self.trading_fees
        return np.array([fee, 1 - fee, self.borrow_interest_rate, 1.0], np.float64)

    def draws(self, seeds, episodes):
        """Start rows and initial position indices ``[n]`` (int32) of episode
        ``episodes`` of environments seeded ``seeds`` (:meth:`starts` of the
        SplitMix64 uniforms of (seed, 2 episode) and (seed, 2 episode + 1))."""
        t = tf()
        return self.starts(rng.uniform_keys(t.stack([seeds, 2 * episodes])),
                           rng.uniform_keys(t.stack([seeds, 2 * episodes + 1])))

    def starts(self, u_start, u_position):
        """Start rows and initial position indices ``[n]`` (int32) from uniforms
        (float64 ``[n]``): uniform over ``[start_low, start_high)`` and over
        ``positions`` (unless ``initial_position`` fixes it)."""
        t = tf()
        span = self.start_high - self.start_low
        start = t.fill(t.shape(u_start), t.constant(self.start_low, t.int32))
        if span > 0:
            start = start + t.minimum(t.cast(t.floor(u_start * span), t.int32), span - 1)
        if self.initial_index is None:
            k = len(self.positions)
            index = t.minimum(t.cast(t.floor(u_position * k), t.int32), k - 1)
        else:
            index = t.fill(t.shape(u_start), t.constant(self.initial_index, t.int32))
        return start, index

    @property
    def max_steps(self):
        """Steps of an episode that does not terminate."""
        if self.max_episode_duration == "max":
            return self.length - 1 - self.first_row
        return self.max_episode_duration - 1

    # -- the history a step keeps ----------------------------------------------------
    @property
    def kept(self):
        """What of the history the compiled steps keep: ``(first, ring, now)``.

        The reward and feature functions are traced once on a recording history
        (:func:`flowsim.envs.portfolio_history.reads`): ``first`` lists the columns they read
        at entry 0, ``ring`` the rows ``(column, k)`` of the entries ``-k`` (k >= 2)
        they read back, ``now`` the columns of the current entry (``-1``) they read
        or that ``ring`` needs.  The rest of an entry is never built in a rollout,
        and an environment builds it only for its ``infos``.
        """
        if self._kept is None:
            read = reads([self.reward_function, *self.dynamic_feature_functions],
                         self.columns, self.history_length)
            order = self.columns.index
            first = sorted({c for c, t in read if t == 0}, key=order)
            depth = {}
            for c, t in read:
                if t < 0:
                    depth[c] = max(depth.get(c, 1), -t)
            now = sorted(depth, key=order)
            ring = [(c, k) for c in now for k in range(2, depth[c] + 1)]
            self._kept = (first, ring, now)
        return self._kept

    def column(self, c, now, name):
        """History column ``name`` (``[n]``, the dtype of prices) of the entry ``now``: a dict of
        ``idx``, ``step``, ``position_index`` (int), ``position``, ``real``, ``value``,
        ``wallet`` (asset, fiat, interest in asset, interest in fiat) and ``reward``."""
        t = tf()
        if name in ("idx", "step", "position_index"):
            return t.cast(now[name], c["close"].dtype)
        simple = {"position": "position", "real_position": "real",
                  "portfolio_valuation": "value", "reward": "reward"}
        if name in simple:
            return now[simple[name]]
        if name.startswith("data_"):
            j = self.data_columns.index(name[len("data_"):])
            return t.gather(c["data"][:, j], now["idx"])
        asset, fiat, ia, if_ = now["wallet"]
        zero = t.zeros_like(asset)
        return {"portfolio_distribution_asset": lambda: t.maximum(zero, asset),
                "portfolio_distribution_fiat": lambda: t.maximum(zero, fiat),
                "portfolio_distribution_borrowed_asset": lambda: t.maximum(zero, -asset),
                "portfolio_distribution_borrowed_fiat": lambda: t.maximum(zero, -fiat),
                "portfolio_distribution_interest_asset": lambda: ia,
                "portfolio_distribution_interest_fiat": lambda: if_}[name]()

    def _history(self, c, state, current):
        """The :class:`History` of the functions at a step: ``current`` the columns of
        entry -1, ``state`` the kept rows of entry 0 and of the entries before."""
        first, ring, now = self.kept
        values = {(col, -1): current[col] for col in now}
        values.update({(col, 0): state["first"][i] for i, col in enumerate(first)})
        values.update({(col, -k): state["ring"][i] for i, (col, k) in enumerate(ring)})
        return History.of_values(self.columns, values, self.history_length)

    def _shift(self, state, current):
        """The ring of the next step: the current entry becomes entry -2."""
        t = tf()
        _, ring, _ = self.kept
        if not ring:
            return state["ring"]
        where = {key: i for i, key in enumerate(ring)}
        rows = [current[col] if k == 2 else state["ring"][where[col, k - 1]]
                for col, k in ring]
        return t.stack(rows)

    def _call(self, fn, history, n, what, dtype):
        t = tf()
        out = fn(history)
        x = out.x if isinstance(out, Values) else out
        try:
            x = t.cast(t.convert_to_tensor(x), dtype)
            return t.broadcast_to(t.reshape(x, [-1]) if x.shape.rank else x, [n])
        except (ValueError, TypeError, t.errors.InvalidArgumentError) as exc:
            raise ValueError(f"{what} {getattr(fn, '__name__', fn)!r} must return one number "
                             f"per environment ([num_envs] or a scalar), got {out!r}") from exc

    def _dynamic(self, history, n, dtype):
        t = tf()
        if not self.dynamic_feature_functions:
            return t.zeros([n, 0], t.float32)
        values = [self._call(f, history, n, "dynamic feature function", dtype)
                  for f in self.dynamic_feature_functions]
        return t.cast(t.stack(values, axis=1), t.float32)

    @staticmethod
    def _rows(columns, values, n, dtype):
        t = tf()
        if not columns:
            return t.zeros([0, n], dtype)
        return t.stack([values[col] for col in columns])

    def fresh(self, c, start, index):
        """``(state, now)``: the state of new episodes starting at rows ``start`` with
        positions ``positions[index]``, and their first entry (as :meth:`column`
        reads it)."""
        t = tf()
        n = t.shape(start)[0]
        position = t.gather(c["positions"], index)
        price = t.gather(c["close"], start)
        real = c["close"].dtype
        value = t.fill([n], t.constant(self.portfolio_initial_value, real))
        zero = t.zeros_like(value)
        wallet = (position * value / price, (c["rules"][3] - position) * value, zero, zero)
        now = dict(zip(NOW, (start, t.zeros_like(start), index, position, position, value,
                             wallet, zero), strict=True))
        first, ring, current = self.kept
        entry = {col: self.column(c, now, col) for col in {*first, *current}}
        state = {"first": self._rows(first, entry, n, real),
                 "ring": self._rows([col for col, _ in ring], entry, n, real)}
        dyn = self._dynamic(self._history(c, state, entry), n, real)
        ring = t.concat([t.zeros([n, self.window_rows - 1, self.n_dynamic], t.float32),
                         dyn[:, None, :]], axis=1)
        state.update(idx=start, step=t.zeros_like(start), position=position,
                     wallet=t.stack(wallet), dyn=ring)
        return state, now

    def trade(self, wallet, position, target, price, rules, exact=False):
        """gym-trading-env's ``trade_to_position`` where ``target != position``
        (``rules``: :meth:`rule_rows` ``[4, n]``).  ``exact``: every product that
        feeds a sum is rounded on its own (:func:`rounded`), as numpy and
        gym-trading-env round it, never contracted into an FMA by XLA."""
        t = tf()
        fee, keep, _, one = t.unstack(rules)
        r = rounded(one, exact)
        asset, fiat, ia, if_ = wallet
        value = r(asset * price) + fiat - r(ia * price) - if_
        current = asset * price / value
        short = (target <= 0) & (current < 0)
        lever = ~short & (target >= 1) & (current > 1)
        ratio = t.where(short, t.minimum(one, target / t.where(short, current, one)),
                        t.where(lever, t.minimum(one, (target - one) / t.where(
                            lever, current - one, one)), one))
        repay = ratio < one
        asset = t.where(repay, asset - r((one - ratio) * ia), asset)
        fiat = t.where(repay, fiat - r((one - ratio) * if_), fiat)
        ia = t.where(repay, ratio * ia, ia)
        if_ = t.where(repay, ratio * if_, if_)
        value = r(asset * price) + fiat - r(ia * price) - if_
        size = target * value / price - asset
        buy = size > 0
        bought = size / (keep + r(fee * target))
        sold = size / (one - r(fee * target))
        new_asset = t.where(buy, asset + r(bought * keep), asset + sold)
        new_fiat = t.where(buy, fiat + r(-bought * price), fiat + r((-sold * price) * keep))
        change = t.not_equal(target, position)
        return tuple(t.where(change, new, old) for new, old in
                     zip((new_asset, new_fiat, ia, if_), wallet))

    def step(self, c, state, target, position_index, fence=None, exact=False):
        """One step of every environment to target positions ``target`` (float64
        ``[n]``).  Returns ``(state, reward, terminated, truncated, now)``, ``now``
        the step's entry as :meth:`column` reads it, with ``now["dyn"]`` the step's
        dynamic features (float32 ``[n, n_dynamic]``); ``state["dyn"]``, the window
        of them, is shifted only when ``state`` has it.

        ``fence`` (default None): a scalar bool tensor that is true but that XLA
        cannot fold (a loop counter ``>= 0``): the wallet after the trade and the
        valuation are then computed once, behind
        :func:`flowsim.core.kernel.fusion_barrier`, instead of inside each of the
        step's outputs that read them.  ``exact``: no product is contracted with a
        sum into an FMA (:meth:`trade`); the money is then numpy's and
        gym-trading-env's, bit for bit."""
        t = tf()
        wallet = tuple(t.unstack(state["wallet"]))
        n = t.shape(target)[0]
        rules = c["rules"]
        wallet = self.trade(wallet, state["position"], target,
                            t.gather(c["close"], state["idx"]), rules, exact)
        wallet = fusion_barrier(fence, *wallet)
        idx, step = state["idx"] + 1, state["step"] + 1
        price = t.gather(c["close"], idx)
        asset, fiat, _, _ = wallet
        rate = rules[2]
        zero = t.zeros_like(asset)
        wallet = (asset, fiat, t.maximum(zero, -asset) * rate, t.maximum(zero, -fiat) * rate)
        r = rounded(rules[3], exact)
        value = r(asset * price) + fiat - r(wallet[2] * price) - wallet[3]
        real = (asset - wallet[2]) * price / value
        value, real, *wallet = fusion_barrier(fence, value, real, *wallet)
        wallet = tuple(wallet)
        terminated = value <= 0
        truncated = idx >= self.length - 1
        if self.max_episode_duration != "max":
            truncated |= step >= self.max_episode_duration - 1
        now = dict(zip(NOW, (idx, step, position_index, target, real, value, wallet, zero),
                       strict=True))
        _, _, current = self.kept
        entry = {col: self.column(c, now, col) for col in current}
        reward = self._call(self.reward_function, self._history(c, state, entry), n,
                            "reward_function", asset.dtype)
        reward = t.where(terminated, zero, reward)
        now["reward"] = reward
        if "reward" in entry:
            entry["reward"] = reward
        dyn = self._dynamic(self._history(c, state, entry), n, asset.dtype)
        now["dyn"] = dyn
        state = dict(state, idx=idx, step=step, position=target, wallet=t.stack(wallet),
                     ring=self._shift(state, entry))
        if "dyn" in state:
            state["dyn"] = t.concat([state["dyn"][:, 1:], dyn[:, None, :]], axis=1)
        return state, reward, terminated, truncated, now

    def observe(self, c, state):
        """Observations ``[n, windows, n_features]`` (``[n, n_features]`` without
        windows), float32."""
        t = tf()
        window = self.window_rows
        rows = state["idx"][:, None] + t.range(window, dtype=t.int32)[None, :]
        obs = t.concat([t.gather(c["features"], rows), state["dyn"]], axis=2)
        return obs[:, 0] if self.windows is None else obs

    def observe_next(self, c, obs, idx, dyn):
        """The observations after a step from those before (:meth:`observe`'s
        ``obs``): the oldest row out, row ``idx`` (int32 ``[n]``) of the static
        features and the step's dynamic features ``dyn`` (``now["dyn"]``, float32
        ``[n, n_dynamic]``) in.  The values of :meth:`observe` of the new state,
        without gathering and concatenating a whole window per step."""
        t = tf()
        row = t.concat([t.gather(c["features"], idx + (self.window_rows - 1)), dyn], axis=1)
        if self.windows is None:
            return row
        return t.concat([obs[:, 1:], row[:, None, :]], axis=1)


def rounded(one, exact):
    """``x -> x * one`` when ``exact`` (``one``: 1.0 that XLA cannot fold, a row of
    :meth:`PortfolioRules.rule_rows`), else ``x`` unchanged.  A sum then reads the
    product times one, not the product: XLA may contract that multiply into an FMA
    with the sum, which rounds ``x * 1 + y`` as ``x + y``, so the product keeps its own
    rounding (numpy's and gym-trading-env's)."""
    if not exact:
        return lambda x: x
    return lambda x: x * one


def _count(name, value, minimum=1):
    from ..core.blocks import check_count
    return check_count(name, value, minimum)


#: :class:`PortfolioRules`'s former name (:class:`flowsim.finance.Portfolio` is vectorbt's
#: portfolio of a backtest).
Portfolio = PortfolioRules
