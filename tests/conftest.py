"""The test run's fixtures and hooks (plain helpers live in ``tests/helpers``).  The
pytest process itself uses the default devices.

Fixtures several test files share: Flow's conformance reference, the one Dask cluster
and the one SparkContext of a test run (starting a JVM or worker processes that import
TensorFlow costs seconds on 2 cores).  Hooks: the ``timing`` marker (off unless asked
for) and how ``make test`` shares the files between its two pytest-xdist workers
(:func:`pytest_collection_modifyitems`).
"""
import atexit
import os
import shutil
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

from helpers import ROOT, SPARK_CONF, SPARK_ENV, run_python  # noqa: E402,F401

import flowsim  # noqa: E402

flowsim.configure()     # before any test file imports tensorflow


@pytest.fixture
def python():
    """Fixture form of :func:`run_python`."""
    return run_python


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


# -- Markers: timing, and how pytest-xdist shares the files ----------------------------
def pytest_addoption(parser):
    parser.addoption("--timing", action="store_true",
                     help="also run the tests marked timing (wall-clock limits); "
                          "`-m timing` runs them alone")


def pytest_configure(config):
    # Work units in the order the workers collected them (costly ones first, see
    # pytest_collection_modifyitems), not by their number of tests.
    if hasattr(config.option, "loadscopereorder"):
        config.option.loadscopereorder = False


def _timing_selected(config):
    return config.getoption("--timing") or "timing" in (config.getoption("markexpr") or "")


def _loadgroup_worker(config):
    """Whether this process is a pytest-xdist worker of a ``--dist loadgroup`` run."""
    return hasattr(config, "workerinput") and config.getoption("loadgroup", False)


def _group_of(item):
    """The ``xdist_group`` of ``item``: its module's ``pytestmark``, else its file."""
    mark = item.get_closest_marker("xdist_group")
    if mark is None:
        return item.nodeid.split("::", 1)[0]
    return mark.args[0] if mark.args else mark.kwargs.get("name", "default")


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config, items):
    """Tests marked ``timing`` are left out unless asked for (``--timing``, ``-m timing``).
    In a pytest-xdist worker under ``--dist loadgroup``, each file is a unit of work
    (its module fixtures built once) unless its ``xdist_group`` mark joins it to other
    files, and the units of ``costly`` files come first: started last, a long one would
    run alone at the end.  Serially, files run in their order."""
    if not _timing_selected(config):
        kept = [item for item in items if item.get_closest_marker("timing") is None]
        if len(kept) < len(items):
            config.hook.pytest_deselected(items=[i for i in items if i not in kept])
            items[:] = kept
    if not _loadgroup_worker(config):
        return
    costly = {_group_of(item) for item in items if item.get_closest_marker("costly")}
    for item in items:
        if item.get_closest_marker("xdist_group") is None:
            item.add_marker(pytest.mark.xdist_group(_group_of(item)))
    items.sort(key=lambda item: _group_of(item) not in costly)


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_node_collection_finished(node, ids):
    """Stops a ``--dist loadgroup`` run whose groups were lost (every test has one, see
    :func:`pytest_collection_modifyitems`): pytest-xdist puts the group in the node id,
    which pytest 9.2 no longer reads back."""
    lost = [nodeid for nodeid in ids if "@" not in nodeid]
    if node.config.getoption("dist", None) == "loadgroup" and lost:
        pytest.exit(f"--dist loadgroup: pytest {pytest.__version__} drops the xdist_group "
                    f"of {lost[0]} and {len(lost) - 1} more tests; install pytest<9.2 (as "
                    f"setup.py's test extra does) or run serially (make test TEST_WORKERS=0)",
                    returncode=pytest.ExitCode.USAGE_ERROR)
