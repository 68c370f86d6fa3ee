"""The bundled sample bars: ``flowsim/data/sample_ohlcv.csv`` (generated, not market data).

:func:`generate_bars` made the file: daily bars of a GBM close path (drift 8%,
volatility 20% a year, seed 2026) with open/high/low drawn around it and a
log-normal volume.  It is small (1,260 bars, five years of trading days) and
exists so the examples and ``flowsim run backtest`` work offline.
"""
import os

import numpy as np

SAMPLE = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                      "data", "sample_ohlcv.csv")


def generate_bars(n_bars=1260, s0=100.0, mu=0.08, sigma=0.2, seed=2026):
    """A :class:`pandas.DataFrame` of ``date, open, high, low, close, volume`` bars."""
    import pandas as pd
    rng = np.random.default_rng(seed)
    dt = 1.0 / 252
    z = rng.standard_normal(n_bars)
    close = s0 * np.exp(np.cumsum((mu - 0.5 * sigma ** 2) * dt + sigma * np.sqrt(dt) * z))
    prev = np.concatenate([[s0], close[:-1]])
    open_ = prev * np.exp(0.2 * sigma * np.sqrt(dt) * rng.standard_normal(n_bars))
    span = np.abs(rng.standard_normal((2, n_bars))) * 0.5 * sigma * np.sqrt(dt)
    high = np.maximum(open_, close) * np.exp(span[0])
    low = np.minimum(open_, close) * np.exp(-span[1])
    volume = np.round(1e6 * np.exp(0.3 * rng.standard_normal(n_bars)))
    dates = pd.bdate_range("2020-01-02", periods=n_bars)
    return pd.DataFrame({"date": dates.strftime("%Y-%m-%d"), "open": open_.round(4),
                         "high": high.round(4), "low": low.round(4), "close": close.round(4),
                         "volume": volume.astype(np.int64)})


def load_bars(path=None):
    """Read OHLCV bars from ``path`` (default the bundled sample) as a DataFrame.

    Column names are lower-cased; a ``date`` column becomes the index.  Needs a
    ``close`` column.
    """
    import pandas as pd
    frame = pd.read_csv(path or SAMPLE)
    frame.columns = [str(c).strip().lower() for c in frame.columns]
    if "close" not in frame.columns:
        raise ValueError(f"{path or SAMPLE}: needs a 'close' column, has {list(frame.columns)}")
    if "date" in frame.columns:
        frame = frame.set_index("date")
    return frame


if __name__ == "__main__":
    generate_bars().to_csv(SAMPLE, index=False)
    print(f"wrote {SAMPLE}")
