"""Finance jobs for ``flowsim run`` (``backtest``, ``heston-call``) and the examples.

A job is an object with ``run_cli(args)``: the CLI hands it the parsed ``flowsim
run`` options and the job prints its own table.  Its ``cli_options`` names the
options it uses (argparse names: ``events_limit`` for ``--events-limit``); the
CLI refuses any other option given on the command line.
"""
import json
import sys
import time

import numpy as np

from .backtest import METRICS


def _is_root():
    """False on MPI ranks other than 0 (only rank 0 prints)."""
    mpi = sys.modules.get("mpi4py.MPI")
    return mpi is None or mpi.COMM_WORLD.Get_rank() == 0


def default_grid(n_bars):
    """fast 5..50 step 1, slow 20..200 step 5, fast < slow, slow <= n_bars."""
    return np.array([(f, s) for f in range(5, 51) for s in range(20, 201, 5)
                     if f < s <= n_bars], dtype=np.int64)


def _max_diffs(a, b):
    """``{metric: max |a - b|}`` of two sweep tables over the same grid."""
    return {m: float(np.max(np.abs(a[m].to_numpy(np.float64) - b[m].to_numpy(np.float64))))
            for m in METRICS}


def precision_check(close, pairs, table64=None, **kwargs):
    """``(table64, table32, {metric: max |float32 - float64|})`` over the grid."""
    from .backtest import ma_crossover_sweep
    if table64 is None:
        table64 = ma_crossover_sweep(close, pairs, **kwargs)
    table32 = ma_crossover_sweep(close, pairs, dtype="float32", **kwargs)
    return table64, table32, _max_diffs(table32, table64)


def backtest_report(bars, top=10, backend=None, dtype="float64", out=print, as_json=False,
                    **flow_kwargs):
    """Sweep the default grid over ``bars``; print the best pairs and the float32 check."""
    from .backtest import ma_crossover_sweep
    close = bars["close"].to_numpy(np.float64)
    pairs = default_grid(len(close))
    start = time.perf_counter()
    table = ma_crossover_sweep(close, pairs, dtype=dtype, backend=backend, **flow_kwargs)
    seconds = time.perf_counter() - start
    other = "float32" if dtype == "float64" else "float64"
    compare = ma_crossover_sweep(close, pairs, dtype=other, backend=backend, **flow_kwargs)
    diffs = _max_diffs(table, compare)
    best = table.sort_values("sharpe", ascending=False).head(top)
    if as_json:
        out(json.dumps({"pairs": len(pairs), "bars": len(close), "seconds": seconds,
                        "best": best.to_dict(orient="records"),
                        "float32_vs_float64_max_abs_diff": diffs}, indent=2))
        return table
    out(f"moving-average crossover: {len(pairs):,} (fast, slow) pairs x {len(close):,} bars, "
        f"{dtype}, {seconds:.2f} s ({len(pairs) / seconds:,.0f} pairs/s, first call "
        f"includes tracing)")
    out(f"best {top} by Sharpe (annualized, 252 bars a year):")
    out(best.to_string(index=False, float_format=lambda v: f"{v:.4f}"))
    out("float32 vs float64, max |difference| over the grid:")
    for m, d in diffs.items():
        out(f"  {m:<13} {d:.3e}")
    return table


class BacktestJob:
    """``flowsim run backtest``: the MA-crossover sweep over the bundled bars."""

    cli_options = ("backend", "dtype", "events_limit", "json", "quiet")

    def __init__(self, path=None, top=10):
        self.path, self.top = path, top

    def run_cli(self, args):
        from .bars import load_bars
        kwargs = {}
        if getattr(args, "events_limit", None):
            kwargs["events_limit"] = args.events_limit
        out = print if _is_root() else (lambda *a, **k: None)
        backtest_report(load_bars(self.path), top=self.top, backend=args.backend,
                        dtype=args.dtype, as_json=args.json, out=out, **kwargs)
        return 0


class HestonCallJob:
    """``flowsim run heston-call``: a Heston European call by path simulation.

    ``--events`` is the number of paths (antithetic pairs, so even), 252 steps
    over one year; prints the Result and the semi-analytic price (needs scipy).
    """

    cli_options = ("events", "seed", "backend", "dtype", "events_limit", "json", "quiet")
    params = dict(s0=100.0, v0=0.04, kappa=1.5, theta=0.04, xi=0.5, rho=-0.7, r=0.03)

    def __init__(self, K=100.0, T=1.0, n_steps=252):
        self.K, self.T, self.n_steps = K, T, n_steps

    def run_cli(self, args):
        from .models import Heston
        from .payoffs import EuropeanCall
        from .pricing import price
        model = Heston(**self.params)
        kwargs = {"dtype": args.dtype}
        if getattr(args, "events_limit", None):
            kwargs["events_limit"] = args.events_limit
        n_paths = args.events + args.events % 2
        result = price(model, EuropeanCall(self.K, self.T), n_paths, self.n_steps,
                       seed=args.seed, backend=args.backend, **kwargs)
        if not _is_root():
            return 0
        try:
            exact = model.european(self.K, self.T)
        except ImportError:
            exact = None
        if args.json:
            d = result.to_dict()
            d["semi_analytic"] = exact
            print(json.dumps(d, indent=2))
            return 0
        print(f"Heston {self.params}, European call K={self.K:g} T={self.T:g}, "
              f"{self.n_steps} QE-M steps, {n_paths:,} paths (antithetic pairs)")
        print(result)
        if exact is not None:
            print(f"semi-analytic {exact:.6f}: pull {(result.value - exact) / result.error:+.2f} "
                  f"sigma; {n_paths * self.n_steps / result.wall_time / 1e6:.1f} M path-steps/s "
                  f"(this run, XLA compile included)")
        return 0


def backtest():
    """Target of ``flowsim run backtest``."""
    return BacktestJob()


def heston_call():
    """Target of ``flowsim run heston-call``."""
    return HestonCallJob()
