"""The portfolio's vectorbt accessors against stored vectorbt results.

``tests/data/vectorbt_accessor_cases.npz`` is made by
``benchmarks/make_vectorbt_accessor_reference.py``.
"""
import json
import os

import numpy as np
import pandas as pd
import pytest
from helpers.finance import check_wrapped

from flowsim.finance import from_signals
from flowsim.finance.portfolio import PORTFOLIO_STATS

# One pytest-xdist unit with test_finance.py, run after it: the portfolios here have
# its shapes and keywords, so they reuse its compiled from_signals kernels.
pytestmark = pytest.mark.xdist_group("tests/test_finance.py")

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DATA = np.load(os.path.join(ROOT, "tests", "data", "vectorbt_accessor_cases.npz"))
#: vectorbt's types, names, index and values of results (made by
#: benchmarks/make_vectorbt_wrapper_reference.py)
WRAPPER = np.load(os.path.join(ROOT, "tests", "data", "vectorbt_wrapper_cases.npz"))
CASES = json.loads(str(DATA["cases"]))
TITLES = json.loads(str(DATA["titles"]))
COLUMNS = ["a", "b", "c"]
SERIES = ("total_return", "sharpe_ratio", "max_drawdown", "trades_win_rate", "trades_count",
          "positions_count", "drawdowns_count", "drawdowns_max_drawdown", "orders_count",
          "orders_buy_count", "orders_fees_sum")
#: the stats() rows stored as index values (int64 ns)
STAMPED = ("start", "end")


def _assert_close(ours, ref, what, rtol=1e-9):
    """1e-9 relative (NaN and inf where vectorbt has them)."""
    np.testing.assert_allclose(np.asarray(ours, dtype=np.float64), ref, rtol=rtol,
                               atol=rtol * 1e-12, err_msg=what, strict=True)


def _portfolio(meta, series_name="x"):
    name = meta["name"]
    bars = {k: DATA[f"{name}/bars/{k}"] for k in ["close"] + meta["ohlc"]}
    index = pd.date_range("2021-01-01", periods=len(bars["close"]), freq=meta["freq"])

    def frame(a):
        if meta["layout"] == "series":
            return pd.Series(a[:, 0], index=index, name=series_name)
        return pd.DataFrame(a, index=index, columns=COLUMNS if meta["layout"] == "frame" else
                            ["x"])

    args = {k: frame(bars[k]) for k in meta["ohlc"]}
    args.update({k: frame(DATA[f"{name}/signal/{k}"]) for k in meta["signals"]})
    return from_signals(frame(bars["close"]), freq=meta["freq"], **args, **meta["kwargs"])


@pytest.fixture(scope="module")
def portfolios():
    return {meta["name"]: _portfolio(meta) for meta in CASES}


def _check_records(records, kind, name):
    ref = {k[len(f"{name}/{kind}/"):]: DATA[k] for k in DATA.files
           if k.startswith(f"{name}/{kind}/") and "/readable/" not in k}
    ours = records.records
    assert list(ours.columns) == list(ref), (name, kind)
    for f, theirs in ref.items():
        if theirs.dtype.kind == "i":
            assert ours[f].dtype.kind == "i" and np.array_equal(ours[f], theirs), (name, kind, f)
        else:
            _assert_close(ours[f], theirs, f"{name}: {kind} {f}")
    readable = records.records_readable
    assert list(readable.columns) == TITLES[kind], (name, kind)
    prefix = f"{name}/{kind}/readable/"
    for key in (k for k in DATA.files if k.startswith(prefix)):
        title, theirs = key[len(prefix):], DATA[key]
        got = readable[title].to_numpy()
        if theirs.dtype.kind == "i":                       # timestamps, as int64 ns
            got = got.astype("datetime64[ns]").astype(np.int64)
        assert np.array_equal(np.asarray(got, dtype=theirs.dtype), theirs), (name, kind, title)


def _check_stats(stats, name, prefix):
    """Every stored stats() row, in vectorbt's order (``stats.index``: our names)."""
    stored = [k[len(f"{name}/{prefix}/"):] for k in DATA.files
              if k.startswith(f"{name}/{prefix}/")]
    assert sorted(stats.index) == sorted(stored) and list(stats.index) == list(
        PORTFOLIO_STATS), name
    for k in stats.index:
        theirs = DATA[f"{name}/{prefix}/{k}"]
        if k in STAMPED:
            assert pd.Timestamp(stats[k]).value == theirs, (name, k)
        else:
            _assert_close(stats[k], theirs, f"{name}: {prefix} {k}")


def _reduced(pf, name):
    """Each reduction, checked to be of vectorbt's type (a Series per column, or a
    scalar for Series inputs), as ``{key: values [columns]}``."""
    got = {"total_return": pf.total_return(), "sharpe_ratio": pf.sharpe_ratio(),
           "max_drawdown": pf.max_drawdown(), "trades_win_rate": pf.trades.win_rate(),
           "trades_count": pf.trades.count(), "positions_count": pf.positions.count(),
           "drawdowns_count": pf.drawdowns.count(),
           "drawdowns_max_drawdown": pf.drawdowns.max_drawdown(),
           "orders_count": pf.orders.count(), "orders_buy_count": pf.orders.buy.count(),
           "orders_fees_sum": pf.orders.fees_paid(),
           "sharpe_ratio_risk_free": pf.sharpe_ratio(risk_free=0.0002)}
    types = json.loads(str(DATA[f"{name}/types"]))
    for k, v in got.items():
        assert type(v).__name__ == types[k], (name, k, type(v))
        if types[k] == "Series":
            assert list(v.index) == list(pf.columns), (name, k)
    return {k: np.atleast_1d(np.asarray(v, dtype=np.float64)) for k, v in got.items()}


@pytest.mark.parametrize("meta", CASES, ids=[m["name"] for m in CASES])
def test_accessors_match_vectorbt(portfolios, meta):
    name = meta["name"]
    pf = portfolios[name]
    got = _reduced(pf, name)
    for k in SERIES:
        _assert_close(got[k], DATA[f"{name}/{k}"], f"{name}: {k}")
    # A column that never trades has constant returns: a standard deviation of exactly
    # 0 and vectorbt's value for it, inf (vectorbt's two-pass deviation leaves rounding
    # noise there, about 1e-20, and a Sharpe ratio of about -1e16).
    idle = got["trades_count"] == 0
    rf = got["sharpe_ratio_risk_free"]
    theirs = DATA[f"{name}/sharpe_ratio_risk_free"]
    _assert_close(rf[~idle], theirs[~idle], f"{name}: sharpe_ratio(risk_free)")
    assert np.all(rf[idle] == np.inf) and np.all(np.abs(theirs[idle]) > 1e12), name
    cash = pf.cash()
    if pf.ndim == 2:
        assert list(cash.columns) == list(pf.columns)
    assert cash.index.equals(pf.value().index)
    ref = DATA[f"{name}/cash"]
    _assert_close(cash.to_numpy().reshape(ref.shape), ref, f"{name}: cash")
    one = pf.stats(column=meta["column"])
    assert one.name == meta["column"]
    _check_stats(one, name, "stats_column")
    for kind in ("orders", "trades", "positions", "drawdowns"):
        _check_records(getattr(pf, kind), kind, name)
    # vectorbt's mapped fields reduce per column (not over all the records)
    types = json.loads(str(DATA[f"{name}/types"]))
    fees = pf.orders.fees.sum()
    assert type(fees).__name__ == types["orders_fees_sum"], (name, type(fees))
    _assert_close(np.atleast_1d(fees), DATA[f"{name}/orders_fees_sum"], f"{name}: fees.sum")
    col, pnl = DATA[f"{name}/trades/col"], DATA[f"{name}/trades/pnl"]
    for field, theirs in (("pnl", pnl), ("returns", DATA[f"{name}/trades/return"])):
        mapped = getattr(pf.trades, field)
        want = [theirs[col == j] for j in range(len(pf.columns))]
        _assert_close(np.atleast_1d(mapped.sum()), [np.sum(v) for v in want],
                      f"{name}: {field}.sum", rtol=1e-12)
        _assert_close(np.atleast_1d(mapped.max()), [np.max(v) if len(v) else np.nan
                                                    for v in want], f"{name}: {field}.max")


def test_series_inputs_reduce_as_vectorbt(portfolios):
    """A Series ``close`` gives scalars and stats() a Series named after it; a
    one-column DataFrame keeps one value per column, as in vectorbt."""
    for name in ("series_long_stops", "series_short_costs"):
        pf = portfolios[name]
        assert pf.ndim == 1 and pf.name == "x"
        kind, label = json.loads(str(DATA[f"{name}/types"]))["stats"].split(":")
        stats = pf.stats()
        assert type(stats).__name__ == kind and stats.name == label, name
        _check_stats(stats, name, "stats")
        assert stats.attrs["ann_factor"] == 365.0
    frame = portfolios["one_column_frame"]
    assert frame.ndim == 2 and frame.name is None
    assert isinstance(frame.stats(), pd.DataFrame) and list(frame.stats().index) == ["x"]
    series = portfolios["series_long_stops"]
    assert series.total_return() == frame.total_return()["x"]
    assert series.stats().drop(["start", "end"]).astype(float).equals(
        frame.stats().loc["x"].drop(["start", "end"]).astype(float))


@pytest.mark.parametrize("name", ["series_long_stops", "series_short_costs",
                                  "one_column_frame", "long_stops_ohlc", "series_unnamed"])
def test_results_are_shaped_as_vectorbt(portfolios, name):
    """vectorbt's wrapper: a Series ``close`` gives time series as Series named after it
    (None when unnamed) and scalars; DataFrames give DataFrames and Series."""
    if name == "series_unnamed":
        meta = next(m for m in CASES if m["name"] == "series_long_stops")
        pf = _portfolio(meta, series_name=None)
    else:
        pf = portfolios[name]
    for key in ("value", "cash", "returns", "asset_value", "assets", "drawdown",
                "total_return", "sharpe_ratio", "max_drawdown"):
        check_wrapped(getattr(pf, key)(), WRAPPER, name, key, pf.index)
    theirs = WRAPPER[f"{name}/value"].reshape(len(pf.index), -1)[-1]   # vectorbt's value
    _assert_close(np.atleast_1d(pf.final_value()), theirs, f"{name}: final_value")
    assert type(pf.close) is type(pf.value()) and pf.close.index.equals(pf.index)
    kinds = json.loads(str(WRAPPER["meta"]))[name]
    if "stats" in kinds:
        stats = pf.stats()
        assert isinstance(stats, pd.Series) and stats.name == kinds["stats"]["name"], name


def test_stored_cases_cover_what_they_name(portfolios):
    """Every kind of record shows up: merged positions, no trades, an active drawdown."""
    acc = portfolios["accumulate_partial_exits"]
    assert len(acc.positions) < len(acc.trades)
    assert portfolios["no_trades"].trades.count().sum() == 0
    assert np.isnan(portfolios["no_trades"].trades.win_rate()).all()
    fall = portfolios["never_recovered"].drawdowns.records_readable
    assert (fall["Status"] == "Active").sum() == 2
    hourly = portfolios["hourly_both"].sharpe_ratio()
    assert hourly.attrs["ann_factor"] == 365 * 24 and not hourly.attrs["freq_assumed"]


def test_trades_keep_the_table_of_lower_case_names(portfolios):
    pf = portfolios["long_short_signals_costs"]
    trades = pf.trades
    frame = trades.frame
    assert list(frame.columns) == ["column", "size", "entry_idx", "entry_price", "entry_fees",
                                   "exit_idx", "exit_price", "exit_fees", "pnl", "return",
                                   "direction", "status"]
    assert len(trades) == len(frame) == trades.count().sum()
    closed = trades[trades["status"] == "closed"]
    assert len(closed) == pf.stats()["total_closed_trades"].sum()
    assert np.array_equal(trades["pnl"], trades.records["pnl"])
    assert trades.shape == frame.shape                     # DataFrame attributes read it
    readable = trades.records_readable
    assert np.array_equal(frame["column"], readable["Column"])
    assert np.array_equal(frame["direction"].str.capitalize(), readable["Direction"])
    assert repr(trades).startswith(f"Trades: {len(frame)} records over 3 columns\n")
    assert "Exit Trade Id" in repr(trades)


def test_orders_keep_the_table_of_lower_case_names(portfolios):
    pf = portfolios["long_short_signals_costs"]
    orders = pf.orders
    assert list(orders.frame.columns) == ["column", "idx", "size", "price", "fees", "side"]
    assert len(orders) == len(orders.frame) == orders.count().sum()
    buys = orders[orders["side"] == "buy"]
    assert len(buys) == orders.buy.count().sum() == len(orders) - orders.sell.count().sum()
    assert np.array_equal(orders.records_readable["Side"].str.lower(), orders["side"])
    np.testing.assert_allclose(orders.fees_paid(), pf.stats()["total_fees_paid"], rtol=1e-12)
    assert orders.groupby("column").size().to_dict() == orders.count().to_dict()
    assert repr(orders).startswith(f"Orders: {len(orders)} records over 3 columns\n")


def test_plot_draws_vectorbts_default_subplots(portfolios):
    import matplotlib
    matplotlib.use("Agg")
    pf = portfolios["long_short_signals_costs"]
    fig = pf.plot(column="a")
    assert [ax.get_title() for ax in fig.axes] == ["Orders", "Trade PnL", "Cumulative Returns"]
    orders, pnl, cum = fig.axes
    close = DATA["long_short_signals_costs/bars/close"][:, 0]
    assert np.array_equal(orders.lines[0].get_ydata(), close)
    n_orders = sum(len(c.get_offsets()) for c in orders.collections)
    assert n_orders == (pf.orders["column"] == "a").sum()
    n_trades = sum(len(c.get_offsets()) for c in pnl.collections)
    assert n_trades == pf.trades.count()["a"]
    value = pf.value()["a"].to_numpy()
    assert np.allclose(cum.lines[1].get_ydata(), value / 100.0)
    only = pf.plot(column="b", subplots="cum_returns")
    assert len(only.axes) == 1
    matplotlib.pyplot.close("all")


def test_bad_inputs_name_the_argument(portfolios):
    pf = portfolios["long_stops_ohlc"]
    with pytest.raises(KeyError, match=r"column='z' is not a column of this portfolio; its "
                                       r"columns are \['a', 'b', 'c'\]"):
        pf.stats(column="z")
    with pytest.raises(KeyError, match=r"column=\['a'\] is not a column"):
        pf.stats(column=["a"])
    with pytest.raises(ValueError, match=r"the portfolio has 3 columns: give column= one of "
                                         r"\['a', 'b', 'c'\]"):
        pf.plot()
    with pytest.raises(KeyError, match="column='z' is not a column"):
        pf.plot(column="z")
    with pytest.raises(ValueError, match=r"subplots must be some of \['orders', 'trade_pnl', "
                                         r"'cum_returns'\], got \['value'\]"):
        pf.plot(column="a", subplots=("value",))
    with pytest.raises(ValueError, match="risk_free must be a finite number .* got 'x'"):
        pf.sharpe_ratio(risk_free="x")
