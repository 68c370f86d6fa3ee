"""The backend interface: where the chunks of an iteration run.

A :class:`~flowsim.Flow` owns the loop over iterations, the timeline, the
progress bar, checkpoints, Ctrl-C handling and the :class:`~flowsim.Result`.
It hands every iteration to one :class:`Executor`, which runs the blocks
wherever it likes and returns their rows; a :class:`Processes` object says how
the processes of a run agree (one process unless the backend is SPMD, like
MPI).  A backend sees Flow only through the :class:`Iteration` it is handed.

The whole contract::

    class Executor:
        name = "flow"                      # Result.meta["backend"]
        processes = SINGLE                 # how processes agree
        def devices(self): ...             # names, for meta and repr
        def execute(self, it): ...         # rows [n_blocks, width] of it.task
        def meta(self): ...                # extra Result.meta entries
        def close(self): ...               # release workers (also `with`)

``execute`` may cut ``it.grid`` as it likes and run chunks in any order, on
any device or process, through :func:`flowsim.core.kernel.run_chunk` (or
:meth:`Executor.compute`); it reports each chunk with :meth:`Iteration.chunk`
and returns ``it.rows(...)`` filled in block order.  Because every block has
its own row and rows are added in block order, an executor cannot change the
bits of the result.

Shared pieces for executors: :class:`RunAhead` (compute the next iterations
while the state stays put), :class:`RemoteError` / :func:`describe` (an
exception raised in another process, with its type, text, traceback and
where), :func:`set_threads` (TensorFlow's thread pools, before it starts).
"""
import contextlib
import os
import threading
import time
import traceback

import numpy as np

from . import checkpoint as ckpt
from .blocks import RowCollector, cut
from .kernel import layout, run_chunk
from .log import logger

__all__ = [
    "SINGLE",
    "Executor",
    "check_start_method",
    "Iteration",
    "LocalExecutor",
    "Processes",
    "RemoteError",
    "RunAhead",
    "describe",
    "entry",
    "rebuild",
    "set_threads",
    "thread_settings",
]


class Processes:
    """How the processes of a run agree; this default is a single process.

    SPMD backends (every process runs the same script, like MPI) override
    these hooks so that every process uses root's seed, checkpoint and
    timings, every process builds the same run, a failure on one process
    raises on all, and only root writes checkpoints, logs and shows progress.
    :class:`~flowsim.Flow` calls them in this order: :meth:`agree` (the seed)
    and :meth:`agree_run` at the end of its constructor; per ``run()``:
    :meth:`running` around it, :meth:`load_checkpoint`, :meth:`finish` with
    the records; :meth:`failed` whenever the constructor or ``run()`` raises.
    """

    #: This process's number and the number of processes of the run.
    rank, size = 0, 1

    def is_root(self):
        """Whether this process writes checkpoints and shows progress."""
        return True

    def agree(self, value):
        """The value every process uses: root's ``value``."""
        return value

    def agree_run(self, flow):
        """Check that every process built the same ``flow`` (its
        :meth:`~flowsim.Flow.config`); raise on every process if not.  Nothing
        to check in one process."""

    def load_checkpoint(self, path):
        """The checkpoint at ``path`` (:func:`flowsim.core.checkpoint.load`), read by root
        and shared with every process; None when there is none."""
        return ckpt.load(path)

    def running(self):
        """A context manager around every ``Flow.run`` (SPMD: mutes flowsim's logs
        on the processes other than root)."""
        return contextlib.nullcontext()

    def finish(self, records, wall_time):
        """Root's ``(records, wall_time)`` at the end of a run, so that every process
        returns the same timings (one process: the ones given)."""
        return records, wall_time

    def failed(self, exc):
        """``exc`` was raised on this process (in Flow's constructor or ``run``):
        let the other processes know, so that none waits forever.  May raise the
        exception every process raises instead; returns None to re-raise ``exc``."""


#: The single-process :class:`Processes`.
SINGLE = Processes()


class Iteration:
    """What :class:`~flowsim.Flow` hands :meth:`Executor.execute` for one iteration.

    Attributes
    ----------
    task : IterationTask
        Picklable: simulation, kernel spec, seed, iteration number and state.
        :func:`flowsim.core.kernel.run_chunk` turns it and a run of blocks into rows.
    grid : BlockGrid
        The blocks of the iteration (``grid.n_blocks``, ``grid.events_in``).
    events_limit : int
        Most events to hand one device in one call (``grid.blocks_per_call``).
    steady : bool
        The task's state equals that of the iteration before it (plain Monte
        Carlo, sweeps, paths; never while a VEGAS grid adapts): the rows of
        later iterations are already determined, so they may be computed ahead
        (:class:`RunAhead`), up to iteration ``last``.
    last : int
        The last iteration of the current ``Flow.run`` call.
    """

    def __init__(self, task, grid, events_limit, steady, last, t0, on_chunk=None,
                 on_progress=None):
        self.task, self.grid, self.events_limit = task, grid, events_limit
        self.steady, self.last = steady, last
        self._t0 = t0
        self._on_chunk, self._on_progress = on_chunk, on_progress
        self._lock = threading.Lock()

    @property
    def width(self):
        """Floats in one block's row."""
        return layout(self.task.simulation)[1]

    def now(self):
        """Seconds since the run started: the clock of :meth:`chunk`."""
        return time.perf_counter() - self._t0

    def cut(self, first=0, n=None):
        """Blocks ``first..first+n-1`` (default all) in calls of at most ``events_limit``."""
        n = self.grid.n_blocks - first if n is None else n
        return cut(first, n, self.grid.blocks_per_call(self.events_limit))

    def rows(self):
        """An empty :class:`~flowsim.core.blocks.RowCollector` for this iteration; its
        ``result()`` refuses a missing or repeated block."""
        return RowCollector(self.grid.n_blocks, self.width)

    def chunk(self, device, first, n, start, end, *, iteration=None, progress=True, **extra):
        """Report a chunk of ``n`` blocks from ``first`` that ran on ``device`` from
        ``start`` to ``end`` (:meth:`now` seconds).  It joins ``Result.timeline``
        with any ``extra`` keys (``failed=``, ``ahead=``); with ``progress`` its
        events also advance the progress bar.  Thread-safe."""
        record = entry(self.task.iteration if iteration is None else iteration,
                       device, first, n, start, end, **extra)
        with self._lock:
            if self._on_chunk is not None:
                self._on_chunk(record, self.grid.events_in(first, n) if progress else 0)

    def progress(self, events):
        """Advance the progress bar by ``events`` (work not reported by :meth:`chunk`)."""
        with self._lock:
            if self._on_progress is not None and events:
                self._on_progress(events)


#: The keys of every timeline entry (backends may add others, e.g. ``ahead``).
ENTRY = ("iteration", "device", "first_block", "blocks", "start", "end")


def entry(iteration, device, first, n, start, end, **extra):
    """A ``Result.timeline`` entry of the task's ``iteration`` (counted from 0, as
    ``Task.iteration``); the entry numbers it from 1, as ``Result.iterations`` and the
    progress lines do.  ``start``/``end`` in :meth:`Iteration.now` seconds."""
    return {"iteration": iteration + 1, "device": device, "first_block": int(first),
            "blocks": int(n), "start": start, "end": end, **extra}


class Executor:
    """Runs the chunks of an iteration; subclass it to add a backend.

    The base class runs every block on one device, in calls of at most
    ``events_limit`` events: what :class:`~flowsim.Flow` does by default.
    An executor holds no state of a Flow; it may keep its own (worker
    pools, measured speeds) from one iteration to the next.  Use it as a
    context manager, or call :meth:`close`, to release what it holds.
    """

    #: ``Result.meta["backend"]``.
    name = "flow"
    #: How the processes of a run agree (:class:`Processes`).
    processes = SINGLE
    #: The device a single-device executor runs on (None: chosen per worker).
    device = None

    def devices(self):
        """Devices (or workers) this executor runs chunks on."""
        return [self.device]

    def compute(self, task, first, n, device):
        """Rows ``[n, width]`` of blocks ``first..first+n-1`` of ``task`` on ``device``
        (:func:`flowsim.core.kernel.run_chunk`; override to wrap it)."""
        return run_chunk(task, first, n, device)

    def execute(self, it):
        """Run every block of ``it.task``; return the rows ``[n_blocks, width]``."""
        rows = it.rows()
        for first, n in it.cut():
            start = it.now()
            rows.add(first, self.compute(it.task, first, n, self.device))
            it.chunk(self.device, first, n, start, it.now())
        return rows.result()

    def meta(self):
        """Entries this backend adds to ``Result.meta``."""
        return {}

    def close(self):
        """Release workers, sessions, pools (idempotent; nothing by default)."""

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


class LocalExecutor(Executor):
    """One device of this process: ``device`` (default the first GPU, else CPU:0)."""

    def __init__(self, device=None):
        from .lazy_tf import resolve_device
        self.device = resolve_device(device)


# -- run-ahead -----------------------------------------------------------------------
class RunAhead:
    """Rows of later iterations computed early, served when their turn comes.

    A backend that is idle (MPI ranks waiting for a straggler) or that pays a
    fixed cost per submission (one Spark job for several iterations) computes
    the next iterations while ``it.steady``; :meth:`plan` says how many.  It
    :meth:`keep`-s their rows by block; :meth:`take` hands them back only to a
    task with the very same iteration, seed and state, so a state that changed
    after all costs recomputation, never bits.
    """

    def __init__(self, enabled=True, most=1):
        self.enabled, self.most = bool(enabled), most
        self._held = {}

    def plan(self, it):
        """Iterations after ``it.task.iteration`` that may be computed now (0: none)."""
        if not (self.enabled and it.steady):
            self._held.clear()
            return 0
        return max(0, min(it.last - it.task.iteration, self.most))

    def keep(self, task, rows, timeline=()):
        """Hold ``rows`` (``{block: row}``) of ``task`` and its timeline entries."""
        held = self._held.setdefault(task.iteration, (task, {}, []))
        if not held[0].same_run(task):
            held = self._held[task.iteration] = (task, {}, [])
        held[1].update(rows)
        held[2].extend(timeline)

    def take(self, task):
        """``({block: row}, timeline)`` held for ``task`` (empty if none or stale);
        everything held for earlier iterations is dropped."""
        for i in [i for i in self._held if i < task.iteration]:
            del self._held[i]
        held = self._held.pop(task.iteration, None)
        if held is None or not held[0].same_run(task):
            return {}, []
        return held[1], held[2]

    def clear(self):
        self._held.clear()


# -- errors from other processes ------------------------------------------------------
def describe(exc, **where):
    """A picklable, JSON-able account of ``exc``: module, type, message, traceback,
    plus ``where`` (rank, partition, host...)."""
    return {"module": type(exc).__module__, "type": type(exc).__qualname__,
            "message": str(exc),
            "traceback": "".join(traceback.format_exception(type(exc), exc, exc.__traceback__)),
            **where}


class RemoteError(RuntimeError):
    """An exception raised in another process whose type cannot be rebuilt here.

    Attributes: ``info`` (:func:`describe`'s dict), ``remote_traceback``.
    """

    def __init__(self, info, text=None):
        self.info = info
        self.remote_traceback = info.get("traceback", "")
        super().__init__(text or f"{info['module']}.{info['type']}: {info['message']}")


def rebuild(info, where=""):
    """The exception to raise for :func:`describe`'s ``info``: its own type with its
    own text (and ``where`` appended) when that type is a builtin or lives in a
    module this process has imported (the user's integrand module, TensorFlow's
    errors), else a :class:`RemoteError` naming the type.  The remote traceback
    is kept as ``remote_traceback``."""
    import functools
    import sys
    message = info["message"].rstrip()
    sep = "\n" if "\n" in message else " "
    tail = f"{sep}{where}" if where else ""
    module = sys.modules.get(info.get("module") or "")
    cls = functools.reduce(lambda obj, name: getattr(obj, name, None),
                           info["type"].split("."), module) if module else None
    if isinstance(cls, type) and issubclass(cls, Exception):
        for args in ((f"{message}{tail}",), (None, None, f"{message}{tail}")):
            try:            # one text argument, or TensorFlow's (node_def, op, message)
                error = cls(*args)
            except Exception:  # noqa: BLE001, S112 - a constructor with other arguments
                continue
            if f"{message}{tail}" in str(error):
                error.remote_traceback = info.get("traceback", "")
                return error
    return RemoteError(info, f"{info['module']}.{info['type']}: {message}{tail}")


# -- worker processes -----------------------------------------------------------------
def tensorflow_started():
    """Whether TensorFlow is loaded in this process (then its runtime may hold locks)."""
    import sys
    return "tensorflow" in sys.modules


def check_start_method(method):
    """Refuse a ``fork`` start method for worker processes once TensorFlow is loaded.

    A forked child inherits TensorFlow's runtime with its locks in whatever state
    other threads held them: the child aborts in its first TensorFlow call (absl
    mutex) and a process pool breaks with no hint.  ``"spawn"`` and
    ``"forkserver"`` start clean interpreters.  Raises ``RuntimeError`` naming the
    fix; returns ``method``.
    """
    if method is None:
        import multiprocessing
        method = multiprocessing.get_start_method()
    if method == "fork" and tensorflow_started():
        raise RuntimeError(
            "start_method='fork' after TensorFlow has started: forked workers abort in "
            "their first TensorFlow call (absl mutex) and the pool breaks; use "
            "start_method='spawn' (or 'forkserver'), e.g. "
            "multiprocessing.get_context('spawn')")
    return method


# -- TensorFlow threads ---------------------------------------------------------------
def thread_settings(n_workers, n_gpu_workers, cores=None):
    """``(intra_op, inter_op)`` thread counts for ``n_workers`` device workers of
    one process, ``n_gpu_workers`` of them on GPUs (the rule of
    :class:`~flowsim.distribution.ScheduledFlow` and ThreadPoolFlow).

    TensorFlow runs the CPU kernels of *all* logical CPU devices on one shared
    intra-op pool, and feeds every device from one inter-op pool.  Before
    TensorFlow initialises, the first ThreadPoolFlow/ScheduledFlow sets:

    - intra-op threads = cores − GPU workers − (CPU workers − 1), at least 1:
      CPU kernels leave one core per GPU free to launch that GPU's kernels, and
      with ``k`` logical CPU devices (:func:`flowsim.set_virtual_cpus`) the
      calling thread of each of the other ``k − 1`` devices runs kernels too, so
      the shared pool plus those threads make one thread per core (GPUs only, or
      one CPU device and no GPU: every core, TensorFlow's default);
    - inter-op threads = max(2, workers), one op executor per device worker.

    The intra-op pool is smaller than the core count on purpose when CPU:0 is
    split: a pool of every core plus the devices' calling threads runs more kernel
    threads than there are cores, and the devices slow each other down (figures in
    ``docs/performance.rst``, "Thread settings"; ``benchmarks/threads.py``
    compares on your machine).

    Override with the environment variables ``FLOWSIM_INTRA_OP_THREADS`` /
    ``FLOWSIM_INTER_OP_THREADS``, or by calling ``tf.config.threading.set_*``
    yourself before creating the Flow (values you set are never changed).  Once
    TensorFlow has initialised (any earlier TF work) the settings cannot change
    and are left as they are.
    """
    cores = cores or _cores()
    cpu_workers = n_workers - n_gpu_workers
    intra = max(1, cores - n_gpu_workers - (cpu_workers - 1)) if cpu_workers else cores
    inter = max(2, n_workers)
    intra = int(os.environ.get("FLOWSIM_INTRA_OP_THREADS", intra))
    inter = int(os.environ.get("FLOWSIM_INTER_OP_THREADS", inter))
    return intra, inter


def set_threads(intra, inter=None, *, keep=False, strict=False, who="flowsim"):
    """Set TensorFlow's intra- and inter-op thread pools (``inter`` defaults to
    ``intra``); only possible before TensorFlow initialises.

    ``keep``: leave a value someone already set (non-zero) as it is.
    ``strict``: if TensorFlow already initialised, raise ``RuntimeError``;
    else log a warning.  Returns the ``(intra, inter)`` in force afterwards
    (0: TensorFlow's default).
    """
    from .lazy_tf import tf
    cfg = tf().config.threading
    inter = intra if inter is None else inter
    try:
        if not (keep and cfg.get_intra_op_parallelism_threads()):
            cfg.set_intra_op_parallelism_threads(intra)
        if not (keep and cfg.get_inter_op_parallelism_threads()):
            cfg.set_inter_op_parallelism_threads(inter)
    except RuntimeError as exc:
        have = cfg.get_intra_op_parallelism_threads() or "its default"
        msg = (f"{who}: TensorFlow was initialised before and keeps {have} threads "
               f"(wanted {intra}); create it before any TensorFlow work")
        if strict:
            raise RuntimeError(msg) from exc
        (logger.debug if keep else logger.warning)(msg)
    return cfg.get_intra_op_parallelism_threads(), cfg.get_inter_op_parallelism_threads()


def _cores():
    """Cores this process may run on."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # pragma: no cover - not Linux
        return os.cpu_count() or 1


cores = _cores


def block_seconds(entries):
    """Seconds per block over timeline entries, or None."""
    blocks = sum(e["blocks"] for e in entries)
    return sum(e["end"] - e["start"] for e in entries) / blocks if blocks else None


def stack(parts):
    """Rows of consecutive pieces as one array."""
    return parts[0] if len(parts) == 1 else np.concatenate(parts)
