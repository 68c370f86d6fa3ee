"""Make the vectorbt reference of grouped ``stats()``: vectorbt's 28 default metrics
per group of the shared-cash, rebalancing and from_orders cases of
``benchmarks/make_vectorbt_group_reference.py`` (the same inputs, rebuilt from its
seeds).  ``tests/data/vectorbt_group_stats.npz`` keeps, per case and group, each
metric as flowsim names it (fractions, durations in bars, index values as int64 ns).

Needs the ``bench`` extra (vectorbt).  Run from the repository root::

    .venv/bin/python benchmarks/make_vectorbt_group_stats_reference.py
"""
import json
import os
import sys

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OUT = os.path.join(ROOT, "tests", "data", "vectorbt_group_stats.npz")
sys.path.insert(0, ROOT)
sys.path.insert(0, os.path.join(ROOT, "benchmarks"))
import make_vectorbt_accessor_reference as accessor_ref  # noqa: E402
import make_vectorbt_group_reference as group_ref  # noqa: E402

from flowsim.testing import vectorbt_cases as vc  # noqa: E402

#: the group cases whose stats() are stored
CASES = ("signals_auto_all_in", "signals_value_both", "signals_stops_trail",
         "monthly_equal_weight", "percent_both", "two_groups_shortonly",
         "groups_without_cash_sharing")


def run_vectorbt(case):
    """``{metric: [groups]}`` of vectorbt's grouped ``stats()`` and the group labels."""
    import vectorbt as vbt
    kw = group_ref.inputs(case, vc.market(case["seed"], group_ref.N, group_ref.C))
    make = vbt.Portfolio.from_signals if case["kind"] == "signals" else vbt.Portfolio.from_orders
    pf = make(**kw)
    groups = list(pf.wrapper.get_columns())
    rows = [pf.stats(column=g) if len(groups) > 1 else pf.stats() for g in groups]
    out = {}
    for st in rows:
        for k, v in accessor_ref._stats(st, "1D", "").items():
            out.setdefault(k.strip("/"), []).append(v)
    return {k: np.asarray(v) for k, v in out.items()}, groups


def main():
    import vectorbt
    out = {"version": np.array(vectorbt.__version__)}
    labels = {}
    for case in (c for c in group_ref.cases() if c["name"] in CASES):
        stats, labels[case["name"]] = run_vectorbt(case)
        out.update({f"{case['name']}/{k}": v for k, v in stats.items()})
        print(f"{case['name']}: end values {stats['end_value'].round(2)}")
    out["groups"] = np.array(json.dumps({k: [str(g) for g in v] for k, v in labels.items()}))
    np.savez_compressed(OUT, **out)
    print(f"wrote {os.path.relpath(OUT, ROOT)} (vectorbt {vectorbt.__version__})")


if __name__ == "__main__":
    main()
