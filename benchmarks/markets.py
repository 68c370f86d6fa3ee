"""flowsim.markets against pams, side by side on pams's sample configs: statistics
(z-scores), speed and memory.

For each of pams's nine samples (:data:`flowsim.markets.PAMS_SAMPLES`) and flowsim's
``two_groups``, pams's SequentialRunner runs ``--pams-seeds`` markets and flowsim
``--markets`` markets (a "market" is one run of the config, all its markets: with
several markets the statistics are ``"MARKET:STATISTIC"``, ``"A|B:return_correlation"``
and ``"INDEX:index_deviation"``, defined in flowsim/markets/stats.py).  Every
statistic is printed with both standard errors and the z-score of the difference.  A
sample flowsim refuses is listed with flowsim's refusal message.  Then, over all
z-scores: how many |z| > 3 there are against how many chance expects (and the 99 %
binomial upper bound), and whether z is standard normal (Kolmogorov-Smirnov and
Anderson-Darling, quantiles and a text histogram).  Then per sample the aggregate
market-steps/s of each side and their ratio, and the same per CPU-second, medians of
``--rounds`` interleaved rounds (pams's SequentialRunner in one process, as a user runs
it; flowsim compiled, the compilation reported apart, twice: the default call
``fm.ensemble(config, 1024, seed=s)`` with no keyword but the samples' ``classes=``
mapping, which picks backend, workers and block itself (``Result.meta["setup"]``,
printed), and beside it the tuned call, by default in one single-threaded joblib
worker process per core, each running whole blocks: ``--backend flow`` runs one
process, whose TensorFlow thread pool spends about twice the CPU on these small
kernels for 1.0-1.4x less wall time than one thread (docs/performance.rst)), and the memory per
market: the bytes a market of a block holds on the device
(``MarketEnsemble.bytes_per_market``), and the sample's peak resident memory, its
growth over the resident memory after importing TensorFlow (compilation included) and that
growth per market of a block.  Each sample runs in a fresh process, so that its peak
is its own.  Exit status 0 when every sample runs, every statistic of pams's is
computed, the z-scores are consistent with N(0, 1) and flowsim's default call is
>= 100x pams on every sample (>= 50x per CPU-second).

pams needs numpy < 2 on Python 3.11: if it is not importable here, set PAMS_PYTHON to a
Python that has it (``python3.11 -m venv /tmp/pams-venv && /tmp/pams-venv/bin/pip
install "pams>=0.3,<0.4"``); the pams side then runs there
(benchmarks/make_pams_reference.py).  ``--stored`` takes pams's per-seed statistics
from ``tests/data`` where a table is stored (pams's speed is still measured).

    PAMS_PYTHON=/tmp/pams-venv/bin/python python benchmarks/markets.py \\
        [--pams-seeds 200] [--markets 512] [--stored] [--quick] [--configs a,b]
"""
import argparse
import csv
import importlib.util
import json
import math
import os
import resource
import subprocess
import sys
import tempfile
import time

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
sys.path.insert(0, os.path.join(ROOT, "benchmarks"))
from make_pams_reference import CLASSES  # noqa: E402

import flowsim.markets as fm  # noqa: E402
from flowsim.markets import stats  # noqa: E402
from flowsim.markets.ensembles import cache_block_markets  # noqa: E402

SAMPLES = fm.PAMS_SAMPLES + ("two_groups",)
#: ``--quick``: sizes of a smoke run (minutes, not an hour).
QUICK = {"pams_seeds": 20, "markets": 64, "block": 64, "rounds": 2, "speed_seeds": 2,
         "speed_markets": 128}


# -- pams side --------------------------------------------------------------------------------
def pams_rows(name, seeds, first_seed=0):
    """``(per-seed statistics, column names, steps/s)`` of pams, here or in PAMS_PYTHON."""
    if importlib.util.find_spec("pams") is not None:
        from make_pams_reference import reference
        return reference(name, seeds, first_seed)
    d = _pams_json(name, seeds, first_seed, "--json")
    return np.array(d["rows"], np.float64), list(d["columns"]), d["steps_per_second"]


def pams_speed(name, seeds, first_seed):
    """``(steps/s, steps per CPU-second)`` of pams's SequentialRunner as a user runs it
    (no hook), here or in PAMS_PYTHON (:func:`make_pams_reference.speed`)."""
    if importlib.util.find_spec("pams") is not None:
        from make_pams_reference import speed
        return speed(name, seeds, first_seed)
    d = _pams_json(name, seeds, first_seed, "--speed")
    return d["steps_per_second"], d["steps_per_cpu_second"]


def _pams_json(name, seeds, first_seed, mode):
    """make_pams_reference.py's JSON for ``name`` (``mode``: ``--json`` or ``--speed``),
    run by PAMS_PYTHON."""
    python = os.environ.get("PAMS_PYTHON")
    if not python:
        raise SystemExit("pams is not installed here: pip install 'pams>=0.3,<0.4' (needs "
                         "numpy < 2) or set PAMS_PYTHON to a Python that has it")
    out = subprocess.run([python, "-W", "ignore",
                          os.path.join(ROOT, "benchmarks", "make_pams_reference.py"), mode,
                          "--seeds", str(seeds), "--first-seed", str(first_seed),
                          "--configs", name],
                         capture_output=True, text=True, check=True,
                         env=dict(os.environ, PYTHONPATH=ROOT))
    return json.loads(out.stdout.strip().splitlines()[-1])[name]


def stored_rows(name):
    """``(per-seed statistics, column names)`` of ``tests/data``, or None."""
    path = os.path.join(ROOT, "tests", "data", f"pams_markets_{name}.csv")
    if not os.path.exists(path):
        return None
    with open(path) as fh:
        columns = next(csv.reader(fh))[1:]
    return np.loadtxt(path, delimiter=",", skiprows=1, ndmin=2)[:, 1:], columns


# -- flowsim side -----------------------------------------------------------------------------
def backend_kw(args):
    """``fm.ensemble`` keywords of the flowsim side: ``--backend joblib`` (default) runs
    one single-threaded worker process per core, each taking whole blocks; ``flow`` one
    process (TensorFlow's thread pool on every core)."""
    if args.backend == "joblib":
        return {"backend": "joblib", "n_jobs": args.workers}
    return {"backend": args.backend}


def flowsim_rate(cfg, n_markets, block, seed, kw):
    """``(market-steps/s, market-steps per CPU-second, Result)`` of one compiled
    ensemble run (``block`` None and ``kw`` empty: the default call, which picks its
    own); the CPU is this process's and its worker processes'."""
    start, start_cpu = time.perf_counter(), tree_cpu_seconds()
    if block is not None:
        kw = dict(kw, block_markets=block)
    result = fm.ensemble(cfg, n_markets, seed=seed, classes=CLASSES, **kw)
    seconds, cpu = time.perf_counter() - start, tree_cpu_seconds() - start_cpu
    steps = n_markets * result.meta["n_steps"]
    return steps / seconds, steps / cpu, result


def _descendants(pid):
    """Pids of the processes below ``pid`` (Linux ``/proc``)."""
    children = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as fh:
                    ppid = int(fh.read().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            children.setdefault(ppid, []).append(int(entry))
    out, todo = [], [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            out.append(child)
            todo.append(child)
    return out


def _proc_cpu(pid):
    try:
        with open(f"/proc/{pid}/stat") as fh:
            fields = fh.read().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")   # utime + stime


def tree_cpu_seconds():
    """CPU seconds of this process and its live descendants (the joblib workers)."""
    return time.process_time() + sum(_proc_cpu(p) for p in _descendants(os.getpid()))


def workers_peak_rss():
    """The largest peak resident memory of this process's descendants (bytes; 0: none)."""
    peak = 0
    for pid in _descendants(os.getpid()):
        try:
            with open(f"/proc/{pid}/status") as fh:
                for line in fh:
                    if line.startswith("VmHWM:"):
                        peak = max(peak, int(line.split()[1]) * 1024)
        except OSError:
            continue
    return peak


def rss_bytes():
    """Resident memory of this process now."""
    with open("/proc/self/statm") as fh:
        return int(fh.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def z_table(name, columns, rows, result, n_markets):
    """Print every statistic of both sides and their z-score; return the z's."""
    pm, pe, pn = stats.summarize(rows)
    fs = dict(zip(result.names, zip(np.atleast_1d(result.value),
                                    np.atleast_1d(result.error))))
    print(f"\n== {name}: pams {len(rows)} seeds, flowsim {n_markets} markets")
    print(f"{'statistic':<40} {'pams':>11} {'s.e.':>9} {'flowsim':>11} {'s.e.':>9} {'z':>6}")
    zs, missing = [], []
    for n, a, ea in zip(columns, pm, pe):
        if n not in fs:
            missing.append(n)
            continue
        b, eb = fs[n]
        z = float(stats.z_scores(b, eb, a, ea))
        zs.append(z)
        print(f"{n:<40} {a:>11.5g} {ea:>9.2g} {b:>11.5g} {eb:>9.2g} {z:>+6.2f}")
    finite = [abs(z) for z in zs if math.isfinite(z)]
    print(f"max |z| = {max(finite) if finite else math.nan:.2f} over {len(finite)} statistics")
    if missing:
        print(f"not computed by flowsim ({len(missing)}): {', '.join(missing)}")
    extra = sorted(set(fs) - set(columns))
    if extra:
        print(f"not in pams's table ({len(extra)}): {', '.join(extra)}")
    return zs, missing


def one_sample(name, index, args):
    """Everything of one sample, in this (fresh) process; a dict for the summary."""
    cfg = fm.config_path(name)
    try:
        fm.parse(cfg, classes=CLASSES)
    except ValueError as exc:
        return {"name": name, "refused": str(exc)}
    out = {"name": name}
    block = args.block or cache_block_markets(fm.from_pams(cfg, classes=CLASSES))
    out["block"] = block            # auto (0): the block whose books stay in the CPU's caches
    import tensorflow  # noqa: F401  (the resident memory before the first run includes it)
    base = rss_bytes()
    kw = backend_kw(args)
    start = time.perf_counter()
    # a block for every worker: each compiles (or loads the cached kernel) before timing
    warm = fm.ensemble(cfg, block * kw.get("n_jobs", 1), seed=1, block_markets=block,
                       classes=CLASSES, **kw)
    out["compile_s"] = time.perf_counter() - start
    out["bytes_per_market"] = warm.meta["bytes_per_market"]
    # the default call, warmed up as it runs (its workers compile or load the kernel)
    default = fm.ensemble(cfg, args.speed_markets, seed=1, classes=CLASSES)
    out["default_setup"] = default.meta["setup"]
    if not args.no_z:
        stored = stored_rows(name) if args.stored else None
        if stored is None:
            rows, columns, _ = pams_rows(name, args.pams_seeds, first_seed=1000 * index)
        else:
            rows, columns = stored
        _, _, result = flowsim_rate(cfg, args.markets, block, 2026 + index, kw)
        out["z"], out["missing"] = z_table(name, columns, rows, result, args.markets)
    rounds = []
    for r in range(args.rounds):
        p, p_cpu = pams_speed(name, args.speed_seeds, first_seed=10_000 + 100 * r)
        f, f_cpu, _ = flowsim_rate(cfg, args.speed_markets, block, 100 + r, kw)
        d, d_cpu, _ = flowsim_rate(cfg, args.speed_markets, None, 100 + r, {})
        rounds.append((p, f, f / p, p_cpu, f_cpu, f_cpu / p_cpu, d, d / p, d_cpu / p_cpu))
    medians = np.median(np.array(rounds), axis=0).tolist() if rounds else [math.nan] * 9
    (out["pams"], out["flowsim"], out["ratio"], out["pams_cpu"], out["flowsim_cpu"],
     out["ratio_cpu"], out["default"], out["ratio_default"], out["ratio_cpu_default"]) = medians
    out["workers_peak_rss"] = workers_peak_rss()
    out["peak_rss"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    out["rss_growth"] = out["peak_rss"] - base
    return out


# -- summary ----------------------------------------------------------------------------------
def z_summary(zs):
    """How many |z| > 3 chance allows, and z against N(0, 1); True if consistent."""
    from scipy import stats as sps
    z = np.asarray(zs, np.float64)
    z = z[np.isfinite(z)]
    n = len(z)
    if n < 2:
        print("\n== z-scores: fewer than 2")
        return True
    p3 = 2 * sps.norm.sf(3.0)
    bound = int(sps.binom.ppf(0.99, n, p3))
    over = int((np.abs(z) > 3).sum())
    ks = sps.kstest(z, "norm")
    # Anderson-Darling against a normal of fitted mean and sd: a test of the shape
    # (the p-value interpolated in scipy's tables, so clipped to 0.01 .. 0.15)
    ad = sps.anderson(z, "norm", method="interpolate")
    print(f"\n== z-scores: {n} statistics")
    print(f"|z| > 3: {over}; chance expects {n * p3:.2f} (binomial, p = {p3:.2e} each); "
          f"99 % of honest runs have at most {bound}")
    print(f"mean {z.mean():+.3f} (s.e. {1 / math.sqrt(n):.3f}), sd {z.std(ddof=1):.3f}; "
          f"Kolmogorov-Smirnov against N(0, 1): D = {ks.statistic:.3f}, p = {ks.pvalue:.3f}; "
          f"Anderson-Darling (normal shape): A2 = {ad.statistic:.3f}, p = {ad.pvalue:.2f}")
    qs = [0.01, 0.05, 0.25, 0.5, 0.75, 0.95, 0.99]
    print("quantile   " + " ".join(f"{q:>7g}" for q in qs))
    print("z          " + " ".join(f"{v:>+7.2f}" for v in np.quantile(z, qs)))
    print("N(0,1)     " + " ".join(f"{v:>+7.2f}" for v in sps.norm.ppf(qs)))
    edges = np.array([-np.inf, -3, -2, -1, 0, 1, 2, 3, np.inf])
    counts = np.histogram(z, edges)[0]
    expect = n * np.diff(sps.norm.cdf(edges))
    scale = 50 / max(counts.max(), expect.max())
    print(f"{'bin':<10} {'observed':>8} {'N(0,1)':>7}")
    for a, b, c, e in zip(edges[:-1], edges[1:], counts, expect):
        bar = "#" * int(round(c * scale))
        mark = int(round(e * scale))
        bar = (bar + " " * max(0, mark - len(bar)))[:max(mark, len(bar))]
        if mark:
            bar = bar[:mark - 1] + "|" + bar[mark:]
        print(f"{f'{a:g}..{b:g}':<10} {c:>8d} {e:>7.1f}  {bar}")
    print("(# the observed count, | where the N(0, 1) count would end the bar)")
    return over <= bound and ks.pvalue > 0.01


def summary(results, args):
    """Print refusals, z summary and the speed and memory table; the exit status."""
    refused = [r for r in results if "refused" in r]
    ran = [r for r in results if "refused" not in r]
    for r in refused:
        print(f"\n== {r['name']}: not run by flowsim.markets: {r['refused']}")
    zs = [z for r in ran for z in r.get("z", [])]
    missing = sum(len(r.get("missing", [])) for r in ran)
    ok = z_summary(zs) if zs else True
    if missing:
        print(f"statistics of pams not computed by flowsim: {missing}")
    fast = speed_table(ran, args)
    print(f"\nz consistent with N(0, 1): {ok}; the default call >= 100x pams (>= 50x "
          f"per CPU-second) on every sample run: "
          f"{fast}; samples refused: {len(refused)} of {len(results)}")
    return 0 if ok and fast is True and not refused and not missing else 1


def speed_table(ran, args):
    """Print speed and memory per sample; True if flowsim's default call is >= 100x
    pams on each, and >= 50x per CPU-second."""
    side = (f"{args.workers} worker processes of one thread (joblib)" if args.backend == "joblib"
            else f"backend {args.backend!r}, one process")
    print(f"\n== speed: medians of {args.rounds} interleaved rounds (flowsim: {side}, "
          f"{args.speed_markets} markets in blocks of {args.block or 'the block column'}, "
          f"compiled; pams: SequentialRunner, one process, {args.speed_seeds} seeds); "
          f"memory per market of a block")
    print(f"{'config':<16} {'pams steps/s':>13} {'flowsim':>13} {'ratio':>7} "
          f"{'per CPU-s':>9} {'block':>5} {'compile s':>9} {'device KiB':>10} "
          f"{'peak MiB':>9} {'growth MiB':>10} {'KiB/market':>10} {'worker MiB':>10}")
    for r in ran:
        print(f"{r['name']:<16} {r['pams']:>13,.0f} {r['flowsim']:>13,.0f} "
              f"{r['ratio']:>6.0f}x {r['ratio_cpu']:>8.0f}x {r['block']:>5d} "
              f"{r['compile_s']:>9.1f} {r['bytes_per_market'] / 1024:>10.1f} "
              f"{r['peak_rss'] / 2 ** 20:>9.0f} {r['rss_growth'] / 2 ** 20:>10.0f} "
              f"{r['rss_growth'] / r['block'] / 1024:>10.1f} "
              f"{r['workers_peak_rss'] / 2 ** 20:>10.0f}")
    print("(ratio: aggregate market-steps/s against pams's steps/s, the target >= 100x; per "
          "CPU-s: the same per CPU-second of each side, flowsim's driver and workers "
          "together; device: MarketEnsemble.bytes_per_market; peak: the sample's driver "
          "process's peak resident memory; growth: the peak over the resident memory after "
          "importing TensorFlow, compilation included; KiB/market: growth / the markets of "
          "a block, an upper bound on what a market adds; worker: the largest peak "
          "resident memory of a joblib worker)")
    default_table(ran, args)
    fast = all(r["ratio_default"] >= 100 and r["ratio_cpu_default"] >= 50 for r in ran)
    return fast if args.rounds else "speed not measured"


def default_table(ran, args):
    """Print the default call's speed per sample beside the tuned call's."""
    print(f"\n== the default call, fm.ensemble(config, {args.speed_markets}, seed=s) "
          f"(classes= only): medians of the same {args.rounds} interleaved rounds")
    print(f"{'config':<16} {'flowsim':>13} {'ratio':>7} {'per CPU-s':>9} {'tuned':>7} "
          f"{'tuned/CPU':>9}  picked (Result.meta['setup'])")
    for r in ran:
        print(f"{r['name']:<16} {r['default']:>13,.0f} {r['ratio_default']:>6.0f}x "
              f"{r['ratio_cpu_default']:>8.0f}x {r['ratio']:>6.0f}x {r['ratio_cpu']:>8.0f}x  "
              f"{r['default_setup']}")
    print("(ratio: market-steps/s against pams's steps/s, the target >= 100x; per CPU-s: "
          "the same per CPU-second, the target >= 50x; tuned: the table above)")


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--pams-seeds", type=int, default=200)
    ap.add_argument("--markets", type=int, default=512)
    ap.add_argument("--block", type=int, default=0,
                    help="markets per block (0: per sample, the block whose books stay "
                         "in the CPU's caches, flowsim.markets.ensembles.cache_block_markets)")
    ap.add_argument("--stored", action="store_true",
                    help="pams statistics from tests/data (pams's speed still measured)")
    ap.add_argument("--no-z", action="store_true", help="speed only")
    ap.add_argument("--rounds", type=int, default=3,
                    help="interleaved speed rounds (0: speed not measured)")
    ap.add_argument("--speed-seeds", type=int, default=10, help="pams seeds per round")
    ap.add_argument("--speed-markets", type=int, default=1024,
                    help="flowsim markets per round")
    ap.add_argument("--quick", action="store_true",
                    help="small sizes: " + ", ".join(f"{k}={v}" for k, v in QUICK.items()))
    ap.add_argument("--configs", default=",".join(SAMPLES))
    ap.add_argument("--backend", default="joblib",
                    help="flowsim's backend: joblib (default: --workers single-threaded "
                         "processes) or flow (one process, TensorFlow's threads)")
    ap.add_argument("--workers", type=int, default=len(os.sched_getaffinity(0)),
                    help="joblib worker processes (default: the cores this process may use)")
    ap.add_argument("--one", help=argparse.SUPPRESS)          # a sample, in a child process
    ap.add_argument("--index", type=int, default=0, help=argparse.SUPPRESS)
    ap.add_argument("--out", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.quick:                    # smaller defaults; sizes given explicitly still win
        ap.set_defaults(**QUICK)
        args = ap.parse_args(argv)
    if args.one:
        with open(args.out, "w") as fh:
            json.dump(one_sample(args.one, args.index, args), fh)
        return 0
    results = []
    child = ["--pams-seeds", str(args.pams_seeds), "--markets", str(args.markets),
             "--block", str(args.block), "--rounds", str(args.rounds),
             "--speed-seeds", str(args.speed_seeds), "--speed-markets", str(args.speed_markets),
             "--backend", args.backend, "--workers", str(args.workers),
             *(["--stored"] if args.stored else []), *(["--no-z"] if args.no_z else [])]
    names = args.configs.split(",")
    with tempfile.TemporaryDirectory() as tmp:
        for name in names:
            out = os.path.join(tmp, f"{name}.json")
            index = SAMPLES.index(name) if name in SAMPLES else len(SAMPLES)
            subprocess.run([sys.executable, os.path.abspath(__file__), *child, "--one", name,
                            "--index", str(index), "--out", out], check=True)
            with open(out) as fh:
                results.append(json.load(fh))
    return summary(results, args)


if __name__ == "__main__":
    sys.exit(main())
