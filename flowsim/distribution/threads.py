"""Every device of one machine: one worker thread per TensorFlow logical device.

:class:`ThreadExecutor` runs an iteration's chunks on several devices at once,
cut by a policy of :mod:`flowsim.schedule`; :func:`ScheduledFlow` and
:func:`ThreadPoolFlow` build a :class:`flowsim.Flow` with one.  Each worker runs
its chunks inside its device scope through
:meth:`flowsim.core.backend.Executor.compute` (one compiled function per
device, traced once) and reports it to the Flow, so every chunk lands in
``Result.timeline``.  Rows are added in block order: every device count and
schedule gives the bits of :class:`flowsim.Flow` on one device type; on a mix of
types (CPUs and GPUs may round differently) each type runs a fixed range of
blocks (:mod:`flowsim.distribution.device_kinds`), so the bits still never depend
on timing.

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
import time

from .. import schedule as sched_mod
from ..core import interrupts
from ..core.backend import Executor, set_threads, thread_settings
from ..core.blocks import check_count
from ..core.flow import backend_flow
from ..core.kernel import trace_counts
from ..core.lazy_tf import planned_gpu_workers, select_devices, tf, virtual_cpus
from ..core.log import logger
from . import device_kinds as kinds

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
    """A chunk (to retry after a device ran out of memory: on a device of its type)."""

    __slots__ = ("first", "n", "avoid", "kind")

    def __init__(self, first, n, avoid, kind):
        self.first, self.n, self.avoid, self.kind = first, n, frozenset(avoid), kind


class _Run:
    """State shared by the workers of one iteration (guarded by ``cond``): one
    scheduler per device type (:func:`flowsim.distribution.device_kinds.kind_split`)
    and, per worker, ``(scheduler, index in it, first block of its range, type)``."""

    def __init__(self, it, parts):
        self.it = it
        self.cond = threading.Condition()
        self.place = {}
        for kind, workers, offset, scheduler in parts:
            for local, w in enumerate(workers):
                self.place[w] = (scheduler, local, offset, kind)
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

    ``devices``, ``schedule``, ``chunk``, ``device``, ``type_weights``: see
    :class:`ScheduledFlow` (the same Flow, built in one call).  Learned device speeds
    and out-of-memory caps carry over from one iteration to the next.  The first
    ThreadExecutor of a process sizes TensorFlow's thread pools if TensorFlow
    has not started (``thread_settings`` holds what is in force).
    """

    def __init__(self, devices=None, *, schedule=None, chunk=None, device=None,
                 name="scheduled", type_weights=None):
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
        self.type_weights = None if type_weights is None else dict(type_weights)
        kinds.type_weights_of(self._devices, self.weights, self.type_weights)  # checks
        self.throughput = {}                   # (type, its workers) -> Throughput
        self.caps = [None] * len(self._devices)

    def devices(self):
        return list(self._devices)

    def meta(self):
        totals = kinds.type_weights_of(self._devices, self.weights, self.type_weights)
        if len(totals) == 1:
            return {"schedule": self.schedule}
        return {"schedule": self.schedule, "type_weights": totals,
                "device_types": {d: kinds.kind_of(d) for d in self._devices}}

    def _parts(self, it, per):
        """``[(type, workers, first block, Scheduler)]`` of one iteration."""
        parts = []
        for kind, workers, first, n in kinds.kind_split(it.grid.n_blocks, self._devices,
                                                        self.weights, self.type_weights):
            key = (kind, tuple(workers))
            tp = self.throughput.setdefault(key, sched_mod.Throughput(len(workers)))
            weights = None if self.weights is None else [self.weights[w] for w in workers]
            scheduler = sched_mod.Scheduler(
                self.schedule, n, len(workers), chunk=self.chunk, max_chunk=per,
                weights=weights if weights and sum(weights) > 0 else None,
                caps=[self.caps[w] or per for w in workers], throughput=tp.decayed(DECAY))
            parts.append((kind, workers, first, scheduler))
        return parts

    def execute(self, it):
        _ = it.width                              # probes the integrand, once
        per = it.grid.blocks_per_call(it.events_limit)
        parts = self._parts(it, per)
        run = _Run(it, parts)
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
        for kind, workers, _, scheduler in parts:
            self.throughput[(kind, tuple(workers))] = scheduler.throughput
            for local, w in enumerate(workers):
                self.caps[w] = scheduler.caps[local] if scheduler.caps[local] < per else None
        if run.error is not None:
            raise run.error
        return run.rows.result()

    def _kin(self, run, w):
        """The devices of worker ``w``'s type."""
        kind = run.place[w][3]
        return {d for v, d in enumerate(self._devices) if run.place[v][3] == kind}

    def _take(self, run, w):
        """Next chunk for worker ``w`` (a retry of its type first), or None; under
        ``run.cond``."""
        device = self._devices[w]
        kin = self._kin(run, w)
        for i, item in enumerate(run.retries):
            if item.kind == run.place[w][3] and (device not in item.avoid
                                                 or item.avoid >= kin):
                del run.retries[i]
                return item
        scheduler, local, offset, kind = run.place[w]
        got = scheduler.next(local, run.it.now())
        return None if got is None else _Item(offset + got[0], got[1], (), kind)

    def _chunk(self, run, w, item):
        """Run ``item`` on worker ``w``'s device: ``(rows, start, end)``."""
        device, it = self._devices[w], run.it
        wait = kinds.delay(device)
        if wait:
            time.sleep(wait)
        start = it.now()
        out = kinds.simulate(device, self.compute(it.task, item.first, item.n, device))
        return out, start, it.now()

    def _work(self, run, w):
        device, it = self._devices[w], run.it
        key = (type(it.task.simulation).__name__, device)
        scheduler, local = run.place[w][:2]
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
                traces, begin = trace_counts[key], it.now()
                try:
                    out, start, end = self._chunk(run, w, item)
                except tf().errors.ResourceExhaustedError as exc:
                    with run.cond:
                        self._out_of_memory(run, w, item, exc, begin, it.now())
                        run.cond.notify_all()
                    continue
                it.chunk(device, item.first, item.n, start, end)
                with run.cond:
                    run.rows.add(item.first, out)
                    run.left -= item.n
                    if scheduler.busy[local] is not None:
                        scheduler.done(local, item.n, end - start, end,
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
        scheduler, local = run.place[w][:2]
        if scheduler.busy[local] is not None:
            scheduler.failed(local)
        scheduler.caps[local] = max(1, min(scheduler.caps[local], item.n // 2))
        run.it.chunk(device, item.first, item.n, start, end, progress=False,
                     failed=type(exc).__name__)
        avoid = set(item.avoid) | {device}
        kin = self._kin(run, w)
        if item.n == 1 and avoid >= kin:
            run.error = exc
            return
        logger.warning("%s ran out of memory on blocks %d..%d; retrying %s", device,
                       item.first, item.first + item.n - 1,
                       "elsewhere" if len(kin) > 1 else "in smaller chunks")
        if item.n == 1:
            run.retries.append(_Item(item.first, 1, avoid, item.kind))
        else:
            half = item.n // 2
            run.retries.append(_Item(item.first, half, avoid, item.kind))
            run.retries.append(_Item(item.first + half, item.n - half, avoid, item.kind))


def ScheduledFlow(simulation, n_events, seed=None, *, devices=None, schedule=None,
                  chunk=None, device=None, type_weights=None, **flow_kwargs):
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
    type_weights : dict or None
        On a mix of device types (GPUs and CPU:0): each type's declared weight per
        device, ``{"GPU": 20.0, "CPU": 1.0}`` by default
        (:data:`flowsim.distribution.device_kinds.TYPE_WEIGHTS`; a ``devices`` dict's
        weights come first).  An iteration's blocks are cut into one contiguous range
        per type in proportion to its devices' weights, before any schedule runs;
        the schedule then shares each range among that type's devices.  So a CPU and
        a GPU, which may round the same block differently, never swap blocks with
        timing: the bits depend on the devices and weights only, and
        ``Result.meta["type_weights"]`` holds the weights to pass back.  On one
        device type (the usual CPU-only or GPU-only run) they play no part.

    Caveats: measured speeds balance the devices within a type, never between
    types: give weights close to the types' real speeds (measure them with
    ``flowsim devices --check``).  Thread settings:
    :func:`flowsim.core.backend.thread_settings`.
    """
    return backend_flow("ScheduledFlow", lambda: ThreadExecutor(
        devices, schedule=schedule, chunk=chunk, device=device, name="scheduled",
        type_weights=type_weights), simulation, n_events, seed, flow_kwargs)


def ThreadPoolFlow(simulation, n_events, seed=None, *, devices=None, schedule=None,
                   chunk=None, device=None, type_weights=None, **flow_kwargs):
    """Every device of this machine, one worker thread each: :func:`ScheduledFlow`
    with its default schedule (``"weighted"``) and ``Result.meta["backend"]``
    ``"threads"``.

    Takes the same keywords (``devices``, ``schedule``, ``chunk``, ``type_weights``,
    and those of :class:`flowsim.Flow`); see :func:`ScheduledFlow`.
    """
    return backend_flow("ThreadPoolFlow", lambda: ThreadExecutor(
        devices, schedule=schedule, chunk=chunk, device=device, name="threads",
        type_weights=type_weights), simulation, n_events, seed, flow_kwargs)
