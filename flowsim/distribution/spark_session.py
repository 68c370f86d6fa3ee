"""SparkFlow's driver side: the session it uses or starts, the watch that
cancels a job when no executor is alive (Spark would wait forever), and the
exceptions a failed job raises (a task's own, read back from Spark's text)."""
import base64
import json
import numbers
import os
import re
import sys
import threading
import time
import warnings

from ..core.backend import RemoteError, rebuild
from ..core.lazy_tf import device_name
from ..core.log import FlowsimWarning, logger
from .spark_worker import ERROR_TAG

#: Seconds between two looks at the live executors while a job runs on a cluster.
EXECUTOR_POLL = 0.5
#: Seconds between two log lines saying that a job still waits for an executor.
WAITING_REPORT = 30.0

# pyspark's test helpers (imported by its DataFrame module) warn on every start that
# pandas 3 is not fully supported: nothing SparkFlow uses (it moves no DataFrames).
warnings.filterwarnings("ignore", message="PySpark does not yet fully support pandas",
                        category=FutureWarning)


#: Masters whose driver stays on this machine: its UI and ports bind to loopback.
LOOPBACK = ("local", "spark://127.0.0.1:", "spark://localhost:")


def session(spark, show_progress):
    """``(SparkSession, owned)`` for the ``spark=`` argument of SparkFlow."""
    from pyspark import SparkContext
    from pyspark.sql import SparkSession
    if isinstance(spark, SparkSession):
        return spark, False
    if isinstance(spark, SparkContext):
        return SparkSession(spark), False
    if spark is not None and not isinstance(spark, str):
        raise TypeError(f"spark must be None, a master URL string, a SparkSession or a "
                        f"SparkContext, got {type(spark).__name__}")
    running = SparkContext._active_spark_context
    if running is not None:
        if spark is not None and running.master != spark:
            raise ValueError(f"spark={spark!r}: this process already runs a SparkContext "
                             f"with master {running.master!r} (one per process); pass that "
                             f"session, or stop it first")
        active = SparkSession.getActiveSession()
        return (active if active is not None else SparkSession(running)), False
    return _start(spark, show_progress), True


def _start(spark, show_progress):
    """A new session for the master ``spark`` (None: Spark's configuration's)."""
    from pyspark import SparkConf, SparkContext
    from pyspark.sql import SparkSession
    if os.environ.get("PYSPARK_GATEWAY_PORT"):
        # Under spark-submit: the JVM exists and holds --master, --conf, ...
        SparkContext._ensure_initialized()
    conf = SparkConf()
    master = spark or conf.get("spark.master", "local[*]")
    loopback = master.startswith(LOOPBACK)
    if loopback:        # the UI binds to SPARK_LOCAL_IP, else to every interface
        os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    if master.startswith("local") and not os.environ.get("PYSPARK_PYTHON"):
        os.environ["PYSPARK_PYTHON"] = sys.executable
    settings = {"spark.app.name": "flowsim",
                "spark.ui.showConsoleProgress": "true" if show_progress else "false"}
    if os.environ.get("FLOWSIM_SPARK_VERBOSE", "") in ("", "0"):
        # spark-submit logs INFO: over a hundred lines per run.  Spark's own
        # spark.log.level (or FLOWSIM_SPARK_VERBOSE=1) keeps another level.
        settings["spark.log.level"] = "WARN"
    if loopback:
        settings.update({"spark.driver.host": "127.0.0.1",
                         "spark.driver.bindAddress": "127.0.0.1"})
    builder = SparkSession.builder.master(master)
    for key, value in settings.items():
        if not conf.contains(key):
            builder = builder.config(key, value)
    return builder.getOrCreate()


def check_timeout(value):
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise TypeError(f"executor_timeout must be a number of seconds or None, got {value!r}")
    if not value > 0:
        raise ValueError(f"executor_timeout must be > 0 seconds (or None: wait forever), "
                         f"got {value!r}")
    return float(value)


class ExecutorWatch:
    """While a job runs on a cluster: warn when no executor is alive, say every
    :meth:`report_every` seconds that the job still waits (and how to start a worker),
    and after ``timeout`` seconds without one cancel the jobs tagged ``tag``
    (``expired``)."""

    def __init__(self, sc, timeout, tag):
        self.sc, self.timeout, self.tag = sc, timeout, tag
        self.expired = False
        self._done = threading.Event()
        self._thread = None

    def __enter__(self):
        if not self.sc._jsc.sc().isLocal():       # local[N]: the driver is the executor
            self._thread = threading.Thread(target=self._watch, daemon=True,
                                            name="flowsim-executor-watch")
            self._thread.start()
        return self

    def __exit__(self, *exc):
        self._done.set()
        if self._thread is not None:
            self._thread.join(10)

    def _watch(self):
        self._since = self._reported = None
        while not self._done.wait(EXECUTOR_POLL):
            try:
                alive = self.sc._jsc.sc().getExecutorMemoryStatus().size() - 1  # - driver
            except Exception:     # the context is stopping: nothing left to watch
                return
            if not self._look(alive, time.monotonic()):
                return

    def _look(self, alive, now):
        """React to ``alive`` executors at ``now``; False once the jobs are cancelled."""
        master, since = self.sc.master, self._since
        if alive > 0:
            if since is not None:
                logger.warning("SparkFlow: a Spark executor is alive on %s after %.0f s "
                               "without one; the job goes on", master, now - since)
            self._since = None
        elif since is None:
            self._since = self._reported = now
            when = ("waits for one (executor_timeout=None)" if self.timeout is None else
                    f"fails after {self.timeout:g} s unless one comes back (executor_timeout)")
            message = f"SparkFlow: no Spark executor is alive on {master}; the run {when}"
            logger.warning(message)
            warnings.warn(message, FlowsimWarning, stacklevel=1)
        elif self.timeout is not None and now - since >= self.timeout:
            self.expired = True
            self.sc.cancelJobsWithTag(self.tag)
            return False
        elif now - self._reported >= self.report_every():
            self._reported = now
            left = ("" if self.timeout is None else
                    f"; the run fails in {self.timeout - (now - since):.0f} s")
            logger.warning("SparkFlow: waiting for a Spark executor on %s: none for %.0f s%s "
                           "(start a worker: spark-class org.apache.spark.deploy.worker.Worker "
                           "%s)", master, now - since, left, master)
        return True

    def report_every(self):
        """Seconds between two 'waiting for a Spark executor' lines: 30, or a quarter
        of ``executor_timeout`` when that is shorter."""
        return WAITING_REPORT if self.timeout is None else min(WAITING_REPORT,
                                                               self.timeout / 4)


_ERROR_RE = re.compile(re.escape(ERROR_TAG) + r"\[([A-Za-z0-9+/=]+)\]")


class SparkTaskError(RuntimeError):
    """A Spark job of a :class:`SparkFlow` failed (task error, lost worker, ...)."""


class NoExecutorError(SparkTaskError):
    """A job was cancelled: no live Spark executor for ``executor_timeout`` seconds."""


class _TaskFailed(SparkTaskError, RemoteError):
    """A task raised an exception that is not a builtin one (its text is kept)."""


def check_device(device):
    """A device name for every executor (not checked on the driver), or None."""
    if device is None:
        return None
    if not isinstance(device, str):
        raise TypeError(f"device must be None or a string like 'CPU:0' or 'GPU:1', "
                        f"got {device!r}")
    name = device_name(device)
    kind, _, index = name.partition(":")
    if kind not in ("CPU", "GPU") or not index.isdigit():
        raise ValueError(f"device must look like 'CPU:0' or 'GPU:1', got {device!r}")
    return name


def driver_error(exc, iteration):
    """The exception to raise for a failed Spark job: the task's own when we can."""
    text = str(exc)
    found = _ERROR_RE.findall(text)
    if found:
        info = json.loads(base64.b64decode(found[-1]).decode())
        where = (f"[Spark task: partition {info['partition']}, attempt {info['attempt']}, "
                 f"blocks {info['blocks']}, iteration {iteration + 1}, host {info['host']}]")
        error = rebuild(info, where)
        return error if not isinstance(error, RemoteError) else _TaskFailed(info, str(error))
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    reason = next((line for line in lines if "Job aborted" in line or "SparkException" in line),
                  lines[0] if lines else type(exc).__name__)
    crashed = next((line for line in lines if "exited unexpectedly" in line
                    or "ExecutorLostFailure" in line), "")
    detail = f" ({crashed[:300]})" if crashed and crashed not in reason else ""
    return SparkTaskError(f"the Spark job of iteration {iteration + 1} failed; no partial "
                          f"result is used: {reason[:600]}{detail}")
