"""How an iteration is cut into chunks: pure schedule functions (no TensorFlow).

An iteration is ``n_blocks`` blocks; a chunk is a run of consecutive blocks
handed to one worker (device).  Because every block returns its own row and
rows are added in block order, the schedule changes *when and where* blocks run,
never the bits of the result.  Four policies (OpenMP's names, libgomp's rules):

``"static"``
    Each worker gets one contiguous share fixed up front: near-equal, or in
    proportion to ``weights``.  Shares are cut into pieces of at most the
    worker's cap.  No balancing at run time.
``"dynamic"``
    Fixed chunks of ``chunk`` blocks to whichever worker asks (VegasFlow's
    scheme; its default chunk is ``events_limit``).
``"guided"``
    libgomp: next chunk = ``max(ceil(remaining / P), chunk)`` whole blocks
    (never more than what remains or the worker's cap).
``"weighted"``
    Weighted factoring (Hummel et al.): a worker gets ``1/x`` of its *fair
    share* of what remains, never less than ``chunk`` blocks.  The fair share
    is what it would run if all workers, busy ones from the moment their chunk
    in flight ends, finished the rest together at their measured speeds; so a
    batch splits the remaining work in proportion to speed whatever order the
    workers ask in.  ``x`` is factoring's batch ratio
    ``1 + b² + b·sqrt(b² + 2)``, ``b = P·cv / (2·sqrt(R))``, from the measured
    coefficient of variation ``cv`` of a block's run time: steady devices
    (small ``cv``) get nearly all the work in one batch, like ``static`` with
    the right weights; noisy ones smaller batches.  Until ``cv`` is measured,
    ``x = 2`` (half of the rest per batch).  Speeds and ``cv`` are learned
    from finished chunks and carried over iterations through
    :class:`Throughput`; a worker of unknown speed gets a probe chunk of
    ``chunk`` blocks.  A worker *declines* work when the busy workers will
    finish everything left before it could finish even one chunk (a CPU beside
    GPUs at the end of an iteration), so a slow device never holds up the fast
    ones.

:class:`Scheduler` is the state machine a runner asks (``next`` / ``done``),
driven by the caller's clock so that it is deterministic;
:func:`simulate` runs it against a model of device speeds and per-chunk
overhead (the discrete-event simulator of ``benchmarks/schedule_sim.py``), and
:func:`chunks` is the resulting chunk sequence: a pure function of
``(n_blocks, workers, speeds, policy, chunk)``.
"""
import heapq
import math
from dataclasses import dataclass

from .blocks import check_count

POLICIES = ("static", "dynamic", "guided", "weighted")
#: Weighted factoring's batch ratio before the run-time spread is measured
#: (half of the remaining work per batch), and its largest value.
FACTOR = 2


def check_policy(policy):
    if policy not in POLICIES:
        raise ValueError(f"schedule must be one of {', '.join(map(repr, POLICIES))}, "
                         f"got {policy!r}")
    return policy


def static_shares(n_blocks, weights):
    """Contiguous shares ``[(first, n)]``, one per weight, in proportion to ``weights``.

    Largest-remainder rounding (ties to the lower index), so the shares add up
    to ``n_blocks`` exactly; equal weights give near-equal parts differing by at
    most one block, the larger ones first (like OpenMP ``static``).
    """
    n_blocks = check_count("n_blocks", n_blocks, minimum=0)
    weights = [float(w) for w in weights]
    if not weights:
        raise ValueError("static_shares needs at least one weight")
    if any(not math.isfinite(w) or w < 0 for w in weights) or sum(weights) <= 0:
        raise ValueError(f"weights must be finite, >= 0 and not all 0, got {weights}")
    total = sum(weights)
    exact = [n_blocks * w / total for w in weights]
    sizes = [math.floor(e) for e in exact]
    order = sorted(range(len(weights)), key=lambda i: (-(exact[i] - sizes[i]), i))
    for i in order[:n_blocks - sum(sizes)]:
        sizes[i] += 1
    out, first = [], 0
    for n in sizes:
        out.append((first, n))
        first += n
    return out


def guided_chunk(remaining, workers, chunk=1):
    """libgomp's guided rule: ``min(remaining, max(ceil(remaining / workers), chunk))``."""
    return min(remaining, max(-(-remaining // workers), chunk))


def factoring_ratio(remaining, workers, cv):
    """Factoring's batch ratio ``x`` (a batch hands out ``remaining / x``).

    Hummel, Schonberg and Flynn (1992): ``x = 1 + b² + b·sqrt(b² + 2)`` with
    ``b = workers·cv / (2·sqrt(remaining))``, ``cv`` the coefficient of
    variation of one block's run time; ``cv=None`` (not measured yet) gives
    :data:`FACTOR`, and ``x`` never exceeds it.
    """
    if cv is None:
        return FACTOR
    b = workers * cv / (2.0 * math.sqrt(max(remaining, 1)))
    return min(float(FACTOR), 1.0 + b * b + b * math.sqrt(b * b + 2.0))


def fair_share(remaining, speeds, free, now=0.0):
    """Blocks each worker would run if all finished ``remaining`` together.

    ``speeds[w]`` in blocks per second, ``free[w]`` the time worker ``w`` is
    free (busy workers: the end of their chunk in flight), raised to ``now``
    if earlier: ``f_w = max(free[w], now)``.  Water-filling: finds the common
    end ``T`` with ``sum(s_w * max(0, T - f_w)) == remaining`` and returns
    ``[s_w * max(0, T - f_w)]``.
    """
    free = [max(f, now) for f in free]
    order = sorted(range(len(speeds)), key=lambda w: free[w])
    rate = done = 0.0
    end = now
    for i, w in enumerate(order):
        rate += speeds[w]
        nxt = free[order[i + 1]] if i + 1 < len(order) else math.inf
        if done + rate * (nxt - free[w]) >= remaining:
            end = free[w] + (remaining - done) / rate
            break
        done += rate * (nxt - free[w])
    return [s * max(0.0, end - f) for s, f in zip(speeds, free)]


class Throughput:
    """What the chunks measured so far say about each worker.

    Per worker, decayed sums over its chunks (``n`` blocks in ``t`` seconds)
    give its throughput :meth:`speed` (all blocks over all seconds) and a cost
    model :meth:`cost`: ``t ≈ a + n·b``, a fixed overhead ``a`` per chunk
    (launch, copy, Python) plus ``b`` seconds per block, fitted by least
    squares once chunks of different sizes were measured.  :meth:`cv` is the
    coefficient of variation of one block's time, pooled over workers: a
    chunk adds ``(t - a - n·b)² / (n·b²)``, its squared deviation from the
    model before it was added (if blocks vary independently, the variance of
    ``t`` is ``n·(cv·b)²``).  ``decayed(f)`` weighs earlier iterations down by
    ``f`` so that the estimates follow a device whose speed changes, yet start
    every iteration informed.
    """

    def __init__(self, workers):
        self.chunks = [0.0] * workers
        self.blocks = [0.0] * workers
        self.seconds = [0.0] * workers
        self.blocks2 = [0.0] * workers          # sum of n^2
        self.cross = [0.0] * workers            # sum of n*t
        self.spread, self.samples = 0.0, 0.0

    @classmethod
    def known(cls, speeds):
        """Exact speeds and no overhead (as if measured over one unit of time each)."""
        tp = cls(len(speeds))
        tp.blocks = [float(s) for s in speeds]
        tp.seconds = [1.0] * len(speeds)
        return tp

    def add(self, worker, blocks, seconds):
        """Record a chunk of ``blocks`` blocks that ran ``seconds`` on ``worker``."""
        if not (seconds > 0 and blocks > 0):
            return
        model = self.cost(worker)
        if model is not None and self.chunks[worker] >= 2:   # fitted: overhead apart
            a, b = model
            self.spread += (seconds - a - blocks * b) ** 2 / (blocks * b * b)
            self.samples += 1
        self.chunks[worker] += 1
        self.blocks[worker] += blocks
        self.seconds[worker] += seconds
        self.blocks2[worker] += blocks * blocks
        self.cross[worker] += blocks * seconds

    def speed(self, worker):
        """Blocks per second, overhead included, or None before any measurement."""
        s = self.seconds[worker]
        return self.blocks[worker] / s if s > 0 and self.blocks[worker] > 0 else None

    def weights(self):
        """Relative speeds of every worker for :func:`static_shares`: measured ones
        as measured, unmeasured ones at the mean of the measured (all 1.0 before
        any measurement)."""
        speeds = [self.speed(w) for w in range(len(self.blocks))]
        known = [s for s in speeds if s]
        if not known:
            return [1.0] * len(speeds)
        mean = sum(known) / len(known)
        return [s if s else mean for s in speeds]

    def cost(self, worker):
        """``(a, b)``: seconds per chunk and per block on ``worker``, or None unmeasured.

        Before two chunk sizes were measured (or when the fit is not
        physical: ``a < 0`` or ``b <= 0``) ``a = 0`` and ``b = 1 / speed``.
        """
        speed = self.speed(worker)
        if speed is None:
            return None
        c, n, t = self.chunks[worker], self.blocks[worker], self.seconds[worker]
        nn, nt = self.blocks2[worker], self.cross[worker]
        det = c * nn - n * n
        if c >= 2 and det > 1e-9 * c * nn:
            b = (c * nt - n * t) / det
            a = (t - b * n) / c
            if b > 0 and a >= 0:
                return a, b
        return 0.0, 1.0 / speed

    def cv(self):
        """Coefficient of variation of a block's time, pooled over workers.

        None until ``max(2, workers)`` chunks were compared with a fitted cost
        model (a worker's third chunk on).
        """
        if self.samples < max(2, len(self.blocks)):
            return None
        return math.sqrt(self.spread / self.samples)

    def decayed(self, factor=0.5):
        out = Throughput(len(self.blocks))
        for name in ("chunks", "blocks", "seconds", "blocks2", "cross"):
            setattr(out, name, [v * factor for v in getattr(self, name)])
        out.spread, out.samples = self.spread * factor, self.samples * factor
        return out

    def __repr__(self):
        return f"Throughput({[self.cost(w) for w in range(len(self.blocks))]})"


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
