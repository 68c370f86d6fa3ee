"""Where one block's time goes: Plain's XLA kernel in stages, per CPU-second.

One block of 64,576 x 8 (the default block at 2*10^6 events), 8-dim double
Gaussian, float64, each stage its own XLA function: the kernel as the engine
builds it (generator and integrand in tiles, then the block's reduction), the
same over the whole block at once (the kernel before tiles: XLA draws the
numbers again in every fusion that reads them), the uniforms alone (in tiles,
summed), the integrand alone on ready uniforms, and the block's reduction alone
on ready values.  Contenders are interleaved over several rounds; the table
gives medians of wall and process CPU time (the machine is shared: compare
the CPU column and ratios, not seconds).

    .venv/bin/python benchmarks/block.py [--rounds 7]
"""
import argparse
import os
import sys
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
sys.path.insert(0, os.path.dirname(__file__))

import numpy as np  # noqa: E402
from _common import DIM, table  # noqa: E402

SIZE = 64576


def stages():
    import tensorflow as tf

    import flowsim
    from flowsim.core import kernel, rng
    from flowsim.targets import double_gaussian
    sim = flowsim.Plain(double_gaussian, DIM)
    valid = tf.ones([SIZE], tf.bool)

    def row(out):
        return tf.concat([tf.reshape(out[k], [-1]) for k in sorted(out)], 0)

    def tiled(key):
        return row(sim.reduce(kernel.tile_events(sim.values, key, SIZE, DIM, tf.float64, {}),
                              valid, {}))

    def whole(key):
        return row(sim.block(rng.uniform(key, [SIZE, DIM], tf.float64), valid, {}))

    def uniforms(key):
        return tf.reduce_sum(kernel.tile_events(
            lambda u, s: tf.reduce_sum(u, axis=1, keepdims=True), key, SIZE, DIM, tf.float64, {}))

    ready_u = tf.constant(np.random.default_rng(1).random((SIZE, DIM)))
    ready_f = tf.constant(np.random.default_rng(2).random((SIZE, 1)))
    jit = {"kernel (tiles)": (tiled, None), "whole block": (whole, None),
           "uniforms alone": (uniforms, None),
           "integrand alone": (lambda u: tf.reduce_sum(double_gaussian(u)), ready_u),
           "reduction alone": (lambda f: row(sim.reduce(f, valid, {})), ready_f)}
    key = tf.constant([1, (1 << 32) + 7], tf.int64)
    return {name: (tf.function(fn, jit_compile=True, autograph=False), key if arg is None else arg)
            for name, (fn, arg) in jit.items()}


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--rounds", type=int, default=7)
    p.add_argument("--reps", type=int, default=20)
    args = p.parse_args()
    fns = stages()
    for fn, arg in fns.values():
        fn(arg).numpy()
    wall = {k: [] for k in fns}
    cpu = {k: [] for k in fns}
    for _ in range(args.rounds):
        for name, (fn, arg) in fns.items():
            w, c = time.perf_counter(), time.process_time()
            for _ in range(args.reps):
                fn(arg).numpy()
            wall[name].append((time.perf_counter() - w) / args.reps)
            cpu[name].append((time.process_time() - c) / args.reps)
    base = np.median(cpu["whole block"])
    rows = []
    for name in fns:
        w, c = np.median(wall[name]), np.median(cpu[name])
        rows.append([name, f"{w * 1e3:.2f}", f"{SIZE / w / 1e6:.1f}", f"{SIZE / c / 1e6:.1f}",
                     f"{base / c:.2f}"])
    print(f"8-dim double Gaussian, float64, one block of {SIZE:,} events under XLA; medians of "
          f"{args.rounds} interleaved rounds of {args.reps} calls, {os.cpu_count()} cores")
    table(rows, ["stage", "ms", "M events/s", "M events/CPU-s", "CPU speed / whole block"])


if __name__ == "__main__":
    main()
