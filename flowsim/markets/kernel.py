"""The compiled market step: M markets of one block stepped together in one XLA loop.

Each market is pams's continuous double auction (pams 0.3.0), vectorised over the
markets of a block:

* **Agents.**  Each market draws its own agents' parameters once, from pams's
  distributions (:func:`draw`); one agent, uniform over all agents, acts per step
  (pams's ``maxNormalOrders`` 1); an agent that places no order passes the turn to
  the others in a random order, as pams's shuffled asking does (``ask_others``).
* **Orders.**  Volume 1, price snapped to the tick grid (buys down, sells up, unless
  within 4 ulp of a tick: :func:`tick_level`), time-to-live the agent's time window.
* **Book.**  A fixed-capacity ring of ``C = max time window + 1`` slots per market,
  ``[C, M]``: the order placed at step ``t`` takes slot ``t mod C``.  With one order per
  step and an order living ``ttl + 1 <= C`` steps, the slot's previous order has
  expired, so the book cannot overflow.  A slot holds the order's tick level packed
  with its placement time as one int64 priority key (``level << TIME_BITS | time``,
  time reversed for bids), so the best order of a side -- best price, then earliest --
  is one reduction, and its slot is its time ``mod C``.
* **Matching.**  While the best bid >= the best ask the two are paired off; all the
  volume of one arrival trades at one price, the earlier-placed order's of the last
  pair.  Outside the first step with execution only the arrival can cross (one
  pass); at that step the book crossed during the warm-up clears in a loop, and so
  does a market's book when its halt ends or an order of volume > 1 arrives (those
  few markets of the block loop in a small sub-book, the others take one pass).
* **Prices.**  Market price: the last trade, before the first trade the mid (both
  sides present), constant while execution is off.  Fundamental: ``F *= exp(drift +
  vol * z)`` per step.

Random numbers are counter-based (:mod:`flowsim.core.rng`): step ``t`` of the block
draws batch ``t`` of stream 2, the agents' parameters come from stream 1, so every
market is a pure function of (seed, iteration, block, position in the block).

The code, top down: :func:`run` builds a :class:`StepContext` (what a step reads and
never changes) and loops :func:`step` over the run.  A step collects its orders
(:func:`collect`, each an :class:`Order` of :func:`order`, decided on a
:class:`MarketView`), then :func:`process` places each one in the :class:`Book`
(:func:`place`) and executes (:func:`match`: :func:`masked_pass`, :func:`clearing`,
:func:`sweep_some`, each pairing by :func:`pair`), with the high-frequency phase
(:mod:`flowsim.markets.hifreq`) after each.  Every function takes the context and a
few named values; the book's arrays are its named fields.
"""
import functools
from types import SimpleNamespace
from typing import NamedTuple

import numpy as np

from ..core import rng
from ..core.fastmath import inverse_normal
from ..core.lazy_tf import tf
from . import book_chunks, hifreq
from .agents import market_share_fcn
from .agents.fcn import FCN_PARAMS
from .book_chunks import Book, Extra  # noqa: F401  (flowsim.markets.kernel.Book)
from .stats import ABS_LAGS, COARSE, NAMES
from .venues.index_market import index_of
from .venues.market import level_bits, time_bits

#: Distribution kinds as codes of the state arrays.
KINDS = {"const": 0, "uniform": 1, "expon": 2, "normal": 3, "same": 4}
#: FCN parameters in draw order (columns of the parameter arrays).
ATTRS = tuple(FCN_PARAMS.values())
_IMIN = np.iinfo(np.int64).min
_IMAX = np.iinfo(np.int64).max
#: Columns of the sub-book in which a few markets of a block clear a crossed book
#: (after a halt, an order of volume > 1) while the others match one arrival.
SWEEP_MARKETS = 4


def dist_arrays(groups):
    """``(kind [G, A] int32, a [G, A], b [G, A])`` of the groups' distributions."""
    kind = np.zeros((len(groups), len(ATTRS)), np.int32)
    a = np.zeros((len(groups), len(ATTRS)), np.float64)
    b = np.zeros_like(a)
    for i, g in enumerate(groups):
        for j, (attr, d) in enumerate(g.params):
            assert attr == ATTRS[j]
            kind[i, j] = KINDS[d.kind]
            args = tuple(d.args) + (0.0, 0.0)
            a[i, j], b[i, j] = args[0], args[1]
    return kind, a, b


def _normal(u):
    return inverse_normal(u + 2.0 ** -54)


def draw(u, kind, a, b):
    """Values of pams's JSON random values from uniforms ``u`` (any shape, broadcast with
    ``kind``, ``a``, ``b``): const a; uniform a + u (b - a); expon a (-ln(1 - u));
    normal a + b z."""
    t = tf()
    uniform = a + u * (b - a)
    expon = a * -t.math.log1p(-u)
    normal = a + b * _normal(u)
    out = t.where(kind == 1, uniform, a)
    out = t.where(kind == 2, expon, out)
    return t.where(kind == 3, normal, out)


def _trunc(x):
    """Python's ``int()`` of a float: towards zero."""
    t = tf()
    return t.where(x >= 0, t.floor(x), t.math.ceil(x))


def ulp_above(x):
    """The gap from positive ``x`` (float64 or float32) to the next float of its dtype."""
    t = tf()
    bits = t.int64 if x.dtype == t.float64 else t.int32
    return t.bitcast(t.bitcast(x, bits) + 1, x.dtype) - x


def tick_level(price, tick, buy):
    """pams's tick snapping: the nearest level if within 4 ulp of it (capped at a quarter
    tick), else floor for buys and ceil for sells; ulp of the prices' dtype.  int64."""
    t = tf()
    ratio = price / tick
    nearest = t.round(ratio)
    ulp = ulp_above(t.maximum(t.abs(ratio), 1.0))
    on_tick = t.abs(ratio - nearest) <= t.minimum(4.0 * ulp, 0.25)
    level = t.where(on_tick, nearest, t.where(buy, t.floor(ratio), t.math.ceil(ratio)))
    return t.cast(level, t.int64)


def _noiseless(group):
    """Whether agents of an FCN group can draw no noise (and so may place no order)."""
    return (group.dist("noise_weight").support() == (0.0, 0.0)
            or group.dist("noise_scale").support() == (0.0, 0.0))


class Structure:
    """What the compiled loop depends on (its trace key): step flags, group sizes, book
    capacity, which random draws exist, learned groups and outputs."""

    def __init__(self, cfg, learned, block_markets, paths):
        self.n_steps = cfg.n_steps
        placement, execution = cfg.step_flags()
        clear = [e and (i == 0 or not execution[i - 1]) for i, e in enumerate(execution)]
        self.flags = tuple(int(p) | int(e) << 1 | int(c) << 2
                           for p, e, c in zip(placement, execution, clear))
        self.t0 = cfg.first_execution
        self.sizes = tuple(g.n_agents for g in cfg.groups)
        self.margin_normal = tuple(g.margin_normal for g in cfg.groups)
        self.chart_sign = tuple(1.0 if g.chart_following else -1.0 for g in cfg.groups)
        self.learned = tuple(learned)
        tw = [g.max_time_window for g in cfg.groups] + [lg.max_time_window for lg in learned]
        self.capacity = max(tw) + 1
        # an agent without noise can expect E == P exactly and place no order; pams then
        # asks the next agent (kernel.ask_others); with noise that has probability 0
        self.may_abstain = bool(learned) or any(_noiseless(g) for g in cfg.groups)
        self.block_markets = block_markets
        self.paths = paths
        self._events(cfg)
        # markets of a block that clear such a book at once, in a sub-book of this many
        # columns (0: the whole block clears; the same bits)
        self.sweep_markets = SWEEP_MARKETS
        # several markets with a high-frequency phase keep the book's bests by chunks of
        # rows (:mod:`flowsim.markets.book_chunks`; False: whole-book reductions, the
        # same bits)
        self.book_chunks = True
        # the agents' balance sheets (MarketEnsemble(balances=True) sets it)
        self.balances = False
        self._venues(cfg)

    def _events(self, cfg):
        """Events (:mod:`flowsim.markets.events`): their hooks join the step; where a
        halt ends or an order of volume > 1 arrives, the market's crossed book clears at
        once; one slot outside the ring per OrderMistakeShock (their orders may
        coexist)."""
        self.events = tuple(getattr(cfg, "events", ()))
        self.halts = any(e.halts for e in self.events)
        self.extra_order = any(e.extra_order for e in self.events)
        self.extra_slots = sum(e.extra_order for e in self.events)

    def _venues(self, cfg):
        """Several markets (venues) per ensemble member, several agents' orders per step."""
        self.n_venues = cfg.n_venues
        self.max_orders = min(cfg.max_orders, self.n_agents)
        self.orders = tuple(min(s.max_orders, self.n_agents) for s in cfg.sessions
                            for _ in range(s.steps))
        self.access = tuple(g.venues for g in cfg.groups) if self.n_venues > 1 else ()
        self.correlated = bool(cfg.correlations)
        self.fundamental_noise = any(v.fundamental_volatility != 0
                                     for v in (cfg.venues or (cfg,)))
        self.indexes = tuple(getattr(cfg, "indexes", ()))
        # MarketShareFCNAgent groups: one market a turn, picked by recent volume
        self.by_volume = tuple(i for i, g in enumerate(cfg.groups)
                               if getattr(g, "by_volume", False)) if self.n_venues > 1 else ()
        self._hifreq(cfg)
        self.time_bits = time_bits(self.n_steps, self.layout.P)
        self.level_bits = level_bits(self.n_steps, self.layout.P)
        if (self.n_venues > 1 or self.max_orders > 1) and self.may_abstain:
            raise ValueError("flowsim.markets runs agents that may place no order (noiseless "
                             "FCN groups, learned groups) on one market with maxNormalOrders "
                             "1 only: give every group noise (noiseWeight and noiseScale > 0)")

    def _hifreq(self, cfg):
        """High-frequency agents (:mod:`flowsim.markets.hifreq`): their group, turns a
        phase, per-step ``maxHighFrequencyOrders`` and rate, and the book's layout."""
        self.hifreq_turns = hifreq.turns(cfg) if getattr(cfg, "hifreq", ()) else 0
        self.hifreq = tuple(cfg.hifreq) if self.hifreq_turns else ()   # no turn: no phase
        H = hifreq.orders_per_phase(cfg) if self.hifreq else 0
        hf_steps = max((g.max_time_window for g in self.hifreq), default=-1) + 1
        self.layout = hifreq.Layout(self.max_orders, H, self.capacity, hf_steps)
        self.hifreq_at = tuple((s.max_hifreq, s.hifreq_rate) for s in cfg.sessions
                               for _ in range(s.steps)) if self.hifreq else ()

    def hifreq_key(self):
        return ((tuple(repr(g.describe()) for g in self.hifreq),
                 self.hifreq_at, self.layout.P, self.layout.rows) if self.hifreq else ())

    def key(self):
        return (self.flags, self.t0, self.sizes, self.margin_normal, self.chart_sign,
                self.may_abstain,
                tuple(lg.trace_key() for lg in self.learned), self.capacity,
                self.fundamental_noise, self.block_markets, self.paths,
                tuple(e.trace_key() for e in self.events), self.n_venues, self.max_orders,
                self.orders if self.max_orders > 1 else (), self.access, self.correlated,
                self.time_bits, self.indexes) + ((self.by_volume,) if self.by_volume else ()
                                                 ) + self.hifreq_key() + (
                    self.sweep_markets, self.book_chunks)

    @property
    def n_agents(self):
        return sum(self.sizes) + sum(lg.n_agents for lg in self.learned)


def in_dtype(state, dtype):
    """``state`` with its float arrays (distribution arguments, the markets' columns,
    the Cholesky factor) cast to ``dtype``; integer arrays as they are."""
    t = tf()
    return {k: t.cast(v, dtype) if t.as_dtype(v.dtype).is_floating else v
            for k, v in state.items()}


def agent_params(S, key, M, state, dtype):
    """Per-market agent parameters ``{attr: [M, N]}`` of ``dtype`` (FCN groups then
    learned groups), plus ``group [N]`` int32."""
    t = tf()
    N = S.n_agents
    u = rng.uniform(key, [len(ATTRS), M, N], dtype, stream=1)
    gid = np.concatenate([np.full(n, i) for i, n in
                          enumerate(list(S.sizes) + [lg.n_agents for lg in S.learned])])
    kind = t.gather(state["kind"], gid, axis=0)        # [N, A]
    a = t.gather(state["a"], gid, axis=0)
    b = t.gather(state["b"], gid, axis=0)
    out = {}
    for j, attr in enumerate(ATTRS):
        out[attr] = draw(u[j], kind[:, j], a[:, j], b[:, j])
    out["time_window"] = _trunc(out["time_window"])
    same = kind[:, ATTRS.index("mean_reversion_time")] == KINDS["same"]
    out["mean_reversion_time"] = t.where(same, out["time_window"],
                                         _trunc(out["mean_reversion_time"]))
    return out, gid


def _venue_columns(S, M, state):
    """The markets' ``(tick, p0, f0, drift, volatility)``: scalars for one market, else
    ``[M K]`` columns (member-major: column ``m K + k`` is market ``k`` of member ``m``)."""
    t_ = tf()
    m = state["market"]
    if S.n_venues == 1:
        return tuple(m[i] for i in range(5))
    return tuple(t_.reshape(t_.tile(m[i][None, :], [M, 1]), [-1]) for i in range(5))


def _venue_masks(S, gid, M):
    """``(access [N, K], [event target mask [M K]])``: the markets each agent orders in,
    the markets each event acts on."""
    t_ = tf()
    K = S.n_venues
    access = np.zeros((len(gid), K), bool)
    for i, g in enumerate(gid):
        access[i, list(S.access[g])] = True
    masks = [t_.constant(np.tile(np.isin(np.arange(K), e.targets), M)) for e in S.events]
    return t_.constant(access), masks


def _distinct(u, chosen, N):
    """An agent uniform over the ``N - len(chosen)`` not yet ``chosen`` (``[M]``):
    pams's shuffled agent list, taken in order (``maxNormalOrders`` > 1)."""
    t_ = tf()
    j = len(chosen)
    c = t_.minimum(t_.cast(u * (N - j), t_.int64), N - j - 1)
    if chosen:
        done = t_.sort(t_.stack(chosen, 1), axis=1)
        for i in range(j):
            c = c + t_.cast(done[:, i] <= c, t_.int64)
    return c


def _order_draws(S, u, j, n_draws, M):
    """Uniforms of order ``j`` of a step: ``[pick [M], noise [M K], -, margin [M K]]``
    (rows 0, 1, 3 for the first, 2 is the fundamental's; one market and one order:
    ``u`` itself, the rows in their first order)."""
    t_ = tf()
    K = S.n_venues
    if K == 1 and S.max_orders == 1:
        return u
    rows = (0, 1, 3) if j == 0 else tuple(n_draws + (j - 1) * (n_draws - 1) + i
                                          for i in range(3))
    pick = u[rows[0]] if K == 1 else t_.reshape(u[rows[0]], [M, K])[:, 0]
    return [pick, u[rows[1]], None, u[rows[2]] if n_draws > 3 else None]


def _fundamental_step(S, fund, z, drift, volatility, chol, M):
    """pams's fundamental walk, then each IndexMarket's fundamental: the index of its
    components' new fundamentals (:func:`flowsim.markets.venues.index_market.index_of`)."""
    fund = _walk(S, fund, z, drift, volatility, chol, M)
    if not S.indexes:
        return fund
    t_ = tf()
    cols = t_.unstack(t_.reshape(fund, [M, S.n_venues]), axis=1)
    for i, comps, shares in S.indexes:
        cols[i] = index_of([cols[c] for c in comps], shares)
    return t_.reshape(t_.stack(cols, 1), [-1])


def _walk(S, fund, z, drift, volatility, chol, M):
    """``F *= exp(drift + vol z)``, or with correlations ``exp(drift + (L z)_k)`` (``L``
    the Cholesky factor, summed in a fixed order)."""
    t_ = tf()
    if not S.fundamental_noise:
        return fund * t_.exp(drift)
    if not S.correlated:
        return fund * t_.exp(drift + volatility * z)
    K = S.n_venues
    zm = t_.reshape(z, [M, K])
    cols = []
    for k in range(K):
        acc = chol[k, 0] * zm[:, 0]
        for j in range(1, k + 1):
            acc = acc + chol[k, j] * zm[:, j]
        cols.append(acc)
    return fund * t_.exp(drift + t_.reshape(t_.stack(cols, 1), [-1]))


def _volume_state(S, M, state, gid):
    """MarketShareFCNAgent groups' ``(agents' flags [N], accumulators)``: the executed
    volume so far (a market's initial volume counts at t = 0) and ``vcum [T + 1, M K]``,
    the volume before each step; ``(None, {})`` without such groups."""
    if not S.by_volume:
        return None, {}
    t_ = tf()
    i64 = t_.int64
    total = t_.reshape(t_.tile(t_.cast(state["volume0"], i64)[None, :], [M, 1]), [-1])
    return (t_.constant(market_share_fcn.flags(S.by_volume, gid)),
            {"volume": total, "vcum": t_.zeros([S.n_steps + 1, M * S.n_venues], i64)})


class Order(NamedTuple):
    """One order per market column ``[M K]``: side (+1 buy, -1 sell, 0 none), tick
    level, time-to-live; the agent placing it ``[M]`` (None: not an agent's)."""
    side: object
    level: object
    ttl: object
    agent: object = None


class Balance(NamedTuple):
    """The agents' balance sheets, as the :class:`Book` carries them where kept
    (``Structure.balances``; one market per member): the agent whose order each row
    holds (-1: none), in the book's layout; per agent ``[N, L]``: the units it bought
    (+) or sold (-) in the execution under way (all of whose pairs trade at one price,
    known at its end), its cash and the units it holds."""
    owner: object
    units: object
    cash: object
    inventory: object
    #: ``[L]``: the agent whose order an event's mistaken order replaced (pams keeps
    #: its agent), where such events are (``()`` otherwise)
    extra_owner: object = ()


class MarketView(NamedTuple):
    """What agents decide on at the start of a step: market prices ``[M K]``,
    fundamentals ``[M K]``, the price history ``[T + 1, M K]`` and, where a learned
    group reads it, the book ``(best bid price, best ask price, bid depth, ask
    depth)`` (:func:`book_view`; None otherwise)."""
    price: object
    fund: object
    hist: object
    book: object = None


def book_view(ctx, t, book):
    """The book as :class:`MarketView` gives it: best prices (NaN where a side is empty)
    and depths ``[L]``."""
    t_ = tf()
    bk, ak, nb, na = ctx.chunks.bests(t, book)

    def price(key, empty):
        level = t_.cast(t_.bitwise.right_shift(key, ctx.tb), ctx.dtype)
        return t_.where(key != empty, level * ctx.tick, np.nan)

    return price(bk, _IMIN), price(ak, _IMAX), nb, na


class Loop(NamedTuple):
    """The values the loop of :func:`run` carries from step to step: the step ``t``,
    market prices, whether each market traded yet, fundamentals, the :class:`Book`,
    the price and fundamental histories (``fhist`` ``[0]`` unless ``paths``) and the
    per-market sums ``acc``."""
    t: object
    price: object
    traded: object
    fund: object
    book: object
    hist: object
    fhist: object
    acc: object


class StepContext:
    """What every function of the compiled step reads and none changes, built once a
    trace by :func:`run`: the block's sizes (``M`` members of ``K`` markets, ``L = M K``
    columns, ``N`` agents, ``R`` orders a step), the markets' columns (``tick``, ``p0``,
    ``f0``, ``drift``, ``volatility``, ``chol``), the agents' parameters, the per-step
    flags, the priority keys' packing (``tb`` time bits, ``tmax``, ``level_cap``), the
    rows of the step's uniforms and the book's :mod:`~flowsim.markets.book_chunks`.
    ``dtype`` (float64 or float32) is the one dtype of every real value of the step:
    prices, uniforms, agents' parameters, the per-market sums."""

    def __init__(self, S, key, M, state, dtype):
        t_ = tf()
        self.S, self.key, self.M = S, key, M
        self.dtype = dtype
        state = in_dtype(state, dtype)
        self.T, self.K, self.R = S.n_steps, S.n_venues, S.max_orders
        self.N = S.n_agents
        self.L = M * self.K
        i64 = t_.int64
        self.tick, self.p0, self.f0, self.drift, self.volatility = _venue_columns(S, M, state)
        self.chol = state.get("chol")
        self.params, self.gid = agent_params(S, key, M, state, dtype)
        self.n_fcn = sum(S.sizes)
        fcn = len(S.sizes)
        self.margin_normal = t_.constant(np.array([S.margin_normal[g] if g < fcn else False
                                                   for g in self.gid]))
        self.chart_sign = t_.constant(np.array([S.chart_sign[g] if g < fcn else 1.0
                                                for g in self.gid]), dtype)
        self.any_normal_margin = any(S.margin_normal)
        flags = np.array(S.flags, np.int32)
        self.place_at = t_.constant(flags & 1 > 0)
        self.run_at = t_.constant(flags & 2 > 0)
        self.clear_at = t_.constant(flags & 4 > 0)
        self.markets = t_.range(self.L, dtype=i64)
        self.tmax = t_.constant((1 << S.time_bits) - 1, i64)
        self.tb = t_.constant(S.time_bits, i64)
        self.level_cap = (1 << S.level_bits) - 1
        self._draw_rows()
        self.orders_at = t_.constant(np.array(S.orders, np.int64))
        self.access, self.masks = _venue_masks(S, self.gid, M) if self.K > 1 else (None, ())
        self.by_volume, self.volume_acc = _volume_state(S, M, state, self.gid)
        # the book's bests and depths (kept by chunks of rows where steps make many passes)
        self.chunks = book_chunks.make(S, self.L, unit_rows(S, M))
        self.hf = None                  # the high-frequency phase's context (run sets it)

    def _draw_rows(self):
        """Rows of the step's uniforms: ``n_draws`` of the first order, then the other
        orders', the market picks' (``pick_rows``, by_volume groups) and the
        high-frequency phases' rate draws (``rate_rows``); ``n_rows`` in all."""
        S, R = self.S, self.R
        self.n_draws = 3 + int(self.any_normal_margin)
        n_rows = self.n_draws + (R - 1) * (self.n_draws - 1)
        self.pick_rows = n_rows
        n_rows += R * bool(S.by_volume)
        self.rate_rows = n_rows
        self.n_rows = n_rows + R * bool(S.hifreq)

    def spread(self, x):
        """A member's value ``[M]`` for each of its markets ``[M K]``."""
        return x if self.K == 1 else tf().repeat(x, self.K)

    def param(self, name, agent):
        """Parameter ``name`` of agent ``agent [M]`` of each member ``[M]``."""
        return tf().gather(self.params[name], agent, batch_dims=1)

    def first_agent(self, u):
        """The agent a uniform ``u [M]`` picks: uniform over the ``N`` agents."""
        t_ = tf()
        return t_.minimum(t_.cast(u * self.N, t_.int64), self.N - 1)


def extra_keys(ctx, t, book):
    """Live keys ``(bid, ask)`` of the orders kept outside the ring (``book.extra``):
    ``[L]`` for one slot, ``[X, L]`` for ``X`` (one per OrderMistakeShock)."""
    t_ = tf()
    extra = book.extra
    live = (extra.expiry >= t) & (extra.volume > 0)
    return t_.where(live, extra.bid, _IMIN), t_.where(live, extra.ask, _IMAX)


def any_slot(x):
    """``x`` ``[L]`` of one slot outside the ring, or reduced over the slots of
    ``[X, L]``: where any slot holds."""
    return tf().reduce_any(x, axis=0) if x.shape.rank == 2 else x


def slot_owner(from_side, owner):
    """The owner ``[L]`` of the slot outside the ring that ``from_side`` marks (one
    slot: ``owner`` itself)."""
    t_ = tf()
    if from_side.shape.rank != 2:
        return owner
    return t_.reduce_max(t_.where(from_side, owner, -1), axis=0)


def pair(ctx, t, book, bk, ak, active=None, xtra=None):
    """Pair the best bid and ask where they cross (and ``active``): ``(book, crossed,
    trade level)``.  ``xtra``: live keys of the order outside the ring, which loses one
    unit per pairing instead of its slot."""
    t_ = tf()
    i64, tb, tmax, slot = t_.int64, ctx.tb, ctx.tmax, ctx.S.layout.slot
    has_b, has_a = bk != _IMIN, ak != _IMAX
    b_level, a_level = t_.bitwise.right_shift(bk, tb), t_.bitwise.right_shift(ak, tb)
    b_time = tmax - t_.bitwise.bitwise_and(bk, tmax)
    a_time = t_.bitwise.bitwise_and(ak, tmax)
    crossed = has_b & has_a & (b_level >= a_level)
    if active is not None:
        crossed = crossed & active
    level = t_.where(b_time < a_time, b_level, a_level)
    cols = ctx.markets if bk.shape[0] == ctx.L else t_.range(bk.shape[0], dtype=i64)
    slots = ctx.chunks.at(t_.concat([slot(b_time), slot(a_time)], 0),
                          t_.concat([cols, cols], 0))
    if book.balance:
        outside = None
        if xtra is not None:
            in_b, in_a = (xtra[0] == bk) & has_b, (xtra[1] == ak) & has_a
            owner = book.balance.extra_owner
            outside = (any_slot(in_b), any_slot(in_a), slot_owner(in_b, owner),
                       slot_owner(in_a, owner))
        book = book._replace(balance=traded(book.balance, slots, crossed,
                                            ctx.chunks.col_axis, outside))
    if xtra is None:
        old = t_.gather_nd(book.expiry, slots)
        gone = t_.where(t_.concat([crossed, crossed], 0), -1 * t_.ones_like(old), old)
        expiry = t_.tensor_scatter_nd_update(book.expiry, slots, gone)
        book = ctx.chunks.paired(t, book._replace(expiry=expiry), slot(b_time), slot(a_time))
        return book, crossed, level
    # the order outside the ring has no slot: its time mod C may be the slot of the
    # order it pairs with, so remove with a min (duplicate indices stay exact)
    from_b = (xtra[0] == bk) & has_b
    from_a = (xtra[1] == ak) & has_a
    ring = t_.concat([crossed & ~any_slot(from_b), crossed & ~any_slot(from_a)], 0)
    gone = t_.where(ring, t_.constant(-1, i64), t_.constant(_IMAX, i64))
    expiry = t_.tensor_scatter_nd_min(book.expiry, slots, gone)
    used = t_.cast(crossed & (from_b | from_a), i64)
    extra = book.extra._replace(volume=book.extra.volume - used)
    return book._replace(expiry=expiry, extra=extra), crossed, level


def venue_pick(ctx, t, u, a, vols):
    """``[M K]`` markets agent ``a`` orders in: all it can reach, or for a
    MarketShareFCNAgent the one picked by volume (``vols``: total and ``vcum``)."""
    t_ = tf()
    M, K = ctx.M, ctx.K
    reach = t_.gather(ctx.access, a)                             # [M, K]
    tau = ctx.param("time_window", a)
    back = ctx.spread(t - t_.cast(t_.minimum(t_.cast(t, ctx.dtype), tau), t_.int64))
    vol = market_share_fcn.window_volume(vols[1], vols[0], back, ctx.markets)
    chosen = market_share_fcn.choose(t_.reshape(u, [M, K])[:, 0],
                                     t_.reshape(vol, [M, K]), reach)
    return t_.reshape(t_.where(t_.gather(ctx.by_volume, a)[:, None], chosen, reach), [-1])


def _expectation(ctx, t, u, view, a, tau):
    """FCN agent ``a``'s expected price and margin, pams's ``FCNAgent.submit_orders``
    (a learned group's from its policy, :func:`flowsim.markets.learned.learned_orders`)."""
    t_ = tf()
    price, fund, hist = view.price, view.fund, view.hist
    k = ctx.spread(ctx.param("order_margin", a))
    wf, wc, wn = (ctx.spread(ctx.param(x, a)) for x in ("fundamental_weight",
                                                        "chart_weight", "noise_weight"))
    mrt = ctx.spread(ctx.param("mean_reversion_time", a))
    ns = ctx.spread(ctx.param("noise_scale", a))
    w = t_.minimum(t_.cast(t, ctx.dtype), tau)
    back = t - t_.cast(w, t_.int64)
    past = t_.gather_nd(hist, t_.stack([back, ctx.markets], 1))
    past = t_.where(w > 0, past, price)
    fundamental = t_.math.log(fund / price) / t_.maximum(mrt, 1.0)
    chart = (ctx.spread(t_.gather(ctx.chart_sign, a)) * t_.math.log(price / past)
             / t_.maximum(w, 1.0))
    noise = ns * _normal(u[1])
    r = (wf * fundamental + wc * chart + wn * noise) / (wf + wc + wn)
    expected = price * t_.exp(r * tau)
    margin_k = k
    if ctx.S.learned:
        from .learned import learned_orders
        expected, margin_k = learned_orders(ctx.S, a, ctx.n_fcn, ctx.gid, ctx.params, t,
                                            price, fund, hist, expected, k, view.book)
    return expected, margin_k, k


def _limited(ctx, value):
    """An order's price after the events' limits (pams's ``hooked_before_order``), each
    applied to its target markets."""
    t_ = tf()
    for i, e in enumerate(ctx.S.events):
        limited = e.limit_price(value, ctx.p0)
        value = limited if ctx.K == 1 or limited is value else t_.where(ctx.masks[i], limited,
                                                                        value)
    return value


def limit_at(ctx, value, k):
    """Prices ``value [M]`` of orders in market ``k`` after the events' limits that
    target it (pams's ``hooked_before_order`` runs on high-frequency agents' orders
    too)."""
    t_ = tf()
    ref = ctx.p0 if ctx.K == 1 else t_.reshape(ctx.p0, [ctx.M, ctx.K])[:, k]
    for e in ctx.S.events:
        if e.limits_prices and (ctx.K == 1 or k in e.targets):
            value = e.limit_price(value, ref)
    return value


def order(ctx, t, u, view, a=None, venue=None):
    """``(Order, over)``: side, tick level, ttl of agent ``a`` (default: the agent
    ``u[0]`` picks uniformly) in the markets ``venue`` (default: all it can reach),
    and where its level left the packed range."""
    t_ = tf()
    i64 = t_.int64
    if a is None:
        a = ctx.first_agent(u[0])
    tau = ctx.spread(ctx.param("time_window", a))
    expected, margin_k, k = _expectation(ctx, t, u, view, a, tau)
    price = view.price
    buy = expected > price
    sell = expected < price
    fixed = t_.where(buy, expected * (1 - margin_k), expected * (1 + margin_k))
    if ctx.any_normal_margin:
        normal_price = expected + _normal(u[3]) * k
        value = t_.where(ctx.spread(t_.gather(ctx.margin_normal, a)), normal_price, fixed)
    else:
        value = fixed
    raw = tick_level(_limited(ctx, value), ctx.tick, buy)
    level = t_.clip_by_value(raw, 1, ctx.level_cap)
    side = t_.where(buy, 1, t_.where(sell, -1, 0))
    if ctx.K > 1:
        if venue is None:
            venue = t_.reshape(t_.gather(ctx.access, a), [-1])
        side = t_.where(venue, side, 0)
    return (Order(t_.cast(side, i64), level, t_.cast(tau, i64), a),
            (raw > ctx.level_cap) & (side != 0))


def ask_others(ctx, t, u, view, first_order, place):
    """pams asks agents in a shuffled order until one orders: where the first agent
    placed none (E == P exactly, possible only for agents without noise), ask the
    others in a uniformly random order (argsort of fresh uniforms), first agent
    excluded, until one orders or all were asked.  Returns the :class:`Order`."""
    t_ = tf()
    i64, N, M = t_.int64, ctx.N, ctx.M
    first = ctx.first_agent(u[0])
    side = first_order.side

    def asking():
        perm = t_.argsort(rng.uniform(ctx.key, [M, N], ctx.dtype, stream=3, step=t), axis=1,
                          stable=True)
        perm = t_.cast(perm, i64)

        def more(k, side, *_):
            return (k < N) & t_.reduce_any(side == 0)

        def ask(k, side, level, ttl, agent):
            a = perm[:, k]
            u2 = rng.uniform(ctx.key, [ctx.n_draws, M], ctx.dtype, stream=4, step=t * N + k)
            other, _ = order(ctx, t, u2, view, a)
            redo = (side == 0) & (a != first)
            return (k + 1, t_.where(redo, other.side, side), t_.where(redo, other.level, level),
                    t_.where(redo, other.ttl, ttl), t_.where(redo, a, agent))

        out = t_.while_loop(more, ask, [t_.constant(0, i64), *first_order])
        return tuple(out[1:])

    return Order(*t_.cond(place & t_.reduce_any(side == 0), asking, lambda: tuple(first_order)))


def clearing(ctx, t, book, active=None, start=None, more=None):
    """Pair off the best bid and ask while they cross (where ``active``; all markets if
    None), as pams executes after each order while the market runs: the book crossed
    during the warm-up or a halt clears at once, an order of volume > 1 trades against
    every order it crosses.  ``book`` may hold any number of markets' columns
    (:func:`clear_some` passes a few).  Returns ``(book, bk, ak, nb, na, vol, lvl)``:
    the bests and depths of the cleared book, the volume and the level of the last
    pair.  ``start``: ``(bk, ak, nb, na, vol, lvl)`` of a pairing already made on
    ``book`` (:func:`masked_pass`), the loop going on from it while ``more`` (a bool
    tensor; default: from scratch)."""
    t_ = tf()
    i64 = t_.int64
    extra_order = ctx.S.extra_order

    def cond(book, bk, ak, nb, na, vol, lvl, more):
        return more

    def step(book, bk, ak, nb, na, vol, lvl, more):
        xtra = extra_keys(ctx, t, book) if extra_order else None
        bk, ak, nb, na = ctx.chunks.bests(t, book, xtra)
        book2, crossed, pl = pair(ctx, t, book, bk, ak, active, xtra)
        c = t_.cast(crossed, i64)
        return (book2, bk, ak, nb - c, na - c, vol + c, t_.where(crossed, pl, lvl),
                t_.reduce_any(crossed))

    if start is None:
        z = t_.zeros([book.expiry.shape[ctx.chunks.col_axis]], i64)
        start, more = (z,) * 6, t_.constant(True)
    out = t_.while_loop(cond, step, [book, *start, more])
    return tuple(out[:-1])


def masked_pass(ctx, t, book, active):
    """:func:`clearing` for a step where only the arrival (volume 1) can cross: one
    pairing, the same result."""
    t_ = tf()
    i64 = t_.int64
    xtra = extra_keys(ctx, t, book) if ctx.S.extra_order else None
    bk, ak, nb, na = ctx.chunks.bests(t, book, xtra)
    book2, crossed, lvl = pair(ctx, t, book, bk, ak, active, xtra)
    vol = t_.cast(crossed, i64)
    gone_b = gone_a = vol
    if xtra is not None:         # an order outside the ring stays while it has volume
        stays = book2.extra.volume > 0
        gone_b = t_.cast(crossed & ~any_slot((xtra[0] == bk) & (bk != _IMIN) & stays), i64)
        gone_a = t_.cast(crossed & ~any_slot((xtra[1] == ak) & (ak != _IMAX) & stays), i64)
    return book2, bk, ak, nb - gone_b, na - gone_a, vol, t_.where(crossed, lvl, 0)


def one_pass(ctx, t, book):
    """:func:`masked_pass` of a block of one market per member without events."""
    t_ = tf()
    bk, ak, nb, na = ctx.chunks.bests(t, book)
    book2, crossed, lvl = pair(ctx, t, book, bk, ak)
    vol = t_.cast(crossed, t_.int64)
    return book2, bk, ak, nb - vol, na - vol, vol, t_.where(crossed, lvl, 0)


def no_match(ctx, t, book):
    """The book's bests and depths where the market does not execute."""
    t_ = tf()
    bk, ak, nb, na = ctx.chunks.bests(t, book)
    zero = t_.zeros([ctx.L], t_.int64)
    return book, bk, ak, nb, na, zero, t_.zeros([ctx.L], t_.int64)


def sweep_some(ctx, t, book, active, need):
    """:func:`clearing` where ``need`` (a halt just ended, an order of volume > 1
    arrived), :func:`masked_pass` at the other ``active`` markets, whose book was
    uncrossed before the arrival of one unit: the result of :func:`clearing`
    everywhere.  A few such markets clear in sub-books of :data:`SWEEP_MARKETS`
    columns (``Structure.sweep_markets``, :func:`clear_some`), so that the loop's
    trips do not cost the whole block; more than a quarter of the block loops whole."""
    t_ = tf()
    n = t_.reduce_sum(t_.cast(need, t_.int64))

    def loop():
        if not ctx.S.sweep_markets:
            return clearing(ctx, t, book, active)
        return t_.cond(n > ctx.L // 4, lambda: clearing(ctx, t, book, active),
                       lambda: clear_some(ctx, t, book, active, need, n))

    return t_.cond(n == 0, lambda: masked_pass(ctx, t, book, active), loop)


def clear_some(ctx, t, book, active, need, n):
    """:func:`sweep_some` for ``n`` markets that ``need`` the loop: chunks of ``G`` of
    them gathered into a sub-book, cleared, and put back (one market per member: the
    book is ``[rows, L]``, :class:`flowsim.markets.book_chunks.Whole`)."""
    t_ = tf()
    i64, L = t_.int64, ctx.L
    if ctx.chunks.col_axis != 1:
        raise NotImplementedError("clear_some gathers markets on the book's last axis; "
                                  f"{type(ctx.chunks).__name__} keeps them on axis "
                                  f"{ctx.chunks.col_axis}")
    G = min(L, ctx.S.sweep_markets)
    out = masked_pass(ctx, t, book, active & ~need)
    rank = t_.cumsum(t_.cast(need, i64)) - 1
    slots = t_.range(G, dtype=i64)

    def chunk(c, book, *rest):
        take = need & (rank // G == c)
        slot = rank - c * G
        hit = take[None, :] & (slot[None, :] == slots[:, None])           # [G, L]
        sel = t_.reduce_max(t_.where(hit, ctx.markets[None, :], -1), axis=1)
        sub = t_.nest.map_structure(lambda x: t_.gather(x, t_.maximum(sel, 0), axis=-1), book)
        done = clearing(ctx, t, sub, sel >= 0)
        back = t_.clip_by_value(slot, 0, G - 1)
        arrays = t_.nest.flatten(book)
        merged = [t_.where(take, t_.gather(x, back, axis=-1), y)
                  for x, y in zip(t_.nest.flatten(done[0]) + list(done[1:]),
                                  arrays + list(rest))]
        return ((c + 1, t_.nest.pack_sequence_as(book, merged[:len(arrays)]))
                + tuple(merged[len(arrays):]))

    out = t_.while_loop(lambda c, *_: c * G < n, chunk, (t_.constant(0, i64),) + out)
    return tuple(out[1:])


def collect(ctx, t, u, view, place, vols=None):
    """The step's orders, all decided on the state at its start (pams collects
    ``maxNormalOrders`` agents' orders, then processes them): ``R`` :class:`Order` s
    over the ``[M K]`` markets, and whether a level left the packed range."""
    t_ = tf()
    S, N = ctx.S, ctx.N
    out, chosen, over = [], [], None
    for j in range(ctx.R):
        uj = _order_draws(S, u, j, ctx.n_draws, ctx.M)
        a = None if ctx.R == 1 else _distinct(uj[0], chosen, N)
        if a is not None:
            chosen.append(a)
        venue = None
        if S.by_volume:
            if a is None:
                a = ctx.first_agent(uj[0])
            venue = venue_pick(ctx, t, u[ctx.pick_rows + j], a, vols)
        o, ov = order(ctx, t, uj, view, a, venue)
        if S.may_abstain:
            o = ask_others(ctx, t, u, view, o, place)
        side = o.side
        if j > 0:                      # this session's maxNormalOrders
            side = t_.where(j < ctx.orders_at[t], side, t_.zeros_like(side))
        side = t_.where(place, side, t_.zeros_like(side))
        over = ov if over is None else over | ov
        out.append(o._replace(side=side))
    return out, over & place


def place_mistakes(ctx, t, q, o, price, place, book, done):
    """The events' mistaken orders (:meth:`Event.mistake_order`) at order ``o`` of step
    ``t`` (``q`` its placement number): each replaces the step's first order in its
    target market (``done``: markets where one fired at an earlier order of the step,
    or None) and rests outside the ring (``book.extra``).  Returns ``(o, book, fired,
    done)``, ``fired`` the markets where one fired (their book may cross more than
    once)."""
    t_ = tf()
    slots = _extra_slots(book.extra)
    fired, earlier = None, []
    for i, e in enumerate(ctx.S.events):
        mistake = e.mistake_order(t, o.side, price, ctx.tick)
        if mistake is None:
            continue
        fire = mistake[0] & place
        if ctx.K > 1:
            fire = fire & ctx.masks[i]
        if done is not None:
            fire = fire & ~done
        # several shocks on one order (same market and step): pams's later hook
        # overrides the order the earlier one made
        for x, before in enumerate(earlier):
            slots[x] = slots[x]._replace(volume=t_.where(fire & before, t_.zeros_like(
                slots[x].volume), slots[x].volume))
        x = len(earlier)
        slots[x] = _mistaken_slot(ctx, t, q, slots[x], fire, mistake[1:])
        earlier.append(fire)
        if book.balance:
            b = book.balance
            owners = _extra_slots(b.extra_owner)
            owners[x] = t_.where(fire, ctx.spread(o.agent), owners[x])
            book = book._replace(balance=b._replace(extra_owner=_stacked(owners)))
        fired = fire if fired is None else fired | fire
    book = book._replace(extra=_stacked(slots))
    side = o.side if fired is None else t_.where(fired, t_.zeros_like(o.side), o.side)
    done = fired if done is None else done | fired
    return o._replace(side=side), book, fired, done


def _extra_slots(extra):
    """The slots outside the ring as a list (one for ``[L]`` arrays, ``X`` for
    ``[X, L]``): an :class:`Extra` or the owners' array."""
    if isinstance(extra, Extra):
        if extra.bid.shape.rank != 2:
            return [extra]
        return [Extra(*parts) for parts in zip(*(tf().unstack(a) for a in extra))]
    return [extra] if extra.shape.rank != 2 else list(tf().unstack(extra))


def _stacked(slots):
    """:func:`_extra_slots` back as one value."""
    if len(slots) == 1:
        return slots[0]
    if isinstance(slots[0], Extra):
        return Extra(*(tf().stack(parts) for parts in zip(*slots)))
    return tf().stack(slots)


def _mistaken_slot(ctx, t, q, slot, fire, mistake):
    """``slot`` (an :class:`Extra` ``[L]``) holding the mistaken order ``(side, level,
    ttl, volume)`` of placement number ``q`` where ``fire``."""
    t_ = tf()
    m_side, m_level, m_ttl, m_vol = mistake
    m_packed = t_.bitwise.left_shift(t_.clip_by_value(m_level, 1, ctx.level_cap), ctx.tb)
    return Extra(
        t_.where(fire & (m_side > 0), t_.bitwise.bitwise_or(m_packed, ctx.tmax - q), slot.bid),
        t_.where(fire & (m_side < 0), t_.bitwise.bitwise_or(m_packed, q), slot.ask),
        t_.where(fire, t_.constant(m_vol, t_.int64), slot.volume),
        t_.where(fire, t + m_ttl, slot.expiry))


def _mistaken(ctx, t, q, o, price, place, book, carry):
    """:func:`place_mistakes` with the step's mistaken markets in ``carry.mistaken``:
    ``(o, book, fired, carry)``; with several markets the clearing loop of
    :func:`match` runs where one fired."""
    o, book, fired, done = place_mistakes(ctx, t, q, o, price, place, book, carry.mistaken)
    carry = carry._replace(mistaken=done)
    if ctx.K > 1:
        carry = carry._replace(cleared=carry.cleared & ~fired)
    return o, book, fired, carry


def process_hifreq(ctx, t, q, order, book, price, carry, clear, settle=None):
    """:func:`process` of a high-frequency order, the events' mistaken order replacing
    it where one fires (pams's ``hooked_before_order`` sees every order)."""
    need = None
    if ctx.S.extra_order:
        order, book, need, carry = _mistaken(ctx, t, q, order, price, True, book, carry)
    return process(ctx, t, q, order, book, price, carry, clear, need, settle=settle)


def place(ctx, t, q, order, book):
    """``book`` with ``order`` in slot ``slot(q)`` of the ring (``q`` its placement
    number; no order where its side is 0)."""
    t_ = tf()
    s = ctx.S.layout.slot(q)
    packed = t_.bitwise.left_shift(order.level, ctx.tb)
    new_bid = t_.where(order.side > 0, t_.bitwise.bitwise_or(packed, ctx.tmax - q), _IMIN)
    new_ask = t_.where(order.side < 0, t_.bitwise.bitwise_or(packed, q), _IMAX)
    new_exp = t_.where(order.side != 0, t + order.ttl, -1 * t_.ones_like(order.ttl))
    chunks = ctx.chunks
    book = book._replace(bidkey=chunks.write(book.bidkey, s, new_bid),
                         askkey=chunks.write(book.askkey, s, new_ask),
                         expiry=chunks.write(book.expiry, s, new_exp))
    if book.balance:
        owner = t_.where(order.side != 0, ctx.spread(order.agent), -1)
        book = book._replace(balance=book.balance._replace(
            owner=chunks.write(book.balance.owner, s, owner)))
    return chunks.placed(t, book, s, new_bid, new_ask, new_exp)


def traded(balance, slots, crossed, col_axis=1, outside=None):
    """``balance`` after a pairing: where ``crossed`` (``[n]``), one unit bought by the
    owner of the bid in ``slots[:n]`` and sold by the owner of the ask in ``slots[n:]``
    (indices into the book's arrays, the market column at ``col_axis``).
    ``outside``: ``(bid, ask)`` ``[n]``, where that side's order is one kept outside
    the ring (an event's mistaken order), owned by ``balance.extra_owner`` (or by
    ``(bid owner, ask owner)`` ``[n]`` following them)."""
    t_ = tf()
    i64 = t_.int64
    owner = t_.gather_nd(balance.owner, slots)                       # [2 n]
    if outside is not None:
        owner = t_.where(t_.concat(outside[:2], 0),
                         t_.concat(outside[2:] or [balance.extra_owner] * 2, 0), owner)
    one = t_.ones_like(crossed, i64)
    delta = t_.where(t_.concat([crossed, crossed], 0) & (owner >= 0),
                     t_.concat([one, -one], 0), 0)
    at = t_.stack([t_.maximum(owner, 0), slots[:, col_axis]], 1)
    return balance._replace(units=t_.tensor_scatter_nd_add(balance.units, at, delta))


def settled(balance, did, price):
    """``balance`` after an execution at ``price`` ``[L]`` where ``did``: as pams's
    ``Simulator._update_agents_for_execution``, each unit moves ``price`` of cash from
    its buyer to its seller (``cash -= price * units``, units +1 bought, -1 sold)."""
    t_ = tf()
    units = balance.units
    paid = t_.cast(units, t_.float64) * t_.cast(price, t_.float64)[None]
    return balance._replace(units=t_.zeros_like(units),
                            cash=t_.where(did[None], balance.cash - paid, balance.cash),
                            inventory=balance.inventory + units)


def settled_where(balance, settle, price):
    """``balance`` with the units of the execution under way settled at the market
    price ``price`` ``[L]`` where ``settle``: a high-frequency order of several units
    is one pams order, all of whose units trade in one execution at its last pair's
    price, the market price after its last unit."""
    t_ = tf()
    units = t_.where(settle[None], balance.units, 0)
    paid = t_.cast(units, t_.float64) * t_.cast(price, t_.float64)[None]
    return balance._replace(units=balance.units - units, cash=balance.cash - paid,
                            inventory=balance.inventory + units)


def _halted_markets(ctx, carry, need):
    """``(active, need)``: the running markets no halt holds, and ``need`` with the
    markets whose halt ended (their crossed book clears)."""
    t_ = tf()
    active = carry.running & t_.ones([ctx.L], t_.bool)
    events = tuple(zip(ctx.S.events, carry.events))
    for h in (e.halted(x) for e, x in events):
        if h is not None:
            active = active & ~h
    for e, x in events:
        resumed = e.resumed(x)
        if resumed is not None:
            need = resumed if need is None else need | resumed
    return active, need


def match(ctx, t, book, side, carry, clear, need):
    """Execution after a placement: ``(cleared book, bk, ak, nb, na, vol, lvl)`` (see
    :func:`clearing`), the markets that executed (``active``) and the markets that
    cleared their first book (several markets per member; else ``carry.cleared``)."""
    t_ = tf()
    if ctx.K > 1:
        arrived = side != 0 if need is None else (side != 0) | need
        active = carry.running & arrived
        if ctx.S.halts:         # a halt's end: cleared is reset (:func:`step`)
            active = _halted_markets(ctx, carry, None)[0] & arrived
        # one pairing for every market, then (no cond around the book: XLA copied
        # it out of the branches at every pass) the loop of :func:`clearing` goes
        # on from there, zero trips unless a market clears its first book and the
        # pass paired somewhere (what clearing from scratch would do)
        first = masked_pass(ctx, t, book, active)
        more = t_.reduce_any(active & ~carry.cleared) & t_.reduce_any(first[5] > 0)
        out = clearing(ctx, t, first[0], active, first[1:], more)
        return out, active, carry.cleared | active
    if ctx.S.halts or ctx.S.extra_order:
        active, need = _halted_markets(ctx, carry, need)
        out = t_.cond(clear, lambda: clearing(ctx, t, book, active),
                      lambda: sweep_some(ctx, t, book, active, need & active))
        return out, active, carry.cleared
    out = t_.cond(carry.running,
                  lambda: t_.cond(clear, lambda: clearing(ctx, t, book),
                                  lambda: one_pass(ctx, t, book)),
                  lambda: no_match(ctx, t, book))
    return out, carry.running, carry.cleared


def process(ctx, t, q, order, book, price, carry, clear, need=None, settle=None):
    """Place one order per market (slot ``q mod C`` of the ring, ``q`` its placement
    number) and match it as pams executes after each order; update the market price.
    With several markets a market executes only where an order arrived (pams's
    ``_process_order``), so the book crossed during the warm-up clears at the first
    order of a running market (``carry.cleared``: markets that had one).  ``carry``: a
    :class:`flowsim.markets.hifreq.Carry`; ``clear``: the step clears the warm-up's
    book; ``need``: markets whose book may cross more than once (None: none).  Returns
    ``(book, price, carry, did, vol, active)``, ``carry`` with the markets that traded,
    cleared and the depths after the pass.  ``settle``: the markets where the agents'
    balance sheets settle the units traded (:func:`settled_where`; None: every market
    at this execution's price)."""
    book = place(ctx, t, q, order, book)
    return execute(ctx, t, order.side, book, price, carry, clear, need, settle)


def execute(ctx, t, side, book, price, carry, clear, need=None, settle=None):
    """:func:`process` after the placement: match where an order of ``side`` arrived,
    update the market price.  Returns ``(book, price, carry, did, vol, active)``."""
    t_ = tf()
    real = ctx.dtype
    (book, bk, ak, nb, na, vol, lvl), active, cleared = match(ctx, t, book, side, carry,
                                                              clear, need)
    # bk/ak are the bests before the last pairing: after a trade the market price is
    # the trade's; without any trade yet, the mid of the (uncrossed) book
    did = vol > 0
    has_both = (bk != _IMIN) & (ak != _IMAX)
    b_level = t_.cast(t_.bitwise.right_shift(bk, ctx.tb), real)
    a_level = t_.cast(t_.bitwise.right_shift(ak, ctx.tb), real)
    mid = (b_level * ctx.tick + a_level * ctx.tick) / 2.0
    trade_price = t_.cast(lvl, real) * ctx.tick
    new_price = t_.where(did, trade_price, t_.where(~carry.traded & has_both, mid, price))
    if book.balance and settle is None:
        book = book._replace(balance=settled(book.balance, did, trade_price))
    price = t_.where(active, new_price, price)
    if book.balance and settle is not None:
        book = book._replace(balance=settled_where(book.balance, settle, price))
    carry = carry._replace(traded=carry.traded | did, cleared=cleared, nb=nb, na=na)
    return book, price, carry, did, vol, active


def _reopened(ctx, carry):
    """``carry`` with several markets' ``cleared`` reset where a halt ended: the first
    order there clears the crossed book (:func:`match`)."""
    if ctx.K == 1 or not ctx.S.halts:
        return carry
    cleared = carry.cleared
    for e, x in zip(ctx.S.events, carry.events):
        resumed = e.resumed(x)
        if resumed is not None:
            cleared = cleared & ~resumed
    return carry._replace(cleared=cleared)


def _member_any(ctx, i):
    """For event ``i``: ``x [M K]`` -> whether ``x`` holds in any of the member's target
    markets, on each target market (None with one market)."""
    if ctx.K == 1:
        return None
    t_ = tf()
    mask = ctx.masks[i]

    def across(x):
        anywhere = t_.reduce_any(t_.reshape(x & mask, [ctx.M, ctx.K]), axis=1)
        return t_.repeat(anywhere, ctx.K) & mask

    return across


def after_matches(ctx, t, active, did, price, carry):
    """The events' ``after_match`` hooks after one order's executions (pams's
    ``hooked_after_execution``): ``carry`` with their new states."""
    if not ctx.S.events:
        return carry
    states = tuple(e.after_match(t, active, did, price, ctx.p0, x, _member_any(ctx, i))
                   for i, (e, x) in enumerate(zip(ctx.S.events, carry.events)))
    return carry._replace(events=states)


def process_by_market(ctx, t, q, order, book, price, carry, clear, need=None):
    """:func:`process` of an agent's orders market by market in the config's order, as
    pams processes an agent's list, each followed by the events' ``after_match``: a
    halt its order in one market triggers holds its order in the next.  Several
    markets per member; ``need``: markets where a mistaken order replaced the order."""
    t_ = tf()
    book = place(ctx, t, q, order, book)
    column = ctx.markets % ctx.K
    did = vol = active = None
    for k in range(ctx.K):
        side = t_.where(column == k, order.side, 0)
        here = None if need is None else need & (column == k)
        book, price, carry, d, v, a = execute(ctx, t, side, book, price, carry, clear, here)
        carry = after_matches(ctx, t, a, d, price, carry)
        did = d if did is None else did | d
        vol = v if vol is None else vol + v
        active = a if active is None else active | a
    return book, price, carry, did, vol, active


def _before_step(ctx, t, fund, states):
    """The events' ``before_step`` hooks on their target markets: ``(fund, states)``."""
    t_ = tf()
    est = list(states)
    for i, e in enumerate(ctx.S.events):
        shocked, est[i] = e.before_step(t, fund, est[i])
        fund = shocked if ctx.K == 1 else t_.where(ctx.masks[i], shocked, fund)
    return fund, est


def _accumulate(ctx, t, acc, price, fund, vol, carry, over):
    """The per-market sums after step ``t``, ``vol`` its volume, ``carry`` its last
    pass's (the events' states are the caller's)."""
    t_ = tf()
    real, S = ctx.dtype, ctx.S
    inside = t >= S.t0
    after = t > S.t0
    vol_f = t_.cast(vol, real)
    new = {
        "mispricing": acc["mispricing"] + t_.where(
            inside, t_.abs(t_.math.log(price / fund)), 0.0),
        "trades": acc["trades"] + t_.where(after, vol_f, 0.0),
        "clearing": acc["clearing"] + t_.where(t == S.t0, vol_f, 0.0),
        "depth_bid": acc["depth_bid"] + t_.where(inside, t_.cast(carry.nb, real), 0.0),
        "depth_ask": acc["depth_ask"] + t_.where(inside, t_.cast(carry.na, real), 0.0),
        "overflow": acc["overflow"] | over,
        **({"cleared": carry.cleared} if ctx.K > 1 else {}),
        **({"events": acc["events"]} if S.events else {}),
    }
    if S.by_volume:                  # executed volume: the total, and before step t + 1
        new["volume"] = acc["volume"] + vol
        new["vcum"] = t_.tensor_scatter_nd_update(acc["vcum"], [[t + 1]], new["volume"][None])
    return new


def step(ctx, loop):
    """Step ``loop.t`` of :func:`run`: the events' hooks, the orders collected and
    processed one by one (each followed by the high-frequency phase), the history, the
    sums, the fundamental's walk.  Returns the next :class:`Loop`."""
    t_ = tf()
    S = ctx.S
    t, price, fund, book, hist, acc = loop.t, loop.price, loop.fund, loop.book, loop.hist, loop.acc
    place_now, running, clear = ctx.place_at[t], ctx.run_at[t], ctx.clear_at[t]
    book, after_fresh = ctx.chunks.fresh(t, book)
    est = None
    if S.events:
        fund, est = _before_step(ctx, t, fund, acc["events"])
    u = rng.uniform(ctx.key, [ctx.n_rows, ctx.L], ctx.dtype, stream=2, step=t)
    vols = (acc["volume"], acc["vcum"]) if S.by_volume else None
    seen = book_view(ctx, t, book) if any(lg.book for lg in S.learned) else None
    orders, over = collect(ctx, t, u, MarketView(price, fund, hist, seen), place_now, vols)
    carry = _reopened(ctx, hifreq.Carry(loop.traded, acc.get("cleared"), running, est,
                                        None, None))
    vol = None
    for j, o in enumerate(orders):
        # the step's first writes wait for fresh()'s reads (book_chunks.Whole.after_fresh)
        q = S.layout.normal(t, j) + after_fresh if j == 0 else S.layout.normal(t, j)
        need = None         # markets whose book may cross more than once at this order
        if S.extra_order:
            o, book, need, carry = _mistaken(ctx, t, S.layout.normal(t, j), o, price,
                                             place_now, book, carry)
        first = clear if j == 0 else t_.constant(False)
        if ctx.K > 1 and S.halts:
            book, price, carry, did, v, active = process_by_market(ctx, t, q, o, book,
                                                                   price, carry, first, need)
        else:
            book, price, carry, did, v, active = process(ctx, t, q, o, book, price, carry,
                                                         first, need)
            carry = after_matches(ctx, t, active, did, price, carry)
        vol = v if vol is None else vol + v
        if S.hifreq:
            go = ctx.hf.go(t, o.side, u[ctx.rate_rows + j])
            book, price, carry, h_vol, h_over = hifreq.phase(S, ctx.hf, t, j, go, book,
                                                             price, fund, carry)
            vol, over = vol + h_vol, over | h_over
    hist = t_.tensor_scatter_nd_update(hist, [[t]], price[None])
    fhist = loop.fhist
    if S.paths:
        fhist = t_.tensor_scatter_nd_update(fhist, [[t]], fund[None])
    acc = _accumulate(ctx, t, acc, price, fund, vol, carry, over)
    if S.events:
        acc["events"] = tuple(carry.events)
    fund = _fundamental_step(S, fund, _normal(u[2]), ctx.drift, ctx.volatility, ctx.chol,
                             ctx.M)
    return Loop(t + 1, price, carry.traded, fund, book, hist, fhist, acc)


def run(S, key, M, state, dtype="float64"):
    """Step ``M`` ensemble members (each ``K`` markets) through the whole run, prices
    and agents' parameters in ``dtype`` (float64 or float32; tick levels are int64).
    Returns ``(stats [M, statistics], prices [T + 1, M K], fundamental [T + 1, M K] or
    None)``, all of ``dtype``."""
    t_ = tf()
    real = t_.as_dtype(dtype)
    ctx = StepContext(S, key, M, state, real)
    T, L = S.n_steps, ctx.L
    i64 = t_.int64
    zero = t_.zeros([L], real)
    book, sheets = _start_book(ctx, S, key, M, state)
    hist = t_.zeros([T + 1, L], real)
    fhist = t_.zeros([T + 1, L], real) if S.paths else None
    acc = {k: zero for k in ("mispricing", "trades", "clearing", "depth_bid", "depth_ask")}
    acc["overflow"] = t_.zeros([L], t_.bool)
    if ctx.K > 1:
        acc["cleared"] = t_.zeros([L], t_.bool)
    acc.update(ctx.volume_acc)
    if S.events:
        acc["events"] = tuple(e.init_state(L) for e in S.events)
    start = Loop(t_.constant(0, i64), zero + ctx.p0, t_.zeros([L], t_.bool), zero + ctx.f0,
                 book, hist, fhist if S.paths else t_.zeros([0], real), acc)
    if S.hifreq:
        ctx.hf = hifreq_context(S, M, ctx.tick, ctx.spread, _hifreq_bests(ctx),
                                functools.partial(process_hifreq, ctx), ctx.level_cap,
                                ctx.tb, real, functools.partial(limit_at, ctx),
                                owners=hifreq_owners(ctx) if S.balances else None,
                                events=_hifreq_events(ctx))
    (_, price, _, fund, book, hist, fhist, acc), = t_.while_loop(
        lambda loop: loop.t < T, lambda loop: (step(ctx, loop),), (start,))
    hist = t_.tensor_scatter_nd_update(hist, [[T]], price[None])
    if S.paths:
        fhist = t_.tensor_scatter_nd_update(fhist, [[T]], fund[None])
    else:
        fhist = None
    out = venue_statistics(S, M, hist, acc)
    if sheets is not None:
        out = t_.concat([out, t_.cast(sheet_columns(S, M, book.balance, sheets, price,
                                                    state["market"][1]), out.dtype)], 1)
    return out, hist, fhist


def _start_book(ctx, S, key, M, state):
    """``(book, sheets)`` at the start: the ring's slots (``R`` orders a step, ``C``
    steps of life, padded: ``[C, L]``, or ``[L, C]`` with chunks), the slots outside
    the ring (an event's mistaken orders) and the balance sheets (``sheets``: the
    starting ``(cash, units)``, None without balances)."""
    t_ = tf()
    i64, L = t_.int64, ctx.L
    book = ctx.chunks.new_book(L)
    X = [L] if S.extra_slots == 1 else [S.extra_slots, L]
    if S.extra_order:
        book = book._replace(extra=Extra(
            t_.fill(X, t_.constant(_IMIN, i64)), t_.fill(X, t_.constant(_IMAX, i64)),
            t_.zeros(X, i64), t_.fill(X, t_.constant(-1, i64))))
    if not S.balances:
        return book, None
    sheets = start_balance(S, key, M, state, balance_gid(S, ctx.gid))
    owner = t_.fill(book.expiry.shape, t_.constant(-1, i64))
    book = book._replace(balance=Balance(
        owner, t_.zeros_like(sheets[1]), *sheets,
        t_.fill(X, t_.constant(-1, i64)) if S.extra_order else ()))
    return book, sheets


def balance_gid(S, gid):
    """The group of every agent with a balance sheet: ``gid`` (normal and learned
    groups), then the high-frequency group's agents (its index after them)."""
    hf = sum(g.n_agents for g in S.hifreq)
    return np.concatenate([gid, np.full(hf, len(S.sizes) + len(S.learned), gid.dtype)])


def sheet_columns(S, M, end, start, price, start_price):
    """``[M, columns]``: :func:`balance_columns` of the balance sheets at the end
    (``end``, a :class:`Balance`) and the start (``start``: ``(cash, units)`` ``[N, M
    K]``); several markets: each member's cash summed over its markets' columns (in
    market order), its units by market."""
    t_ = tf()
    K = S.n_venues
    sizes = S.sizes + tuple(g.n_agents for g in S.hifreq)
    if K == 1:
        return balance_columns(sizes, t_.transpose(end.cash), t_.transpose(end.inventory),
                               price, t_.transpose(start[0]), t_.transpose(start[1]),
                               start_price)

    def members(x):                                 # [N, M K] -> [M, N, K]
        return t_.transpose(t_.reshape(x, [-1, M, K]), [1, 0, 2])

    def cash(x):
        x = members(x)
        total = x[:, :, 0]
        for k in range(1, K):
            total = total + x[:, :, k]
        return total

    access = S.access + tuple(g.venues for g in S.hifreq)
    return balance_columns(sizes, cash(end.cash), members(end.inventory),
                           t_.reshape(price, [M, K]), cash(start[0]), members(start[1]),
                           start_price, access)


def start_balance(S, key, M, state, gid):
    """``(cash, units)`` ``[N, M K]`` each agent starts with: pams's draws of its group's
    ``cashAmount`` and ``int()`` of ``assetVolume`` (``state["balance_kind"]``,
    ``["balance_a"]``, ``["balance_b"]``: the groups' :func:`balance_arrays`; ``gid``
    the agents' groups, :func:`balance_gid`), from stream 5 of the block.  Several
    markets: a draw of units in each market the agent reaches (none elsewhere), its
    cash in the column of the member's first market (0 in the others)."""
    t_ = tf()
    f64 = t_.float64
    K = S.n_venues
    kind, a, b = (t_.gather(state["balance_" + x], gid, axis=0) for x in "kab")   # [N, 2]
    u = rng.uniform(key, [1 + K, M, len(gid)], f64, stream=5)
    cash = draw(u[0], kind[:, 0], t_.cast(a[:, 0], f64), t_.cast(b[:, 0], f64))

    def units(k):
        return t_.cast(_trunc(draw(u[1 + k], kind[:, 1], t_.cast(a[:, 1], f64),
                                   t_.cast(b[:, 1], f64))), t_.int64)

    if K == 1:
        return t_.transpose(cash), t_.transpose(units(0))
    reach = np.zeros((len(gid), K), bool)
    for i, venues in enumerate(S.access + tuple(g.venues for g in S.hifreq)):
        reach[np.ix_(np.asarray(gid) == i, list(venues))] = True
    held = t_.stack([t_.where(reach[:, k], units(k), 0) for k in range(K)], 2)   # [M, N, K]
    first = t_.stack([cash] + [t_.zeros_like(cash)] * (K - 1), 2)

    def columns(x):                                 # [M, N, K] -> [N, M K]
        return t_.reshape(t_.transpose(x, [1, 0, 2]), [len(gid), M * K])

    return columns(first), columns(held)


def balance_arrays(groups):
    """``(kind [G, 2] int32, a [G, 2], b [G, 2])`` of the groups' ``cashAmount`` and
    ``assetVolume`` distributions."""
    kind = np.zeros((len(groups), 2), np.int32)
    a, b = np.zeros((len(groups), 2)), np.zeros((len(groups), 2))
    for i, g in enumerate(groups):
        for j, d in enumerate((g.cash, g.asset)):
            kind[i, j] = KINDS[d.kind]
            a[i, j], b[i, j] = (tuple(d.args) + (0.0, 0.0))[:2]
    return kind, a, b


def balance_columns(sizes, cash, inventory, price, start_cash, start_inventory,
                    start_price, access=None):
    """``[M, columns]``: :func:`flowsim.markets.stats.balance_statistics` in TensorFlow,
    for agents in groups of ``sizes`` (consecutive, config order).  ``cash``,
    ``start_cash`` ``[M, N]``.  One market: ``inventory``, ``start_inventory`` ``[M,
    N]``, ``price`` ``[M]`` the final market price, ``start_price`` a scalar.  Several
    markets: ``inventory``, ``start_inventory`` ``[M, N, K]``, ``price`` ``[M, K]``,
    ``start_price`` ``[K]``, ``access`` each group's markets (wealth sums the markets in
    order).  float64."""
    t_ = tf()
    f64 = t_.float64
    cash, start_cash = t_.cast(cash, f64), t_.cast(start_cash, f64)
    inventory = t_.cast(inventory, f64)
    start_inventory = t_.cast(start_inventory, f64)
    if access is None:
        inventory, start_inventory = inventory[:, :, None], start_inventory[:, :, None]
        price, start_price = price[:, None], t_.reshape(start_price, [1])
    price, start_price = t_.cast(price, f64), t_.cast(start_price, f64)
    wealth, start = cash, start_cash
    for k in range(int(inventory.shape[2])):
        wealth = wealth + inventory[:, :, k] * price[:, k:k + 1]
        start = start + start_inventory[:, :, k] * start_price[k]
    columns, lo = [], 0
    for i, n in enumerate(sizes):
        held = [0] if access is None else list(access[i])
        for x in (cash, *(inventory[:, :, k] for k in held), wealth, wealth - start):
            columns += _group_statistics(x[:, lo:lo + n])
        lo += n
    return t_.stack(columns, 1)


def _group_statistics(x):
    """Mean, standard deviation (ddof 1; NaN for one agent) and numpy's linear 10 %,
    50 % and 90 % quantiles of each row of ``x`` ``[M, n]``."""
    t_ = tf()
    n = int(x.shape[1])
    mean = t_.reduce_mean(x, axis=1)
    d = x - mean[:, None]
    std = (t_.sqrt(t_.reduce_sum(d * d, axis=1) / (n - 1)) if n > 1
           else mean * np.nan)
    s = t_.sort(x, axis=1)
    out = [mean, std]
    for q in (0.1, 0.5, 0.9):
        virtual = n * q + (1.0 - q) - 1.0              # numpy's linear rule
        lo = int(np.floor(virtual))
        hi = min(lo + 1, n - 1)
        g = virtual - lo
        a, b = s[:, lo], s[:, hi]
        out.append(b - (b - a) * (1.0 - g) if g >= 0.5 else a + (b - a) * g)
    return out


def _acf(x, lag):
    """Autocorrelation at ``lag`` of the columns of ``x`` ``[n, M]``; NaN if constant."""
    t = tf()
    d = x - t.reduce_mean(x, axis=0, keepdims=True)
    den = t.reduce_sum(d * d, axis=0)
    if lag >= int(x.shape[0]):
        num = t.zeros_like(den)
    else:
        num = t.reduce_sum(d[lag:] * d[:-lag], axis=0)
    return t.where(den > 0, num / t.where(den > 0, den, 1.0), np.nan)


def _return_statistics(r):
    t = tf()
    d = r - t.reduce_mean(r, axis=0, keepdims=True)
    m2 = t.reduce_mean(d * d, axis=0)
    m4 = t.reduce_mean(d * d * d * d, axis=0)
    safe = t.where(m2 > 0, m2, 1.0)
    kurt = t.where(m2 > 0, m4 / (safe * safe) - 3.0, np.nan)
    return [t.sqrt(m2), kurt, _acf(r, 1)] + [_acf(t.abs(r), k) for k in ABS_LAGS]


def _pearson(x, y):
    """Correlation of the columns of ``x`` and ``y`` ``[n, M]``; NaN if one is constant."""
    t = tf()
    dx = x - t.reduce_mean(x, axis=0, keepdims=True)
    dy = y - t.reduce_mean(y, axis=0, keepdims=True)
    den = t.sqrt(t.reduce_sum(dx * dx, axis=0) * t.reduce_sum(dy * dy, axis=0))
    return t.where(den > 0, t.reduce_sum(dx * dy, axis=0) / t.where(den > 0, den, 1.0), np.nan)


def venue_statistics(S, M, hist, acc):
    """``[M, statistics]``: per market :func:`statistics` (NaN for a market whose tick
    levels left the packed range); with several markets their columns market by market,
    then the one-step return correlation of each pair (:func:`flowsim.markets.stats.names`)."""
    t = tf()
    K = S.n_venues
    per = statistics(S, hist, acc)                             # [M K, len(NAMES)]
    per = t.where(~acc["overflow"][:, None], per, np.nan)
    if K == 1:
        return per
    cols = [t.reshape(per, [M, K * len(NAMES)])]
    p = t.reshape(t.math.log(hist[S.t0:S.n_steps]), [-1, M, K])
    r1 = p[1:] - p[:-1]
    bad = t.reduce_any(t.reshape(acc["overflow"], [M, K]), axis=1)
    for a in range(K):
        for b in range(a + 1, K):
            c = _pearson(r1[:, :, a], r1[:, :, b])
            cols.append(t.where(~bad, c, np.nan)[:, None])
    prices = t.unstack(t.reshape(hist[S.t0:S.n_steps], [-1, M, K]), axis=2)
    for i, comps, shares in S.indexes:          # mean |ln(P_index / index of prices)|
        index = index_of([prices[c] for c in comps], shares)
        dev = t.reduce_mean(t.abs(t.math.log(prices[i] / index)), axis=0)
        cols.append(t.where(~bad, dev, np.nan)[:, None])
    return t.concat(cols, axis=1)


def statistics(S, hist, acc):
    """``[M, len(NAMES)]``: :func:`flowsim.markets.stats.market_statistics` in TensorFlow."""
    t = tf()
    T, t0 = S.n_steps, S.t0
    p = t.math.log(hist[t0:T])                     # [n, M]
    r1 = p[1:] - p[:-1]
    coarse = p[::COARSE]
    r10 = coarse[1:] - coarse[:-1]
    n = T - t0
    cols = _return_statistics(r1) + _return_statistics(r10) + [
        t.reduce_mean(t.cast(t.equal(r1, 0.0), r1.dtype), axis=0),
        acc["mispricing"] / n,
        acc["trades"] / (n - 1),
        acc["depth_bid"] / n,
        acc["depth_ask"] / n,
        hist[T],
        acc["clearing"],
    ]
    assert len(cols) == len(NAMES)
    return t.stack(cols, axis=1)


def unit_rows(S, M):
    """``[rows, M K]`` bool: the book rows the depth counts, where high-frequency orders
    of several units take several rows (:mod:`.agents.arbitrage`); ``None`` where every
    row is one order."""
    g = S.hifreq[0] if S.hifreq else None
    if g is None or not hasattr(g, "counted"):
        return None
    K = S.n_venues
    rows = np.concatenate([np.ones((S.layout.normal_rows, K), bool),
                           g.counted(S.layout.offsets(), K)])
    return tf().constant(np.tile(rows, (1, M)))


def hifreq_owners(ctx):
    """``owners(t, q)`` of :func:`hifreq_context` for the balance sheets: pams asks a
    phase's high-frequency agents in a shuffled order, so turn ``i`` of the phase after
    normal order ``j`` of step ``t`` is agent ``i`` of a uniform permutation of the
    group (stream 6, batch ``t R + j``; agents numbered after the normal ones).  An
    order of several units settles after its last unit in each market (the group's
    ``counted`` rows: :func:`settled_where`)."""
    t_ = tf()
    S, M, i64 = ctx.S, ctx.M, tf().int64
    g = S.hifreq[0]
    P, H, per_turn = S.layout.P, S.layout.H, g.orders_per_turn
    last = (g.counted(np.arange(per_turn), ctx.K) if hasattr(g, "counted")
            else np.ones((per_turn, ctx.K), bool))
    last = t_.constant(np.tile(last, (1, M)))                        # [per_turn, M K]

    def owners(t, q):
        pos = q % P
        j, h = pos // (1 + H), pos % (1 + H) - 1
        u = rng.uniform(ctx.key, [M, g.n_agents], ctx.dtype, stream=6, step=t * ctx.R + j)
        perm = t_.cast(t_.argsort(u, axis=1, stable=True), i64)
        agent = ctx.N + t_.gather(perm, h // per_turn, axis=1)
        return agent, t_.gather(last, h % per_turn, axis=0)

    return owners


def _hifreq_bests(ctx):
    """``bests(t, book)`` as a high-frequency agent sees the book: with the order kept
    outside the ring (pams's book holds it)."""
    if not ctx.S.extra_order:
        return ctx.chunks.bests
    return lambda t, book: ctx.chunks.bests(t, book, extra_keys(ctx, t, book))


def _hifreq_events(ctx):
    """What a high-frequency turn does with halts (None without): ``after(t, did,
    price, carry)`` after one order's executions (the events' ``after_match``; an order
    trades only where it is active) and ``halted(carry)``, the halted markets
    ``[L]``."""
    if not ctx.S.halts:
        return None

    def after(t, did, price, carry):
        return after_matches(ctx, t, did, did, price, carry)

    def halted(carry):
        return ~_halted_markets(ctx, carry, None)[0]

    return SimpleNamespace(after=after, halted=halted)


def hifreq_context(S, M, tick, spread, bests, process, level_cap, tb, dtype, limit=None,
                   owners=None, events=None):
    """What a high-frequency agent's turn uses of the compiled step (:mod:`.hifreq`):
    sizes, the markets' ticks, ``bests(t, book)``, ``process(t, q, side, level, ttl,
    book, price, carry)`` (``carry``: a :class:`flowsim.markets.hifreq.Carry`; an order
    placed and matched as a normal one is, after the first clearing; built on the
    ``process`` given, :func:`process` with its :class:`StepContext` bound), the step's
    ``maxHighFrequencyOrders`` and whether a phase runs (``go``: the normal agent
    placed an order and the rate passed the draw); ``dtype``: the prices';
    ``limit(value [M], k)``: an order's price in market ``k`` after the events' price
    limits (:func:`limit_at`; default: none); ``owners(t, q)``: the agent ``[M]``
    placing high-frequency placement number ``q`` and the markets ``[M K]`` where the
    balance sheets settle after it (:func:`hifreq_owners`; None: no balance sheets);
    ``events``: ``after`` and ``halted`` (:func:`_hifreq_events`) where a halt may
    fire, else None."""
    t_ = tf()
    K = S.n_venues
    i64 = t_.int64
    max_at = t_.constant(np.array([m for m, _ in S.hifreq_at], np.int64))
    rate_at = t_.constant(np.array([r for _, r in S.hifreq_at]), dtype)

    def hf_process(t, q, side, level, ttl, book, price, carry):
        agent, settle = owners(t, q) if owners else (None, None)
        book, price, carry, _, vol, _ = process(t, q, Order(side, level, ttl, agent), book,
                                                price, carry, t_.constant(False),
                                                settle=settle)
        return book, price, carry, vol

    def go(t, side, u):
        """pams skips the phase where the rate is below the draw (``u [M K]``, one per
        member) or the normal agent placed nothing."""
        placed = t_.reduce_any(t_.reshape(side != 0, [M, K]), axis=1)
        return placed & (t_.reshape(u, [M, K])[:, 0] <= rate_at[t]) & (max_at[t] > 0)

    return SimpleNamespace(
        M=M, K=K, L=M * K, tick=tick, tb=tb, dtype=dtype, level_cap=level_cap, IMIN=_IMIN,
        IMAX=_IMAX, spread=spread, tick_level=tick_level, process=hf_process, go=go,
        bests=bests, limit=limit or (lambda value, k: value),
        max_hifreq_at=t_.cast(max_at, i64), events=events)
