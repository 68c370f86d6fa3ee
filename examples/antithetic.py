"""A Simulation written from scratch: plain Monte Carlo with antithetic variates.

Each event draws ``u`` in the unit cube and evaluates the integrand at ``u`` and
at its mirror ``1 - u``; the event's value is the mean of the two.  For an
integrand monotone in each variable the two halves are negatively correlated,
so the estimate's variance falls below plain Monte Carlo's for the same number
of integrand calls per event pair.  ``docs/simulations.rst`` explains each
method.

    python examples/antithetic.py
"""
import math

import numpy as np

import flowsim
from flowsim.core.fingerprint import fingerprint
from flowsim.core.lazy_tf import tf
from flowsim.core.sums import block_sum, count_true


class Antithetic(flowsim.Simulation):
    """Antithetic-variates Monte Carlo of ``integrand`` over the unit cube.

    Parameters
    ----------
    integrand : callable
        TensorFlow-traceable ``f(x)``, ``x`` ``[n, dim]`` -> ``[n]``.
    dim : int
        Number of variables.
    """

    #: This class's own code needs no AutoGraph conversion (no Python control flow
    #: on tensors); the integrand is plain TensorFlow here.
    autograph = False

    def __init__(self, integrand, dim):
        self.integrand, self.dim = integrand, int(dim)

    def accumulators(self):
        # per block: sum of event values, of their squares, and the event count
        return {"sum": (), "sum2": (), "count": ()}

    def block(self, u, valid, state):
        t = tf()
        pair = 0.5 * (self.integrand(u) + self.integrand(1.0 - u))
        pair = t.where(valid, t.cast(pair, t.float64), t.zeros_like(pair, t.float64))
        return {"sum": block_sum(pair), "sum2": block_sum(pair * pair),
                "count": count_true(valid)}

    def estimate(self, totals, n_events):
        n = float(totals["count"])
        mean = float(totals["sum"]) / n
        var = max(float(totals["sum2"]) / n - mean * mean, 0.0) * n / (n - 1)
        return {"value": np.float64(mean), "error": np.float64(math.sqrt(var / n))}

    def config(self):
        # What defines this instance, so that a checkpoint of another integrand is
        # refused (flowsim.Flow.run's checkpoint=).
        return {"class": "Antithetic", "dim": self.dim,
                "integrand": fingerprint(self.integrand)}


def exp_sum(x):
    """exp(x_1 + ... + x_d): monotone in every variable, integral (e - 1)**d."""
    t = tf()
    return t.exp(t.reduce_sum(x, axis=1))


def antithetic_exp():
    """The conformance case of this example (flowsim.testing.cases_from)."""
    return Antithetic(exp_sum, 3)


#: This workload's conformance case: ``check_executor(factory,
#: cases=cases_from("antithetic"))`` runs it on any backend.
CASES = {"antithetic_exp": {"factory": "antithetic:antithetic_exp", "n_events": 20_000,
                            "n_iters": 2, "block_size": 2048, "events_limit": 4096}}


if __name__ == "__main__":
    n, seed = 200_000, 1
    anti = flowsim.Flow(Antithetic(exp_sum, 3), n, seed=seed).run(3)
    plain = flowsim.Flow(flowsim.Plain(exp_sum, 3), n, seed=seed).run(3)
    print(f"exact      {(math.e - 1) ** 3:.6f}")
    print(f"antithetic {anti.value:.6f} +/- {anti.error:.6f}")
    print(f"plain      {plain.value:.6f} +/- {plain.error:.6f}")
