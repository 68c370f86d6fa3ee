"""Make the vectorbt reference values for the moving-average crossover sweep test.

Generates a 2,520-bar GBM close path (numpy, fixed seed), runs the 1,590-pair grid
(fast 5..50 step 1, slow 20..200 step 5, fast < slow) through vectorbt's
``Portfolio.from_signals`` with ``fees=0`` (long-only, all-in, fractional shares,
fill at the close, Sharpe annualized with 252 periods a year), and stores the
close path in ``tests/data/vectorbt_ma_close.csv`` and every metric in
``tests/data/vectorbt_ma_sweep.csv`` (17 significant digits: exact round trip).
Also a small case where the averages tie exactly (integer prices with flat
stretches, 16 pairs): ``tests/data/vectorbt_ties_{close,sweep}.csv``.

Needs the ``bench`` extra (vectorbt).  Run from the repository root::

    .venv/bin/python benchmarks/make_vectorbt_reference.py

It also prints how far flowsim.finance.ma_crossover_sweep is from the values.

Then the from_signals cases and the indicators of ``flowsim/testing/vectorbt_cases.py``:
``tests/data/vectorbt_portfolio_cases.npz`` (14 backtests: metrics, trade records,
value curves) and ``tests/data/vectorbt_indicators.npz``; ``--only-new`` skips the
crossover grid.
"""
import os
import sys
import time

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DATA = os.path.join(ROOT, "tests", "data")
sys.path.insert(0, ROOT)
from flowsim.testing.vectorbt_cases import COLUMNS  # noqa: E402


def gbm_close(n_bars=2520, s0=100.0, mu=0.08, sigma=0.2, seed=20261130):
    """Daily GBM closes: ``s0 * exp(cumsum((mu - sigma^2/2) dt + sigma sqrt(dt) z))``."""
    rng = np.random.default_rng(seed)
    dt = 1.0 / 252
    steps = (mu - 0.5 * sigma ** 2) * dt + sigma * np.sqrt(dt) * rng.standard_normal(n_bars - 1)
    return s0 * np.exp(np.concatenate([[0.0], np.cumsum(steps)]))


def grid():
    """The 1,590 (fast, slow) pairs: fast 5..50, slow 20..200 step 5, fast < slow."""
    return np.array([(f, s) for f in range(5, 51) for s in range(20, 201, 5) if f < s],
                    dtype=np.int64)


def ties_close():
    """400 integer-valued closes with flat stretches: moving averages tie exactly."""
    rng = np.random.default_rng(3)
    close = 50 + np.cumsum(rng.choice([-1.0, 0.0, 0.0, 1.0], size=400))
    close[100:140] = close[100]
    return close


def ties_grid():
    return np.array([(f, s) for f in (2, 3, 4, 5) for s in (6, 8, 10, 12)], dtype=np.int64)


def _save(name, close, pairs, ref, version):
    header = f"vectorbt {version} Portfolio.from_signals fees=0, year_freq 252 days\n"
    np.savetxt(os.path.join(DATA, f"{name}_close.csv"), close, fmt="%.17g",
               header=header + "close", comments="# ")
    table = np.column_stack([pairs, *(ref[c] for c in COLUMNS)])
    np.savetxt(os.path.join(DATA, f"{name}_sweep.csv"), table,
               fmt=["%d", "%d"] + ["%.17g"] * len(COLUMNS), delimiter=",",
               header=header + ",".join(("fast", "slow") + COLUMNS), comments="# ")
    print(f"wrote tests/data/{name}_sweep.csv and {name}_close.csv")


def vectorbt_metrics(close, pairs):
    """The four metrics per pair from vectorbt (a dict of numpy arrays)."""
    import pandas as pd
    import vectorbt as vbt
    vbt.settings.returns["year_freq"] = "252 days"
    c = pd.Series(close, index=pd.date_range("2000-01-03", periods=len(close), freq="D"))
    fast = vbt.MA.run(c, list(pairs[:, 0]), short_name="fast")
    slow = vbt.MA.run(c, list(pairs[:, 1]), short_name="slow")
    entries = fast.ma_crossed_above(slow)
    exits = fast.ma_crossed_below(slow)
    pf = vbt.Portfolio.from_signals(c, entries, exits, fees=0, freq="1D")
    return {"total_return": np.asarray(pf.total_return(), dtype=np.float64),
            "sharpe": np.asarray(pf.sharpe_ratio(), dtype=np.float64),
            "max_drawdown": np.asarray(pf.max_drawdown(), dtype=np.float64),
            "trades": np.asarray(pf.trades.count(), dtype=np.float64)}


def save_new():
    """The from_signals cases and the indicator outputs (:mod:`flowsim.testing.vectorbt_cases`)."""
    from flowsim.testing import vectorbt_cases as vc
    start = time.perf_counter()
    vc.save_cases(os.path.join(DATA, "vectorbt_portfolio_cases.npz"), vc.portfolio_cases())
    x = vc.indicator_inputs()
    np.savez_compressed(os.path.join(DATA, "vectorbt_indicators.npz"),
                        **{f"input/{k}": v for k, v in x.items()},
                        **{f"output/{k}": v for k, v in vc.run_indicators(x).items()})
    close = vc.sweep_close()
    sweeps = {"close": close}
    for name, strategy, grid, kw in vc.sweep_cases():
        for k, v in vc.run_vectorbt_sweep(strategy, close, grid, kw).items():
            sweeps[f"{name}/{k}"] = v
    np.savez_compressed(os.path.join(DATA, "vectorbt_sweeps.npz"), **sweeps)
    print(f"wrote tests/data/vectorbt_portfolio_cases.npz, vectorbt_sweeps.npz and "
          f"vectorbt_indicators.npz "
          f"({time.perf_counter() - start:.1f} s)")


def main():
    import vectorbt
    save_new()
    if "--only-new" in sys.argv:
        return
    close, pairs = gbm_close(), grid()
    start = time.perf_counter()
    ref = vectorbt_metrics(close, pairs)
    print(f"vectorbt {vectorbt.__version__}: {len(pairs)} pairs x {len(close)} bars "
          f"in {time.perf_counter() - start:.1f} s (cold)")
    _save("vectorbt_ma", close, pairs, ref, vectorbt.__version__)
    _save("vectorbt_ties", ties_close(), ties_grid(), vectorbt_metrics(ties_close(), ties_grid()),
          vectorbt.__version__)
    from flowsim.finance import ma_crossover_sweep
    ours = ma_crossover_sweep(close, pairs)
    for col in COLUMNS:
        print(f"  {col:<13} max |flowsim - vectorbt| = "
              f"{np.max(np.abs(ours[col].to_numpy() - ref[col])):.3e}")


if __name__ == "__main__":
    main()
