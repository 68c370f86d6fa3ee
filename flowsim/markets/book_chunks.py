"""The book's bests kept by chunks of rows, for steps of many order passes.

Usage (in the compiled step, :mod:`flowsim.markets.kernel`)::

    chunks = make(S, L, counted)     # Whole where a step has few passes
    book = chunks.new_book(L)        # a Book: the three arrays, the chunks' state
    bidkey = chunks.write(book.bidkey, s, new_bid)    # row s (a scalar) of every market
    at = chunks.at(rows, cols)       # indices of gather_nd / scatter: one row per column
    book, after = chunks.fresh(t, book)     # at the start of step t (after: see fresh)
    bk, ak, nb, na = chunks.bests(t, book)
    book = chunks.placed(t, book, s, bid, ask, exp)   # after writing them in row s
    book = chunks.paired(t, book, b_row, a_row)  # after removing a bid and an ask row

A market's best bid and ask keys and its depths are reductions over the whole
``[rows, L]`` book, and a step of shock_transfer makes 33 order passes (three normal
orders, each followed by up to five arbitrage turns of two unit orders), each reading
the best keys.  Here the rows are cut into ``n`` chunks of ``G`` rows (``G`` is
:data:`CHUNK_ROWS`, one cache line; padded rows stay empty) and each chunk keeps its
own best keys and depths (``[4, n, L]``): a pass reduces ``n`` chunk values, a new
order raises its chunk's bests and depths (the row it takes held no live order), and
the chunks of the rows a pairing removes are reduced again.  Within a step an order's
liveness (expiry >= t) changes only by placement and pairing, so the chunks are
reduced whole once a step (:meth:`fresh`).
Maxima, minima and integer counts do not depend on the order of reduction: the bests
are the bits of the whole-book reduction.

:class:`Chunks` keeps the book market by market (``[L, rows]``, the chunks' state
``[4, n, L]``): a chunk's rows are contiguous, so a pairing's two chunks per market are
read whole (in ``[rows, L]`` each of their rows would sit in another cache line, and
those reads and copies of the state would dominate a step of many passes).
:class:`Whole` keeps ``[rows, L]`` (its reductions run over the rows of every market).
"""
from typing import NamedTuple

import numpy as np

from ..core.lazy_tf import tf

_IMIN = np.iinfo(np.int64).min
_IMAX = np.iinfo(np.int64).max


class Extra(NamedTuple):
    """The order kept outside the ring (an event's order of volume > 1, which may
    outlive the ring's rows): its bid key (``IMIN``: none), ask key (``IMAX``: none),
    volume left and last step ``[L]``; or ``X`` such orders, ``[X, L]`` (one slot per
    OrderMistakeShock of the config)."""
    bid: object
    ask: object
    volume: object
    expiry: object


class Book(NamedTuple):
    """The order book of a block's ``L`` market columns, as the compiled step carries
    it: each row's bid key (``IMIN``: no bid), ask key (``IMAX``: no ask) and last
    step of life (-1: empty), ``[rows, L]`` (:class:`Whole`) or ``[L, rows]``
    (:class:`Chunks`); the chunks' state (``()`` without chunks); the order outside
    the ring (an :class:`Extra`, ``()`` without such events); the agents' balance
    sheets (a :class:`flowsim.markets.kernel.Balance`, ``()`` unless kept)."""
    bidkey: object
    askkey: object
    expiry: object
    chunks: object = ()
    extra: object = ()
    balance: object = ()


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


#: Placement numbers a step (order passes) from which chunks pay: shock_transfer's 33
#: run much faster with chunks, market_share_mm's 3 slower (a step's whole reduction and
#: the chunks' kernels cost more than the passes' saving).
MIN_PASSES = 8


def chunked(S):
    """Whether the compiled step of Structure ``S`` keeps chunks: steps of at least
    :data:`MIN_PASSES` order passes (several markets with a high-frequency phase),
    unless ``S.book_chunks`` is False."""
    return (S.n_venues > 1 and bool(S.hifreq) and not S.extra_order and S.book_chunks
            and S.layout.P >= MIN_PASSES)


#: Rows a chunk: the int64 values of one 64-byte cache line, so that a chunk of a
#: market's row (padded to whole chunks) is one aligned line of each book array (as fast
#: as 16 rows on shock_transfer, and faster than ``sqrt(4 rows / 9)``, which balances a
#: pass's reads of the chunks against a pairing's rows but lets a chunk straddle lines).
CHUNK_ROWS = 8


def sizes(rows):
    """``(G, n)``: rows a chunk (:data:`CHUNK_ROWS`, fewer for a smaller book) and
    chunks of a book of ``rows`` rows."""
    G = max(1, min(CHUNK_ROWS, rows))
    return G, -(-rows // G)


def column_bytes(S):
    """Device bytes of one market's column of the book of Structure ``S``: its three
    int64 rows (padded to whole chunks) and its chunks' state."""
    if not chunked(S):
        return S.layout.rows * 3 * 8
    G, n = sizes(S.layout.rows)
    return n * G * 3 * 8 + n * 4 * 8


def make(S, L, counted):
    """:class:`Chunks` for a block of ``L`` markets' columns where :func:`chunked`,
    else :class:`Whole`.  ``counted``: :func:`flowsim.markets.kernel.unit_rows` (None:
    every row counts)."""
    if not chunked(S):
        return Whole(S.layout.rows, counted)
    return Chunks(S.layout.rows, L, counted)


class Whole:
    """The book without chunks, ``[rows, L]``: every pass reduces all its ``rows`` (the
    interface of :class:`Chunks`, its updates doing nothing)."""

    #: axis of the book arrays that runs over markets (columns)
    col_axis = 1

    def __init__(self, rows, counted):
        self.rows, self.counted = rows, counted

    def empty(self):
        return ()

    def new_book(self, L):
        """The empty :class:`Book` of ``L`` markets: its three arrays, then the chunks'
        state (:meth:`empty`)."""
        t = tf()
        shape = [self.rows, L] if self.col_axis == 1 else [L, self.rows]
        return Book(*(t.fill(shape, t.constant(v, t.int64)) for v in (_IMIN, _IMAX, -1)),
                    *self.empty())

    def write(self, array, row, values):
        """``array`` with row ``row`` (a scalar) of every market set to ``values``
        ``[L]``."""
        return tf().tensor_scatter_nd_update(array, [[row]], values[None])

    def at(self, rows, cols):
        """``[n, 2]`` indices of element ``(rows[i], cols[i])`` of a book array."""
        return tf().stack([rows, cols], 1)

    def fresh(self, t_step, book):
        """``(book, after)`` at the start of step ``t_step``: the book ready for the
        step's passes and :meth:`after_fresh` of it."""
        return book, self.after_fresh(book)

    def after_fresh(self, book):
        """An int64 zero that XLA cannot fold, computed from :meth:`fresh`'s chunks:
        added to the step's first placement number it orders the step's first writes
        to the book after fresh's reads of it, so XLA writes the book in place instead
        of copying it first (a foldable zero where fresh reads nothing)."""
        return tf().constant(0, tf().int64)

    def placed(self, t_step, book, row, bid, ask, expiry):
        return book

    def paired(self, t_step, book, b_row, a_row):
        return book

    def bests(self, t_step, book, xtra=None):
        """``(bk, ak, nb, na)`` ``[L]``: the live orders' best keys and depths;
        ``xtra``: live keys ``(bid, ask)`` of the order kept outside the ring (events),
        or None."""
        t = tf()
        bk, ak, nb, na = stats(book.expiry >= t_step, book.bidkey, book.askkey,
                               self.counted, 0)
        if xtra is not None:
            xb, xa = xtra
            nxb, nxa = t.cast(xb != _IMIN, t.int64), t.cast(xa != _IMAX, t.int64)
            if xb.shape.rank == 2:          # several slots outside the ring [X, L]
                xb, xa = t.reduce_max(xb, 0), t.reduce_min(xa, 0)
                nxb, nxa = t.reduce_sum(nxb, 0), t.reduce_sum(nxa, 0)
            bk, ak = t.maximum(bk, xb), t.minimum(ak, xa)
            nb, na = nb + nxb, na + nxa
        return bk, ak, nb, na


class Chunks(Whole):
    """Chunks of ``G`` rows of a ``[L, rows]`` book (see the module docstring).
    ``rows`` is padded to ``n G`` (:attr:`rows`); ``counted`` ``[rows, L]`` bool or
    None."""

    col_axis = 0

    def __init__(self, rows, L, counted):
        t = tf()
        self.G, self.n = sizes(rows)
        self.rows, self.L = self.n * self.G, L
        pad = self.rows - rows
        if counted is not None:
            counted = t.transpose(counted)
            if pad:
                counted = t.concat([counted, t.zeros([L, pad], t.bool)], 1)
        self.counted = counted
        # [rows, L]: a placement reads one row of every market
        self.counted_rows = None if counted is None else t.transpose(counted)
        self.cols = t.range(L, dtype=t.int64)

    def empty(self):
        """The chunks' state ``[4, n, L]`` (best bid key, best ask key, bid depth, ask
        depth of each chunk of each market) before the first step (:meth:`fresh` fills
        it).  One array, so that an update is one gather and one scatter (a pass's
        cost is mostly the number of XLA kernels it runs); markets last, so that a
        pass's reads of one chunk of every market (:meth:`placed`) and its reductions
        over chunks (:meth:`bests`) run over contiguous rows of ``L`` values."""
        t = tf()
        return (t.zeros([4, self.n, self.L], t.int64),)

    def write(self, array, row, values):
        t = tf()
        at = t.stack([self.cols, t.fill([self.L], t.cast(row, t.int64))], 1)
        return t.tensor_scatter_nd_update(array, at, values)

    def at(self, rows, cols):
        return tf().stack([cols, rows], 1)

    def fresh(self, t_step, book):
        """``(book, after)``: ``book`` with every chunk reduced again (its liveness at
        step ``t_step``) and :meth:`after_fresh` of it."""
        t = tf()
        shape = [self.L, self.n, self.G]
        cnt = None if self.counted is None else t.reshape(self.counted, shape)
        new = stats(t.reshape(book.expiry >= t_step, shape), t.reshape(book.bidkey, shape),
                    t.reshape(book.askkey, shape), cnt, 2)                  # 4 x [L, n]
        book = book._replace(chunks=t.transpose(t.stack(new, 0), [0, 2, 1]))
        return book, self.after_fresh(book)

    def after_fresh(self, book):
        t = tf()
        return t.minimum(t.reduce_min(book.chunks[2, 0]), 0)       # depths are >= 0

    def bests(self, t_step, book, xtra=None):
        """``(bk, ak, nb, na)`` ``[L]`` of the whole book from its chunks (``xtra``:
        must be None, :func:`make` keeps no chunks with an order outside the ring)."""
        t = tf()
        assert xtra is None
        ch = book.chunks
        depth = t.reduce_sum(ch[2:], axis=1)
        return t.reduce_max(ch[0], axis=0), t.reduce_min(ch[1], axis=0), depth[0], depth[1]

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
            live = live & t.gather(self.counted_rows, row, axis=0)
        old = t.gather(book.chunks, c, axis=1)                            # [4, L]
        # one elementwise select over [4, L], not a stack of four rows: XLA's CPU loop
        # for a stack branches per element and is not vectorised
        field = t.range(4, dtype=t.int64)[:, None]
        bid, ask = bid[None], ask[None]
        count = t.cast(live[None] & t.where(field == 2, bid != _IMIN, ask != _IMAX), t.int64)
        new = t.where(field == 0, t.maximum(old, bid),
                      t.where(field == 1, t.minimum(old, ask), old + count))
        at = t.stack([t.range(4, dtype=t.int64), t.fill([4], t.cast(c, t.int64))], 1)
        return book._replace(chunks=t.tensor_scatter_nd_update(book.chunks, at, new))

    def paired(self, t_step, book, b_row, a_row):
        """``book`` after a pairing removed bid row ``b_row`` and ask row ``a_row``
        (``[L]``, one per market; where nothing paired the chunks are reduced again
        unchanged): the bid side of ``b_row``'s chunk and the ask side of ``a_row``'s
        (a row holds a bid or an ask, never both) reduced again."""
        t = tf()
        G, L = self.G, self.L
        cb, ca = b_row // G, a_row // G

        def rows(array, c):             # [L, G]: chunk c[l] of market l, contiguous
            return t.gather(t.reshape(array, [L, self.n, G]), c, axis=1, batch_dims=1)

        cnt = (None, None) if self.counted is None else (rows(self.counted, cb),
                                                         rows(self.counted, ca))
        bk, _, nb, _ = stats(rows(book.expiry, cb) >= t_step, rows(book.bidkey, cb), _IMAX,
                             cnt[0], 1)
        _, ak, _, na = stats(rows(book.expiry, ca) >= t_step, _IMIN, rows(book.askkey, ca),
                             cnt[1], 1)
        where = t.concat([t.stack([t.fill([L], t.constant(k, t.int64)), c, self.cols], 1)
                          for c, k in ((cb, 0), (ca, 1), (cb, 2), (ca, 3))], 0)
        return book._replace(chunks=t.tensor_scatter_nd_update(
            book.chunks, where, t.concat([bk, ak, nb, na], 0)))
