"""flowsim.markets against pams, side by side: statistics (z-scores) and speed.

For each configuration (pams's CI2002; two FCN groups with chart weights > 0 and a
fundamental random walk with volatility), pams's SequentialRunner runs ``--pams-seeds``
markets and flowsim ``--markets`` markets; every statistic of
:data:`flowsim.markets.stats.NAMES` is printed with its standard error and the z-score
of the difference (all |z| < 3 expected).  Then the aggregate market-steps/s of flowsim
(compiled, one process) against pams's SequentialRunner measured in the same run, and
the memory per market.

pams needs numpy < 2 on Python 3.11: if it is not importable here, set PAMS_PYTHON to a
Python that has it (``python3.11 -m venv /tmp/venv-pams && /tmp/venv-pams/bin/pip
install "pams>=0.3,<0.4"``); the pams side then runs there (benchmarks/make_pams_reference.py).

    python benchmarks/markets.py [--pams-seeds 200] [--markets 1024]
"""
import argparse
import importlib.util
import json
import os
import subprocess
import sys
import time

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
import flowsim.markets as fm  # noqa: E402
from flowsim.markets import stats  # noqa: E402


def pams_rows(name, seeds):
    """Per-seed statistics and steps/s of pams, here or in PAMS_PYTHON."""
    if importlib.util.find_spec("pams") is not None:
        sys.path.insert(0, os.path.join(ROOT, "benchmarks"))
        from make_pams_reference import reference
        return reference(name, seeds)
    python = os.environ.get("PAMS_PYTHON")
    if not python:
        raise SystemExit("pams is not installed here: pip install 'pams>=0.3,<0.4' (needs "
                         "numpy < 2) or set PAMS_PYTHON to a Python that has it")
    out = subprocess.run([python, os.path.join(ROOT, "benchmarks", "make_pams_reference.py"),
                          "--seeds", str(seeds), "--configs", name, "--json"],
                         capture_output=True, text=True, check=True,
                         env=dict(os.environ, PYTHONPATH=ROOT))
    d = json.loads(out.stdout.strip().splitlines()[-1])[name]
    return np.array(d["rows"]), d["steps_per_second"]


def compare(name, seeds, n_markets, block):
    rows, pams_rate = pams_rows(name, seeds)
    pm, pe, _ = stats.summarize(rows)
    result = fm.ensemble(fm.config_path(name), n_markets, seed=2026, block_markets=block)
    z = stats.z_scores(result.value, result.error, pm, pe)
    print(f"\n== {name}: pams {seeds} seeds, flowsim {n_markets} markets")
    print(f"{'statistic':<16} {'pams':>11} {'s.e.':>9} {'flowsim':>11} {'s.e.':>9} {'z':>6}")
    for n, a, ea, b, eb, zz in zip(stats.NAMES, pm, pe, result.value, result.error, z):
        print(f"{n:<16} {a:>11.5g} {ea:>9.2g} {b:>11.5g} {eb:>9.2g} {zz:>+6.2f}")
    worst = float(np.max(np.abs(z)))
    print(f"max |z| = {worst:.2f} ({'ok' if worst < 3 else 'ABOVE 3'})")
    return worst, pams_rate


def warm_up(block):
    """Seconds of the first CI2002 call: tracing and XLA compilation of the loop."""
    start = time.perf_counter()
    fm.ensemble(fm.config_path("ci2002"), block, seed=1, block_markets=block)
    return time.perf_counter() - start


def speed(n_markets, block, pams_rate, compile_s):
    cfg = fm.config_path("ci2002")
    steps = fm.parse(cfg).n_steps
    start = time.perf_counter()
    result = fm.ensemble(cfg, n_markets, seed=2, block_markets=block)
    seconds = time.perf_counter() - start
    rate = n_markets * steps / seconds
    print(f"\n== speed, CI2002 ({steps} steps, 100 agents)")
    print(f"pams SequentialRunner: {pams_rate:,.0f} steps/s (one market at a time)")
    print(f"flowsim Flow, {n_markets} markets in blocks of {block}: {seconds:.2f} s = "
          f"{rate:,.0f} market-steps/s -> {rate / pams_rate:.0f}x pams "
          f"(compiled; the first call, {block} markets, took {compile_s:.1f} s)")
    print(f"memory per market while it runs: {result.meta['bytes_per_market'] / 1024:.1f} KiB "
          f"(book {fm.from_pams(cfg).structure.capacity} slots, price history, agents)")
    return rate / pams_rate


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--pams-seeds", type=int, default=200)
    ap.add_argument("--markets", type=int, default=1024)
    ap.add_argument("--block", type=int, default=512)
    ap.add_argument("--speed-markets", type=int, default=4096)
    args = ap.parse_args(argv)
    compile_s = warm_up(args.block)
    worst, rates = [], []
    for name in ("ci2002", "two_groups"):
        w, rate = compare(name, args.pams_seeds, args.markets, args.block)
        worst.append(w)
        if name == "ci2002":
            rates.append(rate)
    ratio = speed(args.speed_markets, args.block, rates[0], compile_s)
    ok = max(worst) < 3 and ratio >= 100
    print(f"\nall |z| < 3: {max(worst) < 3}; >= 100x pams: {ratio >= 100}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
