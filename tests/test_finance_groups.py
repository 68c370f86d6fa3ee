"""Shared-cash groups, rebalancing and from_orders against stored vectorbt results.

The cases (``tests/data/vectorbt_group_cases.npz``, made by
``benchmarks/make_vectorbt_group_reference.py``) share one market shape, so the
grouped loop compiles once per mode and group layout.
"""
import json
import os

import numpy as np
import pandas as pd
import pytest
from helpers.finance import check_wrapped
from helpers.vectorbt_groups import (
    C,
    N,
    assert_orders_match,
    case_names,
    expected,
    load_cases,
    run_case,
)

from flowsim.finance import from_orders, from_signals

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DATA = os.path.join(ROOT, "tests", "data", "vectorbt_group_cases.npz")
#: vectorbt's types, names, index and values of the results (one group: Series, scalars)
WRAPPER = np.load(os.path.join(ROOT, "tests", "data", "vectorbt_wrapper_cases.npz"))
#: vectorbt's ``pf.orders`` of three cases: counts and fee sums per group, records_readable
#: (``benchmarks/make_vectorbt_group_orders_reference.py``)
ORDERS = np.load(os.path.join(ROOT, "tests", "data", "vectorbt_group_orders.npz"))


@pytest.fixture(scope="module")
def stored():
    return load_cases(DATA)


def check_order_records(orders, name):
    """``pf.orders`` reduces per group as vectorbt's grouped portfolio does (a scalar for
    one group) and ``records_readable`` is vectorbt's table, row for row."""
    meta = json.loads(str(ORDERS["meta"]))[name]
    for key, got in (("count", orders.count()), ("buy_count", orders.buy.count()),
                     ("sell_count", orders.sell.count()), ("fees_sum", orders.fees.sum())):
        if meta[key] is None:
            assert np.ndim(got) == 0, (name, key)
        else:
            assert isinstance(got, pd.Series) and got.name == meta[f"{key}_name"], (name, key)
            assert [str(v) for v in got.index] == meta[key], (name, key)
        np.testing.assert_allclose(np.atleast_1d(got), ORDERS[f"{name}/{key}"], rtol=1e-9,
                                   atol=1e-12)
    assert np.issubdtype(np.asarray(orders.count()).dtype, np.integer)
    table = orders.records_readable
    assert list(table.columns) == meta["titles"]
    for title in meta["titles"]:
        want = ORDERS[f"{name}/readable/{title}"]
        got = table[title]
        if title == "Timestamp":
            assert [t.isoformat() for t in got] == want.tolist()
        elif want.dtype.kind == "U":
            assert [str(v) for v in got] == want.tolist(), title
        else:
            np.testing.assert_allclose(got.to_numpy(), want, rtol=1e-9, atol=1e-12)


@pytest.mark.parametrize("name", case_names(DATA))
def test_groups_match_vectorbt(stored, name):
    data, cases = stored
    pf = run_case(cases[name], data)
    out = expected(data, name)
    assert_orders_match(pf.orders, out)
    if f"{name}/count" in ORDERS:
        check_order_records(pf.orders, name)
    np.testing.assert_array_equal(pf.call_seq().to_numpy(), out["call_seq"])
    for key in ("value", "cash", "returns"):
        got = np.asarray(getattr(pf, key)()).reshape(N, -1)
        np.testing.assert_allclose(got, out[key], rtol=1e-9, atol=1e-9)
    for key in ("total_return", "final_value", "max_drawdown", "sharpe_ratio"):
        np.testing.assert_allclose(np.atleast_1d(getattr(pf, key)()), out[key], rtol=1e-9)
    # vectorbt's shapes: one group gives Series named after it and scalars
    for key in ("value", "cash", "returns", "assets", "total_return", "final_value",
                "max_drawdown", "sharpe_ratio"):
        check_wrapped(getattr(pf, key)(), WRAPPER, name, key, pf.index)
    check_wrapped(pf.close, WRAPPER, name, "close", pf.index)
    stats = pf.stats()
    kinds = json.loads(str(WRAPPER["meta"]))[name]
    if "stats" in kinds:
        assert isinstance(stats, pd.Series) and stats.name == kinds["stats"]["name"], name
    else:
        assert isinstance(stats, pd.DataFrame), name
    np.testing.assert_allclose(np.atleast_1d(stats["end_value"]), out["final_value"],
                               rtol=1e-9)
    assert np.sum(stats["total_orders"]) == len(out["order/col"])


def test_call_seq_auto_sells_first(stored):
    """The same signals, all-in: "auto" frees the cash of a sell for the bar's buys."""
    data, cases = stored
    auto = run_case(cases["signals_auto_all_in"], data)
    default = run_case(cases["signals_default_all_in"], data)
    assert len(auto.orders) != len(default.orders)
    first = auto.orders.groupby("idx")["side"].agg(list)
    assert any(sides[0] == "sell" and "buy" in sides for sides in first)


def test_group_labels_and_levels():
    """A column level and plain labels as ``group_by`` (the stored cases' shapes, so the
    compiled loops are shared)."""
    levels = pd.MultiIndex.from_tuples([("x", "a"), ("x", "b"), ("y", "a")],
                                       names=["book", "asset"])
    close = pd.DataFrame(np.linspace(1, 2, N)[:, None] * [1.0, 2.0, 3.0], columns=levels)
    size = np.full((N, C), np.nan)
    size[0] = 1.0
    pf = from_orders(close, size, group_by="book", cash_sharing=True, call_seq="auto",
                     freq="1D")
    assert list(pf.value().columns) == ["x", "y"]
    np.testing.assert_allclose(pf.cash().to_numpy()[0], [100 - 1 - 2, 100 - 3])
    assert pf.orders.count().to_dict() == {"x": 2, "y": 1}
    assert pf.orders.records_readable["Column"].tolist() == list(levels)
    pf = from_orders(close, size, group_by=["p", "p", "q"], freq="1D")
    np.testing.assert_allclose(pf.init_cash(), [200.0, 100.0])
    np.testing.assert_allclose(pf.value().to_numpy()[-1], [200 + 1 + 2, 100 + 3])


@pytest.mark.parametrize("kwargs, message", [
    (dict(group_by=[0, 1, 0], cash_sharing=True), "next to each other"),
    (dict(group_by=[0, 1]), "2 labels but there are 3 columns"),
    (dict(group_by="asset"), "names a column level"),
    (dict(group_by=True, cash_sharing=True, call_seq="random"), "call_seq='random'"),
    (dict(group_by=True, cash_sharing=True, call_seq="sorted"), "call_seq must be one of"),
    (dict(group_by=True, cash_sharing=True, call_seq=np.full((4, 3), 3)),
     "exceeds bounds of the group"),
    (dict(size_type="targetweight"), "size_type must be one of"),
    (dict(init_cash="auto", group_by=[0, 0, 1]), "without cash_sharing is not implemented"),
    (dict(max_size=2.0), "['max_size'] not implemented"),
    (dict(slippage=-0.1), "slippage must be finite and >= 0"),
])
def test_from_orders_refuses_bad_input(kwargs, message):
    close = np.linspace(1, 2, 12).reshape(4, 3)
    with pytest.raises(ValueError) as info:
        from_orders(close, 1.0, **kwargs)
    assert message in str(info.value)


def test_from_orders_unknown_keyword():
    with pytest.raises(TypeError, match="unexpected keyword arguments \\['sizes'\\]"):
        from_orders(np.ones((3, 2)), sizes=1.0)


def test_shared_cash_sweep_refuses_other_modes(stored):
    """Grouped from_signals takes ``accumulate`` (test_finance_groups_keywords.py); a
    shared-cash sweep refuses it, naming it."""
    from flowsim.finance import signal_sweep, strategies
    data, _ = stored
    grid = pd.DataFrame({"window": [5], "lower": [30.0], "upper": [60.0]})
    with pytest.raises(ValueError, match="cash_sharing=True sweeps take vectorbt's defaults"
                                         ".*got \\['accumulate'\\]"):
        signal_sweep(strategies.rsi_thresholds, data["signals_auto_all_in/bars"][0], grid,
                     cash_sharing=True, accumulate=True, freq="1D")


def test_shared_cash_sweep_matches_grouped_from_signals(stored):
    """signal_sweep(cash_sharing=True): each row is the grouped from_signals of its
    signals, and threads give the same table."""
    import tensorflow as tf

    from flowsim.finance import signal_sweep, strategies
    data, cases = stored
    close = data["signals_auto_all_in/bars"][0]
    grid = pd.DataFrame({"window": [5, 9, 14, 5], "lower": [30.0, 35.0, 30.0, 40.0],
                         "upper": [60.0, 65.0, 70.0, 60.0], "sl_stop": [0.04, 0.1, 0.06, 0.02]})
    kw = dict(fees=0.001, freq="1D", cash_sharing=True, call_seq="auto")
    table = signal_sweep(strategies.rsi_thresholds, close, grid, **kw)
    assert len(table) == len(grid) and table["total_orders"].min() > 0
    assert table.equals(signal_sweep(strategies.rsi_thresholds, close, grid, backend="threads",
                                     **kw))
    params = tf.constant(grid[["window", "lower", "upper"]].to_numpy())
    sig = strategies.rsi_thresholds(params, {"close": tf.constant(close)})
    for row in (0, 3):
        pf = from_signals(close, sig["entries"].numpy()[:, row], sig["exits"].numpy()[:, row],
                          sl_stop=grid["sl_stop"][row], group_by=True, **kw)
        np.testing.assert_allclose(table["total_return"][row], pf.total_return(), rtol=1e-9)
        np.testing.assert_allclose(table["sharpe_ratio"][row], pf.sharpe_ratio(), rtol=1e-9)
        np.testing.assert_allclose(table["max_drawdown"][row], pf.max_drawdown(), rtol=1e-9)
        assert table["total_orders"][row] == len(pf.orders)
