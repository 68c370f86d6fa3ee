"""Discrete-event simulator of a schedule on modelled device speeds (no TensorFlow):
:func:`simulate`, :func:`chunks`, :func:`makespan`, :func:`efficiency`."""
import heapq
from dataclasses import dataclass

from ..core.blocks import check_count
from .scheduler import Scheduler
from .throughput import Throughput


@dataclass(frozen=True)
class Chunk:
    """One simulated chunk."""

    worker: int
    first: int
    blocks: int
    start: float
    end: float


def simulate(n_blocks, speeds, policy, chunk=None, max_chunk=None, overhead=0.0,
             iterations=1, known=True, weights=None):
    """Discrete-event run of ``policy`` on workers of the given ``speeds``.

    Parameters
    ----------
    n_blocks : int
        Blocks per iteration.
    speeds : sequence of float
        Blocks per unit time of each worker (> 0).
    policy, chunk, max_chunk, weights
        As for :class:`Scheduler`.
    overhead : float
        Time every chunk costs on top of ``blocks / speed`` (launch, copy,
        Python); it is part of the measured time, as on a real device.
    iterations : int
        Iterations to run; ``weighted`` carries its learned speeds across them
        (decayed by half each iteration).
    known : bool
        ``weighted`` starts with the exact speeds (True) or learns them from
        probe chunks (False).

    Returns a list (one per iteration) of lists of :class:`Chunk`, times
    measured from the start of that iteration.  A worker that is declined
    work waits and asks again whenever another worker's chunk finishes.
    """
    speeds = [float(s) for s in speeds]
    if not speeds or any(not s > 0 for s in speeds):
        raise ValueError(f"speeds must be positive, got {speeds}")
    P = len(speeds)
    tp = Throughput.known(speeds) if known else Throughput(P)
    out = []
    for _ in range(check_count("iterations", iterations)):
        sched = Scheduler(policy, n_blocks, P, chunk=chunk, max_chunk=max_chunk,
                          weights=weights, throughput=tp)
        done, events, seq, waiting = [], [], 0, []

        def ask(w, t, sched=sched, events=events, waiting=waiting):
            nonlocal seq
            got = sched.next(w, t)
            if got is None:
                if sched.remaining or (policy == "static" and sched.shares[w][1]):
                    waiting.append(w)
                return
            first, n = got
            end = t + overhead + n / speeds[w]
            heapq.heappush(events, (end, seq, w, first, n, t))
            seq += 1

        for w in range(P):
            ask(w, 0.0)
        while events:
            end, _, w, first, n, start = heapq.heappop(events)
            sched.done(w, n, end - start, end)
            done.append(Chunk(w, first, n, start, end))
            ask(w, end)
            again, waiting[:] = list(waiting), []
            for v in again:
                if v != w:
                    ask(v, end)
        if sched.remaining:
            raise RuntimeError(f"simulation stalled with {sched.remaining} blocks left")
        out.append(done)
        tp = sched.throughput.decayed()
    return out


def chunks(n_blocks, workers, speeds=None, policy="guided", chunk=None, max_chunk=None,
           weights=None):
    """The chunk sequence ``[(worker, first, n)]`` of one iteration, in start order.

    ``speeds`` (default equal) are the devices' relative speeds (known to
    ``weighted``); the sequence is what the policy gives when a chunk of ``n``
    blocks on worker ``w`` takes ``n / speeds[w]``.  ``weights``: ``static``
    shares (default equal).
    """
    workers = check_count("workers", workers)
    speeds = [1.0] * workers if speeds is None else list(speeds)
    if len(speeds) != workers:
        raise ValueError(f"speeds has {len(speeds)} entries for {workers} workers")
    run = simulate(n_blocks, speeds, policy, chunk=chunk, max_chunk=max_chunk,
                   weights=weights)[0]
    return [(c.worker, c.first, c.blocks)
            for c in sorted(run, key=lambda c: (c.start, c.first))]


def makespan(run):
    """End of the last chunk of a simulated iteration."""
    return max((c.end for c in run), default=0.0)


def efficiency(run, workers):
    """Busy time / (workers x makespan) of a simulated iteration."""
    span = makespan(run)
    return sum(c.end - c.start for c in run) / (workers * span) if span > 0 else float("nan")
