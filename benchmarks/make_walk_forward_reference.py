"""Store vectorbt's rolling walk-forward splits (``close.vbt.rolling_split``) for the
configurations of :data:`CONFIGS`, so the test suite checks
:func:`flowsim.finance.rolling_split` against vectorbt without installing it.

Each entry of ``tests/data/vectorbt_rolling_split.json``: the keywords, the number of
bars, and either the splits (per split, per set: ``[first bar, bars]``; every set is
a contiguous range) or vectorbt's error (type and message)::

    .venv/bin/python benchmarks/make_walk_forward_reference.py   (needs make bench's vectorbt)
"""
import json
import os

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OUT = os.path.join(ROOT, "tests", "data", "vectorbt_rolling_split.json")

#: (bars, keywords of rolling_split).
CONFIGS = [
    (500, {"n": 5, "window_len": 200, "set_lens": (50,), "left_to_right": False}),
    (500, {"n": 5, "window_len": 200, "set_lens": (50,)}),
    (300, {"n": 7, "window_len": 0.4, "set_lens": (0.25,), "left_to_right": False}),
    (300, {"n": 3, "window_len": 120, "set_lens": (40, 20)}),
    (300, {"n": 4, "window_len": 120, "set_lens": (40, 20), "left_to_right": False}),
    (250, {"window_len": 240, "set_lens": (30,)}),
    (250, {"n": 4, "set_lens": (0.5,)}),
    (100, {"n": 10, "window_len": 100}),
    (100, {"n": 3, "window_len": 50}),
    (100, {"n": 2, "window_len": 30, "set_lens": (30,)}),
    (100, {"n": 200, "window_len": 50, "set_lens": (10,)}),
    (100, {"set_lens": (10,)}),
    (100, {"n": 3, "window_len": 40, "set_lens": (0.01,)}),
]


def splits(n_bars, kwargs):
    import pandas as pd
    import vectorbt  # noqa: F401  (registers the .vbt accessor)
    close = pd.Series(np.arange(n_bars, dtype=float))
    try:
        out = close.vbt.rolling_split(**kwargs)
    except Exception as exc:  # noqa: BLE001 - the refusal is what is stored
        return {"error": [type(exc).__name__, str(exc)]}
    per_set = [indexes for _, indexes in out] if isinstance(out[0], tuple) else [out[1]]
    ranges = []
    for split in range(len(per_set[0])):
        sets = []
        for indexes in per_set:
            bars = np.asarray(indexes[split], dtype=int)
            assert (np.diff(bars) == 1).all()
            sets.append([int(bars[0]), len(bars)])
        ranges.append(sets)
    return {"splits": ranges}


def main():
    table = [{"bars": n, "kwargs": {k: list(v) if isinstance(v, tuple) else v
                                    for k, v in kw.items()}, **splits(n, kw)}
             for n, kw in CONFIGS]
    text = json.dumps(table, indent=1) + "\n"
    with open(OUT, "w") as fh:
        fh.write(text)
    print(f"wrote {OUT}: {len(table)} configurations")


if __name__ == "__main__":
    main()
