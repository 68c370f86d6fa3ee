"""Every device of one machine: one worker thread per TensorFlow logical device.

:class:`ThreadExecutor` runs an iteration's chunks on several devices at once,
cut by a policy of :mod:`flowsim.schedule`; :func:`ScheduledFlow` and
:func:`ThreadPoolFlow` build a :class:`flowsim.Flow` with one.  Each worker runs
its chunks inside its device scope through
:meth:`flowsim.core.backend.Executor.compute` (one compiled function per
device, traced once) and reports it to the Flow, so every chunk lands in
``Result.timeline``.  Rows are added in block order: every device count and
schedule gives the bits of :class:`flowsim.Flow` (on one device type; CPUs
and GPUs may round differently).

Threads: before TensorFlow initialises, the first ThreadPoolFlow/ScheduledFlow
sizes TensorFlow's thread pools for its device workers
(:func:`flowsim.core.backend.thread_settings` says how and how to override).

Faults
------
A chunk failing with ``tf.errors.ResourceExhaustedError`` (device out of
memory) is split in two and retried, on another device if one exists; that
device's chunks are capped at half the failed size from then on.  A one-block
chunk that fails on every device re-raises the error.  Any other exception (a
bug in the kernel) stops the run at once: queued chunks are dropped, chunks in
flight finish, every worker thread is joined, and the original exception is
re-raised with its traceback.
"""
import threading

from .. import schedule as sched_mod
from ..core import interrupts
from ..core.backend import Executor, set_threads, thread_settings
from ..core.blocks import check_count
from ..core.flow import backend_flow
from ..core.kernel import trace_counts
from ..core.lazy_tf import planned_gpu_workers, select_devices, tf, virtual_cpus
from ..core.log import logger

#: Weight of earlier iterations in the learned device speeds.
DECAY = 0.5
#: The schedule of ThreadExecutor, ThreadPoolFlow and ScheduledFlow by default.
DEFAULT_SCHEDULE = "weighted"


def configure_threads(n_workers, n_gpu_workers):
    """Apply :func:`thread_settings` if TensorFlow has not initialised yet.

    Returns the ``(intra, inter)`` in force afterwards (0: TensorFlow's own
    default, i.e. TensorFlow was already running and its settings stay).
    """
    return set_threads(*thread_settings(n_workers, n_gpu_workers), keep=True)


class _Item:
    """A chunk to retry after a device ran out of memory."""

    __slots__ = ("first", "n", "avoid")

    def __init__(self, first, n, avoid):
        self.first, self.n, self.avoid = first, n, frozenset(avoid)


class _Run:
    """State shared by the workers of one iteration (guarded by ``cond``)."""

    def __init__(self, it, scheduler):
        self.it = it
        self.cond = threading.Condition()
        self.scheduler = scheduler
        self.rows = it.rows()
        self.left = it.grid.n_blocks
        self.retries = []
        self.error = None


class ThreadExecutor(Executor):
    """Every device of this machine, one worker thread each, chunks cut by a schedule.

    Usage::

        flow = flowsim.Flow(sim, 10**7, seed=1, executor=ThreadExecutor())
        flow = flowsim.Flow(sim, 10**7, seed=1,
                            executor=ThreadExecutor(schedule="dynamic", chunk=4))

    ``devices``, ``schedule``, ``chunk``, ``device``: see :class:`ScheduledFlow`
    (the same Flow, built in one call).  Learned device speeds and
    out-of-memory caps carry over from one iteration to the next.  The first
    ThreadExecutor of a process sizes TensorFlow's thread pools if TensorFlow
    has not started (``thread_settings`` holds what is in force).
    """

    def __init__(self, devices=None, *, schedule=None, chunk=None, device=None,
                 name="scheduled"):
        if device is not None:
            if devices is not None:
                raise ValueError("give devices= or device=, not both")
            devices = [device]
        self.schedule = sched_mod.check_policy(schedule or DEFAULT_SCHEDULE)
        self.chunk = None if chunk is None else check_count("chunk", chunk)
        n_gpu, n_workers = planned_gpu_workers(devices)
        if n_workers is None:
            n_workers = n_gpu + (virtual_cpus() or 1)
        self.thread_settings = configure_threads(n_workers, n_gpu)
        names, self.weights = select_devices(devices)
        self._devices = list(names)
        self.device = self._devices[0]
        self.name = name
        self.throughput = sched_mod.Throughput(len(self._devices))
        self.caps = [None] * len(self._devices)

    def devices(self):
        return list(self._devices)

    def meta(self):
        return {"schedule": self.schedule}

    def execute(self, it):
        _ = it.width                              # probes the integrand, once
        per = it.grid.blocks_per_call(it.events_limit)
        caps = [c or per for c in self.caps]
        scheduler = sched_mod.Scheduler(
            self.schedule, it.grid.n_blocks, len(self._devices), chunk=self.chunk,
            max_chunk=per, weights=self.weights, caps=caps,
            throughput=self.throughput.decayed(DECAY))
        run = _Run(it, scheduler)
        threads = [threading.Thread(target=self._work, args=(run, w),
                                    name=f"flowsim-{d}", daemon=True)
                   for w, d in enumerate(self._devices)]
        try:
            for t in threads:
                t.start()
            for t in threads:
                t.join()
        except BaseException as exc:               # Ctrl-C: stop the workers, then go
            with run.cond:
                run.error = run.error or exc
                run.cond.notify_all()
            # Every worker that started (also one whose start() the Ctrl-C interrupted)
            # finishes its chunk first; one not running yet sees run.error and does none.
            # A second Ctrl-C meanwhile ends the process (interrupts.held).
            with interrupts.held(stopping=True):
                for t in threads:
                    if t.is_alive():
                        t.join()
            raise
        self.throughput = scheduler.throughput
        self.caps = [c if c < per else None for c in scheduler.caps]
        if run.error is not None:
            raise run.error
        return run.rows.result()

    def _take(self, run, w):
        """Next chunk for worker ``w`` (a retry first), or None; under ``run.cond``."""
        device = self._devices[w]
        everyone = set(self._devices)
        for i, item in enumerate(run.retries):
            if device not in item.avoid or item.avoid >= everyone:
                del run.retries[i]
                return item
        got = run.scheduler.next(w, run.it.now())
        return None if got is None else _Item(got[0], got[1], ())

    def _work(self, run, w):
        device, it = self._devices[w], run.it
        key = (type(it.task.simulation).__name__, device)
        try:
            while True:
                with run.cond:
                    while True:
                        if run.error is not None or run.left == 0:
                            return
                        item = self._take(run, w)
                        if item is not None:
                            break
                        run.cond.wait(timeout=1.0)
                traces = trace_counts[key]
                start = it.now()
                try:
                    out = self.compute(it.task, item.first, item.n, device)
                except tf().errors.ResourceExhaustedError as exc:
                    end = it.now()
                    with run.cond:
                        self._out_of_memory(run, w, item, exc, start, end)
                        run.cond.notify_all()
                    continue
                end = it.now()
                it.chunk(device, item.first, item.n, start, end)
                with run.cond:
                    run.rows.add(item.first, out)
                    run.left -= item.n
                    if run.scheduler.busy[w] is not None:
                        run.scheduler.done(w, item.n, end - start, end,
                                           measured=trace_counts[key] == traces)
                    run.cond.notify_all()
        except BaseException as exc:               # a kernel bug: stop everyone now
            with run.cond:
                if run.error is None:
                    run.error = exc
                run.retries.clear()
                run.cond.notify_all()

    def _out_of_memory(self, run, w, item, exc, start, end):
        device = self._devices[w]
        run.scheduler.failed(w)
        run.scheduler.caps[w] = max(1, min(run.scheduler.caps[w], item.n // 2))
        run.it.chunk(device, item.first, item.n, start, end, progress=False,
                     failed=type(exc).__name__)
        avoid = set(item.avoid) | {device}
        if item.n == 1 and avoid >= set(self._devices):
            run.error = exc
            return
        logger.warning("%s ran out of memory on blocks %d..%d; retrying %s", device,
                       item.first, item.first + item.n - 1,
                       "elsewhere" if len(self._devices) > 1 else "in smaller chunks")
        if item.n == 1:
            run.retries.append(_Item(item.first, 1, avoid))
        else:
            half = item.n // 2
            run.retries.append(_Item(item.first, half, avoid))
            run.retries.append(_Item(item.first + half, item.n - half, avoid))


def ScheduledFlow(simulation, n_events, seed=None, *, devices=None, schedule=None,
                  chunk=None, device=None, **flow_kwargs):
    """A :class:`flowsim.Flow` whose chunks run on several devices of this machine at
    once, cut by a schedule: ``Flow(simulation, n_events, seed,
    executor=ThreadExecutor(devices, schedule=..., chunk=..., device=...))``.

    Parameters
    ----------
    simulation, n_events, seed, **flow_kwargs
        As for :class:`flowsim.Flow` (``events_limit``, ``dtype``,
        ``block_size``, ``jit_compile``, ...).  ``events_limit`` caps every
        chunk.
    devices : None, int, list of str or dict
        ``None`` (default): every logical device, GPUs first then CPU:0 (and
        CPU:1... if :func:`flowsim.set_virtual_cpus` split the CPU).  An int
        ``n``: the first ``n`` of those.  A list such as ``["GPU:0", "CPU:0"]``:
        exactly those (no repeats).  A dict ``{"GPU:0": 1.0, "CPU:0": 0.02}``:
        those devices with relative weights for ``schedule="static"``.
    device : str or None
        Flow's keyword, accepted as ``devices=[device]``.
    schedule : {"weighted", "static", "dynamic", "guided"}
        How an iteration is cut (:mod:`flowsim.schedule`).  Default
        ``"weighted"``: chunks in proportion to each device's throughput,
        measured on earlier chunks and iterations (chunks that included
        compiling the kernel are not measured); a device whose speed is not
        known yet runs probe chunks of ``chunk`` blocks first.  ``"static"``:
        one share per device fixed up front (equal, or the ``devices`` dict
        weights).  ``"dynamic"``: chunks of ``chunk`` blocks to the first idle
        device.  ``"guided"``: libgomp's ``max(ceil(remaining/P), chunk)``.
        The schedule never changes the bits, only the time.
    chunk : int or None
        In blocks.  ``dynamic``: the chunk (default ``events_limit``).
        ``guided`` / ``weighted``: the smallest chunk (default 1).
        ``static``: the largest piece of a share (default ``events_limit``).

    Caveats: on a mix of CPU and GPU devices the blocks a CPU runs may round
    differently from a GPU, so bits there depend on the (timing-dependent)
    schedule; on one device type they never do.  Thread settings:
    :func:`flowsim.core.backend.thread_settings`.
    """
    return backend_flow("ScheduledFlow", lambda: ThreadExecutor(
        devices, schedule=schedule, chunk=chunk, device=device, name="scheduled"),
        simulation, n_events, seed, flow_kwargs)


def ThreadPoolFlow(simulation, n_events, seed=None, *, devices=None, schedule=None,
                   chunk=None, device=None, **flow_kwargs):
    """Every device of this machine, one worker thread each: :func:`ScheduledFlow`
    with its default schedule (``"weighted"``) and ``Result.meta["backend"]``
    ``"threads"``.

    Takes the same keywords (``devices``, ``schedule``, ``chunk``, and those of
    :class:`flowsim.Flow`); see :func:`ScheduledFlow`.
    """
    return backend_flow("ThreadPoolFlow", lambda: ThreadExecutor(
        devices, schedule=schedule, chunk=chunk, device=device, name="threads"),
        simulation, n_events, seed, flow_kwargs)
