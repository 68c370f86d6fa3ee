"""Walk-forward optimisation: a signal sweep in rolling in-sample windows, the best row
of each window chosen by a metric and evaluated on the bars that follow.

Usage (vectorbt's walk-forward example, on any backend)::

    from flowsim.finance import strategies, walk_forward
    table = walk_forward(strategies.rsi_thresholds, close, grid, n=10, window_len=500,
                         set_lens=(125,), left_to_right=False, metric="sharpe_ratio")

The windows are vectorbt's ``close.vbt.rolling_split(n=..., window_len=...,
set_lens=..., left_to_right=...)`` (:func:`rolling_split`, checked against vectorbt on
stored splits): ``n`` windows of ``window_len`` bars evenly spaced over the series,
each cut into sets.  In each window :func:`flowsim.finance.signal_sweep` runs every row
of ``params`` on the first set (in-sample: indicators start again at its first bar, as
vectorbt's example computes them on the in-sample prices alone); per asset the row
with the best ``metric`` (the first one on ties, NaN metrics never chosen, as pandas'
``idxmax``) then runs on the last set (out-of-sample).  Each sweep has the bits of
``signal_sweep``, so the table is the same on every backend.
"""
import math

import numpy as np

from .signals import signal_sweep


def _set_lengths(set_lens, range_len, window):
    lengths = []
    for j, set_len in enumerate(set_lens):
        if 0 < set_len < 1:
            set_len = math.floor(set_len * range_len)
        if set_len == 0:
            raise ValueError(f"Set {j} in the range {window} is empty")
        lengths.append(int(set_len))
    return lengths


def _sets(start, range_len, set_lens, left_to_right, window):
    """vectorbt's ``split_ranges_into_sets`` for one range: ``[(first bar, bars)]``."""
    if not set_lens:
        return [(start, range_len)]
    lengths = _set_lengths(set_lens, range_len, window)
    if sum(lengths) >= range_len:
        raise ValueError(f"Range of length {range_len} too short to split into "
                         f"{len(set_lens) + 1} sets")
    rest = [range_len - sum(lengths)]
    lengths = lengths + rest if left_to_right else rest + lengths
    firsts = start + np.concatenate([[0], np.cumsum(lengths)[:-1]])
    return [(int(f), int(n)) for f, n in zip(firsts, lengths)]


def _window_length(n_bars, n, window_len):
    if window_len is None and n is None:
        raise ValueError("At least n or window_len must be set")
    if window_len is None:
        window_len = n_bars // n
    if 0 < window_len < 1:
        window_len = math.floor(window_len * n_bars)
    return int(window_len)


def rolling_split(n_bars, n=None, window_len=None, set_lens=(), left_to_right=True, min_len=1):
    """The windows of vectorbt's ``rolling_split`` over ``n_bars`` bars, as
    ``[[(first bar, bars) for each set] for each window]``.

    Parameters are vectorbt's (``RollingSplitter.split``): ``n`` windows evenly
    spaced (``np.round(np.linspace(...))`` of the possible starts), ``window_len``
    bars each (a fraction of ``n_bars`` if below 1; default ``n_bars // n``), cut into
    ``len(set_lens) + 1`` sets of ``set_lens`` bars (fractions of the window if below
    1) and the rest, last (``left_to_right=True``) or first.  Refused as vectorbt
    refuses, with its messages.
    """
    window_len = _window_length(n_bars, n, window_len)
    starts = np.arange(n_bars - window_len + 1)
    if window_len < min_len or not len(starts):
        raise ValueError(f"There are no ranges that meet window_len>={min_len}")
    if n is not None:
        if n > len(starts):
            raise ValueError(f"n cannot be bigger than the maximum number of windows "
                             f"{len(starts)}")
        starts = starts[np.round(np.linspace(0, len(starts) - 1, n)).astype(int)]
    return [_sets(int(s), window_len, tuple(set_lens), left_to_right, w)
            for w, s in enumerate(starts)]


def _best_rows(table, metric, maximize, n_rows, n_assets, min_trades):
    """Per asset, the parameter row with the best ``metric`` (None if none is eligible:
    all NaN, or fewer than ``min_trades`` trades)."""
    values = table[metric].to_numpy(np.float64).reshape(n_rows, n_assets)
    values = values if maximize else -values
    if min_trades:
        trades = table["total_trades"].to_numpy(np.float64).reshape(n_rows, n_assets)
        values = np.where(trades >= min_trades, values, np.nan)
    return [None if np.isnan(values[:, a]).all() else int(np.nanargmax(values[:, a]))
            for a in range(n_assets)]


def _bars(x, first, count):
    return x.iloc[first:first + count] if hasattr(x, "iloc") else x[first:first + count]


def _check(metric, params):
    from .portfolio import STATS
    if metric not in STATS:
        raise ValueError(f"metric must be one of flowsim.finance.STATS (a column of "
                         f"signal_sweep's table), got {metric!r}")
    if len(params) == 0:
        raise ValueError("params must have at least one row")


def _window_rows(w, sets, best, params, in_table, out_table, metric, assets):
    """The table's rows of window ``w``: one per asset."""
    rows = []
    stats = [k for k in out_table.columns if k not in params.columns and k != "asset"]
    n_assets = len(assets)
    for a, asset in enumerate(assets):
        row = {"split": w, "in_first": sets[0][0], "in_bars": sets[0][1],
               "out_first": sets[-1][0], "out_bars": sets[-1][1]}
        if n_assets > 1:
            row["asset"] = asset
        chosen = best[a]
        found = chosen is not None
        at = chosen * n_assets + a if found else 0
        row.update({name: params[name].iloc[chosen] if found else np.nan
                    for name in params.columns})
        row["row"] = chosen if found else -1
        row[f"in_{metric}"] = in_table[metric].iloc[at] if found else np.nan
        row.update({f"out_{k}": out_table[k].iloc[at] if found else np.nan for k in stats})
        rows.append(row)
    return rows


def walk_forward(strategy, close, params, *, n=None, window_len=None, set_lens=(),
                 left_to_right=True, metric="sharpe_ratio", maximize=True, min_trades=None,
                 **sweep_kw):
    """Walk-forward optimisation of ``strategy`` over ``params`` (module doc).

    Parameters
    ----------
    strategy, close, params :
        As in :func:`flowsim.finance.signal_sweep` (``close`` a Series, a DataFrame
        of assets or an array).
    n, window_len, set_lens, left_to_right :
        The windows, as vectorbt's ``rolling_split`` (:func:`rolling_split`); the
        first set is in-sample, the last out-of-sample (with three sets the middle
        one is left out, as a validation set).  ``set_lens`` must give at least one
        set (default none: refused).
    metric : str
        Column of the sweep's table (:data:`flowsim.finance.STATS`) that chooses the
        in-sample row (default ``"sharpe_ratio"``).
    maximize : bool
        Best is the largest ``metric`` (default True) or the smallest.
    min_trades : int or None
        Rows with fewer in-sample trades are never chosen (default None: every row,
        as vectorbt's example; there a row that never trades has a Sharpe ratio of
        ``inf``, vectorbt's value for returns without spread, and wins).
    **sweep_kw
        Every other keyword of :func:`flowsim.finance.signal_sweep`: ``direction``,
        fees, stops, ``freq``, ``backend``, ``dtype``... for both sweeps.

    Returns a :class:`pandas.DataFrame`, one row per (window, asset): ``split``,
    ``in_first`` / ``in_bars`` and ``out_first`` / ``out_bars`` (bar positions),
    ``asset`` (several assets), the chosen row's parameters and its position
    ``row`` (-1 when every in-sample metric was NaN, then the rest is NaN),
    ``in_<metric>`` and ``out_<stat>`` for every statistic of the out-of-sample run.
    Every row of ``params`` runs out-of-sample too (one compiled sweep per set
    length, whatever the window), and the chosen one is read from it.
    """
    import pandas as pd
    if not set_lens:
        raise ValueError("set_lens must give at least one set (the in-sample or the "
                         "out-of-sample bars), e.g. set_lens=(125,)")
    _check(metric, params)
    params = pd.DataFrame(params).reset_index(drop=True)
    windows = rolling_split(len(close), n=n, window_len=window_len, set_lens=set_lens,
                            left_to_right=left_to_right)
    rows = []
    for w, sets in enumerate(windows):
        in_table = signal_sweep(strategy, _bars(close, *sets[0]), params, **sweep_kw)
        out_table = signal_sweep(strategy, _bars(close, *sets[-1]), params, **sweep_kw)
        assets = list(in_table["asset"].unique()) if "asset" in in_table else [None]
        best = _best_rows(in_table, metric, maximize, len(params), len(assets), min_trades)
        rows += _window_rows(w, sets, best, params, in_table, out_table, metric, assets)
    return pd.DataFrame(rows)
