"""Make Lepage's vegas's reference numbers for ``tests/test_compat_vegas.py``.

vegas's tutorial integrand with three outputs ("Multiple Integrands
Simultaneously"): ``f = exp(-200 |x - 1/2|^2)`` on the unit 4-cube and the
dict ``{'1': f, 'x': f x_0, 'x**2': f x_0^2}``, every setting vegas's default
(VEGAS+).  Two cases: ``tutorial``, as the tutorial runs it (a training call
of 10 iterations of 2,000 evaluations, then the measurement, 10 iterations of
10,000), and ``equal_neval``, training with 10,000 evaluations too (vegas
chooses its hypercubes again when ``neval`` changes; ``flowsim.compat.vegas``
keeps those of its first call, so this is the case where both stratify the
measurement alike).  Each repeated over ``--seeds`` seeds (``gvar.ranseed``);
the JSON holds, for each of the three integrals and the derived ``<x> = I_x /
I_1`` and ``sigma_x^2 = I_x2 / I_1 - <x>^2``, the median over seeds of vegas's
``sdev`` (and the seed-to-seed spread of the means), and the median
correlation matrix of the integrals.

Needs vegas and gvar (test extra).  Run from the repository root::

    .venv/bin/python benchmarks/make_vegas_reference.py      # ~20 s

and it writes ``tests/data/vegas_tutorial_dict.json``.
"""
import argparse
import json
import os
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
# benchmarks/vegas.py would shadow Lepage's vegas
sys.path[:] = [p for p in sys.path if os.path.abspath(p or ".") != HERE]
OUT = os.path.join(ROOT, "tests", "data", "vegas_tutorial_dict.json")
MEASURE = {"nitn": 10, "neval": 10000}
CASES = {"tutorial": {"nitn": 10, "neval": 2000}, "equal_neval": MEASURE}


def one_run(seed, train):
    import gvar
    import vegas

    from flowsim.testing.vegas_tutorial import KEYS, derived, moments
    gvar.ranseed(seed)
    f = vegas.lbatchintegrand(moments)
    integ = vegas.Integrator(4 * [[0, 1]])
    integ(f, **train)
    r = integ(f, **MEASURE)
    out = {k: r[k] for k in KEYS}
    out.update(derived(out))
    corr = gvar.evalcorr([r[k] for k in KEYS])
    return out, corr, r.Q


def summarise(runs):
    """Medians over seeds of one case's runs (printed as they are made)."""
    names = list(runs[0][0])
    table = {}
    for name in names:
        means = np.array([r[name].mean for r, _, _ in runs])
        sdevs = np.array([r[name].sdev for r, _, _ in runs])
        table[name] = {"median_sdev": float(np.median(sdevs)),
                       "spread_of_means": float(np.std(means, ddof=1)),
                       "mean": float(np.mean(means))}
        print(f"{name:>10}: median sdev {np.median(sdevs):.4g}, spread of means "
              f"{np.std(means, ddof=1):.4g}, mean {np.mean(means):.8g}")
    corr = np.median(np.array([c for _, c, _ in runs]), axis=0)
    print("median correlation matrix:\n", corr)
    return {"results": table, "median_correlation": corr.tolist(),
            "example_run": {name: str(runs[0][0][name]) for name in names}}


def main():
    import gvar
    import vegas

    from flowsim.testing.vegas_tutorial import KEYS
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=20)
    args = parser.parse_args()
    ref = {"integrand": "exp(-200 |x - 1/2|^2) * {1, x_0, x_0^2} on [0, 1]^4",
           "measure": MEASURE, "seeds": args.seeds, "vegas": vegas.__version__,
           "gvar": gvar.__version__, "keys": list(KEYS)}
    for case, train in CASES.items():
        print(f"{case}: training {train}, measurement {MEASURE}")
        runs = [one_run(seed, train) for seed in range(1, args.seeds + 1)]
        ref[case] = {"train": train, **summarise(runs)}
    with open(OUT, "w") as fh:
        json.dump(ref, fh, indent=1)
        fh.write("\n")
    print(f"wrote {OUT}")


if __name__ == "__main__":
    main()
