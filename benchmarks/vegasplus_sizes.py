"""VEGAS+ precision against events per iteration: flowsim's VegasPlus beside Lepage's vegas.

8-dim double Gaussian (a = 0.1, flowsim.targets), float64, defaults of both (flowsim's
``VegasPlus()``, vegas's ``Integrator`` with ``beta=0.75``), 10 iterations of ``n``
events per iteration for ``n`` from 10^6 to 10^8, fresh runs.  For each size the table
shows the strata per axis each chose, and, as the median over seeds, the error of
the last iteration and of the last 5 iterations combined (``sqrt(1 / sum 1/sigma_i^2)``
as in both codes' weighted average).  vegas's errors are scaled to flowsim's evaluation
count (``sigma * sqrt(its evaluations / n)``: vegas spends a few percent fewer than
``neval``).  Target: flowsim's last-iteration error falls with ``n`` at every step
(within noise) and is at most vegas's.

    .venv/bin/python benchmarks/vegasplus_sizes.py                    # both, every size
    .venv/bin/python benchmarks/vegasplus_sizes.py --sizes 1e6 2e6 --seeds 3
    .venv/bin/python benchmarks/vegasplus_sizes.py --vegas-up-to 2e7  # vegas's time grows
    .venv/bin/python benchmarks/vegasplus_sizes.py --flowsim-only

Each contender runs in a Python process of its own (``_common.isolated``), so one's
memory and threads do not weigh on the other.  A 10^8 iteration of flowsim runs in
blocks (its memory stays that of a block plus ``O(hypercubes)``); vegas's batches
(``min_neval_batch``) bound its own.
"""
import argparse
import math
import os
import sys
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
sys.path.insert(0, os.path.dirname(__file__))

import numpy as np  # noqa: E402
from _common import DIM, isolated, numpy_double_gaussian, table  # noqa: E402

# This folder holds benchmarks/vegas.py: keep it off the path so that ``import vegas``
# finds Lepage's package.
_HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:] = [p for p in sys.path if os.path.abspath(p or os.curdir) != _HERE]

SIZES = (1e6, 2e6, 4e6, 1e7, 2e7, 5e7, 1e8)
N_ITER = 10
LAST = 5


def _summary(errors, evaluations, n_events):
    errors = np.asarray(errors, dtype=np.float64)
    scale = math.sqrt(evaluations / n_events)
    last = errors[-1] * scale
    combined = scale / math.sqrt(np.sum(1.0 / errors[-LAST:] ** 2))
    return last, combined


def run_flowsim(n_events, seed, n_iter=N_ITER):
    """``(nstrat, last error, last-5 error, seconds)`` of one fresh VegasPlus run."""
    import flowsim
    from flowsim.targets import double_gaussian
    sim = flowsim.VegasPlus(double_gaussian, DIM)
    t0 = time.perf_counter()
    r = flowsim.Flow(sim, n_events=n_events, seed=seed, quiet=True).run(n_iter)
    seconds = time.perf_counter() - t0
    errors = [float(it["error"]) for it in r.iterations]
    return (sim.nstrat.tolist(), *_summary(errors, n_events, n_events), seconds)


def run_vegas(n_events, seed, n_iter=N_ITER):
    """The same for vegas (numpy random numbers seeded by ``seed``)."""
    import vegas

    @vegas.lbatchintegrand
    def f(x):
        return numpy_double_gaussian(np.asarray(x))

    integ = vegas.Integrator(DIM * [[0.0, 1.0]],
                             ran_array_generator=np.random.default_rng(seed).random)
    t0 = time.perf_counter()
    r = integ(f, nitn=n_iter, neval=n_events)
    seconds = time.perf_counter() - t0
    errors = [float(it.sdev) for it in r.itn_results]
    evaluations = float(r.sum_neval) / n_iter
    return (np.asarray(integ.nstrat).tolist(), *_summary(errors, evaluations, n_events),
            seconds)


def _strata(nstrat):
    counts = {s: nstrat.count(s) for s in sorted(set(nstrat), reverse=True)}
    return "x".join(f"{s}^{c}" if c > 1 else f"{s}" for s, c in counts.items())


def _cell(runs):
    nstrat, last, combined, seconds = zip(*runs)
    return [_strata(nstrat[0]), f"{np.median(last):.2e}", f"{np.median(combined):.2e}",
            f"{np.median(seconds):.0f}"]


def seeds_for(n_events, seeds):
    """Seeds 1..``seeds`` below 10^7 events, seed 1 from there on."""
    return seeds if n_events < 1e7 else 1


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--sizes", nargs="+", type=float, default=SIZES)
    p.add_argument("--seeds", type=int, default=3, help="seeds at the small sizes")
    p.add_argument("--vegas-up-to", type=float, default=1e8,
                   help="largest size vegas runs at (its time grows with the size)")
    p.add_argument("--flowsim-only", action="store_true")
    args = p.parse_args(argv)
    load0 = os.getloadavg()[0]
    rows = []
    previous = None
    for n in args.sizes:
        n_events = int(n)
        seeds = range(1, seeds_for(n, args.seeds) + 1)
        ours = [isolated("vegasplus_sizes", "run_flowsim", n_events, s) for s in seeds]
        row = [f"{n_events:.0e}", len(seeds), *_cell(ours)]
        last = float(np.median([o[1] for o in ours]))
        trend = "" if previous is None else ("falls" if last < previous else "RISES")
        previous = last
        if args.flowsim_only or n > args.vegas_up_to:
            row += ["-"] * 5
        else:
            theirs = [isolated("vegasplus_sizes", "run_vegas", n_events, s) for s in seeds]
            ratio = last / float(np.median([t[1] for t in theirs]))
            row += [*_cell(theirs), f"{ratio:.2f}{'' if ratio <= 1 else ' MISSED'}"]
        rows.append(row + [trend])
        print(f"  {n_events:.0e} done", flush=True)
    print(f"\nVEGAS+ on the {DIM}-dim double Gaussian, {N_ITER} iterations of n events, "
          f"median over seeds; error of the last iteration and of the last {LAST} "
          f"combined; seconds of the whole run; load average {load0:.1f} -> "
          f"{os.getloadavg()[0]:.1f}")
    table(rows, ["n", "seeds", "flowsim nstrat", "last", f"last {LAST}", "s",
                 "vegas nstrat", "last", f"last {LAST}", "s", "ratio last", "flowsim"])


if __name__ == "__main__":
    main()
