"""Integrals in a Python loop: N ``flowsim.integrate`` calls against ``vegas`` doing
the same, and against one ``flowsim.scan`` of the N parameter values.

Usage: python benchmarks/loop.py [--calls 200] [--rounds 3]

Each call integrates ``exp(-|x - a|^2 / 0.1)`` over [0, 1]^4 with a parameter ``a``
that changes every call (20,000 events x 8 iterations, seed = the call's index), as
a user's fit or toy study calls it: flowsim with ``params={"a": a}`` (plain Monte
Carlo, its default) and vegas's ``Integrator`` with ``adapt=False`` on a batch
integrand (plain Monte Carlo there too).  The scan does the N values in one call.
Every contender runs in a process of its own (``_common.isolated``); the first call
of flowsim and of vegas (imports, tracing, compiling) is timed apart.  Rounds
alternate the contenders; the ratios of the medians are printed.
"""
import argparse
import statistics
import sys

from _common import isolated, table

N_EVENTS, N_ITER, DIM = 20_000, 8, 4


def _values(calls):
    return [0.3 + 0.4 * i / max(calls - 1, 1) for i in range(calls)]


def flowsim_loop(calls):
    """Seconds of the first call and per later call of ``calls`` integrate calls."""
    import time

    import flowsim
    from flowsim.core.lazy_tf import tf

    def f(x, a):
        return tf().exp(-tf().reduce_sum((x - a) ** 2, axis=1) / 0.1)

    times, values = [], []
    for i, a in enumerate(_values(calls)):
        t0 = time.perf_counter()
        r = flowsim.integrate(f, DIM, N_EVENTS, N_ITER, seed=i, params={"a": a}, quiet=True)
        times.append(time.perf_counter() - t0)
        values.append(float(r.value))
    return {"first": times[0], "per_call": statistics.median(times[1:]), "values": values}


def vegas_loop(calls):
    """The same with Lepage's vegas (plain Monte Carlo: adapt=False, no strata)."""
    import time

    import numpy as np
    vegas = _lepage_vegas()

    times, values = [], []
    for i, a in enumerate(_values(calls)):
        t0 = time.perf_counter()

        @vegas.lbatchintegrand
        def f(x, a=a):
            return np.exp(-np.sum((x - a) ** 2, axis=1) / 0.1)

        np.random.seed(i)
        integ = vegas.Integrator([[0, 1]] * DIM, adapt=False, nstrat=[1] * DIM)
        r = integ(f, nitn=N_ITER, neval=N_EVENTS)
        times.append(time.perf_counter() - t0)
        values.append(float(r.mean))
    return {"first": times[0], "per_call": statistics.median(times[1:]), "values": values}


def _lepage_vegas():
    """Lepage's vegas, not benchmarks/vegas.py (which the child's sys.path finds first)."""
    import importlib
    import os
    here = os.path.dirname(os.path.abspath(__file__))
    saved = list(sys.path)
    sys.path[:] = [p for p in sys.path if os.path.abspath(p or ".") != here]
    sys.modules.pop("vegas", None)
    try:
        return importlib.import_module("vegas")
    finally:
        sys.path[:] = saved


def flowsim_scan(calls):
    """One scan of the ``calls`` values: seconds per value (the first scan included)."""
    import time

    import pandas as pd

    import flowsim
    from flowsim.core.lazy_tf import tf

    def f(x, a):
        return tf().exp(-tf().reduce_sum((x - a) ** 2, axis=1) / 0.1)

    t0 = time.perf_counter()
    out = flowsim.scan(f, DIM, pd.DataFrame({"a": _values(calls)}), n_events=N_EVENTS,
                       n_iter=N_ITER, seed=1, quiet=True)
    seconds = time.perf_counter() - t0
    return {"first": seconds, "per_call": seconds / calls, "values": out["value"].tolist()}


CONTENDERS = {"flowsim integrate": "flowsim_loop", "vegas": "vegas_loop",
              "flowsim scan": "flowsim_scan"}


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--calls", type=int, default=200)
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args(argv)
    runs = {name: [] for name in CONTENDERS}
    for _ in range(args.rounds):
        for name, function in CONTENDERS.items():
            runs[name].append(isolated("loop", function, args.calls))
    per = {n: statistics.median(r["per_call"] for r in rs) for n, rs in runs.items()}
    first = {n: statistics.median(r["first"] for r in rs) for n, rs in runs.items()}
    diff = max(abs(x - y) for x, y in zip(runs["flowsim integrate"][0]["values"],
                                          runs["vegas"][0]["values"]))
    rows = [(n, f"{1e3 * first[n]:.0f}", f"{1e3 * per[n]:.1f}",
             f"{per[n] / per['vegas']:.2f}x") for n in CONTENDERS]
    table(rows, ["contender", "first call ms", "per call ms", "per call / vegas"])
    print(f"{args.calls} calls, {N_EVENTS} events x {N_ITER} iterations, {DIM}-d, "
          f"{args.rounds} rounds; largest |flowsim - vegas| of the values {diff:.2e}")
    return per


if __name__ == "__main__":
    sys.exit(main() and 0)
