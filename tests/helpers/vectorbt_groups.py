"""The stored vectorbt cases of grouped portfolios (``tests/data/vectorbt_group*_cases.npz``):
rebuild each case's call and compare its orders.

    >>> data, cases = load_cases(path)
    >>> pf = run_case(cases[name], data)
    >>> assert_orders_match(pf.orders, expected(data, name))
"""
import json
import os

import numpy as np

N, C = 120, 3
DATA_DIR = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "data")
OHL = ("open", "high", "low")


def load_cases(path):
    """``(data, {name: case})`` of a stored file."""
    data = np.load(path)
    return data, {c["name"]: c for c in json.loads(str(data["cases"]))}


def case_names(path):
    """The names of a stored file's cases, in order (for ``parametrize``)."""
    return [c["name"] for c in json.loads(str(np.load(path)["cases"]))]


def expected(data, name):
    """vectorbt's stored results of case ``name``: ``{key: array}``."""
    return {k.split("/out/")[1]: data[k] for k in data.files if k.startswith(f"{name}/out/")}


def run_case(case, data):
    """flowsim's call of ``case`` (from_signals, or from_orders for ``kind="orders"``):
    the bars and every stored input array on a daily index, a ``call_seq`` array as is."""
    import pandas as pd

    from flowsim.finance import from_orders, from_signals
    name = case["name"]
    index = pd.date_range("2021-01-01", periods=N, freq="D")
    columns = pd.Index(["a", "b", "c"], name="asset")

    def frame(a):
        return pd.DataFrame(a, index=index, columns=columns)

    close, op, hi, lo = data[f"{name}/bars"]
    kw = dict(case["kwargs"], freq="1D")
    kw.update({key: frame(a) for key, a in zip(OHL, (op, hi, lo)) if key in case["ohlc"]})
    if case.get("price"):
        kw["price"] = frame(op)
    prefix = f"{name}/in/"
    for key in data.files:
        if key.startswith(prefix):
            arg = key[len(prefix):]
            kw[arg] = data[key] if arg == "call_seq" else frame(data[key])
    run = from_orders if case.get("kind") == "orders" else from_signals
    return run(frame(close), **kw)


def assert_orders_match(orders, out):
    """The order records are vectorbt's: the same columns, bars and sides, sizes, prices
    and fees to 1e-9."""
    assert len(orders) == len(out["order/col"])
    np.testing.assert_array_equal(orders["col"], out["order/col"])
    np.testing.assert_array_equal(orders["idx"], out["order/idx"])
    np.testing.assert_array_equal(orders["side"] == "sell", out["order/side"] == 1)
    for key in ("size", "price", "fees"):
        np.testing.assert_allclose(orders[key], out[f"order/{key}"], rtol=1e-9, atol=1e-12)
