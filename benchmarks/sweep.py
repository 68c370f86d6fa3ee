"""Strategy sweep: flowsim.finance.ma_crossover_sweep vs vectorbt (and backtrader for scale).

The 1,590 moving-average pairs (fast 5..50, slow 20..200 step 5, fast < slow) over
the 2,520-bar GBM path of ``make_vectorbt_reference.py``, each contender in a Python
process of its own (no library's thread pool or settings reach another's timing):

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

Then (or alone with ``--only-rsi``) the signal sweep: RSI thresholds x
stop-loss, >= 10**4 combinations over the same 2,520 bars with fees 0.1 %:

- flowsim: ``signal_sweep(strategies.rsi_thresholds, ...)`` (all 22 stats metrics
  per combination), float64, warm (the first call, timed apart, compiles), with
  the default ``jit_compile=False`` (the loop XLA-compiled, the rest in graph
  mode) and with the whole kernel XLA-compiled;
- vectorbt: ``RSI.run`` over the windows, the threshold signals broadcast to every
  combination with its numba ``crossed_above_nb``, one ``Portfolio.from_signals``
  with a per-column ``sl_stop``, then total return, Sharpe, max drawdown and the
  trade count (its documented broadcast-parameters way, numba), warm;
- backtrader: ``optstrategy`` over a few RSI x stop combinations (``maxcpus=2``),
  market orders on the next open, stop orders for the stop-loss, 0.1 % commission.

Rounds alternate the processes (flowsim, vectorbt, flowsim with XLA, ...) and the
medians are compared.

Then (or alone with ``--only-groups``) the shared-cash sweep: the same 10**4 RSI x
stop rows over 5 assets (five GBM paths, ``--group-bars`` bars), each row one group
of 5 columns sharing its cash, ``call_seq="auto"``, fees 0.1 %:

- flowsim: ``signal_sweep(..., cash_sharing=True, call_seq="auto")`` (its default
  call), warm;
- vectorbt: ``RSI.run`` on the 5 assets, the signals broadcast to rows x assets
  columns, one ``Portfolio.from_signals`` with ``group_by`` (one group per row),
  ``cash_sharing=True``, ``call_seq="auto"`` and a per-column ``sl_stop``, then
  total return, Sharpe and max drawdown; warm, on the first ``--group-vbt-rows``
  rows (its [bars, rows x 5] inputs for all 10**4 rows do not fit here), its time
  scaled to 10**4 rows -- the printed row says so.

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

from _common import Timed, isolated  # noqa: E402
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


def rsi_grid(n_windows=25):
    """window 5.., lower 20..35 step 5, upper 65..80 step 5, sl_stop 0.02..0.2: 25 x 400."""
    import itertools

    import pandas as pd
    rows = itertools.product(range(5, 5 + n_windows), (20.0, 25.0, 30.0, 35.0),
                             (65.0, 70.0, 75.0, 80.0), np.linspace(0.02, 0.2, 25))
    return pd.DataFrame(list(rows), columns=["window", "lower", "upper", "sl_stop"])


def vectorbt_rsi(close, grid):
    """vectorbt: RSI over the windows, broadcast thresholds, one from_signals, 4 metrics."""
    import pandas as pd
    import vectorbt as vbt
    from vectorbt.generic.nb import crossed_above_nb
    idx = pd.date_range("2000-01-03", periods=len(close), freq="D")
    c = pd.Series(close, index=idx)
    windows = np.unique(grid["window"].to_numpy())
    rsi = vbt.RSI.run(c, window=list(windows)).rsi.to_numpy().reshape(len(close), -1)
    r = rsi[:, np.searchsorted(windows, grid["window"].to_numpy())]
    lower = np.broadcast_to(grid["lower"].to_numpy()[None, :], r.shape).copy()
    upper = np.broadcast_to(grid["upper"].to_numpy()[None, :], r.shape).copy()
    entries = pd.DataFrame(crossed_above_nb(lower, r), index=idx)
    exits = pd.DataFrame(crossed_above_nb(r, upper), index=idx)
    pf = vbt.Portfolio.from_signals(c, entries, exits, sl_stop=grid["sl_stop"].to_numpy(),
                                    fees=0.001, freq="1D")
    return {"total_return": pf.total_return().to_numpy(),
            "sharpe_ratio": pf.sharpe_ratio().to_numpy(),
            "max_drawdown": pf.max_drawdown().to_numpy(),
            "total_trades": pf.trades.count().to_numpy()}


try:
    import backtrader as bt
except ImportError:            # the bench extra
    bt = None

if bt is not None:
    class RsiStop(bt.Strategy):
        """RSI thresholds with a stop-loss order after each entry (module level: pickles)."""

        params = (("rows", None), ("i", 0))

        def __init__(self):
            w, self.lower, self.upper, self.stop_frac = self.p.rows[self.p.i]
            self.rsi = bt.ind.RSI_SMA(period=int(w), safediv=True)

        def next(self):
            if not self.position and self.rsi[0] < self.lower <= self.rsi[-1]:
                self.buy(size=int(self.broker.getcash() * 0.99 / self.data.close[0]))
            elif self.position and self.rsi[0] > self.upper >= self.rsi[-1]:
                self.close()

        def notify_order(self, order):
            if order.status == order.Completed and order.isbuy():
                level = order.executed.price * (1 - self.stop_frac)
                self.sell(exectype=bt.Order.Stop, price=level, size=order.executed.size)


def backtrader_rsi_rate(close, grid):
    """Combinations per second of backtrader's optstrategy (maxcpus=2) over ``grid`` rows."""
    import pandas as pd
    idx = pd.date_range("2000-01-03", periods=len(close), freq="D")
    frame = pd.DataFrame({"open": close, "high": close, "low": close, "close": close,
                          "volume": 1.0}, index=idx)
    cerebro = bt.Cerebro(optreturn=True, maxcpus=2, stdstats=False)
    cerebro.adddata(bt.feeds.PandasData(dataname=frame))
    cerebro.broker.setcommission(commission=0.001)
    rows = [tuple(r) for r in grid.to_numpy()]
    cerebro.optstrategy(RsiStop, rows=[rows], i=range(len(rows)))
    start = time.perf_counter()
    cerebro.run()
    return len(rows) / (time.perf_counter() - start)


RSI_METRICS = ("total_return", "sharpe_ratio", "max_drawdown", "total_trades")


def _lists(columns):
    return {k: np.asarray(v, np.float64).tolist() for k, v in columns.items()}


def rsi_flowsim(jit):
    """(first call's seconds, a warm call's seconds, vectorbt's metrics) of flowsim's RSI
    sweep in this process."""
    from flowsim.finance import signal_sweep, strategies
    close, grid = gbm_close(), rsi_grid()

    def run():
        return signal_sweep(strategies.rsi_thresholds, close, grid, fees=0.001, freq="1D",
                            flow_kwargs={"jit_compile": jit})

    seconds = []
    for _ in range(2):
        start = time.perf_counter()
        table = run()
        seconds.append(time.perf_counter() - start)
    return seconds[0], seconds[1], _lists({k: table[k] for k in RSI_METRICS})


def rsi_vectorbt():
    """(first run's seconds on 64 rows, a warm run's seconds, its metrics) in this process."""
    close, grid = gbm_close(), rsi_grid()
    start = time.perf_counter()
    vectorbt_rsi(close, grid.iloc[:64])
    first = time.perf_counter() - start
    start = time.perf_counter()
    ref = vectorbt_rsi(close, grid)
    return first, time.perf_counter() - start, _lists(ref)


def backtrader_rsi_rows(bt_rows):
    """backtrader's combinations per second over ``bt_rows`` rows spread over the grid."""
    grid = rsi_grid()
    return backtrader_rsi_rate(gbm_close(),
                               grid.iloc[np.linspace(0, len(grid) - 1, bt_rows).astype(int)])


def rsi_benchmark(rounds, bt_rows):
    """Alternated rounds of flowsim and vectorbt on the RSI x stop grid, one process each
    a round; medians."""
    n = len(rsi_grid())
    contenders = (("flowsim", "rsi_flowsim", (False,)), ("vectorbt", "rsi_vectorbt", ()),
                  ("flowsim_xla", "rsi_flowsim", (True,)))
    runs = {name: [] for name, _, _ in contenders}
    for _ in range(rounds):
        for name, function, args in contenders:
            runs[name].append(isolated("sweep", function, *args))
    first = {name: r[0][0] for name, r in runs.items()}
    med = {name: float(np.median([x[1] for x in r])) for name, r in runs.items()}
    table, ref = runs["flowsim"][-1][2], runs["vectorbt"][-1][2]
    print(f"RSI thresholds x stop-loss sweep: {n:,} combinations x {len(gbm_close()):,} bars, "
          f"fees 0.1 % (median of {rounds} alternated rounds, one process per contender, "
          f"warm)")
    print(f"  flowsim float64     {med['flowsim']:8.2f} s  {n / med['flowsim']:10,.0f} combos/s"
          f"  (first call {first['flowsim']:.1f} s; all 22 stats metrics)")
    print(f"  flowsim, whole XLA  {med['flowsim_xla']:8.2f} s  {n / med['flowsim_xla']:10,.0f}"
          f" combos/s  (first call {first['flowsim_xla']:.1f} s)")
    print(f"  vectorbt            {med['vectorbt']:8.2f} s  {n / med['vectorbt']:10,.0f} combos/s"
          f"  (first run {first['vectorbt']:.1f} s on 64 rows; 4 metrics)")
    print(f"  ratio flowsim/vectorbt: {med['vectorbt'] / med['flowsim']:.1f}x, whole XLA "
          f"{med['vectorbt'] / med['flowsim_xla']:.1f}x (target >= 10x)", flush=True)
    for k, v in ref.items():
        v, ours_v = np.asarray(v), np.asarray(table[k])
        with np.errstate(invalid="ignore"):
            d = np.nanmax(np.abs(ours_v - v) / np.maximum(np.abs(v), 1e-12))
        print(f"  max relative |flowsim - vectorbt| {k:<13} {d:.2e}", flush=True)
    if not bt_rows:                     # --backtrader-rows 0: no backtrader row
        return
    bt_rate = isolated("sweep", "backtrader_rsi_rows", bt_rows)
    print(f"  backtrader          {bt_rows / bt_rate:8.2f} s  {bt_rate:10,.1f} combos/s  "
          f"({bt_rows} combinations, optstrategy maxcpus=2); flowsim/backtrader "
          f"{n / med['flowsim'] / bt_rate:,.0f}x")


def five_assets(n_bars):
    """Five GBM paths ``[n_bars, 5]`` (the seeds of :func:`gbm_close` + 0..4)."""
    return np.stack([gbm_close(n_bars, seed=20261130 + j) for j in range(5)], axis=1)


GROUP_METRICS = ("total_return", "sharpe_ratio", "max_drawdown")


def group_flowsim(n_bars):
    """(first call's seconds, a warm call's seconds, metrics) of the shared-cash sweep."""
    from flowsim.finance import signal_sweep, strategies
    close, grid = five_assets(n_bars), rsi_grid()
    seconds = []
    for _ in range(2):
        start = time.perf_counter()
        table = signal_sweep(strategies.rsi_thresholds, close, grid, fees=0.001, freq="1D",
                             cash_sharing=True, call_seq="auto")
        seconds.append(time.perf_counter() - start)
    return seconds[0], seconds[1], _lists({k: table[k] for k in GROUP_METRICS})


def vectorbt_groups(close, grid):
    """vectorbt: RSI on the assets, signals per (row, asset), one grouped from_signals."""
    import pandas as pd
    import vectorbt as vbt
    from vectorbt.generic.nb import crossed_above_nb
    n, a = close.shape
    idx = pd.date_range("2000-01-03", periods=n, freq="D")
    windows = np.unique(grid["window"].to_numpy())
    rsi = vbt.RSI.run(pd.DataFrame(close, index=idx), window=list(windows)).rsi.to_numpy()
    rsi = rsi.reshape(n, len(windows), a)
    r = rsi[:, np.searchsorted(windows, grid["window"].to_numpy()), :].reshape(n, -1)
    lower = np.broadcast_to(np.repeat(grid["lower"].to_numpy(), a)[None, :], r.shape).copy()
    upper = np.broadcast_to(np.repeat(grid["upper"].to_numpy(), a)[None, :], r.shape).copy()
    rows = len(grid)
    pf = vbt.Portfolio.from_signals(
        pd.DataFrame(np.tile(close, rows), index=idx), crossed_above_nb(lower, r),
        crossed_above_nb(r, upper), sl_stop=np.repeat(grid["sl_stop"].to_numpy(), a),
        fees=0.001, freq="1D", group_by=np.repeat(np.arange(rows), a), cash_sharing=True,
        call_seq="auto")
    return {"total_return": pf.total_return().to_numpy(),
            "sharpe_ratio": pf.sharpe_ratio().to_numpy(),
            "max_drawdown": pf.max_drawdown().to_numpy()}


def group_vectorbt(n_bars, rows):
    """(first run's seconds on 16 rows, a warm run's seconds on ``rows`` rows, metrics)."""
    close, grid = five_assets(n_bars), rsi_grid().iloc[:rows]
    start = time.perf_counter()
    vectorbt_groups(close, grid.iloc[:16])
    first = time.perf_counter() - start
    start = time.perf_counter()
    ref = vectorbt_groups(close, grid)
    return first, time.perf_counter() - start, _lists(ref)


def group_benchmark(rounds, n_bars, vbt_rows):
    """Alternated rounds of flowsim and vectorbt on the shared-cash RSI x stop grid."""
    n = len(rsi_grid())
    runs = {"flowsim": [], "vectorbt": []}
    for _ in range(rounds):
        runs["flowsim"].append(isolated("sweep", "group_flowsim", n_bars))
        runs["vectorbt"].append(isolated("sweep", "group_vectorbt", n_bars, vbt_rows))
    med = {name: float(np.median([x[1] for x in r])) for name, r in runs.items()}
    scaled = med["vectorbt"] * n / vbt_rows
    print(f"Shared-cash RSI x stop sweep: {n:,} combinations x 5 assets x {n_bars:,} bars, "
          f"one group of 5 per combination, call_seq='auto', fees 0.1 % (median of {rounds} "
          f"alternated rounds, one process per contender, warm)")
    print(f"  flowsim float64     {med['flowsim']:8.2f} s  {n / med['flowsim']:10,.0f} combos/s"
          f"  (first call {runs['flowsim'][0][0]:.1f} s)")
    print(f"  vectorbt            {scaled:8.2f} s  {n / scaled:10,.0f} combos/s  (timed on "
          f"{vbt_rows:,} rows: {med['vectorbt']:.2f} s, scaled x {n / vbt_rows:g})")
    print(f"  ratio flowsim/vectorbt: {scaled / med['flowsim']:.1f}x (target >= 10x)",
          flush=True)
    table, ref = runs["flowsim"][-1][2], runs["vectorbt"][-1][2]
    for k, v in ref.items():
        v, ours_v = np.asarray(v), np.asarray(table[k])[:vbt_rows]
        d = np.nanmax(np.abs(ours_v - v) / np.maximum(np.abs(v), 1e-12))
        print(f"  max relative |flowsim - vectorbt| {k:<13} {d:.2e} (first {vbt_rows} rows)",
              flush=True)


def ma_flowsim(repeat):
    """flowsim's MA crossover sweep in this process: first call's seconds, then (wall, CPU)
    best of ``repeat`` for float64, float64 under XLA and float32, and the float64 and
    float32 metrics."""
    from flowsim.finance import ma_crossover_sweep
    close, pairs = gbm_close(), grid()
    start = time.perf_counter()
    ma_crossover_sweep(close, pairs)
    first = time.perf_counter() - start
    t64, c64, ours = best_time(lambda: ma_crossover_sweep(close, pairs), repeat)
    ma_crossover_sweep(close, pairs, jit_compile=True)
    tj, cj, oursj = best_time(lambda: ma_crossover_sweep(close, pairs, jit_compile=True),
                              repeat)
    assert all(np.max(np.abs(oursj[c] - ours[c])) <= 1e-12 for c in COLUMNS)
    ma_crossover_sweep(close, pairs, dtype="float32")
    t32, c32, ours32 = best_time(lambda: ma_crossover_sweep(close, pairs, dtype="float32"),
                                 repeat)
    return (first, [t64, c64], [tj, cj], [t32, c32], _lists({c: ours[c] for c in COLUMNS}),
            _lists({c: ours32[c] for c in COLUMNS}))


def ma_vectorbt(repeat):
    """vectorbt's MA crossover metrics in this process: first run's seconds, (wall, CPU)
    best of ``repeat``, the metrics."""
    close, pairs = gbm_close(), grid()
    start = time.perf_counter()
    vectorbt_metrics(close, pairs)
    first = time.perf_counter() - start
    tv, cv, ref = best_time(lambda: vectorbt_metrics(close, pairs), repeat)
    return first, tv, cv, _lists(ref)


def ma_backtrader(n_pairs):
    pairs = grid()
    return backtrader_rate(gbm_close(), pairs[np.linspace(0, len(pairs) - 1, n_pairs)
                                               .astype(int)])


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--backtrader-pairs", type=int, default=20)
    p.add_argument("--only-rsi", action="store_true", help="only the RSI x stop sweep")
    p.add_argument("--rounds", type=int, default=3, help="alternated rounds (RSI sweep)")
    p.add_argument("--backtrader-rows", type=int, default=8)
    p.add_argument("--only-groups", action="store_true", help="only the shared-cash sweep")
    p.add_argument("--group-bars", type=int, default=2520, help="bars of the shared-cash sweep")
    p.add_argument("--group-vbt-rows", type=int, default=1000,
                   help="rows vectorbt runs in the shared-cash sweep (time scaled to all)")
    args = p.parse_args(argv)
    if args.only_groups:
        group_benchmark(args.rounds, args.group_bars, args.group_vbt_rows)
        return 0
    if args.only_rsi:
        rsi_benchmark(args.rounds, args.backtrader_rows)
        return 0
    n, n_bars = len(grid()), len(gbm_close())
    first, (t64, c64), (tj, cj), (t32, c32), ours, ours32 = isolated("sweep", "ma_flowsim",
                                                                     args.repeat)
    vbt_first, tv, cv, ref = isolated("sweep", "ma_vectorbt", args.repeat)
    bt_rate = isolated("sweep", "ma_backtrader", args.backtrader_pairs)

    print(f"MA crossover sweep: {n:,} pairs x {n_bars:,} bars (best of {args.repeat}, warm, "
          f"one process per contender)")
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
        d64 = np.max(np.abs(np.asarray(ours[col]) - np.asarray(ref[col])))
        d32 = np.max(np.abs(np.asarray(ours32[col]) - np.asarray(ref[col])))
        print(f"  max |flowsim - vectorbt| {col:<13} float64 {d64:.2e}   float32 {d32:.2e}")
    rsi_benchmark(args.rounds, args.backtrader_rows)
    group_benchmark(args.rounds, args.group_bars, args.group_vbt_rows)
    return 0


if __name__ == "__main__":
    sys.exit(main())
