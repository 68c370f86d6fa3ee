"""Make the vectorbt reference of a grouped portfolio's order records (``pf.orders``).

Three cases of ``make_vectorbt_group_reference.py`` (one shared-cash group, two
shared-cash groups, two groups without cash sharing) run again in vectorbt;
``tests/data/vectorbt_group_orders.npz`` keeps, per case, what vectorbt's
``pf.orders`` of the grouped portfolio gives: ``count()``, ``buy.count()``,
``sell.count()`` and ``fees.sum()`` (per group, a scalar for one group) and
``records_readable`` (its titles, and each field in vectorbt's record order).
The inputs are those of ``tests/data/vectorbt_group_cases.npz``, so the tests
check these on the portfolios they already run.

Run from the repository root with vectorbt installed (the ``bench`` extra).
"""
import json
import os
import sys

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path[:0] = [ROOT, os.path.join(ROOT, "benchmarks")]
import make_vectorbt_group_reference as group_ref  # noqa: E402

from flowsim.testing import vectorbt_cases as vc  # noqa: E402

OUT = os.path.join(ROOT, "tests", "data", "vectorbt_group_orders.npz")
CASES = ("signals_auto_all_in", "two_groups_shortonly", "groups_without_cash_sharing")


def reduced(x):
    """A reduction per group as ``(values, labels or None for a scalar)``."""
    if np.ndim(x) == 0:
        return np.atleast_1d(np.asarray(x, dtype=np.float64)), None
    return np.asarray(x, dtype=np.float64), [str(v) for v in x.index]


def readable(table):
    """``records_readable`` as ``{title: array}`` (timestamps as ISO strings)."""
    out = {}
    for title in table.columns:
        col = table[title]
        if title == "Timestamp":
            out[title] = np.array([t.isoformat() for t in col])
        elif col.dtype == object:
            out[title] = np.array([str(v) for v in col])
        else:
            out[title] = col.to_numpy()
    return out


def run_vectorbt(case):
    """vectorbt's ``pf.orders`` results of ``case``: ``({key: array}, meta)``."""
    import vectorbt as vbt
    close_ohlc = vc.market(case["seed"], group_ref.N, group_ref.C)
    kw = group_ref.inputs(case, close_ohlc)
    make = vbt.Portfolio.from_signals if case["kind"] == "signals" else vbt.Portfolio.from_orders
    orders = make(**kw).orders
    out, meta = {}, {"titles": list(orders.records_readable.columns)}
    for key, x in (("count", orders.count()), ("buy_count", orders.buy.count()),
                   ("sell_count", orders.sell.count()), ("fees_sum", orders.fees.sum())):
        out[key], meta[key] = reduced(x)
        if meta[key] is not None:
            meta[f"{key}_name"] = x.name
    out.update({f"readable/{k}": v for k, v in readable(orders.records_readable).items()})
    return out, meta


def main():
    import vectorbt
    out = {"version": np.array(vectorbt.__version__)}
    metas = {}
    by_name = {c["name"]: c for c in group_ref.cases()}
    for name in CASES:
        result, metas[name] = run_vectorbt(by_name[name])
        out.update({f"{name}/{k}": v for k, v in result.items()})
        print(f"{name}: count {result['count']}, buy {result['buy_count']}, "
              f"sell {result['sell_count']}")
    out["meta"] = np.array(json.dumps(metas))
    np.savez_compressed(OUT, **out)
    print(f"wrote {os.path.relpath(OUT, ROOT)} (vectorbt {vectorbt.__version__})")


if __name__ == "__main__":
    main()
