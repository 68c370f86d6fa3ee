"""Make the vectorbt reference of shared-cash groups, rebalancing and from_orders.

Each case is a random-walk market (``flowsim.testing.vectorbt_cases.market``, a
fixed seed, 120 daily bars x 3 assets) with random signals or orders and a set of
``Portfolio.from_signals`` / ``Portfolio.from_orders`` keywords: ``group_by`` with
``cash_sharing=True`` and ``call_seq`` "auto" / "default" / "reversed" / an array,
target-percent rebalancing (monthly equal weight), every ``size_type``, and
ungrouped or grouped runs without cash sharing.  vectorbt runs each one;
``tests/data/vectorbt_group_cases.npz`` keeps the inputs (the arrays, the cases as
JSON) with vectorbt's order records, call sequence, value, cash, returns and
metrics per group, so the tests rebuild every call without vectorbt.

Needs the ``bench`` extra (vectorbt).  Run from the repository root::

    .venv/bin/python benchmarks/make_vectorbt_group_reference.py
"""
import json
import os
import sys

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OUT = os.path.join(ROOT, "tests", "data", "vectorbt_group_cases.npz")
sys.path.insert(0, ROOT)
from flowsim.testing import vectorbt_cases as vc  # noqa: E402

N, C = 120, 3
START = "2021-01-01"
SHARED = {"group_by": True, "cash_sharing": True}


def _rng(seed):
    return np.random.default_rng(seed + 5000)


def _signals(seed, rate=0.12):
    rng = _rng(seed)
    return {k: rng.random((N, C)) < rate for k in ("entries", "exits")}


def _orders(seed, rate=0.3, scale=1.0):
    rng = _rng(seed)
    return np.where(rng.random((N, C)) < rate, scale * rng.standard_normal((N, C)), np.nan)


def _monthly(weights):
    """Target weights on the first bar of each month, NaN (no order) elsewhere."""
    import pandas as pd
    first = ~pd.date_range(START, periods=N, freq="D").to_period("M").duplicated()
    return np.where(first[:, None], np.asarray(weights, dtype=np.float64)[None, :], np.nan)


def _call_seq(seed):
    rng = _rng(seed)
    return np.stack([rng.permutation(C) for _ in range(N)])


def cases():
    """``[{name, kind, seed, ohlc, arrays, kwargs}]``: the stored cases (inputs)."""
    ohl = ["open", "high", "low"]

    def signals(name, seed, ohlc=(), rate=0.12, **kw):
        return {"name": name, "kind": "signals", "seed": seed, "ohlc": list(ohlc),
                "arrays": _signals(seed, rate), "kwargs": kw}

    def orders(name, seed, size, **kw):
        return {"name": name, "kind": "orders", "seed": seed, "ohlc": [],
                "arrays": {"size": size}, "kwargs": kw}

    return [
        signals("signals_auto_all_in", 61, rate=0.2, fees=0.001, call_seq="auto", **SHARED),
        signals("signals_default_all_in", 61, rate=0.2, fees=0.001, call_seq="default",
                **SHARED),
        signals("signals_reversed_fixed_fees", 62, rate=0.2, fixed_fees=0.5,
                call_seq="reversed", **SHARED),
        signals("signals_value_both", 63, direction="both", size=40.0, size_type="value",
                slippage=0.001, call_seq="auto", **SHARED),
        signals("signals_percent", 64, size=0.5, size_type="percent", fees=0.002,
                call_seq="auto", **SHARED),
        signals("signals_stops_trail", 65, ohl, sl_stop=0.04, tp_stop=0.06, sl_trail=True,
                fees=0.001, call_seq="auto", **SHARED),
        signals("signals_call_seq_array", 66, rate=0.2, fees=0.001, **SHARED),
        orders("monthly_equal_weight", 71, _monthly([1 / 3] * 3), size_type="targetpercent",
               fees=0.001, call_seq="auto", **SHARED),
        orders("monthly_weights_default_order", 72, _monthly([0.6, 0.1, 0.3]),
               size_type="targetpercent", fees=0.001, fixed_fees=0.2, call_seq="default",
               **SHARED),
        orders("amount_nan_auto", 73, _orders(73), call_seq="auto", **SHARED),
        orders("value_longonly", 74, np.abs(_orders(74, scale=30.0)), size_type="value",
               direction="longonly", fees=0.001, call_seq="auto", **SHARED),
        orders("percent_both", 75, _orders(75, scale=0.4), size_type="percent",
               call_seq="auto", **SHARED),
        orders("target_amount_reversed", 76, np.abs(_orders(76, scale=2.0)),
               size_type="targetamount", call_seq="reversed", **SHARED),
        orders("target_value_call_seq_array", 77, _orders(77, scale=30.0),
               size_type="targetvalue", **SHARED),
        orders("amount_whole_only", 78, _orders(78), allow_partial=False, min_size=0.5,
               slippage=0.001, call_seq="auto", **SHARED),
        orders("two_groups_shortonly", 79, _orders(79), direction="shortonly", slippage=0.002,
               group_by=[0, 0, 1], cash_sharing=True, call_seq="auto"),
        orders("groups_without_cash_sharing", 80, _orders(80, scale=20.0), size_type="value",
               group_by=[0, 0, 1], fees=0.001),
        orders("ungrouped", 81, _orders(81), fees=0.001, fixed_fees=0.1),
    ]


ARRAY_CALL_SEQ = {"signals_call_seq_array": 66, "target_value_call_seq_array": 77}


def inputs(case, close_ohlc):
    """vectorbt's keyword arguments of ``case`` (pandas inputs on a daily index)."""
    import pandas as pd
    index = pd.date_range(START, periods=N, freq="D")
    columns = pd.Index(["a", "b", "c"], name="asset")

    def frame(a):
        return pd.DataFrame(a, index=index, columns=columns)

    close, op, hi, lo = close_ohlc
    kw = dict(case["kwargs"], close=frame(close), freq="1D")
    for name, a in zip(("open", "high", "low"), (op, hi, lo)):
        if name in case["ohlc"]:
            kw[name] = frame(a)
    kw.update({k: frame(v) for k, v in case["arrays"].items()})
    if case["name"] in ARRAY_CALL_SEQ:
        kw["call_seq"] = _call_seq(ARRAY_CALL_SEQ[case["name"]])
    return kw


def order_records(pf):
    """vectorbt's order records of ``pf``: ``{"order/<field>": array}``."""
    rec = pf.orders.records
    return {f"order/{k}": rec[k].to_numpy() for k in ("col", "idx", "size", "price", "fees",
                                                       "side")}


def per_group(x):
    """A result per group (or column) as float64 ``[bars, groups]``."""
    return np.asarray(x, dtype=np.float64).reshape(N, -1)


def store_inputs(out, case):
    """Put ``case``'s bars and input arrays in ``out``; return its bars."""
    name = case["name"]
    close_ohlc = vc.market(case["seed"], N, C)
    out[f"{name}/bars"] = np.stack(close_ohlc)
    out.update({f"{name}/in/{k}": v for k, v in case["arrays"].items()})
    return close_ohlc


def save(out, metas, path):
    """Write the cases' ``metas`` (JSON) and arrays ``out`` to ``path``."""
    import vectorbt
    out["cases"] = np.array(json.dumps(metas))
    np.savez_compressed(path, **out)
    print(f"wrote {os.path.relpath(path, ROOT)} (vectorbt {vectorbt.__version__})")


def run_vectorbt(case, close_ohlc):
    """vectorbt's results of ``case``: ``{name: array}``."""
    import vectorbt as vbt
    kw = inputs(case, close_ohlc)
    make = vbt.Portfolio.from_signals if case["kind"] == "signals" else vbt.Portfolio.from_orders
    pf = make(attach_call_seq=True, **kw)
    out = order_records(pf)
    out.update({"value": per_group(pf.value()), "cash": per_group(pf.cash()),
                "returns": per_group(pf.returns()), "call_seq": pf.call_seq.to_numpy(),
                "total_return": np.atleast_1d(np.asarray(pf.total_return(), dtype=float)),
                "final_value": np.atleast_1d(np.asarray(pf.final_value(), dtype=float)),
                "max_drawdown": np.atleast_1d(np.asarray(pf.max_drawdown(), dtype=float)),
                "sharpe_ratio": np.atleast_1d(np.asarray(pf.sharpe_ratio(), dtype=float))})
    return out


def main():
    import vectorbt
    out = {"version": np.array(vectorbt.__version__)}
    metas = []
    for case in cases():
        name = case["name"]
        close_ohlc = store_inputs(out, case)
        if name in ARRAY_CALL_SEQ:
            out[f"{name}/in/call_seq"] = _call_seq(ARRAY_CALL_SEQ[name])
        metas.append({k: case[k] for k in ("name", "kind", "seed", "ohlc", "kwargs")})
        result = run_vectorbt(case, close_ohlc)
        out.update({f"{name}/out/{k}": v for k, v in result.items()})
        print(f"{name}: {len(result['order/col'])} orders, end values "
              f"{np.atleast_1d(result['final_value']).round(2)}")
    save(out, metas, OUT)


if __name__ == "__main__":
    main()
