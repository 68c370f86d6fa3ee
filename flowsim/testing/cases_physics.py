"""Physics workloads: cases of :func:`flowsim.testing.check_executor`: a scan (rows as
components, with covariance), a VEGAS+ scan adapted on the sum of its rows, a
gradient through VEGAS, and a complex integrand with covariance.  Every backend
must give the bits of ``Flow``.  The integrands live in :mod:`flowsim.physics.scans`, so
the simulations pickle to any worker."""
import numpy as np

TABLE = {"c": np.linspace(0.3, 0.7, 5), "w": np.linspace(0.2, 0.4, 5)}


def scan_plain():
    from flowsim.physics.scans import example_bump, scan_simulation
    return scan_simulation(example_bump, 3, TABLE)[0]


def scan_vegasplus():
    from flowsim.physics.scans import example_bump, scan_simulation
    return scan_simulation(example_bump, 3, TABLE, algorithm="vegasplus")[0]


def gradient_vegas():
    from flowsim.algorithms.vegas import Vegas
    from flowsim.physics.integrands import Plan
    from flowsim.physics.scans import example_bump
    plan = Plan(example_bump, "vegas", params={"c": 0.4, "w": 0.3})
    return plan.simulation(Vegas, 3, None, {})


def complex_plain():
    import functools

    from flowsim.algorithms.plain import Plain
    from flowsim.physics.integrands import Plan
    from flowsim.physics.scans import example_wave
    plan = Plan(functools.partial(example_wave, k=3.0), "plain")
    return plan.simulation(Plain, 2, None, {})


def unweighted_candidates():
    """The candidates of :func:`flowsim.unweighted` on a VEGAS map that is not uniform
    (its rows: points kept by hit-or-miss, the kept mask, the overflow count)."""
    import functools

    from flowsim.algorithms.vegas import Vegas
    from flowsim.physics.scans import example_bump
    from flowsim.physics.unweighted import CandidateSampler
    source = Vegas(functools.partial(example_bump, c=0.4, w=0.3), 3, n_bins=8)
    source.set_edges(np.tile(np.linspace(0.0, 1.0, 9) ** 1.5, (3, 1)))
    return CandidateSampler(source, "draw", block_size=4096, max_weight=0.8)


_SETTINGS = {"n_events": 20000, "n_iters": 2, "block_size": 4096}
CASES = {f"physics_{name}": {"factory": f"flowsim.testing.cases_physics:{name}", **_SETTINGS}
         for name in ("scan_plain", "scan_vegasplus", "gradient_vegas", "complex_plain")}
CASES["physics_unweighted"] = {"factory": "flowsim.testing.cases_physics:unweighted_candidates",
                               "n_events": 10000, "block_size": 4096, "rows": True}
