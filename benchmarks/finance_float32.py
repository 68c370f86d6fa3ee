"""float32 vs float64 per metric for flowsim.finance.signal_sweep.

The RSI thresholds x stop-loss grid of ``benchmarks/sweep.py`` (default 1,600 of its
combinations; ``--windows 25`` for all 10,000) over the 2,520-bar GBM path, fees
0.1 %, run in float64 and float32.  Prints, per metric, the median and maximum
|float32 - float64| and the share of combinations whose value differs by more than
1e-4 relative, plus the share whose trade list changed (a different trade count).

    .venv/bin/python benchmarks/finance_float32.py [--windows 4]
"""
import argparse
import os
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))
sys.path.insert(0, HERE)

from make_vectorbt_reference import gbm_close  # noqa: E402
from sweep import rsi_grid  # noqa: E402


def compare(t64, t32):
    """``[(metric, median |d|, max |d|, share > 1e-4 relative)]`` over finite pairs."""
    from flowsim.finance import STATS
    rows = []
    for k in STATS:
        a, b = t64[k].to_numpy(np.float64), t32[k].to_numpy(np.float64)
        both = np.isfinite(a) & np.isfinite(b)
        d = np.abs(a[both] - b[both])
        rel = d / np.maximum(np.abs(a[both]), 1e-12)
        mismatch = np.sum(np.isfinite(a) != np.isfinite(b))
        rows.append((k, float(np.median(d)) if d.size else 0.0, float(d.max()) if d.size else 0.0,
                     float((np.sum(rel > 1e-4) + mismatch) / len(a))))
    return rows


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--windows", type=int, default=4)
    args = p.parse_args(argv)
    from flowsim.finance import signal_sweep, strategies
    close, grid = gbm_close(), rsi_grid(args.windows)
    kw = dict(fees=0.001, freq="1D")
    t64 = signal_sweep(strategies.rsi_thresholds, close, grid, **kw)
    t32 = signal_sweep(strategies.rsi_thresholds, close, grid, dtype="float32", **kw)
    changed = np.mean(t64["total_trades"].to_numpy() != t32["total_trades"].to_numpy())
    print(f"float32 vs float64: {len(grid):,} RSI x stop combinations x {len(close):,} bars")
    print(f"{'metric':<24}{'median |d|':>12}{'max |d|':>12}{'> 1e-4 rel':>12}")
    for k, med, mx, share in compare(t64, t32):
        print(f"{k:<24}{med:12.2e}{mx:12.2e}{share:12.1%}")
    print(f"combinations with another trade count: {changed:.1%}")


if __name__ == "__main__":
    main()
