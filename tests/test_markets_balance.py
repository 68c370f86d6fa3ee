"""Agents' balance sheets: the statistics' numpy definition
(:func:`flowsim.markets.stats.balance_statistics`) and pams's stored table of them
(``tests/data/pams_balance_two_groups.csv``, benchmarks/make_pams_balance_reference.py)."""
import csv
import os

import numpy as np
from helpers import ROOT

from flowsim.markets import stats


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
