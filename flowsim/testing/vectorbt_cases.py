"""vectorbt reference cases for flowsim.finance.from_signals and the indicators.

``portfolio_cases()`` are 14 backtests on random data with fixed seeds (not tuned:
random walks, random signals), 250 bars x 3 columns each, covering every
direction, fees + fixed fees + slippage, sl_stop, sl_trail, tp_stop, with and
without open/high/low, per-column keywords, dense signals where stops and signals
fall on one bar, and another annualisation.  ``run_vectorbt(case)`` runs one
through ``vectorbt.Portfolio.from_signals`` and returns its ``stats()`` metrics (as
fractions: vectorbt's percentages / 100, max drawdown as its negative
``max_drawdown()``, durations in bars) and its exit-trade records.

``indicator_inputs()`` / ``run_indicators(inputs)``: MA, EMA, MSTD, BBANDS, RSI,
STOCH, MACD, ATR, OBV over several parameter rows and columns.

``benchmarks/make_vectorbt_reference.py`` stores both in ``tests/data/``, and the
moving-average sweeps that :func:`load_reference` reads back.
"""
import json
import os

import numpy as np

N_BARS, N_COLS = 250, 3
#: The metrics of the stored moving-average sweeps, in their columns' order.
COLUMNS = ("total_return", "sharpe", "max_drawdown", "trades")


def load_reference(root, name="vectorbt_ma"):
    """(close, pairs, {column: values}) as stored under ``root/tests/data`` by
    ``benchmarks/make_vectorbt_reference.py`` (``name``: ``"vectorbt_ma"`` for the
    1,590-pair grid, ``"vectorbt_ties"`` for the ties case)."""
    close = np.loadtxt(os.path.join(root, "tests", "data", f"{name}_close.csv"))
    table = np.loadtxt(os.path.join(root, "tests", "data", f"{name}_sweep.csv"),
                       delimiter=",")
    return close, table[:, :2].astype(np.int64), dict(zip(COLUMNS, table[:, 2:].T))

STAT_COLUMNS = {  # our name -> (vectorbt stats() title, scale)
    "start_value": ("Start Value", 1), "end_value": ("End Value", 1),
    "total_return": ("Total Return [%]", 0.01), "benchmark_return": ("Benchmark Return [%]", 0.01),
    "total_fees_paid": ("Total Fees Paid", 1), "max_drawdown": ("Max Drawdown [%]", -0.01),
    "max_drawdown_duration": ("Max Drawdown Duration", None),
    "total_trades": ("Total Trades", 1), "total_closed_trades": ("Total Closed Trades", 1),
    "total_open_trades": ("Total Open Trades", 1), "open_trade_pnl": ("Open Trade PnL", 1),
    "win_rate": ("Win Rate [%]", 0.01), "best_trade": ("Best Trade [%]", 0.01),
    "worst_trade": ("Worst Trade [%]", 0.01), "avg_winning_trade": ("Avg Winning Trade [%]", 0.01),
    "avg_losing_trade": ("Avg Losing Trade [%]", 0.01), "profit_factor": ("Profit Factor", 1),
    "expectancy": ("Expectancy", 1), "sharpe_ratio": ("Sharpe Ratio", 1),
    "calmar_ratio": ("Calmar Ratio", 1), "omega_ratio": ("Omega Ratio", 1),
    "sortino_ratio": ("Sortino Ratio", 1)}

TRADE_FIELDS = ("col", "size", "entry_idx", "entry_price", "entry_fees", "exit_idx",
                "exit_price", "exit_fees", "pnl", "return", "direction", "status")


def market(seed, n=N_BARS, c=N_COLS):
    """Random-walk OHLC bars: close, open, high, low ``[n, c]``."""
    rng = np.random.default_rng(seed)
    close = 100 * np.exp(np.cumsum(0.02 * rng.standard_normal((n, c)), axis=0))
    op = np.concatenate([close[:1], close[:-1]]) * np.exp(0.006 * rng.standard_normal((n, c)))
    hi = np.maximum(op, close) * np.exp(np.abs(0.01 * rng.standard_normal((n, c))))
    lo = np.minimum(op, close) * np.exp(-np.abs(0.01 * rng.standard_normal((n, c))))
    return close, op, hi, lo


def _case(name, seed, rate=0.08, short=False, ohlc=(), **kw):
    rng = np.random.default_rng(seed + 1000)
    shape = (N_BARS, N_COLS)
    sig = {"entries": rng.random(shape) < rate, "exits": rng.random(shape) < rate}
    if short:
        sig["short_entries"] = rng.random(shape) < rate
        sig["short_exits"] = rng.random(shape) < rate
    return {"name": name, "seed": seed, "ohlc": list(ohlc), "signals": sig, "kwargs": kw}


def portfolio_cases():
    """The 14 stored from_signals cases (inputs only)."""
    hl, ohl = ("high", "low"), ("open", "high", "low")
    return [
        _case("longonly_plain", 1),
        _case("longonly_costs", 2, fees=0.002, fixed_fees=0.05, slippage=0.001),
        _case("shortonly_costs", 3, direction="shortonly", fees=0.001, fixed_fees=0.1,
              slippage=0.002),
        _case("both_costs", 4, direction="both", fees=0.0015, slippage=0.001),
        _case("long_short_signals", 5, short=True, fees=0.001, fixed_fees=0.02),
        _case("sl_on_close", 6, sl_stop=0.03, fees=0.001),
        _case("sl_high_low", 7, ohlc=hl, sl_stop=0.025, fees=0.001, slippage=0.001),
        _case("sl_trail_ohlc", 8, ohlc=ohl, sl_stop=0.03, sl_trail=True, fees=0.001),
        _case("tp_on_close", 9, tp_stop=0.04, fixed_fees=0.1),
        _case("both_sl_tp_trail_ohlc", 10, ohlc=ohl, direction="both", sl_stop=0.03,
              sl_trail=True, tp_stop=0.05, fees=0.002, fixed_fees=0.05, slippage=0.001),
        _case("per_column_keywords", 11, ohlc=hl, fees=[0.0, 0.001, 0.003],
              sl_stop=[0.02, np.nan, 0.05], tp_stop=[np.nan, 0.03, 0.06],
              size=[np.inf, 0.5, 2.0], init_cash=[100.0, 1000.0, 50.0]),
        _case("stops_and_signals_same_bar", 12, rate=0.45, ohlc=ohl, direction="both",
              sl_stop=0.01, tp_stop=0.012, fees=0.001),
        _case("shortonly_stops_ohlc", 13, ohlc=ohl, direction="shortonly", sl_stop=0.02,
              sl_trail=True, tp_stop=0.03, fees=0.001, slippage=0.002),
        _case("hourly_252_risk_free", 14, ohlc=hl, direction="both", sl_stop=0.04,
              fees=0.0005, freq="1h", year_freq="252 days", risk_free=0.0001,
              required_return=0.0002),
    ]


def case_inputs(case):
    """``(close, {open/high/low}, signals, kwargs)`` of a case, as from_signals takes them."""
    close, op, hi, lo = market(case["seed"])
    bars = {k: v for k, v in (("open", op), ("high", hi), ("low", lo)) if k in case["ohlc"]}
    kw = {k: (np.asarray(v, dtype=float) if isinstance(v, list) else v)
          for k, v in case["kwargs"].items()}
    return close, bars, case["signals"], kw


def run_vectorbt(case):
    """vectorbt's metrics ``{name: [c]}`` and trade records ``{field: array}`` of a case."""
    import pandas as pd
    import vectorbt as vbt
    close, bars, signals, kw = case_inputs(case)
    kw = dict(kw)
    freq = kw.pop("freq", "1D")
    year_freq = kw.pop("year_freq", "365 days")
    settings = {k: kw.pop(k) for k in ("risk_free", "required_return") if k in kw}
    idx = pd.date_range("2021-01-01", periods=N_BARS, freq=freq)

    def frame(a):
        return pd.DataFrame(a, index=idx)

    args = {k: frame(v) for k, v in {**bars, **signals}.items()}
    for k, v in kw.items():
        args[k] = v
    vbt.settings.returns["year_freq"] = year_freq
    try:
        pf = vbt.Portfolio.from_signals(frame(close), freq=freq, **args)
        st = pf.stats(agg_func=None, settings=settings)
    finally:
        vbt.settings.returns["year_freq"] = "365 days"
    metrics = {}
    for ours, (title, scale) in STAT_COLUMNS.items():
        col = st[title]
        if scale is None:
            metrics[ours] = (col / pd.Timedelta(freq)).to_numpy(dtype=float)
        else:
            metrics[ours] = col.to_numpy(dtype=float) * scale
    metrics["max_drawdown"] = pf.drawdowns.max_drawdown().to_numpy(dtype=float)
    rec = pf.trades.records
    trades = {f: np.asarray(rec[f]) for f in TRADE_FIELDS}
    return metrics, trades, pf.value().to_numpy()


def save_cases(path, cases):
    """One npz: per case its metrics, trades and value curve, plus the cases as JSON."""
    import vectorbt
    out = {"cases": np.array(json.dumps([{**c, "signals": None} for c in cases],
                                        default=float)),
           "version": np.array(vectorbt.__version__)}
    for c in cases:
        metrics, trades, value = run_vectorbt(c)
        for k, v in metrics.items():
            out[f"{c['name']}/metric/{k}"] = v
        for k, v in trades.items():
            out[f"{c['name']}/trade/{k}"] = v
        out[f"{c['name']}/value"] = value
    np.savez_compressed(path, **out)


def load_cases(path):
    """``[(case, metrics, trades, value)]`` stored by :func:`save_cases` (signals rebuilt)."""
    data = np.load(path)
    stored = {c["name"]: c for c in json.loads(str(data["cases"]))}
    out = []
    for case in portfolio_cases():
        name = case["name"]
        assert name in stored, name
        metrics = {k: data[f"{name}/metric/{k}"] for k in STAT_COLUMNS}
        trades = {k: data[f"{name}/trade/{k}"] for k in TRADE_FIELDS}
        out.append((case, metrics, trades, data[f"{name}/value"]))
    return out


# -- indicators ------------------------------------------------------------------------------
def indicator_inputs(seed=77, n=300, c=2):
    close, op, hi, lo = market(seed, n, c)
    vol = np.random.default_rng(seed).integers(1, 10_000, (n, c)).astype(float)
    return {"close": close, "high": hi, "low": lo, "volume": vol, "close_int": np.round(close)}


#: (name, flowsim call, vectorbt call) with parameter rows; outputs [bars, rows * cols].
INDICATOR_PARAMS = {
    "ma": dict(window=[2, 10, 30]), "ema": dict(window=[2, 10, 30]),
    "mstd": dict(window=[5, 20]), "emstd": dict(window=[5, 20]),
    "bbands": dict(window=[10, 20], alpha=[2.0, 1.5]),
    "rsi": dict(window=[5, 14, 30]), "ersi": dict(window=[5, 14]),
    "stoch": dict(k_window=[5, 14], d_window=[3, 5]),
    "macd": dict(fast_window=[5, 12], slow_window=[10, 26], signal_window=[4, 9]),
    "emacd": dict(fast_window=[5, 12], slow_window=[10, 26], signal_window=[4, 9]),
    "atr": dict(window=[5, 14]), "obv": {},
}


def run_indicators(x):
    """vectorbt's indicator outputs ``{name: [bars, rows * cols]}`` on ``indicator_inputs``."""
    import pandas as pd
    import vectorbt as vbt
    c, h, lo = pd.DataFrame(x["close"]), pd.DataFrame(x["high"]), pd.DataFrame(x["low"])
    P = INDICATOR_PARAMS
    out = {"ma": vbt.MA.run(c, P["ma"]["window"]).ma,
           "ema": vbt.MA.run(c, P["ema"]["window"], ewm=True).ma,
           "mstd": vbt.MSTD.run(c, P["mstd"]["window"]).mstd,
           "emstd": vbt.MSTD.run(c, P["emstd"]["window"], ewm=True).mstd,
           "rsi": vbt.RSI.run(c, P["rsi"]["window"]).rsi,
           "ersi": vbt.RSI.run(c, P["ersi"]["window"], ewm=True).rsi}
    bb = vbt.BBANDS.run(c, P["bbands"]["window"], alpha=P["bbands"]["alpha"])
    out.update(bbands_upper=bb.upper, bbands_middle=bb.middle, bbands_lower=bb.lower)
    st = vbt.STOCH.run(h, lo, c, P["stoch"]["k_window"], P["stoch"]["d_window"])
    out.update(stoch_k=st.percent_k, stoch_d=st.percent_d)
    m = vbt.MACD.run(c, **P["macd"])
    out.update(macd=m.macd, macd_signal=m.signal)
    m = vbt.MACD.run(c, **P["emacd"], macd_ewm=True, signal_ewm=True)
    out.update(emacd=m.macd, emacd_signal=m.signal)
    a = vbt.ATR.run(h, lo, c, P["atr"]["window"])
    out.update(atr=a.atr)
    out["obv"] = vbt.OBV.run(pd.DataFrame(x["close_int"]), pd.DataFrame(x["volume"])).obv
    r = vbt.RSI.run(c, [14])
    out["rsi_crossed_below_30"] = r.rsi_crossed_below(30).astype(float)
    out["rsi_crossed_above_70"] = r.rsi_crossed_above(70).astype(float)
    return {k: np.asarray(v, dtype=float) for k, v in out.items()}


# -- strategy sweeps ---------------------------------------------------------------------------
def sweep_cases():
    """Grids for flowsim.finance.signal_sweep: (name, strategy name, grid dict, keywords)."""
    import itertools
    rsi = list(itertools.product([6, 14], [25.0, 35.0], [65.0, 75.0], [0.03, 0.08]))
    return [
        ("rsi_stops", "rsi_thresholds",
         dict(zip(("window", "lower", "upper", "sl_stop"), map(list, zip(*rsi)))),
         dict(fees=0.001, fixed_fees=0.01, slippage=0.0005, freq="1D")),
        ("ma_both", "ma_crossover", {"fast": [3, 5, 10], "slow": [20, 30, 40]},
         dict(direction="both", fees=0.001, tp_stop=0.1, freq="1D")),
        ("macd", "macd_cross", {"fast_window": [5, 12], "slow_window": [15, 26],
                                "signal_window": [4, 9]}, dict(fees=0.002, freq="1D")),
        ("bbands", "bbands_reversion", {"window": [10, 20, 30], "alpha": [1.5, 2.0, 2.5]},
         dict(direction="shortonly", sl_stop=0.05, sl_trail=True, fees=0.001, freq="1D")),
        ("ma_direction", "ma_crossover",
         {"fast": [3, 5, 10, 3, 5, 10], "slow": [20, 30, 40, 30, 40, 20],
          "direction": ["both", "longonly", "shortonly", "longonly", "both", "shortonly"]},
         dict(fees=0.001, sl_stop=0.05, freq="1D")),
    ]


def sweep_close(seed=99, n=400, c=2):
    return market(seed, n, c)[0]


def _vbt_signals(strategy, close, grid):
    """vectorbt's signals [bars, combos * assets] (combination-major) for a strategy grid."""
    import pandas as pd
    import vectorbt as vbt
    n, c = close.shape
    C = pd.DataFrame(close)
    ents, exs = [], []
    rows = list(zip(*grid.values()))
    for row in rows:
        p = dict(zip(grid.keys(), row))
        if strategy == "rsi_thresholds":
            r = vbt.RSI.run(C, int(p["window"]))
            e, x = r.rsi_crossed_below(p["lower"]), r.rsi_crossed_above(p["upper"])
        elif strategy == "ma_crossover":
            f, s = vbt.MA.run(C, int(p["fast"])), vbt.MA.run(C, int(p["slow"]))
            e, x = f.ma_crossed_above(s), f.ma_crossed_below(s)
        elif strategy == "macd_cross":
            m = vbt.MACD.run(C, int(p["fast_window"]), int(p["slow_window"]),
                             int(p["signal_window"]))
            e, x = m.macd_crossed_above(m.signal), m.macd_crossed_below(m.signal)
        else:
            b = vbt.BBANDS.run(C, int(p["window"]), alpha=float(p["alpha"]))
            e, x = b.close_crossed_below(b.lower), b.close_crossed_above(b.upper)
        ents.append(np.asarray(e, dtype=bool).reshape(n, c))
        exs.append(np.asarray(x, dtype=bool).reshape(n, c))
    return np.concatenate(ents, axis=1), np.concatenate(exs, axis=1), len(rows)


def run_vectorbt_sweep(strategy, close, grid, kw):
    """vectorbt's metrics for every (combination, asset), combination-major."""
    import pandas as pd
    import vectorbt as vbt
    kw = dict(kw)
    freq = kw.pop("freq")
    ent, ex, n_rows = _vbt_signals(strategy, close, grid)
    c = close.shape[1]
    idx = pd.date_range("2021-01-01", periods=close.shape[0], freq=freq)
    per_row = {k: np.repeat(np.asarray(v, dtype=float), c) for k, v in grid.items()
               if k in ("sl_stop", "tp_stop", "fees")}
    if "direction" in grid:
        codes = {"longonly": 0, "shortonly": 1, "both": 2}
        per_row["direction"] = np.repeat([codes[d] for d in grid["direction"]], c)
    pf = vbt.Portfolio.from_signals(pd.DataFrame(np.tile(close, (1, n_rows)), index=idx),
                                    pd.DataFrame(ent, index=idx), pd.DataFrame(ex, index=idx),
                                    freq=freq, **kw, **per_row)
    st = pf.stats(agg_func=None)
    out = {}
    for ours, (title, scale) in STAT_COLUMNS.items():
        col = st[title]
        out[ours] = ((col / pd.Timedelta(freq)).to_numpy(dtype=float) if scale is None
                     else col.to_numpy(dtype=float) * scale)
    out["max_drawdown"] = pf.drawdowns.max_drawdown().to_numpy(dtype=float)
    return out
