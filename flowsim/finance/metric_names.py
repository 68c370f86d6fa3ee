"""The names of a portfolio's metrics, in vectorbt's order (shared by
:mod:`flowsim.finance.portfolio` and :mod:`flowsim.finance.group_metrics`)."""

#: The sweeps' metrics, in order (vectorbt's ``stats()`` metrics).
STATS = ("start_value", "end_value", "total_return", "benchmark_return", "total_fees_paid",
         "max_drawdown", "max_drawdown_duration", "total_trades", "total_closed_trades",
         "total_open_trades", "open_trade_pnl", "win_rate", "best_trade", "worst_trade",
         "avg_winning_trade", "avg_losing_trade", "profit_factor", "expectancy",
         "sharpe_ratio", "calmar_ratio", "omega_ratio", "sortino_ratio")
#: Columns of :meth:`flowsim.finance.portfolio.Portfolio.stats`: vectorbt's 28 default
#: ``stats()`` metrics in its order, :data:`STATS` (the sweeps' metrics) with the first
#: and last bar's index values, the bars spanned, the most of the value held in
#: positions, and the bars
#: winning and losing trades were held.
PORTFOLIO_STATS = ("start", "end", "period") + STATS[:4] + ("max_gross_exposure",) + \
    STATS[4:16] + ("avg_winning_trade_duration", "avg_losing_trade_duration") + STATS[16:]
