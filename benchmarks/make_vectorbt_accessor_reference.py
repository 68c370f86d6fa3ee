"""Make the vectorbt reference of the portfolio accessors.

Each case is a random-walk market (``flowsim.testing.vectorbt_cases.market``, a
fixed seed) on daily (or hourly) timestamps with columns ``a, b, c``, random
signals and a few ``Portfolio.from_signals`` keywords: long with stops, long and
short signals with costs, short only, accumulation (several exit trades per
position), no trades at all, a fall never recovered, hourly bars, and one column of
inputs as Series (``close`` named ``x``) or as a one-column DataFrame.  vectorbt runs
each one; ``tests/data/vectorbt_accessor_cases.npz`` keeps the inputs (bars,
signals, the cases as JSON) with vectorbt's ``total_return()``,
``sharpe_ratio()``, ``max_drawdown()``, ``cash()``, ``stats(column=...)`` (all 28
metrics), the order, trade, position and drawdown records (raw and
``records_readable``'s titles and names), their ``count()``, ``trades.win_rate()``,
``drawdowns.max_drawdown()`` and ``orders.fees.sum()``, with the type each call
returned (a Series, or a scalar for Series inputs), so the tests rebuild every call
without vectorbt.

Needs the ``bench`` extra (vectorbt).  Run from the repository root::

    .venv/bin/python benchmarks/make_vectorbt_accessor_reference.py
"""
import json
import os
import sys

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OUT = os.path.join(ROOT, "tests", "data", "vectorbt_accessor_cases.npz")
sys.path.insert(0, ROOT)
from flowsim.testing import vectorbt_cases as vc  # noqa: E402

N, C = vc.N_BARS, vc.N_COLS
ONE_COLUMN_BARS = 160
COLUMNS = ["a", "b", "c"]
RECORD_FIELDS = {
    "trades": ("id", "col", "size", "entry_idx", "entry_price", "entry_fees", "exit_idx",
               "exit_price", "exit_fees", "pnl", "return", "direction", "status",
               "parent_id"),
    "drawdowns": ("id", "col", "peak_idx", "start_idx", "valley_idx", "end_idx", "peak_val",
                  "valley_val", "end_val", "status")}
RECORD_FIELDS["positions"] = RECORD_FIELDS["trades"]
RECORD_FIELDS["orders"] = ("id", "col", "idx", "size", "price", "fees", "side")
#: readable columns of names (stored as strings) and of timestamps (as int64 ns)
NAMED = ("Column", "Direction", "Status", "Side")
STAMPS = ("Timestamp", "Entry Timestamp", "Exit Timestamp", "Peak Timestamp", "Start Timestamp",
          "Valley Timestamp", "End Timestamp")


#: stats() rows beyond vectorbt_cases.STAT_COLUMNS: our name -> (title, scale); scale
#: "stamp": an index value (int64 ns), None: a duration (in bars)
MORE_STATS = {"start": ("Start", "stamp"), "end": ("End", "stamp"), "period": ("Period", None),
              "max_gross_exposure": ("Max Gross Exposure [%]", 0.01),
              "avg_winning_trade_duration": ("Avg Winning Trade Duration", None),
              "avg_losing_trade_duration": ("Avg Losing Trade Duration", None)}


def _signals(seed, rate, short, n=N):
    rng = np.random.default_rng(seed + 4000)
    names = ("entries", "exits") + (("short_entries", "short_exits") if short else ())
    return {k: rng.random((n, C)) < rate for k in names}


def cases():
    """``[{name, seed, freq, ohlc, column, signals, kwargs, bars}]``: the stored inputs."""
    def case(name, seed, ohlc=(), rate=0.08, short=False, freq="1D", column="b",
             layout="frame", **kw):
        # layout: "frame" (columns a, b, c), "series" (column a as a Series named x),
        # "column" (column a as a one-column DataFrame, column x); these on 160 bars,
        # the tests' other shape of one column
        n = N if layout == "frame" else ONE_COLUMN_BARS
        close, op, hi, lo = vc.market(seed, n)
        bars = {"close": close, "open": op, "high": hi, "low": lo}
        signals = _signals(seed, rate, short, n)
        if layout != "frame":
            bars = {k: v[:, :1] for k, v in bars.items()}
            signals = {k: v[:, :1] for k, v in signals.items()}
            column = "x"
        return {"name": name, "seed": seed, "freq": freq, "ohlc": list(ohlc), "column": column,
                "signals": signals, "kwargs": kw, "bars": bars, "layout": layout}

    out = [
        case("long_stops_ohlc", 61, ["open", "high", "low"], sl_stop=0.03, tp_stop=0.05,
             fees=0.001),
        case("long_short_signals_costs", 62, short=True, fees=0.001, fixed_fees=0.05,
             slippage=0.001, column="a"),
        case("shortonly_trailing", 63, ["high", "low"], direction="shortonly", sl_stop=0.04,
             sl_trail=True, fees=0.002, column="c"),
        case("accumulate_partial_exits", 64, direction="both", size=1.0, accumulate=True,
             fees=0.001, rate=0.15),
        case("no_trades", 65, rate=0.0),
        case("hourly_both", 66, ["high", "low"], direction="both", sl_stop=0.03, fees=0.0005,
             freq="1h", column="c"),
        case("series_long_stops", 68, ["high", "low"], sl_stop=0.03, fees=0.001, rate=0.1,
             layout="series"),
        case("series_short_costs", 69, direction="both", fees=0.001, fixed_fees=0.05,
             rate=0.1, layout="series"),
        case("one_column_frame", 68, ["high", "low"], sl_stop=0.03, fees=0.001, rate=0.1,
             layout="column"),
    ]
    fall = case("never_recovered", 67, rate=0.0, column="a")
    fall["bars"]["close"] = fall["bars"]["close"] * np.exp(-np.linspace(0.0, 1.2, N))[:, None]
    fall["signals"]["entries"][5, :2] = True         # column c never trades
    out.append(fall)
    return out


def _readable(records):
    """{title list, named columns as str, timestamp columns as int64 ns}."""
    rr = records.records_readable
    out = {"titles": list(rr.columns)}
    for k in rr.columns:
        if k in NAMED:
            out[k] = np.asarray(rr[k].astype(str).to_numpy(), dtype=str)
        elif k in STAMPS:
            out[k] = rr[k].to_numpy().astype("datetime64[ns]").astype(np.int64)
    return out


def _stats(st, freq, prefix):
    """A stats() Series as ``{prefix/our name: value}`` (fractions, bars, int64 ns)."""
    import pandas as pd
    out = {}
    for ours, (title, scale) in (vc.STAT_COLUMNS | MORE_STATS).items():
        value = st[title]
        if scale == "stamp":
            out[f"{prefix}/{ours}"] = np.int64(pd.Timestamp(value).value)
            continue
        if scale is None:
            value = value / pd.Timedelta(freq) if not pd.isna(value) else np.nan
        else:
            value = float(value) * scale
        out[f"{prefix}/{ours}"] = np.float64(value)
    return out


def run_vectorbt(case):
    """vectorbt's accessor outputs of one case as ``{key: array}`` and the titles."""
    import pandas as pd
    import vectorbt as vbt
    idx = pd.date_range("2021-01-01", periods=len(case["bars"]["close"]), freq=case["freq"])
    layout = case["layout"]

    def frame(a):
        if layout == "series":
            return pd.Series(a[:, 0], index=idx, name="x")
        return pd.DataFrame(a, index=idx, columns=COLUMNS if layout == "frame" else ["x"])

    args = {k: frame(case["bars"][k]) for k in case["ohlc"]}
    args.update({k: frame(v) for k, v in case["signals"].items()})
    pf = vbt.Portfolio.from_signals(frame(case["bars"]["close"]), freq=case["freq"], **args,
                                    **case["kwargs"])
    out = {"total_return": pf.total_return(), "sharpe_ratio": pf.sharpe_ratio(),
           "sharpe_ratio_risk_free": pf.sharpe_ratio(risk_free=0.0002),
           "max_drawdown": pf.max_drawdown(), "cash": pf.cash(),
           "trades_win_rate": pf.trades.win_rate(), "trades_count": pf.trades.count(),
           "positions_count": pf.positions.count(), "drawdowns_count": pf.drawdowns.count(),
           "drawdowns_max_drawdown": pf.drawdowns.max_drawdown(),
           "orders_count": pf.orders.count(), "orders_buy_count": pf.orders.buy.count(),
           "orders_fees_sum": pf.orders.fees.sum()}
    types = {k: type(v).__name__ for k, v in out.items()}
    out = {k: np.atleast_1d(np.asarray(v, dtype=np.float64)) for k, v in out.items()}
    out.update(_stats(pf.stats(column=case["column"]), case["freq"], "stats_column"))
    if layout == "series":
        whole = pf.stats()
        types["stats"] = f"{type(whole).__name__}:{whole.name}"
        out.update(_stats(whole, case["freq"], "stats"))
    out["types"] = np.array(json.dumps(types))
    titles = {}
    for kind, fields in RECORD_FIELDS.items():
        records = getattr(pf, kind)
        rec = records.records
        out.update({f"{kind}/{f}": np.asarray(rec[f]) for f in fields})
        readable = _readable(records)
        titles[kind] = readable.pop("titles")
        out.update({f"{kind}/readable/{k}": v for k, v in readable.items()})
    return out, titles


def main():
    import vectorbt
    out = {"version": np.array(vectorbt.__version__)}
    metas, titles = [], None
    for case in cases():
        name = case["name"]
        out.update({f"{name}/bars/{k}": case["bars"][k] for k in ["close"] + case["ohlc"]})
        out.update({f"{name}/signal/{k}": v for k, v in case["signals"].items()})
        metas.append({k: case[k] for k in ("name", "seed", "freq", "ohlc", "column", "kwargs",
                                           "layout")}
                     | {"signals": sorted(case["signals"])})
        results, titles = run_vectorbt(case)
        out.update({f"{name}/{k}": v for k, v in results.items()})
        print(f"{name}: {len(results['trades/id'])} trades, {len(results['positions/id'])} "
              f"positions, {len(results['drawdowns/id'])} drawdowns")
    out["cases"] = np.array(json.dumps(metas))
    out["titles"] = np.array(json.dumps(titles))
    np.savez_compressed(OUT, **out)
    print(f"wrote {os.path.relpath(OUT, ROOT)} (vectorbt {vectorbt.__version__})")


if __name__ == "__main__":
    main()
