"""The per-core limit: flowsim Plain against fast numba kernels drawing the same numbers.

Two ``numba.njit(parallel=True, fastmath=...)`` kernels draw flowsim's SplitMix64
stream (:mod:`flowsim.core.rng`: block key ``[seed, (iteration << 32) + block]``,
hashed to ``k``; number ``i`` of a block is ``mix64(k + (i + 1) * golden)``,
``u = (z >> 11) * 2**-53``, or ``(z >> 40) * 2**-24`` in float32; event ``e``
takes numbers ``e*dim .. e*dim+dim-1``), evaluate the 8-dim double Gaussian in the
Flow's dtype and form :class:`flowsim.Plain`'s per-block accumulators: ``sum``,
``m2`` (squared deviations about the block's own mean, a second pass over the
block's values), ``count`` and ``nonfinite``.  They differ only in ``exp``:

``polyexp``
    an inline branch-free ``exp`` (Cody-Waite reduction by ln 2, Taylor
    polynomial, ``2**k`` by bit-cast), so LLVM vectorises the event loop: the
    fast kernel a user could write by hand, and the limit flowsim is measured
    against;
``libm``
    ``math.exp``, a scalar libm call per value (numba has no vector ``exp``
    without Intel's SVML, absent here), which keeps the event loop scalar.

Before timing, both are checked against flowsim on every block of the timed
size's first iterations:

* per event (block 0 and the last, partly empty block): flowsim's values
  (:meth:`flowsim.Plain.values` over the block, compiled as the kernel compiles
  it) against the kernel's, in units in the last place of the larger; both
  compute the exponent's argument ``x`` alike (the same uniforms, the same
  order of operations), so the difference is the two ``exp``'s, amplified
  where their arguments differ by an ulp (``|x|`` ulp).  The bound checked:
  ``|f_flowsim - f_numba| <= (ULPS + |x|) ulp`` (+ 4 times the dtype's
  smallest normal times the norm: XLA flushes ``exp`` to 0 a little above
  the subnormals, libm and the polynomial do not);
* per block: ``count`` and ``nonfinite`` equal, ``sum`` and ``m2`` within
  ``ROWS_RTOL`` relative (the kernels add in vector lanes, flowsim in XLA's
  order; the per-event differences above bound the rest).

Then it times, alternated over ``--rounds`` rounds, each contender in a Python
process of its own (numba's and TensorFlow's thread pools never share one):
flowsim ``Flow(Plain).run(iters)`` after a warm-up iteration, the polyexp kernel
and the libm kernel over as many iterations after a warm-up, and prints medians
(the machine may be shared: compare ratios of one run, not seconds across runs).  The
target: flowsim >= 0.6x the polyexp kernel in events/s at 2*10^6 x 5, float64
and float32.

    .venv/bin/python benchmarks/limit.py [--rounds 7] [--dtype float64 float32]
"""
import argparse
import math
import os
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
sys.path.insert(0, os.path.dirname(__file__))

import numba  # noqa: E402
import numpy as np  # noqa: E402
from _common import DIM, Timed, isolated, table  # noqa: E402
from numba import njit, prange, types  # noqa: E402
from numba.extending import intrinsic  # noqa: E402

G = np.uint64(0x9E3779B97F4A7C15)
M1 = np.uint64(0xBF58476D1CE4E5B9)
M2 = np.uint64(0x94D049BB133111EB)
A = 0.1                 # flowsim.targets.DOUBLE_GAUSSIAN_A
#: Fast-math flags of the kernels: reassociation (vector-lane sums) and contraction
#: (FMA), but NaN and Inf are honoured (the nonfinite count is real work).
FASTMATH = {"reassoc", "contract", "arcp", "nsz", "afn"}
#: Per-event bound: ulps of the two exps' own errors.
ULPS = 8
#: Per-block bound on ``sum`` and ``m2``, relative.
ROWS_RTOL = {"float64": 1e-12, "float32": 1e-6}


@intrinsic
def _bits_as_float(typingctx, x):
    """Reinterpret an int64 as float64 or an int32 as float32 (no conversion)."""
    out = types.float64 if x.bitwidth == 64 else types.float32

    def codegen(context, builder, signature, args):
        return builder.bitcast(args[0], context.get_value_type(out))
    return out(x), codegen


@njit(inline="always")
def mix64(z):
    z = (z ^ (z >> np.uint64(30))) * M1
    z = (z ^ (z >> np.uint64(27))) * M2
    return z ^ (z >> np.uint64(31))


@njit(inline="always")
def block_key(seed, word):
    """flowsim.core.rng's key of stream 0 of the block (seed, word)."""
    h = mix64(np.uint64(seed) + G)
    h = mix64((h ^ np.uint64(word)) + G)
    return mix64(h + G)


# exp by Cody-Waite: x = k ln2 + r, |r| <= ln2/2, exp(x) = 2^k exp(r).
LOG2E = 1.4426950408889634
LN2_HI64, LN2_LO64 = 0.6931471803691238, 1.9082149292705877e-10    # hi: 32 bits
LN2_HI32, LN2_LO32 = np.float32(0.693359375), np.float32(-2.12194440e-4)   # hi: 9 bits
#: Taylor coefficients 1/j!, highest first.
LN_TINY32 = np.float32(math.log(2.0 ** -126))
TAYLOR64 = tuple(1.0 / math.factorial(j) for j in range(13, -1, -1))
TAYLOR32 = tuple(np.float32(1.0 / math.factorial(j)) for j in range(7, -1, -1))


@njit(inline="always", fastmath=FASTMATH)
def exp64(x):
    """exp(x) for -708 <= x <= 0 (float64), ~1 ulp, branch-free; below: exp(-708)."""
    x = max(x, -708.0)
    k = math.floor(x * LOG2E + 0.5)
    r = (x - k * LN2_HI64) - k * LN2_LO64
    p = TAYLOR64[0]
    for c in TAYLOR64[1:]:
        p = p * r + c
    return p * _bits_as_float((np.int64(k) + np.int64(1023)) << np.int64(52))


@njit(inline="always", fastmath=FASTMATH)
def exp32(x):
    """exp(x) for x <= 0 (float32), ~1 ulp; 0 where exp(x) is subnormal."""
    keep = x >= LN_TINY32
    x = max(x, LN_TINY32)
    k = np.floor(x * np.float32(LOG2E) + np.float32(0.5))
    r = (x - k * LN2_HI32) - k * LN2_LO32
    p = TAYLOR32[0]
    for c in TAYLOR32[1:]:
        p = p * r + c
    v = p * _bits_as_float(np.int32((np.int64(k) + 127) << 23))     # numba: int32 ops give int64
    return v if keep else np.float32(0.0)


def make_kernels(single, poly):
    """``(values, rows)``: the per-event values of one block, and the block-rows kernel,
    float64 or (``single``) float32 arithmetic, ``exp`` polynomial or libm."""
    ft = np.float32 if single else np.float64
    norm = ft(0.5 * (A * math.sqrt(math.pi)) ** (-DIM))
    inv_aa = ft(1.0) / (ft(A) * ft(A))
    q1, q3 = ft(0.25), ft(0.75)
    scale = ft(2.0 ** -24) if single else ft(2.0 ** -53)
    shift = np.uint64(40) if single else np.uint64(11)
    fexp = (exp32 if single else exp64) if poly else (lambda x: math.exp(x))
    fexp = njit(inline="always", fastmath=FASTMATH)(fexp) if not poly else fexp

    @njit(inline="always", fastmath=FASTMATH)
    def event(k, e):
        """(f, x1) of event e of the block with key k (x1: exp's first argument)."""
        e1 = ft(0.0)
        e2 = ft(0.0)
        base = k + (np.uint64(e) * np.uint64(DIM) + np.uint64(1)) * G
        for d in range(DIM):
            z = mix64(base + np.uint64(d) * G)
            u = ft(np.int64(z >> shift)) * scale       # exact: < 2**53
            e1 += (u - q1) * (u - q1)
            e2 += (u - q3) * (u - q3)
        x1 = -e1 * inv_aa
        return norm * (fexp(x1) + fexp(-e2 * inv_aa)), x1

    @njit(fastmath=FASTMATH)
    def values(seed, word, count):
        k = block_key(seed, word)
        f = np.empty(count)
        x = np.empty(count)
        for e in range(count):
            v, x1 = event(k, e)
            f[e] = np.float64(v)
            x[e] = np.float64(x1)
        return f, x

    @njit(parallel=True, fastmath=FASTMATH)
    def rows(seed, iteration, n_events, bs, n_blocks, out):
        for b in prange(n_blocks):
            k = block_key(seed, (iteration << 32) + b)
            count = min(bs, n_events - b * bs)
            f = np.empty(count)
            total = 0.0
            bad = 0
            for e in range(count):
                v = np.float64(event(k, e)[0])
                ok = math.isfinite(v)
                bad += 0 if ok else 1
                v = v if ok else 0.0
                f[e] = v
                total += v
            mean = total / max(count, 1)
            m2 = 0.0
            for e in range(count):
                m2 += (f[e] - mean) * (f[e] - mean)
            out[b, 0] = total
            out[b, 1] = m2
            out[b, 2] = count
            out[b, 3] = bad
    return values, rows


def numba_run(kernel, seed, first_iteration, n_iter, n_events, bs):
    """Per-iteration block rows ``[n_blocks, 4]`` (sum, m2, count, nonfinite)."""
    n_blocks = -(-n_events // bs)
    out = []
    for it in range(first_iteration, first_iteration + n_iter):
        rows = np.empty((n_blocks, 4))
        kernel(seed, it, n_events, bs, n_blocks, rows)
        out.append(rows)
    return out


def flowsim_values(sim, flow, dtype):
    """flowsim's per-event values of a block, compiled as the block kernel computes them."""
    from flowsim.core import kernel as fk
    from flowsim.core import rng
    from flowsim.core.lazy_tf import tf
    t = tf()
    per_event, _ = sim.block_parts()
    bs = flow.spec.block_size

    @t.function(jit_compile=True)
    def fn(key):
        with rng.using("splitmix"):
            return fk.tile_events(per_event, key, bs, sim.dim, getattr(t, dtype), {})
    return lambda seed, word: fn(t.constant([seed, word], t.int64)).numpy()[:, 0]


def check_events(got, want, x, dtype, what):
    """The largest difference in ulps of the larger value among the events that carry
    the sum (f >= 1e-6 max f), and the largest excess over ``|x|`` ulps of any event above
    the floor; raises beyond the bound."""
    ft = np.dtype(dtype).type
    eps, tiny = float(np.finfo(ft).eps), float(np.finfo(ft).tiny)
    big = np.maximum(np.abs(got), np.abs(want))
    ulp = np.maximum(big * eps, 2.0 ** -1074)
    floor = 4 * tiny * 0.5 * (A * math.sqrt(math.pi)) ** (-DIM)
    diff = np.abs(got - want)
    ulps = diff / ulp
    bad = (diff > (ULPS + np.abs(x)) * ulp + floor)
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        raise AssertionError(f"{what}: event {i}: flowsim {got[i]!r}, numba {want[i]!r} "
                             f"({ulps[i]:.1f} ulp, x = {x[i]:.3g}; allowed {ULPS} + |x|)")
    carry = big >= 1e-6 * big.max()
    excess = np.maximum(diff - floor, 0.0) / ulp - np.abs(x)
    return float(ulps[carry].max()), max(float(excess.max()), 0.0)


def check_rows(flow_rows, kernel_rows, dtype, what):
    """flowsim's (sum, m2, count, nonfinite) against the kernel's; the largest relative
    difference of sum and m2."""
    worst = 0.0
    for got, want in zip(flow_rows, kernel_rows):
        if not (np.array_equal(got[:, 2:], want[:, 2:])):
            raise AssertionError(f"{what}: count/nonfinite differ: {got[:, 2:]} vs {want[:, 2:]}")
        err = np.abs(got[:, :2] - want[:, :2]) / np.abs(want[:, :2])
        worst = max(worst, float(err.max()))
    if worst > ROWS_RTOL[dtype]:
        raise AssertionError(f"{what}: flowsim and numba block rows differ by {worst:.3g} "
                             f"relative (allowed {ROWS_RTOL[dtype]:g})")
    return worst


def check(dtype, n_events, n_iter, seed=1):
    """Both kernels against flowsim per event and per block; ``(checks, block size)``."""
    import flowsim
    from flowsim.core.kernel import layout
    from flowsim.targets import double_gaussian
    sim = flowsim.Plain(double_gaussian, DIM)
    flow = flowsim.Flow(sim, n_events=n_events, seed=seed, dtype=dtype, quiet=True)
    bs = flow.spec.block_size
    n_blocks = -(-n_events // bs)
    cols = {name: a for name, _, a, _ in layout(sim)[0]}
    pick = [cols["sum"], cols["m2"], cols["count"], cols["nonfinite"]]
    single = dtype == "float32"
    kernels = {name: make_kernels(single, poly) for name, poly in (("polyexp", True),
                                                                   ("libm", False))}
    checks = {}
    # per event: block 0 and the last block of iteration 0
    fs_values = flowsim_values(sim, flow, dtype)
    for name, (values, _) in kernels.items():
        near = far = 0.0
        for b in (0, n_blocks - 1):
            count = min(bs, n_events - b * bs)
            want, x = values(seed, b, count)
            got = fs_values(seed, b)[:count]
            n, f = check_events(got, want, x, dtype, f"{dtype} {name} block {b}")
            near, far = max(near, n), max(far, f)
        checks[name] = [near, far]
    # per block: every block of iterations 0 .. n_iter-1
    got = [flow.run_blocks(it)[:, pick] for it in range(n_iter)]
    for name, (_, rows) in kernels.items():
        want = numba_run(rows, seed, 0, n_iter, n_events, bs)
        checks[name].append(check_rows(got, want, dtype, f"{dtype} {name}"))
    return checks, bs


def timed_kernel(dtype, poly, n_events, n_iter, bs, seed=1):
    """(wall, CPU) seconds of a kernel over ``n_iter`` iterations after a warm-up one."""
    _, rows = make_kernels(dtype == "float32", poly)
    numba_run(rows, seed, 0, 1, n_events, bs)
    with Timed() as t:
        numba_run(rows, seed, 1, n_iter, n_events, bs)
    return t.wall, t.cpu


def measure(dtype, n_events, n_iter, rounds, seed=1):
    """Checks in this process, then each contender timed in a process of its own."""
    checks, bs = check(dtype, n_events, n_iter, seed)
    times = {who: [] for who in ("flowsim", "polyexp", "libm")}
    cpu = {who: [] for who in times}
    for _ in range(rounds):
        for who in times:
            if who == "flowsim":
                wall, cpu_s = isolated("plain", "timed_run", n_events, n_iter, dtype, seed)
            else:
                wall, cpu_s = isolated("limit", "timed_kernel", dtype, who == "polyexp",
                                       n_events, n_iter, bs, seed)
            times[who].append(wall)
            cpu[who].append(cpu_s)
    return times, cpu, checks


NAMES = {"flowsim": "flowsim Flow+Plain", "polyexp": "numba polyexp", "libm": "numba libm"}


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--events", type=int, default=2_000_000)
    p.add_argument("--iters", type=int, default=5)
    p.add_argument("--rounds", type=int, default=7)
    p.add_argument("--dtype", nargs="+", default=["float64", "float32"])
    args = p.parse_args()
    total = args.events * args.iters
    rows, ratios, notes = [], {}, []
    for dtype in args.dtype:
        times, cpu, checks = measure(dtype, args.events, args.iters, args.rounds)
        med = {k: float(np.median(v)) for k, v in times.items()}
        mcpu = {k: float(np.median(v)) for k, v in cpu.items()}
        ratios[dtype] = (med["polyexp"] / med["flowsim"], mcpu["polyexp"] / mcpu["flowsim"],
                         med["libm"] / med["flowsim"])
        for who in times:
            rows.append([dtype, NAMES[who], f"{med[who]:.3f}", f"{total / med[who]:,.0f}",
                         f"{1e6 * mcpu[who] / total:.4f}",
                         f"{med['polyexp'] / med[who]:.2f}", f"{med['libm'] / med[who]:.2f}"])
        for name, (near, far, rel) in checks.items():
            notes.append(f"{dtype} {name}: per event max {near:.1f} ulp (events carrying the "
                         f"sum), {far:.1f} ulp beyond |x| (allowed {ULPS}); block sum/m2 max "
                         f"rel diff {rel:.1e} (allowed {ROWS_RTOL[dtype]:g}); count and "
                         f"nonfinite equal")
    print(f"8-dim double Gaussian a={A}, {args.events:,} events x {args.iters} iterations, "
          f"median of {args.rounds} alternated rounds, one process per contender, "
          f"{os.cpu_count()} cores, load average {os.getloadavg()[0]:.1f}, "
          f"numba {numba.__version__} ({numba.config.NUMBA_NUM_THREADS} threads)")
    table(rows, ["dtype", "contender", "time/s", "events/s", "CPU-s per 1e6 events",
                 "speed / polyexp", "speed / libm"])
    print("\nsame numbers and accumulators:")
    for note in notes:
        print("  " + note)
    print()
    for dtype, (wall, cpu, libm) in ratios.items():
        print(f"flowsim / numba polyexp ({dtype}) = {wall:.2f}x wall, {cpu:.2f}x CPU  "
              f"(target >= 0.6x);  flowsim / numba libm = {libm:.2f}x")


if __name__ == "__main__":
    main()
