"""The statistics of several markets that the stored pams tables hold
(benchmarks/make_pams_reference.py), on hand-made price paths with known answers."""
import math
import os

import numpy as np
import pytest

from flowsim.markets import stats

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def path(returns, t0=0, start=300.0, tail=1.0):
    """Prices ``[1, T + 1]``: ``t0`` flat steps, then ``returns`` as one-step log returns,
    then a last price ``tail`` times the one before (outside the statistics window)."""
    logp = np.log(start) + np.concatenate([np.zeros(t0 + 1), np.cumsum(returns)])
    return np.exp(np.append(logp, logp[-1] + math.log(tail)))[None, :]


def test_one_step_returns_cover_the_window_of_volatility_1():
    """Returns of prices t0 .. T - 1: the warm-up and the last price are left out."""
    r = [0.1, -0.2, 0.05, 0.0, 0.3, -0.1, 0.02, 0.0, 0.01, -0.04, 0.2, 0.1]
    p = path(r, t0=2, tail=5.0)                            # T = 15
    assert p.shape == (1, 16)
    np.testing.assert_allclose(stats.one_step_returns(p, 2), [r], atol=1e-12)
    zeros = np.zeros((1, 15))
    vol = stats.market_statistics(p, p, zeros, zeros, zeros, 2)[0, 0]
    assert stats.NAMES[0] == "volatility_1" and vol == pytest.approx(np.std(r), abs=1e-12)


def test_return_correlation_known_values():
    a = path([0.0, 1.0, 2.0], t0=1, tail=3.0)
    b = path([0.0, 0.0, 3.0], t0=1, tail=0.2)
    # da = (-1, 0, 1), db = (-1, -1, 2): 3 / sqrt(2 * 6)
    assert stats.return_correlation(a, b, 1)[0] == pytest.approx(3 / math.sqrt(12), abs=1e-12)
    r = np.array([0.01, -0.03, 0.02, 0.005])
    assert stats.return_correlation(path(r), path(2 * r + 0.001), 0)[0] == pytest.approx(1.0)
    assert stats.return_correlation(path(r), path(-r), 0)[0] == pytest.approx(-1.0)
    assert stats.return_correlation(path([1, -1, 1, -1]), path([1, 1, -1, -1]), 0)[0] == \
        pytest.approx(0.0, abs=1e-12)
    flat = path([0.0, 0.0, 0.0, 0.0])
    assert np.isnan(stats.return_correlation(path(r), flat, 0)[0])


def test_return_correlation_is_per_run():
    r = np.array([0.01, -0.03, 0.02, 0.005])
    a = np.concatenate([path(r), path(r)])
    b = np.concatenate([path(r), path(-r)])
    np.testing.assert_allclose(stats.return_correlation(a, b, 0), [1.0, -1.0])


def test_market_index_weights_by_outstanding_shares():
    comp = np.array([[[100.0, 110.0], [200.0, 180.0]]])     # [k=1, c=2, T+1=2]
    np.testing.assert_allclose(stats.market_index(comp, [1, 3]),
                               [[(100 + 600) / 4, (110 + 540) / 4]])
    np.testing.assert_allclose(stats.market_index(comp, [25000, 25000]), [[150.0, 145.0]])


def test_index_deviation_known_values():
    """Mean of |ln(P / index)| over prices t0 .. T - 1."""
    t0, T = 2, 6
    comp = np.full((1, 2, T + 1), 100.0)
    comp[0, 1] = 300.0                               # index = 200 with equal shares
    index_price = np.full((1, T + 1), 200.0)
    assert stats.index_deviation(index_price, comp, [1, 1], t0)[0] == 0.0
    index_price[0, 3] = 200.0 * math.e               # one of the 4 window prices off by e
    index_price[0, [0, 1, T]] = 1.0                  # outside the window
    assert stats.index_deviation(index_price, comp, [1, 1], t0)[0] == pytest.approx(0.25)
    index_price[0, 4] = 200.0 / math.e ** 2          # below the index counts as above
    assert stats.index_deviation(index_price, comp, [1, 1], t0)[0] == pytest.approx(0.75)


def test_several_market_columns_in_config_order():
    rng = np.random.default_rng(0)
    T, t0, k = 30, 5, 2
    series = {}
    for m in ("S-1", "S-2", "I"):
        p = 300 * np.exp(np.cumsum(rng.normal(0, 0.01, (k, T + 1)), axis=1))
        series[m] = (p, p * 1.01, rng.integers(0, 3, (k, T)), np.ones((k, T)),
                     np.ones((k, T)))
    indexes = {"I": (["S-1", "S-2"], [25000, 25000])}
    names = stats.several_market_names(list(series), indexes)
    n = len(stats.NAMES)
    assert names[:2] == [f"S-1:{stats.NAMES[0]}", f"S-1:{stats.NAMES[1]}"]
    assert names[3 * n:] == ["S-1|S-2:return_correlation", "S-1|I:return_correlation",
                             "S-2|I:return_correlation", "I:index_deviation"]
    x = stats.several_market_statistics(series, t0, indexes)
    assert x.shape == (k, len(names))
    np.testing.assert_array_equal(x[:, n:2 * n], stats.market_statistics(*series["S-2"], t0))
    np.testing.assert_array_equal(
        x[:, names.index("S-2|I:return_correlation")],
        stats.return_correlation(series["S-2"][0], series["I"][0], t0))
    comp = np.stack([series["S-1"][0], series["S-2"][0]], axis=1)
    np.testing.assert_array_equal(x[:, -1], stats.index_deviation(series["I"][0], comp,
                                                                [25000, 25000], t0))


@pytest.mark.parametrize("name, expected", [("ci2002", (600, 100)), ("market_share", (2100, 100)),
                                            ("shock_transfer", (600, 100))])
def test_window_of_the_samples(name, expected):
    from flowsim.markets import config_path
    from flowsim.markets.config import load
    assert stats.window(load(config_path(name))) == expected


def test_window_needs_a_session_with_execution():
    settings = {"simulation": {"sessions": [{"iterationSteps": 5}]}}
    with pytest.raises(ValueError, match="no session has withOrderExecution"):
        stats.window(settings)


#: Markets of the stored samples with several markets, as pams names them (config order;
#: ``numMarkets`` with ``prefix`` expands ``SpotMarket-N`` to ``SpotMarket-0, 1, 2``).
SEVERAL = {"shock_transfer": (["SpotMarket-1", "SpotMarket-2", "IndexMarket-I"],
                              ["IndexMarket-I"]),
           "test": (["SpotMarket-0", "SpotMarket-1", "SpotMarket-2"], []),
           "market_share": (["Market-A", "Market-B"], []),
           "market_share_mm": (["Market-A", "Market-B"], [])}


@pytest.mark.parametrize("name", sorted(SEVERAL))
def test_stored_tables_of_several_markets(name):
    """Columns in the contract's names and order, >= 200 seeds, and the summary file is
    the rows' mean, standard error and count."""
    import csv
    path = os.path.join(ROOT, "tests", "data", f"pams_markets_{name}.csv")
    with open(path) as fh:
        header = next(csv.reader(fh))
    markets, indexes = SEVERAL[name]
    assert header[1:] == stats.several_market_names(markets, dict.fromkeys(indexes))
    rows = np.loadtxt(path, delimiter=",", skiprows=1)
    assert len(rows) >= 200 and (np.diff(rows[:, 0]) == 1).all()
    mean, err, count = stats.summarize(rows[:, 1:])
    with open(path[:-4] + "_summary.csv") as fh:
        summary = list(csv.reader(fh))
    assert summary[0] == ["statistic", "mean", "standard_error", "count"]
    assert [r[0] for r in summary[1:]] == header[1:]
    np.testing.assert_allclose([float(r[1]) for r in summary[1:]], mean, rtol=1e-12)
    np.testing.assert_allclose([float(r[2]) for r in summary[1:]], err, rtol=1e-12)
    assert [int(r[3]) for r in summary[1:]] == count.tolist()
