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
import sys
import warnings

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
from flowsim.testing.alignment_cases import METRICS, cases, frames, label  # noqa: E402

PATH = os.path.join(ROOT, "tests", "data", "vectorbt_alignment.csv")


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
    main()
