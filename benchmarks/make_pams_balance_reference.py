"""Run pams (SequentialRunner) over many seeds and store its agents' balance sheets.

pams keeps, per agent, ``cash_amount`` (``cashAmount`` of the config, a number or a
pams distribution drawn once) and ``asset_volumes`` per market (``assetVolume``); an
execution of ``volume`` units at ``price`` moves ``price * volume`` of cash from the
buyer to the seller and ``volume`` units the other way (pams 0.3.0,
``Simulator._execute_orders``).  No shipped agent class reads them to decide.

``tests/data/pams_balance_<config>.csv`` holds one row per seed, the columns of
:func:`flowsim.markets.stats.balance_names` over the config's agent groups
(:func:`flowsim.markets.stats.balance_statistics`: cash, inventory, wealth and P&L
per group, their mean, standard deviation and quantiles over the group's agents);
its ``_summary.csv`` each column's mean over seeds, standard error and count.  pams
needs numpy < 2 (its own virtual environment, as for make_pams_reference.py)::

    PYTHONPATH=. .venv-pams/bin/python benchmarks/make_pams_balance_reference.py \\
        --seeds 200 --configs two_groups

The stored table: ``two_groups``, 200 seeds from 3000 (other seeds than its market
table's).
"""
import argparse
import os
import sys
import time

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
sys.path.insert(0, os.path.join(ROOT, "benchmarks"))
from make_pams_reference import CONFIGS, set_up, write_tables  # noqa: E402

from flowsim.markets import stats  # noqa: E402
from flowsim.markets.config import load  # noqa: E402


def balance_sheets(settings, seed):
    """One pams run of a one-market config: ``(groups, start, end, seconds)``, where
    ``groups`` maps group names (config order) to agent indices and ``start`` /
    ``end`` are ``(cash [agents], inventory [agents], market price)``."""
    runner = set_up(settings, seed)
    sim = runner.simulator
    if len(sim.markets) != 1:
        raise ValueError("balance sheets are tabulated for configs of one market")
    market = sim.markets[0]
    agents, groups = [], {}
    for name, members in sim.agents_group_name2agent.items():
        groups[name] = list(range(len(agents), len(agents) + len(members)))
        agents += members

    def sheet():
        return (np.array([a.cash_amount for a in agents], np.float64),
                np.array([a.asset_volumes[market.market_id] for a in agents], np.float64),
                float(market.get_market_price()))

    start = sheet()
    began = time.perf_counter()
    runner._run()
    return groups, start, sheet(), time.perf_counter() - began


def reference(name, seeds, first_seed):
    """``(rows [seeds, columns], columns, pams steps/s)`` of config ``name``."""
    settings = load(CONFIGS[name])
    T, _ = stats.window(settings)
    rows, seconds, columns = [], 0.0, None
    for seed in range(first_seed, first_seed + seeds):
        groups, (c0, i0, p0), (c1, i1, p1), s = balance_sheets(settings, seed)
        seconds += s
        columns = stats.balance_names(groups)
        rows.append(stats.balance_statistics(c1[None], i1[None], [p1], c0[None], i0[None],
                                             [p0], groups)[0])
    return np.array(rows), columns, seeds * T / seconds


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", type=int, default=200)
    ap.add_argument("--first-seed", type=int, default=3000)
    ap.add_argument("--configs", default="two_groups")
    args = ap.parse_args(argv)
    for name in args.configs.split(","):
        rows, columns, rate = reference(name, args.seeds, args.first_seed)
        path, mean, err = write_tables(name, rows, columns, args.first_seed, kind="balance")
        print(f"{name}: {args.seeds} seeds, pams {rate:,.0f} steps/s -> {path}")
        for n, m, e in zip(columns, mean, err):
            print(f"  {n:<40} {m:>12.5g} +/- {e:.3g}")


if __name__ == "__main__":
    main()
