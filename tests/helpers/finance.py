"""What the finance tests share: the stored group cases' portfolios and the check of a
result's shape against vectorbt's (``tests/data/vectorbt_wrapper_cases.npz``)::

    from helpers.finance import run_group_case, check_wrapped

    pf = run_group_case(case, data)          # a case of vectorbt_group_cases.npz
    check_wrapped(pf.value(), WRAPPER, "signals_auto_all_in", "value", pf.index)
"""
import json

import numpy as np
import pandas as pd

from flowsim.finance import from_orders, from_signals

#: bars and columns of the stored group cases
GROUP_BARS, GROUP_COLUMNS = 120, 3


def run_group_case(case, data):
    """The flowsim portfolio of a stored group case (``vectorbt_group_cases.npz``: its
    inputs as vectorbt got them, pandas on a daily index, columns ``a, b, c``)."""
    name = case["name"]
    index = pd.date_range("2021-01-01", periods=GROUP_BARS, freq="D")
    columns = pd.Index(["a", "b", "c"], name="asset")

    def frame(a):
        return pd.DataFrame(a, index=index, columns=columns)

    close, op, hi, lo = data[f"{name}/bars"]
    kw = dict(case["kwargs"], freq="1D")
    for key, a in zip(("open", "high", "low"), (op, hi, lo)):
        if key in case["ohlc"]:
            kw[key] = frame(a)
    for key in ("entries", "exits", "size", "call_seq"):
        if f"{name}/in/{key}" in data:
            a = data[f"{name}/in/{key}"]
            kw[key] = a if key == "call_seq" else frame(a)
    if case["kind"] == "signals":
        return from_signals(frame(close), **kw)
    return from_orders(frame(close), **kw)


def check_wrapped(got, stored, case, name, index):
    """``got`` (a portfolio's result) has vectorbt's type, name, index, columns and
    values (1e-9 relative) as stored for ``case`` / ``name`` in ``stored`` (the
    wrapper table); ``index`` is the portfolio's, a time series' index."""
    meta = json.loads(str(stored["meta"]))[case][name]
    what = f"{case}: {name}"
    kind = {pd.DataFrame: "DataFrame", pd.Series: "Series"}.get(type(got), "scalar")
    assert kind == meta["type"], (what, type(got))
    if kind == "scalar":
        assert np.ndim(got) == 0, what
    elif meta["index"] == "datetime":
        assert got.index.equals(index), what
    else:
        assert [str(c) for c in got.index] == meta["index"], (what, list(got.index))
    if kind == "Series":
        assert (None if got.name is None else str(got.name)) == meta["name"], (what, got.name)
    if kind == "DataFrame":
        assert [str(c) for c in got.columns] == meta["columns"], what
    ref = stored[f"{case}/{name}"]
    ours = np.asarray(got, dtype=np.float64)
    assert ours.shape == ref.shape, (what, ours.shape, ref.shape)
    np.testing.assert_allclose(ours, ref, rtol=1e-9, atol=1e-12, err_msg=what, strict=True)
