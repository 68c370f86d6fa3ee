"""Make the vectorbt reference of the shapes of a portfolio's results.

vectorbt wraps every result with its ``ArrayWrapper``: a Series ``close`` (every
input one-dimensional) gives time series as Series named after it and reductions as
scalars; a DataFrame gives DataFrames and Series; a ``group_by`` with one group
gives the per-group results as a Series named after the group (``grouped_ndim`` 1)
and the per-column ones (``assets()``, ``close``) as the inputs are shaped.

This script runs vectorbt on

* the accessor cases of ``benchmarks/make_vectorbt_accessor_reference.py`` with one
  column (a Series named ``x``, an unnamed Series, a one-column DataFrame) and one of
  three columns, through ``Portfolio.from_signals``;
* every group case of ``benchmarks/make_vectorbt_group_reference.py`` (one group,
  two groups, ungrouped),

and stores in ``tests/data/vectorbt_wrapper_cases.npz``, per case and accessor, the
type vectorbt returned, its name, its index (int64 ns; the columns for a DataFrame)
and its values, so the tests compare all four without vectorbt.

Needs the ``bench`` extra (vectorbt).  Run from the repository root::

    .venv/bin/python benchmarks/make_vectorbt_wrapper_reference.py
"""
import json
import os
import sys

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OUT = os.path.join(ROOT, "tests", "data", "vectorbt_wrapper_cases.npz")
sys.path.insert(0, ROOT)
sys.path.insert(0, os.path.join(ROOT, "benchmarks"))
import make_vectorbt_accessor_reference as accessor_ref  # noqa: E402
import make_vectorbt_group_reference as group_ref  # noqa: E402

from flowsim.testing import vectorbt_cases as vc  # noqa: E402

#: the accessor cases whose results' shapes are stored (and "series_unnamed": the
#: first of them with unnamed Series)
SIGNAL_CASES = ("series_long_stops", "series_short_costs", "one_column_frame",
                "long_stops_ohlc")
#: time series of a from_signals portfolio (per column)
SIGNAL_SERIES = ("value", "cash", "returns", "asset_value", "assets", "drawdown")
#: reductions of a from_signals portfolio
SIGNAL_REDUCED = ("total_return", "sharpe_ratio", "max_drawdown")
#: time series of a grouped portfolio, per group, then per column
GROUP_SERIES = ("value", "cash", "returns")
COLUMN_SERIES = ("assets", "close")
#: reductions of a grouped portfolio, per group
GROUP_REDUCED = ("total_return", "final_value", "max_drawdown", "sharpe_ratio")


def describe(value, with_values=True):
    """``(meta, values)``: vectorbt's type, name and labels of ``value``, its values
    (None without ``with_values``)."""
    import pandas as pd
    if isinstance(value, pd.DataFrame):
        meta = {"type": "DataFrame", "name": None, "columns": [str(c) for c in value.columns]}
    elif isinstance(value, pd.Series):
        meta = {"type": "Series", "name": None if value.name is None else str(value.name)}
    else:
        meta = {"type": "scalar", "name": None}
    if isinstance(value, (pd.Series, pd.DataFrame)):
        if isinstance(value.index, pd.DatetimeIndex):
            meta["index"] = "datetime"
        else:                                   # a reduction: one value per column
            meta["index"] = [str(c) for c in value.index]
    return meta, np.asarray(value, dtype=np.float64) if with_values else None


def _record(out, metas, case, name, value):
    meta, values = describe(value)
    metas.setdefault(case, {})[name] = meta
    out[f"{case}/{name}"] = values


def signal_portfolio(case, unnamed=False):
    """vectorbt's from_signals portfolio of an accessor case (its inputs as the
    accessor tests build them)."""
    import pandas as pd
    import vectorbt as vbt
    idx = pd.date_range("2021-01-01", periods=len(case["bars"]["close"]), freq=case["freq"])

    def frame(a):
        if case["layout"] == "series":
            return pd.Series(a[:, 0], index=idx, name=None if unnamed else "x")
        return pd.DataFrame(a, index=idx, columns=accessor_ref.COLUMNS
                            if case["layout"] == "frame" else ["x"])

    args = {k: frame(case["bars"][k]) for k in case["ohlc"]}
    args.update({k: frame(v) for k, v in case["signals"].items()})
    return vbt.Portfolio.from_signals(frame(case["bars"]["close"]), freq=case["freq"], **args,
                                      **case["kwargs"])


def signal_results(pf):
    out = {k: getattr(pf, k)() for k in SIGNAL_SERIES + SIGNAL_REDUCED}
    out["stats"] = pf.stats() if pf.wrapper.ndim == 1 else None
    return {k: v for k, v in out.items() if v is not None}


def group_results(pf):
    out = {k: getattr(pf, k)() for k in GROUP_SERIES + GROUP_REDUCED}
    out["assets"] = pf.assets()
    out["close"] = pf.close
    if pf.wrapper.grouped_ndim == 1:
        out["stats"] = pf.stats()
    return out


def _store_stats(out, metas, case, stats):
    """stats(): its type and name only (the values are the accessor and group-stats
    tables')."""
    meta, _ = describe(stats, with_values=False)
    metas.setdefault(case, {})["stats"] = meta


def main():
    import vectorbt as vbt
    out, metas = {"version": np.array(vbt.__version__)}, {}
    acc = {c["name"]: c for c in accessor_ref.cases()}
    runs = [(name, signal_portfolio(acc[name])) for name in SIGNAL_CASES]
    runs.append(("series_unnamed", signal_portfolio(acc[SIGNAL_CASES[0]], unnamed=True)))
    for name, pf in runs:
        for key, value in signal_results(pf).items():
            if key == "stats":
                _store_stats(out, metas, name, value)
            else:
                _record(out, metas, name, key, value)
    for case in group_ref.cases():
        kw = group_ref.inputs(case, vc.market(case["seed"], group_ref.N, group_ref.C))
        make = (vbt.Portfolio.from_signals if case["kind"] == "signals" else
                vbt.Portfolio.from_orders)
        for key, value in group_results(make(**kw)).items():
            if key == "stats":
                _store_stats(out, metas, case["name"], value)
            else:
                _record(out, metas, case["name"], key, value)
    out["meta"] = np.array(json.dumps(metas))
    np.savez_compressed(OUT, **out)
    for name, m in metas.items():
        print(name, {k: (v["type"], v["name"]) for k, v in m.items()})
    print(f"wrote {os.path.relpath(OUT, ROOT)} (vectorbt {vbt.__version__})")


if __name__ == "__main__":
    main()
