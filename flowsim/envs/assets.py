"""A portfolio over several assets per environment, batched: target weights in, one TF call.

:class:`MultiAssetVectorEnv` holds, in each of ``num_envs`` environments, cash
``c`` and units ``q_i`` of ``k`` assets with prices ``p_{t,i}``.  An action is
the target weights ``w`` (a Box ``[k]``; the cash weight is ``1 - sum(w)``).
One step, from row ``t`` to ``t + 1``, for every environment at once:

1. valuation ``V_t = c + sum_i q_i p_{t,i}``; target holdings ``w_i V_t``; traded
   value ``d_i = w_i V_t - q_i p_{t,i}``;
2. turnover fee ``F = fee * sum_i |d_i|``, paid in cash:
   ``q_i = w_i V_t / p_{t,i}``, ``c = (1 - sum_i w_i) V_t - F``;
3. prices move to row ``t + 1``; borrowing interest
   ``I = rate * (sum_i max(0, -q_i p_{t+1,i}) + max(0, -c))`` (shorts at their
   value, and cash borrowed for leverage) is paid from cash: ``c -= I``;
4. ``V_{t+1} = c + sum_i q_i p_{t+1,i}``; reward ``log(V_{t+1} / V_t)``;
   terminated when ``V_{t+1} <= 0``; truncated at the data's last row or after
   ``episode_length`` steps.

Observations: float32 ``[window_size + 1, k]``, the last ``window_size`` rows of
each asset's return ``p_{t,i} / p_{t-1,i} - 1`` and, as the last row, the
weights held ``q_i p_{t,i} / V_t``.  Weights are checked against
``[min_weight, max_weight]`` and ``sum |w| <= max_leverage``.  No anchor batches
this; ``tests/test_envs.py`` checks it against a numpy implementation of these
equations.
"""

import gymnasium
import numpy as np
from gymnasium.vector import AutoresetMode
from gymnasium.vector.utils import batch_space

from ..core import rng
from ..core.lazy_tf import tf
from .portfolio import check_number
from .vector import BACKENDS, CompiledVectorEnv, default_device


def closes_of(prices):
    """``prices`` (DataFrame or array ``[rows, k]``) as float64 ``[rows, k]``, checked."""
    names = list(prices.columns) if hasattr(prices, "columns") else None
    array = np.asarray(prices, dtype=np.float64)
    if array.ndim != 2 or array.shape[1] < 1:
        raise ValueError(f"prices must be a DataFrame or array [rows, assets], got shape "
                         f"{list(array.shape)}")
    if not np.all(np.isfinite(array)) or not np.all(array > 0):
        raise ValueError("prices must be finite and > 0 (NaN, Inf or non-positive values "
                         "found: drop or fill those rows)")
    return array, names


class MultiAssetVectorEnv(CompiledVectorEnv, gymnasium.vector.VectorEnv):
    """``num_envs`` portfolios over the ``k`` assets of ``prices``, stepped together.

    Parameters
    ----------
    prices : DataFrame or array [rows, k]
        Close prices, one column per asset (finite, > 0).
    num_envs : int
        Environments (default 1).
    window_size : int
        Rows of returns per observation (default 10).
    episode_length : int or None
        None: episodes run from row ``window_size`` to the last row.  An
        integer: that many steps from a start row drawn per environment and
        episode, a pure function of (seed, episode number).
    trading_fees : float
        Fee per unit of value traded (turnover), in [0, 1); default 0.
    borrow_interest_rate : float
        Interest per step on the value of short positions and on borrowed cash
        (default 0).
    portfolio_initial_value : float
        Cash at the start of an episode (default 1000; no assets held).
    min_weight, max_weight : float
        Bounds of each target weight (default -1 and 1).
    max_leverage : float
        Largest ``sum |w|`` (default 1: no leverage).
    backend, device, jit_compile, dtype
        As :class:`flowsim.envs.PortfolioVectorEnv` (``dtype``: what money and
        prices are computed in, ``"float64"`` by default or ``"float32"``).

    ``infos``: ``portfolio_valuation``, ``cash``, ``fees`` and ``interest`` of the
    step, ``weights`` ``[num_envs, k]`` and ``idx`` (row), with ``_key`` masks.
    """

    metadata = {"autoreset_mode": AutoresetMode.NEXT_STEP, "render_modes": []}
    INFO = ("portfolio_valuation", "cash", "fees", "interest", "idx")

    def __init__(self, prices, num_envs=1, window_size=10, episode_length=None,
                 trading_fees=0.0, borrow_interest_rate=0.0, portfolio_initial_value=1000,
                 min_weight=-1.0, max_weight=1.0, max_leverage=1.0, backend="numpy",
                 device=None, jit_compile=True, dtype="float64"):
        from ..core.blocks import check_count
        self.num_envs = check_count("num_envs", num_envs)
        if dtype not in ("float64", "float32"):
            raise ValueError(f"dtype must be 'float64' or 'float32', got {dtype!r}")
        self.dtype = np.dtype(dtype)
        if backend not in BACKENDS:
            raise ValueError(f"backend must be one of {BACKENDS}, got {backend!r}")
        self.prices, self.names = closes_of(prices)
        rows, k = self.prices.shape
        self.k = k
        self.window_size = check_count("window_size", window_size)
        if self.window_size > rows - 2:
            raise ValueError(f"window_size={self.window_size} is longer than prices allow "
                             f"({rows} rows: at most {rows - 2})")
        longest = rows - 1 - self.window_size
        if episode_length is not None:
            episode_length = check_count("episode_length", episode_length)
            if episode_length > longest:
                raise ValueError(f"episode_length must be <= {longest} (rows after the first "
                                 f"window), got {episode_length}")
        self.episode_length = episode_length
        self.trading_fees = check_number("trading_fees", trading_fees, 0.0, high=1.0)
        self.borrow_interest_rate = check_number("borrow_interest_rate", borrow_interest_rate, 0.0)
        self.portfolio_initial_value = check_number("portfolio_initial_value",
                                               portfolio_initial_value, 0.0, low_open=True)
        self.min_weight = check_number("min_weight", min_weight)
        self.max_weight = check_number("max_weight", max_weight)
        if self.min_weight >= self.max_weight:
            raise ValueError(f"min_weight ({min_weight}) must be < max_weight ({max_weight})")
        self.max_leverage = check_number("max_leverage", max_leverage, 0.0, low_open=True)
        self.backend = backend
        self.render_mode = None
        self.single_action_space = gymnasium.spaces.Box(self.min_weight, self.max_weight, (k,),
                                                        self.dtype)
        self.action_space = batch_space(self.single_action_space, self.num_envs)
        self.single_observation_space = gymnasium.spaces.Box(
            -np.inf, np.inf, (self.window_size + 1, k), np.float32)
        self.observation_space = batch_space(self.single_observation_space, self.num_envs)
        self.device = device or default_device()
        self.jit_compile = bool(jit_compile)
        returns = np.zeros_like(self.prices)
        returns[1:] = self.prices[1:] / self.prices[:-1] - 1
        self.returns = returns.astype(np.float32)
        self._fns = None
        self._seeded = False
        self._ones = np.ones(self.num_envs, bool)

    def _build(self):
        t = tf()
        n, k = self.num_envs, self.k
        with t.device(self.device):
            self._p = t.constant(self.prices.astype(self.dtype))
            self._r = t.constant(self.returns)
            # the rules' numbers as rows (not constants: TF's graph optimizer
            # reassociates products with constants, see flowsim.envs.portfolio)
            self._rules = t.Variable(np.tile(np.array(
                [[self.trading_fees], [self.borrow_interest_rate],
                 [self.portfolio_initial_value]], self.dtype), (1, n)))
            self._ints = t.Variable(np.zeros((4, n), np.int32))        # idx, step, end, done
            self._keys = t.Variable(np.zeros((2, n), np.int64))        # seed, episode
            self._money = t.Variable(np.zeros((k + 1, n), self.dtype))  # units, cash
        self.compile_calls(t.TensorSpec([n, k], t.as_dtype(self.dtype)))

    def _fresh(self, ints, money, keys, mask):
        t = tf()
        n = self.num_envs
        start = t.fill([n], t.constant(self.window_size, t.int32))
        end = t.fill([n], t.constant(self.prices.shape[0] - 1, t.int32))
        if self.episode_length is not None:
            choices = self.prices.shape[0] - 1 - self.window_size - self.episode_length + 1
            u = rng.uniform_keys(keys)
            start = start + t.minimum(t.cast(t.floor(u * choices), t.int32), choices - 1)
            end = start + self.episode_length
        new_ints = t.stack([start, t.zeros_like(start), end, t.zeros_like(start)])
        cash = self._rules[2]
        new_money = t.concat([t.zeros([self.k, n], cash.dtype), cash[None]], 0)
        return t.where(mask, new_ints, ints), t.where(mask, new_money, money)

    def _outputs(self, ints, money, reward, terminated, truncated, fees, interest):
        t = tf()
        idx = ints[0]
        price = t.transpose(t.gather(self._p, idx))                    # [k, n]
        held = money[:self.k] * price
        value = money[self.k] + t.reduce_sum(held, axis=0)
        weights = held / value
        rows = idx[:, None] + t.range(-self.window_size + 1, 1)[None, :]
        obs = t.concat([t.gather(self._r, rows), t.cast(t.transpose(weights), t.float32)[
            :, None, :]], axis=1)
        real = value.dtype
        table = t.concat([t.stack([reward, t.cast(terminated, real),
                                   t.cast(truncated, real), value, money[self.k], fees,
                                   interest, t.cast(idx, real)]), weights], 0)
        return obs, table

    def _step_fn(self, weights):
        t = tf()
        ints, money, keys = self._ints.read_value(), self._money.read_value(), \
            self._keys.read_value()
        fee, rate, _ = t.unstack(self._rules.read_value())
        reset = t.cast(ints[3], t.bool)
        idx = ints[0]
        w = t.transpose(weights)                                       # [k, n]
        price = t.transpose(t.gather(self._p, idx))
        units, cash = money[:self.k], money[self.k]
        value = cash + t.reduce_sum(units * price, axis=0)
        traded = w * value - units * price
        fees = fee * t.reduce_sum(t.abs(traded), axis=0)
        units = w * value / price
        cash = (1.0 - t.reduce_sum(w, axis=0)) * value - fees
        idx = idx + 1
        price = t.transpose(t.gather(self._p, idx))
        zero = t.zeros_like(price)
        interest = rate * (t.reduce_sum(t.maximum(zero, -units * price), axis=0)
                           + t.maximum(zero[0], -cash))
        cash = cash - interest
        new_value = cash + t.reduce_sum(units * price, axis=0)
        terminated = new_value <= 0
        reward = t.where(terminated, t.zeros_like(value), t.math.log(
            t.where(terminated, value, new_value) / value))
        step = ints[1] + 1
        truncated = idx >= ints[2]
        stepped = t.stack([idx, step, ints[2], t.cast(terminated | truncated, t.int32)])
        money = t.concat([units, cash[None]], 0)
        keys = t.stack([keys[0], keys[1] + t.cast(reset, t.int64)])
        ints, money = self._fresh(stepped, money, keys, reset)
        zero_n = t.zeros_like(reward)
        reward, fees, interest = (t.where(reset, zero_n, x) for x in (reward, fees, interest))
        terminated, truncated = terminated & ~reset, truncated & ~reset
        ints = t.tensor_scatter_nd_update(ints, [[3]], t.cast(terminated | truncated,
                                                               t.int32)[None])
        self._ints.assign(ints)
        self._money.assign(money)
        self._keys.assign(keys)
        return self._outputs(ints, money, reward, terminated, truncated, fees, interest)

    def _reset_fn(self, mask, seeds, seeded):
        t = tf()
        ints, money, keys = self._ints.read_value(), self._money.read_value(), \
            self._keys.read_value()
        episode = t.where(mask, t.where(seeded, t.zeros_like(keys[1]), keys[1] + 1), keys[1])
        keys = t.stack([t.where(mask & seeded, seeds, keys[0]), episode])
        ints, money = self._fresh(ints, money, keys, mask)
        self._ints.assign(ints)
        self._money.assign(money)
        self._keys.assign(keys)
        zero = t.zeros([self.num_envs], t.as_dtype(self.dtype))
        false = t.zeros([self.num_envs], t.bool)
        return self._outputs(ints, money, zero, false, false, zero, zero)

    def reset(self, *, seed=None, options=None):
        """As :meth:`flowsim.envs.TradingVectorEnv.reset`."""
        if self._fns is None:
            self._build()
        mask, args = self.reset_inputs(seed, options)
        obs, table = self._fns["reset"](*args)
        out = self._finish(obs, table, mask)
        return out[0], out[4]

    def step(self, actions):
        """Step every environment to target weights ``actions`` ``[num_envs, k]``."""
        if self._fns is None:
            raise RuntimeError("call reset() before step()")
        t = tf()
        a = actions.numpy() if isinstance(actions, t.Tensor) else np.asarray(actions)
        if a.shape != (self.num_envs, self.k) or not np.issubdtype(a.dtype, np.number):
            raise ValueError(f"actions must be target weights [{self.num_envs}, {self.k}], "
                             f"got shape {list(a.shape)}")
        low, high = self.min_weight, self.max_weight
        if not np.all((a >= low) & (a <= high)):
            raise ValueError(f"actions: each weight must be in [{low}, {high}] (min_weight, "
                             f"max_weight)")
        if np.any(np.abs(a).sum(axis=1) > self.max_leverage * (1 + 1e-12)):
            raise ValueError(f"actions: sum of |weights| must be <= max_leverage="
                             f"{self.max_leverage}")
        obs, table = self._fns["step"](t.constant(a.astype(self.dtype)))
        return self._finish(obs, table, self._ones)

    def _finish(self, obs, table, mask):
        t = tf()
        if self.backend == "tf":
            infos = {k: table[3 + i] for i, k in enumerate(self.INFO)}
            infos["idx"] = t.cast(infos["idx"], t.int64)
            infos["weights"] = t.transpose(table[8:])
            masks = {f"_{k}": t.constant(mask) for k in infos}
            return (obs, table[0], t.cast(table[1], t.bool), t.cast(table[2], t.bool),
                    {**infos, **masks})
        table = table.numpy()
        infos = {k: table[3 + i] for i, k in enumerate(self.INFO)}
        infos["idx"] = infos["idx"].astype(np.int64)
        infos["weights"] = table[8:].T.copy()
        for k in list(infos):
            infos[f"_{k}"] = mask.copy()
        return obs.numpy(), table[0], table[1].astype(bool), table[2].astype(bool), infos

    def close_extras(self, **kwargs):
        self._fns = None
