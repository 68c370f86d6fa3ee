"""Shared helpers of the benchmarks: timing, the double Gaussian in numpy, tables, and
running each contender in a process of its own."""
import json
import math
import os
import subprocess
import sys
import time

import numpy as np

A = 0.1
DIM = 8


def numpy_double_gaussian(x, a=A):
    d = x.shape[1]
    norm = 0.5 * (a * math.sqrt(math.pi)) ** (-d)
    e1 = np.square(x - 0.25).sum(axis=1)
    e2 = np.square(x - 0.75).sum(axis=1)
    return norm * (np.exp(-e1 / (a * a)) + np.exp(-e2 / (a * a)))


class Timed:
    """``with Timed() as t:`` gives ``t.wall`` and ``t.cpu`` (process) seconds."""

    def __enter__(self):
        self.wall, self.cpu = time.perf_counter(), time.process_time()
        return self

    def __exit__(self, *exc):
        self.wall = time.perf_counter() - self.wall
        self.cpu = time.process_time() - self.cpu


def best_of(fn, repeat=2):
    """Smallest wall time of ``repeat`` calls (the machine is shared and noisy)."""
    times, out = [], None
    for _ in range(repeat):
        t0 = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - t0)
    return min(times), out


def table(rows, columns):
    widths = [max(len(c), *(len(str(r[i])) for r in rows)) for i, c in enumerate(columns)]
    line = "  ".join(c.rjust(w) for c, w in zip(columns, widths))
    print(line)
    print("-" * len(line))
    for r in rows:
        print("  ".join(str(v).rjust(w) for v, w in zip(r, widths)))


_CHILD = """
import importlib.util, json, sys
sys.path.insert(0, {here!r})
spec = importlib.util.spec_from_file_location("_contender", {path!r})
module = sys.modules[spec.name] = importlib.util.module_from_spec(spec)
spec.loader.exec_module(module)
args, kwargs = json.loads(sys.argv[1]), json.loads(sys.argv[2])
print("\\n" + json.dumps(getattr(module, {function!r})(*args, **kwargs)))
"""


def isolated(module, function, *args, env=None, timeout=3600, **kwargs):
    """``module.function(*args, **kwargs)`` run in a new Python process; its result.

    Each contender gets a process of its own, so that no library's settings (flowsim's
    TensorFlow flags, a thread pool, numba's threading layer) reach another's timing.
    ``module`` names a file of ``benchmarks/`` (loaded by its path as module
    ``_contender``: ``vegas`` is the benchmark, not Lepage's package); arguments and
    result travel as JSON (the result is the last line the child prints).  ``env`` adds
    environment variables.
    """
    here = os.path.dirname(os.path.abspath(__file__))
    code = _CHILD.format(here=here, path=os.path.join(here, module + ".py"),
                         function=function)
    out = subprocess.run([sys.executable, "-c", code, json.dumps(args), json.dumps(kwargs)],
                         capture_output=True, text=True, timeout=timeout,
                         env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3", **(env or {})})
    if out.returncode:
        raise RuntimeError(f"{module}.{function} failed in its process:\n{out.stderr[-2000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])
