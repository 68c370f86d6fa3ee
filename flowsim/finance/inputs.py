"""Checked inputs of the portfolio simulations: annualisation, ``[bars, columns]`` arrays
of prices and signals, directions (as vectorbt reads them)."""

import numbers

import numpy as np

from .align import to_timedelta
from .orders import enum_codes

DIRECTIONS = {"longonly": 0, "shortonly": 1, "both": 2}


def ann_factor(freq, year_freq="365 days"):
    """vectorbt's annualisation: ``year_freq / freq`` (periods per year; freq None: "1D").

    Both read as vectorbt reads them: ``"1D"``, ``"D"``, ``"1h"``, ``"h"``,
    ``"365 days"`` or a timedelta.
    """
    import pandas as pd
    try:
        f = to_timedelta(freq if freq is not None else "1D")
        y = to_timedelta(year_freq)
    except (ValueError, TypeError) as exc:
        raise ValueError(f"freq and year_freq must be pandas timedeltas such as '1D' or "
                         f"'365 days', got freq={freq!r}, year_freq={year_freq!r}") from exc
    if f <= pd.Timedelta(0) or y <= pd.Timedelta(0):
        raise ValueError(f"freq and year_freq must be positive, got {freq!r}, {year_freq!r}")
    return y / f


def frame_of(x, name, n_bars=None):
    """An input as a float64 / bool ``[bars, columns]`` array and its column labels."""
    cols = None
    if hasattr(x, "columns"):
        cols = list(x.columns)
        x = x.to_numpy()
    elif hasattr(x, "to_numpy"):
        cols = [x.name if x.name is not None else 0]
        x = x.to_numpy()
    x = np.asarray(x)
    if x.ndim == 1:
        x = x[:, None]
    if x.ndim != 2:
        raise ValueError(f"{name} must be a 1-d series or a [bars, columns] array, got shape "
                         f"{list(x.shape)}")
    if n_bars is not None and x.shape[0] != n_bars:
        raise ValueError(f"{name} has {x.shape[0]} bars but close has {n_bars}: give one "
                         f"value per bar")
    return x, cols


def bar_arrays(close, open, high, low, others, price=None):
    """close and open/high/low as float64 ``[bars, columns]`` (vectorbt's fills for gaps)."""
    close_a, cols = frame_of(close, "close")
    if not np.issubdtype(close_a.dtype, np.number):
        raise TypeError(f"close must be numeric, got dtype {close_a.dtype}")
    close_a = close_a.astype(np.float64)
    bad = ~np.isfinite(close_a) | (close_a <= 0)
    if bad.any():
        i, j = np.argwhere(bad)[0]
        raise ValueError(f"close must be finite and > 0 (no NaN); bar {i}, column {j} is "
                         f"{close_a[i, j]!r}: drop or fill missing bars first")
    n, c = close_a.shape
    for name, arr in list(others.items()) + [("open", open), ("high", high), ("low", low)]:
        if arr is not None:
            a, _ = frame_of(arr, name, n)
            if a.shape[1] > c:
                if c != 1:
                    raise ValueError(f"{name} has {a.shape[1]} columns, close has {c}")
                c = a.shape[1]
    close_a = np.broadcast_to(close_a, (n, c)).copy()

    def given(arr, name):
        if arr is None:
            return None
        return np.broadcast_to(frame_of(arr, name, n)[0].astype(np.float64), (n, c))

    o = given(open, "open")
    o = close_a if o is None else np.where(np.isnan(o), close_a, o)
    lo, hi = given(low, "low"), given(high, "high")
    floor, top = np.minimum(o, close_a), np.maximum(o, close_a)
    lo = floor if lo is None else np.where(np.isnan(lo), floor, lo)
    hi = top if hi is None else np.where(np.isnan(hi), top, hi)
    out = {"close": close_a, "open": o, "low": lo, "high": hi}
    if price is not None:
        pr = given(price, "price")
        if not np.all(np.isfinite(pr)) or np.any(pr <= 0):
            raise ValueError("price must be finite and > 0 on every bar (it is where orders "
                             "fill); leave it None to fill at the close")
        out["price"] = pr
    return out, cols


def direction_code(value):
    """One direction as its code: ``"longonly"`` / ``"shortonly"`` / ``"both"`` or
    vectorbt's ``Direction`` integers 0 / 1 / 2."""
    if isinstance(value, numbers.Integral) and not isinstance(value, bool) \
            and int(value) in DIRECTIONS.values():
        return int(value)
    key = str(value).lower().replace("_", "")
    if not isinstance(value, str) or key not in DIRECTIONS:
        raise ValueError(f"direction must be 'longonly', 'shortonly' or 'both' (or vectorbt's "
                         f"Direction codes 0, 1, 2), got {value!r}")
    return DIRECTIONS[key]


def direction_codes(direction, n_cols):
    """Directions (scalar or per column, names or codes) -> int codes [n_cols]."""
    return enum_codes(direction, "direction", n_cols, direction_code).astype(np.int64)


INIT_CASH_MODES = ("auto", "autoalign")


def init_cash_mode(init_cash):
    """vectorbt's ``InitCashMode`` named by ``init_cash`` ("auto", "autoalign"), else None.
    As in vectorbt, a Python ``int`` 0 or 1 is the mode's code (``InitCashMode.Auto``,
    ``AutoAlign``), not an amount of cash: pass ``1.0`` for one unit of cash."""
    if isinstance(init_cash, int) and init_cash in (0, 1):
        return INIT_CASH_MODES[init_cash]
    if not isinstance(init_cash, str):
        return None
    mode = init_cash.lower().replace("_", "")
    if mode not in INIT_CASH_MODES:
        raise ValueError(f"init_cash must be a number, 'auto' or 'autoalign', got {init_cash!r}")
    return mode
