"""Agents' balance sheets (``balances=True``): the statistics' numpy definition
(:func:`flowsim.markets.stats.balance_statistics`) and pams's stored table of them
(``tests/data/pams_balance_two_groups.csv``, benchmarks/make_pams_balance_reference.py)."""
import csv
import glob
import hashlib
import json
import os

import numpy as np
import pytest
from helpers import ROOT

import flowsim.markets as fm
from flowsim.markets import stats
from flowsim.markets.config import parse


def test_balance_statistics_follow_their_definition():
    """Two runs, three agents in groups of two and one: wealth marks the inventory at
    the final price, P&L subtracts the start marked at the starting price; a group of
    one agent has no standard deviation."""
    cash = [[90.0, 110.0, 100.0], [100.0, 100.0, 100.0]]
    inventory = [[11, 9, 10], [10, 10, 10]]
    got = stats.balance_statistics(cash, inventory, [10.0, 12.0], [[100.0] * 3] * 2,
                                   [[10] * 3] * 2, [10.0, 10.0], {"A": [0, 1], "B": [2]})
    names = stats.balance_names(["A", "B"])
    assert got.shape == (2, len(names)) == (2, 40)
    row = dict(zip(names, got[0]))
    assert row["A:wealth_mean"] == 200.0 and row["A:pnl_std"] == 0.0
    assert row["A:cash_std"] == np.std([90.0, 110.0], ddof=1)
    assert row["A:inventory_q10"] == 9.2          # numpy's linear rule between 9 and 11
    later = dict(zip(names, got[1]))
    assert later["B:pnl_mean"] == later["B:pnl_q50"] == 20.0    # 10 units gained 2 each
    assert np.isnan(later["B:wealth_std"])


def test_pams_balance_table_is_a_closed_economy():
    """pams's executions move cash and units between its agents: in every stored run
    the 60 Fundamentalists and 40 Chartists of two_groups together hold the 100 x
    10,000 cash and 100 x 50 units they started with (to float64 rounding)."""
    path = os.path.join(ROOT, "tests", "data", "pams_balance_two_groups.csv")
    with open(path) as fh:
        columns = next(csv.reader(fh))[1:]
    rows = np.loadtxt(path, delimiter=",", skiprows=1, ndmin=2)[:, 1:]
    assert len(rows) >= 200
    assert columns == stats.balance_names(["Fundamentalists", "Chartists"])
    col = {n: rows[:, i] for i, n in enumerate(columns)}
    cash = 60 * col["Fundamentalists:cash_mean"] + 40 * col["Chartists:cash_mean"]
    units = 60 * col["Fundamentalists:inventory_mean"] + 40 * col["Chartists:inventory_mean"]
    np.testing.assert_allclose(cash, 1e6, rtol=1e-12)
    np.testing.assert_allclose(units, 5000, rtol=1e-12)
    assert col["Chartists:inventory_std"].mean() > 0          # they traded


def test_compiled_balance_statistics_equal_their_numpy_definition():
    """The compiled step's statistics (:func:`flowsim.markets.kernel.balance_columns`)
    are :func:`flowsim.markets.stats.balance_statistics` on the same balance sheets:
    groups of 7, 1 and 12 agents (a group of one has no standard deviation)."""
    from flowsim.markets.kernel import balance_columns
    rng = np.random.default_rng(3)
    M, sizes = 5, (7, 1, 12)
    N = sum(sizes)
    cash = rng.normal(10000.0, 500.0, (M, N))
    inventory = rng.integers(40, 60, (M, N))
    price = rng.uniform(280.0, 320.0, M)
    start_cash = np.full((M, N), 10000.0)
    start_inventory = np.full((M, N), 50)
    got = np.asarray(balance_columns(sizes, cash, inventory, price, start_cash,
                                     start_inventory, 300.0))
    bounds = np.cumsum((0,) + sizes)
    groups = {f"G{i}": list(range(a, b)) for i, (a, b) in enumerate(zip(bounds, bounds[1:]))}
    want = stats.balance_statistics(cash, inventory, price, start_cash, start_inventory,
                                    np.full(M, 300.0), groups)
    assert got.shape == want.shape == (M, len(stats.balance_names(groups)))
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-9)
    assert np.isnan(got[:, 21:40:5]).all()          # the group of one: no std


@pytest.mark.parametrize("group, key", [("FCNAgents", "cashAmount"),
                                       ("FCNAgents", "assetVolume")])
def test_group_without_its_balance_sheet_is_refused_as_pams_refuses_it(group, key):
    with open(fm.config_path("ci2002")) as fh:
        cfg = json.load(fh)
    cfg[group].pop(key)
    with pytest.raises(ValueError, match=f"{group}: {key} is a required property of agent"):
        parse(cfg)


def test_every_bundled_sample_states_its_agents_balance_sheets():
    classes = {"UserDefinedFCNAgent": "FCNAgent", "ExtendedMarket": ("Market", ["tradeVolume"])}
    for path in sorted(glob.glob(os.path.join(os.path.dirname(fm.config_path("ci2002")),
                                              "*.json"))):
        cfg = parse(path, classes=classes)
        assert all(g.cash is not None and g.asset is not None for g in cfg.groups), path


def test_balances_are_refused_where_the_kernel_keeps_none():
    policy = fm.MLP.random([5, 1])
    with pytest.raises(ValueError, match="this config has learned groups"):
        fm.from_pams(fm.config_path("ci2002"), balances=True,
                     learned=[fm.LearnedAgents(policy, 5, lags=2)])


def test_balances_with_high_frequency_agents_and_halts_or_mistakes_are_refused():
    """Those runs match pams's market statistics; their balance sheets are not checked
    against pams yet, so they are refused, naming why."""
    path = os.path.join(ROOT, "tests", "data",
                        "pams_markets_combo_market_maker_halt_mistake.json")
    with pytest.raises(ValueError, match="high-frequency agents with a TradingHaltRule or an "
                                         "OrderMistakeShock"):
        fm.from_pams(path, balances=True)


def test_balance_names_of_several_markets_and_high_frequency_agents():
    """Several markets: each group's units by market (those it reaches, config order),
    high-frequency groups after the normal ones."""
    sim = fm.from_pams(fm.config_path("market_share_mm"), balances=True,
                       classes={"ExtendedMarket": ("Market", ["tradeVolume"])})
    names = list(sim.names[len(sim.names) - 45:])
    assert names[5] == "MarketShareFCNAgents:inventory[Market-A]_mean"
    assert names[10] == "MarketShareFCNAgents:inventory[Market-B]_mean"
    assert names[25:31] == ["MarketMakerAgent:cash_mean", "MarketMakerAgent:cash_std",
                            "MarketMakerAgent:cash_q10", "MarketMakerAgent:cash_q50",
                            "MarketMakerAgent:cash_q90",
                            "MarketMakerAgent:inventory[Market-B]_mean"]


#: Markets of the balance-sheet run (one block: one compilation), as the stored
#: two_groups market table's check in tests/test_markets.py ran them.
MARKETS = 256


@pytest.fixture(scope="module")
def two_groups_balances():
    return fm.ensemble(fm.config_path("two_groups"), MARKETS, seed=2026,
                       block_markets=MARKETS, balances=True)


def _table(name):
    path = os.path.join(ROOT, "tests", "data", name)
    with open(path) as fh:
        columns = next(csv.reader(fh))[1:]
    rows = np.loadtxt(path, delimiter=",", skiprows=1, ndmin=2)[:, 1:]
    assert len(rows) >= 200
    return columns, rows


def test_balance_statistics_agree_with_pams(two_groups_balances):
    """Per group, cash, inventory, wealth and P&L (mean, standard deviation, 10/50/90 %
    quantiles over the group's agents, each averaged over 256 runs) within 4 combined
    standard errors of pams's 200 seeds.  40 statistics (the 20 wealth and P&L ones
    move with the final price, so fewer independent ones): an honest run fails with
    probability below 40 x 6.3e-5 ~ 0.25 % (normal tails; the seed is fixed, so the
    outcome is too).  With the same seed and block the market statistics are the
    stored two_groups check's, and agree with pams's market table too (19 more, ~0.1 %)."""
    r = two_groups_balances
    k = len(stats.NAMES)
    columns, ref = _table("pams_balance_two_groups.csv")
    assert r.names == list(stats.NAMES) + columns
    mean, err, _ = stats.summarize(ref)
    z = stats.z_scores(r.value[k:], r.error[k:], mean, err)
    bad = {n: round(float(v), 2) for n, v in zip(columns, z) if not abs(v) < 4}
    assert not bad, bad
    columns, ref = _table("pams_markets_two_groups.csv")
    assert r.names[:k] == columns
    mean, err, _ = stats.summarize(ref)
    z = stats.z_scores(r.value[:k], r.error[:k], mean, err)
    bad = {n: round(float(v), 2) for n, v in zip(columns, z) if not abs(v) < 4}
    assert not bad, bad


def test_executions_move_cash_and_units_between_agents(two_groups_balances):
    """A closed economy, as in pams: every run's 100 agents end with the 100 x 10,000
    cash and 100 x 50 units they started with (float64 rounding), and traded."""
    col = dict(zip(two_groups_balances.names, two_groups_balances.per_market.T))
    cash = 60 * col["Fundamentalists:cash_mean"] + 40 * col["Chartists:cash_mean"]
    units = 60 * col["Fundamentalists:inventory_mean"] + 40 * col["Chartists:inventory_mean"]
    np.testing.assert_allclose(cash, 1e6, rtol=1e-12)
    np.testing.assert_array_equal(np.round(units, 9), 5000)
    assert (col["Chartists:inventory_std"] > 0).all()
    pnl = col["Fundamentalists:pnl_mean"] - col["Fundamentalists:wealth_mean"]
    np.testing.assert_allclose(pnl, -10000 - 50 * 300.0, rtol=1e-12)


#: sha256 of the 19 market statistics ``[256, 19]`` (float64 bytes) of the run above
#: made without ``balances`` (the same seed and block), before balance sheets existed.
PLAIN_MARKETS = "e9cbad2159fdf93411099ff1f3ca64389910875190a2a3a17d351f9c032e319b"


def test_balance_sheets_leave_the_market_bits_unchanged(two_groups_balances):
    """Keeping the sheets changes no price: the market statistics of every run are the
    bits of the run without them (a deterministic check; if an intended change of the
    markets' bits moves them, both runs move and ``PLAIN_MARKETS`` is refreshed from a
    run without ``balances``)."""
    x = np.ascontiguousarray(two_groups_balances.per_market[:, :len(stats.NAMES)],
                             np.float64)
    assert hashlib.sha256(x.tobytes()).hexdigest() == PLAIN_MARKETS
