"""Make the vectorbt reference of from_signals' everyday keywords.

Each case is a random-walk market (``flowsim.testing.vectorbt_cases.market``, a
fixed seed), random signals and a set of ``Portfolio.from_signals`` keywords
(``init_cash="auto"``, direction codes, ``size_type``, per-bar ``size`` / ``fees``
/ ``sl_stop`` arrays, stop entry and exit prices...).  vectorbt runs each one;
``tests/data/vectorbt_keyword_cases.npz`` keeps the inputs (signals, array
keywords, the cases as JSON) with vectorbt's ``stats()`` metrics, exit trades and
value curve, so the tests rebuild every call without vectorbt.

Needs the ``bench`` extra (vectorbt).  Run from the repository root::

    .venv/bin/python benchmarks/make_vectorbt_keywords_reference.py
"""
import json
import os
import sys

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OUT = os.path.join(ROOT, "tests", "data", "vectorbt_keyword_cases.npz")
sys.path.insert(0, ROOT)
from flowsim.testing import vectorbt_cases as vc  # noqa: E402

N, C = vc.N_BARS, vc.N_COLS


def _signals(seed, rate=0.08, short=False):
    rng = np.random.default_rng(seed + 2000)
    names = ("entries", "exits") + (("short_entries", "short_exits") if short else ())
    return {k: rng.random((N, C)) < rate for k in names}


def _per_bar(seed, lo, hi, cols=C):
    return np.random.default_rng(seed + 3000).uniform(lo, hi, (N, cols))


def cases():
    """``[{name, seed, ohlc, signals, kwargs}]``: the stored cases (inputs)."""
    hl, ohl = ["high", "low"], ["open", "high", "low"]

    def case(name, seed, ohlc=(), rate=0.08, short=False, **kw):
        return {"name": name, "seed": seed, "ohlc": list(ohlc),
                "signals": _signals(seed, rate, short), "kwargs": kw}

    return [
        case("init_cash_auto", 21, size=2.0, fees=0.001, fixed_fees=0.05),
        case("init_cash_autoalign_both_stops", 22, ohl, direction="both", init_cash="autoalign",
             size=np.array([1.0, 3.0, 0.5]), sl_stop=0.03, fees=0.001, slippage=0.001),
        case("direction_code_both", 23, direction=2, fees=0.001),
        case("direction_codes_per_column", 24, hl, direction=np.array([0, 1, 2]), sl_stop=0.04),
        case("size_value_at_price", 25, ohl, size=50.0, size_type="value", fees=0.001,
             price=vc.market(25)[1] * 1.001),
        case("size_value_both_reversals", 26, direction="both", size=80.0, size_type="value",
             slippage=0.001, fixed_fees=0.05),
        case("size_percent_long", 27, size=0.5, size_type="percent", fees=0.002,
             fixed_fees=0.1),
        case("size_percent_shortonly_stops", 28, ohl, direction="shortonly",
             size=np.array([0.3, 0.7, 1.0]), size_type="percent", sl_stop=0.03, fees=0.001),
        case("size_types_per_column", 29, size=np.array([2.0, 100.0, 0.5]),
             size_type=np.array([0, 1, 2]), fees=0.001),
        case("per_bar_size_fees_stops", 30, hl, direction="both", size=_per_bar(30, 0.5, 3.0),
             fees=_per_bar(31, 0.0, 0.004, 1), sl_stop=_per_bar(32, 0.01, 0.06),
             tp_stop=np.array([0.05, np.nan, 0.08])),
        case("per_bar_value_slippage_trail", 33, ohl, size=_per_bar(33, 20.0, 90.0, 1),
             size_type="value", slippage=_per_bar(34, 0.0, 0.003), sl_stop=_per_bar(35, 0.02, 0.05),
             sl_trail=True, fees=0.001),
        case("opposite_entry_ignore", 36, short=True, upon_opposite_entry="ignore",
             fees=0.001, rate=0.15),
        case("opposite_entry_close_short_signals", 37, hl, short=True, sl_stop=0.03,
             upon_opposite_entry="close", fees=0.001, rate=0.15),
        case("opposite_entry_per_column_percent", 38, direction="both", size=0.8,
             size_type="percent", upon_opposite_entry=np.array([0, 1, 2]), rate=0.15),
        case("stop_entry_at_price", 39, ohl, price=vc.market(39)[1], stop_entry_price="price",
             sl_stop=0.03, tp_stop=0.05, fees=0.001),
        case("stop_entry_fill_trailing", 40, ohl, direction="both", slippage=0.002,
             stop_entry_price="fillprice", sl_stop=0.025, sl_trail=True, fees=0.001),
        case("stop_exit_stopmarket", 41, ohl, slippage=0.003, sl_stop=0.03, tp_stop=0.04,
             stop_exit_price="stopmarket", fees=0.001),
        case("stop_exit_per_column", 42, ohl, direction="both", price=vc.market(42)[1],
             slippage=0.001, sl_stop=0.02, tp_stop=0.03, stop_exit_price=np.array([1, 2, 3]),
             stop_entry_price=np.array([0, 1, 3])),
        case("accumulate_long", 43, size=1.0, accumulate=True, fees=0.001, rate=0.12),
        case("accumulate_both_value_stops", 44, ohl, direction="both", size=30.0,
             size_type="value", accumulate=True, sl_stop=0.04, tp_stop=0.06, fees=0.001,
             slippage=0.001, rate=0.12),
        case("accumulate_modes_short_signals", 45, hl, short=True, size=np.array([1.0, 2.0, 0.5]),
             accumulate=np.array([2, 3, 1]), upon_opposite_entry=np.array([3, 2, 4]),
             sl_stop=0.05, sl_trail=True, fees=0.001, rate=0.12),
        case("accumulate_opposite_close", 46, direction="both", size=1.5, accumulate=True,
             upon_opposite_entry="close", fixed_fees=0.05, rate=0.12),
        case("no_partial_fills", 47, direction="both", size=np.array([0.6, 0.9, 1.2]),
             allow_partial=False, accumulate=True, fees=0.002, rate=0.15),
        case("no_partial_fills_per_bar_value", 48, size=_per_bar(48, 40.0, 160.0),
             size_type="value", allow_partial=_per_bar(49, 0, 1) < 0.5, fees=0.001),
        case("lock_cash_shorts", 50, ohl, direction="both", size=np.array([0.5, 1.0, 2.0]),
             lock_cash=True, accumulate=True, sl_stop=0.05, fees=0.002, fixed_fees=0.05,
             rate=0.15),
        case("lock_cash_all_in_short_signals", 51, short=True, lock_cash=True,
             size=np.array([np.inf, 1.5, 3.0]), fees=0.001, rate=0.12),
    ]


def _split(case):
    """(JSON-able case, {npz key: array}) with the array keywords stored as arrays."""
    name = case["name"]
    arrays = {f"{name}/signal/{k}": v for k, v in case["signals"].items()}
    kwargs, array_kw = {}, []
    for k, v in case["kwargs"].items():
        if isinstance(v, np.ndarray):
            arrays[f"{name}/kw/{k}"] = v
            array_kw.append(k)
        else:
            kwargs[k] = v
    meta = {"name": name, "seed": case["seed"], "ohlc": case["ohlc"], "kwargs": kwargs,
            "array_kwargs": array_kw, "signals": sorted(case["signals"])}
    return meta, arrays


def main():
    import vectorbt
    out = {"version": np.array(vectorbt.__version__)}
    metas = []
    for case in cases():
        meta, arrays = _split(case)
        metas.append(meta)
        out.update(arrays)
        metrics, trades, value = vc.run_vectorbt(case)
        name = case["name"]
        out.update({f"{name}/metric/{k}": v for k, v in metrics.items()})
        out.update({f"{name}/trade/{k}": v for k, v in trades.items()})
        out[f"{name}/value"] = value
        print(f"{name}: {len(trades['col'])} trades, end values {value[-1].round(2)}")
    out["cases"] = np.array(json.dumps(metas))
    np.savez_compressed(OUT, **out)
    print(f"wrote {os.path.relpath(OUT, ROOT)} (vectorbt {vectorbt.__version__})")


if __name__ == "__main__":
    main()
