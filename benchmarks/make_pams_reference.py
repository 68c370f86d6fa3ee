"""Run pams (SequentialRunner) over many seeds and store per-seed market statistics.

The tables in ``tests/data/pams_markets_<config>.csv`` (one row per seed, the columns
of :data:`flowsim.markets.stats.NAMES`) let the test suite compare flowsim's
ensembles with pams without installing pams.  pams needs numpy < 2 on Python 3.11,
so it runs in its own virtual environment::

    python3.11 -m venv /tmp/venv-pams && /tmp/venv-pams/bin/pip install "pams>=0.3,<0.4"
    PYTHONPATH=. /tmp/venv-pams/bin/python benchmarks/make_pams_reference.py --seeds 400

The stored tables: ``ci2002`` and ``two_groups`` 400 seeds from 0; ``fat_finger``,
``price_limit``, ``trading_halt`` 200 seeds from 0; ``user_class`` (``ci2002`` with a
user subclass of FCNAgent) 200 seeds from 1000, so that its table is not ci2002's;
``contrarian`` (two_groups with its Chartists a contrarian user subclass) 200 seeds from
2000; the
samples with several markets (:data:`SEVERAL`) 400 seeds from 0::

    ... make_pams_reference.py --seeds 200 --configs fat_finger,price_limit,trading_halt
    ... make_pams_reference.py --seeds 200 --first-seed 1000 --configs user_class
    ... make_pams_reference.py --seeds 200 --first-seed 2000 --configs contrarian
    ... make_pams_reference.py --seeds 400 --configs shock_transfer  (and test, ...)

With several markets a table's columns are ``"MARKET:STATISTIC"`` for every statistic
of :data:`flowsim.markets.stats.NAMES` and every market (the names the config gives,
in its order), then ``"A|B:return_correlation"`` for each pair of markets and
``"INDEX:index_deviation"`` for each IndexMarket (:func:`several_market_statistics`
defines them).  Every table has a companion ``pams_markets_<config>_summary.csv``:
each statistic's mean over seeds, standard error and count of seeds that have it.

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
from flowsim.markets.config import load  # noqa: E402
from flowsim.markets.stats import several_market_names, several_market_statistics, window  # noqa: E402
from flowsim.testing.cases_markets import contrarian_config  # noqa: E402

#: The configs of one market (flowsim.markets ran these first).
RUNNABLE = ("ci2002", "two_groups", "fat_finger", "price_limit", "trading_halt", "user_class")
#: pams's samples with several markets.
SEVERAL = ("shock_transfer", "test", "market_share", "market_share_mm")
CONFIGS = {name: config_path(name) for name in RUNNABLE + SEVERAL}
#: pams's two_groups with its Chartists a user's contrarian subclass of FCNAgent.
CONFIGS["contrarian"] = contrarian_config()
#: flowsim's ``classes=`` mapping of the samples' user classes.
CLASSES = {"UserDefinedFCNAgent": "FCNAgent", "ExtendedMarket": ("Market", ["tradeVolume"])}


def user_classes():
    """The user classes of pams's samples, as their main.py define them."""
    import pams

    class UserDefinedFCNAgent(pams.agents.FCNAgent):     # samples/user_class/main.py
        pass

    class ContrarianFCNAgent(pams.agents.FCNAgent):      # a user's contrarian FCN
        def setup(self, settings, accessible_markets_ids, *args, **kwargs):
            super().setup(settings, accessible_markets_ids, *args, **kwargs)
            self.is_chart_following = False

    class ExtendedMarket(pams.Market):                   # samples/market_share/main.py
        def setup(self, settings, *args, **kwargs):
            super().setup(settings, *args, **kwargs)
            if "tradeVolume" in settings:
                if not isinstance(settings["tradeVolume"], int):
                    raise ValueError("tradeVolume must be int")
                self._executed_volumes = [int(settings["tradeVolume"])]

    return [UserDefinedFCNAgent, ContrarianFCNAgent, ExtendedMarket]


def set_up(settings, seed):
    """A pams SequentialRunner of ``settings`` and ``seed``, the samples' user classes
    registered, set up: what ``runner.main()`` does before ``runner._run()``."""
    import pams
    warnings.filterwarnings("ignore", "order price does not accord", UserWarning)
    runner = pams.runners.SequentialRunner(settings=settings, prng=random.Random(seed))
    for cls in user_classes():
        runner.class_register(cls=cls)
    runner._setup()
    return runner


def run_pams(settings, seed):
    """One pams run: ``({market: (prices, fundamental, volumes, bids, asks)}, indexes,
    seconds)``, markets in config order, ``indexes`` as
    :func:`several_market_statistics` takes it."""
    import pams
    runner = set_up(settings, seed)      # then a hook before the run
    sim = runner.simulator
    depth = {m.name: ([], []) for m in sim.markets}
    original = sim._trigger_event_after_step_for_market

    def after_step(market):
        bids, asks = depth[market.name]
        bids.append(len(market.buy_order_book.priority_queue))
        asks.append(len(market.sell_order_book.priority_queue))
        original(market)

    sim._trigger_event_after_step_for_market = after_step
    start = time.perf_counter()
    runner._run()
    seconds = time.perf_counter() - start
    series = {m.name: (m.get_market_prices(), m.get_fundamental_prices(),
                       m.get_executed_volumes(), *depth[m.name]) for m in sim.markets}
    indexes = {m.name: ([c.name for c in m.get_components()],
                        [c.outstanding_shares for c in m.get_components()])
               for m in sim.markets if isinstance(m, pams.index_market.IndexMarket)}
    return series, indexes, seconds


def speed(name, seeds, first_seed=0):
    """``(steps per second, steps per CPU-second)`` of pams's SequentialRunner on config
    ``name``, as a user runs it: no hook (:func:`run_pams`'s depth hook costs pams time),
    timed around the run after its setup, one process."""
    from _common import Timed
    settings = load(CONFIGS[name])
    T, _ = window(settings)
    wall = cpu = 0.0
    for seed in range(first_seed, first_seed + seeds):
        runner = set_up(settings, seed)
        with Timed() as run:
            runner._run()
        wall, cpu = wall + run.wall, cpu + run.cpu
    return seeds * T / wall, seeds * T / cpu


def reference(name, seeds, first_seed=0):
    """``(per-seed statistics [seeds, len(columns)], columns, steps per second)`` of
    config ``name``: :data:`flowsim.markets.stats.NAMES` for one market,
    :func:`several_market_names` for several."""
    settings = load(CONFIGS[name])
    T, t0 = window(settings)
    rows, seconds, columns = [], 0.0, None
    for seed in range(first_seed, first_seed + seeds):
        series, indexes, s = run_pams(settings, seed)
        seconds += s
        arrays = {}
        for m, (p, f, v, b, a) in series.items():
            if len(p) != T + 1 or len(v) < T:
                raise RuntimeError(f"pams gave {len(p)} prices and {len(v)} volumes for "
                                   f"{T} steps in {m}")
            arrays[m] = (np.array([p]), np.array([f]), np.array([v[:T]]),
                         np.array([b]), np.array([a]))
        if len(arrays) == 1:
            columns = stats.NAMES
            rows.append(stats.market_statistics(*next(iter(arrays.values())), t0)[0])
        else:
            columns = tuple(several_market_names(list(arrays), indexes))
            rows.append(several_market_statistics(arrays, t0, indexes)[0])
    return np.array(rows), columns, seeds * T / seconds


def write_tables(name, rows, columns, first_seed, kind="markets"):
    """``tests/data/pams_<kind>_<name>.csv`` (one row per seed) and its ``_summary.csv``
    (statistic, mean, standard error, count)."""
    path = os.path.join(ROOT, "tests", "data", f"pams_{kind}_{name}.csv")
    with open(path, "w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(["seed", *columns])
        for seed, row in enumerate(rows, start=first_seed):
            w.writerow([seed, *(repr(float(x)) for x in row)])
    mean, err, count = stats.summarize(rows)
    with open(path[:-4] + "_summary.csv", "w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(["statistic", "mean", "standard_error", "count"])
        for n, m, e, c in zip(columns, mean, err, count):
            w.writerow([n, repr(float(m)), repr(float(e)), int(c)])
    return path, mean, err


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", type=int, default=400)
    ap.add_argument("--first-seed", type=int, default=0)
    ap.add_argument("--configs", default=",".join(CONFIGS))
    ap.add_argument("--json", action="store_true", help="print, do not write tests/data")
    ap.add_argument("--speed", action="store_true",
                    help="speed only (JSON: steps/s and steps per CPU-second, no statistics)")
    args = ap.parse_args(argv)
    out = {}
    if args.speed:
        for name in args.configs.split(","):
            rate, per_cpu = speed(name, args.seeds, args.first_seed)
            out[name] = {"steps_per_second": rate, "steps_per_cpu_second": per_cpu}
        print(json.dumps(out))
        return
    for name in args.configs.split(","):
        rows, columns, rate = reference(name, args.seeds, args.first_seed)
        out[name] = {"rows": rows.tolist(), "columns": list(columns),
                     "steps_per_second": rate}
        if args.json:
            continue
        path, mean, err = write_tables(name, rows, columns, args.first_seed)
        print(f"{name}: {args.seeds} seeds, pams {rate:,.0f} steps/s -> {path}")
        for n, m, e in zip(columns, mean, err):
            print(f"  {n:<40} {m:>12.5g} +/- {e:.3g}")
    if args.json:
        print(json.dumps(out))


if __name__ == "__main__":
    main()
