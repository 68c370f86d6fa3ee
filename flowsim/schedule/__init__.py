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
from .policies import (
    FACTOR,
    POLICIES,
    check_policy,
    factoring_ratio,
    fair_share,
    guided_chunk,
    static_shares,
)
from .scheduler import Scheduler
from .simulator import Chunk, chunks, efficiency, makespan, simulate
from .throughput import Throughput

__all__ = ["FACTOR", "POLICIES", "Chunk", "Scheduler", "Throughput", "check_policy", "chunks",
           "efficiency", "factoring_ratio", "fair_share", "guided_chunk", "makespan",
           "simulate", "static_shares"]
