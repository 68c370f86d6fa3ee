"""Run pams (SequentialRunner) over many seeds and store per-seed market statistics.

The tables in ``tests/data/pams_markets_<config>.csv`` (one row per seed, the columns
of :data:`flowsim.markets.stats.NAMES`) let the test suite compare flowsim's
ensembles with pams without installing pams.  pams needs numpy < 2 on Python 3.11,
so it runs in its own virtual environment::

    python3.11 -m venv /tmp/venv-pams && /tmp/venv-pams/bin/pip install "pams>=0.3,<0.4"
    PYTHONPATH=. /tmp/venv-pams/bin/python benchmarks/make_pams_reference.py --seeds 400

The stored tables: ``ci2002`` and ``two_groups`` 400 seeds from 0; ``fat_finger``,
``price_limit``, ``trading_halt`` 200 seeds from 0; ``user_class`` (``ci2002`` with a
user subclass of FCNAgent) 200 seeds from 1000, so that its table is not ci2002's::

    ... make_pams_reference.py --seeds 200 --configs fat_finger,price_limit,trading_halt
    ... make_pams_reference.py --seeds 200 --first-seed 1000 --configs user_class

(``flowsim.markets.stats`` and ``flowsim.markets.config`` load neither TensorFlow nor
anything but numpy.)  ``--json`` prints the statistics instead of writing them, which is
how ``benchmarks/markets.py`` runs pams from the flowsim environment.
"""
import argparse
import csv
import json
import os
import random
import sys
import time
import warnings

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
from flowsim.markets import config_path, stats  # noqa: E402
from flowsim.markets.config import load, parse  # noqa: E402

#: The configs flowsim.markets runs (pams's samples that need several markets do not).
RUNNABLE = ("ci2002", "two_groups", "fat_finger", "price_limit", "trading_halt", "user_class")
CONFIGS = {name: config_path(name) for name in RUNNABLE}
#: flowsim's ``classes=`` mapping of the samples' user classes.
CLASSES = {"UserDefinedFCNAgent": "FCNAgent"}


def user_classes():
    """The user classes of pams's samples, as their main.py define them."""
    import pams

    class UserDefinedFCNAgent(pams.agents.FCNAgent):     # samples/user_class/main.py
        pass

    return [UserDefinedFCNAgent]


def run_pams(settings, seed):
    """Series of one pams run: prices, fundamental, volumes, depth per side; seconds."""
    import pams
    warnings.filterwarnings("ignore", "order price does not accord", UserWarning)
    runner = pams.runners.SequentialRunner(settings=settings, prng=random.Random(seed))
    for cls in user_classes():
        runner.class_register(cls=cls)
    runner._setup()                      # what runner.main() does, with a hook in between
    sim = runner.simulator
    bids, asks = [], []
    original = sim._trigger_event_after_step_for_market

    def after_step(market):
        bids.append(len(market.buy_order_book.priority_queue))
        asks.append(len(market.sell_order_book.priority_queue))
        original(market)

    sim._trigger_event_after_step_for_market = after_step
    start = time.perf_counter()
    runner._run()
    seconds = time.perf_counter() - start
    market = sim.markets[0]
    return (market.get_market_prices(), market.get_fundamental_prices(),
            market.get_executed_volumes(), bids, asks, seconds)


def reference(name, seeds, first_seed=0):
    """``(per-seed statistics [seeds, len(NAMES)], steps per second)`` of config ``name``."""
    settings = load(CONFIGS[name])
    cfg = parse(settings, classes=CLASSES)
    rows, seconds = [], 0.0
    for seed in range(first_seed, first_seed + seeds):
        p, f, v, b, a, s = run_pams(settings, seed)
        seconds += s
        T = cfg.n_steps
        if len(p) != T + 1 or len(v) < T:
            raise RuntimeError(f"pams gave {len(p)} prices and {len(v)} volumes for {T} steps")
        rows.append(stats.market_statistics(np.array([p]), np.array([f]), np.array([v[:T]]),
                                            np.array([b]), np.array([a]),
                                            cfg.first_execution)[0])
    return np.array(rows), seeds * cfg.n_steps / seconds


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", type=int, default=400)
    ap.add_argument("--first-seed", type=int, default=0)
    ap.add_argument("--configs", default=",".join(CONFIGS))
    ap.add_argument("--json", action="store_true", help="print, do not write tests/data")
    args = ap.parse_args(argv)
    out = {}
    for name in args.configs.split(","):
        rows, rate = reference(name, args.seeds, args.first_seed)
        out[name] = {"rows": rows.tolist(), "steps_per_second": rate}
        if args.json:
            continue
        path = os.path.join(ROOT, "tests", "data", f"pams_markets_{name}.csv")
        with open(path, "w", newline="") as fh:
            w = csv.writer(fh)
            w.writerow(["seed", *stats.NAMES])
            for seed, row in enumerate(rows, start=args.first_seed):
                w.writerow([seed, *(repr(float(x)) for x in row)])
        mean, err, _ = stats.summarize(rows)
        print(f"{name}: {args.seeds} seeds, pams {rate:,.0f} steps/s -> {path}")
        for n, m, e in zip(stats.NAMES, mean, err):
            print(f"  {n:<18} {m:>12.5g} +/- {e:.3g}")
    if args.json:
        print(json.dumps(out))


if __name__ == "__main__":
    main()
