"""Honest errors on heavy-tailed and sparse integrands.

Smooth integrands (test_accuracy, test_vegas) do not show a biased combination
of iterations: here every case is one where an iteration can miss what matters
(a peak, a tiny box, the singular end of x^-0.4) and then reports a low value
*and* a low error.  For each (integrand, algorithm, events x iterations) the
same Simulation is rerun from its fresh state over SEEDS fixed seeds and the
pulls ``(value - exact) / error`` must look like N(0, 1):

* ``|mean pull| <= 0.5``,
* ``0.7 <= rms pull <= 1.4`` (rms about 0, so a bias counts too),
* at most ``MAX_BEYOND_3`` pulls with ``|pull| > 3``.

The seeds are fixed and flowsim gives the same bits for the same seed, so a
case that passes passes on every run (not flaky): the false-failure rates
below matter only when the code, or a dependency's arithmetic, changes.  For
honest N(0, 1) pulls over SEEDS = 50 seeds:

* the mean has standard error 1/sqrt(50) = 0.14, so 0.5 is 3.5 sigma:
  P(|mean| > 0.5) = 4e-4;
* 50 rms^2 is chi^2 with 50 dof: P(rms < 0.7) = 9e-4, P(rms > 1.4) = 6e-5;
* the count beyond 3 sigma is Binomial(50, p = 0.0027), mean 0.135:
  P(count >= 2) = 8e-3, P(count >= 3) = 3.5e-4, so at most 2 are allowed.

About 1.7e-3 per case, 3% for all 17 cases at once.  (Pulls of these
integrands are not exactly normal even with honest errors: a Poisson count of
box hits, or a peak seen by a few dozen effective events, is skewed.)

A failure message also gives the pulls of the single kept iterations: if
those are already far from N(0, 1) the iterations themselves are dishonest
(e.g. a VEGAS map that lost a peak), which no combination can repair.
"""
import math

import numpy as np
import pytest

import flowsim
from flowsim.algorithms.vegas import Vegas
from flowsim.algorithms.vegasplus import VegasPlus
from flowsim.core.lazy_tf import tf
from flowsim.targets import double_gaussian, double_gaussian_exact

pytestmark = pytest.mark.costly

SEEDS = range(1000, 1050)
MAX_MEAN = 0.5
RMS_RANGE = (0.7, 1.4)
MAX_BEYOND_3 = 2

# -- integrands (module-level: they pickle) --------------------------------------------

#: Width of the corner peak and its dimension.
CORNER_A, CORNER_DIM = 0.1, 4


def corner_gaussian(x):
    """``(a sqrt(pi) / 2)^-d exp(-|x|^2 / a^2)``: a peak at the corner x = 0."""
    t = tf()
    d = x.shape[1]
    norm = t.constant((CORNER_A * math.sqrt(math.pi) / 2) ** -d, x.dtype)
    return norm * t.exp(-t.reduce_sum(t.square(x), axis=1) / (CORNER_A * CORNER_A))


#: A box of side 0.01 (volume 1e-4) inside the unit square, off the grid lines.
BOX_LOW, BOX_SIDE = (0.3, 0.6), 0.01


def tiny_box(x):
    """Indicator of ``[0.3, 0.31) x [0.6, 0.61)``."""
    t = tf()
    low = t.constant(BOX_LOW, x.dtype)
    inside = t.reduce_all((x >= low) & (x < low + BOX_SIDE), axis=1)
    return t.cast(inside, x.dtype)


POWER = -0.4


def inverse_power(x):
    """``x^-0.4`` in 1-d: finite variance, infinite fourth moment."""
    return tf().pow(x[:, 0], POWER)


#: name -> (integrand, dim, exact integral over the unit cube)
INTEGRANDS = {
    "double_gaussian": (double_gaussian, 8, double_gaussian_exact(8)),
    "corner_gaussian": (corner_gaussian, CORNER_DIM, math.erf(1 / CORNER_A) ** CORNER_DIM),
    "tiny_box": (tiny_box, 2, BOX_SIDE ** 2),
    "inverse_power": (inverse_power, 1, 1 / (1 + POWER)),
}
ALGORITHMS = {"plain": flowsim.Plain, "vegas": Vegas, "vegasplus": VegasPlus}

#: (integrand, events per iteration, iterations, warm-up iterations skipped by
#: Vegas and VegasPlus; Plain skips none)
RUNS = [
    # plain: ~19 effective events (n mean^2 / mean of f^2) at x3, ~38 at x6
    ("double_gaussian", 200_000, 3, 0),     # flowsim's defaults: every iteration kept
    ("double_gaussian", 200_000, 3, 1),
    ("double_gaussian", 200_000, 6, 1),
    ("corner_gaussian", 50_000, 5, 1),      # ~60 effective events per plain run
    ("tiny_box", 30_000, 16, 1),            # 3 hits per plain iteration: 5% have none
    ("inverse_power", 20_000, 5, 1),
]
CASES = list(dict.fromkeys((name, alg, n, it, 0 if alg == "plain" else skip)
                           for name, n, it, skip in RUNS for alg in ALGORITHMS))

#: Cases that fail the bounds because the iterations themselves are dishonest
#: (the single-iteration pulls in the message show it), not because of how they
#: are combined.  Strict: the day one passes, the test fails and this list must
#: shrink.  Each is an open defect.
KNOWN_DEFECTS = {
    ("double_gaussian", "vegas", 3, 0): "VEGAS's separable map locks onto one of the two "
    "peaks on some seeds (value 0.5 with a tiny error, all iterations agreeing): "
    "documented in flowsim.Vegas, use VegasPlus.  Stratified Vegas is "
    "honest over 6 iterations, and over 3 after a warm-up since alpha 0.5; "
    "with alpha 0.75, over 3: mean -0.67 (skip 1: -0.48), rms 1.27 (1.30), 3 beyond 3 "
    "sigma (pulls down to -5.2; unstratified: -8.8 to -32)",
    ("tiny_box", "vegas"): "the VEGAS map puts every interior edge inside the box, so "
    "thin strips along the box's edges lie in the wide first and last increments, "
    "hit ~0.3 times per iteration with huge weights: iterations come out 1-4 % low "
    "with 0.2 % errors (a frozen map at 2e6 events is unbiased: pull +0.26)",
    ("tiny_box", "vegasplus"): "as for vegas, after ~8 iterations (honest at 5)",
    ("double_gaussian", "plain", 6): "rms 1.42 > 1.4 at ~38 effective events per run: "
    "the pooled sample is exactly one sample of 1.2e6 events, whose variance "
    "estimate is skewed; over 200 other seeds the rms is 1.40",
}


def known_defect(integrand, algorithm, n_iter, skip):
    return (KNOWN_DEFECTS.get((integrand, algorithm))
            or KNOWN_DEFECTS.get((integrand, algorithm, n_iter))
            or KNOWN_DEFECTS.get((integrand, algorithm, n_iter, skip)))


_sims = {}


def simulation(integrand, algorithm):
    """One Simulation per (integrand, algorithm) and its fresh state: the compiled
    kernel is reused across seeds (and across RUNS of the same events)."""
    key = integrand, algorithm
    if key not in _sims:
        f, dim, _ = INTEGRANDS[integrand]
        sim = ALGORITHMS[algorithm](f, dim)
        _sims[key] = sim, {k: np.array(v) for k, v in sim.get_state().items()}
    return _sims[key]


def run_seeds(integrand, algorithm, n_events, n_iter, skip, seeds=SEEDS):
    """The :class:`flowsim.Result` of each seed, each run from the fresh state."""
    sim, fresh = simulation(integrand, algorithm)
    results = []
    for seed in seeds:
        sim.set_state(fresh)
        results.append(flowsim.Flow(sim, n_events, seed=seed, quiet=True).run(n_iter, skip=skip))
    return results


def pull_summary(pulls):
    """Mean, rms (about 0), count beyond 3 and largest size of ``pulls``."""
    p = np.asarray(pulls, dtype=np.float64)
    with np.errstate(invalid="ignore", over="ignore"):
        return {"mean": float(np.mean(p)), "rms": float(np.sqrt(np.mean(p * p))),
                "beyond3": int(np.sum(~(np.abs(p) <= 3))), "max": float(np.max(np.abs(p)))}


def iteration_summary(results, exact, skip):
    """Pulls of the kept single iterations (their own errors), for failure messages."""
    v = np.array([float(rec["value"]) for r in results for rec in r.iterations[skip:]])
    e = np.array([float(rec["error"]) for r in results for rec in r.iterations[skip:]])
    zero = e == 0
    s = pull_summary((v[~zero] - exact) / e[~zero])
    return (f"single iterations with an error: mean {s['mean']:+.3f}, rms {s['rms']:.3f}, "
            f"{s['beyond3']} of {v.size - zero.sum()} beyond 3 sigma; {zero.sum()} with error 0")


def test_reset_state_gives_the_bits_of_a_fresh_simulation():
    """What makes run_seeds valid: set_state(fresh) after other seeds == a new instance."""
    name, n_events, n_iter, skip = "inverse_power", 20_000, 3, 1
    f, dim, _ = INTEGRANDS[name]
    for algorithm, cls in ALGORITHMS.items():
        reused = run_seeds(name, algorithm, n_events, n_iter, skip, seeds=[1, 2])[1]
        fresh = flowsim.Flow(cls(f, dim), n_events, seed=2, quiet=True).run(n_iter, skip=skip)
        for key in ("value", "error"):
            assert (np.asarray(getattr(reused, key)).tobytes()
                    == np.asarray(getattr(fresh, key)).tobytes()), (algorithm, key)


@pytest.mark.slow
@pytest.mark.parametrize("integrand, algorithm, n_events, n_iter, skip", [
    pytest.param(*c, id=f"{c[0]}-{c[1]}-{c[2]}x{c[3]}-skip{c[4]}",
                 marks=[pytest.mark.xfail(strict=True, reason=known_defect(c[0], c[1], c[3], c[4]))]
                 if known_defect(c[0], c[1], c[3], c[4]) else [])
    for c in CASES])
def test_pulls_heavy_tailed_and_sparse(integrand, algorithm, n_events, n_iter, skip):
    exact = INTEGRANDS[integrand][2]
    results = run_seeds(integrand, algorithm, n_events, n_iter, skip)
    values = np.array([r.value for r in results])
    errors = np.array([r.error for r in results])
    with np.errstate(divide="ignore", invalid="ignore"):
        p = (values - exact) / errors
    s = pull_summary(p)
    worst = np.argsort(-np.abs(np.nan_to_num(p, nan=np.inf)))[:5]
    msg = (f"{integrand} {algorithm} {n_events}x{n_iter} skip={skip} over {len(p)} seeds: "
           f"mean {s['mean']:+.3f}, rms {s['rms']:.3f}, {s['beyond3']} beyond 3 sigma; "
           f"worst seeds " + ", ".join(f"{SEEDS[i]}: {p[i]:+.2f} ({values[i]:.6g} +/- "
                                       f"{errors[i]:.3g})" for i in worst))
    msg += "; " + iteration_summary(results, exact, skip)
    assert np.all(np.isfinite(p)), msg
    assert abs(s["mean"]) <= MAX_MEAN, msg
    assert RMS_RANGE[0] <= s["rms"] <= RMS_RANGE[1], msg
    assert s["beyond3"] <= MAX_BEYOND_3, msg
