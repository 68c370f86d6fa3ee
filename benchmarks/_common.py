"""Shared helpers of the benchmarks: timing, the double Gaussian in numpy, tables."""
import math
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
