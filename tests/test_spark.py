"""SparkFlow: real Spark jobs on a local[2] session and on a standalone cluster.

One SparkContext per process, so the in-process tests run in file order:
local[2] (module session), then ``local[2,2]`` (a session SparkFlow owns, with
retries), then a driver on the standalone master + worker that a fixture starts
on 127.0.0.1 with ``spark-class`` and kills afterwards (two tests kill the worker
JVM mid-job and start a new one).  The ``spark-submit`` run of the example (on
the standalone cluster, with ``--py-files``) is a subprocess with a timeout.
References are ``flowsim.Flow`` in this process; results are compared bit for
bit (``tobytes``).
"""
import json
import logging
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.request

import numpy as np
import pytest
from helpers import FAST_JVM, ROOT, SPARK_ENV, SPARK_HOME  # noqa: F401

#: Shares the run's SparkContext with test_conformance.py (one JVM for both).
pytestmark = [pytest.mark.spark, pytest.mark.xdist_group("spark"), pytest.mark.costly]

if shutil.which("java") is None and not os.environ.get("JAVA_HOME"):
    raise RuntimeError("no java on PATH and no JAVA_HOME: Spark needs Java 17")

# flowsim[spark]; make test installs it: missing is a failure, not a skip.
from pyspark import cloudpickle  # noqa: E402

import flowsim  # noqa: E402
from flowsim.distribution import SparkFlow  # noqa: E402
from flowsim.distribution.spark import NoExecutorError, task_device  # noqa: E402
from flowsim.targets import double_gaussian  # noqa: E402

# Classes below travel to executors by value (executors cannot import tests/).
cloudpickle.register_pickle_by_value(sys.modules[__name__])

TIMEOUT = 240
CASE = {"dim": 4, "n_events": 100_000, "block_size": 4096, "events_limit": 20_000, "seed": 2024}


def bits(x):
    return np.ascontiguousarray(np.asarray(x, dtype=np.float64)).tobytes()


def assert_same_bits(a, b):
    assert len(a.iterations) == len(b.iterations)
    for ra, rb in zip(a.iterations, b.iterations):
        assert bits(ra["value"]) == bits(rb["value"]), (ra["value"], rb["value"])
        assert bits(ra["error"]) == bits(rb["error"]), (ra["error"], rb["error"])
    assert bits(a.value) == bits(b.value) and bits(a.error) == bits(b.error)


def reference(sim, n_iter, **kw):
    kw = {**{k: CASE[k] for k in ("n_events", "block_size", "events_limit", "seed")}, **kw}
    return flowsim.Flow(sim, **kw).run(n_iter)


def plain():
    return flowsim.Plain(double_gaussian, CASE["dim"])


#: Shared by most tests: Flow compiles its kernel once, and every Python worker
#: keeps the kernel it compiled for this object across SparkFlows.
PLAIN = plain()


@pytest.fixture(scope="module")
def plain_ref():
    """Flow's result for PLAIN, 2 iterations of CASE: the bits every backend must give."""
    return reference(PLAIN, 2)


def spark_flow(sim, spark, **kw):
    kw = {**{k: CASE[k] for k in ("n_events", "block_size", "events_limit", "seed")}, **kw}
    return SparkFlow(sim, spark=spark, quiet=True, **kw)


class Broken(flowsim.Plain):
    """Fails when its kernel is traced, i.e. only on executors."""

    def block(self, u, valid, state):
        raise ValueError("deliberately broken integrand kernel")


class FailsOnce(flowsim.Plain):
    """Plain whose executor copy fails once, in partition 0, attempt 0.

    ``mode="raise"`` raises; ``mode="hang"`` writes its pid to ``marker.pid``
    and sleeps (the test kills the Python worker meanwhile).  ``marker.done``
    makes it happen only once per test.
    """

    def __init__(self, mode, marker, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.mode, self.marker = mode, marker

    def __setstate__(self, d):
        super().__setstate__(d)
        if self.mode is None:
            return
        from pyspark import TaskContext
        ctx = TaskContext.get()
        if ctx is None or ctx.partitionId() != 0 or ctx.attemptNumber() != 0:
            return
        try:
            os.close(os.open(self.marker + ".done", os.O_CREAT | os.O_EXCL))
        except FileExistsError:
            return
        if self.mode == "raise":
            raise RuntimeError("injected task failure (first attempt)")
        with open(self.marker + ".pid.tmp", "w") as fh:
            fh.write(str(os.getpid()))
        os.rename(self.marker + ".pid.tmp", self.marker + ".pid")
        time.sleep(TIMEOUT)


# -- no Spark needed ------------------------------------------------------------------
class _Res:
    def __init__(self, *addresses):
        self.addresses = list(addresses)


def test_task_device_follows_spark_resources():
    assert task_device(None, {}, ["CPU:0"]) == "CPU:0"
    assert task_device(None, {"gpu": _Res("1")}, ["GPU:0", "GPU:1", "CPU:0"]) == "GPU:1"
    # A cluster manager that isolates GPUs: the task sees only its own.
    assert task_device(None, {"gpu": _Res("3")}, ["GPU:0", "CPU:0"]) == "GPU:0"
    assert task_device(None, {"gpu": _Res("0")}, ["CPU:0"]) == "CPU:0"
    assert task_device("CPU:0", {"gpu": _Res("0")}, ["GPU:0", "CPU:0"]) == "CPU:0"
    with pytest.raises(RuntimeError, match="assigned GPU '5'"):
        task_device(None, {"gpu": _Res("5")}, ["GPU:0", "GPU:1", "CPU:0"])


class _FakeContext:
    master = "spark://127.0.0.1:7077"

    def __init__(self):
        self.cancelled = []

    def cancelJobsWithTag(self, tag):  # noqa: N802 - Spark's name
        self.cancelled.append(tag)


def test_executor_watch_says_what_it_waits_for(caplog):
    """Without executors the watch warns once, then says every timeout/4 seconds how
    long it has waited, when the run fails and how to start a worker; then cancels."""
    from flowsim.distribution.spark_session import ExecutorWatch
    sc = _FakeContext()
    watch = ExecutorWatch(sc, 20.0, "tag")
    watch._since = None
    assert watch.report_every() == 5.0 and ExecutorWatch(sc, None, "t").report_every() == 30
    with caplog.at_level(logging.WARNING, logger="flowsim"), \
            pytest.warns(UserWarning, match="fails after 20 s unless one comes back"):
        for now in (100.0, 103.0, 105.5, 111.0, 114.0):
            assert watch._look(0, now)
        assert not watch._look(0, 120.0)
    assert watch.expired and sc.cancelled == ["tag"]
    waiting = [m for m in _warnings(caplog) if "waiting" in m]
    assert waiting == [
        "SparkFlow: waiting for a Spark executor on spark://127.0.0.1:7077: none for 6 s; "
        "the run fails in 14 s (start a worker: spark-class "
        "org.apache.spark.deploy.worker.Worker spark://127.0.0.1:7077)",
        "SparkFlow: waiting for a Spark executor on spark://127.0.0.1:7077: none for 11 s; "
        "the run fails in 9 s (start a worker: spark-class "
        "org.apache.spark.deploy.worker.Worker spark://127.0.0.1:7077)"], waiting


def test_executor_watch_notes_an_executor_that_comes_back(caplog):
    from flowsim.distribution.spark_session import ExecutorWatch
    watch = ExecutorWatch(_FakeContext(), None, "tag")
    watch._since = None
    with caplog.at_level(logging.WARNING, logger="flowsim"), \
            pytest.warns(UserWarning, match=r"waits for one \(executor_timeout=None\)"):
        assert watch._look(0, 10.0) and watch._look(0, 1000.0) and watch._look(1, 1001.0)
    assert not watch.expired
    assert _warnings(caplog)[-1] == ("SparkFlow: a Spark executor is alive on "
                                     "spark://127.0.0.1:7077 after 991 s without one; "
                                     "the job goes on")


def test_executor_timeout_is_checked():
    """Bad values fail in the constructor, before any Spark session exists."""
    for value, error in ((0, ValueError), (-1.5, ValueError), (float("nan"), ValueError),
                         ("300", TypeError), (True, TypeError), ([5], TypeError)):
        with pytest.raises(error, match="executor_timeout"):
            SparkFlow(PLAIN, 1000, seed=1, executor_timeout=value)


# -- fixtures ---------------------------------------------------------------------------
@pytest.fixture(scope="module")
def sessions(spark_sessions):
    """The one SparkContext of the test run (shared with the conformance suite)."""
    return spark_sessions


@pytest.fixture(scope="module")
def local(sessions):
    return sessions.get("local[2]")


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _master_state(ui_port):
    with urllib.request.urlopen(f"http://127.0.0.1:{ui_port}/json/", timeout=5) as r:
        return json.loads(r.read().decode())


class Cluster:
    """A standalone master and one worker (2 cores) on 127.0.0.1, in the background."""

    def __init__(self, tmp):
        self.tmp = str(tmp)
        self.port, self.ui = _free_port(), _free_port()
        self.url = f"spark://127.0.0.1:{self.port}"
        os.makedirs(os.path.join(self.tmp, "conf"), exist_ok=True)
        self.env = dict(os.environ, **SPARK_ENV, SPARK_CONF_DIR=os.path.join(self.tmp, "conf"),
                        SPARK_WORKER_DIR=os.path.join(self.tmp, "work"),
                        SPARK_LOCAL_DIRS=os.path.join(self.tmp, "local"),
                        SPARK_LOG_DIR=os.path.join(self.tmp, "logs"),
                        SPARK_DAEMON_MEMORY="512m", SPARK_DAEMON_JAVA_OPTS=FAST_JVM)
        self.procs, self.worker, self.error = [], None, None
        self._thread = threading.Thread(target=self._start, daemon=True)
        self._thread.start()

    def _spawn(self, name, *args):
        log = open(os.path.join(self.tmp, f"{name}.log"), "a")
        cmd = ["bash", os.path.join(SPARK_HOME, "bin", "spark-class"), *args]
        proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, env=self.env,
                                cwd=self.tmp, start_new_session=True)
        self.procs.append(proc)
        return proc

    def _start(self):
        try:
            self._spawn("master", "org.apache.spark.deploy.master.Master", "--host", "127.0.0.1",
                        "--port", str(self.port), "--webui-port", str(self.ui))
            self._wait(self._bound_ports, "master")
            self._wait(lambda: _master_state(self.ui), "master")
            self._start_worker()
        except Exception as exc:  # reported by wait()
            self.error = exc

    def _bound_ports(self):
        """The ports the master really bound, read from its log: a port probed free earlier
        may be taken by then (Spark then moves to the next one)."""
        log = open(os.path.join(self.tmp, "master.log")).read()
        url = re.search(r"Starting Spark master at (spark://\S+)", log)
        ui = re.search(r"Bound MasterWebUI to \S+, and started at http://\S+:(\d+)", log)
        if url is None or ui is None:
            return None
        self.url, self.ui = url.group(1), int(ui.group(1))
        return True

    def _start_worker(self):
        known = {w["id"] for w in _master_state(self.ui)["workers"]}
        self.worker = self._spawn("worker", "org.apache.spark.deploy.worker.Worker", self.url,
                                  "--host", "127.0.0.1", "--webui-port", str(_free_port()),
                                  "--cores", "2", "--memory", "2g")
        self._wait(lambda: any(w["state"] == "ALIVE" and w["id"] not in known
                               for w in _master_state(self.ui)["workers"]) or None, "worker")

    def kill_worker(self):
        """SIGKILL the worker JVM (its executors then exit): a worker lost for good."""
        self.worker.kill()
        self.worker.wait(30)
        self.procs.remove(self.worker)

    def restart_worker(self):
        """A new worker after kill_worker (for the tests that follow)."""
        if self.worker not in self.procs:
            self._start_worker()

    def _wait(self, probe, what, timeout=TIMEOUT):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if any(p.poll() is not None for p in self.procs):
                raise RuntimeError(f"spark {what} exited: {self.logs()}")
            try:
                if probe():
                    return
            except OSError:
                pass
            time.sleep(0.5)
        raise TimeoutError(f"spark {what} not up after {timeout} s: {self.logs()}")

    def wait(self):
        self._thread.join(TIMEOUT + 30)
        if self.error is not None or self._thread.is_alive():
            pytest.fail(f"standalone cluster did not start: {self.error}")
        return self.url

    def logs(self):
        out = []
        for name in ("master", "worker"):
            path = os.path.join(self.tmp, f"{name}.log")
            if os.path.exists(path):
                out.append(f"--- {name}.log ---\n" + open(path).read()[-2000:])
        return "\n".join(out)

    def stop(self):
        for p in reversed(self.procs):
            try:
                os.killpg(p.pid, signal.SIGTERM)
            except ProcessLookupError:
                pass
        for p in reversed(self.procs):
            try:
                p.wait(timeout=20)
            except subprocess.TimeoutExpired:
                os.killpg(p.pid, signal.SIGKILL)
                p.wait(timeout=10)


@pytest.fixture(scope="module", autouse=True)
def cluster_start(tmp_path_factory):
    """Starts master + worker at module start (they boot while local tests run)."""
    c = Cluster(tmp_path_factory.mktemp("spark-cluster"))
    yield c
    c.stop()


@pytest.fixture(scope="module")
def cluster(cluster_start):
    return cluster_start.wait()


@pytest.fixture(scope="module")
def dist_zip():
    """``make dist``: the zip that --py-files ships to executors."""
    subprocess.run(["make", "-s", "dist", f"VENV={sys.prefix}"], cwd=ROOT, check=True,
                   timeout=TIMEOUT, capture_output=True)
    zips = sorted(f for f in os.listdir(os.path.join(ROOT, "dist")) if f.endswith(".zip"))
    assert zips == [f"flowsim-{flowsim.__version__}.zip"]
    return os.path.join(ROOT, "dist", zips[0])


def spark_submit(master, *args, py_files=None):
    cmd = ["bash", os.path.join(SPARK_HOME, "bin", "spark-submit"), "--master", master,
           "--driver-memory", "1g", "--driver-java-options", FAST_JVM,
           "--conf", f"spark.executor.extraJavaOptions={FAST_JVM}",
           "--conf", "spark.executor.memory=1g", "--conf", "spark.ui.enabled=false",
           "--conf", "spark.ui.showConsoleProgress=false",
           "--conf", "spark.driver.host=127.0.0.1"]
    if py_files:
        cmd += ["--py-files", py_files]
    cmd += [os.path.join(ROOT, "examples", "spark_integrate.py"), *args]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=TIMEOUT, cwd=ROOT,
                          env=dict(os.environ, **SPARK_ENV))
    assert proc.returncode == 0, proc.stderr[-4000:]
    # Quiet: Spark's JVM at WARN once the driver starts (spark-submit
    # logged ~150 INFO lines), no pandas FutureWarning from pyspark's imports.
    info = [line for line in proc.stderr.splitlines() if " INFO " in line]
    assert len(info) <= 5, "\n".join(info[:20])
    assert "FutureWarning" not in proc.stdout + proc.stderr, proc.stderr[-2000:]
    return proc.stdout


EXAMPLE_ARGS = ["--dim", str(CASE["dim"]), "--events", str(CASE["n_events"]), "--iters", "2",
                "--seed", str(CASE["seed"]), "--block-size", str(CASE["block_size"]),
                "--partitions", "3"]


def example_bits(result):
    return "bits: " + " ".join(float(r[k]).hex() for r in result.iterations
                               for k in ("value", "error"))


# -- local[2] ----------------------------------------------------------------------------
def test_plain_same_bits_as_flow(local, plain_ref):
    for partitions in (None, 5):
        flow = spark_flow(PLAIN, local, partitions=partitions)
        res = flow.run(2)
        assert_same_bits(res, plain_ref)
        assert not flow.executor.owned
        assert res.meta["partitions"] == (partitions or 2)    # default: the 2 cores
    assert res.meta["backend"] == "spark" and res.meta["spark_master"] == "local[2]"
    # 5 tasks of 5 blocks, each run in TF calls of <= events_limit events (4 blocks).
    last = [r for r in flow.timeline if r["iteration"] == 2]
    assert sorted(r["first_block"] for r in last) == [0, 4, 5, 9, 10, 14, 15, 19, 20, 24]


def _jobs(sc):
    return len(sc.statusTracker().getJobIdsForGroup())


def test_large_tasks_are_broadcast(local, plain_ref, monkeypatch):
    """Tasks above INLINE_TASK_BYTES travel as a broadcast (VEGAS+ states can be large)."""
    from flowsim.distribution import spark as S
    made = []
    real = type(local.sparkContext).broadcast
    monkeypatch.setattr(S, "INLINE_TASK_BYTES", 0)
    monkeypatch.setattr(type(local.sparkContext), "broadcast",
                        lambda sc, value: made.append(len(value)) or real(sc, value))
    res = spark_flow(PLAIN, local, partitions=2, run_ahead=False).run(2)
    assert len(made) == 2 and all(size > 0 for size in made)
    assert_same_bits(res, plain_ref)


def test_steady_iterations_share_a_spark_job(local):
    """Plain's state never changes: after iteration 1, one job runs the rest of the
    run (run_ahead); with run_ahead=False one job per iteration; same bits."""
    sc = local.sparkContext
    ref = reference(PLAIN, 4)
    for run_ahead, jobs in ((True, 2), (False, 4)):
        flow = spark_flow(PLAIN, local, partitions=3, run_ahead=run_ahead)
        before = _jobs(sc)
        res = flow.run(4)
        assert _jobs(sc) - before == jobs, run_ahead
        assert_same_bits(res, ref)
        assert sorted({r["iteration"] for r in res.timeline}) == [1, 2, 3, 4]
    # a second run() continues the stream; it knows the state is steady already
    before = _jobs(sc)
    res = flow.run(2)
    assert _jobs(sc) - before == 2                      # run_ahead=False: job per iteration
    more = spark_flow(PLAIN, local, partitions=3)
    more.run(1)
    before = _jobs(sc)
    res = more.run(3)
    assert _jobs(sc) - before == 1                      # steady since the first run()
    assert [(bits(r["value"]), bits(r["error"])) for r in res.iterations] == \
        [(bits(r["value"]), bits(r["error"])) for r in ref.iterations[1:]]


def test_integrate_backend_spark_uses_the_active_session(local):
    kw = dict(f=double_gaussian, dim=CASE["dim"], n_events=50_000, n_iter=2, seed=5,
              block_size=2048)
    res = flowsim.integrate(backend="spark", quiet=True, **kw)
    assert_same_bits(res, flowsim.integrate(**kw))
    assert local.sparkContext._jsc is not None            # a given session is not stopped
    flow = SparkFlow(PLAIN, 1000, seed=1, spark="local[2]")   # the running context, as is
    assert flow.executor.sc is local.sparkContext and not flow.executor.owned
    with pytest.raises(ValueError, match=r"already runs a SparkContext with master 'local\[2\]'"):
        SparkFlow(PLAIN, 1000, seed=1, spark="local[3]")


def test_cli_backend_spark(local, capsys):
    from flowsim.cli import main
    args = ["run", "gaussian8", "--events", "20000", "--iters", "2", "--seed", "3", "--json"]
    assert main(args + ["--backend", "spark"]) == 0
    spark = json.loads(capsys.readouterr().out)
    assert main(args) == 0
    flow = json.loads(capsys.readouterr().out)
    assert spark["meta"]["backend"] == "spark" and spark["meta"]["spark_master"] == "local[2]"
    pick = lambda d: [(r["value"], r["error"]) for r in d["iterations"]]  # noqa: E731
    assert pick(spark) == pick(flow)                  # JSON floats round-trip exactly
    assert (spark["value"], spark["error"]) == (flow["value"], flow["error"])


def _worker_facts(sc):
    """Per Python worker: pid, TF intra-op threads, flowsim log level, kernel traces,
    objects frozen out of the garbage collector and the seconds of a full collection."""
    def facts(_):
        import gc
        import logging
        import time

        from flowsim.core.kernel import trace_counts
        from flowsim.distribution import spark_worker as S
        threads = None
        if S.WORKER["ready"]:
            from flowsim.core.lazy_tf import tf
            threads = tf().config.threading.get_intra_op_parallelism_threads()
        start = time.perf_counter()
        gc.collect()
        yield os.getpid(), (threads, logging.getLogger("flowsim").level,
                            sum(trace_counts.values()), gc.get_freeze_count(),
                            time.perf_counter() - start)
    return dict(sc.parallelize(range(4), 4).mapPartitions(facts).collect())


def test_executors_reuse_workers_threads_and_kernels(local):
    flow = spark_flow(PLAIN, local, partitions=2)
    flow.run(1)
    before = _worker_facts(local.sparkContext)
    flow.run(3)
    after = _worker_facts(local.sparkContext)
    pids = {int(r["device"].split(":")[1].split("/")[0]) for r in flow.timeline}
    assert len(pids) <= 2                     # local[2]: one Python worker per core, reused
    checked = pids & set(before) & set(after)
    assert checked, (pids, before, after)
    for pid in checked:
        threads, level, traces, frozen, collect = after[pid]
        assert threads == 1                   # spark.task.cpus of local[2]
        assert level == 30                    # logging.WARNING: flowsim quiet on executors
        assert traces == before[pid][2]       # 3 more iterations, no retrace
        # TensorFlow and the kernel are frozen out of the collection PySpark runs
        # after every task (0.24 s per task on 2 cores when they are not; the time
        # itself is not asserted: a loaded machine stretches it)
        assert frozen > 100_000, frozen


def test_task_error_surfaces_with_original_text(local):
    flow = spark_flow(Broken(double_gaussian, CASE["dim"]), local)
    with pytest.raises(ValueError, match=r"deliberately broken integrand kernel\s+"
                                         r"\[Spark task: partition \d, attempt 0") as info:
        flow.run(1)
    assert info.value.__cause__ is None and "flowsim-task-error" not in str(info.value)


def test_partial_results_are_refused(local, monkeypatch):
    flow = spark_flow(PLAIN, local, partitions=3)
    chunks = flow.executor.partition(flow.grid)
    monkeypatch.setattr(flow.executor, "partition", lambda grid: chunks[:-1])
    with pytest.raises(RuntimeError, match=r"missing blocks \[%d, " % chunks[-1][0]):
        flow.run(1)
    monkeypatch.setattr(flow.executor, "partition", lambda grid: chunks + chunks[:1])
    with pytest.raises(RuntimeError, match=r"blocks received twice \[0, 1, "):
        flow.run(1)


# -- standalone cluster ----------------------------------------------------------------------
#: One object for both fault tests: the cluster's Python workers compile it once.
FAULTY = FailsOnce(None, None, double_gaussian, CASE["dim"])


@pytest.fixture(scope="module")
def on_cluster(sessions, cluster):
    """A driver in this process on the standalone cluster; tasks are tried twice."""
    return sessions.get(cluster, **{"spark.task.maxFailures": "2"})


def test_injected_task_failure_is_retried_with_same_bits(on_cluster, tmp_path, plain_ref):
    FAULTY.mode, FAULTY.marker = "raise", str(tmp_path / "fail")
    flow = spark_flow(FAULTY, on_cluster, partitions=3)
    res = flow.run(2)
    assert os.path.exists(FAULTY.marker + ".done")            # the failure happened
    assert_same_bits(res, plain_ref)
    assert res.meta["spark_master"] == on_cluster.sparkContext.master


def test_worker_killed_mid_job_gives_same_bits(on_cluster, tmp_path, plain_ref):
    FAULTY.mode, FAULTY.marker = "hang", str(tmp_path / "kill")
    killed = []

    def killer():
        deadline = time.monotonic() + TIMEOUT
        while time.monotonic() < deadline and not os.path.exists(FAULTY.marker + ".pid"):
            time.sleep(0.1)
        if os.path.exists(FAULTY.marker + ".pid"):
            pid = int(open(FAULTY.marker + ".pid").read())
            os.kill(pid, signal.SIGKILL)       # a Python worker, mid-job
            killed.append(pid)

    thread = threading.Thread(target=killer, daemon=True)
    thread.start()
    flow = spark_flow(FAULTY, on_cluster, partitions=4)
    res = flow.run(2)
    thread.join(5)
    assert killed, "the Python worker was never killed"
    assert not any(f":{killed[0]}/" in r["device"] for r in flow.timeline)
    assert_same_bits(res, plain_ref)


def _kill_worker_mid_job(cluster, marker, restart):
    """Kill the worker JVM once a task hangs (FAULTY, mode "hang"); then start a new
    worker if ``restart``.  Returns the thread and the list of kill times."""
    killed = []

    def killer():
        deadline = time.monotonic() + TIMEOUT
        while time.monotonic() < deadline and not os.path.exists(marker + ".pid"):
            time.sleep(0.1)
        if os.path.exists(marker + ".pid"):
            killed.append(time.monotonic())
            cluster.kill_worker()
            try:                          # the hanging Python worker, if it outlived it
                os.kill(int(open(marker + ".pid").read()), signal.SIGKILL)
            except OSError:
                pass
            if restart:
                cluster.restart_worker()

    thread = threading.Thread(target=killer, daemon=True)
    thread.start()
    return thread, killed


def _warnings(caplog):
    return [r.getMessage() for r in caplog.records
            if r.name == "flowsim" and r.levelno == logging.WARNING]


def test_worker_replaced_in_time_gives_same_bits(on_cluster, cluster_start, tmp_path,
                                                 plain_ref, caplog):
    """The worker JVM dies mid-job and a new one starts within executor_timeout: the
    run warns, then goes on on the new worker's executor with the same bits."""
    FAULTY.mode, FAULTY.marker = "hang", str(tmp_path / "replaced")
    flow = spark_flow(FAULTY, on_cluster, partitions=4, executor_timeout=TIMEOUT)
    thread, killed = _kill_worker_mid_job(cluster_start, FAULTY.marker, restart=True)
    try:
        with caplog.at_level(logging.WARNING, logger="flowsim"):
            res = flow.run(2)
    finally:
        thread.join(TIMEOUT)
        cluster_start.restart_worker()
    assert killed, "the worker was never killed"
    assert_same_bits(res, plain_ref)
    warned = _warnings(caplog)
    assert any("no Spark executor is alive" in m for m in warned), warned
    assert any("a Spark executor is alive" in m and "the job goes on" in m for m in warned)


def test_worker_lost_for_good_fails_after_executor_timeout(on_cluster, cluster_start, tmp_path,
                                                          caplog):
    """The worker JVM dies mid-job and none comes back.  Spark alone waits
    forever ('Lost executor 0'); SparkFlow warns at once and fails after executor_timeout."""
    FAULTY.mode, FAULTY.marker = "hang", str(tmp_path / "lost")
    flow = spark_flow(FAULTY, on_cluster, partitions=4, executor_timeout=5)
    thread, killed = _kill_worker_mid_job(cluster_start, FAULTY.marker, restart=False)
    checkpoint = tmp_path / "lost.npz"
    try:
        with caplog.at_level(logging.WARNING, logger="flowsim"), \
                pytest.warns(UserWarning, match="no Spark executor is alive") as python_warned, \
                pytest.raises(NoExecutorError) as info:
            flow.run(2, checkpoint=checkpoint)
        failed = time.monotonic()
    finally:
        thread.join(30)
        cluster_start.restart_worker()        # the tests below need a worker
    assert killed, "the worker was never killed"
    assert 5 <= failed - killed[0] < 30, failed - killed[0]     # 5.6 s measured
    message = str(info.value)
    for part in ("no live Spark executor for 5 s", on_cluster.sparkContext.master,
                 "Start a Spark worker", "raise executor_timeout"):
        assert part in message, message
    notes = getattr(info.value, "__notes__", [])
    assert notes == [f"flowsim: checkpoint {str(checkpoint)!r} holds no iteration yet: "
                     f"call run() again with this checkpoint to resume"], notes
    warned = _warnings(caplog)
    assert any("no Spark executor is alive" in m and "fails after 5 s unless one comes back"
               in m for m in warned), warned
    waiting = [m for m in warned if m.startswith("SparkFlow: waiting for a Spark executor")]
    assert len(waiting) >= 2, warned            # every 1.25 s (a quarter of 5 s)
    assert "Worker " + on_cluster.sparkContext.master in waiting[0], waiting
    # also a Python warning: seen without a logging handler
    assert any("fails after 5 s unless one comes back" in str(w.message)
               for w in python_warned), [str(w.message) for w in python_warned]


def test_spark_submit_example_standalone_with_py_files(sessions, cluster, dist_zip, plain_ref):
    """``spark-submit`` of the example (the one spark-submit of the suite: the driver's
    session is spark-submit's whatever the master, so a local[2] run of it checked
    nothing more): the master it names, Flow's bits, a quiet log, the shipped zip."""
    sessions.stop()                          # frees the worker's cores for this application
    out = spark_submit(cluster, *EXAMPLE_ARGS, py_files=dist_zip)
    assert f"spark master: {cluster}" in out
    where = next(line for line in out.splitlines() if line.startswith("executors import"))
    assert os.path.basename(dist_zip) in where, where      # executors used the shipped zip
    assert example_bits(plain_ref) in out
