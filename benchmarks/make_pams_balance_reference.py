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

With several markets the columns are those of ``balance_names(groups, markets)``:
each group's units market by market (``inventory[MARKET]``, the markets it reaches);
high-frequency groups (ArbitrageAgent, MarketMakerAgent) follow the normal ones.  A
name not among the bundled samples is a config ``tests/data/pams_markets_<name>.json``
(benchmarks/make_pams_combinations_reference.py).

The stored tables: ``two_groups``, 200 seeds from 3000 (other seeds than its market
table's); ``combo_limit`` (two correlated spot markets, their IndexMarket,
ArbitrageAgents, a shock and a PriceLimitRule) and ``trading_halt`` (one market, a
TradingHaltRule), 200 seeds from 3000 (``--jobs 3`` runs three processes: the same
table)::

    ... make_pams_balance_reference.py --seeds 200 --first-seed 3000 \\
        --configs combo_limit,trading_halt
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
    """One pams run: ``(groups, markets, reach, start, end, seconds)``, where ``groups``
    maps group names to agent indices (normal groups in config order, then the
    high-frequency ones, as flowsim orders them), ``markets`` the market names (config
    order), ``reach`` each group's markets (those its agents hold units in) and
    ``start`` / ``end`` are ``(cash [agents], inventory [agents, markets], market
    prices [markets])``; an agent holds no units in a market it cannot reach (pams
    keeps no entry: 0 here)."""
    import pams
    runner = set_up(settings, seed)
    sim = runner.simulator
    agents, groups = [], {}
    named = list(sim.agents_group_name2agent.items())
    named.sort(key=lambda item: isinstance(item[1][0], pams.agents.HighFrequencyAgent))
    for name, members in named:
        groups[name] = list(range(len(agents), len(agents) + len(members)))
        agents += members
    markets = sim.markets

    def sheet():
        return (np.array([a.cash_amount for a in agents], np.float64),
                np.array([[a.asset_volumes.get(m.market_id, 0) for m in markets]
                          for a in agents], np.float64),
                np.array([float(m.get_market_price()) for m in markets]))

    start = sheet()
    began = time.perf_counter()
    runner._run()
    reach = {g: {m.name for m in markets if m.market_id in agents[idx[0]].asset_volumes}
             for g, idx in groups.items()}
    return (groups, [m.name for m in markets], reach, start, sheet(),
            time.perf_counter() - began)


def reference(name, seeds, first_seed):
    """``(rows [seeds, columns], columns, pams steps/s)`` of config ``name``: one
    market's columns as :func:`flowsim.markets.stats.balance_names` of the groups,
    several markets' with each group's markets."""
    settings = load(CONFIGS.get(name) or os.path.join(ROOT, "tests", "data",
                                                     f"pams_markets_{name}.json"))
    T, _ = stats.window(settings)
    rows, seconds, columns = [], 0.0, None
    for seed in range(first_seed, first_seed + seeds):
        groups, markets, reach, (c0, i0, p0), (c1, i1, p1), s = balance_sheets(settings, seed)
        seconds += s
        if len(markets) == 1:
            columns = stats.balance_names(groups)
            row = stats.balance_statistics(c1[None], i1[None, :, 0], p1, c0[None],
                                           i0[None, :, 0], p0, groups)
        else:
            access = {g: [k for k, m in enumerate(markets) if m in reach[g]] for g in groups}
            columns = stats.balance_names(groups, {g: [markets[k] for k in ks]
                                                   for g, ks in access.items()})
            row = stats.balance_statistics(c1[None], i1[None], p1[None], c0[None], i0[None],
                                           p0[None], groups, access)
        rows.append(row[0])
    return np.array(rows), columns, seeds * T / seconds


def _part(job):
    return reference(*job)


def parallel_reference(name, seeds, first_seed, jobs):
    """:func:`reference` of consecutive parts of the seeds in ``jobs`` processes: the
    same rows, in seed order; the rate is the parts' mean."""
    if jobs <= 1:
        return reference(name, seeds, first_seed)
    from multiprocessing import Pool
    bounds = np.linspace(0, seeds, jobs + 1).astype(int)
    parts = [(name, int(b - a), first_seed + int(a)) for a, b in zip(bounds, bounds[1:])]
    with Pool(jobs) as pool:
        done = pool.map(_part, parts)
    return (np.concatenate([d[0] for d in done]), done[0][1],
            float(np.mean([d[2] for d in done])))


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", type=int, default=200)
    ap.add_argument("--first-seed", type=int, default=3000)
    ap.add_argument("--configs", default="two_groups")
    ap.add_argument("--jobs", type=int, default=1, help="processes (the same table)")
    args = ap.parse_args(argv)
    for name in args.configs.split(","):
        rows, columns, rate = parallel_reference(name, args.seeds, args.first_seed, args.jobs)
        path, mean, err = write_tables(name, rows, columns, args.first_seed, kind="balance")
        print(f"{name}: {args.seeds} seeds, pams {rate:,.0f} steps/s -> {path}")
        for n, m, e in zip(columns, mean, err):
            print(f"  {n:<40} {m:>12.5g} +/- {e:.3g}")


if __name__ == "__main__":
    main()
