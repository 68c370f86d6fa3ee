"""flowsim.core.fastmath.log against tf.math.log (and tf.math.exp for scale) under XLA on CPU.

The sum of f(x) over 2**20 positive numbers spread over many binades, compiled
with XLA, float64 and float32; contenders interleaved over several rounds and
the medians compared in the same run (the machine is shared: compare ratios).

    .venv/bin/python benchmarks/log.py [--rounds 9]
"""
import argparse
import os
import sys
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
sys.path.insert(0, os.path.dirname(__file__))

import numpy as np  # noqa: E402
from _common import table  # noqa: E402


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--rounds", type=int, default=9)
    p.add_argument("--size", type=int, default=1 << 20)
    args = p.parse_args()
    import tensorflow as tf

    import flowsim.core.fastmath as fm
    fns = {"flowsim.core.fastmath.log": fm.log, "tf.math.log": tf.math.log,
           "tf.math.exp": tf.math.exp}
    x64 = np.exp(np.random.default_rng(0).uniform(-20, 20, args.size))
    rows = []
    for dtype in (np.float64, np.float32):
        x = tf.constant(x64.astype(dtype))
        compiled = {k: tf.function(lambda v, f=f: tf.reduce_sum(f(v)), jit_compile=True)
                    for k, f in fns.items()}
        for fn in compiled.values():
            fn(x).numpy()
        times = {k: [] for k in compiled}
        for _ in range(args.rounds):
            for k, fn in compiled.items():
                t0 = time.perf_counter()
                for _ in range(10):
                    fn(x).numpy()
                times[k].append((time.perf_counter() - t0) / 10)
        base = np.median(times["tf.math.log"])
        for k, v in times.items():
            med = np.median(v)
            rows.append([np.dtype(dtype).name, k, f"{med * 1e3:.2f}",
                         f"{args.size / med / 1e6:.0f}", f"{base / med:.2f}"])
    print(f"sum of f(x) over {args.size:,} numbers, XLA on CPU ({os.cpu_count()} cores), "
          f"median of {args.rounds} interleaved rounds")
    table(rows, ["dtype", "function", "ms", "M values/s", "speed / tf.math.log"])


if __name__ == "__main__":
    main()
