"""Strategy sweep: flowsim.finance.ma_crossover_sweep vs vectorbt (and backtrader for scale).

The 1,590 moving-average pairs (fast 5..50, slow 20..200 step 5, fast < slow) over
the 2,520-bar GBM path of ``make_vectorbt_reference.py``, all in this process:

- flowsim: ``ma_crossover_sweep`` float64 (and float32), warm (the first call
  traces the kernel; later calls of the same shapes reuse it), best of --repeat;
- vectorbt: ``MA.run`` + ``ma_crossed_above/below`` + ``Portfolio.from_signals``
  (fees=0) + total return, Sharpe, max drawdown, trade count; warm (the first run
  compiles numba), best of --repeat;
- backtrader: ``Cerebro.optstrategy`` over 20 of the pairs (single process,
  all-in market orders on the close) -- only to show the scale.

Prints combinations per second and the ratios (target: flowsim >= 5x vectorbt),
and checks flowsim against vectorbt on the whole grid (max |difference| per metric).

    .venv/bin/python benchmarks/sweep.py [--repeat 3] [--backtrader-pairs 20]

Needs the ``bench`` extra (vectorbt, backtrader), installed in the same venv
(they leave numpy/TensorFlow unchanged).
"""
import argparse
import os
import sys
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))
sys.path.insert(0, HERE)

from _common import Timed  # noqa: E402
from make_vectorbt_reference import COLUMNS, gbm_close, grid, vectorbt_metrics  # noqa: E402


def best_time(fn, repeat):
    """(best wall seconds, CPU seconds of that run, output) over ``repeat`` runs."""
    runs, out = [], None
    for _ in range(repeat):
        with Timed() as tm:
            out = fn()
        runs.append((tm.wall, tm.cpu))
    wall, cpu = min(runs)
    return wall, cpu, out


def backtrader_rate(close, pairs):
    """Combinations per second of backtrader's optstrategy over ``pairs``."""
    import backtrader as bt
    import pandas as pd

    class Cross(bt.Strategy):
        params = (("pairs", None), ("i", 0))

        def __init__(self):
            fast, slow = self.p.pairs[self.p.i]
            self.cross = bt.ind.CrossOver(bt.ind.SMA(period=int(fast)),
                                          bt.ind.SMA(period=int(slow)))

        def next(self):
            if not self.position and self.cross > 0:
                self.order_target_percent(target=0.99)
            elif self.position and self.cross < 0:
                self.close()

    idx = pd.date_range("2000-01-03", periods=len(close), freq="D")
    frame = pd.DataFrame({"open": close, "high": close, "low": close, "close": close,
                          "volume": 1.0}, index=idx)
    cerebro = bt.Cerebro(optreturn=True, maxcpus=1, stdstats=False)
    cerebro.adddata(bt.feeds.PandasData(dataname=frame))
    cerebro.broker.set_coc(True)            # fill at this bar's close, as the others
    cerebro.addanalyzer(bt.analyzers.SharpeRatio, _name="sharpe")
    cerebro.addanalyzer(bt.analyzers.DrawDown, _name="dd")
    cerebro.optstrategy(Cross, pairs=[pairs], i=range(len(pairs)))
    start = time.perf_counter()
    cerebro.run()
    return len(pairs) / (time.perf_counter() - start)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--backtrader-pairs", type=int, default=20)
    args = p.parse_args(argv)
    from flowsim.finance import ma_crossover_sweep

    close, pairs = gbm_close(), grid()
    n = len(pairs)
    start = time.perf_counter()
    ours = ma_crossover_sweep(close, pairs)
    first = time.perf_counter() - start
    t64, c64, ours = best_time(lambda: ma_crossover_sweep(close, pairs), args.repeat)
    ma_crossover_sweep(close, pairs, jit_compile=True)
    tj, cj, oursj = best_time(lambda: ma_crossover_sweep(close, pairs, jit_compile=True),
                              args.repeat)
    assert all(np.max(np.abs(oursj[c] - ours[c])) <= 1e-12 for c in COLUMNS)
    ma_crossover_sweep(close, pairs, dtype="float32")
    t32, c32, ours32 = best_time(lambda: ma_crossover_sweep(close, pairs, dtype="float32"),
                            args.repeat)

    start = time.perf_counter()
    vectorbt_metrics(close, pairs)
    vbt_first = time.perf_counter() - start
    tv, cv, ref = best_time(lambda: vectorbt_metrics(close, pairs), args.repeat)

    bt_pairs = pairs[np.linspace(0, n - 1, args.backtrader_pairs).astype(int)]
    bt_rate = backtrader_rate(close, bt_pairs)

    print(f"MA crossover sweep: {n:,} pairs x {len(close):,} bars (best of {args.repeat}, warm)")
    print(f"  flowsim float64 {t64:8.3f} s  {n / t64:10,.0f} combos/s   (first call {first:.1f} s, "
          f"with tracing)")
    print(f"  flowsim float64 {tj:8.3f} s  {n / tj:10,.0f} combos/s   (jit_compile=True: "
          f"whole kernel through XLA)")
    print(f"  flowsim float32 {t32:8.3f} s  {n / t32:10,.0f} combos/s")
    print(f"  vectorbt        {tv:8.3f} s  {n / tv:10,.0f} combos/s   "
          f"(first run {vbt_first:.1f} s, "
          f"with numba compile)")
    print(f"  backtrader      {args.backtrader_pairs / bt_rate:8.3f} s  "
          f"{bt_rate:10,.1f} combos/s   "
          f"({args.backtrader_pairs} pairs, optstrategy, one process)")
    print(f"  ratio flowsim/vectorbt: {tv / t64:.1f}x float64, {tv / t32:.1f}x float32 "
          f"(target >= 5x); flowsim/backtrader: {n / t64 / bt_rate:,.0f}x")
    print(f"  ratio with jit_compile=True: {tv / tj:.1f}x")
    print(f"  per CPU second (robust to other load): flowsim float64 {c64:.3f} s "
          f"({cj:.3f} s with XLA), vectorbt {cv:.3f} s of CPU -> {cv / c64:.1f}x "
          f"({cv / cj:.1f}x)")
    for col in COLUMNS:
        d64 = np.max(np.abs(ours[col].to_numpy(np.float64) - ref[col]))
        d32 = np.max(np.abs(ours32[col].to_numpy(np.float64) - ref[col]))
        print(f"  max |flowsim - vectorbt| {col:<13} float64 {d64:.2e}   float32 {d32:.2e}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
