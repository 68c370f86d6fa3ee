"""Moving-average crossover sweep over OHLCV bars: best pairs, and float32 vs float64.

    python examples/backtest_sweep.py [bars.csv] [--backend threads] [--top 10]

Reads a CSV of daily bars (a ``close`` column is needed; default: the generated
sample shipped in ``flowsim/data/sample_ohlcv.csv``), backtests every (fast, slow)
pair of the grid fast 5..50, slow 20..200 step 5 (fast < slow) at once -- long
only, all in, no fees, vectorbt's ``from_signals`` semantics -- prints the best
pairs by Sharpe ratio, then reruns the grid in float32 and prints the largest
difference of each metric.  Same as ``flowsim run backtest``.
"""
import argparse
import sys

from flowsim.finance.bars import load_bars
from flowsim.finance.jobs import backtest_report


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("csv", nargs="?", default=None, help="OHLCV CSV (default: bundled sample)")
    p.add_argument("--backend", default=None, help="threads, mpi or spark (default one device)")
    p.add_argument("--top", type=int, default=10)
    args = p.parse_args(argv)
    backtest_report(load_bars(args.csv), top=args.top, backend=args.backend)
    return 0


if __name__ == "__main__":
    sys.exit(main())
