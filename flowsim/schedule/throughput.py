"""Per-worker speed and run-time spread learned from finished chunks (no TensorFlow)."""
import math


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
