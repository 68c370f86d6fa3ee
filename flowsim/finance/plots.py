"""Plots of backtests: an equity curve with drawdown and trades, a heatmap of a sweep.

    >>> pf = from_signals(close, entries, exits, fees=0.001, sl_stop=0.05)
    >>> fig = plots.equity(pf, column=0)                   # value, drawdown, trades
    >>> fig = plots.heatmap(table, "window", "sl_stop", "sharpe_ratio")
    >>> fig = plots.portfolio(pf, column=0)                # vectorbt's pf.plot()

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
    value = _value_frame(pf).iloc[:, j]
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


#: The subplots of :func:`portfolio` (vectorbt's default ``pf.plot()``), in order.
PORTFOLIO_SUBPLOTS = ("orders", "trade_pnl", "cum_returns")


def _value_frame(pf):
    """``pf.value()`` as a DataFrame (a Series ``close`` gives a Series)."""
    value = pf.value()
    return value.to_frame() if value.ndim == 1 else value


def _one_column(pf, column):
    """The position of ``column`` in ``pf``'s columns (the only one if None)."""
    labels = list(_value_frame(pf).columns)
    if column is None:
        if len(labels) != 1:
            raise ValueError(f"the portfolio has {len(labels)} columns: give column= one of "
                             f"{labels}")
        return 0
    if column not in labels:
        raise KeyError(f"column={column!r} is not a column of this portfolio; its columns are "
                       f"{labels}")
    return labels.index(column)


def _orders_on_price(ax, x, pf, j):
    ax.plot(x, pf._close[:, j], color="tab:blue", lw=1.2, label="Close")
    orders = pf.orders
    orders = orders[orders["column"] == pf.columns[j]]
    for side, marker, color in (("buy", "^", "tab:green"), ("sell", "v", "tab:red")):
        sel = orders[orders["side"] == side]
        ax.scatter(np.asarray(x)[sel["idx"].to_numpy()], sel["price"].to_numpy(),
                   marker=marker, color=color, s=36, zorder=3, label=side.capitalize())
    ax.set_ylabel("Price")


def _trade_pnl(ax, x, pf, j):
    rec = pf.trades.records
    rec = rec[rec["col"] == j]
    closed = rec["status"] == 1
    for name, sel, marker in (("Closed", closed, "o"), ("Open", ~closed, "D")):
        part = rec[sel]
        color = np.where(part["pnl"] > 0, "tab:green", "tab:red")
        ax.scatter(np.asarray(x)[part["exit_idx"].to_numpy()], part["pnl"].to_numpy(),
                   c=color, marker=marker, s=30, zorder=3, label=name)
    ax.axhline(0.0, color="gray", lw=0.8, ls="--")
    ax.set_ylabel("Trade PnL")


def _cum_returns(ax, x, pf, j):
    value = _value_frame(pf).iloc[:, j].to_numpy()
    init = np.broadcast_to(pf._params["init_cash"], (len(pf.columns),))[j]
    bench = pf._close[:, j] / pf._close[0, j]
    ax.plot(x, bench, color="tab:gray", lw=1.0, label="Benchmark")
    ax.plot(x, value / init, color="tab:purple", lw=1.2, label="Value")
    ax.axhline(1.0, color="gray", lw=0.8, ls="--")
    ax.set_ylabel("Cumulative returns")


_SUBPLOT_DRAW = {"orders": ("Orders", _orders_on_price),
                 "trade_pnl": ("Trade PnL", _trade_pnl),
                 "cum_returns": ("Cumulative Returns", _cum_returns)}


def portfolio(pf, column=None, subplots=PORTFOLIO_SUBPLOTS, axes=None, title=None):
    """vectorbt's default ``pf.plot()`` of one column of a :class:`~flowsim.finance.Portfolio`.

    >>> fig = plots.portfolio(pf, column="BTC")
    >>> fig = pf.plot(column="BTC", subplots=("orders", "cum_returns"))

    ``"orders"``: the close with buys (green up triangles) and sells (red down
    triangles) at their fill prices; ``"trade_pnl"``: each trade's PnL at its exit
    bar (closed: circles, open: diamonds; green > 0, red otherwise);
    ``"cum_returns"``: value / ``init_cash`` against close / first close.

    Parameters
    ----------
    pf : Portfolio
        The result of :func:`~flowsim.finance.from_signals`.
    column : label or None
        A label of the portfolio's columns (needed with several).
    subplots : str or sequence of str
        Some of :data:`PORTFOLIO_SUBPLOTS`, drawn top to bottom.
    axes : sequence of matplotlib axes or None
        One per subplot (default: a new figure).
    title : str or None
        The figure's title.

    Returns
    -------
    matplotlib.figure.Figure
    """
    import matplotlib.pyplot as plt
    subplots = [subplots] if isinstance(subplots, str) else list(subplots)
    unknown = [s for s in subplots if s not in _SUBPLOT_DRAW]
    if unknown or not subplots:
        raise ValueError(f"subplots must be some of {list(PORTFOLIO_SUBPLOTS)}, got {subplots}")
    j = _one_column(pf, column)
    if axes is None:
        fig, axes = plt.subplots(len(subplots), 1, sharex=True, squeeze=False,
                                 figsize=(9, 2.6 * len(subplots)))
        axes = axes[:, 0]
    if len(axes) != len(subplots):
        raise ValueError(f"axes: one per subplot ({len(subplots)}), got {len(axes)}")
    index = pf.value().index
    x = index if hasattr(index, "to_pydatetime") else np.arange(len(index))
    for ax, name in zip(axes, subplots):
        heading, draw = _SUBPLOT_DRAW[name]
        draw(ax, x, pf, j)
        ax.set_title(heading, fontsize=10)
        ax.legend(loc="upper left", fontsize=8)
    fig = axes[0].figure
    if title:
        fig.suptitle(title)
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
