"""Plain Monte Carlo against analytic integrals: the estimates are right and the
reported errors honest (pulls over many seeds consistent with N(0, 1))."""
import numpy as np
import pytest

import flowsim
from flowsim.core.lazy_tf import tf
from flowsim.testing import GENZ, check_pulls, pulls

SEEDS = 40
N_EVENTS = 4096          # 4 blocks of 1024
CASES = [("gaussian", 1), ("gaussian", 4), ("gaussian", 8), ("product_peak", 2),
         ("product_peak", 5), ("oscillatory", 3), ("oscillatory", 8), ("continuous", 1),
         ("continuous", 6), ("polynomial", 2), ("polynomial", 7), ("vector", 4)]

_pulls = {}


def run_seeds(sim, exact, n_iter=2, **kw):
    """Pulls of the combined result of n_iter iterations, one per seed, and chi2/dof."""
    values, errors, chi2 = [], [], []
    for seed in range(SEEDS):
        r = flowsim.Flow(sim, N_EVENTS, seed=seed, block_size=1024, quiet=True, **kw).run(n_iter)
        values.append(r.value)
        errors.append(r.error)
        chi2.append(r.chi2_dof)
    return pulls(values, errors, exact), np.array(chi2)


@pytest.mark.slow
@pytest.mark.parametrize("family, dim", CASES, ids=[f"{f}-{d}" for f, d in CASES])
def test_pulls_per_family(family, dim):
    fam = GENZ[family]
    p, chi2 = run_seeds(flowsim.Plain(fam.f, dim), fam.exact(dim))
    _pulls[family, dim] = p
    check_pulls(p)                                    # mean ~ 0, std ~ 1, no outliers
    # chi2/dof of 2 iterations is chi2_1 distributed: mean 1, std sqrt(2)
    n = chi2.size
    assert abs(chi2.mean() - 1) < 4 * np.sqrt(2 / n), chi2.mean()


@pytest.mark.slow
def test_pulls_pooled_over_every_family_and_dim():
    """All cases together: about 600 pulls, so the tolerance is tight (mean +/- 0.16)."""
    missing = [c for c in CASES if c not in _pulls]
    for family, dim in missing:        # when run alone (-k pooled)
        fam = GENZ[family]
        _pulls[family, dim] = run_seeds(flowsim.Plain(fam.f, dim), fam.exact(dim))[0]
    p = np.concatenate([v.ravel() for v in _pulls.values()])
    assert p.size == SEEDS * (len(CASES) + 2)
    mean, std, n = check_pulls(p)
    # a 15% over- or under-estimated error would fail here
    assert abs(std - 1) < 0.15


def box_poly(x):
    return tf().square(x[:, 0]) + x[:, 1]


@pytest.mark.slow
@pytest.mark.parametrize("limits, exact", [
    ([[-1.0, 2.0], [0.0, 3.0]], 22.5),        # 3 * 3 + 4.5 * 3
    ((-1.0, 1.0), 4.0 / 3),                   # one pair for every dimension: (2/3) * 2 + 0
])
def test_limits_map_the_box(limits, exact):
    p, _ = run_seeds(flowsim.Plain(box_poly, 2, limits=limits), exact, n_iter=1)
    check_pulls(p)


def test_integrate_one_liner_and_float32():
    fam = GENZ["gaussian"]
    r = flowsim.integrate(fam.f, 3, n_events=50_000, n_iter=3, seed=1)
    assert abs(r.value - fam.exact(3)) < 4 * r.error
    assert r.error < 0.01 * fam.exact(3)
    r32 = flowsim.integrate(fam.f, 3, n_events=50_000, n_iter=3, seed=1, dtype="float32")
    assert abs(r32.value - fam.exact(3)) < 4 * r32.error
    assert r32.meta["dtype"] == "float32" and r.meta["backend"] == "flow"


def test_error_falls_as_one_over_sqrt_n():
    sim = flowsim.Plain(GENZ["oscillatory"].f, 5)
    small = flowsim.Flow(sim, 4096, seed=3, block_size=1024, quiet=True).run(1).error
    big = flowsim.Flow(sim, 16 * 4096, seed=3, block_size=1024, quiet=True).run(1).error
    assert big / small == pytest.approx(0.25, rel=0.1)
