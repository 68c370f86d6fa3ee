"""gym-trading-env's rules stepped in numpy from Python, for one or a few environments.

:class:`flowsim.envs.PortfolioVectorEnv` steps its environments in one compiled
TensorFlow call; a call costs some hundred microseconds however few environments
it steps.  With a few environments (``eager=None`` and ``num_envs <=``
:data:`EAGER_MAX_ENVS`, or ``eager=True``) it runs :class:`EagerSteps` instead:
the same reset and step (:class:`flowsim.envs.portfolio.PortfolioRules`'s
rules, next-step autoreset, the same episode starts from the same seeds) in
Python floats and small numpy arrays, with the same numbers bit for bit: the
compiled step rounds every product on its own (``exact``), and a history
function's ``np.log`` is the C library's, as XLA's on CPUs
(:class:`flowsim.envs.portfolio_history.LibmValues`).
"""
import math

import numpy as np

from .portfolio_history import (
    History,
    LibmScalar,
    LibmValues,
    divide,
    last_position_taken,
    libm_log_float,
    log_return,
    real_position,
)

#: Environments up to which ``PortfolioVectorEnv(eager=None)`` steps in numpy.
EAGER_MAX_ENVS = 16

_MASK = 2**64 - 1
_GOLDEN = 0x9E3779B97F4A7C15
_M1, _M2 = 0xBF58476D1CE4E5B9, 0x94D049BB133111EB


def _mix64(z):
    z = ((z ^ (z >> 30)) * _M1) & _MASK
    z = ((z ^ (z >> 27)) * _M2) & _MASK
    return z ^ (z >> 31)


def uniform_key(seed, word):
    """:func:`flowsim.core.rng.uniform_keys` of one key ``(seed, word)``, in Python."""
    h = _mix64((seed + _GOLDEN) & _MASK)
    h = _mix64(((h ^ (word & _MASK)) + _GOLDEN) & _MASK)
    h = _mix64((h + _GOLDEN) & _MASK)
    return (_mix64((h + _GOLDEN) & _MASK) >> 11) * 2.0 ** -53


#: The C library's ``log`` (as XLA's on CPUs) with IEEE's -inf and NaN.
log = libm_log_float


def trade(wallet, position, target, price, fee, keep):
    """:meth:`flowsim.envs.portfolio.PortfolioRules.trade` of one environment (Python
    floats ``wallet = (asset, fiat, interest asset, interest fiat)``), in its order
    of operations."""
    if target == position:
        return wallet
    asset, fiat, ia, if_ = wallet
    value = asset * price + fiat - ia * price - if_
    current = divide(asset * price, value)
    ratio = 1.0
    if target <= 0 and current < 0:
        ratio = min(1.0, target / current)
    elif target >= 1 and current > 1:
        ratio = min(1.0, (target - 1.0) / (current - 1.0))
    if ratio < 1.0:
        asset = asset - (1.0 - ratio) * ia
        fiat = fiat - (1.0 - ratio) * if_
        ia, if_ = ratio * ia, ratio * if_
    value = asset * price + fiat - ia * price - if_
    size = target * value / price - asset
    if size > 0:
        bought = size / (keep + fee * target)
        return asset + bought * keep, fiat + -bought * price, ia, if_
    sold = size / (1.0 - fee * target)
    return asset + sold, fiat + (-sold * price) * keep, ia, if_


def positive(x):
    """``max(0, x)`` as XLA's maximum: NaN stays NaN."""
    return x if x > 0.0 or x != x else 0.0


#: History columns of an entry, from the entry's lists (``now``) of :class:`EagerSteps`.
SIMPLE = {"idx": "idx", "step": "step", "position_index": "position_index",
          "position": "position", "real_position": "real", "portfolio_valuation": "value",
          "reward": "reward", "portfolio_distribution_interest_asset": "ia",
          "portfolio_distribution_interest_fiat": "if"}
#: The distribution columns computed from the wallet: (wallet key, sign).
DISTRIBUTION = {"portfolio_distribution_asset": ("asset", 1.0),
                "portfolio_distribution_fiat": ("fiat", 1.0),
                "portfolio_distribution_borrowed_asset": ("asset", -1.0),
                "portfolio_distribution_borrowed_fiat": ("fiat", -1.0)}


class EagerSteps:
    """The reset and step of :class:`flowsim.envs.PortfolioVectorEnv` (its
    ``_reset_fn`` and ``_step_fn``) for ``num_envs`` environments, in Python floats
    and numpy.

    :meth:`reset` and :meth:`step` return what the compiled calls return: float32
    observations and the float64 table (reward, terminated, truncated, then
    ``info_columns``), as numpy arrays.  An entry (``now``) is a dict of lists
    ``[num_envs]``: ``idx``, ``step``, ``position_index``, ``position``, ``real``,
    ``value``, ``asset``, ``fiat``, ``ia``, ``if`` (interests) and ``reward``.
    """

    def __init__(self, rules, num_envs, info_columns):
        p = self.rules = rules
        self.n = int(num_envs)
        self.info_columns = list(info_columns)
        self.close = p.close.tolist()
        self.fee, self.keep, self.rate, _ = p.rule_rows().tolist()
        window = p.window_rows
        self.features = np.concatenate([np.zeros((window - 1, p.features.shape[1]),
                                                 np.float32), p.features])
        self.window = np.arange(window)
        self.first_columns, self.ring_keys, self.now_columns = p.kept
        self.ring_at = {key: i for i, key in enumerate(self.ring_keys)}
        self.now_keys = [(c, -1) for c in self.now_columns]
        self.first_keys = [(c, 0) for c in self.first_columns]
        self.back_keys = [(c, -k) for c, k in self.ring_keys]
        self._one = self._first_rows = self._first_values = None
        self.data = {f"data_{c}": p.data[:, j].tolist() for j, c in enumerate(p.data_columns)}
        # gym-trading-env's default reward and features, computed without a history
        self.defaults = (p.reward_function is log_return and p.dynamic_feature_functions == [
            last_position_taken, real_position] and p.history_length == 2)
        self.done = [False] * self.n
        self.seeds = [0] * self.n
        self.episodes = [0] * self.n
        self.state = None

    # -- the history functions ----------------------------------------------------------
    def column(self, now, name):
        """History column ``name`` (a list ``[n]``) of the entry ``now``, as
        :meth:`PortfolioRules.column`."""
        if name in SIMPLE:
            return now[SIMPLE[name]]
        if name in DISTRIBUTION:
            key, sign = DISTRIBUTION[name]
            return [positive(sign * x) for x in now[key]]
        data, last = self.data[name], self.rules.length - 1
        return [data[min(i, last)] for i in now["idx"]]

    def one_column(self, now, name):
        """History column ``name`` of the entry ``now`` of one environment (a number)."""
        if name in SIMPLE:
            return now[SIMPLE[name]][0]
        if name in DISTRIBUTION:
            key, sign = DISTRIBUTION[name]
            return positive(sign * now[key][0])
        return self.data[name][min(now["idx"][0], self.rules.length - 1)]

    def history(self, first, ring, current):
        """The :class:`History` of the functions: ``current`` (column -> list) the
        entry -1, ``first`` and ``ring`` (arrays) the kept rows of entry 0 and before."""
        if self.n == 1:
            return self.one_history(self.one_values(first, ring, lambda c: current[c][0]))
        values = {(c, -1): np.array(current[c], np.float64) for c in self.now_columns}
        values.update({(c, 0): first[i] for i, c in enumerate(self.first_columns)})
        values.update({(c, -k): ring[i] for i, (c, k) in enumerate(self.ring_keys)})
        return History.of_values(self.rules.columns, values, self.rules.history_length,
                                 LibmValues)

    def one_values(self, first, ring, current):
        """The values ``{(column, t): float}`` of :meth:`history` for one environment
        (``current(column)``: the entry -1's value)."""
        if first is not self._first_rows:          # a new episode's entry 0
            self._first_rows = first
            self._first_values = dict(zip(self.first_keys, (float(row[0]) for row in first)))
        values = self._first_values.copy()
        for key in self.now_keys:
            values[key] = float(current(key[0]))
        values.update(zip(self.back_keys, (float(row[0]) for row in ring)))
        return values

    def one_history(self, values):
        """The history of one environment's ``values`` (Python floats, read as
        :class:`LibmScalar`): one object, refilled at every step (as gym-trading-env
        hands its functions one ``History``)."""
        if self._one is None:
            self._one = History.of_values(self.rules.columns, {}, self.rules.history_length,
                                          LibmScalar)
        self._one._values = values
        return self._one

    def call(self, fn, history, what):
        """``fn(history)`` as float64 ``[n]``."""
        return self.per_env(fn(history), fn, what)

    def call_one(self, fn, history, what):
        """``fn(history)`` of one environment, a Python float."""
        out = fn(history)
        x = out.x if type(out) is LibmScalar else out
        return x if type(x) is float else float(self.per_env(out, fn, what)[0])

    def per_env(self, out, fn, what):
        """A function's output ``out`` as float64 ``[n]``."""
        x = np.asarray(out.x if isinstance(out, LibmValues) else out, np.float64)
        if x.shape == (self.n,):
            return x
        if x.ndim == 0:
            return np.full(self.n, x)
        try:
            return np.broadcast_to(x.reshape(-1) if x.ndim else x, (self.n,))
        except ValueError as exc:
            raise ValueError(f"{what} {getattr(fn, '__name__', fn)!r} must return one number "
                             f"per environment ([num_envs] or a scalar), got {out!r}") from exc

    def dynamic(self, history):
        """The dynamic features (float32 ``[n, n_dynamic]``)."""
        functions = self.rules.dynamic_feature_functions
        if not functions:
            return np.zeros((self.n, 0), np.float32)
        return np.array([self.call(f, history, "dynamic feature function")
                         for f in functions], np.float32).T

    def rows(self, columns, entry):
        return [np.array(entry[c], np.float64) for c in columns]

    # -- episodes -------------------------------------------------------------------------
    def starts(self, envs):
        """Start rows and initial position indices (lists) of the current episode of
        environments ``envs`` (:meth:`PortfolioRules.draws`)."""
        p = self.rules
        span, k = p.start_high - p.start_low, len(p.positions)
        rows, index = [], []
        for i in envs:
            seed, episode = self.seeds[i], self.episodes[i]
            row = p.start_low
            if span > 0:
                row += min(math.floor(uniform_key(seed, 2 * episode) * span), span - 1)
            rows.append(row)
            if p.initial_index is None:
                index.append(min(math.floor(uniform_key(seed, 2 * episode + 1) * k), k - 1))
            else:
                index.append(p.initial_index)
        return rows, index

    def fresh(self, envs):
        """``(state, now)`` of environments ``envs`` (indices) starting their current
        episode: lists and arrays over ``envs``."""
        p = self.rules
        start, index = self.starts(envs)
        positions = p.positions.tolist()
        v0 = p.portfolio_initial_value
        position = [positions[j] for j in index]
        zero = [0.0] * len(envs)
        now = {"idx": start, "step": [0] * len(envs), "position_index": index,
               "position": position, "real": position, "value": [v0] * len(envs),
               "asset": [x * v0 / self.close[r] for x, r in zip(position, start)],
               "fiat": [(1.0 - x) * v0 for x in position], "ia": zero, "if": zero,
               "reward": zero}
        first = self.rows(self.first_columns, {c: self.column(now, c)
                                               for c in self.first_columns})
        entry = {c: self.column(now, c) for c in self.now_columns}
        ring = self.rows([c for c, _ in self.ring_keys], entry)
        saved, self.n = self.n, len(envs)
        try:
            dyn = self.dynamic(self.history(first, ring, entry))
        finally:
            self.n = saved
        window = np.zeros((len(envs), p.window_rows, p.n_dynamic), np.float32)
        window[:, -1] = dyn
        return {"first": first, "ring": ring, "dyn": window}, now

    def start(self, envs, state, now):
        """``state`` and ``now`` with environments ``envs`` (indices) starting their
        current episode (in place)."""
        fresh, entry = self.fresh(envs)
        for key, values in entry.items():
            row = now[key] = list(now[key])
            for i, x in zip(envs, values):
                row[i] = x
        for key in ("first", "ring"):
            state[key] = [a.copy() for a in state[key]]
            for a, b in zip(state[key], fresh[key]):
                a[envs] = b
        state["dyn"] = state["dyn"].copy()
        state["dyn"][envs] = fresh["dyn"]

    # -- the calls ------------------------------------------------------------------------
    def reset(self, mask, seeds, seeded):
        """The compiled ``_reset_fn``: environments ``mask`` start an episode (a new
        seed where ``seeded``)."""
        false = [0.0] * self.n
        self.start_episodes(mask, seeds, seeded)
        return self.outputs(self.now, false, false)

    def start_episodes(self, mask, seeds, seeded):
        """:meth:`reset` without its outputs (the entry is ``self.now``)."""
        envs = np.flatnonzero(mask).tolist()
        for i in envs:
            self.episodes[i] = 0 if seeded[i] else self.episodes[i] + 1
            if seeded[i]:
                self.seeds[i] = int(seeds[i])
        if self.state is None:
            envs = list(range(self.n))
            self.state, self.now = self.fresh(envs)
        else:
            self.start(envs, self.state, self.now)
        for i in envs:
            self.done[i] = False

    def advance(self, targets, reset):
        """The entry ``now`` (without reward) of every environment traded to
        ``targets`` (a list of floats) and moved one row on, in Python floats; the
        environments of ``reset`` (their episode ended) keep their wallet (their
        step is discarded)."""
        last, close, now, rate = self.rules.length - 1, self.close, self.now, self.rate
        columns = ("idx", "asset", "fiat", "ia", "if", "value", "real")
        out = {c: [] for c in columns}
        rows, assets, fiats, ias, ifs, values, reals = out.values()
        for i, row in enumerate(now["idx"]):
            wallet = now["asset"][i], now["fiat"][i], now["ia"][i], now["if"][i]
            if not reset[i]:
                wallet = trade(wallet, now["position"][i], targets[i], close[row],
                               self.fee, self.keep)
            asset, fiat = wallet[0], wallet[1]
            price = close[row + 1 if row < last else last]
            ia, if_ = positive(-asset) * rate, positive(-fiat) * rate
            value = asset * price + fiat - ia * price - if_
            rows.append(row + 1)
            assets.append(asset)
            fiats.append(fiat)
            ias.append(ia)
            ifs.append(if_)
            values.append(value)
            reals.append(divide((asset - ia) * price, value))
        return out

    def step(self, targets, index):
        """The compiled ``_step_fn``: every environment to target positions
        ``targets`` (a list of floats; position indices ``index``, a list), those
        whose episode ended on the previous step starting the next one instead."""
        terminated, truncated = self.move(targets, index)
        return self.outputs(self.now, terminated, truncated)

    def move(self, targets, index):
        """:meth:`step` without its outputs: ``(terminated, truncated)`` (lists; the
        entry is ``self.now``)."""
        p, reset = self.rules, self.done
        now = self.advance(targets, reset)
        now.update(step=[s + 1 for s in self.now["step"]], position_index=index,
                   position=targets)
        terminated = [v <= 0 for v in now["value"]]
        truncated = [i >= p.length - 1 for i in now["idx"]]
        if p.max_episode_duration != "max":
            last = p.max_episode_duration - 1
            truncated = [t or s >= last for t, s in zip(truncated, now["step"])]
        state = self.functions(now, terminated)
        if True in reset:
            with np.errstate(all="ignore"):
                terminated, truncated = self.autoreset(reset, state, now, terminated,
                                                       truncated)
        self.state, self.now = state, now
        self.done = [a or b for a, b in zip(terminated, truncated)]
        return terminated, truncated

    def autoreset(self, reset, state, now, terminated, truncated):
        """The environments of ``reset`` start their next episode (``state`` and
        ``now`` in place); ``(terminated, truncated)`` false for them."""
        envs = [i for i, r in enumerate(reset) if r]
        for i in envs:
            self.episodes[i] += 1
        self.start(envs, state, now)
        return ([t and not r for t, r in zip(terminated, reset)],
                [t and not r for t, r in zip(truncated, reset)])

    def functions(self, now, terminated):
        """The step's reward (into ``now``) and dynamic features, and the kept history
        shifted: the next ``state``."""
        if self.defaults:
            return self.default_functions(now, terminated)
        if self.n == 1:                 # Python floats (LibmScalar silences numpy's warnings)
            return self.one_env_functions(now, terminated)
        with np.errstate(all="ignore"):
            return self.history_functions(now, terminated)

    def history_functions(self, now, terminated):
        """:meth:`functions` of any reward and feature functions (on a :class:`History`)."""
        s = self.state
        entry = {c: self.column(now, c) for c in self.now_columns}
        history = self.history(s["first"], s["ring"], entry)
        reward = self.call(self.rules.reward_function, history, "reward_function").tolist()
        now["reward"] = reward = [0.0 if t else r for t, r in zip(terminated, reward)]
        if "reward" in entry:
            entry["reward"] = reward
            history = self.history(s["first"], s["ring"], entry)
        return self.shifted(entry, self.dynamic(history)[:, None, :])

    def one_env_functions(self, now, terminated):
        """:meth:`history_functions` of one environment, on Python floats."""
        s = self.state
        values = self.one_values(s["first"], s["ring"], lambda c: self.one_column(now, c))
        history = self.one_history(values)
        reward = self.call_one(self.rules.reward_function, history, "reward_function")
        now["reward"] = [0.0 if terminated[0] else reward]
        if ("reward", -1) in values:
            values["reward", -1] = now["reward"][0]
        features = [self.call_one(f, history, "dynamic feature function")
                    for f in self.rules.dynamic_feature_functions]
        window = s["dyn"]                   # shifted in place: observations are copies
        window[0, :-1] = window[0, 1:]
        window[0, -1] = features
        ring = [np.array([values[c, -1]]) if k == 2 else s["ring"][self.ring_at[c, k - 1]]
                for c, k in self.ring_keys]
        return {"first": s["first"], "ring": ring, "dyn": window}

    def shifted(self, entry, dyn):
        """The next ``state``: the entry ``entry`` joins the kept rows, the dynamic
        features ``dyn`` ``[n, 1, n_dynamic]`` the window."""
        s = self.state
        ring = [np.array(entry[c], np.float64) if k == 2 else s["ring"][self.ring_at[c, k - 1]]
                for c, k in self.ring_keys]
        window = np.concatenate([s["dyn"][:, 1:], dyn], axis=1)
        return {"first": s["first"], "ring": ring, "dyn": window}

    def default_functions(self, now, terminated):
        """:meth:`functions` of gym-trading-env's default reward (the log return,
        ``math.log``: the C library's, as XLA's) and features (the position, the
        real position), in Python floats."""
        s = self.state
        value = now["value"]
        previous = s["ring"][0].tolist()
        now["reward"] = [0.0 if t else log(divide(v, w))
                         for t, v, w in zip(terminated, value, previous)]
        dyn = np.array([now["position"], now["real"]], np.float32).T[:, None, :]
        window = dyn if self.rules.windows is None else np.concatenate([s["dyn"][:, 1:], dyn],
                                                                       axis=1)
        return {"first": s["first"], "ring": [np.array(value, np.float64)], "dyn": window}

    def entry(self, env):
        """Environment ``env``'s entry of ``now`` as gym-trading-env's ``info`` (Python
        numbers; less ``date``, ``data_*`` and ``reward``), in the order of
        :data:`flowsim.envs.portfolio.ENTRY`."""
        now = self.now
        asset, fiat = now["asset"][env], now["fiat"][env]
        return {"idx": now["idx"][env], "step": now["step"][env],
                "position_index": now["position_index"][env],
                "position": now["position"][env], "real_position": now["real"][env],
                "portfolio_valuation": now["value"][env],
                "portfolio_distribution_asset": positive(asset),
                "portfolio_distribution_fiat": positive(fiat),
                "portfolio_distribution_borrowed_asset": positive(-asset),
                "portfolio_distribution_borrowed_fiat": positive(-fiat),
                "portfolio_distribution_interest_asset": now["ia"][env],
                "portfolio_distribution_interest_fiat": now["if"][env]}

    def observe(self):
        if self.n == 1:                         # a slice: cheaper than gathering rows
            row = self.now["idx"][0]
            obs = np.concatenate((self.features[row:row + len(self.window)][None],
                                  self.state["dyn"]), axis=2)
            return obs if self.rules.windows is not None else obs[:, 0]
        if self.rules.windows is None:
            return np.concatenate([self.features[self.now["idx"]], self.state["dyn"][:, -1]],
                                  axis=1)
        rows = np.array(self.now["idx"])[:, None] + self.window
        return np.concatenate([self.features[rows], self.state["dyn"]], axis=2)

    def outputs(self, now, terminated, truncated):
        """``(obs, table)`` as the compiled calls return them."""
        rows = [now["reward"], terminated, truncated]
        rows += [self.column(now, c) for c in self.info_columns]
        return self.observe(), np.array(rows, np.float64)
