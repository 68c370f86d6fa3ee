"""What the finance tests share: the check of a result's shape against vectorbt's
(``tests/data/vectorbt_wrapper_cases.npz``; the stored group cases' portfolios are
``helpers.vectorbt_groups.run_case``)::

    from helpers.finance import check_wrapped

    check_wrapped(pf.value(), WRAPPER, "signals_auto_all_in", "value", pf.index)
"""
import json

import numpy as np
import pandas as pd


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
