"""A fresh process: flowsim Vegas and VegasPlus with and without the compiled-kernel
cache, against Lepage's vegas doing the same.

Each contender runs in its own new Python process on the 8-dim double
Gaussian, timed from after the imports (TensorFlow's import excluded) to the
result; wall and CPU seconds.  Two cases:

* ``vegasplus``: 1 warm-up + 4 iterations of 280,000 events (1.4*10^6
  evaluations), flowsim VegasPlus against vegas's VEGAS+ (target:
  flowsim with a warm cache <= 1.0x vegas's wall time);
* ``vegas``: 2 iterations of 2*10^6 events (``flowsim run gaussian8
  --algorithm vegas --events 2000000 --iters 2``), flowsim Vegas against
  vegas's ``beta=0`` (target: flowsim with a warm cache <= 2x).

flowsim runs with a warm cache (filled by one untimed process first) and with
``FLOWSIM_CACHE_DIR=off``; Lepage's vegas (numpy integrand) is the anchor.
Rounds interleave the contenders (the machine is shared: compare medians of
the same run).

Python's compiled modules (``.pyc``) are written to and read from a temporary
directory (``PYTHONPYCACHEPREFIX``), as an installed package has them, even
where ``PYTHONDONTWRITEBYTECODE`` is set: flowsim imports its submodules on
first use, inside the timed part, and compiling them from source took 0.04 s.
``--before DIR`` also times the flowsim of another source tree (e.g. ``git
archive`` of an older commit) with a warm cache of its own, for before/after
figures from the same rounds.

    .venv/bin/python benchmarks/cold.py [--rounds 3] [--cases vegas,vegasplus] [--before DIR]
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)

FLOWSIM = """
import json, sys, time
import flowsim
from flowsim.core.lazy_tf import tf
from flowsim.targets import double_gaussian
tf()
w, c = time.perf_counter(), time.process_time()
r = flowsim.integrate(double_gaussian, 8, {n}, {iters}, seed={seed}, algorithm="{algorithm}",
                      skip={skip})
print(json.dumps([time.perf_counter() - w, time.process_time() - c, r.value]))
"""
VEGAS = """
import json, math, time
import numpy as np
import vegas
w, c = time.perf_counter(), time.process_time()
norm = 0.5 * (0.1 * math.sqrt(math.pi)) ** -8


@vegas.lbatchintegrand
def f(x):
    x = np.asarray(x)
    e1, e2 = ((x - 0.25) ** 2).sum(axis=1), ((x - 0.75) ** 2).sum(axis=1)
    return norm * (np.exp(-e1 / 0.01) + np.exp(-e2 / 0.01))


integ = vegas.Integrator(8 * [[0.0, 1.0]])
if {skip}:
    integ(f, nitn={skip}, neval={n}, beta={beta})
r = integ(f, nitn={iters} - {skip}, neval={n}, beta={beta})
print(json.dumps([time.perf_counter() - w, time.process_time() - c, r.mean]))
"""
#: name -> (flowsim algorithm, vegas beta, events per iteration, iterations, of them
#: warm-up, seed, the anchor's name)
CASES = {
    "vegasplus": ("vegasplus", 0.75, 280_000, 5, 1, 1, "vegas (VEGAS+)"),
    "vegas": ("vegas", 0.0, 2_000_000, 2, 0, 5, "vegas beta=0"),
}


def codes(case):
    algorithm, beta, n, iters, skip, seed, _ = CASES[case]
    return (FLOWSIM.format(n=n, iters=iters, seed=seed, algorithm=algorithm, skip=skip),
            VEGAS.format(n=n, iters=iters, skip=skip, beta=beta))


def fresh(code, cache, pyc, root=ROOT):
    env = dict(os.environ, FLOWSIM_CACHE_DIR=cache, TF_XLA_FLAGS="",
               PYTHONPATH=root + os.pathsep + os.environ.get("PYTHONPATH", ""),
               PYTHONPYCACHEPREFIX=pyc, TF_CPP_MIN_LOG_LEVEL="3")
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         env=env, cwd=root, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def run_case(case, rounds, tmp, pyc, before=None):
    """``{contender: [[wall, cpu, value], ...]}`` of ``rounds`` interleaved rounds."""
    ours, theirs = codes(case)
    anchor = CASES[case][-1]
    cache = os.path.join(tmp, "cache")
    fresh(ours, cache, pyc)                     # fills the caches, untimed
    runs = {"flowsim, warm cache": [], "flowsim, FLOWSIM_CACHE_DIR=off": [], anchor: []}
    if before:
        before = os.path.abspath(before)
        fresh(ours, os.path.join(tmp, "cache-before"), pyc + "-before", before)
        runs["before: flowsim, warm cache"] = []
    for _ in range(rounds):
        runs["flowsim, warm cache"].append(fresh(ours, cache, pyc))
        runs["flowsim, FLOWSIM_CACHE_DIR=off"].append(fresh(ours, "off", pyc))
        if before:
            runs["before: flowsim, warm cache"].append(
                fresh(ours, os.path.join(tmp, "cache-before"), pyc + "-before", before))
        try:
            runs[anchor].append(fresh(theirs, "off", pyc))
        except subprocess.CalledProcessError as exc:
            runs.pop(anchor, None)
            print(f"vegas not run: {exc.stderr.strip().splitlines()[-1]}")
            break
    return runs


def report(case, runs, rounds, load):
    algorithm, beta, n, iters, skip, _, anchor_name = CASES[case]
    anchor = np.median([r[0] for r in runs.get(anchor_name, [[np.nan]])])
    warm = f"{skip} warm-up + {iters - skip}" if skip else f"{iters}"
    print(f"\n{case}: fresh process, 8-dim double Gaussian, {warm} x {n:,} evaluations, "
          f"median of {rounds} interleaved rounds, {os.cpu_count()} cores, "
          f"load average {load:.1f} at the start, {os.getloadavg()[0]:.1f} at the end")
    print(f"{'contender':>32}  {'wall/s':>7}  {'cpu/s':>6}  {'wall / ' + anchor_name:>20}")
    for name, rs in runs.items():
        wall, cpu = np.median([r[0] for r in rs]), np.median([r[1] for r in rs])
        print(f"{name:>32}  {wall:7.2f}  {cpu:6.2f}  {wall / anchor:20.2f}")


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--cases", default=",".join(CASES), metavar="NAMES",
                   help=f"comma-separated, among {', '.join(CASES)} (default all)")
    p.add_argument("--before", metavar="DIR",
                   help="also time the flowsim of this source tree (warm cache)")
    args = p.parse_args()
    cases = [c for c in args.cases.split(",") if c]
    unknown = sorted(set(cases) - set(CASES))
    if unknown:
        p.error(f"--cases: unknown {', '.join(unknown)}; choose among {', '.join(CASES)}")
    for case in cases:
        load = os.getloadavg()[0]
        with tempfile.TemporaryDirectory(prefix="flowsim-cold-") as tmp:
            runs = run_case(case, args.rounds, tmp, os.path.join(tmp, "pyc"), args.before)
        report(case, runs, args.rounds, load)


if __name__ == "__main__":
    main()
