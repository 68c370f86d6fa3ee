"""vectorbt's ``stats()`` of a grouped portfolio, one row per group.

    >>> pf = from_signals(close, entries, exits, group_by=True, cash_sharing=True)
    >>> pf.stats()                # vectorbt's 28 metrics of each group (and total_orders)

Each metric is vectorbt 1.2's with ``group_by``: the value, returns and drawdowns
of the group's value; the benchmark holds the group's cash split evenly over its
assets; the gross exposure sums the assets' absolute position values over the
group's free cash; the trades are every exit trade of the group's columns (built
from the orders as vectorbt's ``get_exit_trades_nb`` builds them).
"""
import numpy as np

from .accessors import (  # noqa: F401  (exit_trades_from_orders: also read from here)
    add_tolerant,
    column_orders,
    exit_trades_from_orders,
    order_flows,
)
from .metric_names import PORTFOLIO_STATS


def _group_sum(a, group_of, n_groups):
    """Sum ``a`` ``[bars, columns]`` over each group's columns, in column order."""
    out = np.zeros(a.shape[:-1] + (n_groups,))
    for g in range(n_groups):
        out[..., g] = np.sum(a[..., group_of == g], axis=-1)
    return out


def max_gross_exposure(orders, close, group_of, init_cash):
    """vectorbt's grouped ``gross_exposure().max()``: per group, the largest sum of the
    columns' absolute position values over that sum plus the group's free cash."""
    n_groups = len(init_cash)
    asset_flow, cash_flow = order_flows(column_orders(orders), close.shape)
    assets = np.empty_like(asset_flow)
    now = np.zeros(close.shape[1])
    for i in range(close.shape[0]):
        now = assets[i] = add_tolerant(now, asset_flow[i])
    held = _group_sum(np.abs(np.where(assets == 0, 0.0, close) * assets), group_of, n_groups)
    flow = _group_sum(cash_flow, group_of, n_groups)
    cash = np.empty_like(flow)
    now = np.asarray(init_cash, dtype=np.float64)
    for i in range(flow.shape[0]):
        now = cash[i] = add_tolerant(now, flow[i])
    denom = add_tolerant(held, cash)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.max(np.where(denom == 0, 0.0, held / np.where(denom == 0, 1.0, denom)), axis=0)


def benchmark_return(close, group_of, init_cash):
    """vectorbt's grouped benchmark: the group's cash split evenly over its assets,
    bought at the first close; its total return."""
    out = np.empty(len(init_cash))
    for g in range(len(init_cash)):
        part = close[:, group_of == g]
        value = init_cash[g] / part.shape[1] * np.sum(part / part[0], axis=1)
        out[g] = (value[-1] - value[0]) / value[0]
    return out


def _nan_mean(x):
    return np.mean(x) if len(x) else np.nan


def trade_metrics(trades, group_of, n_groups):
    """The trade metrics of :meth:`stats` per group (closed trades; open ones counted)."""
    names = ("total_trades", "total_closed_trades", "total_open_trades", "open_trade_pnl",
             "win_rate", "best_trade", "worst_trade", "avg_winning_trade", "avg_losing_trade",
             "avg_winning_trade_duration", "avg_losing_trade_duration", "profit_factor",
             "expectancy")
    out = {k: np.full(n_groups, np.nan) for k in names}
    held = (trades["exit_idx"] - trades["entry_idx"]).astype(np.float64)
    for g in range(n_groups):
        mine = group_of[trades["col"]] == g
        closed = mine & (trades["status"] == 1)
        one = _closed_metrics(trades["pnl"][closed], trades["return"][closed], held[closed])
        one.update(total_trades=mine.sum(), total_closed_trades=closed.sum(),
                   total_open_trades=(mine & (trades["status"] == 0)).sum(),
                   open_trade_pnl=np.sum(trades["pnl"][mine & (trades["status"] == 0)]))
        for k in names:
            out[k][g] = one[k]
    return out


def _closed_metrics(pnl, ret, held):
    """Win rate, best / worst / average returns, durations, profit factor, expectancy."""
    n = len(pnl)
    won, lost = pnl > 0, pnl < 0
    with np.errstate(divide="ignore", invalid="ignore"):
        win_rate = won.sum() / n if n else np.nan
        loss_rate = (n - won.sum() - (pnl == 0).sum()) / n if n else np.nan
        gain, loss = np.sum(pnl[won]), np.abs(np.sum(pnl[lost]))
        factor = np.float64(gain) / np.float64(loss) if n else np.nan
    avg_win = _nan_mean(pnl[won]) if won.any() else 0.0
    avg_loss = _nan_mean(pnl[lost]) if lost.any() else 0.0
    return {"win_rate": win_rate,
            "best_trade": np.max(ret) if n else np.nan,
            "worst_trade": np.min(ret) if n else np.nan,
            "avg_winning_trade": _nan_mean(ret[won]), "avg_losing_trade": _nan_mean(ret[lost]),
            "avg_winning_trade_duration": _nan_mean(held[won]),
            "avg_losing_trade_duration": _nan_mean(held[lost]), "profit_factor": factor,
            "expectancy": win_rate * avg_win - loss_rate * np.abs(avg_loss) if n else np.nan}


def _drawdown_of(returns):
    cum = np.cumprod(1 + returns)
    return np.min(cum / np.maximum.accumulate(cum) - 1)


def return_metrics(returns, ann, risk_free=0.0, required_return=0.0):
    """Sharpe (ddof 1), Calmar, Omega and Sortino of ``returns`` ``[bars, groups]``,
    vectorbt's ``returns_acc`` ratios."""
    out = {k: np.full(returns.shape[1], np.nan) for k in
           ("sharpe_ratio", "calmar_ratio", "omega_ratio", "sortino_ratio")}
    thresh = required_return if ann == 1 else (1 + required_return) ** (1.0 / ann) - 1
    for g in range(returns.shape[1]):
        r = returns[:, g]
        if len(r) >= 2:
            adj = r - risk_free
            std = np.std(adj, ddof=1)
            out["sharpe_ratio"][g] = np.inf if std == 0 else np.mean(adj) / std * np.sqrt(ann)
            down = np.sqrt(np.mean(np.minimum(r - required_return, 0) ** 2)) * np.sqrt(ann)
            out["sortino_ratio"][g] = (np.inf if down == 0 else
                                       np.mean(r - required_return) * ann / down)
        dd = _drawdown_of(r)
        if dd != 0:
            out["calmar_ratio"][g] = (np.prod(1 + r) ** (ann / len(r)) - 1) / abs(dd)
        less = r - risk_free - thresh
        denom = -np.sum(less[less < 0])
        out["omega_ratio"][g] = np.inf if denom == 0 else np.sum(less[less > 0]) / denom
    return out


def drawdown_metrics(value):
    """(max drawdown, its longest duration in bars) per group from the drawdown records
    of ``value`` ``[bars, groups]`` (NaN where the value never falls)."""
    from .accessors import drawdown_records
    rec = drawdown_records(value)
    depth = (rec["valley_val"] - rec["peak_val"]) / rec["peak_val"]
    length = rec["end_idx"] - rec["start_idx"] + (rec["status"] == 0)
    deepest, longest = np.full(value.shape[1], np.nan), np.full(value.shape[1], np.nan)
    for j, d, n in zip(rec["col"], depth, length):
        deepest[j] = d if np.isnan(deepest[j]) else min(deepest[j], d)
        longest[j] = n if np.isnan(longest[j]) else max(longest[j], n)
    return deepest, longest


def group_stats_frame(pf, returns):
    """:meth:`~flowsim.finance.grouped.GroupPortfolio.stats` of a grouped portfolio
    ``pf`` whose bar returns per group are ``returns`` ``[bars, groups]``: vectorbt's
    28 metrics per group (in ``PORTFOLIO_STATS``'s order), then ``total_orders``."""
    import pandas as pd

    group_of = pf.column_groups()
    n_groups = len(pf.group_labels)
    n = len(pf.index)
    table = pf.orders
    orders = {k: table[k].to_numpy() for k in ("col", "idx", "size", "price", "fees")}
    orders["side"] = (table["side"] == "sell").to_numpy().astype(np.int64)
    orders["id"] = np.arange(len(orders["col"]))
    close = np.asarray(pf.close, dtype=np.float64).reshape(n, -1)
    init = np.asarray(pf.init_cash(), dtype=np.float64)
    value = np.asarray(pf.value(), dtype=np.float64).reshape(n, -1)
    rows = {"start": [pf.index[0]] * n_groups, "end": [pf.index[-1]] * n_groups,
            "period": np.full(n_groups, n, dtype=np.int64), "start_value": init,
            "end_value": value[-1], "total_return": (value[-1] - init) / init,
            "benchmark_return": benchmark_return(close, group_of, init),
            "max_gross_exposure": max_gross_exposure(orders, close, group_of, init),
            "total_fees_paid": _group_sum(orders["fees"][None, :], group_of[orders["col"]],
                                          n_groups)[0]}
    rows["max_drawdown"], rows["max_drawdown_duration"] = drawdown_metrics(value)
    rows.update(trade_metrics(exit_trades_from_orders(orders, close), group_of, n_groups))
    rows.update(return_metrics(returns, pf.ann_factor, pf.risk_free))
    rows["total_orders"] = np.bincount(group_of[orders["col"]], minlength=n_groups)
    frame = pd.DataFrame({k: rows[k] for k in PORTFOLIO_STATS + ("total_orders",)},
                         index=pf.group_labels)
    return frame

