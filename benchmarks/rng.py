"""Generators against each other: SplitMix64, Philox4x32-10 in TF integer ops, TF's Philox.

On one block of 65,536 events x 8 dims under XLA: the uniforms alone (summed),
and fused with the 8-dim double Gaussian; then Flow+Plain end to end at
2*10^6 events x 5 iterations, float64.  Contenders are interleaved over several
rounds and the medians compared (the machine is shared: compare ratios, not
seconds).  The rule: ``"philox4x32"`` becomes the default only at >= 0.8x
SplitMix64's speed.

    .venv/bin/python benchmarks/rng.py [--rounds 7]
"""
import argparse
import os
import sys
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
sys.path.insert(0, os.path.dirname(__file__))

import numpy as np  # noqa: E402
from _common import DIM, A, table  # noqa: E402

GENERATORS = ("splitmix", "philox4x32", "philox")


def block_kernels(n):
    import tensorflow as tf

    from flowsim.core import rng

    def gauss(u):
        e1 = tf.reduce_sum(tf.square(u - 0.25), axis=1)
        e2 = tf.reduce_sum(tf.square(u - 0.75), axis=1)
        return tf.reduce_sum(tf.exp(-e1 / (A * A)) + tf.exp(-e2 / (A * A)))

    kernels = {}
    for g in GENERATORS:
        def draw(key, g=g):
            return rng.uniform(key, [n, DIM], tf.float64, algorithm=g)
        kernels[(g, "uniforms")] = tf.function(lambda k, d=draw: tf.reduce_sum(d(k)),
                                               jit_compile=True)
        kernels[(g, "fused")] = tf.function(lambda k, d=draw: gauss(d(k)), jit_compile=True)
    return kernels


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--rounds", type=int, default=7)
    p.add_argument("--events", type=int, default=2_000_000)
    p.add_argument("--iters", type=int, default=5)
    args = p.parse_args()
    import tensorflow as tf

    import flowsim
    from flowsim.targets import double_gaussian
    n = 1 << 16
    kernels = block_kernels(n)
    key = tf.constant([1, (1 << 32) + 7], tf.int64)
    flows = {g: flowsim.Flow(flowsim.Plain(double_gaussian, DIM), n_events=args.events,
                             seed=1, rng=g, quiet=True) for g in GENERATORS}
    for fn in kernels.values():
        fn(key)
    for f in flows.values():
        f.run(1)
    times = {k: [] for k in [*kernels, *((g, "Flow+Plain") for g in GENERATORS)]}
    for _ in range(args.rounds):
        for k, fn in kernels.items():
            t0 = time.perf_counter()
            for _ in range(10):
                fn(key).numpy()
            times[k].append((time.perf_counter() - t0) / 10)
        for g, f in flows.items():
            t0 = time.perf_counter()
            f.run(args.iters)
            times[(g, "Flow+Plain")].append(time.perf_counter() - t0)
    events = {"uniforms": n, "fused": n, "Flow+Plain": args.events * args.iters}
    rows = []
    for what in ("uniforms", "fused", "Flow+Plain"):
        base = np.median(times[("splitmix", what)])
        for g in GENERATORS:
            med = np.median(times[(g, what)])
            rows.append([what, g, f"{med * 1e3:.2f}", f"{events[what] / med / 1e6:.1f}",
                         f"{base / med:.2f}"])
    print(f"8-dim double Gaussian, float64, one block of {n:,} events under XLA and Flow+Plain "
          f"at {args.events:,} x {args.iters}; median of {args.rounds} interleaved rounds, "
          f"{os.cpu_count()} cores")
    table(rows, ["kernel", "rng", "ms", "M events/s", "speed / splitmix"])


if __name__ == "__main__":
    main()
