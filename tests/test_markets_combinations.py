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


def z_against_pams(name, result=None, markets=MARKETS, **kw):
    """flowsim's ensemble of combination ``name`` (``result``: one already run) and each
    market statistic's z against pams's (balance statistics, if kept, follow them)."""
    columns, mean, err = pams_table(name)
    if result is None:
        result = fm.ensemble(config_file(name), markets, seed=2026, block_markets=markets,
                             **kw)
    k = len(columns)
    assert columns == result.names[:k]
    return result, stats.z_scores(result.value[:k], result.error[:k], mean, err)


def assert_agrees(result, z):
    """Every |z| < 3.5 but at most one statistic in 100, none above 6."""
    assert np.isfinite(z).all(), [n for n, v in zip(result.names, z) if not np.isfinite(v)]
    high = {n: round(float(v), 2) for n, v in zip(result.names, z) if not abs(v) < 3.5}
    assert len(high) <= len(z) // 100 and max(abs(z)) < 6, high


@pytest.fixture(scope="module")
def combo_limit():
    """combo_limit's ensemble with the agents' balance sheets (the market statistics
    are the same bits without them): one compilation for its market and balance tests."""
    return fm.ensemble(config_file("combo_limit"), MARKETS, seed=2026, block_markets=MARKETS,
                       balances=True)


def test_correlated_spots_index_arbitrage_and_price_limit_agree_with_pams(combo_limit):
    """Two correlated spot markets, their IndexMarket, ArbitrageAgents in the
    high-frequency phase, a fundamental shock and a PriceLimitRule on the three markets
    (61 statistics): the limit moves the arbitrageurs' orders as it moves every order
    (pams's ``hooked_before_order``), so every final price stays within 300 (1 +- 0.05)."""
    result, z = z_against_pams("combo_limit", combo_limit)
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
    first order in the second market at its step (a sell of 40 units 4 % below).  The
    run keeps the balance sheets (the same market bits): a closed economy in every run,
    the mistaken order's units sold by the one agent whose order it replaced (as pams
    keeps its agent), so that a group's units spread wide in nearly every run."""
    result, z = z_against_pams("combo_halt_mistake", balances=True)
    assert_agrees(result, z)
    col = dict(zip(result.names, result.per_market.T))
    np.testing.assert_allclose(30 * col["Both:cash_mean"] + 20 * col["Second:cash_mean"],
                               5e5, rtol=1e-12)
    np.testing.assert_array_equal(np.round(30 * col["Both:inventory[Spot-1]_mean"], 9), 1500)
    units = 30 * col["Both:inventory[Spot-2]_mean"] + 20 * col["Second:inventory[Spot-2]_mean"]
    np.testing.assert_array_equal(np.round(units, 9), 2500)
    spread = np.maximum(col["Both:inventory[Spot-2]_std"], col["Second:inventory[Spot-2]_std"])
    assert (spread > 5).mean() > 0.9


def test_several_mistakes_agree_with_pams():
    """Three OrderMistakeShocks on two correlated markets, two agents' orders a step
    (39 statistics): a sell of 40 units and, 30 steps later while it may still rest, a
    buy of 30 in the second market, a buy of 20 in the first at the first one's step.
    Each mistaken order keeps its own place outside the ring book, so they coexist and
    may trade with each other."""
    assert_agrees(*z_against_pams("combo_mistakes", markets=FEW_MARKETS))


def test_halt_and_mistake_with_two_orders_in_one_market_agree_with_pams():
    """One market, two agents' orders a step, a TradingHaltRule and an
    OrderMistakeShock (19 statistics): the halt is checked after each order's
    executions, so it holds the step's second order."""
    assert_agrees(*z_against_pams("combo_one_market"))


# -- balance sheets with several markets and high-frequency agents ---------------------------
def pams_balance_rows(name):
    """``(columns, rows [seeds, columns])`` of pams's stored balance table of ``name``
    (benchmarks/make_pams_balance_reference.py)."""
    path = os.path.join(ROOT, "tests", "data", f"pams_balance_{name}.csv")
    with open(path) as fh:
        columns = fh.readline().strip().split(",")[1:]
    rows = np.loadtxt(path, delimiter=",", skiprows=1, ndmin=2)[:, 1:]
    assert len(rows) >= 200
    return columns, rows


def balance_part(result):
    """``(names, per-market rows)`` of the balance statistics of ``result``."""
    k = len(pams_table("combo_limit")[0])
    return result.names[k:], result.per_market[:, k:]


def test_balance_sheets_with_markets_and_arbitrageurs_agree_with_pams(combo_limit):
    """Per group, cash, the units held in each of its markets, wealth and P&L (mean,
    standard deviation, 10/50/90 % quantiles over the group's agents) of combo_limit's
    three FCN groups and its ArbitrageAgents (a turn's agent a uniform draw among
    them, as pams's shuffle makes it; their index order of two units settles at its
    last pair's price): 90 statistics within 4 combined standard errors of pams's 200
    seeds (an honest run fails with probability ~90 x 6.3e-5 ~ 0.6 %, fewer as the
    statistics are correlated; the seed is fixed, so the outcome is too)."""
    names, _ = balance_part(combo_limit)
    columns, rows = pams_balance_rows("combo_limit")
    assert names == columns and len(columns) == 90
    assert "Arbitrage:inventory[Index]_q90" in columns
    mean, err, _ = stats.summarize(rows)
    k = len(combo_limit.names) - len(columns)
    z = stats.z_scores(combo_limit.value[k:], combo_limit.error[k:], mean, err)
    bad = {n: round(float(v), 2) for n, v in zip(columns, z) if not abs(v) < 4}
    assert not bad, bad


def test_several_markets_are_a_closed_economy(combo_limit):
    """Every run's 100 agents end with the cash they started with (3 x 30 x 10,000 +
    10 x 150,000, to rounding) and, in each market, the 40 x 50 units its group and
    the arbitrageurs started with; the arbitrageurs traded."""
    names, per = balance_part(combo_limit)
    col = dict(zip(names, per.T))
    sizes = {"FCN-1": 30, "FCN-2": 30, "FCN-I": 30, "Arbitrage": 10}
    cash = sum(n * col[f"{g}:cash_mean"] for g, n in sizes.items())
    np.testing.assert_allclose(cash, 2.4e6, rtol=1e-12)
    for m in ("Spot-1", "Spot-2", "Index"):
        units = sum(n * col.get(f"{g}:inventory[{m}]_mean", 0.0) for g, n in sizes.items())
        np.testing.assert_array_equal(np.round(units, 9), 2000)
    assert (col["Arbitrage:inventory[Index]_std"] > 0).mean() > 0.9


#: Independent batches of the pulls test (flowsim's 256 runs and pams's 200 seeds each cut
#: into 16) and its bounds on Student's t of the mean square pull: the one-sided 0.05 %
#: point of t with 15 degrees of freedom above, -7 below (the batches' mean squares are
#: right-skewed, which fattens t's lower tail).
BATCHES, UPPER, LOWER = 16, 4.073, -7.0


def pull_t(z):
    """Student's t of ``mean_k Q_k = 1``, ``Q_k`` batch ``k``'s mean square pull over the
    statistics (finite pulls only)."""
    q = np.nanmean(z * z, axis=1)
    return (q.mean() - 1.0) / (q.std(ddof=1) / np.sqrt(len(q)))


def test_balance_pulls_over_batches_have_unit_variance(combo_limit):
    """The stated errors mean what they say: flowsim's 256 runs and pams's 200 seeds each
    cut into 16 independent batches (:func:`flowsim.markets.stats.pulls`); batch
    ``k``'s pulls of the 90 balance statistics (its flowsim mean against its pams mean
    in their combined stated errors) are draws of N(0, 1) where the errors are right
    and the models agree, so their mean square ``Q_k`` has mean 1 (a little more: the
    errors are estimated from 12-16 runs).  The 16 ``Q_k`` are independent; a t-test
    of mean 1 within (-7, 4.073) fails an honest run with probability below 0.05 %
    (a Monte Carlo of t for ``Q_k`` distributed as chi-square / nu, nu >= 5; the
    batches' spread shows nu ~ 8).  The same test refuses errors stated 1.5 times too
    small or too large.  One ensemble run: the market and balance tests' own."""
    _, per = balance_part(combo_limit)
    _, rows = pams_balance_rows("combo_limit")
    z = stats.pulls(per, rows, BATCHES)
    assert z.shape == (BATCHES, 90) and np.isfinite(z).mean() > 0.95
    assert LOWER < pull_t(z) < UPPER, np.nanmean(z * z, axis=1)
    assert abs(np.nanmean(z)) < 0.5
    assert pull_t(z * 1.5) > UPPER and pull_t(z / 1.5) < LOWER


def test_arbitrage_with_halt_and_mistake_agrees_with_pams():
    """combo_limit's markets and groups (ArbitrageAgents in the high-frequency phase)
    with a TradingHaltRule on the three markets and an OrderMistakeShock in the second
    spot market (61 statistics): a halt is checked after each of the arbitrageurs'
    orders (index first, then each component), their orders wait while any of their
    markets is halted, and the mistake replaces the step's first order in its market,
    an arbitrageur's as well as an FCN agent's."""
    assert_agrees(*z_against_pams("combo_arbitrage_halt_mistake", markets=FEW_MARKETS))


def test_market_maker_with_halt_and_mistake_agrees_with_pams():
    """One market, an FCN group and a MarketMakerAgent (one high-frequency order a
    phase), a TradingHaltRule and an OrderMistakeShock (19 statistics): the market
    maker quotes while the market is halted (its orders rest), sees the mistaken
    order among the book's best prices, and a halt is checked after each of its
    orders."""
    assert_agrees(*z_against_pams("combo_market_maker_halt_mistake", markets=FEW_MARKETS))
