"""The block grid of an iteration, and the block-order reduction.

An iteration of ``n_events`` is cut into ``n_blocks`` blocks of ``block_size``
events (the last one may be partly empty; its missing events are masked).  The
random numbers of a block depend only on (seed, iteration, block index), and a
chunk returns one row of partial sums per block.  The driver adds rows in block
order with :func:`reduce_rows`, so totals cannot depend on how blocks were
grouped into chunks, where they ran or when they finished.
"""
import math
import os
import re
from dataclasses import dataclass

import numpy as np

#: Block sizes are multiples of this, so in-block sums can use a fixed
#: two-stage tree (see :func:`flowsim.core.sums.block_sum`).
BLOCK_QUANTUM = 64
#: Default upper bound on the events of one block.
MAX_BLOCK = 1 << 16


def check_count(name, value, minimum=1):
    """Raise a clear error unless ``value`` is an integer >= ``minimum``."""
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        if isinstance(value, float) and value.is_integer():
            raise TypeError(f"{name} must be an integer, got the float {value!r}; "
                            f"write {int(value)}")
        raise TypeError(f"{name} must be an integer, got {value!r}")
    if value < minimum:
        raise ValueError(f"{name} must be >= {minimum}, got {value!r}")
    return int(value)


def default_block_size(n_events, max_block=MAX_BLOCK):
    """Even blocks of at most ``max_block`` events, rounded up to the quantum.

    With ``n_events`` = 2*10^6 this gives 31 blocks of 64,576 events, so at most
    ``BLOCK_QUANTUM * n_blocks`` events per iteration are padding.
    """
    n_blocks = math.ceil(n_events / max_block)
    per_block = math.ceil(n_events / n_blocks)
    return math.ceil(per_block / BLOCK_QUANTUM) * BLOCK_QUANTUM


@dataclass(frozen=True)
class BlockGrid:
    """``n_events`` laid out in blocks of ``block_size``."""

    n_events: int
    block_size: int

    def __post_init__(self):
        check_count("n_events", self.n_events)
        check_count("block_size", self.block_size)
        if self.block_size % BLOCK_QUANTUM:
            raise ValueError(f"block_size must be a multiple of {BLOCK_QUANTUM}, "
                             f"got {self.block_size}")

    @property
    def n_blocks(self):
        return math.ceil(self.n_events / self.block_size)

    def blocks_per_call(self, events_limit):
        """Whole blocks in one call of at most ``events_limit`` events (at least 1)."""
        return max(1, events_limit // self.block_size)

    def events_in(self, first_block, n_blocks):
        """Real (unmasked) events in blocks ``first_block .. first_block+n_blocks-1``."""
        start = first_block * self.block_size
        stop = min((first_block + n_blocks) * self.block_size, self.n_events)
        return max(stop - start, 0)


def cut(first, n, per):
    """Blocks ``first .. first+n-1`` as runs ``[(first, n)]`` of at most ``per`` blocks."""
    return [(b, min(per, first + n - b)) for b in range(first, first + n, per)]


def reduce_rows(rows):
    """Add per-block rows ``[n_blocks, width]`` in block order (float64).

    Written as an explicit left-to-right loop: the bits of the total are a
    function of the rows alone, the same on every backend.
    """
    rows = np.asarray(rows, dtype=np.float64)
    total = rows[0].copy()
    for row in rows[1:]:
        total += row
    return total


class RowCollector:
    """Gathers chunk rows into block order, checking every block arrives once."""

    def __init__(self, n_blocks, width):
        self.rows = np.zeros((n_blocks, width), dtype=np.float64)
        self.seen = np.zeros(n_blocks, dtype=np.int64)

    def add(self, first_block, rows):
        rows = np.asarray(rows, dtype=np.float64)
        n = rows.shape[0]
        n_blocks, width = self.rows.shape
        if rows.ndim != 2 or rows.shape[1] != width:
            raise RuntimeError(f"block bookkeeping failed: got rows of width "
                               f"{rows.shape[-1] if rows.ndim == 2 else list(rows.shape)}, "
                               f"expected {width}")
        if first_block < 0 or first_block + n > n_blocks:
            raise RuntimeError(f"block bookkeeping failed: a chunk of blocks {first_block}.."
                               f"{first_block + n - 1} is outside the grid of {n_blocks} blocks")
        self.rows[first_block:first_block + n] = rows
        self.seen[first_block:first_block + n] += 1

    def result(self):
        missing = np.flatnonzero(self.seen == 0)
        repeated = np.flatnonzero(self.seen > 1)
        if missing.size or repeated.size:
            raise RuntimeError(
                f"block bookkeeping failed: missing blocks {missing[:10].tolist()}, "
                f"blocks received twice {repeated[:10].tolist()}; refusing a partial sum")
        return self.rows


def available_memory():
    """Bytes of free memory (``SC_AVPHYS_PAGES``, or the cgroup's room if less); None if unknown."""
    try:
        free = os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError, AttributeError):
        return None
    try:
        with open("/sys/fs/cgroup/memory.max") as fh, open("/sys/fs/cgroup/memory.current") as cur:
            limit = fh.read().strip()
            if limit != "max":
                free = min(free, int(limit) - int(cur.read()))
    except (OSError, ValueError):
        pass
    return free


#: Share of a device's memory the events of one call may fill.
DEVICE_MEMORY_SHARE = 0.5
#: Bytes an event of a block takes per dimension plus one, on a device that reports its
#: memory: its uniforms, the integrand's temporaries and the in-block sums in float64,
#: with room to spare.
EVENT_BYTES = 128


def device_memory(devices):
    """Bytes TensorFlow may allocate on the smallest GPU among ``devices`` (names like
    ``"GPU:0"``), or None when none of them is a local GPU that reports it.  A CPU
    never does: there TensorFlow is not asked (and not imported)."""
    gpus = [d for d in devices if isinstance(d, str) and re.fullmatch(r"GPU:\d+", d)]
    if not gpus:
        return None
    from . import tf_private
    limits = tf_private.device_memory_limits() or {}
    known = [limits[d] for d in gpus if limits.get(d)]
    return min(known) if known else None


def memory_defaults(memory, dim, events_limit):
    """``(largest default block, events_limit)`` for a device of ``memory`` bytes
    (None: ``(MAX_BLOCK, events_limit)``, the choice on CPUs).

    The events of one call may fill :data:`DEVICE_MEMORY_SHARE` of the memory at
    :data:`EVENT_BYTES` ``* (dim + 1)`` bytes each: ``events_limit`` is lowered to
    that (it never changes the bits), and the default block size only when not even
    a block of :data:`MAX_BLOCK` events fits (a device of less than about
    ``16 MiB * (dim + 1)``): that changes the random stream, as ``block_size=``
    does, so such a device gives other bits than a larger one.
    """
    if memory is None:
        return MAX_BLOCK, events_limit
    fits = int(memory * DEVICE_MEMORY_SHARE) // (EVENT_BYTES * (max(int(dim or 0), 0) + 1))
    largest = max(BLOCK_QUANTUM, min(MAX_BLOCK, fits // BLOCK_QUANTUM * BLOCK_QUANTUM))
    return largest, max(BLOCK_QUANTUM, min(events_limit, fits))


def out_of_memory_message(device, first_block, n_blocks, block_size):
    """One line: ``device`` ran out of memory on blocks ``first_block..`` of
    ``block_size`` events, and the keyword that lowers what was tried."""
    blocks = (f"a chunk of {n_blocks:,} blocks of {block_size:,} events (blocks "
              f"{first_block}..{first_block + n_blocks - 1}, {n_blocks * block_size:,} "
              f"events)" if n_blocks > 1 else
              f"one block of {block_size:,} events (block {first_block})")
    lower = (f"lower events_limit= (--events-limit) below {n_blocks * block_size:,}: the bits "
             f"stay the same" if n_blocks > 1 else
             f"lower block_size= (--block-size) below {block_size:,}: a new block size "
             f"changes the random stream")
    return f"{device} ran out of memory on {blocks}; {lower}"


def layout(simulation):
    """``[(name, shape, start, stop)]`` of the accumulators in a row, and the width."""
    acc = simulation.accumulators()
    out, start = [], 0
    for name in sorted(acc):
        shape = tuple(int(s) for s in acc[name])
        size = int(np.prod(shape, dtype=np.int64)) if shape else 1
        out.append((name, shape, start, start + size))
        start += size
    return out, start


def check_memory(simulation, n_blocks, available=None):
    """Refuse, before any compiling, a run whose rows ``[n_blocks, width]`` float64 (one per
    block, held by the driver) would not fit in ``available`` bytes (default: free memory)."""
    _, width = layout(simulation)
    row, available = 8 * width, available_memory() if available is None else available
    if available is None or row * n_blocks <= available:
        return
    hists = sorted(getattr(simulation, "histograms", ()), key=lambda h: -h.bins)
    what = (f"histogram {hists[0].name!r} has {hists[0].bins:,} bins x 2 accumulators; "
            if hists else "")
    raise ValueError(
        f"{type(simulation).__name__}: the accumulators need {_bytes(row)} per block row "
        f"({what}{width:,} float64) x {n_blocks:,} blocks = {_bytes(row * n_blocks)}, but only "
        f"{_bytes(available)} of memory is free; use fewer histogram bins or fewer blocks "
        f"(a larger block_size or fewer n_events)")


def _bytes(n):
    return next(f"{n / 1024 ** i:.1f} {u}" for i, u in enumerate(("B", "KiB", "MiB", "GiB", "TiB"))
                if n < 1024 ** (i + 1) or u == "TiB")
