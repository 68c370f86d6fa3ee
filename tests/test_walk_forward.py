"""Walk-forward optimisation: vectorbt's rolling windows (stored splits of
``close.vbt.rolling_split``, made by benchmarks/make_walk_forward_reference.py), the
in-sample choice as pandas' ``idxmax`` makes it, and the same table on Flow, threads
and joblib."""
import json
import os

import numpy as np
import pandas as pd
import pytest
from helpers import ROOT

from flowsim.finance import bars, signal_sweep, strategies
from flowsim.finance.walkforward import rolling_split, walk_forward

SPLITS = json.load(open(os.path.join(ROOT, "tests", "data", "vectorbt_rolling_split.json")))
GRID = pd.DataFrame([(w, lo, hi) for w in (7, 14, 21) for lo in (20, 30) for hi in (70, 80)],
                    columns=["window", "lower", "upper"])
#: In- and out-of-sample sets of one length: one compiled sweep serves both.
WINDOWS = {"n": 3, "window_len": 300, "set_lens": (150,), "left_to_right": False}


def _close(n_bars, seed):
    frame = bars.generate_bars(n_bars, seed=seed)
    return pd.Series(frame["close"].to_numpy(), index=pd.DatetimeIndex(frame["date"]))


@pytest.fixture(scope="module")
def close():
    return _close(600, 3)


@pytest.fixture(scope="module")
def table(close):
    return walk_forward(strategies.rsi_thresholds, close, GRID, freq="1D", **WINDOWS)


@pytest.mark.parametrize("entry", SPLITS, ids=[json.dumps(e["kwargs"]) for e in SPLITS])
def test_windows_are_vectorbts(entry):
    kwargs = dict(entry["kwargs"], set_lens=tuple(entry["kwargs"].get("set_lens", ())))
    if "error" in entry:
        kind, message = entry["error"]
        assert kind == "ValueError"
        with pytest.raises(ValueError) as info:
            rolling_split(entry["bars"], **kwargs)
        assert str(info.value) == message
    else:
        got = [[list(s) for s in window] for window in rolling_split(entry["bars"], **kwargs)]
        assert got == entry["splits"]


def test_each_window_chooses_as_idxmax_and_runs_the_choice_out_of_sample(close, table):
    """The table against signal_sweep run by hand on each window's sets, with pandas'
    idxmax (first maximum, NaN skipped) choosing the in-sample row."""
    assert list(table["split"]) == [0, 1, 2]
    for w, sets in enumerate(rolling_split(len(close), **WINDOWS)):
        (f_in, n_in), (f_out, n_out) = sets
        row = table.iloc[w]
        assert (row["in_first"], row["in_bars"], row["out_first"], row["out_bars"]) == (
            f_in, n_in, f_out, n_out)
        ins = signal_sweep(strategies.rsi_thresholds, close.iloc[f_in:f_in + n_in], GRID,
                           freq="1D")
        best = ins["sharpe_ratio"].idxmax()
        assert row["row"] == best
        assert list(row[["window", "lower", "upper"]]) == list(GRID.iloc[best])
        outs = signal_sweep(strategies.rsi_thresholds, close.iloc[f_out:f_out + n_out],
                            GRID.iloc[[best]], freq="1D")
        for stat in ("total_return", "sharpe_ratio", "max_drawdown", "total_trades"):
            np.testing.assert_array_equal(row[f"out_{stat}"], outs[stat].iloc[0])
        assert row["in_sharpe_ratio"] == ins["sharpe_ratio"].iloc[best]


def test_min_trades_keeps_rows_that_never_trade_out(close):
    """vectorbt's Sharpe ratio of returns without spread is inf: a row that never
    trades wins unless min_trades leaves it out."""
    loose = walk_forward(strategies.rsi_thresholds, close, GRID, freq="1D", **WINDOWS,
                         metric="total_trades", maximize=False)
    assert (loose["in_total_trades"] == 0).any()
    strict = walk_forward(strategies.rsi_thresholds, close, GRID, freq="1D", **WINDOWS,
                          min_trades=1, metric="total_return")
    for w, sets in enumerate(rolling_split(len(close), **WINDOWS)):
        (f_in, n_in), _ = sets
        ins = signal_sweep(strategies.rsi_thresholds, close.iloc[f_in:f_in + n_in], GRID,
                           freq="1D")
        assert strict["row"].iloc[w] == ins["total_return"].where(
            ins["total_trades"] >= 1).idxmax()


def test_several_assets_choose_each_their_row(close):
    both = pd.DataFrame({"a": close, "b": _close(600, 9).to_numpy()}, index=close.index)
    table = walk_forward(strategies.rsi_thresholds, both, GRID, freq="1D", **WINDOWS)
    assert list(table["asset"]) == ["a", "b"] * 3
    alone = walk_forward(strategies.rsi_thresholds, both["b"], GRID, freq="1D", **WINDOWS)
    b_rows = table[table["asset"] == "b"].drop(columns="asset").reset_index(drop=True)
    pd.testing.assert_frame_equal(b_rows, alone)


@pytest.mark.costly
@pytest.mark.timeout(900)
@pytest.mark.parametrize("backend, options", [("threads", {}), ("joblib", {"n_jobs": 2})])
def test_same_table_on_every_backend(close, table, backend, options):
    other = walk_forward(strategies.rsi_thresholds, close, GRID, freq="1D", backend=backend,
                         flow_kwargs=options, **WINDOWS)
    assert other.equals(table)


@pytest.mark.parametrize("kwargs, message", [
    ({"metric": "sharpe"}, "metric must be one of flowsim.finance.STATS"),
    ({"set_lens": ()}, r"set_lens must give at least one set"),
    ({"params": GRID.iloc[:0]}, "params must have at least one row"),
])
def test_bad_inputs_are_refused_naming_them(close, kwargs, message):
    call = {"n": 3, "window_len": 300, "set_lens": (150,), "params": GRID, **kwargs}
    params = call.pop("params")
    with pytest.raises(ValueError, match=message):
        walk_forward(strategies.rsi_thresholds, close, params, **call)
