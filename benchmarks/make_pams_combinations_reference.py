"""Run pams (SequentialRunner) on combinations of its classes and events that its
bundled samples do not cover, and store per-seed market statistics.

The configs are ``tests/data/pams_markets_<name>.json``; the tables (one row per seed,
the columns of :func:`flowsim.markets.stats.several_market_names`) and their
``_summary.csv`` are written beside them by
:func:`make_pams_reference.write_tables`:

* ``combo_limit``: two spot markets with correlated fundamentals (0.6), their
  IndexMarket, an FCN group on each market, ArbitrageAgents in the high-frequency
  phase, a fundamental shock and a PriceLimitRule on all three markets, two agents'
  orders a step;
* ``combo_halt``: two correlated spot markets, a group trading both and a group
  trading the second, two agents' orders a step, a TradingHaltRule on both markets;
* ``combo_mistake``: the same markets and groups with an OrderMistakeShock (a sell of
  40 units 4 % below the price) in the second market;
* ``combo_halt_mistake``: the same markets and groups with both events;
* ``combo_one_market``: the first market alone, its group, both events (in it), two
  agents' orders a step;
* ``combo_arbitrage_halt_mistake``: ``combo_limit``'s markets and groups with a
  TradingHaltRule on the three markets and an OrderMistakeShock in the second spot
  market (no shock, no limit);
* ``combo_market_maker_halt_mistake``: the first market alone, its FCN group, a
  MarketMakerAgent (one high-frequency order a phase), a TradingHaltRule and an
  OrderMistakeShock;
* ``combo_mistakes``: ``combo_mistake``'s markets and groups with three
  OrderMistakeShocks, two of them resting at once in the second market;
* ``combo_two_hifreq``: ``combo_limit`` with a MarketMakerAgent in the first market
  beside the ArbitrageAgents (two high-frequency groups), the shock only.

All: 200 seeds; the first five from 5000, the others from 6000::

    PYTHONPATH=. .venv-pams/bin/python benchmarks/make_pams_combinations_reference.py \\
        --seeds 200 --first-seed 6000 --configs combo_arbitrage_halt_mistake,...

pams runs in its own virtual environment (numpy < 2); the first five::

    PYTHONPATH=. .venv-pams/bin/python benchmarks/make_pams_combinations_reference.py \\
        --seeds 200 --first-seed 5000
"""
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "benchmarks"))
import make_pams_reference  # noqa: E402

#: The combinations, each a config in tests/data.
COMBINATIONS = ("combo_limit", "combo_halt", "combo_mistake", "combo_halt_mistake",
                "combo_one_market", "combo_arbitrage_halt_mistake",
                "combo_market_maker_halt_mistake", "combo_mistakes", "combo_two_hifreq")


def config_file(name):
    """Path of combination ``name``'s pams config."""
    return os.path.join(ROOT, "tests", "data", f"pams_markets_{name}.json")


def main(argv=None):
    for name in COMBINATIONS:
        make_pams_reference.CONFIGS[name] = config_file(name)
    argv = list(sys.argv[1:] if argv is None else argv)
    if "--configs" not in argv:
        argv += ["--configs", ",".join(COMBINATIONS)]
    make_pams_reference.main(argv)


if __name__ == "__main__":
    main()
