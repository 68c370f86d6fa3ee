"""flowsim.markets: pams configs read or refused, the compiled statistics equal their
numpy definition, statistics agree with pams (stored tables), same bits on every backend,
checkpoint and resume, paths, grids, the CLI."""
import copy
import json
import os

import numpy as np
import pytest
from cases_markets import CASES, small_config
from conftest import ROOT, run_python
from hypothesis import given, settings
from hypothesis import strategies as st

import flowsim.markets as fm
from flowsim.markets import stats
from flowsim.markets.config import Dist, parse

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


def _refused(mutate, *words):
    cfg = ci2002()
    mutate(cfg)
    with pytest.raises(ValueError) as exc:
        parse(cfg)
    for w in words:
        assert w in str(exc.value), str(exc.value)


@pytest.mark.parametrize("mutate, words", [
    (lambda c: c["FCNAgents"].update({"class": "MarketMakerAgent"}),
     ["MarketMakerAgent", "FCNAgents"]),
    (lambda c: c["Market"].update({"class": "IndexMarket"}), ["IndexMarket"]),
    (lambda c: c["FCNAgents"].update({"leverage": 2}), ["'leverage'", "FCNAgents"]),
    (lambda c: c["simulation"].update({"fundamentalCorrelations": {}}),
     ["'fundamentalCorrelations'"]),
    (lambda c: c["simulation"]["sessions"][1].update({"events": ["Shock"]}), ["'events'"]),
    (lambda c: c["simulation"]["sessions"][1].update({"maxNormalOrders": 2}),
     ["maxNormalOrders"]),
    (lambda c: c["simulation"].update({"markets": ["Market", "Market2"]}), ["one market"]),
    (lambda c: c["Market"].update({"numMarkets": 3}), ["numMarkets"]),
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
    (lambda c: c["Market"].update({"fundamentalVolatility": 0.1}),
     ["fundamentalVolatility", "600 steps", "integer tick levels", "larger tickSize"]),
    (lambda c: c["simulation"]["sessions"][1].update({"withOrderExecution": False}),
     ["withOrderExecution"]),
])
def test_unsupported_configs_are_refused_naming_the_key(mutate, words):
    _refused(mutate, *words)


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


# -- against pams ---------------------------------------------------------------------------
REFERENCE = {"ci2002": 512, "two_groups": 256}


@pytest.mark.parametrize("name", sorted(REFERENCE))
def test_statistics_agree_with_pams(name):
    """Every statistic within 4 combined standard errors of pams's (400 seeds, stored by
    benchmarks/make_pams_reference.py).  With 19 statistics the chance that an honest
    run fails is about 19 x 6e-5 ~ 0.1 % per configuration (normal tails; the seed is
    fixed, so the outcome is too)."""
    ref = np.loadtxt(os.path.join(ROOT, "tests", "data", f"pams_markets_{name}.csv"),
                     delimiter=",", skiprows=1)[:, 1:]
    assert len(ref) >= 200
    mean, err, _ = stats.summarize(ref)
    result = fm.ensemble(fm.config_path(name), REFERENCE[name], seed=2026,
                         block_markets=REFERENCE[name])
    z = stats.z_scores(result.value, result.error, mean, err)
    bad = {n: round(float(v), 2) for n, v in zip(stats.NAMES, z) if not abs(v) < 4}
    assert not bad, bad


# -- same bits on every backend ---------------------------------------------------------------
def test_same_bits_in_any_chunking():
    """Flow with device calls of 1, 2 and 4 blocks gives the same bits, for the FCN and
    the learned-agent cases.  Every backend (threads, MPI, Spark, joblib) against Flow:
    ``tests/test_conformance.py`` runs these cases (``tests/cases_markets.py``)."""
    import cases_markets

    import flowsim
    for name, case in CASES.items():
        factory = getattr(cases_markets, case["factory"].split(":")[1])
        sim = factory()
        kw = dict(n_events=case["n_events"], seed=77, block_size=64, quiet=True)
        runs = [flowsim.Flow(sim, events_limit=limit, **kw).run(case["n_iters"])
                for limit in (64, 128, 256)]
        bits = [[np.asarray(r["value"]).tobytes() + np.asarray(r["error"]).tobytes()
                 for r in res.iterations] for res in runs]
        assert bits[0] == bits[1] == bits[2], name
        assert np.isfinite(runs[0].value).all(), name


def test_learned_agents_change_the_market():
    """A learned group's orders enter the book: its markets differ from the FCN-only ones
    with the same seed, and all statistics stay finite."""
    import cases_markets

    import flowsim
    kw = dict(n_events=BLOCK, seed=3, block_size=BLOCK, quiet=True)
    plain = flowsim.Flow(cases_markets.small(), **kw).run(1)
    learned = flowsim.Flow(cases_markets.learned(), **kw).run(1)
    assert np.isfinite(learned.value).all()
    assert np.asarray(learned.value).tobytes() != np.asarray(plain.value).tobytes()


def _abstaining(with_fundamentalists):
    """One noisy agent, with or without 30 noiseless fundamentalists."""
    agent = {"class": "FCNAgent", "markets": ["Market"], "timeWindowSize": [30, 40],
             "orderMargin": [0.0, 0.05], "chartWeight": 0.0}
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
