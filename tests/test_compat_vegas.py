"""flowsim.compat.vegas against Lepage's vegas (in the test extra) on
integrands written as vegas's tutorial writes them.

Each comparison asks |flowsim - vegas| < 4 sqrt(sdev_f^2 + sdev_v^2): with honest
errors a false failure has probability 6e-5 per comparison (12 comparisons here:
< 1e-3 per run); both seeds are fixed, so the test is deterministic.
"""
import math

import numpy as np
import pytest
import vegas  # the anchor (test extra): a missing anchor fails, it does not skip

from flowsim.compat import vegas as fvegas


def tutorial(x):
    """vegas's tutorial integrand, one point at a time (integral 1 over the box)."""
    dx2 = sum((xd - 0.5) ** 2 for xd in x)
    return math.exp(-100.0 * dx2) * 1013.2118364296088


def batch_dict(x):
    return {"a": x[:, 0] * x[:, 1], "b": np.stack([x[:, 0] ** 2, np.cos(x[:, 1])], axis=1)}


def right_array(x):
    return np.array([np.exp(-x[0] - x[1]), x[0] ** 3])


def agree(ours, theirs):
    for a, b in zip(np.ravel(ours), np.ravel(theirs)):
        dist = abs(a.mean - b.mean) / math.hypot(a.sdev, b.sdev)
        assert dist < 4.0, (a, b)


CASES = [
    ("tutorial", tutorial, [[-1, 1], [0, 1], [0, 1], [0, 1]], 1000, None),
    ("lbatch dict", fvegas.batchintegrand(batch_dict), [[0, 1], [0, 2]], 4000, "dict"),
    ("rbatch array", fvegas.rbatchintegrand(right_array), [[0, 1], [0, 1]], 4000, "array"),
]


@pytest.mark.parametrize("name, f, limits, neval, kind", CASES, ids=[c[0] for c in CASES])
def test_agrees_with_lepages_vegas(name, f, limits, neval, kind):
    theirs_f = f
    if kind == "dict":
        theirs_f = vegas.lbatchintegrand(batch_dict)
    elif kind == "array":
        theirs_f = vegas.rbatchintegrand(right_array)
    ours = fvegas.Integrator(limits, seed=3)
    ours(f, nitn=5, neval=neval)
    r_ours = ours(f, nitn=5, neval=neval)
    np.random.seed(4)
    theirs = vegas.Integrator(limits)
    theirs(theirs_f, nitn=5, neval=neval)
    r_theirs = theirs(theirs_f, nitn=5, neval=neval)
    if kind == "dict":
        assert set(r_ours) == set(r_theirs)
        for k in r_ours:
            agree(r_ours[k], r_theirs[k])
    else:
        agree(r_ours if kind else [r_ours], r_theirs if kind else [r_theirs])
    assert r_ours.dof == r_theirs.dof
    assert 0.0 <= r_ours.Q <= 1.0 and len(r_ours.itn_results) == 5
    assert r_ours.summary().splitlines()[0].split() == r_theirs.summary().splitlines()[0].split()


def test_result_attributes_and_exact_value():
    integ = fvegas.Integrator([[0, 1], [0, 1]], seed=1, beta=0.0)
    r = integ(fvegas.batchintegrand(lambda x: x[:, 0] * x[:, 1]), nitn=4, neval=2000)
    assert abs(r.mean - 0.25) < 4 * r.sdev
    assert r.chi2 >= 0 and r.dof == 3 and str(r).startswith("0.2")
    assert len(r.summary().splitlines()) == 2 + 4


def test_a_batch_integrand_of_the_wrong_length_is_refused():
    integ = fvegas.Integrator([[0, 1]], seed=1)
    with pytest.raises(Exception, match=r"one row per point"):
        integ(fvegas.batchintegrand(lambda x: x[:1, 0] if len(x) > 2 else x[:, 0]),
              nitn=1, neval=200)
