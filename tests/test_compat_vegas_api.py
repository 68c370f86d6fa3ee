"""vegas's AdaptiveMap, uses_jac, adapt_to_errors and PDFIntegrator in
flowsim.compat.vegas, against Lepage's vegas.

vegas's numbers are stored in ``tests/data/vegas_api.json`` and
``tests/data/vegas_api_maps.npz`` (``benchmarks/make_vegas_api_reference.py``);
these tests never run vegas.  AdaptiveMap is deterministic: the same grids, maps
and Jacobians as vegas's on the same inputs (to 1e-12; they are the same bits
here).  The Monte Carlo parts are checked against one stored run of vegas
within 4 combined sigma (false failure 6e-5 per comparison over the choice of
seeds; flowsim's seed and vegas's run are fixed, so the test is deterministic)
and by pulls: 24 independent estimates (6 iterations of each of 4 seeds; each
iteration's random numbers are a separate stream), whose sum of squared pulls
falls outside chi2(24)'s central 99.9 % with probability 1e-3 when the errors
are honest.
"""
import json
import math
import os
import pickle

import gvar
import numpy as np
import pytest
from helpers import ROOT
from scipy.stats import chi2

from flowsim.compat import vegas as fvegas

# vegas's stored numbers: a missing file fails every test here, it does not skip
with open(os.path.join(ROOT, "tests", "data", "vegas_api.json")) as _fh:
    VEGAS = json.load(_fh)
with np.load(os.path.join(ROOT, "tests", "data", "vegas_api_maps.npz")) as _maps:
    VEGAS_MAPS = dict(_maps)

SEEDS, ITERATIONS = range(4), 6
CHI2_RANGE = chi2.ppf([0.0005, 0.9995], len(SEEDS) * ITERATIONS)


def peak(x):
    return np.exp(-50 * ((x - 0.3) ** 2).sum(axis=1)) + 0.1 * np.exp(
        -200 * ((x - 0.8) ** 2).sum(axis=1))


def grids(m):
    return [np.array(row) for row in m.extract_grid()]


def same(a, b):
    assert len(a) == len(b), (a, b)
    for ra, rb in zip(a, b):
        np.testing.assert_allclose(ra, rb, rtol=0, atol=1e-12)


@pytest.mark.parametrize("case, grid, ninc, alpha", [
    (0, [[0, 1], [-1, 2]], 50, 1.5),
    (1, [[0, 1], [0, 0.2, 1], [2, 3]], [7, 5, 9], 0.5),
    (2, [[0, 1]], 100, -1.0),
])
def test_adaptive_map_gives_vegass_grids_maps_and_jacobians(case, grid, ninc, alpha):
    """vegas's grids after each step, and its map's outputs on the same ``y``, stored.
    (vegas's invmap on axes of fewer increments than the widest reads the unset tail
    of the axis's grid row; the stored values are from a tail set to the axis's
    upper end, the answer of the axis's own increments.)"""
    theirs = VEGAS["adaptive_map"][case]
    assert (theirs["grid"], theirs["ninc"], theirs["alpha"]) == (grid, ninc, alpha)

    def stored(name):
        return VEGAS_MAPS[f"map{case}_{name}"]
    rng = np.random.default_rng(3)
    ours = fvegas.AdaptiveMap(grid, ninc=ninc)
    same(theirs["grids"][0], grids(ours))
    y = rng.random((3000, len(grid)))
    for step in range(4):
        x_t, jac_t = stored(f"x{step}"), stored(f"jac{step}")
        x_o, jac_o = np.empty_like(y), np.empty(len(y))
        ours.map(y, x_o, jac_o)
        np.testing.assert_allclose(x_o, x_t, rtol=0, atol=1e-12)
        np.testing.assert_allclose(jac_o, jac_t, rtol=1e-12)
        train = (jac_t * peak(np.clip(x_t, 0, 1))) ** 2
        ours.add_training_data(y, train)
        ours.adapt(alpha=alpha)
        same(theirs["grids"][step + 1], grids(ours))
    y_o = np.empty_like(y)
    ours.invmap(x_t, y_o, jac_o)
    np.testing.assert_allclose(y_o, stored("invmap_y"), rtol=0, atol=1e-12)
    np.testing.assert_allclose(jac_o, stored("invmap_jac"), rtol=1e-12)
    np.testing.assert_allclose(ours.jac1d(y), stored("jac1d"), rtol=1e-12)
    np.testing.assert_allclose(ours.jac(y[:5]), stored("jac"), rtol=1e-12)
    np.testing.assert_allclose(ours(y[0]), stored("call"), rtol=0, atol=1e-12)
    ours.adapt(ninc=13)
    same(theirs["grids_ninc13"], grids(ours))
    assert ours.region() == pytest.approx([tuple(r) for r in theirs["region"]])
    assert ours.settings() == theirs["settings"]
    ours.make_uniform(ninc=4)
    same(theirs["grids_uniform4"], grids(ours))
    same(grids(pickle.loads(pickle.dumps(ours))), grids(ours))


def test_adapt_to_samples_gives_vegass_grid():
    x = np.random.default_rng(5).random((4000, 2))
    theirs = VEGAS["adapt_to_samples"]
    ours = fvegas.AdaptiveMap([[0, 1], [0, 1]], ninc=40)
    ours.adapt_to_samples(x, peak, nitn=3)
    assert list(ours.ninc) == theirs["ninc"]
    same(theirs["grids"], grids(ours))


@pytest.mark.parametrize("make, message", [
    (lambda: fvegas.AdaptiveMap([[0], [0, 1]]), "at least 2 elements"),
    (lambda: fvegas.AdaptiveMap([[0, 1]], ninc=[2, 3]), "one per axis"),
    (lambda: fvegas.AdaptiveMap([[0, 1]], ninc=0), ">= 1"),
    (lambda: fvegas.AdaptiveMap([[0, np.inf]]), "finite"),
    (lambda: fvegas.AdaptiveMap([[0, 1]]).adapt_to_samples(np.ones((100, 1)), np.ones(100),
                                                           nproc=2), "nproc=1"),
    (lambda: fvegas.AdaptiveMap([[0, 1]]).adapt_to_samples(np.ones((10, 1)), np.ones(10)),
     "not enough samples"),
    (lambda: fvegas.AdaptiveMap([[0, 1]]).adapt_to_samples(np.ones((100, 2)), np.ones(100)),
     "incompatible shape"),
])
def test_bad_adaptive_maps_are_refused(make, message):
    with pytest.raises(ValueError, match=message):
        make()


def test_show_grid_is_refused_naming_the_alternative():
    with pytest.raises(NotImplementedError, match="extract_grid"):
        fvegas.AdaptiveMap([[0, 1]]).show_grid()


def test_an_integrator_starts_from_an_adaptive_map_and_hands_its_map_back():
    m = fvegas.AdaptiveMap([[0, 2], [0, 1]], ninc=20)
    x = np.random.default_rng(2).random((4000, 2)) * [2, 1]
    m.adapt_to_samples(x, lambda x: np.exp(-10 * x[:, 0]))
    integ = fvegas.Integrator(m, seed=1)
    same(grids(integ.map), grids(m))
    r = integ(fvegas.batchintegrand(lambda x: np.exp(-10 * x[:, 0])), nitn=3, neval=2000)
    assert abs(r.mean - (1 - math.exp(-20)) / 10) < 4 * r.sdev
    assert integ.map.region() == [(0.0, 2.0), (0.0, 1.0)]
    same(grids(fvegas.Integrator(integ).map), grids(integ.map))     # another's map


def one_over_jac(x, jac):
    return 1.0 / np.prod(jac)


@pytest.fixture(scope="module")
def trained_with_jac():
    integ = fvegas.Integrator([[0, 2], [0, 1]], uses_jac=True, seed=2)
    integ(fvegas.batchintegrand(lambda x, jac: np.exp(-10 * x[:, 0])), nitn=2, neval=600)
    return integ


@pytest.mark.parametrize("wrap, f", [
    (fvegas.lbatchintegrand, lambda x, jac: 1.0 / np.prod(jac, axis=1)),
    (fvegas.rbatchintegrand, lambda x, jac: 1.0 / np.prod(jac, axis=0)),
    (lambda f: f, one_over_jac),
])
def test_uses_jac_passes_the_maps_jacobian_as_vegas_does(trained_with_jac, wrap, f):
    # the integral of 1/jac[d] over x[d] is 1 exactly (vegas's documentation), on an
    # adapted map (not uniform: the Jacobian changes from point to point)
    assert np.ptp(np.diff(trained_with_jac.simulation.edges[0])) > 0.01
    r = trained_with_jac(wrap(f), nitn=1, neval=300, adapt=False)
    assert r.mean == pytest.approx(1.0, abs=1e-12) and r.sdev < 1e-10


@pytest.mark.parametrize("limits, settings, message", [
    ([[0, 1]], {"uses_jac": 1}, "uses_jac must be True or False"),
    ([[0, np.inf]], {"uses_jac": True}, "uses_jac=True needs finite limits"),
    ([[0, 1]], {"uses_jac": True, "backend": "joblib"}, "uses_jac=True runs on backend"),
    ([[0, 1]], {"adapt_to_errors": "yes"}, "adapt_to_errors must be True or False"),
])
def test_bad_uses_jac_and_adapt_to_errors_are_refused(limits, settings, message):
    with pytest.raises(ValueError, match=message):
        fvegas.Integrator(limits, **settings)


@pytest.mark.parametrize("settings, message", [
    ({"nstrat": [4, 5]}, "same nstrat on every axis"),
    ({"neval": 6}, "at least 2 strata per axis"),
])
def test_adapt_to_errors_refuses_strata_flowsims_map_cannot_follow(settings, message):
    integ = fvegas.Integrator([[0, 1], [0, 1]], adapt_to_errors=True)
    with pytest.raises(ValueError, match=message):
        integ(fvegas.batchintegrand(peak), **settings)


def gauss2(x):
    return np.exp(-50 * ((x - 0.5) ** 2).sum(axis=1)) * 50 / math.pi


GAUSS2 = math.erf(math.sqrt(50) / 2) ** 2     # its integral over the unit square


def test_adapt_to_errors_agrees_with_vegas_and_makes_the_strata_the_maps_increments():
    t = gvar.gvar(VEGAS["adapt_to_errors"]["mean"], VEGAS["adapt_to_errors"]["sdev"])
    integ = fvegas.Integrator([[0, 1], [0, 1]], adapt_to_errors=True, seed=4)
    integ(fvegas.batchintegrand(gauss2), nitn=3, neval=2000)
    o = integ(fvegas.batchintegrand(gauss2), nitn=3, neval=2000)
    assert abs(o.mean - t.mean) < 4 * math.hypot(o.sdev, t.sdev)
    assert integ.simulation.n_bins == 31 and list(integ.simulation.nstrat) == [31, 31]
    assert not np.allclose(integ.simulation.edges, np.linspace(0, 1, 32))


def test_adapt_to_errors_has_honest_pulls_over_seeds():
    pulls = []
    for seed in SEEDS:
        integ = fvegas.Integrator([[0, 1], [0, 1]], adapt_to_errors=True, seed=seed)
        r = integ(fvegas.batchintegrand(gauss2), nitn=ITERATIONS, neval=800)
        pulls += [(g.mean - GAUSS2) / g.sdev for g in r.itn_results]
    assert CHI2_RANGE[0] < np.sum(np.square(pulls)) < CHI2_RANGE[1], pulls


PRIOR = ["1(1)", "10(10)"]


def product(p):
    return p[0] * p[1]


def test_pdf_integrator_agrees_with_vegas():
    """vegas's PDFIntegrator trained and run as here (``gvar.ranseed(1)``), stored."""
    theirs = VEGAS["pdf_integrator"]
    assert theirs["prior"] == PRIOR and len(theirs["results"]) == 3
    ours = fvegas.PDFIntegrator(gvar.gvar(PRIOR), seed=1)
    adapted = ours(neval=2000, nitn=4)
    assert abs(adapted.pdfnorm.mean - 1) < 4 * adapted.pdfnorm.sdev
    for f, t in zip((product, lambda p: [p[0], p[0] * p[1]],
                     lambda p: {"p": p, "prod": p[0] * p[1]}), theirs["results"]):
        o = ours(f, neval=2000, nitn=2)
        assert type(o).__name__ == t["type"]
        buf = gvar.BufferDict(x=o).buf if not hasattr(o, "keys") else o.buf
        assert len(buf) == len(t["mean"]), (o, t)
        for a, mean, sdev in zip(buf, t["mean"], t["sdev"]):
            assert abs(a.mean - mean) < 4 * math.hypot(a.sdev, sdev), (o, t)
    assert abs(o.pdfnorm.mean - 1) < 4 * o.pdfnorm.sdev and 0 <= o.Q <= 1
    assert "wgt average" in o.summary() and t["wgt_average_in_summary"]


def test_pdf_integrator_stats_give_the_pdfs_spread():
    ours = fvegas.PDFIntegrator(gvar.gvar(PRIOR), seed=2)
    ours(neval=2000, nitn=3)
    s = ours.stats(lambda p: {"p": p, "prod": p[0] * p[1]}, moments=True, neval=2000, nitn=3)
    # <p0 p1> = 10, var = <p0^2><p1^2> - 100 = 2 * 200 - 100
    assert s["prod"].mean == pytest.approx(10, abs=4 * s.vegas_mean["prod"].sdev)
    assert s["prod"].sdev == pytest.approx(math.sqrt(300), rel=0.05)
    assert s["p"][1].sdev == pytest.approx(10, rel=0.05)
    assert abs(s.stats["p"][0].skew.mean) < 0.1
    default = ours.stats(neval=2000, nitn=2)
    assert np.shape(default) == (2,) and default[0].sdev == pytest.approx(1, rel=0.05)


def test_pdf_integrator_stats_of_a_dict_prior_and_an_rbatch_function():
    @fvegas.rbatchintegrand
    def f(p):
        return {"a": p["a"], "a**2 * b": p["a"] ** 2 * p["b"]}
    ours = fvegas.PDFIntegrator(gvar.gvar({"a": "1.0(5)", "b": "2(1)"}), seed=5)
    s = ours.stats(f, neval=2000, nitn=2)
    assert list(s.keys()) == ["a", "a**2 * b"]
    # <a^2 b> = (1 + 0.25) 2 = 2.5
    assert s["a**2 * b"].mean == pytest.approx(2.5, abs=4 * s.vegas_mean["a**2 * b"].sdev)
    assert s["a"].sdev == pytest.approx(0.5, rel=0.05)


def test_pdf_integrator_with_a_pdf_function_and_its_samples():
    @fvegas.rbatchintegrand
    def bimodal(p):
        return sum(h * np.exp(-np.sum((p - p0) ** 2, axis=0) / 2 / 0.01)
                   for h, p0 in ((1.0, 0.3), (0.5, 0.6)))
    ours = fvegas.PDFIntegrator(gvar.gvar([0.5, 0.5], [[0.25, 0.2], [0.2, 0.25]]),
                                pdf=bimodal, seed=3)
    ours(neval=3000, nitn=6)
    s = ours.stats(neval=3000, nitn=2)
    assert s[0].mean == pytest.approx(0.4, abs=4 * s.vegas_mean[0].sdev + 1e-4)
    wgts, p = ours.sample(nbatch=6000)
    assert p.shape == (2, 6000) and wgts.sum() == pytest.approx(1.0)
    assert np.sum(wgts * p, axis=1) == pytest.approx([0.4, 0.4], abs=0.01)


def test_pdf_integrator_expectations_have_honest_pulls_over_seeds():
    g = gvar.gvar(PRIOR)
    pulls = []
    for seed in SEEDS:
        r = fvegas.PDFIntegrator(g, seed=seed)(product, neval=2000, nitn=ITERATIONS)
        for itn in r.itn_results:
            ratio = itn["f(p)*pdf"] / itn["pdf"]          # correlated: the ratio's error
            pulls.append((ratio.mean - 10.0) / ratio.sdev)
    assert CHI2_RANGE[0] < np.sum(np.square(pulls)) < CHI2_RANGE[1], pulls


@pytest.mark.parametrize("call, error, message", [
    (lambda i: i.stats(product, histograms=True), ValueError, "sample"),
    (lambda i: i.sample(10, mode="x"), ValueError, "mode must be"),
    (lambda i: i(product, save="out.pkl"), ValueError, "save= is not provided"),
])
def test_pdf_integrator_refuses_what_it_cannot_do(call, error, message):
    integ = fvegas.PDFIntegrator(gvar.gvar(PRIOR))
    with pytest.raises(error, match=message):
        call(integ)


@pytest.mark.parametrize("make, error, message", [
    (lambda: fvegas.PDFIntegrator(None), ValueError, "param must be specified"),
    (lambda: fvegas.PDFIntegrator(gvar.gvar(PRIOR), pdf=3), TypeError, "pdf must be callable"),
    (lambda: fvegas.PDFIntegrator(gvar.gvar(PRIOR), scale=0), ValueError, "scale must be > 0"),
])
def test_bad_pdf_integrators_are_refused(make, error, message):
    with pytest.raises(error, match=message):
        make()
