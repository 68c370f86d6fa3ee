"""Grouped from_signals with its order keywords against stored vectorbt results.

The cases (``tests/data/vectorbt_group_keyword_cases.npz``, made by
``benchmarks/make_vectorbt_group_keyword_reference.py``) have the shape of
``test_finance_groups.py``'s, and every grouped from_signals run passes the same
loop parameters, so they share its compiled loop (the per-bar ones one more).
"""
import numpy as np
import pytest
from helpers import vectorbt_groups as vg

from flowsim.finance import from_signals

DATA = f"{vg.DATA_DIR}/vectorbt_group_keyword_cases.npz"


@pytest.fixture(scope="module")
def stored():
    return vg.load_cases(DATA)


@pytest.mark.parametrize("name", vg.case_names(DATA))
def test_grouped_keywords_match_vectorbt(stored, name):
    data, cases = stored
    pf = vg.run_case(cases[name], data)
    out = vg.expected(data, name)
    vg.assert_orders_match(pf.orders, out)
    np.testing.assert_allclose(np.atleast_1d(pf.init_cash()), out["init_cash"], rtol=1e-9)
    for key, got in (("value", pf.value()), ("cash", pf.cash())):       # one group: Series
        np.testing.assert_allclose(np.asarray(got).reshape(len(got), -1), out[key], rtol=1e-9,
                                   atol=1e-9)
    np.testing.assert_allclose(np.atleast_1d(pf.total_return()), out["total_return"],
                               rtol=1e-9)


@pytest.mark.parametrize("kwargs, message", [
    (dict(init_cash="auto", group_by=[0, 0, 1]), "without cash_sharing is not implemented"),
    (dict(init_cash="autoalign", cash_sharing=True), "needs a finite size"),
])
def test_grouped_auto_cash_refusals(kwargs, message):
    close = np.linspace(1, 2, 12).reshape(4, 3)
    entries = np.zeros((4, 3), dtype=bool)
    with pytest.raises(ValueError) as info:
        from_signals(close, entries, entries, freq="1D", **kwargs)
    assert message in str(info.value)
