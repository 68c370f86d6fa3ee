"""SparkFlow: the chunks of an iteration as Spark tasks.

Each iteration is one Spark job (one job does several iterations when the
simulation's state stays put: ``run_ahead``).  The blocks of the iteration are
cut into ``partitions`` contiguous runs; partition ``p`` is one task that runs
its blocks through :func:`flowsim.kernel.run_chunk` (in calls of at most
``events_limit`` events) and returns ``(iteration, first_block, rows)``.  The driver puts the rows in
block order with :class:`flowsim.blocks.RowCollector`, which refuses a missing
or repeated block, and adds them exactly as :class:`flowsim.Flow` does: same seed,
same float64 bits.  Spark places, retries and reports the tasks; a retried task
recomputes exactly the same blocks (the random numbers of a block depend only on
seed, iteration and block index), so retries never change the answer.  Spark
itself waits forever for an executor when the application has none left (a
standalone worker that died): while a job runs on a cluster, a watcher thread
warns on the ``flowsim`` logger and cancels the job (by its job tag) after
``executor_timeout`` seconds without a live executor.

The :class:`~flowsim.kernel.IterationTask` (the simulation and its adaptive
state) is serialised with cloudpickle, as Spark pickles functions; up to
``INLINE_TASK_BYTES`` it travels in the job's closure, above that it is
broadcast once per iteration.  On executors, each Python worker imports
TensorFlow once (Spark reuses workers), sets TensorFlow's thread pools to the
task's cores (``spark.task.cpus``) before TensorFlow initialises, keeps the
compiled kernel across iterations, and runs on the GPU that Spark assigned to
the task (``TaskContext.resources()["gpu"]``), else on CPU:0.

PySpark's worker daemon runs a full ``gc.collect()`` after every task of a
reused worker.  With TensorFlow and a compiled kernel loaded it walks every
object of TensorFlow's modules and graphs, and it was most of SparkFlow's
fixed cost per iteration (figures in ``docs/performance.rst``, "Spark fixed
costs").  So after a task that imported TensorFlow or compiled a kernel, the
worker collects once and then ``gc.freeze()``-s what is there (long-lived:
modules, graphs, kernels); later collections only look at objects made since.
Cyclic garbage of those objects is not collected (e.g. a kernel dropped from
the worker's cache of ``_KEEP_SIMS`` simulations): a bounded leak per distinct
simulation.
"""
import atexit
import base64
import collections
import functools
import gc
import json
import logging
import math
import numbers
import os
import re
import sys
import threading
import time
import uuid
import weakref

from .._tf import device_name
from ..blocks import RowCollector, check_count, cut
from ..flow import Flow
from ..kernel import layout, run_chunk, trace_counts
from ..log import logger
from ..schedule import static_shares

__all__ = ["SparkFlow", "SparkTaskError", "NoExecutorError"]

#: Most iterations one Spark job computes (``run_ahead``).
MAX_AHEAD = 8

#: Seconds between two looks at the live executors while a job runs on a cluster.
EXECUTOR_POLL = 0.5

#: Iteration tasks (simulation + state, pickled) up to this size travel inside
#: the Spark job's closure; larger ones are broadcast (once per executor).
INLINE_TASK_BYTES = 1 << 16

_ERROR_TAG = "flowsim-task-error"
_ERROR_RE = re.compile(re.escape(_ERROR_TAG) + r"\[([A-Za-z0-9+/=]+)\]")


class SparkTaskError(RuntimeError):
    """A Spark job of a :class:`SparkFlow` failed (task error, lost worker, ...)."""


class NoExecutorError(SparkTaskError):
    """A job was cancelled: no live Spark executor for ``executor_timeout`` seconds."""


class _TaskFailed(SparkTaskError):
    """A task raised an exception that is not a builtin one (its text is kept)."""


class SparkFlow(Flow):
    """Run a :class:`~flowsim.simulation.Simulation` as Spark tasks.

    Takes every keyword of :class:`flowsim.Flow` (same meaning, same bits for
    the same seed), plus:

    Parameters
    ----------
    spark : None, str, SparkSession or SparkContext
        Where to run.  Default None: the active Spark session if there is one
        (e.g. the one ``spark-submit`` configured, or one you built), else a
        new session from Spark's configuration -- the master given to
        ``spark-submit``, or ``local[*]`` when there is none.  A session this
        SparkFlow starts is stopped by :meth:`close` (or ``with``, or at
        interpreter exit).  A string is a master URL (``"local[2]"``,
        ``"spark://host:7077"``); SparkFlow starts that session and stops it
        likewise.  A ``SparkSession`` or ``SparkContext`` you pass is used as
        is and never stopped.  Caveat: one process has one SparkContext; a
        master URL different from the running context's is an error.
    partitions : int or None
        Spark tasks per iteration (contiguous runs of blocks).  Default: the
        context's ``defaultParallelism`` (its total cores), never more than
        the number of blocks.  More partitions balance uneven executors and
        make a retry cheaper, at a fixed cost per task.  Does not change the
        result.
    events_limit : int or None
        Most events one task hands to TensorFlow in one call (default 10**6);
        a task runs its blocks in several calls if needed.  Does not change
        the result.
    device : str or None
        Default None: the GPU Spark assigned to the task (``gpu`` resource in
        ``TaskContext.resources()``), else ``CPU:0``.  A device name such as
        ``"CPU:0"`` forces that device on every executor.  It is not checked
        on the driver (executors may differ from it).
    quiet : bool
        For sessions SparkFlow starts: ``True`` turns Spark's console progress
        bar off (``spark.ui.showConsoleProgress``).  flowsim's own progress
        bar is never shown with Spark; Spark's reports the tasks.
    run_ahead : bool
        Default True: when the simulation's state did not change over the
        last iteration (plain Monte Carlo, sweeps, path simulations; never
        while a VEGAS grid adapts), one Spark job computes the next
        iterations of this ``run`` too, up to ``MAX_AHEAD`` at a time, so
        that Spark's fixed cost per job (scheduling, shipping the task,
        collecting; the same whatever the job computes) is paid once for all
        of them: it matters most when iterations are short.  Each task runs
        its blocks for every iteration of the job.  The driver still adds up,
        logs, adapts and checkpoints iteration by iteration; if ``adapt`` did
        change the state after all, the rows computed ahead are dropped and
        recomputed.  Same bits either way; a failed job costs its iterations.
    executor_timeout : float or None
        Seconds a job may go on with no live executor; default 300.  Spark
        itself waits forever once an application has lost all its executors
        (a standalone worker died: only ``Lost executor`` in its log).  On a
        cluster master SparkFlow looks every ``EXECUTOR_POLL`` s while a job
        runs: with no executor alive it warns on the ``flowsim`` logger at
        once; after ``executor_timeout`` s it cancels its job and raises
        :class:`NoExecutorError` (a :class:`SparkTaskError`).  An executor
        that comes back in time (a restarted worker) lets the run go on, same
        bits.  ``None`` waits forever (still warning); ``local[...]`` masters
        are never watched (the driver is the executor).  Caveat: a fresh
        application's first job may start before its executors register, so
        the warning can show at start-up; raise the timeout where executors
        come slowly (dynamic allocation, a busy cluster).

    Executors need flowsim, TensorFlow and the integrand's module: ship
    flowsim with ``spark-submit --py-files dist/flowsim-X.zip`` (``make
    dist``) or install it on the workers.  Integrands defined in ``__main__``
    travel by value (cloudpickle); integrands in other modules by reference.
    The Python of the executors is ``PYSPARK_PYTHON``; for a local master
    SparkFlow sets it to the driver's Python when it is unset.
    """

    backend = "spark"

    def __init__(self, simulation, n_events, seed=None, spark=None, partitions=None,
                 quiet=False, run_ahead=True, executor_timeout=300, **flow_kwargs):
        if partitions is not None:
            partitions = check_count("partitions", partitions)
        self.executor_timeout = _check_timeout(executor_timeout)
        super().__init__(simulation, n_events, seed=seed, quiet=True, **flow_kwargs)
        self.partitions = partitions
        self.run_ahead = bool(run_ahead)
        self._ahead = {}
        self._show_progress = not quiet
        self._token = _token(simulation)
        self._owned = False
        self.spark = None
        self.spark, self._owned = _session(spark, self._show_progress)
        if self._owned:
            atexit.register(self.close)

    # -- session ----------------------------------------------------------------
    @property
    def sc(self):
        """The SparkContext this flow submits to."""
        return self.spark.sparkContext

    def close(self):
        """Stop the Spark session if this SparkFlow started it (idempotent)."""
        if self._owned and self.spark is not None:
            self._owned = False
            try:
                self.spark.stop()
            finally:
                atexit.unregister(self.close)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    # -- hooks of Flow --------------------------------------------------------------
    def _resolve_device(self, device):
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

    def devices(self):
        seen = sorted({r["device"] for r in self.timeline})
        if seen:
            return seen
        master = self.sc.master if self.spark is not None else "?"
        return [f"spark {master}: {self.device or 'assigned GPU else CPU:0'}"]

    def _chunks(self, grid):
        """Contiguous near-equal runs of blocks, one per Spark task."""
        n = self.partitions or max(1, int(self.sc.defaultParallelism))
        return static_shares(grid.n_blocks, [1.0] * min(n, grid.n_blocks))

    def _execute(self, task, grid):
        steady = self._steady(task)
        ahead = self._ahead.pop(task.iteration, None)
        if ahead is not None and ahead[0].same_run(task):     # computed by an earlier job
            rows, chunks = ahead[1:]
        else:
            self._ahead = {}
            count = 1
            if self.run_ahead and steady:
                count = max(1, min(self._last_iteration - task.iteration + 1, MAX_AHEAD))
            done = self._submit(task, grid, count)
            for later in range(task.iteration + 1, task.iteration + count):
                self._ahead[later] = (task.at(later), *done[later])
            rows, chunks = done[task.iteration]
        for label, first, n, start, end in chunks:
            self._record(task, label, first, n, start, end)
        return rows

    def _submit(self, task, grid, count):
        """One Spark job for iterations ``task.iteration ..+count-1`` (same state).

        Returns ``{iteration: (rows, [(device, first, n, start, end)])}``.
        """
        from pyspark import cloudpickle
        if self.spark is None or self.sc._jsc is None:
            raise RuntimeError("SparkFlow: the Spark session is stopped")
        _, width = layout(task.simulation)
        chunks = self._chunks(grid)
        per_call = grid.blocks_per_call(self.events_limit)
        iterations = list(range(task.iteration, task.iteration + count))
        sc = self.sc
        payload = cloudpickle.dumps(task)
        if len(payload) > INLINE_TASK_BYTES:       # large state: ship once per executor
            payload = sc.broadcast(payload)
        name = type(task.simulation).__name__
        which = (f"iteration {iterations[0] + 1}" if count == 1
                 else f"iterations {iterations[0] + 1}-{iterations[-1] + 1}")
        sc.setJobDescription(f"flowsim {name} {which}: {grid.n_blocks} blocks in "
                             f"{len(chunks)} tasks")
        job = uuid.uuid4().hex
        fn = functools.partial(_run_partition, payload, self._token, job,
                               per_call, self.device, iterations)
        offset = time.perf_counter() - time.time()
        tag = f"flowsim-{job}"
        sc.addJobTag(tag)
        watch = _ExecutorWatch(sc, self.executor_timeout, tag)
        try:
            with watch:
                out = sc.parallelize(chunks, len(chunks)).mapPartitionsWithIndex(fn).collect()
        except Exception as exc:
            if watch.expired:
                raise NoExecutorError(
                    f"the Spark job of iteration {task.iteration + 1} was cancelled: no live "
                    f"Spark executor for {self.executor_timeout:g} s on {sc.master}; no "
                    f"partial result is used.  Start a Spark worker (or give the application "
                    f"executors), or raise executor_timeout (None waits forever)") from None
            error = _driver_error(exc, task.iteration)
            if type(error) is SparkTaskError:
                raise error from exc      # Spark's own failure: keep its report
            raise error from None         # the task's exception, with its own text
        finally:
            sc.removeJobTag(tag)
            sc.setJobDescription(None)
            try:
                if not isinstance(payload, bytes):
                    payload.destroy()
            except Exception:  # the context may be gone after a fatal error
                pass
        rows = {i: RowCollector(grid.n_blocks, width) for i in iterations}
        timeline = {i: [] for i in iterations}
        for iteration, first, block_rows, start, end, label in out:
            rows[iteration].add(first, block_rows)
            timeline[iteration].append((label, first, len(block_rows), start + offset,
                                        end + offset))
        # every iteration complete before any is used
        return {i: (rows[i].result(), timeline[i]) for i in iterations}

    def _meta(self):
        meta = super()._meta()
        if self.spark is not None:
            meta["spark_master"] = self.sc.master
            meta["partitions"] = len(self._chunks(self.grid))
        return meta


#: Driver side: simulation object -> token naming it on executors, where each
#: Python worker keeps the simulation (and its compiled kernels) under the
#: token across iterations and across SparkFlows of the same object.
_TOKENS = weakref.WeakKeyDictionary()


def _token(simulation):
    try:
        return _TOKENS.setdefault(simulation, uuid.uuid4().hex)
    except TypeError:  # not weak-referenceable or not hashable
        return uuid.uuid4().hex


def _session(spark, show_progress):
    """``(SparkSession, owned)`` for the ``spark=`` argument of SparkFlow."""
    from pyspark import SparkConf, SparkContext
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
    if os.environ.get("PYSPARK_GATEWAY_PORT"):
        # Under spark-submit: the JVM exists and holds --master, --conf, ...
        SparkContext._ensure_initialized()
    conf = SparkConf()
    master = spark or conf.get("spark.master", "local[*]")
    if master.startswith("local") and not os.environ.get("PYSPARK_PYTHON"):
        os.environ["PYSPARK_PYTHON"] = sys.executable
    builder = SparkSession.builder.master(master)
    if not conf.contains("spark.app.name"):
        builder = builder.appName("flowsim")
    if not conf.contains("spark.ui.showConsoleProgress"):
        builder = builder.config("spark.ui.showConsoleProgress",
                                 "true" if show_progress else "false")
    return builder.getOrCreate(), True


# -- driver side: executors and errors ---------------------------------------------
def _check_timeout(value):
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise TypeError(f"executor_timeout must be a number of seconds or None, got {value!r}")
    if not value > 0:
        raise ValueError(f"executor_timeout must be > 0 seconds (or None: wait forever), "
                         f"got {value!r}")
    return float(value)


class _ExecutorWatch:
    """While a job runs on a cluster: warn when no executor is alive, and after
    ``timeout`` seconds without one cancel the jobs tagged ``tag`` (``expired``)."""

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
        since, limit = None, math.inf if self.timeout is None else self.timeout
        master = self.sc.master
        when = ("waits for one (executor_timeout=None)" if self.timeout is None else
                f"fails after {self.timeout:g} s unless one comes back (executor_timeout)")
        while not self._done.wait(EXECUTOR_POLL):
            try:
                alive = self.sc._jsc.sc().getExecutorMemoryStatus().size() - 1  # - driver
                now = time.monotonic()
                if alive > 0:
                    if since is not None:
                        logger.warning("SparkFlow: a Spark executor is alive on %s after %.0f s "
                                       "without one; the job goes on", master, now - since)
                    since = None
                elif since is None:
                    since = now
                    logger.warning("SparkFlow: no Spark executor is alive on %s; the run %s",
                                   master, when)
                elif now - since >= limit:
                    self.expired = True
                    self.sc.cancelJobsWithTag(self.tag)
                    return
            except Exception:     # the context is stopping: nothing left to watch
                return


def _driver_error(exc, iteration):
    """The exception to raise for a failed Spark job: the task's own when we can."""
    text = str(exc)
    found = _ERROR_RE.findall(text)
    if found:
        info = json.loads(base64.b64decode(found[-1]).decode())
        where = (f"[Spark task: partition {info['partition']}, attempt {info['attempt']}, "
                 f"blocks {info['blocks']}, iteration {iteration + 1}, host {info['host']}]")
        message = info["message"].rstrip()
        sep = "\n" if "\n" in message else " "
        cls = _builtin_exception(info["module"], info["type"])
        if cls is not None:
            try:
                return cls(f"{message}{sep}{where}")
            except Exception:
                pass
        return _TaskFailed(f"{info['module']}.{info['type']}: {message}{sep}{where}")
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    reason = next((line for line in lines if "Job aborted" in line or "SparkException" in line),
                  lines[0] if lines else type(exc).__name__)
    crashed = next((line for line in lines if "exited unexpectedly" in line
                    or "ExecutorLostFailure" in line), "")
    detail = f" ({crashed[:300]})" if crashed and crashed not in reason else ""
    return SparkTaskError(f"the Spark job of iteration {iteration + 1} failed; no partial "
                          f"result is used: {reason[:600]}{detail}")


def _builtin_exception(module, name):
    if module != "builtins":
        return None
    import builtins
    cls = getattr(builtins, name, None)
    if isinstance(cls, type) and issubclass(cls, Exception):
        return cls
    return None


# -- executor side ------------------------------------------------------------------
#: Per Python worker: whether TF is set up, the latest task by job key, and
#: the last few simulations (with their compiled kernels) by token.
_WORKER = {"ready": False, "frozen": False, "tasks": {}, "sims": collections.OrderedDict()}
_KEEP_SIMS = 8
_WORKER_LOCK = threading.Lock()


def _setup_worker(ctx, requested):
    """Once per Python worker: quiet logs, TF threads = the task's cores, GPUs."""
    if _WORKER["ready"]:
        return
    logging.getLogger("flowsim").setLevel(logging.WARNING)
    cpus = max(1, int(ctx.cpus()))
    from .._tf import tf
    t = tf()
    try:
        t.config.threading.set_intra_op_parallelism_threads(cpus)
        t.config.threading.set_inter_op_parallelism_threads(cpus)
    except RuntimeError:  # TensorFlow already initialised in this process
        pass
    gpus = t.config.list_physical_devices("GPU")
    if gpus and requested is None:
        try:
            if "gpu" in ctx.resources():
                for g in gpus:  # workers of one executor may share a GPU
                    t.config.experimental.set_memory_growth(g, True)
            else:  # Spark gave this task no GPU: leave the GPUs to other tasks
                t.config.set_visible_devices([], "GPU")
        except RuntimeError:
            pass
    _WORKER["ready"] = True


def _freeze():
    """Collect once, then keep what is left out of later collections (see module doc)."""
    gc.collect()
    gc.freeze()
    _WORKER["frozen"] = True


def task_device(requested, resources, logical):
    """Device for a task: ``requested``, else the GPU Spark assigned, else CPU:0.

    ``resources`` is ``TaskContext.resources()`` (name -> object with
    ``addresses``); ``logical`` the TF device names of this worker.  Spark's
    GPU address is the physical index: used as ``GPU:<address>`` when TF sees
    it, or the only GPU TF sees (a cluster manager that isolates GPUs).
    """
    if requested:
        return requested
    gpu = resources.get("gpu") if resources else None
    addresses = list(getattr(gpu, "addresses", None) or [])
    gpus = [d for d in logical if d.startswith("GPU:")]
    if addresses and gpus:
        name = f"GPU:{addresses[0]}"
        if name in gpus:
            return name
        if len(gpus) == 1:
            return gpus[0]
        raise RuntimeError(f"Spark assigned GPU {addresses[0]!r} but this worker sees "
                           f"{', '.join(gpus)}")
    return "CPU:0"


def _worker_task(payload, token, job):
    import pickle
    with _WORKER_LOCK:
        task = _WORKER["tasks"].get(job)
        if task is None:
            task = pickle.loads(payload if isinstance(payload, bytes) else payload.value)
            sims = _WORKER["sims"]
            cached = sims.get(token)
            if cached is not None and type(cached) is type(task.simulation):
                task.simulation = cached  # keeps its compiled kernel: no retrace
                sims.move_to_end(token)
            else:
                sims[token] = task.simulation
                while len(sims) > _KEEP_SIMS:
                    sims.popitem(last=False)
            _WORKER["tasks"] = {job: task}
    return task


def _run_partition(payload, token, job, per_call, requested, iterations, index, chunks):
    from pyspark import TaskContext
    ctx = TaskContext.get()
    chunks = list(chunks)
    blocks = (f"{chunks[0][0]}..{chunks[-1][0] + chunks[-1][1] - 1}" if chunks else "none")
    try:
        _setup_worker(ctx, requested)
        task = _worker_task(payload, token, job)
        from .._tf import logical_devices
        device = task_device(requested, ctx.resources(), logical_devices())
        label = f"{os.uname().nodename}:{os.getpid()}/{device}"
        out = []
        traces = sum(trace_counts.values())
        for iteration in iterations:
            run = task if iteration == task.iteration else task.at(iteration)
            for b, k in (part for first, n in chunks for part in cut(first, n, per_call)):
                start = time.time()
                rows = run_chunk(run, b, k, device)
                out.append((iteration, b, rows, start, time.time(), label))
        if not _WORKER["frozen"] or sum(trace_counts.values()) != traces:
            _freeze()
        return out
    except Exception as exc:
        info = {"module": type(exc).__module__, "type": type(exc).__qualname__,
                "message": str(exc), "partition": index, "attempt": ctx.attemptNumber(),
                "blocks": blocks, "host": os.uname().nodename}
        tag = base64.b64encode(json.dumps(info).encode()).decode()
        raise RuntimeError(f"{type(exc).__name__}: {exc}\n{_ERROR_TAG}[{tag}]") from exc
