"""The practical limit: flowsim Plain against a numba kernel drawing the same numbers.

A ``numba.njit(parallel=True)`` kernel draws flowsim's SplitMix64 stream
(:mod:`flowsim.core.rng`: block key ``[seed, (iteration << 32) + block]``,
hashed to ``k``; number ``i`` of a block is ``mix64(k + (i + 1) * golden)``,
``u = (z >> 11) * 2**-53``, or ``(z >> 40) * 2**-24`` in float32; event ``e``
takes numbers ``e*dim .. e*dim+dim-1``), evaluates the 8-dim double Gaussian and
forms the same per-block accumulators as :class:`flowsim.Plain` (sum and the
squared deviations about the block's mean, each summed in flowsim's fixed tree:
groups of 64 events, then the group sums).  It first checks that both give the
same block rows (float64: to 1e-12 relative; float32: to 1e-6, since numba's
and XLA's float32 ``exp`` differ in the last bits), then times flowsim
``Flow(Plain).run(iters)`` against the kernel over the same iterations,
interleaved over several rounds (the machine is shared: compare ratios, not
seconds).  Issue 15's target: flowsim >= 0.6x the kernel in events/s at 2*10^6
x 5, float64.

    .venv/bin/python benchmarks/limit.py [--rounds 5] [--dtype float64 float32]
"""
import argparse
import math
import os
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
sys.path.insert(0, os.path.dirname(__file__))

import numba  # noqa: E402
import numpy as np  # noqa: E402
from _common import DIM, Timed, table  # noqa: E402
from numba import njit, prange  # noqa: E402

G = np.uint64(0x9E3779B97F4A7C15)
M1 = np.uint64(0xBF58476D1CE4E5B9)
M2 = np.uint64(0x94D049BB133111EB)
QUANTUM = 64            # flowsim.core.blocks.BLOCK_QUANTUM
A = 0.1                 # flowsim.targets.DOUBLE_GAUSSIAN_A


@njit(inline="always")
def mix64(z):
    z = (z ^ (z >> np.uint64(30))) * M1
    z = (z ^ (z >> np.uint64(27))) * M2
    return z ^ (z >> np.uint64(31))


@njit(inline="always")
def block_key(seed, word):
    """flowsim.core.rng._stream_key for stream 0."""
    h = mix64(np.uint64(seed) + G)
    h = mix64((h ^ np.uint64(word)) + G)
    return mix64(h + G)


@njit(inline="always")
def tree_sum(f, count):
    """flowsim.core.sums.block_sum: groups of QUANTUM, then the group sums."""
    total = 0.0
    for g in range(f.size // QUANTUM):
        s = 0.0
        for j in range(g * QUANTUM, (g + 1) * QUANTUM):
            s += f[j]
        total += s
    return total


def make_kernel(single):
    """The block-rows kernel, float64 or (``single``) float32 arithmetic."""
    ft = np.float32 if single else np.float64
    norm = ft(0.5 * (A * math.sqrt(math.pi)) ** (-DIM))
    a = ft(A)
    aa = a * a
    q1, q3 = ft(0.25), ft(0.75)
    scale = ft(2.0 ** -24) if single else ft(2.0 ** -53)
    shift = np.uint64(40) if single else np.uint64(11)

    @njit(parallel=True)
    def kernel(seed, iteration, n_events, bs, n_blocks, rows):
        for b in prange(n_blocks):
            k = block_key(seed, (iteration << 32) + b)
            f = np.zeros(bs)
            first = b * bs
            count = min(bs, n_events - first)
            for e in range(count):
                e1 = ft(0.0)
                e2 = ft(0.0)
                base = np.uint64(e * DIM + 1)
                for d in range(DIM):
                    z = mix64(k + (base + np.uint64(d)) * G)
                    x = ft(np.int64(z >> shift)) * scale     # exact: < 2**53
                    e1 += (x - q1) * (x - q1)
                    e2 += (x - q3) * (x - q3)
                f[e] = np.float64(norm * (np.exp(-e1 / aa) + np.exp(-e2 / aa)))
            total = tree_sum(f, count)
            mean = total / max(count, 1)
            for e in range(count):
                f[e] = (f[e] - mean) * (f[e] - mean)
            for e in range(count, bs):
                f[e] = 0.0
            rows[b, 0] = total
            rows[b, 1] = tree_sum(f, count)
            rows[b, 2] = count
    return kernel


def numba_run(kernel, seed, first_iteration, n_iter, n_events, bs):
    """Per-iteration block rows [n_blocks, 3] (sum, m2, count) and the pooled mean."""
    n_blocks = -(-n_events // bs)
    out, total = [], 0.0
    for it in range(first_iteration, first_iteration + n_iter):
        rows = np.empty((n_blocks, 3))
        kernel(seed, it, n_events, bs, n_blocks, rows)
        out.append(rows)
        total += rows[:, 0].sum()
    return out, total / (n_iter * n_events)


def check_same(flow_rows, kernel_rows, rtol, what):
    """flowsim's columns sum/m2/count against the kernel's, relative to each column's scale."""
    for got, want in zip(flow_rows, kernel_rows):
        err = np.abs(got - want) / np.maximum(np.abs(want).max(axis=0), 1e-300)
        if not np.all(err <= rtol):
            raise AssertionError(f"{what}: flowsim and numba block rows differ by "
                                 f"{err.max():.3g} relative (allowed {rtol:g})")
    return max(float((np.abs(g - w) / np.abs(w).max(axis=0)).max())
               for g, w in zip(flow_rows, kernel_rows))


def measure(dtype, n_events, n_iter, rounds, seed=1):
    import flowsim
    from flowsim.core.kernel import layout
    from flowsim.targets import double_gaussian
    sim = flowsim.Plain(double_gaussian, DIM)
    flow = flowsim.Flow(sim, n_events=n_events, seed=seed, dtype=dtype, quiet=True)
    bs = flow.spec.block_size
    cols = {name: a for name, _, a, _ in layout(sim)[0]}
    pick = [cols["sum"], cols["m2"], cols["count"]]
    kernel = make_kernel(dtype == "float32")
    # same bits: block rows of iterations 0..n_iter-1 and the pooled mean
    want, mean = numba_run(kernel, seed, 0, n_iter, n_events, bs)
    got = [flow.run_blocks(it)[:, pick] for it in range(n_iter)]
    rtol = 1e-12 if dtype == "float64" else 1e-6
    worst = check_same(got, want, rtol, dtype)
    res = flowsim.Flow(flowsim.Plain(double_gaussian, DIM), n_events=n_events, seed=seed,
                       dtype=dtype, quiet=True).run(n_iter)
    if abs(res.value - mean) > rtol * abs(mean):
        raise AssertionError(f"{dtype}: flowsim {res.value!r} != numba {mean!r}")
    # timing: interleaved, each side continuing with fresh iterations
    flow.run(1)
    times = {"flowsim": [], "numba": []}
    cpu = {"flowsim": [], "numba": []}
    it = n_iter
    for _ in range(rounds):
        with Timed() as t:
            flow.run(n_iter)
        times["flowsim"].append(t.wall)
        cpu["flowsim"].append(t.cpu)
        with Timed() as t:
            numba_run(kernel, seed, it, n_iter, n_events, bs)
        times["numba"].append(t.wall)
        cpu["numba"].append(t.cpu)
        it += n_iter
    return times, cpu, worst, res


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--events", type=int, default=2_000_000)
    p.add_argument("--iters", type=int, default=5)
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--dtype", nargs="+", default=["float64", "float32"])
    args = p.parse_args()
    total = args.events * args.iters
    rows, ratios = [], {}
    for dtype in args.dtype:
        times, cpu, worst, res = measure(dtype, args.events, args.iters, args.rounds)
        med = {k: float(np.median(v)) for k, v in times.items()}
        ratios[dtype] = med["numba"] / med["flowsim"]
        for who in ("flowsim", "numba"):
            rows.append([dtype, "flowsim Flow+Plain" if who == "flowsim" else "numba kernel",
                         f"{med[who]:.3f}", f"{total / med[who]:,.0f}",
                         f"{1e6 * np.median(cpu[who]) / total:.4f}",
                         f"{med['numba'] / med[who]:.2f}"])
        rows.append([dtype, "same rows", f"max rel diff {worst:.1e}", "", "", ""])
    print(f"8-dim double Gaussian a={A}, {args.events:,} events x {args.iters} iterations, "
          f"median of {args.rounds} interleaved rounds, {os.cpu_count()} cores, "
          f"numba {numba.__version__} ({numba.config.NUMBA_NUM_THREADS} threads)")
    table(rows, ["dtype", "contender", "time/s", "events/s", "CPU-s per 1e6 events",
                 "speed / numba"])
    for dtype, r in ratios.items():
        print(f"\nflowsim / numba ({dtype}) = {r:.2f}x"
              + ("  (target >= 0.6x)" if dtype == "float64" else ""))


if __name__ == "__main__":
    main()
