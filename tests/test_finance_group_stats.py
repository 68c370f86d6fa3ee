"""Grouped ``stats()`` against vectorbt's 28 metrics per group.

``tests/data/vectorbt_group_stats.npz`` is made by
``benchmarks/make_vectorbt_group_stats_reference.py`` from the group cases of
``tests/data/vectorbt_group_cases.npz`` (their inputs are read from there).
"""
import json
import os

import numpy as np
import pandas as pd
import pytest
from helpers.vectorbt_groups import run_case as _run

from flowsim.finance.portfolio import PORTFOLIO_STATS

# One pytest-xdist unit with test_finance_groups.py: the same shapes, its compiled loops.
pytestmark = pytest.mark.xdist_group("tests/test_finance_groups.py")

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
STATS = np.load(os.path.join(ROOT, "tests", "data", "vectorbt_group_stats.npz"))
GROUPS = json.loads(str(STATS["groups"]))
CASES = np.load(os.path.join(ROOT, "tests", "data", "vectorbt_group_cases.npz"))
META = {c["name"]: c for c in json.loads(str(CASES["cases"]))}


@pytest.mark.parametrize("name", list(GROUPS))
def test_group_stats_match_vectorbt(name):
    stats = _run(META[name], CASES).stats()
    if isinstance(stats, pd.Series):                 # one group: vectorbt's Series
        stats = stats.to_frame().T
    assert list(stats.columns) == list(PORTFOLIO_STATS) + ["total_orders"], name
    assert [str(g) for g in stats.index] == GROUPS[name], name
    for k in PORTFOLIO_STATS:
        theirs = STATS[f"{name}/{k}"]
        if k in ("start", "end"):
            assert [pd.Timestamp(v).value for v in stats[k]] == theirs.tolist(), (name, k)
            continue
        np.testing.assert_allclose(stats[k].to_numpy(dtype=np.float64), theirs, rtol=1e-9,
                                   atol=1e-12, err_msg=f"{name}: {k}", strict=True)
