"""Make the vectorbt reference of grouped from_signals with its order keywords.

Each case is a random-walk market (``flowsim.testing.vectorbt_cases.market``, a
fixed seed, 120 daily bars x 3 assets, the shape of
``make_vectorbt_group_reference.py``'s cases) with random signals and one of the
keywords a shared-cash run (``group_by=True, cash_sharing=True``, mostly
``call_seq="auto"``) reads: ``upon_opposite_entry``, ``accumulate``,
``stop_entry_price``, ``stop_exit_price``, ``lock_cash``, ``init_cash="auto"`` /
``"autoalign"``, per-bar ``size`` / ``fees`` / ``sl_stop`` and ``direction`` per
column.  vectorbt runs each case, and once without its keyword to check that the
keyword changes the orders; ``tests/data/vectorbt_group_keyword_cases.npz`` keeps
the inputs (the arrays, the cases as JSON) with vectorbt's order records, value,
cash and initial cash per group, so the tests rebuild every call without vectorbt.

Needs the ``bench`` extra (vectorbt); run from the repository root as the other
``make_vectorbt_*_reference.py`` scripts are run.
"""
import os
import sys

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OUT = os.path.join(ROOT, "tests", "data", "vectorbt_group_keyword_cases.npz")
sys.path.insert(0, ROOT)
sys.path.insert(0, os.path.join(ROOT, "benchmarks"))
import make_vectorbt_group_reference as group_ref  # noqa: E402

N, C, START = group_ref.N, group_ref.C, group_ref.START
SHARED = {"group_by": True, "cash_sharing": True, "call_seq": "auto"}
OHL = ("open", "high", "low")
#: The cases with per-bar keywords: two cash groups (they share one compiled loop).
TWO_GROUPS = [0, 0, 1]


def _case(name, seed, keyword, *, shorts=False, ohlc=(), rate=0.15, per_bar=(), price=False,
          **kw):
    """A case: ``keyword`` (the one it checks; a tuple for several) is in ``kw``;
    ``per_bar``: keywords given as ``[bars, columns]`` arrays; ``price``: orders
    fill at the bar's open."""
    rng = np.random.default_rng(seed + 7000)
    arrays = {"entries": rng.random((N, C)) < rate, "exits": rng.random((N, C)) < rate}
    if shorts:
        arrays["short_entries"] = rng.random((N, C)) < rate
        arrays["short_exits"] = rng.random((N, C)) < rate
    lows = {"size": 0.5, "fees": 0.0, "sl_stop": 0.02}
    spans = {"size": 1.5, "fees": 0.004, "sl_stop": 0.05}
    for name_ in per_bar:
        arrays[name_] = lows[name_] + spans[name_] * rng.random((N, C))
    keywords = keyword if isinstance(keyword, tuple) else (keyword,)
    return {"name": name, "seed": seed, "keywords": list(keywords), "ohlc": list(ohlc),
            "price": price, "arrays": arrays, "kwargs": dict(SHARED, **kw)}


def _order_case(name, seed, keyword, **kw):
    """A from_orders case: random sizes (NaN: no order) on 30 % of the bars."""
    rng = np.random.default_rng(seed + 7000)
    size = np.where(rng.random((N, C)) < 0.3, rng.standard_normal((N, C)), np.nan)
    return {"name": name, "kind": "orders", "seed": seed, "keywords": [keyword], "ohlc": [],
            "price": False, "arrays": {"size": size}, "kwargs": dict(SHARED, **kw)}


def cases():
    """``[{name, seed, keywords, ohlc, price, arrays, kwargs}]``: the stored cases."""
    return [
        _case("opposite_close", 91, "upon_opposite_entry", shorts=True,
              upon_opposite_entry="close", size=30.0, size_type="value"),
        _case("opposite_ignore", 92, "upon_opposite_entry", shorts=True,
              upon_opposite_entry="ignore", size=0.5, fees=0.001),
        _case("accumulate_both", 93, "accumulate", shorts=True, accumulate=True, size=0.4,
              fees=0.001),
        _case("accumulate_addonly_stop", 94, "accumulate", ohlc=OHL, accumulate="addonly",
              size=20.0, size_type="value", sl_stop=0.03),
        _case("accumulate_removeonly_reverse", 95, ("accumulate", "upon_opposite_entry"),
              shorts=True, per_bar=("size",), accumulate="removeonly",
              upon_opposite_entry="reverse", group_by=TWO_GROUPS),
        _case("stop_entry_fillprice", 96, "stop_entry_price", ohlc=OHL,
              stop_entry_price="fillprice", sl_stop=0.03, tp_stop=0.05, slippage=0.002,
              fees=0.001),
        _case("stop_entry_price_open", 97, "stop_entry_price", ohlc=OHL, price=True,
              stop_entry_price="price", sl_stop=0.03, sl_trail=True),
        _case("stop_exit_stopmarket", 98, "stop_exit_price", ohlc=OHL,
              stop_exit_price="stopmarket", sl_stop=0.03, tp_stop=0.04, slippage=0.003),
        _case("stop_exit_close", 99, "stop_exit_price", shorts=True, ohlc=OHL,
              stop_exit_price="close", sl_stop=0.03, slippage=0.003),
        _case("lock_cash", 100, "lock_cash", shorts=True, lock_cash=True, size=1.5),
        _case("init_cash_auto", 101, "init_cash", shorts=True, init_cash="auto", size=1.0,
              fees=0.001),
        _case("init_cash_autoalign", 102, "init_cash", per_bar=("size",),
              init_cash="autoalign", group_by=TWO_GROUPS),
        _case("per_bar_arrays", 103, ("size", "fees", "sl_stop"), ohlc=OHL,
              per_bar=("size", "fees", "sl_stop"), group_by=TWO_GROUPS),
        _case("direction_per_column", 104, "direction", size=1.0,
              direction=["longonly", "both", "shortonly"]),
        _order_case("orders_lock_cash", 105, "lock_cash", lock_cash=True, fees=0.001),
        _order_case("orders_init_cash_auto", 106, "init_cash", init_cash="auto", fees=0.001),
    ]


def inputs(case, close_ohlc, without=()):
    """vectorbt's keyword arguments of ``case`` (pandas inputs on a daily index),
    leaving the keywords ``without`` out."""
    import pandas as pd
    index = pd.date_range(START, periods=N, freq="D")
    columns = pd.Index(["a", "b", "c"], name="asset")

    def frame(a):
        return pd.DataFrame(a, index=index, columns=columns)

    close, op, hi, lo = close_ohlc
    kw = {k: v for k, v in case["kwargs"].items() if k not in without}
    kw.update(close=frame(close), freq="1D")
    for name, a in zip(OHL, (op, hi, lo)):
        if name in case["ohlc"]:
            kw[name] = frame(a)
    if case["price"]:
        kw["price"] = frame(op)
    kw.update({k: frame(v) for k, v in case["arrays"].items() if k not in without})
    if "init_cash" in without:
        kw["init_cash"] = 1000.0
    return kw


def run_vectorbt(case, close_ohlc, without=()):
    """vectorbt's results of ``case``: ``{name: array}``."""
    import vectorbt as vbt
    kind = case.get("kind", "signals")
    make = vbt.Portfolio.from_orders if kind == "orders" else vbt.Portfolio.from_signals
    pf = make(**inputs(case, close_ohlc, without))
    out = group_ref.order_records(pf)
    out.update({"value": group_ref.per_group(pf.value()),
                "cash": group_ref.per_group(pf.cash()),
                "init_cash": np.atleast_1d(np.asarray(pf.init_cash, dtype=float)),
                "total_return": np.atleast_1d(np.asarray(pf.total_return(), dtype=float))})
    return out


def _changes_orders(a, b):
    keys = ("order/col", "order/idx", "order/size", "order/price")
    return any(a[k].shape != b[k].shape or not np.allclose(a[k], b[k]) for k in keys) or \
        not np.allclose(a["value"], b["value"])


def main():
    import vectorbt
    out = {"version": np.array(vectorbt.__version__)}
    metas = []
    for case in cases():
        name = case["name"]
        close_ohlc = group_ref.store_inputs(out, case)
        metas.append({k: case[k] for k in ("name", "kind", "seed", "keywords", "ohlc",
                                           "price", "kwargs") if k in case})
        result = run_vectorbt(case, close_ohlc)
        plain = run_vectorbt(case, close_ohlc, without=case["keywords"])
        if not _changes_orders(result, plain):
            raise SystemExit(f"{name}: {case['keywords']} change nothing; pick another seed")
        out.update({f"{name}/out/{k}": v for k, v in result.items()})
        print(f"{name}: {len(result['order/col'])} orders ({len(plain['order/col'])} without "
              f"{case['keywords']}), end values {result['value'][-1].round(2)}")
    group_ref.save(out, metas, OUT)


if __name__ == "__main__":
    main()
