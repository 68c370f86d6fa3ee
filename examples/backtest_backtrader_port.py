"""A backtrader ``optstrategy`` ported to flowsim.finance.signal_sweep.

The backtrader original (``benchmarks/make_backtrader_reference.py``)::

    class SmaCross(bt.Strategy):
        params = (("fast", 10), ("slow", 30))
        def __init__(self):
            self.cross = bt.ind.CrossOver(bt.ind.SMA(period=self.p.fast),
                                          bt.ind.SMA(period=self.p.slow))
        def next(self):
            if not self.position and self.cross > 0:
                self.buy(size=10)
            elif self.position and self.cross < 0:
                self.close()

    cerebro.broker.setcommission(commission=0.001)      # 0.1 % of each fill
    cerebro.optstrategy(SmaCross, fast=(5, 8, 12), slow=(20, 30, 50))

The port: the same crossings as signals (:func:`sma_cross_next_open`), moved one
bar later because backtrader fills a market order at the *next* bar's open, and
``price=open`` so the portfolio fills there; ``size=10`` shares, ``fees=0.001``
(backtrader's percentage commission is vectorbt's ``fees``), ``init_cash=10000``.
The value is marked at the close, as backtrader's broker does.

With a stop-loss (``SmaCrossStop`` in the same script: when the buy fills, a sell
``Stop`` order at the fill price x (1 - stop), one-cancels-other with the close)
the port adds ``sl_stop`` as a sweep column, ``open=open`` so a stop that gaps
fills at the open as backtrader's does, and ``stop_entry_price="price"``: the
stop is measured from the fill at the next open, not from the signal bar's close
(:func:`sweep_with_stops`, 36 rows).  A bracket (``SmaCrossBracket``: the stop and
a take-profit ``Limit`` at the fill x (1 + take), one-cancels-other) adds a
``tp_stop`` column (:func:`sweep_with_bracket`, 36 rows).

    PYTHONPATH=. python examples/backtest_backtrader_port.py

prints the sweep and how far it is from the stored backtrader results
(``tests/data/backtrader_sma_cross_*.csv``: the same trades, final values within
rounding).
"""
import itertools
import os

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
DATA = os.path.join(os.path.dirname(HERE), "tests", "data")


def sma_cross_next_open(params, data):
    """backtrader's SMA ``CrossOver`` signals, acted on one bar later (params fast, slow)."""
    from flowsim.core.lazy_tf import tf
    from flowsim.finance import indicators as ind
    t = tf()
    fast = ind.ma(data["close"], params[:, 0])
    slow = ind.ma(data["close"], params[:, 1])

    def next_bar(signal):                       # the order placed at bar i fills at i + 1
        return t.concat([t.zeros_like(signal[:1]), signal[:-1]], axis=0)

    return {"entries": next_bar(ind.crossed_above(fast, slow)),
            "exits": next_bar(ind.crossed_above(slow, fast))}


sma_cross_next_open.params = ("fast", "slow")

#: backtrader's broker settings of the original.
PORTFOLIO = dict(size=10.0, fees=0.001, init_cash=10_000.0, freq="1D")
#: The stop-loss port's from_signals keywords: stops measured from the fill.
STOP_PORTFOLIO = dict(PORTFOLIO, stop_entry_price="price")
STOPS = (0.02, 0.04, 0.06, 0.1)
BRACKET_STOPS, TAKES = (0.03, 0.06), (0.04, 0.08)


def load_bars():
    """(open, high, low, close) stored by make_backtrader_reference.py."""
    a = np.loadtxt(os.path.join(DATA, "backtrader_sma_cross_bars.csv"), delimiter=",",
                   skiprows=1)
    return a[:, 0], a[:, 1], a[:, 2], a[:, 3]


def grid(fast=(5, 8, 12), slow=(20, 30, 50), stops=None, takes=None):
    """The (fast, slow) rows, times the ``stops`` (an ``sl_stop`` column) and the
    ``takes`` (``tp_stop``) if given."""
    import pandas as pd
    axes = {"fast": fast, "slow": slow, "sl_stop": stops, "tp_stop": takes}
    axes = {k: v for k, v in axes.items() if v is not None}
    return pd.DataFrame(list(itertools.product(*axes.values())), columns=list(axes))


def sweep(**kwargs):
    """The ported optstrategy: one row per (fast, slow), every stats() metric."""
    from flowsim.finance import signal_sweep
    op, hi, lo, close = load_bars()
    return signal_sweep(sma_cross_next_open, close, grid(), price=op, high=hi, low=lo,
                        **PORTFOLIO, **kwargs)


def sweep_with_stops(**kwargs):
    """The stop-loss optstrategy: one row per (fast, slow, sl_stop)."""
    from flowsim.finance import signal_sweep
    op, hi, lo, close = load_bars()
    return signal_sweep(sma_cross_next_open, close, grid(stops=STOPS), price=op, open=op,
                        high=hi, low=lo, **STOP_PORTFOLIO, **kwargs)


def sweep_with_bracket(**kwargs):
    """The bracket optstrategy: one row per (fast, slow, sl_stop, tp_stop)."""
    from flowsim.finance import signal_sweep
    op, hi, lo, close = load_bars()
    return signal_sweep(sma_cross_next_open, close, grid(stops=BRACKET_STOPS, takes=TAKES),
                        price=op, open=op, high=hi, low=lo, **STOP_PORTFOLIO, **kwargs)


def trades(fast, slow, sl_stop=None, tp_stop=None):
    """The trade records of one combination (from_signals on the same signals)."""
    from flowsim.finance import from_signals
    op, hi, lo, close = load_bars()
    sig = sma_cross_next_open(np.array([[fast, slow]], dtype=np.float64),
                              {"close": close[:, None]})
    entries, exits = np.asarray(sig["entries"])[:, 0, 0], np.asarray(sig["exits"])[:, 0, 0]
    if sl_stop is None:
        return from_signals(close, entries, exits, price=op, **PORTFOLIO).trades
    return from_signals(close, entries, exits, price=op, open=op, high=hi, low=lo,
                        sl_stop=sl_stop, tp_stop=tp_stop, **STOP_PORTFOLIO).trades


def main():
    table = sweep()
    print(table[["fast", "slow", "end_value", "total_return", "total_closed_trades",
                 "win_rate", "sharpe_ratio", "max_drawdown"]].to_string(index=False))
    ref = np.loadtxt(os.path.join(DATA, "backtrader_sma_cross_values.csv"), delimiter=",",
                     skiprows=1)
    ours = table.set_index(["fast", "slow"])["end_value"]
    worst = max(abs(ours[(int(f), int(s))] - v) / v for f, s, v in ref)
    print(f"final values vs backtrader: max relative difference {worst:.1e}")
    stops = sweep_with_stops()
    ref = np.loadtxt(os.path.join(DATA, "backtrader_sma_cross_stop_values.csv"), delimiter=",",
                     skiprows=1)
    worst = np.max(np.abs(stops["end_value"].to_numpy() - ref[:, 3]) / ref[:, 3])
    print(f"with stops ({len(stops)} rows): max relative difference {worst:.1e}")
    bracket = sweep_with_bracket()
    ref = np.loadtxt(os.path.join(DATA, "backtrader_sma_cross_bracket_values.csv"),
                     delimiter=",", skiprows=1)
    worst = np.max(np.abs(bracket["end_value"].to_numpy() - ref[:, 4]) / ref[:, 4])
    print(f"with brackets ({len(bracket)} rows): max relative difference {worst:.1e}")


if __name__ == "__main__":
    main()
