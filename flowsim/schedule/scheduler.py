"""The state machine a runner asks for its next chunk (``next`` / ``done``), driven by the
caller's clock (no TensorFlow)."""
import math

from ..core.blocks import check_count
from .policies import check_policy, factoring_ratio, fair_share, guided_chunk, static_shares
from .throughput import Throughput


class Scheduler:
    """Hands out the fresh blocks of one iteration, chunk by chunk.

    Parameters
    ----------
    policy : {"static", "dynamic", "guided", "weighted"}
        See the module docstring.
    n_blocks : int
        Blocks in the iteration (>= 0).
    workers : int
        Number of workers (devices), >= 1.
    chunk : int or None
        ``dynamic``: the fixed chunk (default: ``max_chunk``).  ``guided`` and
        ``weighted``: the smallest chunk and the probe size (default 1).
        ``static``: the largest piece of a share (default ``max_chunk``).
    max_chunk : int or None
        Largest chunk for any worker (the Flow's ``events_limit`` in blocks);
        default unbounded.
    weights : sequence of float or None
        ``static`` only: share of each worker (default equal).
    throughput : Throughput or None
        ``weighted`` only: speeds learned so far (from earlier iterations).
        It is updated in place by :meth:`done`.
    caps : sequence of int or None
        Per-worker largest chunk (a runner lowers a worker's cap after it ran
        out of memory); combined with ``max_chunk``.

    Deterministic: the answer of :meth:`next` depends only on the calls made
    so far and the ``now`` values passed (the caller's clock, in the same
    unit as the measured seconds).
    """

    def __init__(self, policy, n_blocks, workers, chunk=None, max_chunk=None, weights=None,
                 throughput=None, caps=None):
        self.policy = check_policy(policy)
        self.n_blocks = check_count("n_blocks", n_blocks, minimum=0)
        self.workers = check_count("workers", workers)
        self.max_chunk = math.inf if max_chunk is None else check_count("max_chunk", max_chunk)
        if chunk is not None:
            chunk = check_count("chunk", chunk)
        if policy == "dynamic":
            chunk = chunk or self.max_chunk
            if chunk == math.inf:
                raise ValueError("dynamic scheduling needs chunk= or max_chunk=")
        self.given_chunk = chunk
        self.chunk = chunk or 1
        self.caps = list(caps) if caps is not None else [self.max_chunk] * self.workers
        if len(self.caps) != self.workers:
            raise ValueError(f"caps has {len(self.caps)} entries for {self.workers} workers")
        self.throughput = throughput if throughput is not None else Throughput(self.workers)
        self.busy = [None] * self.workers          # (start, blocks) of the chunk in flight
        self.cursor = 0                            # next fresh block (shared policies)
        self.remaining = self.n_blocks
        self.shares = None
        if policy == "static":
            w = [1.0] * self.workers if weights is None else list(weights)
            if len(w) != self.workers:
                raise ValueError(f"weights has {len(w)} entries for {self.workers} workers")
            self.shares = [list(s) for s in static_shares(self.n_blocks, w)]

    def cap(self, worker):
        return min(self.caps[worker], self.max_chunk)

    def next(self, worker, now=0.0):
        """``(first_block, n_blocks)`` for ``worker`` asking at time ``now``, or None.

        None means no fresh work for this worker *now*: either none is left
        (``remaining == 0``) or, under ``weighted``, the busy workers will finish
        it sooner; ask again after another worker's chunk finishes.
        """
        if self.busy[worker] is not None:
            raise RuntimeError(f"worker {worker} asked for a chunk while running one")
        if self.policy == "static":
            first, left = self.shares[worker]
            if left == 0:
                return None
            n = min(left, self.cap(worker), self.given_chunk or math.inf)
            self.shares[worker] = [first + n, left - n]
        else:
            if self.remaining == 0:
                return None
            n = self._size(worker, now)
            if n is None:
                return None
            first = self.cursor
            self.cursor += n
        n = int(n)
        self.remaining -= n
        self.busy[worker] = (now, n)
        return first, n

    def _size(self, worker, now):
        r, cap = self.remaining, self.cap(worker)
        if self.policy == "dynamic":
            return min(r, self.chunk, cap)
        if self.policy == "guided":
            return min(guided_chunk(r, self.workers, self.chunk), cap)
        if self.workers == 1:
            return min(r, cap)
        return self._weighted_size(worker, now, r, cap)

    def _weighted_size(self, worker, now, r, cap):
        """Weighted factoring: ``worker``'s share of the ``r`` blocks left at its speed,
        None if the busy workers finish them first."""
        tp = self.throughput
        costs = [tp.cost(w) for w in range(self.workers)]
        if costs[worker] is None:                  # probe an unmeasured worker
            return min(r, self.chunk, cap)
        measured = [c is not None for c in costs]
        known = [c for c in costs if c is not None]
        guess = (sum(a for a, _ in known) / len(known),     # unmeasured ones: the average
                 sum(b for _, b in known) / len(known))
        costs = [c or guess for c in costs]
        # when each worker could start on new work: after its chunk in flight and
        # one more chunk overhead
        free = [(now if w == worker or run is None else max(now, run[0] + a + run[1] * b)) + a
                for w, (run, (a, b)) in enumerate(zip(self.busy, costs))]
        if self._decline(worker, costs, free, r, measured):
            return None
        share = fair_share(r, [1.0 / b for _, b in costs], free, now)[worker]
        x = factoring_ratio(r, self.workers, tp.cv())
        return min(r, cap, max(math.floor(share / x + 1e-9), self.chunk))

    def _decline(self, worker, costs, free, remaining, measured):
        """Whether the busy workers finish ``remaining`` before ``worker`` ends a chunk.

        Only measured workers count: a probe in flight on a device of unknown
        speed (guessed average) may be a slow one that is far from done.
        """
        finish = free[worker] + min(self.chunk, remaining) * costs[worker][1]
        capacity = 0.0
        for w, run in enumerate(self.busy):
            if w != worker and run is not None and measured[w]:
                capacity += max(0.0, finish - free[w]) / costs[w][1]
        return capacity >= remaining

    def done(self, worker, blocks, seconds, now=None, measured=True):
        """``worker`` finished its chunk of ``blocks`` in ``seconds``.

        ``measured=False`` (e.g. the chunk included compiling the kernel) keeps
        the time out of the speed estimate.
        """
        self.busy[worker] = None
        if measured:
            self.throughput.add(worker, blocks, seconds)

    def failed(self, worker):
        """``worker``'s chunk failed; the runner re-runs its blocks elsewhere."""
        self.busy[worker] = None
