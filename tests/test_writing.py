"""The worked examples of docs/backends.rst and docs/simulations.rst: a process-pool
backend (spawn; fork after TensorFlow refused) that passes check_executor, and an
antithetic-variates Simulation that joins the conformance cases."""
import math
import os
import sys

import numpy as np
import pytest
from helpers import ROOT

import flowsim
from flowsim.testing import cases_from, check_executor

sys.path.insert(0, os.path.join(ROOT, "examples"))

import antithetic  # noqa: E402
from process_pool_backend import ProcessPoolExecutor  # noqa: E402


@pytest.mark.timeout(900)
def test_process_pool_backend_gives_flows_bits(flow_reference):
    """One pool of 2 spawned workers for every case (each worker compiles once)."""
    pool = ProcessPoolExecutor(2)
    names = ["plain", "vegas", "rows", "resume", "error"]
    check_executor(lambda: pool, names=names, reference=flow_reference(names),
                   label="process pool")
    with pytest.raises(RuntimeError):          # check_executor closed it
        pool.pool.submit(int)


def test_fork_after_tensorflow_is_refused():
    flowsim.core.lazy_tf.tf()                  # TensorFlow has started in this process
    with pytest.raises(RuntimeError, match=r"start_method='fork' after TensorFlow has "
                                           r"started.*use start_method='spawn'"):
        ProcessPoolExecutor(2, start_method="fork")


def test_antithetic_simulation_is_exact_for_a_linear_integrand():
    def linear(x):
        return flowsim.core.lazy_tf.tf().reduce_sum(x, axis=1)
    result = flowsim.Flow(antithetic.Antithetic(linear, 3), 10_000, seed=1,
                          quiet=True).run(2)
    assert result.value == pytest.approx(1.5, abs=1e-12) and result.error < 1e-9


def test_antithetic_beats_plain_and_joins_the_conformance_cases():
    """exp(x1+x2+x3): the antithetic error is below plain MC's at the same events, the
    value within 5 sigma (false-failure rate ~6e-7), and a ThreadExecutor gives its bits."""
    kw = {"n_events": 50_000, "seed": 3, "quiet": True}
    anti = flowsim.Flow(antithetic.antithetic_exp(), **kw).run(2)
    plain = flowsim.Flow(flowsim.Plain(antithetic.exp_sum, 3), **kw).run(2)
    exact = (math.e - 1) ** 3
    assert abs(anti.value - exact) < 5 * anti.error
    assert anti.error < 0.5 * plain.error
    from flowsim.distribution.threads import ThreadExecutor
    check_executor(ThreadExecutor, cases=cases_from(antithetic), label="threads")


def test_antithetic_checkpoint_refuses_another_integrand(tmp_path):
    """config() names the integrand: a checkpoint of exp_sum is refused for another."""
    path = tmp_path / "anti.npz"
    flowsim.Flow(antithetic.antithetic_exp(), 4096, seed=1, quiet=True).run(1, checkpoint=path)

    def other(x):
        return np.float64(2.0) * antithetic.exp_sum(x)
    with pytest.raises(ValueError, match="another configuration"):
        flowsim.Flow(antithetic.Antithetic(other, 3), 4096, seed=1, quiet=True).run(
            2, checkpoint=path)
