"""from_signals lines up pandas inputs and reads the bar length as vectorbt does."""
import os
import warnings

import numpy as np
import pandas as pd
import pytest

from flowsim.finance import from_signals, signal_sweep, strategies
from flowsim.finance.align import bar_length, conform
from flowsim.testing import alignment_cases as ref

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

RATIOS = ("sharpe_ratio", "calmar_ratio", "omega_ratio", "sortino_ratio")


@pytest.fixture(scope="module")
def stored():
    return pd.read_csv(os.path.join(ROOT, "tests", "data", "vectorbt_alignment.csv"),
                       comment="#")


def _check(stats, rows, name):
    assert [ref.label(c) for c in stats.index] == rows["column"].tolist(), name
    for k in ref.METRICS:
        ours, theirs = stats[k].to_numpy(), rows[k].to_numpy()
        err = np.abs(ours - theirs) / np.abs(theirs)
        assert err.max() <= 1e-9, (name, k, ours, theirs)


@pytest.mark.parametrize("name", list(ref.cases()))
def test_stored_vectorbt_cases(stored, name):
    spacing, freq, order = ref.cases()[name]
    close, ent, ext = ref.frames(spacing, order)
    with warnings.catch_warnings():
        warnings.simplefilter("error")             # nothing is assumed here
        pf = from_signals(close, ent, ext, fees=0.001, freq=freq)
        stats = pf.stats()
    rows = stored[stored["case"] == name]
    assert len(rows) == 2
    assert pf.freq.total_seconds() == rows["freq_seconds"].iloc[0]
    assert stats.attrs["freq"] == pf.freq and stats.attrs["freq_assumed"] is False
    _check(stats, rows, name)


def test_hourly_bars_without_freq_are_annualised_hourly(stored):
    close, ent, ext = ref.frames("h", ["a", "b"])
    hourly = from_signals(close, ent, ext, fees=0.001).stats()
    daily = from_signals(close, ent, ext, fees=0.001, freq="1D").stats()
    rows = stored[stored["case"] == "hourly_none"]
    _check(hourly, rows, "hourly_none")
    # the ratio the issue saw: sqrt(24) between hourly and daily annualisation
    assert np.allclose(hourly["sharpe_ratio"] / daily["sharpe_ratio"], np.sqrt(24), rtol=1e-12)


def test_same_bits_as_before_for_daily_bars():
    close, ent, ext = ref.frames("D", ["a", "b"])
    inferred = from_signals(close, ent, ext, fees=0.001).stats()
    given = from_signals(close.to_numpy(), ent.to_numpy(), ext.to_numpy(), fees=0.001,
                         freq="1D").stats()
    for k in inferred.columns.drop(["start", "end"]):     # index values: dates, positions
        assert np.array_equal(inferred[k].to_numpy(), given[k].to_numpy(), equal_nan=True), k


def test_freq_strings_read_as_vectorbt_reads_them():
    index = pd.date_range("2024-01-01", periods=5, freq="h")
    for freq, seconds in (("D", 86400), ("1d", 86400), ("1D", 86400), ("h", 3600),
                          ("1h", 3600), ("15min", 900), (pd.Timedelta(hours=2), 7200)):
        step, assumed = bar_length(freq, index)
        assert step.total_seconds() == seconds and not assumed, freq
    assert bar_length(None, index) == (pd.Timedelta(hours=1), False)
    # no index frequency in the object, pandas infers it
    assert bar_length(None, pd.DatetimeIndex(list(index))) == (pd.Timedelta(hours=1), False)


def test_assumed_freq_is_said():
    close, ent, ext = ref.inputs()
    irregular = pd.DatetimeIndex(pd.date_range("2024-01-01", periods=250, freq="D")
                                 .delete(np.arange(3, 250, 5))[:200])
    for c, e in ((close, ent), (pd.DataFrame(close, index=irregular),
                                pd.DataFrame(ent, index=irregular))):
        with pytest.warns(UserWarning, match="one-day bars assumed for sharpe_ratio"):
            pf = from_signals(c, e, ext, fees=0.001)
        assert pf.freq_assumed and pf.freq == pd.Timedelta("1D")
        stats = pf.stats()
        assert stats.attrs["freq_assumed"] is True and stats.attrs["ann_factor"] == 365.0
    with pytest.warns(UserWarning, match="business|BusinessDay|no fixed frequency"):
        from_signals(pd.Series(close[:, 0], index=pd.bdate_range("2024-01-01", periods=200)),
                     ent[:, 0], ext[:, 0])


def test_freq_refused_where_vectorbt_refuses():
    close, ent, ext = ref.inputs()
    for freq in ("fortnight", "B"):
        with pytest.raises(ValueError, match="freq and year_freq must be pandas timedeltas"):
            from_signals(close, ent, ext, freq=freq)


def test_shifted_index_is_refused_naming_the_argument():
    close, ent, ext = ref.frames("D", ["a", "b"])
    shifted = ent.shift(3, freq="D")
    cases = [(dict(entries=shifted), "entries has another index than close"),
             (dict(exits=ext.shift(3, freq="D")), "exits has another index than close"),
             (dict(entries=ent.iloc[::-1]), "entries has another index than close"),
             (dict(entries=ent.rename_axis("date")), "entries has another index than close"),
             (dict(high=close.shift(3, freq="D")), "high has another index than close")]
    for kw, msg in cases:
        args = dict(close=close, entries=ent, exits=ext, fees=0.001)
        args.update(kw)
        with pytest.raises(ValueError, match=msg):
            from_signals(**args)
    with pytest.raises(ValueError, match="Broadcasting index is not allowed"):
        from_signals(close, shifted, ext)
    with pytest.raises(ValueError, match="open has another index than close"):
        signal_sweep(strategies.rsi_thresholds, close, pd.DataFrame(
            {"window": [5], "lower": [30.0], "upper": [70.0]}), open=close.shift(1, freq="D"),
            freq="1D")


def test_plain_arrays_and_range_indexes_match_by_position():
    close, ent, ext = ref.frames("D", ["a", "b"])
    base = from_signals(close, ent, ext, fees=0.001)
    for e in (ent.to_numpy(), ent.reset_index(drop=True)):
        pf = from_signals(close, e, ext, fees=0.001)
        assert pf.columns == ["a", "b"] and pf.index.equals(close.index)
        assert pf.value().equals(base.value())


def test_reordered_columns_are_labelled_as_vectorbt_labels_them(stored):
    # matched by position (vectorbt neither aligns nor refuses them), labelled with
    # both orders: ('b', 'a'), ('a', 'b') instead of close's names
    close, ent, ext = ref.frames("D", ["b", "a"])
    stats = from_signals(close, ent, ext, fees=0.001).stats()
    assert isinstance(stats.index, pd.MultiIndex)
    _check(stats, stored[stored["case"] == "daily_reordered"], "daily_reordered")


def test_columns_aligned_by_shared_level():
    # signals on (window, symbol) columns against closes on symbol: aligned by symbol
    close, ent, ext = ref.frames("D", ["a", "b"])
    close = close.rename_axis("symbol", axis=1)
    wide = pd.MultiIndex.from_product([[10, 20], ["b", "a"]], names=["window", "symbol"])
    ent4 = pd.DataFrame(np.concatenate([ent[["b", "a"]].to_numpy(), ~ent[["b", "a"]]
                                        .to_numpy()], axis=1), index=close.index, columns=wide)
    pf = from_signals(close, ent4, ext.to_numpy()[:, [1, 0, 1, 0]], fees=0.001)
    assert pf.columns == list(wide)
    by_hand = from_signals(close[["b", "a", "b", "a"]].to_numpy(), ent4.to_numpy(),
                           ext.to_numpy()[:, [1, 0, 1, 0]], fees=0.001, freq="1D")
    assert np.array_equal(pf.value().to_numpy(), by_hand.value().to_numpy())


def test_columns_refused_when_they_cannot_be_matched():
    close, ent, ext = ref.frames("D", ["a", "b"])
    three = pd.concat([ent, ent["a"].rename("c")], axis=1)
    with pytest.raises(ValueError, match="close has 2 columns and entries 3, and their column "
                                         "labels share no level"):
        from_signals(close, three, ext)


def test_conform_keeps_plain_inputs():
    args = {"close": np.ones((4, 2)), "entries": None}
    assert conform(args) == (args, None, None)


def test_signal_sweep_reads_freq_from_the_index():
    from flowsim.finance import signal_simulation
    close, _, _ = ref.frames("h", ["a", "b"])
    grid = pd.DataFrame({"window": [5], "lower": [30.0], "upper": [70.0]})
    sim, _, assets = signal_simulation(strategies.rsi_thresholds, close, grid)
    assert assets == ["a", "b"]
    assert sim.kernel.ann == 365 * 24 and sim.kernel.freq == pd.Timedelta(hours=1)
    assert not sim.kernel.freq_assumed
    with pytest.warns(UserWarning, match="plain arrays have no index"):
        sim, _, _ = signal_simulation(strategies.rsi_thresholds, close.to_numpy(), grid)
    assert sim.kernel.ann == 365 and sim.kernel.freq_assumed


def test_per_column_keywords_labelled_otherwise_are_refused():
    close, ent, ext = ref.frames("D", ["a", "b"])
    with pytest.raises(ValueError, match=r"fees is labelled \['b', 'a'\] but the columns have "
                                         r"\['a', 'b'\]"):
        from_signals(close, ent, ext, fees=pd.Series([0.001, 0.002], index=["b", "a"]))
    with pytest.raises(ValueError, match="sl_stop is labelled"):
        from_signals(close, ent, ext, sl_stop=pd.Series([0.1, 0.2], index=["x", "y"]))
    ordered = from_signals(close, ent, ext, fees=pd.Series([0.001, 0.002], index=["a", "b"]))
    plain = from_signals(close, ent, ext, fees=[0.001, 0.002])
    assert ordered.value().equals(plain.value())
