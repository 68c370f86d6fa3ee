"""SparkFlow: the chunks of an iteration as Spark tasks.

Each iteration is one Spark job (one job does several iterations when the
simulation's state stays put: ``run_ahead``).  The blocks of the iteration are
cut into ``partitions`` contiguous runs; partition ``p`` is one task that runs
its blocks through :func:`flowsim.core.kernel.run_chunk` (in calls of at most
``events_limit`` events) and returns ``(iteration, first_block, rows)``.  The
driver puts the rows in block order with :class:`flowsim.core.blocks.RowCollector`,
which refuses a missing or repeated block, and adds them exactly as
:class:`flowsim.Flow` does: same seed, same float64 bits.  Spark places,
retries and reports the tasks; a retried task recomputes exactly the same
blocks (the random numbers of a block depend only on seed, iteration and
block index), so retries never change the answer.  Spark
itself waits forever for an executor when the application has none left (a
standalone worker that died): while a job runs on a cluster, a watcher thread
warns on the ``flowsim`` logger and cancels the job (by its job tag) after
``executor_timeout`` seconds without a live executor.

The :class:`~flowsim.core.kernel.IterationTask` (the simulation and its adaptive
state) is serialised with cloudpickle, as Spark pickles functions; up to
``INLINE_TASK_BYTES`` it travels in the job's closure, above that it is
broadcast once per iteration.  On executors, each Python worker imports
TensorFlow once (Spark reuses workers), sets TensorFlow's thread pools to the
task's cores (``spark.task.cpus``) before TensorFlow initialises, keeps the
compiled kernel across iterations, and runs on the GPU that Spark assigned to
the task (``TaskContext.resources()["gpu"]``), else on CPU:0.

What runs on the executors is in :mod:`flowsim.distribution.spark_worker`.
"""
import atexit
import functools
import time
import uuid

from ..core.backend import Executor, RunAhead
from ..core.blocks import check_count
from ..core.flow import backend_flow
from ..core.kernel import layout
from ..schedule import static_shares
from . import spark_session as session
from .spark_session import EXECUTOR_POLL, NoExecutorError, SparkTaskError  # noqa: F401
from .spark_worker import ERROR_TAG, run_partition, task_device  # noqa: F401

__all__ = ["NoExecutorError", "SparkFlow", "SparkTaskError"]

#: Most iterations one Spark job computes (``run_ahead``).
MAX_AHEAD = 8

#: Iteration tasks (simulation + state, pickled) up to this size travel inside
#: the Spark job's closure; larger ones are broadcast (once per executor).
INLINE_TASK_BYTES = 1 << 16

def SparkFlow(simulation, n_events, seed=None, spark=None, partitions=None, quiet=False,
              run_ahead=True, executor_timeout=300, device=None, **flow_kwargs):
    """A :class:`flowsim.Flow` whose chunks run as Spark tasks: ``Flow(simulation,
    n_events, seed, quiet=True, executor=SparkExecutor(spark, ...))``.  The
    session is ``flow.executor.spark``; ``flow.close()`` (or ``with``) stops
    one this Flow started.

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
        once (and with :func:`warnings.warn`); after ``executor_timeout`` s it
        cancels its job and raises
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

    A session SparkFlow starts logs at Spark's WARN level (``spark.log.level``;
    set it, or ``FLOWSIM_SPARK_VERBOSE=1``, for Spark's INFO lines), and on a
    local or loopback master (``local[...]``, ``spark://127.0.0.1:...``) binds
    the driver and its UI to 127.0.0.1 (``SPARK_LOCAL_IP`` unless set).  Under
    ``spark-submit`` the JVM starts before Python: export
    ``SPARK_LOCAL_IP=127.0.0.1`` there to keep the UI on loopback.
    """
    return backend_flow("SparkFlow", lambda: SparkExecutor(
        spark, partitions=partitions, show_progress=not quiet, run_ahead=run_ahead,
        executor_timeout=executor_timeout, device=device),
        simulation, n_events, seed, dict(flow_kwargs, quiet=True))


class SparkExecutor(Executor):
    """Each iteration one Spark job of ``partitions`` tasks; one job computes the
    next iterations too while the state stays put.

    Usage: ``Flow(sim, n, seed=1, quiet=True, executor=SparkExecutor("local[2]"))``.
    ``spark``, ``partitions``, ``run_ahead``, ``executor_timeout``, ``device``:
    see :func:`SparkFlow`; ``show_progress`` is Spark's console progress bar
    (``not quiet`` there) for a session this executor starts.  The session
    starts (or is found) when the executor is made; :meth:`close` stops one it
    started.
    """

    name = "spark"

    def __init__(self, spark=None, *, partitions=None, show_progress=True, run_ahead=True,
                 executor_timeout=300, device=None):
        self.device = session.check_device(device)
        self.partitions = None if partitions is None else check_count("partitions",
                                                                      partitions)
        self.timeout = session.check_timeout(executor_timeout)
        self.ahead = RunAhead(run_ahead, most=MAX_AHEAD - 1)
        self.run_ahead = self.ahead.enabled
        self.seen, self.used = set(), None     # worker labels; tasks of the last job
        self.spark, self.owned = session.session(spark, show_progress)
        if self.owned:
            atexit.register(self.close)

    @property
    def sc(self):
        """The SparkContext this executor submits to."""
        return self.spark.sparkContext

    def close(self):
        """Stop the Spark session if this executor started it (idempotent)."""
        if self.owned and self.spark is not None:
            self.owned = False
            try:
                self.spark.stop()
            finally:
                atexit.unregister(self.close)

    def devices(self):
        if self.seen:
            return sorted(self.seen)
        master = self.spark.sparkContext.master if self.spark is not None else "?"
        return [f"spark {master}: {self.device or 'assigned GPU else CPU:0'}"]

    def partition(self, grid):
        """Contiguous near-equal runs of blocks, one per Spark task."""
        n = self.partitions or max(1, int(self.spark.sparkContext.defaultParallelism))
        return static_shares(grid.n_blocks, [1.0] * min(n, grid.n_blocks))

    def meta(self):
        if self.spark is None:
            return {}
        return {"spark_master": self.spark.sparkContext.master, "partitions": self.used}

    def execute(self, it):
        task = it.task
        held, chunks = self.ahead.take(task)
        if len(held) < it.grid.n_blocks:                # not computed by an earlier job
            count = 1 + self.ahead.plan(it)
            done = self._submit(it, count)
            for later in range(task.iteration + 1, task.iteration + count):
                self.ahead.keep(task.at(later), *done[later])
            held, chunks = done[task.iteration]
        rows = it.rows()
        for b in sorted(held):
            rows.add(b, held[b][None, :])
        for label, first, n, start, end in chunks:
            self.seen.add(label)
            it.chunk(label, first, n, start, end)
        return rows.result()

    def _submit(self, it, count):
        """One Spark job for iterations ``it.task.iteration ..+count-1`` (same state).

        Returns ``{iteration: ({block: row}, [(device, first, n, start, end)])}``.
        """
        from pyspark import cloudpickle
        if self.spark is None or self.spark.sparkContext._jsc is None:
            raise RuntimeError("SparkFlow: the Spark session is stopped")
        task, grid, sc = it.task, it.grid, self.spark.sparkContext
        layout(task.simulation)             # probes the integrand on the driver
        chunks = self.partition(grid)
        self.used = len(chunks)
        iterations = list(range(task.iteration, task.iteration + count))
        payload = cloudpickle.dumps(task)
        if len(payload) > INLINE_TASK_BYTES:       # large state: ship once per executor
            payload = sc.broadcast(payload)
        which = (f"iteration {iterations[0] + 1}" if count == 1
                 else f"iterations {iterations[0] + 1}-{iterations[-1] + 1}")
        sc.setJobDescription(f"flowsim {type(task.simulation).__name__} {which}: "
                             f"{grid.n_blocks} blocks in {len(chunks)} tasks")
        job = uuid.uuid4().hex
        fn = functools.partial(run_partition, payload, job,
                               grid.blocks_per_call(it.events_limit), self.device, iterations)
        offset = it.now() - time.time()
        tag = f"flowsim-{job}"
        sc.addJobTag(tag)
        watch = session.ExecutorWatch(sc, self.timeout, tag)
        try:
            with watch:
                out = sc.parallelize(chunks, len(chunks)).mapPartitionsWithIndex(fn).collect()
        except Exception as exc:
            if watch.expired:
                raise NoExecutorError(
                    f"the Spark job of iteration {task.iteration + 1} was cancelled: no live "
                    f"Spark executor for {self.timeout:g} s on {sc.master}; no "
                    f"partial result is used.  Start a Spark worker (or give the application "
                    f"executors), or raise executor_timeout (None waits forever)") from None
            error = session.driver_error(exc, task.iteration)
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
        rows = {i: it.rows() for i in iterations}
        done = {i: ({}, []) for i in iterations}
        for iteration, first, block_rows, start, end, label in out:
            rows[iteration].add(first, block_rows)         # refuses repeats
            done[iteration][1].append((label, first, len(block_rows), start + offset,
                                       end + offset))
        for i in iterations:                    # every iteration complete before any is used
            full = rows[i].result()
            done[i][0].update(enumerate(full))
        return done
