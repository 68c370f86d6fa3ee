"""Plots of backtests: an equity curve with drawdown and trades, a heatmap of a sweep.

    >>> pf = from_signals(close, entries, exits, fees=0.001, sl_stop=0.05)
    >>> fig = plots.equity(pf, column=0)                   # value, drawdown, trades
    >>> fig = plots.heatmap(table, "window", "sl_stop", "sharpe_ratio")

Needs matplotlib (``pip install 'flowsim[plot]'``).  Both return the
:class:`matplotlib.figure.Figure`; pass ``ax`` to draw into your own axes.
"""
import numpy as np


def equity(pf, column=0, axes=None, title=None):
    """Equity curve of one column of a :class:`~flowsim.finance.Portfolio`.

    Top: the value with entries (up triangles, green for long, red for short) and
    exits (crosses) at their fill prices' bars; bottom: the drawdown from the running
    peak.  ``column`` is a label of ``pf.columns`` or a position; ``axes`` a pair of
    matplotlib axes (default: a new figure).
    """
    import matplotlib.pyplot as plt
    j = pf.columns.index(column) if column in pf.columns else int(column)
    label = pf.columns[j]
    value = pf.value().iloc[:, j]
    x = np.arange(len(value)) if not hasattr(value.index, "to_pydatetime") else value.index
    if axes is None:
        fig, axes = plt.subplots(2, 1, sharex=True, figsize=(9, 5),
                                 gridspec_kw={"height_ratios": [3, 1]})
    top, bottom = axes
    fig = top.figure
    top.plot(x, value.to_numpy(), color="tab:blue", lw=1.2, label="value")
    trades = pf.trades
    trades = trades[trades["column"] == label]
    v = value.to_numpy()
    for direction, color in (("long", "tab:green"), ("short", "tab:red")):
        sel = trades[trades["direction"] == direction]
        if len(sel):
            ei = sel["entry_idx"].to_numpy()
            top.scatter(np.asarray(x)[ei], v[ei], marker="^", color=color, s=28, zorder=3,
                        label=f"{direction} entry")
            closed = sel[sel["status"] == "closed"]["exit_idx"].to_numpy()
            top.scatter(np.asarray(x)[closed], v[closed], marker="x", color=color, s=28,
                        zorder=3, label=f"{direction} exit")
    top.set_ylabel("value")
    top.legend(loc="upper left", fontsize=8)
    top.set_title(title or f"equity curve, column {label!r}")
    dd = v / np.maximum.accumulate(v) - 1
    bottom.fill_between(x, dd, 0, color="tab:red", alpha=0.4, lw=0)
    bottom.set_ylabel("drawdown")
    return fig


def heatmap(table, x, y, metric, agg="mean", ax=None, cmap="viridis"):
    """Heatmap of ``metric`` over two parameter columns of a :func:`signal_sweep` table.

    Rows sharing an (``x``, ``y``) cell (other parameters, assets) are combined
    by ``agg`` (a pandas aggregation name: ``"mean"``, ``"max"``, ``"median"``).
    """
    import matplotlib.pyplot as plt
    for name in (x, y, metric):
        if name not in table.columns:
            raise ValueError(f"{name!r} is not a column of the table; it has {list(table.columns)}")
    grid = table.pivot_table(index=y, columns=x, values=metric, aggfunc=agg)
    if ax is None:
        fig, ax = plt.subplots(figsize=(7, 5))
    fig = ax.figure
    data = grid.to_numpy(dtype=float)
    im = ax.imshow(np.ma.masked_invalid(data), origin="lower", aspect="auto", cmap=cmap)
    ax.set_xticks(range(len(grid.columns)), [f"{c:g}" for c in grid.columns], rotation=90,
                  fontsize=7)
    ax.set_yticks(range(len(grid.index)), [f"{c:g}" for c in grid.index], fontsize=7)
    ax.set_xlabel(x)
    ax.set_ylabel(y)
    ax.set_title(f"{metric} ({agg} over the other parameters)")
    fig.colorbar(im, ax=ax)
    return fig
