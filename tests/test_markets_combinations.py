"""flowsim.markets on combinations of pams's classes and events that its bundled samples
do not cover, against stored pams tables (benchmarks/make_pams_combinations_reference.py:
200 seeds each, configs in tests/data/pams_markets_<name>.json)."""
import os

import numpy as np
import pytest
from helpers import ROOT

import flowsim.markets as fm
from flowsim.markets import stats

pytestmark = pytest.mark.costly

#: Markets per combination (one block: one compilation each).
MARKETS = 256
#: Markets of the high-frequency combinations with halts and mistakes (fewer: their
#: per-order events cost more a step; flowsim's standard errors are in the z-scores).
FEW_MARKETS = 64


def config_file(name):
    return os.path.join(ROOT, "tests", "data", f"pams_markets_{name}.json")


def pams_table(name):
    """``(columns, mean, standard error)`` of the stored pams table of ``name`` (its
    summary: each statistic's mean over seeds, standard error and count)."""
    path = os.path.join(ROOT, "tests", "data", f"pams_markets_{name}_summary.csv")
    table = np.genfromtxt(path, delimiter=",", names=True, dtype=None, encoding="utf-8")
    assert table["count"].min() >= 200
    return [str(c) for c in table["statistic"]], table["mean"], table["standard_error"]


def z_against_pams(name, markets=MARKETS, **kw):
    """flowsim's ensemble of combination ``name`` and each statistic's z against pams's."""
    columns, mean, err = pams_table(name)
    result = fm.ensemble(config_file(name), markets, seed=2026, block_markets=markets, **kw)
    assert columns == result.names
    return result, stats.z_scores(result.value, result.error, mean, err)


def assert_agrees(result, z):
    """Every |z| < 3.5 but at most one statistic in 100, none above 6."""
    assert np.isfinite(z).all(), [n for n, v in zip(result.names, z) if not np.isfinite(v)]
    high = {n: round(float(v), 2) for n, v in zip(result.names, z) if not abs(v) < 3.5}
    assert len(high) <= len(z) // 100 and max(abs(z)) < 6, high


def test_correlated_spots_index_arbitrage_and_price_limit_agree_with_pams():
    """Two correlated spot markets, their IndexMarket, ArbitrageAgents in the
    high-frequency phase, a fundamental shock and a PriceLimitRule on the three markets
    (61 statistics): the limit moves the arbitrageurs' orders as it moves every order
    (pams's ``hooked_before_order``), so every final price stays within 300 (1 +- 0.05)."""
    result, z = z_against_pams("combo_limit")
    assert_agrees(result, z)
    final = result.per_market[:, [result.names.index(f"{m}:final_price")
                                  for m in ("Spot-1", "Spot-2", "Index")]]
    assert final.min() >= 285.0 - 1e-9 and final.max() <= 315.0 + 1e-9
    # the limit binds: the shocked market ends at its floor in some members
    assert (np.abs(final[:, 0] - 285.0) < 1e-9).any()


def test_halt_and_mistake_with_two_markets_and_two_orders_agree_with_pams():
    """Two correlated spot markets, a group trading both and a group trading the
    second, two agents' orders a step (39 statistics): a TradingHaltRule on both
    markets (a trade in either halts both, checked after each order's executions, an
    agent's orders processed market by market) and an OrderMistakeShock replacing the
    first order in the second market at its step (a sell of 40 units 4 % below)."""
    assert_agrees(*z_against_pams("combo_halt_mistake"))


def test_halt_and_mistake_with_two_orders_in_one_market_agree_with_pams():
    """One market, two agents' orders a step, a TradingHaltRule and an
    OrderMistakeShock (19 statistics): the halt is checked after each order's
    executions, so it holds the step's second order."""
    assert_agrees(*z_against_pams("combo_one_market"))


def test_arbitrage_with_halt_and_mistake_agrees_with_pams():
    """combo_limit's markets and groups (ArbitrageAgents in the high-frequency phase)
    with a TradingHaltRule on the three markets and an OrderMistakeShock in the second
    spot market (61 statistics): a halt is checked after each of the arbitrageurs'
    orders (index first, then each component), their orders wait while any of their
    markets is halted, and the mistake replaces the step's first order in its market,
    an arbitrageur's as well as an FCN agent's."""
    assert_agrees(*z_against_pams("combo_arbitrage_halt_mistake", FEW_MARKETS))


def test_market_maker_with_halt_and_mistake_agrees_with_pams():
    """One market, an FCN group and a MarketMakerAgent (one high-frequency order a
    phase), a TradingHaltRule and an OrderMistakeShock (19 statistics): the market
    maker quotes while the market is halted (its orders rest), sees the mistaken
    order among the book's best prices, and a halt is checked after each of its
    orders."""
    assert_agrees(*z_against_pams("combo_market_maker_halt_mistake", FEW_MARKETS))
