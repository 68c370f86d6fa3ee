"""Adaptive integrators: flowsim Vegas / VegasPlus vs VegasFlow and Lepage's vegas.

8-dim double Gaussian (a = 0.1, flowsim.targets), 2*10^6 events per iteration,
1 warm-up iteration (training + tracing/compilation, not timed) then 5 timed
iterations that keep adapting, float64, every contender measured in this one run
(the machine may be shared: compare the ratios, not the seconds).  Each contender
runs once, in a Python process of its own; its CPU seconds are shown beside wall
seconds because the load of other processes changes wall time from run to run.

Targets:
  Vegas events/s        >= 5x VegasFlow ``VegasFlow``  and >= 2x ``vegas.Integrator(beta=0)``
  VegasPlus FOM         >= 2x ``vegas`` default (VEGAS+) and >= 5x ``VegasFlowPlus``
  where FOM = 1 / (sigma^2 * wall time of the 5 timed iterations).

Then a precision table: the error per evaluation, not per second.
On four peaked integrands (``benchmarks/_peaked.py``), at 10^5 and 2*10^6
events x 6 iterations, every iteration of a fresh run combined (no warm-up
skipped), each contender run over several seeds: the median over seeds of the
reported error, Lepage's vegas's scaled to flowsim's evaluation count
(``sigma * sqrt(its evaluations / flowsim's)``: vegas spends a few percent
fewer than ``neval``), the rms and largest size of the pulls
``(value - exact) / error`` over seeds (honest errors: rms near 1), and the
ratios flowsim / vegas of the median errors.  Targets: VegasPlus <= vegas
default (VEGAS+) and Vegas <= ``vegas`` beta=0 on every integrand and budget.

    .venv/bin/python benchmarks/vegas.py                  # both tables (~12 min here)
    .venv/bin/python benchmarks/vegas.py --no-vegasflow
    .venv/bin/python benchmarks/vegas.py --precision-only # the precision table (~5 min)
    .venv/bin/python benchmarks/vegas.py --precision-only --flowsim-only  # flowsim's cells
    .venv/bin/python benchmarks/vegas.py --precision-only --classes VegasPlus
    .venv/bin/python benchmarks/vegas.py --long-runs      # 20 iterations

The long-run table: VegasPlus and vegas's VEGAS+ over 20
iterations of 2*10^5 and 2*10^6 events, seeds 3-5, side by side: the
per-iteration errors, the largest after the best over the best (target <=
1.5), and the result's error after 6 and after 20 iterations (target: 20 at
least as precise).
"""
import argparse
import functools
import json
import logging
import math
import os
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
sys.path.insert(0, os.path.dirname(__file__))

import numpy as np  # noqa: E402
from _common import DIM, A, Timed, isolated, numpy_double_gaussian, table  # noqa: E402
from _peaked import PEAKED  # noqa: E402

# This file is named like Lepage's package: keep its folder off the path so
# that ``import vegas`` finds the package.
_HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:] = [p for p in sys.path if os.path.abspath(p or os.curdir) != _HERE]


def run_flowsim(cls, n_events, n_iter, seed):
    import flowsim
    from flowsim.targets import double_gaussian
    sim = getattr(flowsim, cls)(double_gaussian, DIM)
    flow = flowsim.Flow(sim, n_events=n_events, seed=seed, quiet=True)
    flow.run(1)                                    # warm-up: compile + first training
    records = []
    with Timed() as tm:
        # Continue the same run (iterations 2..n_iter+1 of the random stream).
        for _ in range(n_iter):
            records.append(flow._iterate(len(records) + 1))
    res = flowsim.Result(records, tm.wall)
    return tm.wall, tm.cpu, res.value, res.error, n_events * n_iter


def run_vegas(beta, n_events, n_iter):
    import vegas

    @vegas.lbatchintegrand
    def f(x):
        return numpy_double_gaussian(np.asarray(x))

    integ = vegas.Integrator(DIM * [[0.0, 1.0]])
    integ(f, nitn=1, neval=n_events, beta=beta)    # warm-up (training)
    with Timed() as tm:
        r = integ(f, nitn=n_iter, neval=n_events, beta=beta)
    return tm.wall, tm.cpu, r.mean, r.sdev, int(r.sum_neval)


def run_vegasflow(plus, n_events, n_iter):
    import tensorflow as tf
    from vegasflow import VegasFlow, VegasFlowPlus
    logging.getLogger("vegasflow").setLevel(logging.ERROR)
    norm = 0.5 * (A * math.sqrt(math.pi)) ** (-DIM)

    def integrand(xarr, **kwargs):
        a = tf.constant(A, dtype=xarr.dtype)
        e1 = tf.reduce_sum(tf.square(xarr - 0.25), axis=1)
        e2 = tf.reduce_sum(tf.square(xarr - 0.75), axis=1)
        return norm * (tf.exp(-e1 / (a * a)) + tf.exp(-e2 / (a * a)))

    if plus:
        inst = VegasFlowPlus(DIM, n_events, adaptive=True, verbose=False)
    else:
        inst = VegasFlow(DIM, n_events, verbose=False)
    inst.compile(integrand)
    inst.run_integration(1)
    with Timed() as tm:
        value, error = inst.run_integration(n_iter)
    return tm.wall, tm.cpu, float(value), float(error), n_events * n_iter


def precision_flowsim(cls, name, n_events, n_iter, seeds, options=None):
    """``[(value, error, evaluations)]`` of fresh flowsim runs, one per seed."""
    import flowsim
    f, _, dim, _ = PEAKED[name]
    sim = getattr(flowsim, cls)(f, dim, **(options or {}))
    fresh = {k: np.array(v) for k, v in sim.get_state().items()}
    out = []
    for seed in seeds:
        sim.set_state(fresh)            # same bits as a new instance (tests/test_pulls.py)
        r = flowsim.Flow(sim, n_events, seed=seed, quiet=True).run(n_iter)
        out.append((float(r.value), float(r.error), n_events * n_iter))
    return out


def precision_vegas(beta, name, n_events, n_iter, seeds):
    """The same for Lepage's vegas (a fresh Integrator per seed, numpy random numbers)."""
    import vegas
    _, f, dim, _ = PEAKED[name]
    batch = vegas.lbatchintegrand(lambda x: f(np.asarray(x)))
    out = []
    for seed in seeds:
        integ = vegas.Integrator(dim * [[0.0, 1.0]],
                                 ran_array_generator=np.random.default_rng(seed).random)
        r = integ(batch, nitn=n_iter, neval=n_events, beta=beta)
        out.append((float(r.mean), float(r.sdev), int(r.sum_neval)))
    return out


CLASSES = ("Vegas", "VegasPlus")


def precision_table(budgets, n_iter, seeds_per_budget, options=None, reference=True,
                    classes=CLASSES):
    """Print the precision table; return the list of (budget, integrand, pair, ratio).

    ``options``: ``{"Vegas": {...}, "VegasPlus": {...}}`` keywords of the flowsim classes
    (default: their defaults).  ``reference=False`` runs flowsim's cells only (vegas's
    seeded runs give the same numbers every time: compare with a full table).
    ``classes``: the flowsim classes whose columns run (the others print "-")."""
    import time
    options = options or {}
    pairs = [(cls, theirs, functools.partial(precision_flowsim, cls, options=options.get(cls)),
              functools.partial(precision_vegas, beta))
             for cls, theirs, beta in [("Vegas", "vegas beta=0", 0.0),
                                       ("VegasPlus", "vegas VEGAS+", 0.75)]]
    ratios = []
    for n_events, n_seeds in zip(budgets, seeds_per_budget):
        seeds = range(1, n_seeds + 1)
        rows = []
        t0, load0 = time.perf_counter(), os.getloadavg()[0]
        for name, (*_, exact) in PEAKED.items():
            row = [name]
            for ours, theirs, run_ours, run_theirs in pairs:
                if ours not in classes:
                    row += ["-"] * 5
                    continue
                cells = {}
                for who, fn in ((ours, run_ours), (theirs, run_theirs))[:2 if reference else 1]:
                    runs = np.array(fn(name, n_events, n_iter, seeds))
                    value, error, evals = runs.T
                    pulls = (value - exact) / error
                    scaled = error * np.sqrt(evals / (n_events * n_iter))   # equal evaluations
                    cells[who] = np.median(scaled)
                    row += [f"{np.median(scaled):.2e}",
                            f"{np.sqrt(np.mean(pulls ** 2)):.2f}/{np.max(np.abs(pulls)):.1f}"]
                if not reference:
                    row += ["-", "-", "-"]
                    continue
                ratio = cells[ours] / cells[theirs]
                ratios.append((n_events, name, f"{ours} / {theirs}", ratio))
                row.append(f"{ratio:.2f}{'' if ratio <= 1 else ' MISSED'}")
            rows.append(row)
        chosen = "; ".join(f"{k} {v}" for k, v in options.items() if v) or "flowsim defaults"
        print(f"\nPrecision per evaluation ({chosen}): {n_events:,} events x {n_iter} "
              f"iterations, all combined, median error over seeds {seeds.start}-{seeds.stop - 1} "
              f"(vegas's scaled to flowsim's evaluations), pulls rms/max over seeds; "
              f"{time.perf_counter() - t0:.0f} s, load average {load0:.1f} -> "
              f"{os.getloadavg()[0]:.1f}")
        table(rows, ["integrand", "Vegas", "pulls", "vegas b=0", "pulls", "ratio",
                     "VegasPlus", "pulls", "vegas VEGAS+", "pulls", "ratio"])
    return ratios


def long_run_flowsim(n_events, n_iter, seed):
    """Per-iteration errors of one fresh VegasPlus run, and its result after 6 and
    after ``n_iter`` iterations (the same run: the first 6 records, combined)."""
    import flowsim
    from flowsim.targets import double_gaussian
    r = flowsim.Flow(flowsim.VegasPlus(double_gaussian, DIM), n_events, seed=seed,
                     quiet=True).run(n_iter)
    errors = [float(rec["error"]) for rec in r.iterations]
    six = flowsim.Result([dict(rec) for rec in r.iterations[:6]], r.wall_time)
    return errors, (float(six.value), float(six.error)), (float(r.value), float(r.error))


def long_run_vegas(n_events, n_iter, seed):
    """The same for vegas's VEGAS+ (its own inverse-variance average)."""
    import vegas

    @vegas.lbatchintegrand
    def f(x):
        return numpy_double_gaussian(np.asarray(x))

    integ = vegas.Integrator(DIM * [[0.0, 1.0]],
                             ran_array_generator=np.random.default_rng(seed).random)
    r = integ(f, nitn=n_iter, neval=n_events)
    itn = r.itn_results
    six = vegas.RAvg()
    for x in itn[:6]:
        six.add(x)
    return [float(x.sdev) for x in itn], (six.mean, six.sdev), (float(r.mean), float(r.sdev))


def long_run_table(budgets, n_iter, seeds):
    """VegasPlus's per-iteration error over a long run, beside VEGAS+'s.

    Per budget and seed: the per-iteration errors, the largest after the best
    divided by the best (target <= 1.5), and the error of the result after 6 and
    after ``n_iter`` iterations (target: ``n_iter`` at least as precise)."""
    from flowsim.targets import double_gaussian_exact
    exact = double_gaussian_exact(DIM)
    for n_events in budgets:
        print(f"\nLong runs: {DIM}-dim double Gaussian, {n_events:,} events x {n_iter} "
              f"iterations from a fresh map, load average {os.getloadavg()[0]:.1f}")
        rows = []
        for seed in seeds:
            for who, fn in (("flowsim VegasPlus", long_run_flowsim),
                            ("vegas VEGAS+", long_run_vegas)):
                errors, six, full = fn(n_events, n_iter, seed)
                best = int(np.argmin(errors))
                rise = max(errors[best:]) / errors[best]
                rows.append([who, seed, f"{errors[best]:.2e}@{best + 1}",
                             f"{rise:.2f}{'' if rise <= 1.5 else ' MISSED'}",
                             f"{six[1]:.2e}", f"{full[1]:.2e}"
                             + ("" if full[1] <= six[1] else " MISSED"),
                             f"{(full[0] - exact) / full[1]:+.2f}",
                             " ".join(f"{e:.2g}" for e in errors)])
        table(rows, ["contender", "seed", "best@it", "max after/best", "error x6",
                     f"error x{n_iter}", "pull", "per-iteration errors"])


def arguments():
    """The command line: ``(args, seeds per budget, options per class, classes)``."""
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--events", type=int, default=2_000_000)
    p.add_argument("--iters", type=int, default=5)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--no-vegasflow", action="store_true", help="skip the (slow) VegasFlow runs")
    p.add_argument("--precision-only", action="store_true",
                   help="only the precision table (errors at equal evaluations)")
    p.add_argument("--no-precision", action="store_true", help="skip the precision table")
    p.add_argument("--long-runs", action="store_true",
                   help="only the long-run table: VegasPlus and VEGAS+ per-iteration errors "
                        "over 20 iterations at 2*10^5 and 2*10^6 events, seeds 3-5")
    p.add_argument("--flowsim-only", action="store_true",
                   help="precision table without Lepage's vegas (its seeded runs repeat)")
    p.add_argument("--precision-seeds", default="10,4", metavar="N,M",
                   help="seeds per cell at 10^5 and at 2*10^6 events (default 10,4)")
    p.add_argument("--classes", default=",".join(CLASSES), metavar="NAMES",
                   help="flowsim classes of the precision table, comma-separated "
                        "(default Vegas,VegasPlus)")
    for cls in ("Vegas", "VegasPlus"):
        p.add_argument(f"--{cls.lower()}-options", type=json.loads, default=None, metavar="JSON",
                       help=f"keywords of flowsim.{cls} in the precision table, e.g. "
                            f"'{{\"n_bins\": 50, \"alpha\": 1.5}}'")
    args = p.parse_args()
    seeds = [int(s) for s in args.precision_seeds.split(",")]
    options = {"Vegas": args.vegas_options, "VegasPlus": args.vegasplus_options}
    classes = [c for c in args.classes.split(",") if c]
    unknown = sorted(set(classes) - set(CLASSES))
    if unknown:
        p.error(f"--classes: unknown {', '.join(unknown)}; choose among {', '.join(CLASSES)}")
    return args, seeds, options, classes


def main():
    args, seeds, options, classes = arguments()
    if args.long_runs:
        long_run_table([200_000, 2_000_000], 20, [3, 4, 5])
        return
    if args.precision_only:
        precision_table([100_000, 2_000_000], 6, seeds, options, not args.flowsim_only,
                        classes)
        return
    from flowsim.targets import double_gaussian_exact
    exact = double_gaussian_exact(DIM)
    runs = {}
    load0 = os.getloadavg()[0]
    for name, function, first in [
            ("flowsim Vegas", "run_flowsim", "Vegas"),
            ("flowsim VegasPlus", "run_flowsim", "VegasPlus"),
            ("vegas beta=0", "run_vegas", 0.0), ("vegas default (VEGAS+)", "run_vegas", 0.75),
            ("VegasFlow VegasFlow", "run_vegasflow", False),
            ("VegasFlow VegasFlowPlus", "run_vegasflow", True)]:
        if args.no_vegasflow and name.startswith("VegasFlow"):
            continue
        rest = (args.seed,) if function == "run_flowsim" else ()
        try:
            runs[name] = isolated("vegas", function, first, args.events, args.iters, *rest)
        except RuntimeError as exc:
            print(f"{name}: failed ({str(exc).splitlines()[-1]}); pip install '.[bench]'")
    rows = []
    for name, (wall, cpu, value, error, events) in runs.items():
        fom = 1.0 / (error ** 2 * wall)
        rows.append([name, f"{events / wall:,.0f}", f"{events / cpu:,.0f}",
                     f"{wall:.2f}", f"{cpu:.2f}", f"{value:.6f}", f"{error:.2e}",
                     f"{(value - exact) / error:+.2f}", f"{fom:.3g}"])
    print(f"\nVEGAS / VEGAS+, 8-dim double Gaussian a={A} (exact {exact:.6f}), "
          f"{args.events:,} events x {args.iters} iterations after 1 warm-up, float64, "
          f"{os.cpu_count()} cores, load average {load0:.1f} -> {os.getloadavg()[0]:.1f}")
    table(rows, ["contender", "events/s", "events/cpu-s", "time/s", "cpu/s", "value",
                 "sigma", "pull", "FOM=1/(s^2 t)"])

    def speed(name):
        wall, _, _, _, events = runs[name]
        return events / wall

    def fom(name):
        wall, _, _, error, _ = runs[name]
        return 1.0 / (error ** 2 * wall)

    print()
    checks = [("Vegas events/s / VegasFlow VegasFlow", speed, "flowsim Vegas",
               "VegasFlow VegasFlow", 5.0),
              ("Vegas events/s / vegas beta=0", speed, "flowsim Vegas", "vegas beta=0", 2.0),
              ("VegasPlus FOM / vegas default (VEGAS+)", fom, "flowsim VegasPlus",
               "vegas default (VEGAS+)", 2.0),
              ("VegasPlus FOM / VegasFlowPlus", fom, "flowsim VegasPlus",
               "VegasFlow VegasFlowPlus", 5.0)]
    for label, metric, ours, theirs, target in checks:
        if ours in runs and theirs in runs:
            ratio = metric(ours) / metric(theirs)
            mark = "ok" if ratio >= target else "MISSED"
            print(f"{label:<42} = {ratio:8.2f}x  (target >= {target:.0f}x)  {mark}")
    if not args.no_precision:
        precision_table([100_000, 2_000_000], 6, seeds, options, not args.flowsim_only,
                        classes)


if __name__ == "__main__":
    main()
