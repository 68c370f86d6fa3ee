"""flowsim.markets against pams, side by side on pams's sample configs: statistics
(z-scores) and speed.

For every bundled pams sample (:data:`flowsim.markets.PAMS_SAMPLES`, plus flowsim's
``two_groups``), pams's SequentialRunner runs ``--pams-seeds`` markets and flowsim
``--markets`` markets; every statistic of :data:`flowsim.markets.stats.NAMES` is printed
with its standard error and the z-score of the difference.  A sample flowsim refuses
(several markets: ``market_share``, ``market_share_mm``, ``shock_transfer``, ``test``)
is listed with the refusal.  Then, over all z-scores: how many |z| > 3 chance allows,
how many there are, and the distribution of z against the standard normal
(Kolmogorov-Smirnov and a table of counts per bin).  Then per sample the aggregate
market-steps/s of flowsim (compiled, one process, compilation excluded: it is
reported apart) against pams's SequentialRunner in the same run, and the memory per
market.

pams needs numpy < 2 on Python 3.11: if it is not importable here, set PAMS_PYTHON to a
Python that has it (``python3.11 -m venv /tmp/pams-venv && /tmp/pams-venv/bin/pip
install "pams>=0.3,<0.4"``); the pams side then runs there
(benchmarks/make_pams_reference.py).  ``--stored`` takes pams's per-seed statistics
from ``tests/data`` instead (pams's speed is still measured, on ``--speed-seeds``
seeds).

    PAMS_PYTHON=/tmp/pams-venv/bin/python python benchmarks/markets.py \\
        [--pams-seeds 200] [--markets 512] [--stored]
"""
import argparse
import importlib.util
import json
import math
import os
import subprocess
import sys
import time

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
sys.path.insert(0, os.path.join(ROOT, "benchmarks"))
from make_pams_reference import CLASSES  # noqa: E402

import flowsim.markets as fm  # noqa: E402
from flowsim.markets import stats  # noqa: E402

SAMPLES = fm.PAMS_SAMPLES + ("two_groups",)


def pams_rows(name, seeds, first_seed=0):
    """Per-seed statistics and steps/s of pams, here or in PAMS_PYTHON."""
    if importlib.util.find_spec("pams") is not None:
        from make_pams_reference import reference
        return reference(name, seeds, first_seed)
    python = os.environ.get("PAMS_PYTHON")
    if not python:
        raise SystemExit("pams is not installed here: pip install 'pams>=0.3,<0.4' (needs "
                         "numpy < 2) or set PAMS_PYTHON to a Python that has it")
    out = subprocess.run([python, os.path.join(ROOT, "benchmarks", "make_pams_reference.py"),
                          "--seeds", str(seeds), "--first-seed", str(first_seed),
                          "--configs", name, "--json"],
                         capture_output=True, text=True, check=True,
                         env=dict(os.environ, PYTHONPATH=ROOT))
    d = json.loads(out.stdout.strip().splitlines()[-1])[name]
    return np.array(d["rows"]), d["steps_per_second"]


def stored_rows(name):
    path = os.path.join(ROOT, "tests", "data", f"pams_markets_{name}.csv")
    return np.loadtxt(path, delimiter=",", skiprows=1)[:, 1:]


def flowsim_rate(cfg, n_markets, block, seed):
    """``(market-steps/s, Result)`` of one compiled ensemble run."""
    start = time.perf_counter()
    result = fm.ensemble(cfg, n_markets, seed=seed, block_markets=block, classes=CLASSES)
    seconds = time.perf_counter() - start
    return n_markets * result.meta["n_steps"] / seconds, result


def speed(name, args):
    """Interleaved rounds of pams (``--speed-seeds`` seeds) and flowsim
    (``--speed-markets`` markets, compiled): medians of pams's steps/s, flowsim's
    market-steps/s and of their ratio per round (the machine's load drifts)."""
    cfg = fm.config_path(name)
    flowsim_rate(cfg, args.block, args.block, seed=1)       # compiled (cached if done)
    rounds = []
    for r in range(args.rounds):
        _, p = pams_rows(name, args.speed_seeds, first_seed=10_000 + 100 * r)
        f, result = flowsim_rate(cfg, args.speed_markets, args.block, seed=100 + r)
        rounds.append((p, f, f / p))
    p, f, ratio = np.median(np.array(rounds), axis=0)
    return p, f, ratio, result.meta["bytes_per_market"]


def compare(name, args, index):
    """z-scores of one sample, and the seconds of its first (compiling) call.
    Each sample gets its own seeds (pams's from ``1000 * index``, flowsim's ``2026 +
    index``): ``user_class`` is ``ci2002`` with another class name, and the same seeds
    would repeat its z-scores."""
    if args.stored:
        rows = stored_rows(name)
    else:
        rows, _ = pams_rows(name, args.pams_seeds, first_seed=1000 * index)
    pm, pe, _ = stats.summarize(rows)
    cfg = fm.config_path(name)
    start = time.perf_counter()
    fm.ensemble(cfg, args.block, seed=1, block_markets=args.block, classes=CLASSES)
    compile_s = time.perf_counter() - start
    _, result = flowsim_rate(cfg, args.markets, args.block, 2026 + index)
    z = stats.z_scores(result.value, result.error, pm, pe)
    print(f"\n== {name}: pams {len(rows)} seeds, flowsim {args.markets} markets")
    print(f"{'statistic':<16} {'pams':>11} {'s.e.':>9} {'flowsim':>11} {'s.e.':>9} {'z':>6}")
    for n, a, ea, b, eb, zz in zip(stats.NAMES, pm, pe, result.value, result.error, z):
        print(f"{n:<16} {a:>11.5g} {ea:>9.2g} {b:>11.5g} {eb:>9.2g} {zz:>+6.2f}")
    print(f"max |z| = {np.nanmax(np.abs(z)):.2f}")
    return z, compile_s


def z_summary(zs):
    """How many |z| > 3 chance allows, and z against N(0, 1)."""
    from scipy import stats as sps
    z = np.concatenate(zs)
    z = z[np.isfinite(z)]
    n = len(z)
    p3 = 2 * sps.norm.sf(3.0)
    # 95 % of honest runs have at most this many |z| > 3 (binomial)
    allowed = int(sps.binom.ppf(0.95, n, p3))
    over = int((np.abs(z) > 3).sum())
    ks = sps.kstest(z, "norm")
    print(f"\n== z-scores: {n} statistics over {len(zs)} configs")
    print(f"|z| > 3: {over}; chance expects {n * p3:.2f}, and 95 % of honest runs have "
          f"at most {allowed}")
    print(f"mean {z.mean():+.3f} (s.e. {1 / math.sqrt(n):.3f}), sd {z.std(ddof=1):.3f}; "
          f"Kolmogorov-Smirnov against N(0, 1): D = {ks.statistic:.3f}, p = {ks.pvalue:.2f}")
    edges = np.array([-np.inf, -2, -1, 0, 1, 2, np.inf])
    counts = np.histogram(z, edges)[0]
    expect = n * np.diff(sps.norm.cdf(edges))
    print("bin        " + " ".join(f"{f'{a:g}..{b:g}':>9}" for a, b in zip(edges[:-1],
                                                                            edges[1:])))
    print("observed   " + " ".join(f"{c:>9d}" for c in counts))
    print("N(0,1)     " + " ".join(f"{e:>9.1f}" for e in expect))
    return over <= allowed and ks.pvalue > 0.01


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--pams-seeds", type=int, default=200)
    ap.add_argument("--markets", type=int, default=512)
    ap.add_argument("--block", type=int, default=256)
    ap.add_argument("--stored", action="store_true",
                    help="pams statistics from tests/data (pams's speed still measured)")
    ap.add_argument("--no-z", action="store_true", help="speed only")
    ap.add_argument("--rounds", type=int, default=3, help="interleaved speed rounds")
    ap.add_argument("--speed-seeds", type=int, default=10, help="pams seeds per round")
    ap.add_argument("--speed-markets", type=int, default=1024,
                    help="flowsim markets per round")
    ap.add_argument("--configs", default=",".join(SAMPLES))
    args = ap.parse_args(argv)
    zs, speeds, refused = [], [], {}
    for index, name in enumerate(args.configs.split(",")):
        try:
            fm.parse(fm.config_path(name), classes=CLASSES)
        except ValueError as exc:
            refused[name] = str(exc)
            continue
        compile_s = math.nan
        if not args.no_z:
            z, compile_s = compare(name, args, index)
            zs.append(z)
        speeds.append((name, *speed(name, args), compile_s))
    for name, why in refused.items():
        print(f"\n== {name}: not run by flowsim.markets: {why}")
    ok = z_summary(zs) if zs else True
    print(f"\n== speed: medians of {args.rounds} interleaved rounds (flowsim: one process, "
          f"{args.speed_markets} markets in blocks of {args.block}, compiled; pams: "
          f"SequentialRunner, {args.speed_seeds} seeds)")
    print(f"{'config':<14} {'pams steps/s':>13} {'flowsim':>13} {'ratio':>7} "
          f"{'compile s':>9} {'KiB/market':>10}")
    worst = math.inf
    for name, p, f, ratio, b, c in speeds:
        worst = min(worst, ratio)
        print(f"{name:<14} {p:>13,.0f} {f:>13,.0f} {ratio:>6.0f}x {c:>9.1f} {b / 1024:>10.1f}")
    print(f"\nz consistent with N(0, 1): {ok}; >= 100x pams on every sample run: "
          f"{worst >= 100}; samples refused: {len(refused)}")
    return 0 if ok and worst >= 100 and not refused else 1


if __name__ == "__main__":
    sys.exit(main())
