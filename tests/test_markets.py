"""flowsim.markets: pams configs read or refused, the compiled statistics equal their
numpy definition, statistics agree with pams (stored tables), same bits on every backend,
checkpoint and resume, paths, grids, the CLI."""
import copy
import json
import os
import warnings

import numpy as np
import pytest
from helpers import ROOT, run_python
from hypothesis import given, settings
from hypothesis import strategies as st

import flowsim.markets as fm
from flowsim.markets import stats
from flowsim.markets.config import Dist, parse
from flowsim.testing.cases_markets import (
    CASES,
    CONTRARIAN_CLASSES,
    contrarian_config,
    small_config,
    venues_config,
)

pytestmark = pytest.mark.costly

BLOCK = 64          # one block size for the in-process ensembles: one compilation each


def ci2002():
    with open(fm.config_path("ci2002")) as fh:
        return json.load(fh)


# -- configs (no TensorFlow) ----------------------------------------------------------------
def test_ci2002_parses_to_pams_values():
    cfg = parse(fm.config_path("ci2002"))
    assert (cfg.n_steps, cfg.first_execution, cfg.n_agents) == (600, 100, 100)
    assert (cfg.tick_size, cfg.market_price, cfg.fundamental_price) == (1e-5, 300.0, 300.0)
    g = cfg.groups[0]
    assert g.dist("chart_weight") == Dist("expon", (0.0,))
    assert g.dist("time_window") == Dist("uniform", (100.0, 200.0))
    assert g.max_time_window == 200          # int() of a draw in [100, 200] (rounding)
    assert g.dist("mean_reversion_time") == Dist("uniform", (50.0, 100.0))


def test_extends_and_defaults_follow_pams():
    cfg = parse(fm.config_path("two_groups"))
    assert [g.name for g in cfg.groups] == ["Fundamentalists", "Chartists"]
    assert [g.n_agents for g in cfg.groups] == [60, 40]
    assert cfg.fundamental_volatility == 0.001
    small = parse(small_config())
    assert small.groups[1].margin_normal and not small.groups[1].chart_following
    no_mrt = ci2002()
    del no_mrt["FCNAgents"]["meanReversionTime"]
    assert parse(no_mrt).groups[0].dist("mean_reversion_time").kind == "same"


def _event(cfg, settings):
    cfg["Ev"] = settings
    cfg["simulation"]["sessions"][1]["events"] = ["Ev"]


def _index_mistake_and_halt(cfg):
    """A sample with ArbitrageAgents given a mistaken order in their IndexMarket and a
    halt (refused: flowsim does not match pams there)."""
    cfg["Halt"] = {"class": "TradingHaltRule", "targetMarkets": ["IndexMarket-I"],
                   "triggerChangeRate": 0.05, "haltingTimeLength": 3}
    cfg["Mistake"] = {"class": "OrderMistakeShock", "target": "IndexMarket-I",
                      "triggerTime": 10, "priceChangeRate": -0.04, "orderVolume": 40,
                      "orderTimeLength": 60}
    cfg["simulation"]["sessions"][1]["events"] = ["Halt", "Mistake"]


def _refused(mutate, *words):
    cfg = ci2002()
    mutate(cfg)
    with pytest.raises(ValueError) as exc:
        parse(cfg)
    for w in words:
        assert w in str(exc.value), str(exc.value)


@pytest.mark.parametrize("mutate, words", [
    (lambda c: c["FCNAgents"].update({"class": "HighFrequencyAgent"}),
     ["HighFrequencyAgent", "FCNAgents", "not implemented", "run this config in pams"]),
    (lambda c: c["FCNAgents"].update({"class": "MarketMakerAgent"}),
     ["FCNAgents.targetMarket is required (MarketMakerAgent)"]),
    (lambda c: _maker(c, targetMarket="Other"),
     ["Maker.targetMarket names 'Other'", "not a market (Market)"]),
    (lambda c: _maker(c, netInterestSpread=[0.01, 0.03]),
     ["Maker.netInterestSpread", "distribution", "give a number"]),
    (lambda c: c["Maker"].pop("netInterestSpread") if _maker(c) is None else None,
     ["Maker.netInterestSpread is required"]),
    (lambda c: _maker(c, orderTimeLength=-1), ["Maker.orderTimeLength must be >= 0"]),
    (lambda c: _maker(c) or c["simulation"]["sessions"][1].update(
        {"maxHifreqOrders": 2, "maxHighFrequencyOrders": 2}),
     ["maxHifreqOrders is replaced by maxHighFrequencyOrders", "delete maxHifreqOrders"]),
    (lambda c: _maker(c) or c["simulation"]["sessions"][1].update(
        {"highFrequencySubmitRate": -0.5}),
     ["sessions[1].highFrequencySubmitRate must be >= 0"]),
    (lambda c: _maker(c) or c.update({"Maker2": dict(c["Maker"])})
     or c["simulation"]["agents"].append("Maker2"),
     ["one high-frequency group", "Maker, Maker2", "keep one"]),
    (lambda c: _maker(c) or c["simulation"].update({"agents": ["Maker"]}),
     ["Maker trades only after normal agents", "add a normal agent group"]),
    (lambda c: _sample(c, "shock_transfer", _index_mistake_and_halt),
     ["OrderMistakeShock in the IndexMarket of ArbitrageAgents", "TradingHaltRule",
      "does not match pams", "target a component market"]),
    (lambda c: _sample(c, "shock_transfer", lambda t: t["ArbitrageAgents"].pop("orderVolume")),
     ["ArbitrageAgents.orderVolume is required (ArbitrageAgent)"]),
    (lambda c: _sample(c, "shock_transfer", lambda t: t["ArbitrageAgents"].update(
        {"orderVolume": 1.5})), ["ArbitrageAgents.orderVolume must be an int"]),
    (lambda c: _sample(c, "shock_transfer", lambda t: t["ArbitrageAgents"].update(
        {"markets": ["SpotMarket-1"]})),
     ["ArbitrageAgents.markets must reach exactly one IndexMarket", "reaches []"]),
    (lambda c: _sample(c, "shock_transfer", lambda t: t["SpotMarket-2"].update(
        {"outstandingShares": 100})),
     ["same outstandingShares", "'SpotMarket-2': 100", "make them equal"]),
    (lambda c: c["Market"].update({"class": "IndexMarket"}),
     ["Market.markets is required for an IndexMarket"]),
    (lambda c: c["simulation"].update({"fundamentalCorrelations": {"cross": []}}),
     ["fundamentalCorrelations.cross", "only 'pairwise'"]),
    (lambda c: c["simulation"]["sessions"][1].update({"events": ["Shock"]}),
     ["'Shock'", "events", "add an entry"]),
    (lambda c: c["simulation"]["sessions"][1].update({"maxNormalOrders": 0}),
     ["maxNormalOrders", ">= 1"]),
    (lambda c: c["simulation"].update({"markets": ["Market", "Market2"]}),
     ["'Market2'", "add an entry"]),
    (lambda c: c["simulation"].update({"markets": ["Market", "Market"]}),
     ["'Market'", "twice"]),
    (lambda c: c.update({"M2": {"extends": "Market", "prefix": "Market"}})
     or c["simulation"].update({"markets": ["Market", "M2"]}),
     ["two markets are named 'Market'", "prefixes"]),
    (lambda c: c["FCNAgents"].update({"markets": ["Spot"]}),
     ["FCNAgents.markets", "'Spot'", "fix the name"]),
    (lambda c: c["Market"].update({"markets": ["Market"]}), ["'markets'", "not implemented"]),
    (lambda c: c["FCNAgents"].update({"numAgents": "many"}), ["numAgents", "int()"]),
    (lambda c: c["FCNAgents"].update({"class": "UserDefinedFCNAgent"}),
     ["'UserDefinedFCNAgent'", "classes="]),
    (lambda c: c["Market"].pop("tickSize"), ["tickSize", "required", "add"]),
    (lambda c: c.update({"S": {"class": "CircuitBreaker"}})
     or c["simulation"]["sessions"][1].update({"events": ["S"]}),
     ["'CircuitBreaker'", "PriceLimitRule", "classes="]),
    (lambda c: _event(c, {"class": "PriceLimitRule", "targetMarkets": ["Market"],
                          "triggerChangeRate": 1}), ["triggerChangeRate", "float", "1.0"]),
    (lambda c: _event(c, {"class": "PriceLimitRule", "targetMarkets": ["Spot"],
                          "triggerChangeRate": 0.1}), ["targetMarkets", "'Spot'", "Market"]),
    (lambda c: _event(c, {"class": "TradingHaltRule", "targetMarkets": ["Market"],
                          "triggerChangeRate": 0.1}), ["haltingTimeLength", "required"]),
    (lambda c: _event(c, {"class": "FundamentalPriceShock", "target": "Market",
                          "triggerDays": 3, "priceChangeRate": -0.1}),
     ["triggerDays", "obsolete", "triggerTime"]),
    (lambda c: _event(c, {"class": "FundamentalPriceShock", "target": "Market",
                          "triggerTime": 0}), ["priceChangeRate", "required", "add"]),
    (lambda c: _event(c, {"class": "OrderMistakeShock", "target": "Market",
                          "triggerTime": 5, "priceChangeRate": -0.05,
                          "orderTimeLength": 10}), ["orderVolume", "required"]),
    (lambda c: _event(c, {"class": "OrderMistakeShock", "target": "Market",
                          "triggerTime": 5.0, "priceChangeRate": -0.05, "orderVolume": 10,
                          "orderTimeLength": 10}), ["triggerTime", "integer"]),
    (lambda c: c["FCNAgents"].update({"timeWindowSize": {"expon": [150]}}),
     ["timeWindowSize", "unbounded", "book"]),
    (lambda c: c["FCNAgents"].update({"timeWindowSize": [1, 9000]}),
     ["timeWindowSize", "book holds"]),
    (lambda c: c["FCNAgents"].update({"fundamentalWeight": {"normal": [1, 1]}}),
     ["fundamentalWeight", "negative"]),
    (lambda c: c["FCNAgents"].update({"orderMargin": [0.5, 1.5]}), ["orderMargin"]),
    (lambda c: c["FCNAgents"].update({"noiseScale": {"gamma": [1]}}), ["'gamma'"]),
    (lambda c: c["FCNAgents"].pop("noiseScale"), ["noiseScale", "required"]),
    (lambda c: c["Market"].update({"tickSize": 1e-12}), ["tickSize", "ticks"]),
    (lambda c: c["Market"].update({"fundamentalVolatility": 0.3}),
     ["fundamentalVolatility", "600 steps", "integer tick levels", "larger tickSize"]),
    # several markets (the test sample's three correlated SpotMarket-N)
    (lambda c: _sample(c, "test", lambda t: t["SpotMarket-N"].update(
        {"fundamentalVolatility": 0.0})),
     ["fundamentalCorrelations", "SpotMarket-0 needs fundamentalVolatility > 0"]),
    (lambda c: _sample(c, "test", lambda t: t["simulation"]["fundamentalCorrelations"][
        "pairwise"].append(["SpotMarket-1", "SpotMarket-2", 1.0])),
     ["corr of SpotMarket-1, SpotMarket-2", "(-1, 1)"]),
    (lambda c: _sample(c, "test", lambda t: t["simulation"]["fundamentalCorrelations"][
        "pairwise"].append(["SpotMarket-1", "SpotMarket-2", -0.95])),
     ["not a valid (positive definite) correlation matrix", "remove a circle"]),
    (lambda c: _sample(c, "test", lambda t: t["simulation"]["fundamentalCorrelations"][
        "pairwise"].append(["SpotMarket-1", "SpotMarket-9", 0.1])),
     ["'SpotMarket-9'", "not a market"]),
    (lambda c: _sample(c, "test", lambda t: t["FundamentalPriceShock"].update(
        {"target": "SpotMarket-N"})), ["target", "'SpotMarket-N'", "SpotMarket-0"]),
    (lambda c: _sample(c, "test", lambda t: t["SpotMarket-N"].update(
        {"fundamentalVolatility": 0.2})),
     ["SpotMarket-0: fundamentalDrift", "larger tickSize"]),
    (lambda c: _sample(c, "shock_transfer", lambda t: t["SpotMarket"].pop(
        "outstandingShares")), ["SpotMarket-1.outstandingShares is required",
                                "component of the IndexMarket IndexMarket-I"]),
    (lambda c: _sample(c, "shock_transfer", lambda t: t["IndexMarket-I"].pop("markets")),
     ["IndexMarket-I.markets is required", "component"]),
    (lambda c: _sample(c, "shock_transfer", lambda t: t["IndexMarket-I"].update(
        {"markets": ["SpotMarket-1", "SpotMarket-3"]})), ["'SpotMarket-3'", "not a market"]),
    (lambda c: c["simulation"]["sessions"][1].update({"withOrderExecution": False}),
     ["withOrderExecution"]),
])
def test_unsupported_configs_are_refused_naming_the_key(mutate, words):
    _refused(mutate, *words)


def _maker(cfg, **keys):
    """Add a MarketMakerAgent group ``Maker`` quoting in ci2002's market (``keys`` change
    its settings); returns None."""
    cfg["Maker"] = {"class": "MarketMakerAgent", "numAgents": 1, "markets": ["Market"],
                    "targetMarket": "Market", "netInterestSpread": 0.02,
                    "cashAmount": 10000, "assetVolume": 50, **keys}
    cfg["simulation"]["agents"].append("Maker")


def _sample(cfg, name, mutate):
    """Replace ``cfg`` by the bundled sample ``name``, changed by ``mutate``."""
    with open(fm.config_path(name)) as fh:
        sample = json.load(fh)
    mutate(sample)
    cfg.clear()
    cfg.update(sample)


def test_several_markets_are_named_and_read_as_pams_reads_them():
    """numMarkets/prefix/from/to name markets as pams's _parse_group; an agent group's
    markets are market entries (groups); correlations, event targets, maxNormalOrders."""
    cfg = parse(fm.config_path("test"))
    assert cfg.market_names == ("SpotMarket-0", "SpotMarket-1", "SpotMarket-2")
    assert cfg.correlations == ((0, 1, 0.9), (0, 2, -0.1))
    assert cfg.groups[0].venues == (0, 1, 2) and cfg.events[0].targets == (1,)
    assert [v.fundamental_volatility for v in cfg.venues] == [0.1] * 3
    c = venues_config()
    c["Spot"].update({"from": 3, "to": 4})
    c["Other"].update({"numMarkets": 2})
    c["Shock"]["target"] = "Other-1"
    c["simulation"]["fundamentalCorrelations"]["pairwise"] = [["Spot-3", "Other-0", 0.5]]
    c["Index"]["markets"] = ["Other-1", "Spot-3"]
    got = parse(c)
    assert got.market_names == ("Spot-3", "Spot-4", "Other-0", "Other-1", "Index")
    assert [g.venues for g in got.groups] == [(0, 1, 2, 3, 4), (2, 3)]
    assert got.max_orders == 2 and got.events[0].targets == (3,)
    assert got.indexes == ((4, (3, 0), (300, 100)),)
    assert got.venues[4].fundamental_price == (104.0 * 300 + 100.0 * 100) / 400
    names = list(fm.from_pams(c).names)
    assert names[-2:] == ["Other-1|Index:return_correlation", "Index:index_deviation"]


def test_keys_pams_ignores_pass_and_unknown_keys_warn_naming_them():
    """MEMO (pams's samples' comments) passes silently; a key neither pams nor flowsim
    reads warns naming it and where, and the run goes on (pams ignores it too)."""
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        cfg = parse(fm.config_path("fat_finger"))              # MEMO keys throughout
    assert [type(e).__name__ for e in cfg.events] == ["OrderMistakeShock"]
    c = ci2002()
    c["FCNAgents"]["leverage"] = 2
    c["Market"]["MEMO"] = "a comment"
    with pytest.warns(fm.ConfigWarning, match=r"FCNAgents: key 'leverage' is read by neither"):
        assert parse(c).groups[0].n_agents == 100


def test_counts_are_read_with_int_as_pams_does():
    """pams reads numAgents with int(): "100" is 100 agents."""
    c = ci2002()
    c["FCNAgents"]["numAgents"] = "100"
    assert parse(c).groups[0].n_agents == 100
    c["FCNAgents"].update({"numAgents": None})
    del c["FCNAgents"]["numAgents"]
    c["FCNAgents"].update({"from": "0", "to": "9"})
    assert parse(c).groups[0].n_agents == 10


def test_every_pams_sample_is_bundled_and_parses_or_is_refused_naming_why():
    assert len(fm.PAMS_SAMPLES) == 9
    assert os.path.exists(os.path.join(os.path.dirname(fm.config_path("ci2002")),
                                       "LICENSE-pams"))
    runs = {"ci2002": (), "fat_finger": ("OrderMistakeShock",),
            "price_limit": ("PriceLimitRule",),
            "trading_halt": ("FundamentalPriceShock", "TradingHaltRule"), "user_class": ()}
    classes = {"UserDefinedFCNAgent": "FCNAgent"}
    for name, evs in runs.items():
        cfg = parse(fm.config_path(name), classes=classes)
        assert tuple(type(e).__name__ for e in cfg.events) == evs, name
        assert cfg.n_steps == 600 and cfg.first_execution == 100
    shock = parse(fm.config_path("trading_halt")).events[0]
    assert (shock.start, shock.rate, shock.length) == (100, -0.1, 1)   # session-relative
    assert parse(fm.config_path("test")).n_venues == 3
    for name, words in {"market_share": "ExtendedMarket",
                        "market_share_mm": "ExtendedMarket"}.items():
        with pytest.raises(ValueError, match=words):
            parse(fm.config_path(name))
    shock = parse(fm.config_path("shock_transfer"))             # the high-frequency phase
    arb, = shock.hifreq
    assert (arb.index, arb.components, arb.volume, arb.threshold, arb.ttl) == (
        2, (0, 1), 1, 1.0, 1)
    assert [(s.max_orders, s.max_hifreq, s.hifreq_rate) for s in shock.sessions] == [
        (3, 0, 1.0), (3, 5, 1.0)]
    assert [g.name for g in shock.groups] == ["FCNAgents-1", "FCNAgents-2", "FCNAgents-I"]
    mm = parse(fm.config_path("market_share_mm"),
               classes={"ExtendedMarket": ("Market", ["tradeVolume"])})
    maker, = mm.hifreq
    assert (maker.target, maker.venues, maker.spread, maker.ttl) == (1, (1,), 0.02, 2)
    assert [s.max_hifreq for s in mm.sessions] == [1, 1]     # pams's default, maxHifreqOrders
    with pytest.raises(ValueError, match="classes= maps 'UserDefinedFCNAgent' to 'FCN'"):
        parse(fm.config_path("user_class"), classes={"UserDefinedFCNAgent": "FCN"})
    extended = {"ExtendedMarket": ("Market", ["tradeVolume"])}
    share = parse(fm.config_path("market_share"), classes=extended)
    assert [v.trade_volume for v in share.venues] == [90, 10] and share.groups[0].by_volume
    plain = parse(fm.config_path("market_share"),                # a key the class does not read
                  classes={"ExtendedMarket": ("Market", ["tradeVolume", "other"])})
    assert plain.venues == share.venues
    bad = json.load(open(fm.config_path("market_share")))
    bad["Market-A"]["tradeVolume"] = "90"
    with pytest.raises(ValueError, match=r"Market-A.tradeVolume must be an int >= 0 .*"
                                         r"\"tradeVolume\": 90"):
        parse(bad, classes=extended)


def test_market_share_agents_pick_a_market_as_random_choices_does():
    """pams's MarketShareFCNAgent: weights volume + 1e-10 over the agent's markets,
    the first whose cumulative weight exceeds u * total (Python's random.choices)."""
    from flowsim.markets.agents.market_share_fcn import choose
    u = (np.arange(1000) + 0.5) / 1000
    access = np.array([[True, True, False]] * 1000)
    hit = np.asarray(choose(u, np.array([[90, 10, 500]] * 1000), access))
    assert hit.sum(1).tolist() == [1] * 1000 and not hit[:, 2].any()
    assert hit[:, 0].sum() == 900
    idle = np.asarray(choose(u, np.zeros((1000, 3), np.int64), access))  # no volume: even
    assert idle[:, 0].sum() == 500 and idle[:, 1].sum() == 500 and not idle[:, 2].any()
    last = np.asarray(choose(np.array([1.0]), np.array([[3, 0, 0]]), access[:1]))
    assert last.tolist() == [[False, True, False]]      # u * total at the total: the last


@settings(max_examples=60, deadline=None)
@given(a=st.integers(1, 300), width=st.integers(0, 300), integer=st.booleans())
def test_time_window_bound_covers_every_draw(a, width, integer):
    """The book is sized from Dist.max_int(): no int() of a pams uniform draw exceeds it."""
    b = a + width + (0 if integer else 0.5)
    d = Dist("uniform", (float(a), float(b)))
    u = np.concatenate([np.random.default_rng(a).random(1000), [0.0, 1 - 2**-53]])
    draws = (a + u * (b - a)).astype(int)
    assert draws.max() <= d.max_int() and (width == 0 or d.max_int() <= b)


def test_importing_markets_loads_no_tensorflow():
    out = run_python("import sys, flowsim.markets, flowsim.markets.config, "
                     "flowsim.markets.stats, flowsim.markets.job; "
                     "print('tensorflow' in sys.modules)")
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["False"]


# -- the compiled markets -------------------------------------------------------------------
@pytest.fixture(scope="module")
def small_run():
    return fm.ensemble(small_config(), 2 * BLOCK, seed=5, paths=3, block_markets=BLOCK)


def test_paths_are_pams_shaped(small_run):
    cfg = parse(small_config())
    p, f = small_run.paths["market_price"], small_run.paths["fundamental"]
    assert p.shape == f.shape == (3, cfg.n_steps + 1)
    assert (f[:, 0] == 100.0).all()
    t0 = cfg.first_execution
    assert (p[:, :t0] == 100.0).all()       # constant while execution is off
    assert np.isfinite(p).all() and (p > 0).all()
    # prices are on the tick grid
    assert np.allclose(np.round(p[:, t0:] / 0.01) * 0.01, p[:, t0:], rtol=0, atol=1e-9)
    assert small_run.per_market.shape == (2 * BLOCK, len(stats.NAMES))


def test_compiled_statistics_equal_their_numpy_definition(small_run):
    """Every statistic computable from the paths alone, to rounding."""
    cfg = parse(small_config())
    p, f = small_run.paths["market_price"], small_run.paths["fundamental"]
    T, t0 = cfg.n_steps, cfg.first_execution
    zeros = np.zeros((3, T))
    ref = stats.market_statistics(p, f, zeros, zeros, zeros, t0)
    got = small_run.per_market[:3]
    cols = [i for i, n in enumerate(stats.NAMES)
            if n not in ("trades_per_step", "depth_bid", "depth_ask", "clearing_volume")]
    np.testing.assert_allclose(got[:, cols], ref[:, cols], rtol=1e-9, atol=1e-12)


def test_value_is_the_mean_over_markets(small_run):
    mean, err, _ = stats.summarize(small_run.per_market)
    np.testing.assert_allclose(small_run.value, mean, rtol=1e-12)
    np.testing.assert_allclose(small_run.error, err, rtol=1e-9)
    assert set(small_run.table) == set(stats.NAMES)


def test_events_limit_and_iterations_keep_the_bits(small_run, tmp_path):
    """Chunks of one block give the same markets; a run stopped after one iteration
    resumes from its checkpoint to the bits of an uninterrupted run."""
    again = fm.ensemble(small_config(), 2 * BLOCK, seed=5, paths=3, block_markets=BLOCK,
                        events_limit=BLOCK)
    assert again.per_market.tobytes() == small_run.per_market.tobytes()
    whole = fm.ensemble(small_config(), 2 * BLOCK, seed=9, block_markets=BLOCK, iterations=2)
    path = tmp_path / "markets.ckpt"
    sim = fm.from_pams(small_config(), block_markets=BLOCK)
    import flowsim
    flowsim.Flow(sim, BLOCK, seed=9, block_size=BLOCK, quiet=True).run(1, checkpoint=path)
    resumed = fm.ensemble(small_config(), 2 * BLOCK, seed=9, block_markets=BLOCK,
                          iterations=2, checkpoint=path)
    assert resumed.per_market.tobytes() == whole.per_market.tobytes()
    assert np.asarray(resumed.value).tobytes() == np.asarray(whole.value).tobytes()


def test_grid_is_one_table(small_run):
    table = fm.grid(small_config(), {"noiseScale": [0.001, 0.004]}, BLOCK, group="Followers",
                    seed=2, block_markets=BLOCK)
    assert list(table["noiseScale"]) == [0.001, 0.004]
    assert {"volatility_1", "volatility_1_err", "seconds"} <= set(table.columns)
    assert table["volatility_1"].iloc[1] > table["volatility_1"].iloc[0]


def test_ensemble_records_its_choice_and_given_back_it_is_the_same_run():
    """``ensemble(cfg, n, seed=s)`` picks backend, workers and block itself
    (``chosen_by`` "auto"); its ``meta["setup"]`` given back, or its block given to a
    Flow of ``from_pams(cfg)``, is the same run, bit for bit (one block: in this
    process, no worker started)."""
    import flowsim
    a = fm.ensemble(small_config(), BLOCK, seed=1)
    assert a.meta["setup"] == {"backend": "flow", "block_markets": BLOCK}
    assert (a.meta["chosen_by"], a.meta["backend"], a.meta["workers"],
            a.meta["block_markets"]) == ("auto", "flow", 1, BLOCK)
    again = fm.ensemble(small_config(), BLOCK, seed=1, **a.meta["setup"])
    assert again.meta["chosen_by"] == "given"
    b = flowsim.Flow(fm.from_pams(small_config()), BLOCK, seed=1, block_size=BLOCK,
                     quiet=True).run(1)
    for other in (again, b):
        assert np.asarray(a.value).tobytes() == np.asarray(other.value).tobytes()
        assert np.asarray(a.error).tobytes() == np.asarray(other.error).tobytes()


def test_auto_setup_is_the_documented_rule():
    """Cache-sized even blocks, a function of the config and the count only; joblib
    with a worker per core (at most one per block) from 4 blocks and 2 cores on; in
    this process below that; a GPU runs the Flow's own block in this process."""
    from flowsim.markets.ensembles import PROCESS_MIN_BLOCKS, auto_setup
    ci, shock = fm.from_pams(fm.config_path("ci2002")), fm.from_pams(
        fm.config_path("shock_transfer"))
    assert PROCESS_MIN_BLOCKS == 4
    assert auto_setup(ci, 1024, cores=2) == {"backend": "joblib", "n_jobs": 2,
                                             "block_markets": 256}
    assert auto_setup(ci, 1024, cores=64)["n_jobs"] == 4          # one worker a block
    assert auto_setup(ci, 1024, cores=1) == {"backend": "flow", "n_jobs": None,
                                             "block_markets": 256}
    assert auto_setup(ci, 300, cores=2) == {"backend": "flow", "n_jobs": None,
                                            "block_markets": 192}    # 2 blocks
    assert auto_setup(shock, 300, cores=2) == {"backend": "joblib", "n_jobs": 2,
                                               "block_markets": 64}  # 5 blocks
    assert auto_setup(ci, 1024, block_markets=64, cores=2)["backend"] == "joblib"
    assert auto_setup(ci, 1024, cores=2, gpus=1) == {"backend": "flow", "n_jobs": None,
                                                     "block_markets": 1024}


def test_keywords_given_win_over_the_auto_choice():
    """What is given is kept; joblib's ``n_jobs`` alone names the backend; a given
    joblib backend gets a worker per core (at most one per block)."""
    from flowsim.markets.ensembles import _setup, joblib_workers
    market = fm.parse(fm.config_path("ci2002"))
    cases = [(dict(backend="flow", block_markets=1024), {}, [], ("flow", None, 1024)),
             (dict(backend="threads"), {}, ["block_markets"], ("threads", None, 256)),
             (dict(block_markets=128), {"n_jobs": 1}, [], ("joblib", 1, 128)),
             (dict(backend="joblib"), {}, ["block_markets", "workers"],
              ("joblib", joblib_workers(1024, 256), 256))]
    for told, flow_kw, picked, want in cases:
        kw = {"backend": None, "block_markets": None, **told}
        flow_kw["device"] = "CPU:0"                  # the CPU rule on any machine
        setup, got = _setup(market, (), 1024, kw["backend"], kw["block_markets"], flow_kw)
        assert (setup["backend"], setup["n_jobs"], setup["block_markets"]) == want, told
        assert got == picked, told
        assert flow_kw.get("n_jobs") == setup["n_jobs"], told


@pytest.fixture(scope="module")
def venues_run():
    return fm.ensemble(venues_config(), 2 * BLOCK, seed=5, paths=3, block_markets=BLOCK)


def test_several_markets_keep_each_markets_paths_and_statistics(venues_run):
    """Paths per market; each market's statistics, the return correlation and the
    index deviation equal their numpy definitions on those paths; the shock hits its
    target only, and the IndexMarket's fundamental one step later, as in pams."""
    cfg = parse(venues_config())
    T, t0 = cfg.n_steps, cfg.first_execution
    assert set(venues_run.paths) == {"Spot", "Other", "Index"}
    assert venues_run.names == list(stats.names(["Spot", "Other", "Index"], ["Index"]))
    zeros = np.zeros((3, T))
    cols = [i for i, n in enumerate(stats.NAMES)
            if n not in ("trades_per_step", "depth_bid", "depth_ask", "clearing_volume")]
    S = len(stats.NAMES)
    for k, (m, f0) in enumerate([("Spot", 100.0), ("Other", 104.0), ("Index", 103.0)]):
        p, f = venues_run.paths[m]["market_price"], venues_run.paths[m]["fundamental"]
        assert p.shape == f.shape == (3, T + 1) and (f[:, 0] == f0).all()
        ref = stats.market_statistics(p, f, zeros, zeros, zeros, t0)
        got = venues_run.per_market[:3, k * S:(k + 1) * S]
        np.testing.assert_allclose(got[:, cols], ref[:, cols], rtol=1e-9, atol=1e-12)
    r = [np.diff(np.log(venues_run.paths[m]["market_price"][:, t0:T]), axis=1)
         for m in ("Spot", "Other")]
    corr = [np.corrcoef(a, b)[0, 1] for a, b in zip(*r)]
    col = venues_run.names.index("Spot|Other:return_correlation")
    np.testing.assert_allclose(venues_run.per_market[:3, col], corr, rtol=1e-9)
    p = {m: venues_run.paths[m]["market_price"] for m in ("Spot", "Other", "Index")}
    index = (100 * p["Spot"] + 300 * p["Other"]) / 400
    dev = np.abs(np.log(p["Index"][:, t0:T] / index[:, t0:T])).mean(axis=1)
    col = venues_run.names.index("Index:index_deviation")
    np.testing.assert_allclose(venues_run.per_market[:3, col], dev, rtol=1e-9)
    f = {m: venues_run.paths[m]["fundamental"] for m in ("Spot", "Other", "Index")}
    fi = (100 * f["Spot"] + 300 * f["Other"]) / 400
    lagged = fi.copy()
    lagged[:, 17] = (100 * f["Spot"][:, 17] + 300 * f["Other"][:, 17] / 0.95) / 400
    np.testing.assert_allclose(f["Index"], lagged, rtol=1e-12)
    # the shock (x0.95 at step 17) in Other only: that log-return is 25 sd off
    jump = {m: np.log(venues_run.paths[m]["fundamental"][:, 17]
                      / venues_run.paths[m]["fundamental"][:, 16]) for m in ("Spot", "Other")}
    assert (abs(jump["Other"] - np.log(0.95)) < 0.02).all() and (abs(jump["Spot"]) < 0.02).all()
    from flowsim.markets import plots
    labels = [t.get_text() for t in plots.paths(venues_run).axes[0].get_legend().get_texts()]
    assert {"Spot", "Index", "execution starts", "fundamental x0.95"} <= set(labels), labels


def test_several_markets_resume_from_a_checkpoint_in_the_cli(tmp_path, capsys):
    """A run stopped after one iteration resumes (``flowsim run markets --config FILE
    --iters 2 --checkpoint``) to the bits of an uninterrupted ensemble."""
    import flowsim
    from flowsim.cli import main
    cfg = tmp_path / "venues.json"
    cfg.write_text(json.dumps(venues_config()))
    path = tmp_path / "venues.ckpt"
    sim = fm.from_pams(venues_config(), block_markets=BLOCK)
    flowsim.Flow(sim, BLOCK, seed=5, block_size=BLOCK, quiet=True).run(1, checkpoint=path)
    assert main(["run", "markets", "--config", str(cfg), "--markets", str(2 * BLOCK),
                 "--seed", "5", "--block-size", str(BLOCK), "--iters", "2",
                 "--checkpoint", str(path), "--json"]) == 0
    table = json.loads(capsys.readouterr().out)["table"]
    whole = fm.ensemble(venues_config(), 2 * BLOCK, seed=5, block_markets=BLOCK,
                        iterations=2)
    assert list(table) == whole.names and "Spot|Other:return_correlation" in table
    assert [tuple(v) for v in table.values()] == list(whole.table.values())
    assert np.isfinite(whole.value).all()


def test_several_markets_refuse_what_runs_on_one_market_only():
    """Learned groups and agents that may place no order run on one market only."""
    from flowsim.testing import cases_markets
    group = fm.LearnedAgents(cases_markets.policy(), 5, time_window=[4, 12],
                             order_margin=[0.0, 0.05], lags=5)
    with pytest.raises(ValueError, match="learned= groups trade one market; this config "
                                         "has 3"):
        fm.from_pams(venues_config(), learned=[group])
    quiet = venues_config()
    quiet["Followers"]["noiseScale"] = 0.0
    with pytest.raises(ValueError, match="may place no order.*maxNormalOrders 1 only: give "
                                         "every group noise"):
        fm.from_pams(quiet)


def test_fundamental_correlations_follow_pams_cholesky():
    """Log-returns of the fundamentals: drift + L z (no -sigma**2/2), corr as given."""
    from flowsim.markets.venues.correlations import cholesky
    cfg = parse(fm.config_path("test"))
    low = cholesky(cfg.venues, cfg.correlations)
    cov = low @ low.T
    np.testing.assert_allclose(cov, 0.01 * np.array([[1, 0.9, -0.1], [0.9, 1, 0],
                                                     [-0.1, 0, 1]]), atol=1e-15)
    c = venues_config()
    c["Spot"]["fundamentalVolatility"] = 0.0
    c["Other"]["fundamentalVolatility"] = 0.002
    c["simulation"].pop("fundamentalCorrelations")
    one = cholesky(parse(c).venues, ())
    assert one[0, 0] == 0 and one[1, 1] == 0.002


# -- against pams ---------------------------------------------------------------------------
#: Markets per configuration (one block each: one compilation per configuration;
#: user_class is ci2002 with a renamed class and shares its compilation; two_groups's
#: run keeps its balance sheets and is checked in tests/test_markets_balance.py).
REFERENCE = {"ci2002": 512, "fat_finger": 256, "price_limit": 256,
             "trading_halt": 256, "user_class": 512, "test": 256, "market_share": 256,
             "market_share_mm": 256, "shock_transfer": 256, "contrarian": 256}
CLASSES = {"UserDefinedFCNAgent": "FCNAgent", "ExtendedMarket": ("Market", ["tradeVolume"]),
           **CONTRARIAN_CLASSES}


def reference_config(name):
    """A stored table's config: a bundled pams sample, or the contrarian user class."""
    return contrarian_config() if name == "contrarian" else fm.config_path(name)


#: Configurations whose run keeps the balance sheets too (the market statistics are the
#: same bits), checked against pams's balance table (benchmarks/make_pams_balance_reference.py).
BALANCE_TABLES = ("trading_halt",)


def balance_sheets_agree(name, result, k):
    """``result``'s balance statistics (after its ``k`` market statistics) within 4
    combined standard errors of pams's stored balance table of ``name``; those the
    closed economy fixes (one group's mean cash and units, their median: the same in
    every run, to rounding) equal to 1e-9."""
    path = os.path.join(ROOT, "tests", "data", f"pams_balance_{name}.csv")
    with open(path) as fh:
        columns = fh.readline().strip().split(",")[1:]
    ref = np.loadtxt(path, delimiter=",", skiprows=1)[:, 1:]
    assert len(ref) >= 200 and columns == result.names[k:]
    mean, err, _ = stats.summarize(ref)
    value, error = result.value[k:], result.error[k:]
    fixed = (err <= 1e-9 * abs(mean)) & (error <= 1e-9 * abs(mean))
    np.testing.assert_allclose(value[fixed], mean[fixed], rtol=1e-9)
    with np.errstate(invalid="ignore"):             # 0 / 0 where fixed
        z = stats.z_scores(value, error, mean, err)
    bad = {n: round(float(v), 2) for n, v, f in zip(columns, z, fixed)
           if not (f or abs(v) < 4)}
    assert not bad, bad
    assert fixed.sum() < 5


def market_maker_closed_economy(result):
    """market_share_mm's run keeps the balance sheets: its 100 MarketShareFCNAgents and
    its MarketMakerAgent (units in Market-B only, as pams keeps them) end every run
    with the cash and the units of each market they started with, and the market
    maker traded."""
    col = dict(zip(result.names, result.per_market.T))
    fcn, mm = "MarketShareFCNAgents", "MarketMakerAgent"
    np.testing.assert_allclose(100 * col[f"{fcn}:cash_mean"] + col[f"{mm}:cash_mean"],
                               1.01e6, rtol=1e-12)
    np.testing.assert_array_equal(np.round(100 * col[f"{fcn}:inventory[Market-A]_mean"], 9),
                                  5000)
    units = 100 * col[f"{fcn}:inventory[Market-B]_mean"] + col[f"{mm}:inventory[Market-B]_mean"]
    np.testing.assert_array_equal(np.round(units, 9), 5050)
    assert f"{mm}:inventory[Market-A]_mean" not in col
    assert (col[f"{mm}:cash_mean"] != 10000).mean() > 0.9


@pytest.mark.parametrize("name", sorted(REFERENCE))
def test_statistics_agree_with_pams(name):
    """Every statistic within 4 combined standard errors of pams's (200-400 seeds, stored
    by benchmarks/make_pams_reference.py).  With 19 statistics the chance that an honest
    run fails is about 19 x 6e-5 ~ 0.1 % per configuration, 0.7 % for the six (normal
    tails; the seed is fixed, so the outcome is too).  ``test`` (three markets: 60
    statistics, ~0.4 %) has σ = 0.1 per step: prices from ~1e-3 to ~1e7.
    ``market_share`` (two markets, MarketShareFCNAgents: 39 statistics, ~0.25 %);
    ``market_share_mm`` (the same with a MarketMakerAgent in the high-frequency phase:
    39 statistics, ~0.25 %); ``shock_transfer`` (two spots, their IndexMarket,
    ArbitrageAgents: 61 statistics, ~0.4 %); ``contrarian`` (two_groups whose Chartists
    are a user's contrarian subclass, mapped with its attribute: 19, ~0.1 %); 332
    statistics, ~2 % for the eleven together (two_groups's 19 in
    tests/test_markets_balance.py)."""
    path = os.path.join(ROOT, "tests", "data", f"pams_markets_{name}.csv")
    with open(path) as fh:
        columns = fh.readline().strip().split(",")[1:]
    ref = np.loadtxt(path, delimiter=",", skiprows=1)[:, 1:]
    assert len(ref) >= 200
    mean, err, _ = stats.summarize(ref)
    result = fm.ensemble(reference_config(name), REFERENCE[name], seed=2026,
                         block_markets=REFERENCE[name], classes=CLASSES,
                         balances=name in BALANCE_TABLES or name == "market_share_mm")
    k = len(columns)
    assert columns == result.names[:k]
    z = stats.z_scores(result.value[:k], result.error[:k], mean, err)
    bad = {n: round(float(v), 2) for n, v in zip(result.names, z) if not abs(v) < 4}
    assert not bad, bad
    if name in BALANCE_TABLES:
        balance_sheets_agree(name, result, k)
    if name == "market_share_mm":
        market_maker_closed_economy(result)
    if name == "price_limit":           # every order was moved into 300 (1 +- 0.05)
        final = result.per_market[:, stats.NAMES.index("final_price")]
        assert final.min() >= 285.0 - 1e-5 and final.max() <= 315.0 + 1e-5


# -- same bits on every backend ---------------------------------------------------------------
def test_same_bits_in_any_chunking():
    """Flow with device calls of 1 and 4 blocks gives the same bits, for the FCN and
    the learned-agent cases (2 blocks: the cases' own ``events_limit``, which
    ``tests/test_conformance.py`` runs on every backend against Flow; its threads
    schedules cut the other cases' iterations into chunks of other sizes)."""
    import flowsim
    from flowsim.testing import cases_markets
    for name in ("markets_small", "markets_learned"):
        case = CASES[name]
        factory = getattr(cases_markets, case["factory"].split(":")[1])
        sim = factory()
        kw = dict(n_events=case["n_events"], seed=77, block_size=64, quiet=True)
        runs = [flowsim.Flow(sim, events_limit=limit, **kw).run(case["n_iters"])
                for limit in (64, 256)]
        bits = [[np.asarray(r["value"]).tobytes() + np.asarray(r["error"]).tobytes()
                 for r in res.iterations] for res in runs]
        assert bits[0] == bits[1], name
        assert np.isfinite(runs[0].value).all(), name


def test_events_change_the_market_as_pams_events_do():
    """The events case (shock, price limit, halt, fat finger; tests/cases_markets.py):
    the fundamental drops by 5 % at each of steps 17 and 18 and nowhere else by more
    than 5 sigma; prices stay finite on the (half-)tick grid."""
    from flowsim.testing import cases_markets
    r = fm.ensemble(cases_markets.events_config(), BLOCK, seed=4, block_markets=BLOCK,
                    paths=4)
    f, p = r.paths["fundamental"], r.paths["market_price"]
    step = np.diff(np.log(f), axis=1)            # step[:, t - 1] = ln(F_t / F_{t-1})
    shocked = step[:, [16, 17]] - np.log(0.95)
    others = np.delete(step, [16, 17], axis=1)
    assert np.abs(shocked).max() < 0.01 and np.abs(others).max() < 0.01
    assert np.isfinite(r.value).all() and np.isfinite(p).all()
    # trades are on the tick grid, mids (before a market's first trade) on half ticks
    assert np.allclose(np.round(p / 0.005) * 0.005, p, rtol=0, atol=1e-9)
    assert fm.from_pams(cases_markets.events_config()).structure.halts
    from flowsim.markets import plots
    labels = [t.get_text() for t in plots.paths(r).axes[0].get_legend().get_texts()]
    assert {"execution starts", "fundamental x0.95 (2 steps)", "price limit",
            "mistaken order of 30"} <= set(labels), labels


def test_crossed_books_clear_in_sub_books_to_the_bits_of_the_whole_block():
    """After a halt or a fat-finger order only the markets whose book may cross more
    than once loop, gathered in sub-books of ``Structure.sweep_markets`` columns, while
    the others match one arrival: in the events case (~20 such steps in a block of 64,
    up to 11 markets at a step: several chunks of 4 or 1) every market's
    statistics and paths are those of the whole block looping (width 0)."""
    import flowsim
    from flowsim.testing import cases_markets
    cfg = cases_markets.events_config()
    runs = []
    for width in (0, 1, 4):
        sim = fm.from_pams(cfg, block_markets=BLOCK, paths=4)
        sim.structure.sweep_markets = width
        result = flowsim.Flow(sim, n_events=BLOCK, seed=3, block_size=BLOCK,
                              quiet=True).run(1)
        record = result.iterations[0]
        runs.append(np.asarray(record["markets"]).tobytes()
                    + np.asarray(record["paths"]).tobytes())
    assert all(r == runs[0] for r in runs[1:])


def test_cache_block_markets_keeps_a_block_within_its_byte_budget():
    """The benchmark's block: the largest multiple of 64 up to 256 whose markets'
    bytes fit the budget (shock_transfer's 87 KiB a market: 64 in 6 MiB, 128 in 12
    MiB), at least 64 however large a market."""
    from flowsim.markets.ensembles import CACHE_BYTES, cache_block_markets
    big = fm.from_pams(fm.config_path("shock_transfer"))
    small = fm.from_pams(fm.config_path("ci2002"))
    assert cache_block_markets(big) == 64
    assert 64 * big.bytes_per_market() <= CACHE_BYTES < 128 * big.bytes_per_market()
    assert cache_block_markets(big, budget=12 * 2 ** 20) == 128
    assert cache_block_markets(small) == 256
    assert cache_block_markets(small, largest=512) == 384     # 15.7 KiB: 391 in 6 MiB
    assert cache_block_markets(big, budget=1) == 64


def test_book_chunks_give_the_bits_of_whole_book_reductions():
    """Several markets with arbitrage agents keep the book's bests by chunks of rows
    (``flowsim.markets.book_chunks``: the chunks a pass changed are reduced again): in
    the high-frequency case (arbitrage orders of two units on the index; 56 rows in 12
    chunks of 5, padded to 60, the book kept market by market, ``[L, rows]``) every
    market's statistics and paths are those of reducing the whole ``[rows, L]`` book
    at every pass (``Structure.book_chunks`` False)."""
    import flowsim
    from flowsim.markets import book_chunks
    from flowsim.testing import cases_markets
    runs = []
    for chunked in (True, False):
        sim = fm.from_pams(cases_markets.hifreq_config(), block_markets=BLOCK, paths=4)
        sim.structure.book_chunks = chunked
        kind = type(book_chunks.make(sim.structure, 3 * BLOCK, None))
        assert kind is (book_chunks.Chunks if chunked else book_chunks.Whole)
        result = flowsim.Flow(sim, n_events=BLOCK, seed=4, block_size=BLOCK,
                              quiet=True).run(1)
        record = result.iterations[0]
        assert np.isfinite(np.asarray(record["markets"])).any()
        runs.append(np.asarray(record["markets"]).tobytes()
                    + np.asarray(record["paths"]).tobytes())
    assert runs[0] == runs[1]


def test_events_resume_from_a_checkpoint_to_the_same_bits(tmp_path):
    import flowsim
    from flowsim.testing import cases_markets
    cfg = cases_markets.events_config()
    whole = fm.ensemble(cfg, 2 * BLOCK, seed=6, block_markets=BLOCK, iterations=2)
    path = tmp_path / "events.ckpt"
    flowsim.Flow(fm.from_pams(cfg, block_markets=BLOCK), BLOCK, seed=6, block_size=BLOCK,
                 quiet=True).run(1, checkpoint=path)
    resumed = fm.ensemble(cfg, 2 * BLOCK, seed=6, block_markets=BLOCK, iterations=2,
                          checkpoint=path)
    assert resumed.per_market.tobytes() == whole.per_market.tobytes()


def test_learned_agents_change_the_market():
    """A learned group's orders enter the book: its markets differ from the FCN-only ones
    with the same seed, and all statistics stay finite."""
    import flowsim
    from flowsim.testing import cases_markets
    kw = dict(n_events=BLOCK, seed=3, block_size=BLOCK, quiet=True)
    plain = flowsim.Flow(cases_markets.small(), **kw).run(1)
    learned = flowsim.Flow(cases_markets.learned(), **kw).run(1)
    assert np.isfinite(learned.value).all()
    assert np.asarray(learned.value).tobytes() != np.asarray(plain.value).tobytes()


def _abstaining(with_fundamentalists):
    """One noisy agent, with or without 30 noiseless fundamentalists."""
    agent = {"class": "FCNAgent", "markets": ["Market"], "timeWindowSize": [30, 40],
             "orderMargin": [0.0, 0.05], "chartWeight": 0.0, "cashAmount": 10000,
             "assetVolume": 50}
    cfg = {"simulation": {"markets": ["Market"], "agents": ["Noisy"], "sessions": [
        {"sessionName": 0, "iterationSteps": 20, "withOrderPlacement": True,
         "withOrderExecution": False, "withPrint": False},
        {"sessionName": 1, "iterationSteps": 10, "withOrderPlacement": True,
         "withOrderExecution": True, "withPrint": False}]},
        "Market": {"class": "Market", "tickSize": 0.01, "marketPrice": 100.0},
        "Noisy": dict(agent, numAgents=1, fundamentalWeight=0.0, noiseWeight=1.0,
                      noiseScale=0.01)}
    if with_fundamentalists:
        cfg["simulation"]["agents"].append("Fundamentalists")
        cfg["Fundamentalists"] = dict(agent, numAgents=30, fundamentalWeight=1.0,
                                      noiseWeight=0.0, noiseScale=0.001)
    return cfg


def test_agents_without_an_order_pass_the_turn_as_in_pams():
    """While P == F, noiseless fundamentalists expect E == P and place nothing; pams then
    asks the next agent, so the lone noisy agent orders at every warm-up step and the
    opening clearing is that of the noisy agent alone (it would be ~30x smaller if the
    turn were lost).  Same distribution: |z| < 4 (false failure ~6e-5)."""
    a = fm.ensemble(_abstaining(True), 2 * BLOCK, seed=1, block_markets=BLOCK)
    b = fm.ensemble(_abstaining(False), 2 * BLOCK, seed=2, block_markets=BLOCK)
    i = stats.NAMES.index("clearing_volume")
    assert fm.from_pams(_abstaining(True)).structure.may_abstain
    assert not fm.from_pams(_abstaining(False)).structure.may_abstain
    z = stats.z_scores(a.value[i], a.error[i], b.value[i], b.error[i])
    assert a.value[i] > 3 and abs(z) < 4, (a.value[i], b.value[i], z)


def test_cli_runs_markets(tmp_path, capsys):
    from flowsim.cli import main
    cfg = tmp_path / "cfg.json"
    cfg.write_text(json.dumps(small_config()))
    code = main(["run", "markets", "--config", str(cfg), "--markets", str(BLOCK), "--seed",
                 "5", "--block-size", str(BLOCK), "--json"])
    assert code == 0
    out = json.loads(capsys.readouterr().out)
    assert set(out["table"]) == set(stats.NAMES) and out["markets"] == BLOCK
    assert main(["run", "gaussian8", "--markets", "10"]) == 2          # refused elsewhere
    bad = copy.deepcopy(small_config())
    bad["Followers"]["class"] = "ArbitrageAgent"
    cfg.write_text(json.dumps(bad))
    assert main(["run", "markets", "--config", str(cfg), "--markets", "64"]) == 2
    assert "ArbitrageAgent" in capsys.readouterr().err
    user = copy.deepcopy(small_config())
    user["Followers"]["class"] = "MyFCN"
    cfg.write_text(json.dumps(user))
    assert main(["run", "markets", "--config", str(cfg), "--markets", "64"]) == 2
    assert "classes=" in capsys.readouterr().err
    assert main(["run", "markets", "--config", str(cfg), "--classes", '{"MyFCN": "FCNAgent"}',
                 "--markets", str(BLOCK), "--seed", "5", "--block-size", str(BLOCK),
                 "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["table"] == out["table"]   # same market
    assert main(["run", "markets", "--config", str(cfg), "--classes", "MyFCN"]) == 2
    assert "--classes must be a JSON object" in capsys.readouterr().err
    assert main(["run", "gaussian8", "--classes", "{}"]) == 2


def test_contrarian_run_as_plain_fcn_is_far_from_pams():
    """The power of the contrarian comparison: mapped as a plain FCNAgent (the
    attribute dropped), the same config is many standard errors from pams's table."""
    path = os.path.join(ROOT, "tests", "data", "pams_markets_contrarian.csv")
    mean, err, _ = stats.summarize(np.loadtxt(path, delimiter=",", skiprows=1)[:, 1:])
    plain = fm.ensemble(contrarian_config(), 256, seed=2026, block_markets=256,
                        classes={"ContrarianFCNAgent": "FCNAgent"})
    z = stats.z_scores(plain.value, plain.error, mean, err)
    assert np.nanmax(np.abs(z)) > 6, dict(zip(plain.names, np.round(z, 1)))


class _PamsFCNAgent:
    """Stands for pams's FCNAgent (a class of a ``pams`` module) in the tests below."""

    def setup(self, settings, accessible_markets_ids):
        self.settings = settings


_PamsFCNAgent.__module__ = "pams.agents.fcn_agent"


class ContrarianFCNAgent(_PamsFCNAgent):
    def setup(self, settings, accessible_markets_ids, *args, **kwargs):
        super().setup(settings, accessible_markets_ids, *args, **kwargs)
        self.is_chart_following = False


class FCNWithOwnOrders(_PamsFCNAgent):
    def submit_orders(self, markets):
        return []


class FCNWithComputedSetting(_PamsFCNAgent):
    def setup(self, settings, accessible_markets_ids):
        super().setup(settings, accessible_markets_ids)
        self.is_chart_following = settings["chartWeight"] > 0.5


@pytest.mark.parametrize("classes", [
    CONTRARIAN_CLASSES,
    {"ContrarianFCNAgent": ["FCNAgent", [], {"is_chart_following": False}]},   # JSON form
    {ContrarianFCNAgent: "FCNAgent"},                  # the class: its setup is read
])
def test_user_class_mapped_with_its_attribute_runs_contrarian(classes):
    cfg = parse(contrarian_config(), classes=classes)
    assert [g.chart_following for g in cfg.groups] == [True, False]


def test_pams_key_that_pams_ignores_is_ignored_with_a_warning():
    """pams's FCNAgent never reads "isChartFollowing": flowsim ignores it too (it obeyed
    it once: the same JSON gave other markets); "flowsim.isChartFollowing" is flowsim's."""
    cfg = small_config()
    cfg["Contrarians"]["isChartFollowing"] = cfg["Contrarians"].pop("flowsim.isChartFollowing")
    with pytest.warns(fm.ConfigWarning, match=r"Contrarians: key 'isChartFollowing' is ignored: "
                                           r"pams 0.3.0 does not read it.*is_chart_following"):
        assert parse(cfg).groups[1].chart_following
    assert not parse(small_config()).groups[1].chart_following


@pytest.mark.parametrize("user, message", [
    (FCNWithOwnOrders, r"Chartists: user class 'FCNWithOwnOrders' overrides submit_orders of "
                       r"pams's FCNAgent; flowsim.markets would run FCNAgent's rules"),
    (FCNWithComputedSetting, r"'FCNWithComputedSetting' overrides setup of pams's FCNAgent"),
])
def test_user_class_flowsim_cannot_run_is_refused_naming_it(user, message):
    cfg = contrarian_config()
    cfg["Chartists"]["class"] = user.__name__
    with pytest.raises(ValueError, match=message):
        parse(cfg, classes={user: "FCNAgent"})


@pytest.mark.parametrize("classes, error, message", [
    ({"ContrarianFCNAgent": ("FCNAgent", {"is_chart_folowing": False})}, ValueError,
     r"Chartists: classes= gives attributes is_chart_folowing for a FCNAgent; "
     r"flowsim.markets models is_chart_following"),
    ({"ContrarianFCNAgent": ("FCNAgent", 3)}, TypeError,
     r"after the class name give a list of extra keys and/or a dict of attributes"),
    ({3: "FCNAgent"}, TypeError, "classes= keys must be class names or classes"),
])
def test_malformed_class_mappings_are_refused(classes, error, message):
    with pytest.raises(error, match=message):
        parse(contrarian_config(), classes=classes)


def test_learned_agents_read_the_book_as_the_step_found_it():
    """``LearnedAgents(book=True)``: 4 more features, ``ln(best bid / P)``,
    ``ln(best ask / P)`` (0 where the side is empty) and the live orders' counts, from
    the book's packed keys (level in the high bits) at tick 0.5; an expired order is
    not seen."""
    from types import SimpleNamespace

    from flowsim.core.lazy_tf import tf
    from flowsim.markets import book_chunks
    from flowsim.markets.kernel import book_view
    from flowsim.markets.learned import book_features
    t = tf()
    tb, lo, hi = 8, np.iinfo(np.int64).min, np.iinfo(np.int64).max
    bid = np.array([[200 << tb, 190 << tb], [198 << tb, lo], [lo, lo]], np.int64)  # [3, 2]
    ask = np.array([[hi, hi], [hi, hi], [204 << tb, hi]], np.int64)
    expiry = np.array([[5, 5], [5, 2], [5, -1]], np.int64)      # market 1's 2nd bid expired
    ctx = SimpleNamespace(chunks=book_chunks.Whole(3, None), tb=t.constant(tb, t.int64),
                          dtype=t.float64, tick=0.5)
    view = book_view(ctx, t.constant(4, t.int64),
                     book_chunks.Book(t.constant(bid), t.constant(ask), t.constant(expiry)))
    price = t.constant([101.0, 96.0], t.float64)
    got = book_features(view, price).numpy()
    np.testing.assert_allclose(got, [[np.log(100 / 101), np.log(102 / 101), 2, 1],
                                     [np.log(95 / 96), 0.0, 1, 0]], rtol=1e-15)
    agents = fm.LearnedAgents(lambda x: x[:, 0], 3, lags=2, book=True)
    assert agents.n_features == 9 and agents.describe()["book"] is True
    assert fm.LearnedAgents(lambda x: x[:, 0], 3, lags=2).n_features == 5
