"""Adaptive integrators: flowsim Vegas / VegasPlus vs VegasFlow and Lepage's vegas.

8-dim double Gaussian (a = 0.1, flowsim.targets), 2*10^6 events per iteration,
1 warm-up iteration (training + tracing/compilation, not timed) then 5 timed
iterations that keep adapting, float64, every contender measured in this one run
(the machine is shared: compare the ratios, not the seconds).  Each contender
runs once; CPU seconds of this process are shown beside wall seconds because
the load of other processes changes wall time from run to run.

Targets (issue 3):
  Vegas events/s        >= 5x VegasFlow ``VegasFlow``  and >= 2x ``vegas.Integrator(beta=0)``
  VegasPlus FOM         >= 2x ``vegas`` default (VEGAS+) and >= 5x ``VegasFlowPlus``
  where FOM = 1 / (sigma^2 * wall time of the 5 timed iterations).

    .venv/bin/python benchmarks/vegas.py            # all contenders (~6 min here)
    .venv/bin/python benchmarks/vegas.py --no-vegasflow
"""
import argparse
import logging
import math
import os
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
sys.path.insert(0, os.path.dirname(__file__))

import numpy as np  # noqa: E402
from _common import DIM, A, Timed, numpy_double_gaussian, table  # noqa: E402

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
    return tm, res.value, res.error, n_events * n_iter


def run_vegas(beta, n_events, n_iter):
    import vegas

    @vegas.lbatchintegrand
    def f(x):
        return numpy_double_gaussian(np.asarray(x))

    integ = vegas.Integrator(DIM * [[0.0, 1.0]])
    integ(f, nitn=1, neval=n_events, beta=beta)    # warm-up (training)
    with Timed() as tm:
        r = integ(f, nitn=n_iter, neval=n_events, beta=beta)
    return tm, r.mean, r.sdev, int(r.sum_neval)


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
    return tm, float(value), float(error), n_events * n_iter


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--events", type=int, default=2_000_000)
    p.add_argument("--iters", type=int, default=5)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--no-vegasflow", action="store_true", help="skip the (slow) VegasFlow runs")
    args = p.parse_args()
    from flowsim.targets import double_gaussian_exact
    exact = double_gaussian_exact(DIM)
    runs = {}
    load0 = os.getloadavg()[0]
    runs["flowsim Vegas"] = run_flowsim("Vegas", args.events, args.iters, args.seed)
    runs["flowsim VegasPlus"] = run_flowsim("VegasPlus", args.events, args.iters, args.seed)
    for name, fn in [("vegas beta=0", lambda: run_vegas(0.0, args.events, args.iters)),
                     ("vegas default (VEGAS+)", lambda: run_vegas(0.75, args.events, args.iters)),
                     ("VegasFlow VegasFlow", lambda: run_vegasflow(False, args.events, args.iters)),
                     ("VegasFlow VegasFlowPlus",
                      lambda: run_vegasflow(True, args.events, args.iters))]:
        if args.no_vegasflow and name.startswith("VegasFlow"):
            continue
        try:
            runs[name] = fn()
        except ImportError as exc:
            print(f"{name}: not installed ({exc}); pip install '.[bench]'")
    rows = []
    for name, (tm, value, error, events) in runs.items():
        fom = 1.0 / (error ** 2 * tm.wall)
        rows.append([name, f"{events / tm.wall:,.0f}", f"{events / tm.cpu:,.0f}",
                     f"{tm.wall:.2f}", f"{tm.cpu:.2f}", f"{value:.6f}", f"{error:.2e}",
                     f"{(value - exact) / error:+.2f}", f"{fom:.3g}"])
    print(f"\nVEGAS / VEGAS+, 8-dim double Gaussian a={A} (exact {exact:.6f}), "
          f"{args.events:,} events x {args.iters} iterations after 1 warm-up, float64, "
          f"{os.cpu_count()} cores, load average {load0:.1f} -> {os.getloadavg()[0]:.1f}")
    table(rows, ["contender", "events/s", "events/cpu-s", "time/s", "cpu/s", "value",
                 "sigma", "pull", "FOM=1/(s^2 t)"])

    def speed(name):
        tm, _, _, events = runs[name]
        return events / tm.wall

    def fom(name):
        tm, _, error, _ = runs[name]
        return 1.0 / (error ** 2 * tm.wall)

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


if __name__ == "__main__":
    main()
