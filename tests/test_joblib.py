"""JoblibFlow: same bits as Flow on loky worker processes and on a real Dask
cluster (scheduler and worker processes on 127.0.0.1); task errors keep their
type and text; a killed worker process costs a rerun of its iteration, never bits.
"""
import os
import sys

import cloudpickle
import joblib
import numpy as np
import pytest

import flowsim
from flowsim.distribution import JoblibFlow
from flowsim.targets import double_gaussian

pytestmark = pytest.mark.costly

# Simulations defined here travel by value (workers cannot import this module);
# loky and Dask both pickle with cloudpickle.
cloudpickle.register_pickle_by_value(sys.modules[__name__])

CASE = {"n_events": 40_000, "block_size": 2048, "events_limit": 6144, "seed": 12345}


class Broken(flowsim.Plain):
    """Fails when its kernel is traced, i.e. only in a worker."""

    def block(self, u, valid, state):
        raise ValueError("deliberately broken integrand kernel")


class DiesOnce(flowsim.Plain):
    """Plain whose worker process exits while tracing, once (``marker`` records it)."""

    def __init__(self, marker, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.marker = marker

    def block(self, u, valid, state):
        if not os.path.exists(self.marker):
            with open(self.marker, "w") as fh:
                fh.write(str(os.getpid()))
            os._exit(1)
        return super().block(u, valid, state)


def bits(result):
    return [(np.asarray(r["value"]).tobytes(), np.asarray(r["error"]).tobytes())
            for r in result.iterations]


def covered(result, n_blocks):
    """Every block of every iteration exactly once in the timeline."""
    for it in {c["iteration"] for c in result.timeline}:
        seen = np.zeros(n_blocks, int)
        for c in result.timeline:
            if c["iteration"] == it:
                seen[c["first_block"]:c["first_block"] + c["blocks"]] += 1
        if not (seen == 1).all():
            return False
    return True


@pytest.fixture(scope="module")
def reference():
    out = {}
    for cls in (flowsim.Plain,):
        out[cls.__name__] = bits(flowsim.Flow(cls(double_gaussian, 4), quiet=True, **CASE).run(3))
    return out


class CountingBackend(joblib.parallel.ThreadingBackend):
    """joblib's threads, counting the pools started (a cluster backend's actors)."""

    pools = 0

    def configure(self, *args, **kwargs):
        type(self).pools += 1
        return super().configure(*args, **kwargs)


def test_the_pool_of_a_cluster_backend_is_kept_between_iterations(reference):
    """Under one ``parallel_config`` block, a cluster backend's pool (Ray's actors, Dask's
    workers) serves every iteration: one pool for 3 iterations, Flow's bits; a new
    block gets a new pool; ``close()`` releases it."""
    from flowsim.distribution.joblib import JoblibExecutor
    joblib.register_parallel_backend("counting", CountingBackend)
    executor = JoblibExecutor(n_jobs=2)
    with joblib.parallel_config(backend="counting"):
        res = flowsim.Flow(flowsim.Plain(double_gaussian, 4), quiet=True, executor=executor,
                           **CASE).run(3)
    assert bits(res) == reference["Plain"]
    assert CountingBackend.pools == 1 and res.meta["joblib_backend"] == "counting"
    with joblib.parallel_config(backend="counting"):
        flowsim.Flow(flowsim.Plain(double_gaussian, 4), quiet=True, executor=executor,
                     **CASE).run(1)
    assert CountingBackend.pools == 2
    executor.close()
    executor.close()
    assert executor._pool is None


@pytest.mark.timeout(600)
def test_task_error_keeps_type_and_text():
    flow = JoblibFlow(Broken(double_gaussian, 2), n_jobs=2, quiet=True, **CASE)
    with pytest.raises(ValueError, match=r"deliberately broken integrand kernel\s+"
                                         r"\[joblib task: blocks \d+\.\.\d+, iteration 1, "):
        flow.run(1)


@pytest.mark.timeout(600)
def test_killed_worker_reruns_the_iteration_same_bits(tmp_path, reference):
    """A loky worker dies in the first iteration: the iteration runs again, Flow's bits,
    and the Result's facts are loky's (every algorithm's bits on loky:
    test_conformance.py)."""
    marker = str(tmp_path / "died")
    flow = JoblibFlow(DiesOnce(marker, double_gaussian, 4), n_jobs=2, quiet=True, **CASE)
    res = flow.run(3)
    assert os.path.exists(marker)                  # a worker did die
    assert bits(res) == reference["Plain"]
    assert covered(res, flow.grid.n_blocks)
    assert res.meta["backend"] == "joblib" and res.meta["joblib_backend"] == "loky"
    assert str(os.getpid()) not in {c["device"].split("/")[0].split(":")[1]
                                    for c in res.timeline}


@pytest.mark.timeout(900)
def test_dask_local_cluster_same_bits_as_flow(dask_cluster, reference):
    from dask import distributed
    with distributed.Client(dask_cluster) as client, joblib.parallel_config(backend="dask"):
        assert client.scheduler_info()["address"].startswith("tcp://127.0.0.1:")
        for cls in (flowsim.Plain,):
            flow = JoblibFlow(cls(double_gaussian, 4), quiet=True, **CASE)
            res = flow.run(3)
            assert bits(res) == reference[cls.__name__], cls.__name__
            assert covered(res, flow.grid.n_blocks)
            assert res.meta["joblib_backend"] == "dask"
            pids = {int(c["device"].split("/")[0].split(":")[1]) for c in res.timeline}
            assert os.getpid() not in pids               # worker processes ran the blocks


@pytest.mark.timeout(600)
def test_integrate_backend_joblib(reference):
    res = flowsim.integrate(double_gaussian, 4, CASE["n_events"], 3, seed=CASE["seed"],
                            backend="joblib", n_jobs=2, block_size=CASE["block_size"],
                            events_limit=CASE["events_limit"], quiet=True)
    assert res.meta["backend"] == "joblib"
    assert bits(res) == reference["Plain"]


@pytest.fixture(scope="module")
def local_ray():
    """A Ray cluster of this machine on 127.0.0.1 (2 CPUs, no dashboard), stopped after
    the module; joblib's ``ray`` backend registered."""
    import ray  # flowsim[test] brings it: missing is a failure
    from ray.util.joblib import register_ray
    ray.init(num_cpus=2, include_dashboard=False, _node_ip_address="127.0.0.1",
             log_to_driver=False, configure_logging=False)
    register_ray()
    try:
        yield
    finally:
        ray.shutdown()


@pytest.mark.timeout(900)
def test_joblib_on_ray_gives_flows_bits(local_ray, flow_reference):
    """JoblibFlow unchanged under joblib.parallel_config(backend="ray"): the Plain case
    of flowsim.testing.check_executor on its first iteration (every bit and the
    timeline).  Only that case and iteration: each Flow starts its own actors, and
    each imports TensorFlow (the other cases run on loky and Dask; that a cluster
    backend's pool serves every iteration: the counting backend's test above)."""
    from flowsim.distribution.joblib import JoblibExecutor
    from flowsim.testing import CASES, check_executor
    made = []
    factory_of_plain, settings = CASES["plain"]
    cases = {"plain": (factory_of_plain, dict(settings, n_iters=1))}

    def factory():
        made.append(JoblibExecutor(n_jobs=2))
        return made[-1]
    with joblib.parallel_config(backend="ray"):
        check_executor(factory, cases, names=["plain"],
                       reference=flow_reference(["plain"], cases), label="joblib ray")
    assert made and all(e.meta()["joblib_backend"] == "ray" for e in made)
