"""Cost of a numpy integrand (flowsim.integrate(..., numpy=True)) against the same
integrand in TensorFlow.

Usage: python benchmarks/numpy_integrand.py [--events 1000000] [--rounds 5]

8-dimensional double Gaussian, plain Monte Carlo, float64, one device, same seed.
Each variant's Simulation and Flow are built and warmed once (compiled), then the
rounds interleave one run of 3 iterations of each; the ratio of median times is
printed (numpy / TF), and the two values (same random numbers) compared.
"""
import argparse
import statistics
import time

import numpy as np

from flowsim.algorithms.plain import Plain
from flowsim.core.flow import Flow
from flowsim.core.lazy_tf import tf
from flowsim.physics.numpy_integrands import NumpyIntegrand

DIM = 8


def gauss_tf(x):
    t = tf()
    a = 0.1
    pre = (1.0 / (a * np.sqrt(np.pi))) ** DIM
    return 0.5 * pre * (t.exp(-t.reduce_sum(t.square(x - 1 / 3), axis=1) / a ** 2)
                        + t.exp(-t.reduce_sum(t.square(x - 2 / 3), axis=1) / a ** 2))


def gauss_np(x):
    a = 0.1
    pre = (1.0 / (a * np.sqrt(np.pi))) ** DIM
    return 0.5 * pre * (np.exp(-np.sum((x - 1 / 3) ** 2, axis=1) / a ** 2)
                        + np.exp(-np.sum((x - 2 / 3) ** 2, axis=1) / a ** 2))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--events", type=int, default=1_000_000)
    ap.add_argument("--rounds", type=int, default=5)
    args = ap.parse_args()
    sims = {"tf": (Plain(gauss_tf, DIM), True),
            "numpy": (Plain(NumpyIntegrand(gauss_np), DIM), False)}
    times = {k: [] for k in sims}
    values = {}
    for sim, jit in sims.values():                      # warm: trace and compile
        Flow(sim, args.events, seed=1, quiet=True, jit_compile=jit).run(1)
    for _ in range(args.rounds):
        for k, (sim, jit) in sims.items():
            flow = Flow(sim, args.events, seed=1, quiet=True, jit_compile=jit)
            t0 = time.perf_counter()
            values[k] = flow.run(3).value
            times[k].append(time.perf_counter() - t0)
    med = {k: statistics.median(v) for k, v in times.items()}
    print(f"{3 * args.events:,} events: TF {med['tf']:.2f} s, numpy {med['numpy']:.2f} s "
          f"(medians of {args.rounds}); numpy / TF = {med['numpy'] / med['tf']:.2f}x; "
          f"values {values['tf']:.12g} vs {values['numpy']:.12g}")


if __name__ == "__main__":
    main()
