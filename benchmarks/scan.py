"""A 1,000-row flowsim.scan against 1,000 separate flowsim.integrate calls.

Usage: python benchmarks/scan.py [--rows 1000] [--calls 20] [--rounds 3]

Both integrate the same Gaussian bump f(x, c, w) in 2 dimensions with plain
Monte Carlo on the same events per row (10^4 x 2 iterations, seed 1).  The
separate calls are written as a user writes them (one ``integrate`` per row, a
new integrand each, so each call traces and compiles its kernel); ``--calls`` of
them are timed per round and their median per-call time is multiplied by
``--rows``.  Rounds interleave the scan and the calls; the ratio of medians is
printed.  The values of the timed calls are compared with the scan's rows.
"""
import argparse
import statistics
import time

import numpy as np
import pandas as pd

import flowsim
from flowsim.physics.scans import example_bump

N_EVENTS, N_ITER, SEED, DIM = 10_000, 2, 1, 2


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rows", type=int, default=1000)
    ap.add_argument("--calls", type=int, default=20)
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    table = pd.DataFrame({"c": np.linspace(0.2, 0.8, args.rows),
                          "w": np.linspace(0.1, 0.5, args.rows)})
    scan_t, call_t, worst = [], [], 0.0
    for r in range(args.rounds):
        t0 = time.perf_counter()
        out = flowsim.scan(example_bump, DIM, table, n_events=N_EVENTS, n_iter=N_ITER,
                           seed=SEED, quiet=True)
        scan_t.append(time.perf_counter() - t0)
        rows = range(r * args.calls, (r + 1) * args.calls)
        for i in rows:
            c, w = table.c[i], table.w[i]
            t0 = time.perf_counter()
            res = flowsim.integrate(lambda x, c=c, w=w: example_bump(x, c, w), DIM, N_EVENTS,
                                    N_ITER, seed=SEED, quiet=True)
            call_t.append(time.perf_counter() - t0)
            worst = max(worst, abs(res.value - out.value[i]) / abs(res.value))
        print(f"round {r}: scan {scan_t[-1]:.2f} s; integrate calls median "
              f"{statistics.median(call_t[-args.calls:]):.3f} s each", flush=True)
    scan_s = statistics.median(scan_t)
    separate_s = statistics.median(call_t) * args.rows
    print(f"{args.rows}-row scan: {scan_s:.2f} s (median of {args.rounds}); "
          f"{args.rows} integrate calls: {separate_s:.1f} s (median per call x {args.rows}, "
          f"{len(call_t)} calls timed); ratio {separate_s / scan_s:.1f}x; largest relative "
          f"difference of values {worst:.1e}")


if __name__ == "__main__":
    main()
