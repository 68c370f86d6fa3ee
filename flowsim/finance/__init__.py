"""flowsim.finance: strategy parameter sweeps and path-simulation pricing.

- :func:`ma_crossover_sweep` / :func:`strategy_sweep`: backtest every parameter
  row of a strategy at once (one vectorized TF kernel per block of rows, run by
  :func:`flowsim.sweep` on any backend).
- :func:`from_signals`: vectorbt's ``Portfolio.from_signals`` (fees, slippage,
  stops, shorts) with its ``stats()``, equity curve and trade records;
  :mod:`flowsim.finance.indicators`: MA, MSTD, BBANDS, RSI, STOCH, MACD, ATR, OBV.
- :func:`from_orders` and ``from_signals(..., group_by=..., cash_sharing=True,
  call_seq="auto")``: vectorbt's order-based and shared-cash portfolios
  (:class:`GroupPortfolio`), target-percent rebalancing across a group's assets.
- :func:`signal_sweep`: a signal strategy (:mod:`flowsim.finance.strategies`) over a
  grid of parameter rows and assets, through the same portfolio, on any backend.
- :func:`walk_forward`: ``signal_sweep`` in vectorbt's rolling windows
  (:func:`rolling_split`), the best in-sample row of each run out-of-sample.
- :func:`price` with a model (:class:`GBM`, :class:`Heston`) and a payoff
  (:class:`EuropeanCall`, :class:`EuropeanPut`, :class:`AsianCall`,
  :class:`GeometricAsianCall`, :class:`UpAndOutCall`): Monte Carlo prices where
  each path is an event of the block grid, so a seed gives the same bits on every
  backend and for every ``events_limit``.

Needs pandas (``pip install 'flowsim[finance]'``) for the sweep tables.
"""
from . import indicators, strategies
from .backtest import (
    METRICS,
    backtest_metrics,
    crossover_positions,
    ma_crossover_positions,
    ma_crossover_sweep,
    rolling_means,
    strategy_sweep,
)
from .grouped import GroupPortfolio, from_orders
from .models import GBM, Heston
from .payoffs import AsianCall, EuropeanCall, EuropeanPut, GeometricAsianCall, Payoff, UpAndOutCall
from .portfolio import STATS, Portfolio, from_signals
from .pricing import PathSimulation, price
from .signals import signal_simulation, signal_sweep
from .walkforward import rolling_split, walk_forward

__all__ = ["GBM", "Heston", "AsianCall", "EuropeanCall", "EuropeanPut", "GeometricAsianCall",
           "Payoff", "UpAndOutCall", "PathSimulation", "price", "METRICS", "backtest_metrics",
           "crossover_positions", "ma_crossover_positions", "ma_crossover_sweep",
           "rolling_means", "strategy_sweep", "STATS", "Portfolio", "from_signals",
           "from_orders", "GroupPortfolio",
           "indicators", "strategies", "signal_simulation", "signal_sweep", "rolling_split",
           "walk_forward"]
