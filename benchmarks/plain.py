"""Plain Monte Carlo throughput: flowsim vs VegasFlow's PlainFlow vs numpy.

8-dim double Gaussian (a = 0.1), 2*10^6 events x 5 iterations, float64.  Each
contender runs in a Python process of its own (flowsim's TensorFlow settings never
reach VegasFlow's), gets one untimed warm-up (tracing/compilation), then the best
of two timed runs; rounds alternate the three processes and the ratios are the
medians over rounds (the machine may be shared: compare ratios, not seconds).

    make bench            # or: .venv/bin/python benchmarks/plain.py [--rounds 3]
"""
import argparse
import os
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
sys.path.insert(0, os.path.dirname(__file__))

import numpy as np  # noqa: E402
from _common import DIM, Timed, best_of, isolated, numpy_double_gaussian, table  # noqa: E402


def run_flowsim(n_events, n_iter, seed=1):
    import flowsim
    from flowsim.targets import double_gaussian
    flow = flowsim.Flow(flowsim.Plain(double_gaussian, DIM), n_events=n_events, seed=seed,
                        quiet=True)
    flow.run(1)
    seconds, result = best_of(lambda: flow.run(n_iter))
    return seconds, result.value, result.error


def timed_run(n_events, n_iter, dtype="float64", seed=1):
    """(wall, CPU) seconds of one ``Flow(Plain).run(n_iter)`` after a warm-up iteration."""
    import flowsim
    from flowsim.targets import double_gaussian
    flow = flowsim.Flow(flowsim.Plain(double_gaussian, DIM), n_events=n_events, seed=seed,
                        dtype=dtype, quiet=True)
    flow.run(1)
    with Timed() as t:
        flow.run(n_iter)
    return t.wall, t.cpu


def run_vegasflow(n_events, n_iter):
    """``None`` when VegasFlow is not installed."""
    import logging

    import tensorflow as tf
    try:
        from vegasflow import PlainFlow
    except ImportError:
        return None
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
    seconds, (value, error) = best_of(lambda: inst.run_integration(n_iter))
    return seconds, float(value), float(error)


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
    seconds, vals = best_of(job)
    return seconds, float(vals[-1][0]), float(vals[-1][1])


CONTENDERS = (("flowsim Flow+Plain", "run_flowsim"), ("VegasFlow PlainFlow", "run_vegasflow"),
              ("numpy (1 core)", "run_numpy"))


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--events", type=int, default=2_000_000)
    p.add_argument("--iters", type=int, default=5)
    p.add_argument("--rounds", type=int, default=3,
                   help="alternated rounds of one process per contender")
    args = p.parse_args()
    total = args.events * args.iters
    runs = {name: [] for name, _ in CONTENDERS}
    for _ in range(args.rounds):
        for name, function in CONTENDERS:
            runs[name].append(isolated("plain", function, args.events, args.iters))
    ratios = {name: [None if r is None else r[0] / f[0]
                     for r, f in zip(runs[name], runs[CONTENDERS[0][0]])]
              for name, _ in CONTENDERS}
    rows = []
    for name, _ in CONTENDERS:
        done = [r for r in runs[name] if r is not None]
        if not done:
            rows.append([name, "-", "-", "-", "not installed"])
            continue
        seconds, value, error = sorted(done)[len(done) // 2]
        rows.append([name, f"{seconds:.3f}", f"{total / seconds:,.0f}",
                     f"{np.median(ratios[name]):.2f}", f"{value:.5f} +/- {error:.5f}"])
    print(f"Plain MC, 8-dim double Gaussian a=0.1, {args.events:,} events x {args.iters} "
          f"iterations, float64, {os.cpu_count()} cores, one process per contender, "
          f"{args.rounds} rounds, load average {os.getloadavg()[0]:.1f}")
    table(rows, ["contender", "time/s", "events/s", "flowsim speed-up", "estimate"])
    for name, _ in CONTENDERS:
        if None not in runs[name]:
            print(f"{name} seconds by round: " + ", ".join(f"{r[0]:.3f}" for r in runs[name]))
    for name, _ in CONTENDERS[1:]:
        if None not in ratios[name]:
            each = ", ".join(f"{r:.2f}" for r in ratios[name])
            print(f"flowsim / {name}: median {np.median(ratios[name]):.2f}x (rounds: {each})")


if __name__ == "__main__":
    main()
