"""Make the vectorbt reference values for how from_signals lines up pandas inputs.

Runs ``vectorbt.Portfolio.from_signals`` on the small cases of :func:`cases` (200
random-walk bars x 2 columns, random signals, fees 0.1 %): hourly and daily
DatetimeIndex bars with ``freq=None`` (vectorbt reads the bar length from the
index) and with ``freq`` given as ``"D"``, ``"1d"``, ``"h"``, ``"1h"``; entries
whose columns are in the other order (vectorbt matches them by position and
stacks both labels).  Stores one row per (case, column) in
``tests/data/vectorbt_alignment.csv``: vectorbt's column label (levels joined by
``|``), its bar length in seconds, total return and the four annualised ratios
(17 significant digits).

Needs the ``bench`` extra (vectorbt).  Run from the repository root::

    .venv/bin/python benchmarks/make_vectorbt_alignment_reference.py
"""
import os
import warnings

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PATH = os.path.join(ROOT, "tests", "data", "vectorbt_alignment.csv")
METRICS = ("total_return", "sharpe_ratio", "calmar_ratio", "omega_ratio", "sortino_ratio")
N_BARS = 200


def inputs(seed=5):
    """close [200, 2] and boolean entries / exits of the cases (numpy)."""
    import vectorbt_cases
    close = vectorbt_cases.market(seed, n=N_BARS, c=2)[0]
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


def main():
    import pandas as pd
    import vectorbt as vbt
    rows = []
    for name, (spacing, freq, order) in cases().items():
        close, ent, ext = frames(spacing, order)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            pf = vbt.Portfolio.from_signals(close, ent, ext, fees=0.001, freq=freq)
            values = {"total_return": pf.total_return(), "sharpe_ratio": pf.sharpe_ratio(),
                      "calmar_ratio": pf.calmar_ratio(), "omega_ratio": pf.omega_ratio(),
                      "sortino_ratio": pf.sortino_ratio()}
        for j, col in enumerate(pf.wrapper.columns):
            rows.append({"case": name, "column": label(col),
                         "freq_seconds": pf.wrapper.freq.total_seconds(),
                         **{k: float(values[k].iloc[j]) for k in METRICS}})
    table = pd.DataFrame(rows)
    with open(PATH, "w") as f:
        f.write(f"# vectorbt {vbt.__version__} Portfolio.from_signals, fees=0.001, "
                f"year_freq 365 days; make_vectorbt_alignment_reference.py\n")
        table.to_csv(f, index=False, float_format="%.17g")
    print(table.to_string())
    print(f"wrote {os.path.relpath(PATH, ROOT)}")


if __name__ == "__main__":
    import sys
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    main()
