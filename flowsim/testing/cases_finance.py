"""Signal-strategy sweeps: cases of :func:`flowsim.testing.check_executor` (and of
tests/test_finance.py).

``CASES[name]`` = ``dict(factory="module:function", n_events=..., sweep=True)``: the
factory (importable, no arguments) returns the :class:`flowsim.Sweep` that
:func:`flowsim.finance.signal_sweep` runs (RSI thresholds x stop-loss rows, fees,
two assets, and a shared-cash sweep of three); every backend must give the bits of
``Flow`` for its metrics.
"""
import itertools

import numpy as np

ROWS, BLOCK = 128, 64
#: The shared-cash sweep's bars (its rows: the grid, two blocks).
GROUP_BARS = 90


def rsi_stop_grid():
    """128 (window, lower, upper, sl_stop) rows."""
    import pandas as pd
    rows = list(itertools.product([5, 9, 14, 21], [20.0, 25.0, 30.0, 35.0], [65.0, 75.0],
                                  [0.02, 0.04, 0.06, 0.1]))
    return pd.DataFrame(rows, columns=["window", "lower", "upper", "sl_stop"])


def rsi_prices():
    rng = np.random.default_rng(2026)
    return 100 * np.exp(np.cumsum(0.015 * rng.standard_normal((160, 2)), axis=0))


def rsi_sweep():
    """The signal_sweep Sweep of the RSI x stop grid, blocks of 64 rows."""
    from flowsim.finance import signal_simulation, strategies
    sim, _, _ = signal_simulation(strategies.rsi_thresholds, rsi_prices(), rsi_stop_grid(),
                                  fees=0.001, slippage=0.0005, freq="1D", block_size=BLOCK)
    return sim


def shared_cash_sweep():
    """The signal_sweep Sweep of the RSI x stop grid, each row a group of three assets
    sharing its cash (vectorbt's ``cash_sharing=True``, ``call_seq="auto"``), 90 bars,
    blocks of 64 rows."""
    from flowsim.finance import signal_simulation, strategies
    rng = np.random.default_rng(40)
    close = 100 * np.exp(np.cumsum(0.02 * rng.standard_normal((GROUP_BARS, 3)), axis=0))
    sim, _, _ = signal_simulation(strategies.rsi_thresholds, close, rsi_stop_grid(),
                                  fees=0.001, slippage=0.0005, freq="1D", block_size=BLOCK,
                                  cash_sharing=True, call_seq="auto")
    return sim


CASES = {
    "finance_rsi_sweep": dict(factory="flowsim.testing.cases_finance:rsi_sweep",
                              n_events=ROWS, sweep=True),
    "finance_shared_cash_sweep": dict(factory="flowsim.testing.cases_finance:shared_cash_sweep",
                                      n_events=ROWS, sweep=True),
}
