"""JoblibFlow: the chunks of an iteration as joblib tasks in worker processes.

Each iteration is cut into one contiguous run of blocks per worker
(:func:`flowsim.schedule.static_shares`); each run is one joblib task that
computes its blocks through :func:`flowsim.core.kernel.run_chunk` (in calls of at
most ``events_limit`` events) and returns their rows.  The driver adds them in
block order: same seed, same float64 bits as :class:`flowsim.Flow`.

Where the tasks run is joblib's choice: by default its ``loky`` backend, a
pool of worker processes on this machine that joblib keeps between calls.
Inside ``joblib.parallel_config(backend="dask")`` (with a
``dask.distributed.Client`` connected) the same code runs on a Dask cluster::

    from dask.distributed import Client
    import joblib
    client = Client("tcp://scheduler:8786")
    with joblib.parallel_config(backend="dask"):
        result = JoblibFlow(flowsim.Plain(f, 4), 10**7, seed=1).run(5)

Workers compile the kernel once: a task's simulation keeps its trace key when
pickled, so :mod:`flowsim.core.kernel`'s cache serves later tasks and iterations in
the same process.  On loky, each worker's TensorFlow gets ``cores / workers``
threads (before TensorFlow starts in that worker).

Pools.  The joblib pool of an iteration is kept for the next one while the same
backend is active (the same ``parallel_config`` block for Ray, Dask and other
cluster backends), so their workers keep TensorFlow and the compiled kernels
between iterations (Ray's joblib backend otherwise starts new actors for every
call); ``Flow.close()`` (or ``with flow:``) releases it.

Faults.  An exception in a task reaches the driver as the task's own type and
text when it is a builtin one (else :class:`flowsim.core.backend.RemoteError`),
with where it ran (blocks, host, process).  A worker process that dies
(killed, out of memory) ends the task with loky's ``TerminatedWorkerError``
(Dask retries tasks of a lost worker itself): the iteration is run again once,
on a fresh pool, with the same bits; a second death raises a
:class:`WorkerLostError` naming the iteration.
"""
import os
import time

from ..core.backend import Executor, cores, describe, rebuild, set_threads
from ..core.blocks import cut
from ..core.flow import backend_flow
from ..core.kernel import run_chunk
from ..core.log import logger
from ..schedule import static_shares

__all__ = ["JoblibExecutor", "JoblibFlow", "WorkerLostError"]


class WorkerLostError(RuntimeError):
    """A joblib worker process died twice running the same iteration."""


class JoblibExecutor(Executor):
    """Chunks as joblib tasks: ``Flow(sim, n, seed=1, executor=JoblibExecutor())``.

    ``n_jobs`` and ``device``: see :func:`JoblibFlow` (the same Flow, built in
    one call).  The joblib backend is the one active when an iteration runs
    (``joblib.parallel_config``).
    """

    name = "joblib"

    def __init__(self, n_jobs=None, device=None):
        if n_jobs is not None and (isinstance(n_jobs, bool) or not isinstance(n_jobs, int)
                                   or n_jobs == 0):
            raise ValueError(f"n_jobs must be a non-zero integer or None, got {n_jobs!r}")
        self.n_jobs, self.device = n_jobs, None if device is None else str(device)
        self.backend = None
        self._pool = None

    def devices(self):
        where = self.backend or "joblib"
        return [f"{where}: {self.device or 'CPU:0'} per worker"]

    def meta(self):
        return {"joblib_backend": self.backend, "workers": self._workers()}

    def _workers(self):
        import joblib
        return max(1, joblib.effective_n_jobs(-1 if self.n_jobs is None else self.n_jobs))

    def close(self):
        """Release the joblib pool kept between iterations (idempotent)."""
        if self._pool is not None:
            parallel, self._pool = self._pool[1], None
            try:
                parallel.__exit__(None, None, None)
            except Exception as exc:  # noqa: BLE001 - a pool whose cluster is gone
                logger.debug("closing the joblib pool: %s", exc)

    def _parallel(self):
        """The pool of the joblib backend active now: kept from the last iteration
        when the backend is the same (Ray's and Dask's workers keep their TensorFlow
        and compiled kernels), else a new one."""
        import joblib
        from joblib.parallel import get_active_backend
        backend = get_active_backend()[0]
        kind = type(backend).__name__.lower()
        self.backend = "dask" if "dask" in kind else kind.replace("backend", "")
        local = self.backend in ("loky", "multiprocessing", "threading", "sequential")
        key = (self.backend, None if local else id(backend))
        if self._pool is None or self._pool[0] != key:
            self.close()
            parallel = joblib.Parallel(n_jobs=-1 if self.n_jobs is None else self.n_jobs)
            self._pool = (key, parallel.__enter__())
        return self._pool[1]

    def execute(self, it):
        for attempt in (1, 2):
            try:
                return self._run(it)
            except Exception as exc:
                self.close()
                if type(exc).__name__ != "TerminatedWorkerError":
                    raise
                if attempt == 2:
                    raise WorkerLostError(
                        f"a joblib worker process died twice in iteration "
                        f"{it.task.iteration + 1}; no partial result is used: {exc}") from None
                logger.warning("a joblib worker process died in iteration %d; running it "
                               "again", it.task.iteration + 1)

    def _run(self, it):
        import joblib
        workers = self._workers()
        shares = static_shares(it.grid.n_blocks, [1.0] * min(workers, it.grid.n_blocks))
        per_call = it.grid.blocks_per_call(it.events_limit)
        parallel = self._parallel()
        local = self.backend in ("loky", "multiprocessing")
        threads = max(1, cores() // workers) if local else None
        offset = it.now() - time.time()
        out = parallel(joblib.delayed(_task)(it.task, first, n, per_call, self.device, threads)
                       for first, n in shares if n)
        rows = it.rows()
        for first, n, got, label in out:
            if isinstance(got, dict):                       # describe()'s account
                raise rebuild(got, f"[joblib task: blocks {first}..{first + n - 1}, iteration "
                                   f"{it.task.iteration + 1}, {got['where']}]")
            for b, k, block_rows, start, end in got:
                rows.add(b, block_rows)
                it.chunk(label, b, k, start + offset, end + offset)
        return rows.result()


_READY = []


def _task(task, first, n, per_call, device, threads):
    """In a worker: rows of blocks ``first..first+n-1`` of ``task``, chunk by chunk."""
    label = f"{os.uname().nodename}:{os.getpid()}/{device or 'CPU:0'}"
    try:
        if not _READY:
            import logging
            logging.getLogger("flowsim").setLevel(logging.WARNING)
            if threads is not None:
                set_threads(threads, keep=True)
            _READY.append(True)
        out = []
        for b, k in cut(first, n, per_call):
            start = time.time()
            rows = run_chunk(task, b, k, device or "CPU:0")
            out.append((b, k, rows, start, time.time()))
        return first, n, out, label
    except Exception as exc:  # noqa: BLE001 - raised on the driver with where it ran
        return first, n, describe(exc, where=label), label


def JoblibFlow(simulation, n_events, seed=None, n_jobs=None, device=None, **flow_kwargs):
    """A :class:`flowsim.Flow` whose chunks run as joblib tasks:
    ``Flow(simulation, n_events, seed, executor=JoblibExecutor(n_jobs, device))``.

    Takes every keyword of :class:`flowsim.Flow` (same meaning, same bits for
    the same seed), plus:

    Parameters
    ----------
    n_jobs : int or None
        Workers (joblib's ``n_jobs``).  Default None: every worker the active
        joblib backend has (``-1``: the cores of this machine on loky, every
        Dask worker thread under ``parallel_config(backend="dask")``).  One
        task per worker and iteration; each runs its share of the blocks in
        calls of at most ``events_limit`` events.  Does not change the result.
    device : str or None
        TensorFlow device in every worker (default ``CPU:0``); not checked on
        the driver.

    Every iteration pays a fixed cost for pickling the task and starting
    joblib's tasks; give each iteration enough events (10**6 or more) for
    the workers to repay it.  See the module docstring for Dask and faults.
    """
    return backend_flow("JoblibFlow", lambda: JoblibExecutor(n_jobs, device),
                        simulation, n_events, seed, flow_kwargs)
