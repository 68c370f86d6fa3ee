"""Make the vectorbt reference of the portfolio accessors.

Each case is a random-walk market (``flowsim.testing.vectorbt_cases.market``, a
fixed seed) on daily (or hourly) timestamps with columns ``a, b, c``, random
signals and a few ``Portfolio.from_signals`` keywords: long with stops, long and
short signals with costs, short only, accumulation (several exit trades per
position), no trades at all, a fall never recovered, hourly bars.  vectorbt runs
each one; ``tests/data/vectorbt_accessor_cases.npz`` keeps the inputs (bars,
signals, the cases as JSON) with vectorbt's ``total_return()``,
``sharpe_ratio()``, ``max_drawdown()``, ``cash()``, ``stats(column=...)``, the
trade, position and drawdown records (raw and ``records_readable``'s titles and
names), their ``count()``, ``trades.win_rate()`` and ``drawdowns.max_drawdown()``,
so the tests rebuild every call without vectorbt.

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
COLUMNS = ["a", "b", "c"]
RECORD_FIELDS = {
    "trades": ("id", "col", "size", "entry_idx", "entry_price", "entry_fees", "exit_idx",
               "exit_price", "exit_fees", "pnl", "return", "direction", "status",
               "parent_id"),
    "drawdowns": ("id", "col", "peak_idx", "start_idx", "valley_idx", "end_idx", "peak_val",
                  "valley_val", "end_val", "status")}
RECORD_FIELDS["positions"] = RECORD_FIELDS["trades"]
#: readable columns of names (stored as strings) and of timestamps (as int64 ns)
NAMED = ("Column", "Direction", "Status")
STAMPS = ("Entry Timestamp", "Exit Timestamp", "Peak Timestamp", "Start Timestamp",
          "Valley Timestamp", "End Timestamp")


def _signals(seed, rate, short):
    rng = np.random.default_rng(seed + 4000)
    names = ("entries", "exits") + (("short_entries", "short_exits") if short else ())
    return {k: rng.random((N, C)) < rate for k in names}


def cases():
    """``[{name, seed, freq, ohlc, column, signals, kwargs, bars}]``: the stored inputs."""
    def case(name, seed, ohlc=(), rate=0.08, short=False, freq="1D", column="b", **kw):
        close, op, hi, lo = vc.market(seed)
        bars = {"close": close, "open": op, "high": hi, "low": lo}
        return {"name": name, "seed": seed, "freq": freq, "ohlc": list(ohlc), "column": column,
                "signals": _signals(seed, rate, short), "kwargs": kw, "bars": bars}

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


def run_vectorbt(case):
    """vectorbt's accessor outputs of one case as ``{key: array}`` and the titles."""
    import pandas as pd
    import vectorbt as vbt
    idx = pd.date_range("2021-01-01", periods=N, freq=case["freq"])

    def frame(a):
        return pd.DataFrame(a, index=idx, columns=COLUMNS)

    args = {k: frame(case["bars"][k]) for k in case["ohlc"]}
    args.update({k: frame(v) for k, v in case["signals"].items()})
    pf = vbt.Portfolio.from_signals(frame(case["bars"]["close"]), freq=case["freq"], **args,
                                    **case["kwargs"])
    out = {"total_return": pf.total_return(), "sharpe_ratio": pf.sharpe_ratio(),
           "sharpe_ratio_risk_free": pf.sharpe_ratio(risk_free=0.0002),
           "max_drawdown": pf.max_drawdown(), "cash": pf.cash(),
           "trades_win_rate": pf.trades.win_rate(), "trades_count": pf.trades.count(),
           "positions_count": pf.positions.count(), "drawdowns_count": pf.drawdowns.count(),
           "drawdowns_max_drawdown": pf.drawdowns.max_drawdown()}
    out = {k: np.asarray(v.to_numpy(), dtype=np.float64) for k, v in out.items()}
    st = pf.stats(column=case["column"])
    for ours, (title, scale) in vc.STAT_COLUMNS.items():
        value = st[title]
        if scale is None:
            value = value / pd.Timedelta(case["freq"]) if not pd.isna(value) else np.nan
        else:
            value = float(value) * scale
        out[f"stats_column/{ours}"] = np.float64(value)
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
        metas.append({k: case[k] for k in ("name", "seed", "freq", "ohlc", "column", "kwargs")}
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
