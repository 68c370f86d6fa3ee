"""Small market ensembles: cases of :func:`flowsim.testing.check_executor` (tests/test_markets.py).

``CASES[name]`` = ``dict(factory="module:function", n_events=..., n_iters=...)``: the
factory (importable, no arguments) returns a :class:`flowsim.markets.MarketEnsemble`; a
conformance run builds any Flow on it with ``n_events`` markets per iteration and runs
``n_iters`` iterations: every backend must give the bits of ``Flow``.  The ensembles
keep only sums over markets, so any ``block_size`` works.

:func:`dtype_differences` runs a case (or a bundled pams sample) in float64 and in
float32 with the same seed and gives each statistic's difference in standard errors;
:func:`dtype_table` (``python -m flowsim.testing.cases_markets``) is the table of
docs/markets.rst.
"""


def small_config():
    """Three groups exercising every branch: chart-following with a fundamental random
    walk, a contrarian group with normal margins, short time windows (a small book)."""
    return {
        "simulation": {
            "markets": ["Market"], "agents": ["Followers", "Contrarians"],
            "sessions": [
                {"sessionName": 0, "iterationSteps": 12, "withOrderPlacement": True,
                 "withOrderExecution": False, "withPrint": False},
                {"sessionName": 1, "iterationSteps": 48, "withOrderPlacement": True,
                 "withOrderExecution": True, "withPrint": False}]},
        "Market": {"class": "Market", "tickSize": 0.01, "marketPrice": 100.0,
                   "fundamentalVolatility": 0.002},
        "Followers": {"class": "FCNAgent", "numAgents": 12, "markets": ["Market"],
                      "assetVolume": 50, "cashAmount": 10000,
                      "fundamentalWeight": {"expon": [1.0]}, "chartWeight": [0.2, 0.8],
                      "noiseWeight": {"expon": [1.0]}, "noiseScale": 0.001,
                      "timeWindowSize": [5, 15], "orderMargin": [0.0, 0.05]},
        "Contrarians": {"class": "FCNAgent", "numAgents": 6, "markets": ["Market"],
                        "assetVolume": 50, "cashAmount": 10000, "flowsim.isChartFollowing": False,
                        "fundamentalWeight": 0.5, "chartWeight": {"expon": [0.5]},
                        "noiseWeight": {"expon": [1.0]}, "noiseScale": 0.002,
                        "timeWindowSize": [3, 10], "orderMargin": [0.05, 0.2],
                        "marginType": "normal", "meanReversionTime": {"const": [20]}},
    }


#: How flowsim runs :func:`contrarian_config`'s user class (pams's FCNAgent with
#: ``is_chart_following = False`` set in ``setup``).
CONTRARIAN_CLASSES = {"ContrarianFCNAgent": ("FCNAgent", {"is_chart_following": False})}


def contrarian_config():
    """pams's ``two_groups`` sample with its Chartists a user class, ``ContrarianFCNAgent``
    (chart weights 1-3): an FCNAgent whose ``setup`` sets ``is_chart_following = False``
    (the stored pams
    table ``pams_markets_contrarian`` ran it; flowsim maps it with
    :data:`CONTRARIAN_CLASSES`)."""
    import copy
    import json

    from flowsim.markets import config_path
    with open(config_path("two_groups")) as fh:
        cfg = copy.deepcopy(json.load(fh))
    cfg["Chartists"]["class"] = "ContrarianFCNAgent"
    cfg["Chartists"]["chartWeight"] = [1.0, 3.0]        # the chart term dominates
    return cfg


def small():
    from flowsim.markets import from_pams
    return from_pams(small_config())


def events_config():
    """:func:`small_config` with every event class flowsim runs: a fundamental shock of
    two steps, a price limit, a trading halt and a fat-finger order, all in the
    session with execution (trigger times relative to its first step, 12)."""
    cfg = small_config()
    cfg["simulation"]["sessions"][1]["events"] = ["Shock", "Limit", "Halt", "FatFinger"]
    cfg["Shock"] = {"class": "FundamentalPriceShock", "target": "Market", "triggerTime": 5,
                    "priceChangeRate": -0.05, "shockTimeLength": 2, "enabled": True}
    cfg["Limit"] = {"class": "PriceLimitRule", "targetMarkets": ["Market"],
                    "triggerChangeRate": 0.2, "enabled": True}
    cfg["Halt"] = {"class": "TradingHaltRule", "targetMarkets": ["Market"],
                   "triggerChangeRate": 0.03, "haltingTimeLength": 4, "enabled": True}
    cfg["FatFinger"] = {"class": "OrderMistakeShock", "target": "Market", "triggerTime": 20,
                        "priceChangeRate": 0.04, "orderVolume": 30, "orderTimeLength": 15,
                        "enabled": True, "MEMO": "a buy of 30 units 4% above the price"}
    return cfg


def events():
    from flowsim.markets import from_pams
    return from_pams(events_config())


def venues_config():
    """Three markets in each ensemble member: two with correlated fundamentals and an
    IndexMarket of them; a group trading all three and a group trading one, two
    agents' orders per step (``maxNormalOrders``), a fundamental shock in the
    second market."""
    cfg = small_config()
    cfg["simulation"]["markets"] = ["Spot", "Other", "Index"]
    cfg["simulation"]["fundamentalCorrelations"] = {"pairwise": [["Spot", "Other", 0.5]]}
    for s in cfg["simulation"]["sessions"]:
        s["maxNormalOrders"] = 2
    cfg["simulation"]["sessions"][1]["events"] = ["Shock"]
    cfg["Shock"] = {"class": "FundamentalPriceShock", "target": "Other", "triggerTime": 5,
                    "priceChangeRate": -0.05, "enabled": True}
    cfg["Spot"] = dict(cfg.pop("Market"), outstandingShares=100)
    cfg["Other"] = {"extends": "Spot", "tickSize": 0.05, "fundamentalPrice": 104.0,
                    "outstandingShares": 300}
    cfg["Index"] = {"class": "IndexMarket", "tickSize": 0.01, "marketPrice": 103.0,
                    "markets": ["Spot", "Other"]}
    cfg["Followers"]["markets"] = ["Spot", "Other", "Index"]
    cfg["Contrarians"]["markets"] = ["Other"]
    return cfg


def venues():
    from flowsim.markets import from_pams
    return from_pams(venues_config())


def hifreq_config():
    """Two spot markets and their IndexMarket with pams's high-frequency phase: arbitrage
    agents (orders of two units on the index) with a low threshold so they act, up to 2
    of them after each of the 2 normal agents' orders of a step, the phase skipped at
    rate 0.3 (``highFrequencySubmitRate`` 0.7), none in the warm-up."""
    cfg = small_config()
    cfg["simulation"]["markets"] = ["Spot", "Other", "Index"]
    cfg["simulation"]["agents"] = ["Followers", "Contrarians", "Arbitrage"]
    for s in cfg["simulation"]["sessions"]:
        s["maxNormalOrders"] = 2
    cfg["simulation"]["sessions"][0]["maxHighFrequencyOrders"] = 0
    cfg["simulation"]["sessions"][1].update({"maxHighFrequencyOrders": 2,
                                             "highFrequencySubmitRate": 0.7})
    cfg["Spot"] = dict(cfg.pop("Market"), outstandingShares=100)
    cfg["Other"] = {"extends": "Spot", "fundamentalPrice": 104.0}
    cfg["Index"] = {"class": "IndexMarket", "tickSize": 0.01, "marketPrice": 102.0,
                    "markets": ["Spot", "Other"]}
    cfg["Followers"]["markets"] = ["Spot", "Other", "Index"]
    cfg["Contrarians"]["markets"] = ["Index"]
    cfg["Arbitrage"] = {"class": "ArbitrageAgent", "numAgents": 3,
                        "markets": ["Index", "Spot", "Other"], "orderVolume": 1,
                        "orderThresholdPrice": 0.3, "orderTimeLength": 2,
                        "cashAmount": 10000, "assetVolume": 50}
    return cfg


def hifreq():
    from flowsim.markets import from_pams
    return from_pams(hifreq_config())


def policy():
    """A fixed tiny MLP (numpy weights: picklable, deterministic)."""
    from flowsim.markets import MLP
    return MLP.random([8, 6, 2], seed=3)


def learned():
    from flowsim.markets import LearnedAgents, from_pams
    group = LearnedAgents(policy(), 5, time_window=[4, 12], order_margin=[0.0, 0.05], lags=5)
    return from_pams(small_config(), learned=[group])


#: Blocks of 64 markets, device calls of at most 2 blocks: several blocks per
#: iteration, so the backends' chunks and shares differ from Flow's.
CASES = {
    "markets_small": dict(
        factory="flowsim.testing.cases_markets:small",
        n_events=200, n_iters=2, block_size=64, events_limit=128),
    "markets_learned": dict(
        factory="flowsim.testing.cases_markets:learned",
        n_events=130, n_iters=1, block_size=64, events_limit=128),
    "markets_events": dict(
        factory="flowsim.testing.cases_markets:events",
        n_events=130, n_iters=1, block_size=64, events_limit=128),
    "markets_venues": dict(
        factory="flowsim.testing.cases_markets:venues",
        n_events=130, n_iters=1, block_size=64, events_limit=128),
    "markets_hifreq": dict(
        factory="flowsim.testing.cases_markets:hifreq",
        n_events=130, n_iters=1, block_size=64, events_limit=128),
}


#: Bundled pams samples :func:`dtype_differences` measures beside :data:`CASES`.
DTYPE_SAMPLES = ("ci2002", "fat_finger", "trading_halt", "shock_transfer")


def case_ensemble(name):
    """A conformance case's ensemble (a key of :data:`CASES`) or a bundled pams sample's."""
    import importlib

    from flowsim.markets import config_path, from_pams
    if name in CASES:
        module, function = CASES[name]["factory"].split(":")
        return getattr(importlib.import_module(module), function)()
    return from_pams(config_path(name))


def dtype_differences(name, n_markets, seed=0, block_size=64):
    """``{statistic: (float64 value, float32 value, z)}`` of ``n_markets`` markets of
    ``name`` (a key of :data:`CASES` or a bundled pams sample) run with the same seed
    in float64 and in float32: ``z`` is float32's value minus float64's in units of
    float64's standard error (NaN where that error is 0: a statistic without spread).

        from flowsim.testing.cases_markets import dtype_differences
        dtype_differences("markets_small", 1024)["final_price"]
    """
    import numpy as np

    from flowsim.core.flow import Flow
    runs = {}
    for dtype in ("float64", "float32"):
        sim = case_ensemble(name)
        result = Flow(sim, n_events=n_markets, seed=seed, block_size=block_size,
                      events_limit=n_markets, quiet=True, dtype=dtype).run(1)
        runs[dtype] = np.atleast_1d(result.value), np.atleast_1d(result.error)
    (v64, e64), (v32, _) = runs["float64"], runs["float32"]
    with np.errstate(invalid="ignore", divide="ignore"):
        z = np.where(e64 > 0, (v32 - v64) / e64, np.nan)
    return {s: (float(a), float(b), float(c)) for s, a, b, c in zip(sim.names, v64, v32, z)}


def dtype_table(cases=None, n_markets=1024, seed=0):
    """Text table of :func:`dtype_differences` of ``n_markets`` markets over ``cases``
    (default: :data:`CASES`, then :data:`DTYPE_SAMPLES`): per case the largest ``|z|``
    over its statistics and the statistic that has it.

        python -m flowsim.testing.cases_markets        # docs/markets.rst's table
    """
    import numpy as np
    lines = [f"{'case':<16} {'markets':>7} {'max |z|':>8}  statistic"]
    for name in cases or list(CASES) + list(DTYPE_SAMPLES):
        found = dtype_differences(name, n_markets, seed=seed)
        z = {s: abs(v[2]) for s, v in found.items() if not np.isnan(v[2])}
        worst = max(z, key=z.get)
        lines.append(f"{name:<16} {n_markets:>7} {z[worst]:>8.3f}  {worst}")
    return "\n".join(lines)


if __name__ == "__main__":
    print(dtype_table())
