"""A fresh process: flowsim VegasPlus with and without the compiled-kernel cache, and vegas.

Each contender runs in its own new Python process: 8-dim double Gaussian,
1 warm-up + 4 iterations of 280,000 events (1.4*10^6 evaluations), timed from
after the imports (TensorFlow's import excluded, as issue 15 asks) to the
result; wall and CPU seconds.  flowsim runs with a warm cache (filled by one
untimed process first) and with ``FLOWSIM_CACHE_DIR=off``; Lepage's vegas
(VEGAS+, numpy integrand) is the anchor.  Rounds interleave the contenders (the
machine is shared: compare medians of the same run).  Issue 15's target:
flowsim with a warm cache <= 1.0x vegas's wall time.

Python's compiled modules (``.pyc``) are written to and read from a temporary
directory (``PYTHONPYCACHEPREFIX``), as an installed package has them, even
where ``PYTHONDONTWRITEBYTECODE`` is set: flowsim imports its submodules on
first use, inside the timed part, and compiling them from source took 0.04 s.
``--before DIR`` also times the flowsim of another source tree (e.g. ``git
archive`` of an older commit) with a warm cache of its own, for before/after
figures from the same rounds.

    .venv/bin/python benchmarks/cold.py [--rounds 3] [--before DIR]
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
r = flowsim.integrate(double_gaussian, 8, 280_000, 5, seed=1, algorithm="vegasplus", skip=1)
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
integ(f, nitn=1, neval=280_000)
r = integ(f, nitn=4, neval=280_000)
print(json.dumps([time.perf_counter() - w, time.process_time() - c, r.mean]))
"""


def fresh(code, cache, pyc, root=ROOT):
    env = dict(os.environ, FLOWSIM_CACHE_DIR=cache, TF_XLA_FLAGS="",
               PYTHONPATH=root + os.pathsep + os.environ.get("PYTHONPATH", ""),
               PYTHONPYCACHEPREFIX=pyc, TF_CPP_MIN_LOG_LEVEL="3")
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         env=env, cwd=root, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--before", metavar="DIR",
                   help="also time the flowsim of this source tree (warm cache)")
    args = p.parse_args()
    load = os.getloadavg()
    with tempfile.TemporaryDirectory(prefix="flowsim-cold-") as tmp:
        cache, pyc = os.path.join(tmp, "cache"), os.path.join(tmp, "pyc")
        fresh(FLOWSIM, cache, pyc)                  # fills the caches, untimed
        runs = {"flowsim, warm cache": [], "flowsim, FLOWSIM_CACHE_DIR=off": [],
                "vegas (VEGAS+)": []}
        if args.before:
            before = os.path.abspath(args.before)
            fresh(FLOWSIM, os.path.join(tmp, "cache-before"), pyc + "-before", before)
            runs["before: flowsim, warm cache"] = []
        for _ in range(args.rounds):
            runs["flowsim, warm cache"].append(fresh(FLOWSIM, cache, pyc))
            runs["flowsim, FLOWSIM_CACHE_DIR=off"].append(fresh(FLOWSIM, "off", pyc))
            if args.before:
                runs["before: flowsim, warm cache"].append(
                    fresh(FLOWSIM, os.path.join(tmp, "cache-before"), pyc + "-before", before))
            try:
                runs["vegas (VEGAS+)"].append(fresh(VEGAS, "off", pyc))
            except subprocess.CalledProcessError as exc:
                runs.pop("vegas (VEGAS+)", None)
                print(f"vegas not run: {exc.stderr.strip().splitlines()[-1]}")
                break
    anchor = np.median([r[0] for r in runs.get("vegas (VEGAS+)", [[np.nan]])])
    print(f"fresh process, 8-dim double Gaussian, 1 + 4 x 280,000 evaluations, "
          f"median of {args.rounds} interleaved rounds, {os.cpu_count()} cores, "
          f"load average {load[0]:.1f} at the start, {os.getloadavg()[0]:.1f} at the end")
    print(f"{'contender':>32}  {'wall/s':>7}  {'cpu/s':>6}  {'wall / vegas':>12}")
    for name, rs in runs.items():
        wall, cpu = np.median([r[0] for r in rs]), np.median([r[1] for r in rs])
        print(f"{name:>32}  {wall:7.2f}  {cpu:6.2f}  {wall / anchor:12.2f}")


if __name__ == "__main__":
    main()
