"""Plain Monte Carlo throughput: flowsim vs VegasFlow's PlainFlow vs numpy.

8-dim double Gaussian (a = 0.1), 2*10^6 events x 5 iterations, float64, all
measured in this run (the machine is shared: compare ratios, not seconds).
Each contender gets one untimed warm-up (tracing/compilation), then the best of
two timed runs.  Targets (issue 2): flowsim >= 1.0x PlainFlow and >= 2x numpy.

    make bench            # or: .venv/bin/python benchmarks/plain.py
"""
import argparse
import os
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
sys.path.insert(0, os.path.dirname(__file__))

import numpy as np  # noqa: E402
from _common import DIM, best_of, numpy_double_gaussian, table  # noqa: E402


def run_flowsim(n_events, n_iter, seed=1):
    import flowsim
    from flowsim.targets import double_gaussian
    flow = flowsim.Flow(flowsim.Plain(double_gaussian, DIM), n_events=n_events, seed=seed,
                        quiet=True)
    flow.run(1)
    return best_of(lambda: flow.run(n_iter))


def run_vegasflow(n_events, n_iter):
    import logging

    import tensorflow as tf
    from vegasflow import PlainFlow
    logging.getLogger("vegasflow").setLevel(logging.ERROR)

    def integrand(xarr, **kwargs):
        a = tf.constant(0.1, dtype=xarr.dtype)
        norm = 0.5 * (0.1 * np.sqrt(np.pi)) ** (-DIM)
        e1 = tf.reduce_sum(tf.square(xarr - 0.25), axis=1)
        e2 = tf.reduce_sum(tf.square(xarr - 0.75), axis=1)
        return norm * (tf.exp(-e1 / (a * a)) + tf.exp(-e2 / (a * a)))

    inst = PlainFlow(DIM, n_events, verbose=False)
    inst.compile(integrand)
    inst.run_integration(1)
    return best_of(lambda: inst.run_integration(n_iter))


def run_numpy(n_events, n_iter, chunk=1_000_000, seed=1):
    def job():
        rng = np.random.default_rng(seed)
        vals = []
        for _ in range(n_iter):
            s = s2 = 0.0
            for start in range(0, n_events, chunk):
                f = numpy_double_gaussian(rng.random((min(chunk, n_events - start), DIM)))
                s += f.sum()
                s2 += (f * f).sum()
            mean = s / n_events
            vals.append((mean, np.sqrt((s2 / n_events - mean ** 2) / (n_events - 1))))
        return vals
    job()
    return best_of(job)


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--events", type=int, default=2_000_000)
    p.add_argument("--iters", type=int, default=5)
    args = p.parse_args()
    total = args.events * args.iters
    rows = []
    t_fs, res = run_flowsim(args.events, args.iters)
    rows.append(["flowsim Flow+Plain", f"{t_fs:.3f}", f"{total / t_fs:,.0f}", "1.00",
                 f"{res.value:.5f} +/- {res.error:.5f}"])
    try:
        t_vf, vf = run_vegasflow(args.events, args.iters)
        rows.append(["VegasFlow PlainFlow", f"{t_vf:.3f}", f"{total / t_vf:,.0f}",
                     f"{t_vf / t_fs:.2f}", f"{vf[0]:.5f} +/- {vf[1]:.5f}"])
    except ImportError as exc:
        t_vf = None
        rows.append(["VegasFlow PlainFlow", "-", "-", "-", f"not installed ({exc})"])
    t_np, npres = run_numpy(args.events, args.iters)
    rows.append(["numpy (1 core)", f"{t_np:.3f}", f"{total / t_np:,.0f}", f"{t_np / t_fs:.2f}",
                 f"{npres[-1][0]:.5f} +/- {npres[-1][1]:.5f}"])
    print(f"Plain MC, 8-dim double Gaussian a=0.1, {args.events:,} events x {args.iters} "
          f"iterations, float64, {os.cpu_count()} cores")
    table(rows, ["contender", "time/s", "events/s", "flowsim speed-up", "estimate"])
    if t_vf:
        print(f"\nflowsim / VegasFlow PlainFlow = {t_vf / t_fs:.2f}x  (target >= 1.0x)")
    print(f"flowsim / numpy              = {t_np / t_fs:.2f}x  (target >= 2.0x)")


if __name__ == "__main__":
    main()
