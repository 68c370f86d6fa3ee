"""The small cases on which :func:`flowsim.finance.from_signals` lines up pandas inputs
as vectorbt does: 200 random-walk bars x 2 columns, random signals, hourly and daily
DatetimeIndex bars, ``freq`` given or read from the index, entries' columns in the
other order.  ``benchmarks/make_vectorbt_alignment_reference.py`` stores vectorbt's
values for them in ``tests/data/vectorbt_alignment.csv``.
"""
import numpy as np

from .vectorbt_cases import market

METRICS = ("total_return", "sharpe_ratio", "calmar_ratio", "omega_ratio", "sortino_ratio")
N_BARS = 200


def inputs(seed=5):
    """close [200, 2] and boolean entries / exits of the cases (numpy)."""
    close = market(seed, n=N_BARS, c=2)[0]
    rng = np.random.default_rng(seed + 2)
    return close, rng.random(close.shape) < 0.08, rng.random(close.shape) < 0.08


def cases():
    """``{name: (bar spacing, freq keyword, entries' column order)}``."""
    return {"hourly_none": ("h", None, ["a", "b"]), "hourly_h": ("h", "h", ["a", "b"]),
            "hourly_1h": ("h", "1h", ["a", "b"]), "hourly_D": ("h", "D", ["a", "b"]),
            "hourly_1d": ("h", "1d", ["a", "b"]), "daily_none": ("D", None, ["a", "b"]),
            "daily_reordered": ("D", None, ["b", "a"])}


def frames(spacing, order):
    """close, entries, exits as DataFrames on a ``spacing`` DatetimeIndex; entries in ``order``."""
    import pandas as pd
    close, entries, exits = inputs()
    index = pd.date_range("2024-01-01", periods=N_BARS, freq=spacing)
    cols = ["a", "b"]
    ent = pd.DataFrame(entries, index=index, columns=cols)[order]
    return (pd.DataFrame(close, index=index, columns=cols), ent,
            pd.DataFrame(exits, index=index, columns=cols))


def label(col):
    return "|".join(map(str, col)) if isinstance(col, tuple) else str(col)
