"""gym-anytrading's StocksEnv rules, batched: price data and one TensorFlow step.

Both :class:`flowsim.envs.TradingVectorEnv` (environments stepped from Python)
and :func:`flowsim.envs.rollout` (whole episodes inside a compiled kernel) step
with :func:`step` and observe with :func:`observe`, so they follow one set of
rules, those of ``gym_anytrading.envs.StocksEnv`` (2.0.0):

* data: the Close prices from ``frame_bound[0] - window_size`` to
  ``frame_bound[1]``; features ``(price, diff)`` with the first diff 0, the
  diff taken in the prices' own dtype and both stored as float32; an
  observation is the last ``window_size`` rows up to and including the
  current tick.
* reset: tick ``window_size`` (or a drawn start tick), last trade tick one
  before, position Short (0), total reward 0, total profit 1.
* step: the tick advances; truncated when it reaches the episode's end tick.
  A trade is Buy (1) while Short or Sell (0) while Long; when it closes a Long
  the reward is ``price[tick] - price[last trade tick]`` (float32).  On a trade,
  or at truncation, a Long position's profit becomes
  ``profit * (1 - 0.005) / price[last trade] * (1 - 0.01) * price[tick]``.

gym-anytrading accumulates the total reward and profit with numpy scalars:
under numpy >= 2 (NEP 50) these stay float32, under numpy 1.x they are float64.
:data:`ACC_DTYPE` follows the installed numpy, so the totals match bit for bit.
"""
import numbers
import os

import numpy as np

from ..core.lazy_tf import tf

#: Trading fees of gym-anytrading's StocksEnv (fractions of the price).
FEE_BID, FEE_ASK = 0.01, 0.005
#: Actions and positions.
SELL, BUY = 0, 1
SHORT, LONG = 0, 1
#: dtype of gym-anytrading's running totals: what numpy makes of float32 (op) Python float.
ACC_DTYPE = np.dtype(type(np.float32(3) + 3.0))
#: Largest table of precomputed observations (bytes) before they are gathered row by row.
WINDOWS_BYTES = 1 << 28
#: Bounds of gym-anytrading's observation space.
OBS_BOUND = 1e10

SAMPLE = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                      "data", "sample_ohlcv.csv")


def sample_prices():
    """Close prices of flowsim's bundled sample bars (1,260 generated daily bars, not
    market data): the default of ``flowsim/Stocks-v0``."""
    return np.loadtxt(SAMPLE, delimiter=",", skiprows=1, usecols=4, dtype=np.float64)


def _close(series, what):
    """The Close prices of one series (a DataFrame with a Close column or a 1-d array)."""
    if hasattr(series, "columns"):
        if "Close" not in series.columns:
            raise ValueError(f"{what}: a DataFrame needs a 'Close' column (as gym-anytrading's "
                             f"StocksEnv reads), has {list(series.columns)}")
        close = series.loc[:, "Close"].to_numpy()
    else:
        close = np.asarray(series)
        if close.ndim != 1:
            raise ValueError(f"{what}: expected a 1-d array of prices or a DataFrame with a "
                             f"Close column, got an array of shape {list(close.shape)}")
    if not (np.issubdtype(close.dtype, np.floating) or np.issubdtype(close.dtype, np.integer)):
        raise TypeError(f"{what}: prices must be numeric, got dtype {close.dtype}")
    if not np.issubdtype(close.dtype, np.floating):
        close = close.astype(np.float64)
    if not np.all(np.isfinite(close)):
        raise ValueError(f"{what}: prices must be finite, found "
                         f"{int(np.sum(~np.isfinite(close)))} NaN/Inf value(s)")
    return close


def split_series(prices):
    """``prices`` as a list of 1-d Close arrays: one DataFrame or 1-d array is one series;
    a list/tuple of them, or a 2-d array ``[series, ticks]``, several."""
    if prices is None:
        return [sample_prices()]
    if hasattr(prices, "columns"):
        return [_close(prices, "prices")]
    if isinstance(prices, (list, tuple)):
        if not prices:
            raise ValueError("prices: got an empty list")
        if all(isinstance(p, numbers.Number) for p in prices):
            return [_close(np.asarray(prices), "prices")]
        return [_close(p, f"prices[{i}]") for i, p in enumerate(prices)]
    array = np.asarray(prices)
    if array.ndim == 2:
        return [_close(row, f"prices[{i}]") for i, row in enumerate(array)]
    return [_close(array, "prices")]


class Market:
    """Price series prepared as gym-anytrading's StocksEnv prepares one.

    Attributes: ``prices`` float32 ``[series, length]`` and ``features`` float32
    ``[series, length, 2]`` (padded past each series' end by repeating its last
    row), ``end_tick`` int ``[series]`` (the last tick, ``len - 1`` in
    gym-anytrading), ``window_size``, ``n_series``.
    """

    def __init__(self, prices, window_size=30, frame_bound=None):
        self.window_size = window_size = _window_size(window_size)
        closes = split_series(prices)
        frame_bound = _frame_bound(frame_bound)
        self.frame_bounds = []
        prices32, features = [], []
        for i, close in enumerate(closes):
            what = "prices" if len(closes) == 1 else f"prices[{i}]"
            start, end = frame_bound if frame_bound is not None else (window_size, len(close))
            _check_frame(start, end, window_size, close, what)
            self.frame_bounds.append((start, end))
            p = close[start - window_size:end]
            diff = np.insert(np.diff(p), 0, 0)
            prices32.append(p.astype(np.float32))
            features.append(np.column_stack((p, diff)).astype(np.float32))
        length = max(len(p) for p in prices32)
        self.end_tick = np.array([len(p) - 1 for p in prices32], np.int32)
        self.prices = np.stack([np.pad(p, (0, length - len(p)), mode="edge") for p in prices32])
        self.features = np.stack([np.pad(f, ((0, length - len(f)), (0, 0)), mode="edge")
                                  for f in features])
        self.n_series = len(prices32)
        # every tick's observation, [series, length, window, 2]: an observation is then
        # one contiguous row to gather, faster than window_size scattered rows (for
        # rollouts); above WINDOWS_BYTES the rows are gathered
        if self.features.size * window_size * 4 <= WINDOWS_BYTES:
            idx = np.arange(length)[:, None] + np.arange(-window_size + 1, 1)[None, :]
            self.windows = self.features[:, np.maximum(idx, 0)]
        else:
            self.windows = None

    @property
    def observations(self):
        """What :func:`observe` reads: :attr:`windows`, or :attr:`features` when the
        windows would take more than :data:`WINDOWS_BYTES`."""
        return self.features if self.windows is None else self.windows

    @property
    def length(self):
        return self.prices.shape[1]

    def check_episode_length(self, episode_length):
        """``episode_length`` checked against every series (None: the whole frame)."""
        if episode_length is None:
            return None
        if isinstance(episode_length, bool) or not isinstance(episode_length, numbers.Integral):
            raise TypeError(f"episode_length must be an integer or None, got {episode_length!r}")
        longest = int(self.end_tick.min()) - self.window_size
        if not 1 <= episode_length <= longest:
            raise ValueError(f"episode_length must be in [1, {longest}] (the ticks after the "
                             f"first window of the shortest series), got {episode_length}")
        return int(episode_length)

    def max_steps(self, episode_length):
        """Most steps an episode can take."""
        if episode_length is not None:
            return episode_length
        return int(self.end_tick.max()) - self.window_size


def _window_size(window_size):
    if isinstance(window_size, bool) or not isinstance(window_size, numbers.Integral):
        raise TypeError(f"window_size must be an integer, got {window_size!r}")
    if window_size < 1:
        raise ValueError(f"window_size must be >= 1, got {window_size}")
    return int(window_size)


def _frame_bound(frame_bound):
    """``frame_bound`` as a pair of ints, or None."""
    if frame_bound is None:
        return None
    if (not isinstance(frame_bound, (tuple, list)) or len(frame_bound) != 2
            or not all(isinstance(b, numbers.Integral) and not isinstance(b, bool)
                       for b in frame_bound)):
        raise ValueError(f"frame_bound must be a pair of integers (start, end), "
                         f"got {frame_bound!r}")
    return int(frame_bound[0]), int(frame_bound[1])


def _check_frame(start, end, window_size, close, what):
    """A frame ``(start, end)`` of series ``close`` leaves an episode of >= 2 ticks."""
    if start < window_size:
        raise ValueError(f"frame_bound[0] ({start}) must be >= window_size "
                         f"({window_size}): the first observation needs "
                         f"window_size earlier prices")
    if end > len(close):
        raise ValueError(f"frame_bound[1] ({end}) is past the end of {what} "
                         f"({len(close)} prices)")
    if end - start < 2:
        raise ValueError(f"window_size={window_size} with frame_bound=({start}, {end}) "
                         f"leaves {max(end - start, 0)} tick(s) of {what} "
                         f"({len(close)} prices) after the first window: an episode "
                         f"needs at least 2 (give a smaller window_size or a longer "
                         f"series)")


# -- the rules, in TensorFlow ----------------------------------------------------------
def start_ticks(u, series, end_tick, window_size, episode_length):
    """Start and end ticks of episodes: the whole frame, or ``episode_length`` steps
    starting at a tick drawn from uniforms ``u`` (float64 ``[n]``)."""
    t = tf()
    last = t.gather(end_tick, series)
    if episode_length is None:
        return t.fill(t.shape(series), t.constant(window_size, t.int32)), last
    choices = t.cast(last - window_size - episode_length + 1, t.float64)
    offset = t.minimum(t.cast(t.floor(u * choices), t.int32),
                       t.cast(choices, t.int32) - 1)
    start = window_size + offset
    return start, start + episode_length


def observe(table, series, tick, window_size):
    """Observations ``[n, window_size, 2]`` float32, rows ``tick - window + 1 .. tick``,
    from :attr:`Market.observations` (windows ``[S, L, W, 2]`` or features ``[S, L, 2]``)."""
    t = tf()
    length = t.shape(table, out_type=t.int32)[1]
    if table.shape.rank == 4:
        flat = t.reshape(table, [-1, window_size, 2])
        return t.gather(flat, series * length + tick)
    flat = t.reshape(table, [-1, 2])
    rows = (tick - window_size + 1)[:, None] + t.range(window_size, dtype=t.int32)[None, :]
    return t.gather(flat, series[:, None] * length + rows)


def fee_factors():
    """``[1 - FEE_ASK, 1 - FEE_BID]`` in :data:`ACC_DTYPE` (see :func:`step`)."""
    return np.array([1 - FEE_ASK, 1 - FEE_BID], ACC_DTYPE)


def trade_prices(prices, series, action, tick, last, position, end):
    """What gym-anytrading's StocksEnv and ForexEnv steps share: ``(tick, truncated,
    long, trade, current, before)``, the next tick, whether it ends the episode,
    whether the position held is Long, whether ``action`` trades, and the prices at
    the next tick and at the last trade."""
    t = tf()
    length = t.shape(prices, out_type=t.int32)[1]
    flat = t.reshape(prices, [-1])
    tick = tick + 1
    truncated = t.equal(tick, end)
    long = t.equal(position, LONG)
    action = t.cast(action, t.int32)
    trade = (t.equal(action, BUY) & ~long) | (t.equal(action, SELL) & long)
    # an ended episode (tick == end) may step past its series: clamped, its result unused
    current = t.gather(flat, series * length + t.minimum(tick, length - 1))
    before = t.gather(flat, series * length + last)
    return tick, truncated, long, trade, current, before


def step(prices, series, action, tick, last, position, end, total_reward, total_profit,
         fees):
    """One StocksEnv step of every environment.

    ``fees`` is ``(1 - FEE_ASK, 1 - FEE_BID)`` as two tensors shaped like the totals
    (:func:`fee_factors` filled per environment): with scalars, TensorFlow's graph
    optimizer (without XLA) reorders the chain of products to multiply the scalars
    first ("minimize broadcasts"), which changes gym-anytrading's rounding in about a
    third of the steps.

    Returns ``(tick, last, position, total_reward, total_profit, reward, truncated,
    trade)``; ``reward`` is float32, the totals keep their dtype (:data:`ACC_DTYPE`).
    """
    t = tf()
    acc = total_profit.dtype
    tick, truncated, long, trade, current, before = trade_prices(prices, series, action,
                                                                 tick, last, position, end)
    reward = t.where(trade & long, current - before, t.zeros_like(current))
    total_reward = total_reward + t.cast(reward, acc)
    shares = total_profit * fees[0] / t.cast(before, acc)
    profit = shares * fees[1] * t.cast(current, acc)
    total_profit = t.where((trade | truncated) & long, profit, total_profit)
    position = t.where(trade, 1 - position, position)
    last = t.where(trade, tick, last)
    return tick, last, position, total_reward, total_profit, reward, truncated, trade
