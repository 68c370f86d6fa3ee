"""Make Lepage's vegas's reference values for ``tests/test_compat_vegas.py`` and
``tests/test_compat_vegas_api.py`` (the tests compare flowsim.compat.vegas with
them and never run vegas).

Every vegas call those tests compare against, with the tests' inputs and
integrands.  vegas draws its random numbers from ``gvar.RNG``, which
``np.random.seed`` does not seed: each run here starts from ``gvar.ranseed``
of its seed, so the file is the same on every run of this script:

- ``agrees``: the two-call runs (5 iterations each) of the tutorial integrand,
  a dict and an array integrand: means, sdevs, keys, dof, summary header;
- ``rtol_iterations``: how many iterations ``rtol`` stops at over 6 seeds;
- ``infinite_limits``: the error vegas raises on an infinite map;
- ``strata`` and ``explicit_nstrat``: vegas's ``nstrat`` and ``neval`` rules;
- ``ravg`` and ``extend``: vegas's own iteration results (means, sdevs, and
  each dict iteration's covariance) and vegas.ravg's averages of them;
- ``adaptive_map``: AdaptiveMap's grids after each step, its region and
  settings; the map/invmap outputs and Jacobians of the fixed inputs go to
  ``tests/data/vegas_api_maps.npz``;
- ``adapt_to_samples``, ``adapt_to_errors`` and ``pdf_integrator``.

Needs vegas and gvar (test extra).  Run from the repository root::

    .venv/bin/python benchmarks/make_vegas_api_reference.py      # ~10 s

and it writes ``tests/data/vegas_api.json`` and ``tests/data/vegas_api_maps.npz``
(``*.npz`` is ignored by git: ``git add -f`` it).
"""
import json
import math
import os
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
# benchmarks/vegas.py would shadow Lepage's vegas
sys.path[:] = [p for p in sys.path if os.path.abspath(p or ".") != HERE]
OUT_JSON = os.path.join(ROOT, "tests", "data", "vegas_api.json")
OUT_NPZ = os.path.join(ROOT, "tests", "data", "vegas_api_maps.npz")

from flowsim.testing.vegas_tutorial import batch_dict, right_array, tutorial  # noqa: E402

# -- the tests' integrands and cases (the first three: flowsim.testing.vegas_tutorial) ----


def peak_values(x):
    return np.exp(-np.sum((x - 0.5) ** 2, axis=1) / 0.02)


def scalar(p):
    return p[0] * p[1] * p[2] * p[3] * 16.0


def pair(x):
    f = np.exp(-100 * np.sum((x - 0.5) ** 2, axis=1))
    return {"1": f, "x": f * x[:, 0]}


def peak(x):
    return np.exp(-50 * ((x - 0.3) ** 2).sum(axis=1)) + 0.1 * np.exp(
        -200 * ((x - 0.8) ** 2).sum(axis=1))


def gauss2(x):
    return np.exp(-50 * ((x - 0.5) ** 2).sum(axis=1)) * 50 / math.pi


def infinite(x):
    return math.exp(-x[0] ** 2 - abs(x[1]))


AGREE_CASES = [
    ("tutorial", "point", [[-1, 1], [0, 1], [0, 1], [0, 1]], 1000),
    ("lbatch dict", "lbatch", [[0, 1], [0, 2]], 4000),
    ("rbatch array", "rbatch", [[0, 1], [0, 1]], 4000),
]
RTOLS = (1e-2, 3e-3)
STRATA_CASES = [
    (4, 1000, 0.75, 0.75, False), (8, 8e6, 0.75, 0.75, False), (8, 2e7, 0.75, 0.75, False),
    (3, 1e4, 0.75, 0.0, False), (2, 5000, 0.5, 0.75, False), (1, 100, 0.75, 0.75, False),
    (5, 20, 0.75, 0.75, False), (6, 1e6, 0.75, 0.75, True)]
MAP_CASES = [
    ([[0, 1], [-1, 2]], 50, 1.5),
    ([[0, 1], [0, 0.2, 1], [2, 3]], [7, 5, 9], 0.5),
    ([[0, 1]], 100, -1.0),
]
PRIOR = ["1(1)", "10(10)"]


def pdf_functions():
    """The functions of ``test_pdf_integrator_agrees_with_vegas``, in its order."""
    return [lambda p: p[0] * p[1], lambda p: [p[0], p[0] * p[1]],
            lambda p: {"p": p, "prod": p[0] * p[1]}]


# -- helpers -------------------------------------------------------------------------


def flat(result):
    """``{"mean": [...], "sdev": [...]}`` of a number, an array or a dict of gvars."""
    import gvar
    buf = (result.buf if hasattr(result, "keys") else
           gvar.BufferDict(x=result).buf)
    return {"mean": [float(g.mean) for g in buf], "sdev": [float(g.sdev) for g in buf]}


def grids(m):
    return [[float(v) for v in row] for row in m.extract_grid()]


def itn_table(results):
    """Iteration results as stored: means and sdevs, and a dict's keys and covariances."""
    import gvar
    if hasattr(results[0], "keys"):
        return {"keys": list(results[0].keys()),
                "mean": [[float(g.mean) for g in r.buf] for r in results],
                "cov": [gvar.evalcov(r.buf).tolist() for r in results]}
    return {"mean": [float(r.mean) for r in results], "sdev": [float(r.sdev) for r in results]}


def rebuilt(table):
    """The gvars of :func:`itn_table`'s table (what the tests average)."""
    import gvar
    if "keys" in table:
        return [gvar.BufferDict(zip(table["keys"], gvar.gvar(m, c)))
                for m, c in zip(table["mean"], table["cov"])]
    return [gvar.gvar(m, s) for m, s in zip(table["mean"], table["sdev"])]


def averaged(avg):
    """vegas.ravg's average as stored."""
    import gvar
    out = {"chi2": float(avg.chi2), "dof": int(avg.dof)}
    if hasattr(avg, "keys"):
        out.update(flat(avg))
        out["correlation"] = float(gvar.evalcorr([avg["1"], avg["x"]])[0, 1])
    else:
        out.update(mean=float(avg.mean), sdev=float(avg.sdev))
    return out


# -- the cases -----------------------------------------------------------------------


def agrees():
    import gvar
    import vegas
    wrap = {"point": lambda f: f, "lbatch": vegas.lbatchintegrand,
            "rbatch": vegas.rbatchintegrand}
    functions = {"point": tutorial, "lbatch": batch_dict, "rbatch": right_array}
    out = {}
    for name, kind, limits, neval in AGREE_CASES:
        f = wrap[kind](functions[kind])
        gvar.ranseed(4)
        integ = vegas.Integrator(limits)
        integ(f, nitn=5, neval=neval)
        r = integ(f, nitn=5, neval=neval)
        entry = {"limits": limits, "neval": neval, "dof": int(r.dof),
                 "summary_header": r.summary().splitlines()[0].split()}
        if kind == "lbatch":
            entry["keys"] = list(r.keys())
            entry["by_key"] = {k: flat(r[k]) for k in r}
        else:
            entry.update(flat(r))
        out[name] = entry
    return out


def rtol_iterations():
    import gvar
    import vegas
    out = {}
    for rtol in RTOLS:
        runs = []
        for seed in range(1, 7):
            gvar.ranseed(seed)
            runs.append(len(vegas.Integrator([[0, 1]] * 4, rtol=rtol)(
                vegas.lbatchintegrand(peak_values), nitn=30, neval=4000).itn_results))
        out[repr(rtol)] = runs
    return out


def infinite_limits():
    import vegas
    try:
        vegas.Integrator([[-np.inf, np.inf], [0, np.inf]])(infinite, nitn=1, neval=100)
    except Exception as error:                              # noqa: BLE001 - recorded
        return {"error": type(error).__name__}
    return {"error": None}


def strata():
    import vegas
    rows = []
    for dim, neval, frac, beta, uniform in STRATA_CASES:
        integ = vegas.Integrator(dim * [[0, 1]], neval=neval, neval_frac=frac, beta=beta,
                                 uniform_nstrat=uniform)
        rows.append([dim, neval, frac, beta, uniform, [int(n) for n in integ.nstrat]])
    return rows


def explicit_nstrat():
    import vegas
    integ = vegas.Integrator(3 * [[0, 1]], nstrat=[4, 5, 6])
    neval = int(integ.neval)
    integ.set(neval=5000)
    return {"neval": neval, "nstrat_after_neval_5000": [int(n) for n in integ.nstrat]}


def ravg_cases():
    """``test_ravg_averages_as_vegas_does`` and ``test_extend_merges_iterations``."""
    import gvar
    import vegas
    gvar.ranseed(3)
    r = vegas.Integrator(4 * [[0, 1]])(scalar, nitn=10, neval=1000)
    rd = vegas.Integrator(2 * [[0, 1]])(vegas.batchintegrand(pair), nitn=6, neval=2000)
    ravg = {"scalar_itn": itn_table(r.itn_results), "dict_itn": itn_table(rd.itn_results)}
    for weighted in (True, False):
        key = "weighted" if weighted else "pooled"
        ravg[key] = {"scalar_tail": averaged(vegas.ravg(r.itn_results[5:], weighted)),
                     "dict": averaged(vegas.ravg(rd.itn_results, weighted))}
        # the stored tables give vegas.ravg's numbers again
        again = averaged(vegas.ravg(rebuilt(ravg["dict_itn"]), weighted))
        assert np.allclose(again["mean"], ravg[key]["dict"]["mean"], rtol=1e-13, atol=0)
        assert np.allclose(again["sdev"], ravg[key]["dict"]["sdev"], rtol=1e-11, atol=0)
    gvar.ranseed(4)
    r = vegas.Integrator(4 * [[0, 1]])(scalar, nitn=10, neval=1000)
    extend = {"itn": itn_table(r.itn_results),
              "whole_mean": float(vegas.ravg(r.itn_results).mean)}
    return ravg, extend


def adaptive_map(index, grid, ninc, alpha, arrays):
    """One case of ``test_adaptive_map_gives_vegass_grids_maps_and_jacobians``;
    its arrays go to ``arrays`` as ``map<index>_<name>``."""
    import vegas
    rng = np.random.default_rng(3)
    m = vegas.AdaptiveMap(grid, ninc=ninc)
    out = {"grid": grid, "ninc": ninc, "alpha": alpha, "grids": [grids(m)]}
    y = rng.random((3000, len(grid)))
    for step in range(4):
        x, jac = np.empty_like(y), np.empty(len(y))
        m.map(y, x, jac)
        arrays[f"map{index}_x{step}"], arrays[f"map{index}_jac{step}"] = x, jac.copy()
        m.add_training_data(y, (jac * peak(np.clip(x, 0, 1))) ** 2)
        m.adapt(alpha=alpha)
        out["grids"].append(grids(m))
    # vegas's invmap searches each axis's whole row of ``grid``; on an axis with
    # fewer increments than the widest, adapt leaves the row's tail as numpy.empty
    # gives it, so the answer there depends on that memory.  The tail is set to the
    # axis's upper end: a sorted row, whose answer is the axis's own increments'.
    rows = np.asarray(m.grid)
    for d, n in enumerate(m.ninc):
        rows[d, n + 1:] = rows[d, n]
    y_back = np.empty_like(y)
    m.invmap(x, y_back, jac)
    arrays[f"map{index}_invmap_y"], arrays[f"map{index}_invmap_jac"] = y_back, jac
    arrays[f"map{index}_jac1d"] = np.asarray(m.jac1d(y))
    arrays[f"map{index}_jac"] = np.asarray(m.jac(y[:5]))
    arrays[f"map{index}_call"] = np.asarray(m(y[0]))
    m.adapt(ninc=13)
    out["grids_ninc13"] = grids(m)
    out["region"] = [list(r) for r in m.region()]
    out["settings"] = m.settings()
    m.make_uniform(ninc=4)
    out["grids_uniform4"] = grids(m)
    return out


def adapt_to_samples():
    import vegas
    x = np.random.default_rng(5).random((4000, 2))
    m = vegas.AdaptiveMap([[0, 1], [0, 1]], ninc=40)
    m.adapt_to_samples(x, peak, nitn=3)
    return {"ninc": [int(n) for n in m.ninc], "grids": grids(m)}


def adapt_to_errors():
    import gvar
    import vegas
    gvar.ranseed(4)
    integ = vegas.Integrator([[0, 1], [0, 1]], adapt_to_errors=True)
    integ(vegas.lbatchintegrand(gauss2), nitn=3, neval=2000)
    r = integ(vegas.lbatchintegrand(gauss2), nitn=3, neval=2000)
    return {"mean": float(r.mean), "sdev": float(r.sdev)}


def pdf_integrator():
    import gvar
    import vegas
    gvar.ranseed(1)
    integ = vegas.PDFIntegrator(gvar.gvar(PRIOR))
    integ(neval=2000, nitn=4)
    results = []
    for f in pdf_functions():
        r = integ(f, neval=2000, nitn=2)
        results.append({"type": type(r).__name__, **flat(r),
                        "wgt_average_in_summary": "wgt average" in r.summary()})
    return {"prior": PRIOR, "results": results}


def main():
    import gvar
    import vegas
    arrays = {}
    ravg, extend = ravg_cases()
    ref = {"vegas": vegas.__version__, "gvar": gvar.__version__, "numpy": np.__version__,
           "made_by": "benchmarks/make_vegas_api_reference.py",
           "agrees": agrees(), "rtol_iterations": rtol_iterations(),
           "infinite_limits": infinite_limits(), "strata": strata(),
           "explicit_nstrat": explicit_nstrat(), "ravg": ravg, "extend": extend,
           "adaptive_map": [adaptive_map(i, *case, arrays)
                            for i, case in enumerate(MAP_CASES)],
           "adapt_to_samples": adapt_to_samples(), "adapt_to_errors": adapt_to_errors(),
           "pdf_integrator": pdf_integrator()}
    with open(OUT_JSON, "w") as fh:
        json.dump(ref, fh, indent=1)
        fh.write("\n")
    np.savez_compressed(OUT_NPZ, vegas=np.array(vegas.__version__), **arrays)
    print(f"vegas {vegas.__version__}: wrote {OUT_JSON} and {OUT_NPZ}")


if __name__ == "__main__":
    main()
