"""The book's bests kept by chunks of rows, for steps of many order passes.

Usage (inside :func:`flowsim.markets.kernel.run`)::

    chunks = make(S, L, counted)     # Whole where a step has few passes
    book = book + chunks.empty()     # the chunk arrays ride in the book tuple
    book = chunks.fresh(t, book)     # at the start of step t
    bk, ak, nb, na = chunks.bests(t, book)
    book = chunks.placed(t, book, s, bid, ask, exp)   # after writing them in row s
    book = chunks.paired(t, book, b_row, a_row)  # after removing a bid and an ask row

A market's best bid and ask keys and its depths are reductions over the whole
``[rows, L]`` book, and a step of shock_transfer makes 33 order passes (three normal
orders, each followed by up to five arbitrage turns of two unit orders), each reading
the best keys.  Here the rows are cut into ``n`` chunks of ``G`` rows (``G`` about
``sqrt(4 rows / 9)``, padded rows stay empty) and each chunk keeps its own best keys
and depths ``[n, L]``: a pass reduces ``n`` chunk values, a new order raises its
chunk's bests and depths (the row it takes held no live order), and the chunks of the
rows a pairing removes are reduced again.  Within a step an order's liveness (expiry
>= t) changes only by placement and pairing, so the chunks are reduced whole once a
step (:meth:`fresh`).
Maxima, minima and integer counts do not depend on the order of reduction: the bests
are the bits of the whole-book reduction.
"""
import math

import numpy as np

from ..core.lazy_tf import tf

_IMIN = np.iinfo(np.int64).min
_IMAX = np.iinfo(np.int64).max


def stats(live, bidkey, askkey, counted, axis):
    """``(best bid key, best ask key, bid depth, ask depth)`` reduced over ``axis``:
    live rows only, a row counted in the depth where ``counted`` (None: every row)."""
    t = tf()
    bk = t.reduce_max(t.where(live, bidkey, _IMIN), axis=axis)
    ak = t.reduce_min(t.where(live, askkey, _IMAX), axis=axis)
    if counted is not None:           # an order of several units counts once
        live = live & counted
    nb = t.reduce_sum(t.cast(live & (bidkey != _IMIN), t.int64), axis=axis)
    na = t.reduce_sum(t.cast(live & (askkey != _IMAX), t.int64), axis=axis)
    return bk, ak, nb, na


def make(S, L, counted):
    """:class:`Chunks` for a block of ``L`` markets' columns where steps make many
    order passes (several markets with a high-frequency phase), else :class:`Whole`.
    ``counted``: :func:`flowsim.markets.kernel.unit_rows` (None: every row counts)."""
    if S.n_venues == 1 or not S.hifreq or S.extra_order or not S.book_chunks:
        return Whole(S.layout.rows, counted)
    return Chunks(S.layout.rows, L, counted)


class Whole:
    """The book without chunks: every pass reduces all its ``rows`` (the interface of
    :class:`Chunks`, its updates doing nothing)."""

    def __init__(self, rows, counted):
        self.rows, self.counted = rows, counted

    def empty(self):
        return ()

    def fresh(self, t_step, book):
        return book

    def placed(self, t_step, book, row, bid, ask, expiry):
        return book

    def paired(self, t_step, book, b_row, a_row):
        return book

    def bests(self, t_step, book, xtra=None):
        """``(bk, ak, nb, na)`` ``[L]``: the live orders' best keys and depths;
        ``xtra``: live keys ``(bid, ask)`` of the order kept outside the ring (events),
        or None."""
        t = tf()
        bk, ak, nb, na = stats(book[2] >= t_step, book[0], book[1], self.counted, 0)
        if xtra is not None:
            xb, xa = xtra
            bk, ak = t.maximum(bk, xb), t.minimum(ak, xa)
            nb = nb + t.cast(xb != _IMIN, t.int64)
            na = na + t.cast(xa != _IMAX, t.int64)
        return bk, ak, nb, na


class Chunks:
    """Chunks of ``G`` rows of a ``[rows, L]`` book (see the module docstring).
    ``rows`` is padded to ``n G`` (:attr:`rows`); ``counted`` ``[rows, L]`` bool or
    None."""

    def __init__(self, rows, L, counted):
        t = tf()
        self.G = max(1, int(round(math.sqrt(4 * rows / 9))))
        self.n = -(-rows // self.G)
        self.rows, self.L = self.n * self.G, L
        pad = self.rows - rows
        if counted is not None and pad:
            counted = t.concat([counted, t.zeros([pad, L], t.bool)], 0)
        self.counted = counted
        self.cols = t.range(L, dtype=t.int64)

    def empty(self):
        """The four chunk arrays ``[n, L]`` before the first step (:meth:`fresh`
        fills them)."""
        t = tf()
        z = t.zeros([self.n, self.L], t.int64)
        return (z, z, z, z)

    def fresh(self, t_step, book):
        """``book`` with every chunk reduced again (its liveness at step ``t_step``)."""
        t = tf()
        shape = [self.n, self.G, self.L]
        cnt = None if self.counted is None else t.reshape(self.counted, shape)
        return book[:3] + stats(t.reshape(book[2] >= t_step, shape),
                                t.reshape(book[0], shape), t.reshape(book[1], shape),
                                cnt, 1)

    def bests(self, t_step, book, xtra=None):
        """``(bk, ak, nb, na)`` ``[L]`` of the whole book from its chunks (``xtra``:
        must be None, :func:`make` keeps no chunks with an order outside the ring)."""
        t = tf()
        assert xtra is None
        cbk, cak, cnb, cna = book[3:7]
        return (t.reduce_max(cbk, axis=0), t.reduce_min(cak, axis=0),
                t.reduce_sum(cnb, axis=0), t.reduce_sum(cna, axis=0))

    def placed(self, t_step, book, row, bid, ask, expiry):
        """``book`` after row ``row`` (a scalar, every market's) took new orders
        ``[L]`` (bid key ``IMIN``, ask key ``IMAX`` and expiry -1 where none): its
        chunk's bests raised and depths counted.  The row held no live order (the
        ring's rows outlive their orders), so the book itself is not read (XLA
        would copy it to write it in place after such a read)."""
        t = tf()
        c = row // self.G
        live = expiry >= t_step
        if self.counted is not None:
            live = live & t.gather(self.counted, row)
        cbk, cak, cnb, cna = (t.gather(x, c) for x in book[3:7])
        new = (t.maximum(cbk, bid), t.minimum(cak, ask),
               cnb + t.cast(live & (bid != _IMIN), t.int64),
               cna + t.cast(live & (ask != _IMAX), t.int64))
        return book[:3] + tuple(t.tensor_scatter_nd_update(x, [[c]], v[None])
                                for x, v in zip(book[3:7], new))

    def paired(self, t_step, book, b_row, a_row):
        """``book`` after a pairing removed row ``b_row`` and row ``a_row`` (``[L]``,
        one per market; where nothing paired the chunks are reduced again unchanged)."""
        for rows in (b_row, a_row):
            book = self._again(t_step, book, rows // self.G)
        return book

    def _again(self, t_step, book, c):
        """``book`` with chunk ``c[i]`` of each market ``i`` reduced again."""
        t = tf()
        rows = c[None, :] * self.G + t.range(self.G, dtype=t.int64)[:, None]     # [G, L]
        at = t.stack([rows, t.broadcast_to(self.cols[None, :], [self.G, self.L])], -1)
        part = [t.gather_nd(x, at) for x in book[:3]]
        cnt = None if self.counted is None else t.gather_nd(self.counted, at)
        new = stats(part[2] >= t_step, part[0], part[1], cnt, 0)
        where = t.stack([c, self.cols], 1)
        return book[:3] + tuple(t.tensor_scatter_nd_update(x, where, v)
                                for x, v in zip(book[3:7], new))
