"""Stored backtrader results for examples/backtest_backtrader_port.py.

An SMA-cross strategy as backtrader users write it: ``optstrategy`` over (fast, slow)
windows, ``maxcpus=2``, a 0.1 % percentage commission, market orders of 10 shares,
which backtrader fills at the next bar's open; enter when the fast SMA crosses
above the slow one (``CrossOver > 0``), close when it crosses below.  The bars are
a 600-day random walk (fixed seed) with open/high/low around the close.

Writes ``tests/data/backtrader_sma_cross_{bars,trades,values}.csv``: the bars, every
closed trade (fast, slow, entry bar, exit bar, entry price, exit price, PnL after
commission) and each combination's final broker value.

Then the same strategy with a stop-loss (``SmaCrossStop``, 36 rows: the windows x
``STOPS``): when the buy fills, a sell ``Stop`` order at the fill price x (1 -
stop), one-cancels-other with the market order the cross sends to close.  Its
trades and values go to ``tests/data/backtrader_sma_cross_stop_{trades,values}.csv``
(a ``stop`` column after ``slow``); ``--only-stops`` writes only those.

    .venv/bin/python benchmarks/make_backtrader_reference.py
"""
import os
import sys
import time

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DATA = os.path.join(ROOT, "tests", "data")
FAST, SLOW = (5, 8, 12), (20, 30, 50)
SHARES, CASH, COMMISSION = 10, 10_000.0, 0.001
STOPS = (0.02, 0.04, 0.06, 0.1)
BRACKET_STOPS, TAKES = (0.03, 0.06), (0.04, 0.08)


def bars(n=600, seed=314):
    """open, high, low, close [n] of a random walk."""
    rng = np.random.default_rng(seed)
    close = 100 * np.exp(np.cumsum(0.015 * rng.standard_normal(n)))
    op = np.concatenate([[100.0], close[:-1]]) * np.exp(0.005 * rng.standard_normal(n))
    hi = np.maximum(op, close) * np.exp(np.abs(0.005 * rng.standard_normal(n)))
    lo = np.minimum(op, close) * np.exp(-np.abs(0.005 * rng.standard_normal(n)))
    return np.round(op, 4), np.round(hi, 4), np.round(lo, 4), np.round(close, 4)


try:
    import backtrader as bt
except ImportError:          # the bench extra; main() says so
    bt = None

if bt is not None:
    class SmaCross(bt.Strategy):
        """Buy SHARES when the fast SMA crosses above the slow one, close below."""

        params = (("fast", 10), ("slow", 30))

        def __init__(self):
            self.cross = bt.ind.CrossOver(bt.ind.SMA(period=self.p.fast),
                                          bt.ind.SMA(period=self.p.slow))

        def next(self):
            if not self.position and self.cross > 0:
                self.buy(size=SHARES)
            elif self.position and self.cross < 0:
                self.close()

    class SmaCrossStop(SmaCross):
        """SmaCross with a stop-loss measured from the entry's fill (the next open)."""

        params = (("stop", 0.05),)

        def __init__(self):
            super().__init__()
            self.stop_order = None

        def notify_order(self, order):
            if order.status != order.Completed:
                return
            if order.isbuy():
                self.stop_order = self.sell(size=order.executed.size, exectype=bt.Order.Stop,
                                            price=order.executed.price * (1 - self.p.stop))
            else:
                self.stop_order = None

        def next(self):
            if not self.position and self.cross > 0:
                self.buy(size=SHARES)
            elif self.position and self.cross < 0:
                self.close(oco=self.stop_order)        # the first to fill cancels the other

    class SmaCrossBracket(SmaCrossStop):
        """SmaCrossStop plus a take-profit: a sell ``Limit`` at the fill x (1 + take),
        the stop, the limit and the closing order one-cancels-other."""

        params = (("take", 0.05),)

        def notify_order(self, order):
            super().notify_order(order)
            if order.status == order.Completed and order.isbuy():
                self.sell(size=order.executed.size, exectype=bt.Order.Limit,
                          price=order.executed.price * (1 + self.p.take), oco=self.stop_order)

    class TradeLog(bt.Analyzer):
        """Closed trades (bar open, bar close, entry price, PnL after commission), value."""

        def start(self):
            self.rows, self.value = [], None

        def notify_trade(self, trade):
            if trade.isclosed:
                self.rows.append((trade.baropen, trade.barclose, trade.price, trade.pnlcomm))

        def stop(self):
            self.value = self.strategy.broker.getvalue()

        def get_analysis(self):
            return {"trades": self.rows, "value": self.value}


def run_backtrader(op, hi, lo, close, maxcpus=2, stops=None, takes=None):
    """(trades rows, {(fast, slow): final value}, seconds) from optstrategy (with
    ``stops``: SmaCrossStop, keys (fast, slow, stop); and ``takes``: SmaCrossBracket,
    keys (fast, slow, stop, take))."""
    import pandas as pd
    idx = pd.date_range("2020-01-01", periods=len(close), freq="D")
    frame = pd.DataFrame({"open": op, "high": hi, "low": lo, "close": close, "volume": 1e6},
                         index=idx)
    cerebro = bt.Cerebro(optreturn=True, maxcpus=maxcpus, stdstats=False)
    cerebro.adddata(bt.feeds.PandasData(dataname=frame))
    cerebro.broker.setcash(CASH)
    cerebro.broker.setcommission(commission=COMMISSION)
    cerebro.addanalyzer(TradeLog, _name="log")
    if stops is None:
        cerebro.optstrategy(SmaCross, fast=FAST, slow=SLOW)
    elif takes is None:
        cerebro.optstrategy(SmaCrossStop, fast=FAST, slow=SLOW, stop=stops)
    else:
        cerebro.optstrategy(SmaCrossBracket, fast=FAST, slow=SLOW, stop=stops, take=takes)
    start = time.perf_counter()
    results = cerebro.run()
    seconds = time.perf_counter() - start
    trades, values = [], {}
    for (strat,) in results:
        key = (strat.params.fast, strat.params.slow)
        if stops is not None:
            key += (strat.params.stop,)
        if takes is not None:
            key += (strat.params.take,)
        log = strat.analyzers.log.get_analysis()
        values[key] = log["value"]
        for baropen, barclose, price, pnl in log["trades"]:
            # backtrader's bar numbers count from 1 at the first bar
            trades.append((*key, baropen - 1, barclose - 1, price, pnl))
    return trades, values, seconds


def main():
    op, hi, lo, close = bars()
    trades, values, seconds = run_backtrader(op, hi, lo, close)
    np.savetxt(os.path.join(DATA, "backtrader_sma_cross_bars.csv"),
               np.column_stack([op, hi, lo, close]), fmt="%.4f", delimiter=",",
               header="open,high,low,close", comments="")
    np.savetxt(os.path.join(DATA, "backtrader_sma_cross_trades.csv"), np.array(trades),
               fmt=["%d", "%d", "%d", "%d", "%.17g", "%.17g"], delimiter=",",
               header="fast,slow,entry_idx,exit_idx,entry_price,pnl", comments="")
    np.savetxt(os.path.join(DATA, "backtrader_sma_cross_values.csv"),
               np.array([(*k, v) for k, v in sorted(values.items())]),
               fmt=["%d", "%d", "%.17g"], delimiter=",", header="fast,slow,final_value",
               comments="")
    print(f"backtrader optstrategy: {len(values)} combinations in {seconds:.2f} s, "
          f"{len(trades)} trades; wrote tests/data/backtrader_sma_cross_*.csv")
    save_stops(op, hi, lo, close)


def save_stops(op, hi, lo, close):
    """The stop-loss optstrategy (backtrader_sma_cross_stop_{trades,values}.csv) and
    the bracket one (backtrader_sma_cross_bracket_*.csv, a ``take`` column too)."""
    for name, keys, takes in (("stop", ["stop"], None),
                              ("bracket", ["stop", "take"], TAKES)):
        stops = STOPS if takes is None else BRACKET_STOPS
        trades, values, seconds = run_backtrader(op, hi, lo, close, stops=stops, takes=takes)
        k = len(keys)
        np.savetxt(os.path.join(DATA, f"backtrader_sma_cross_{name}_trades.csv"),
                   np.array(trades), fmt=["%d", "%d"] + ["%.17g"] * k + ["%d", "%d", "%.17g",
                                                                      "%.17g"],
                   delimiter=",", comments="",
                   header=",".join(["fast", "slow", *keys, "entry_idx", "exit_idx",
                                    "entry_price", "pnl"]))
        np.savetxt(os.path.join(DATA, f"backtrader_sma_cross_{name}_values.csv"),
                   np.array([(*key, v) for key, v in sorted(values.items())]),
                   fmt=["%d", "%d"] + ["%.17g"] * (k + 1), delimiter=",", comments="",
                   header=",".join(["fast", "slow", *keys, "final_value"]))
        print(f"{name}: {len(values)} combinations in {seconds:.2f} s, {len(trades)} "
              f"trades; wrote tests/data/backtrader_sma_cross_{name}_*.csv")


if __name__ == "__main__":
    if "--only-stops" in sys.argv:
        save_stops(*bars())
    else:
        main()
