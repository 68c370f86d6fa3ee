"""The compiled market step: M markets of one block stepped together in one XLA loop.

Each market is pams's continuous double auction (pams 0.3.0, ``../shared/DESIGN.md``
"pams facts"), vectorised over the markets of a block:

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
"""
from types import SimpleNamespace

import numpy as np

from ..core import rng
from ..core.fastmath import inverse_normal
from ..core.lazy_tf import tf
from . import book_chunks, hifreq
from .agents import market_share_fcn
from .agents.fcn import FCN_PARAMS
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


def tick_level(price, tick, buy):
    """pams's tick snapping: the nearest level if within 4 ulp of it (capped at a quarter
    tick), else floor for buys and ceil for sells.  int64."""
    t = tf()
    ratio = price / tick
    nearest = t.round(ratio)
    big = t.maximum(t.abs(ratio), 1.0)
    ulp = t.bitcast(t.bitcast(big, t.int64) + 1, t.float64) - big
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
        # events (flowsim.markets.events): their hooks join the step; where a halt ends
        # or an order of volume > 1 arrives, the market's crossed book clears at once
        self.events = tuple(getattr(cfg, "events", ()))
        self.halts = any(e.halts for e in self.events)
        self.extra_order = any(e.extra_order for e in self.events)
        # markets of a block that clear such a book at once, in a sub-book of this many
        # columns (0: the whole block clears; the same bits)
        self.sweep_markets = SWEEP_MARKETS
        # several markets with a high-frequency phase keep the book's bests by chunks of
        # rows (:mod:`flowsim.markets.book_chunks`; False: whole-book reductions, the
        # same bits)
        self.book_chunks = True
        self._venues(cfg)

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


def agent_params(S, key, M, state):
    """Per-market agent parameters ``{attr: [M, N]}`` (FCN groups then learned groups),
    plus ``group [N]`` int32."""
    t = tf()
    N = S.n_agents
    u = rng.uniform(key, [len(ATTRS), M, N], t.float64, stream=1)
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
    ``u`` itself, today's layout)."""
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


def run(S, key, M, state):
    """Step ``M`` ensemble members (each ``K`` markets) through the whole run.  Returns
    ``(stats [M, statistics], prices [T + 1, M K], fundamental [T + 1, M K] or None)``."""
    t_ = tf()
    T, K, R = S.n_steps, S.n_venues, S.max_orders
    slot = S.layout.slot
    N = S.n_agents
    L = M * K
    i64, f64 = t_.int64, t_.float64
    tick, p0, f0, drift, volatility = _venue_columns(S, M, state)
    chol = state.get("chol")
    params, gid = agent_params(S, key, M, state)
    n_fcn = sum(S.sizes)
    margin_normal = t_.constant(np.array([S.margin_normal[g] if g < len(S.sizes) else False
                                          for g in gid]))
    chart_sign = t_.constant(np.array([S.chart_sign[g] if g < len(S.sizes) else 1.0
                                       for g in gid]))
    any_normal_margin = any(S.margin_normal)
    flags = np.array(S.flags, np.int32)
    place_at = t_.constant(flags & 1 > 0)
    run_at = t_.constant(flags & 2 > 0)
    clear_at = t_.constant(flags & 4 > 0)
    markets = t_.range(L, dtype=i64)
    tmax = t_.constant((1 << S.time_bits) - 1, i64)
    tb = t_.constant(S.time_bits, i64)
    level_cap = (1 << S.level_bits) - 1
    n_draws = 3 + int(any_normal_margin)
    n_rows = n_draws + (R - 1) * (n_draws - 1)
    pick_rows = n_rows                  # rows of the market picks (by_volume groups)
    n_rows += R * bool(S.by_volume)
    rate_rows = n_rows                  # rows of the high-frequency phases' rate draws
    n_rows += R * bool(S.hifreq)
    orders_at = t_.constant(np.array(S.orders, np.int64))

    def spread(x):
        """A member's value ``[M]`` for each of its markets ``[M K]``."""
        return x if K == 1 else t_.repeat(x, K)

    if K > 1:
        access, masks = _venue_masks(S, gid, M)
    by_volume, volume_acc = _volume_state(S, M, state, gid)

    def pick(x, a):
        return t_.gather(x, a, batch_dims=1)

    # the book's bests and depths (kept by chunks of rows where steps make many passes)
    chunks = book_chunks.make(S, L, unit_rows(S, M))
    bests = chunks.bests

    def extra_keys(t, book):
        """Live keys ``(bid, ask)`` of the order kept outside the ring."""
        live = (book[6] >= t) & (book[5] > 0)
        return t_.where(live, book[3], _IMIN), t_.where(live, book[4], _IMAX)

    def pair(t, book, bk, ak, active=None, xtra=None):
        """Pair the best bid and ask where they cross (and ``active``): (book, crossed,
        trade level).  ``xtra``: live keys of the order outside the ring, which loses
        one unit per pairing instead of its slot."""
        bidkey, askkey, expiry = book[:3]
        has_b, has_a = bk != _IMIN, ak != _IMAX
        b_level, a_level = t_.bitwise.right_shift(bk, tb), t_.bitwise.right_shift(ak, tb)
        b_time = tmax - t_.bitwise.bitwise_and(bk, tmax)
        a_time = t_.bitwise.bitwise_and(ak, tmax)
        crossed = has_b & has_a & (b_level >= a_level)
        if active is not None:
            crossed = crossed & active
        level = t_.where(b_time < a_time, b_level, a_level)
        cols = markets if bk.shape[0] == L else t_.range(bk.shape[0], dtype=i64)
        slots = chunks.at(t_.concat([slot(b_time), slot(a_time)], 0),
                          t_.concat([cols, cols], 0))
        if xtra is None:
            old = t_.gather_nd(expiry, slots)
            gone = t_.where(t_.concat([crossed, crossed], 0), -1 * t_.ones_like(old), old)
            expiry = t_.tensor_scatter_nd_update(expiry, slots, gone)
            book = chunks.paired(t, (bidkey, askkey, expiry) + book[3:], slot(b_time),
                                 slot(a_time))
            return book, crossed, level
        # the order outside the ring has no slot: its time mod C may be the slot of the
        # order it pairs with, so remove with a min (duplicate indices stay exact)
        from_b = (bk == xtra[0]) & has_b
        from_a = (ak == xtra[1]) & has_a
        ring = t_.concat([crossed & ~from_b, crossed & ~from_a], 0)
        gone = t_.where(ring, t_.constant(-1, i64), t_.constant(_IMAX, i64))
        expiry = t_.tensor_scatter_nd_min(expiry, slots, gone)
        used = t_.cast(crossed & (from_b | from_a), i64)
        return (bidkey, askkey, expiry) + book[3:5] + (book[5] - used, book[6]), crossed, level

    def venue_pick(t, u, a, vols):
        """``[M K]`` markets agent ``a`` orders in: all it can reach, or for a
        MarketShareFCNAgent the one picked by volume (``vols``: total and ``vcum``)."""
        reach = t_.gather(access, a)                             # [M, K]
        tau = pick(params["time_window"], a)
        back = spread(t - t_.cast(t_.minimum(t_.cast(t, f64), tau), i64))
        vol = market_share_fcn.window_volume(vols[1], vols[0], back, markets)
        chosen = market_share_fcn.choose(t_.reshape(u, [M, K])[:, 0],
                                         t_.reshape(vol, [M, K]), reach)
        return t_.reshape(t_.where(t_.gather(by_volume, a)[:, None], chosen, reach), [-1])

    def order(t, u, price, fund, hist, a=None, venue=None):
        """Side (+1 buy, -1 sell, 0 none), tick level, ttl of agent ``a`` (default: the
        agent ``u[0]`` picks uniformly) in the markets ``venue`` (default: all it can
        reach)."""
        if a is None:
            a = t_.minimum(t_.cast(u[0] * N, i64), N - 1)
        tau = spread(pick(params["time_window"], a))
        k = spread(pick(params["order_margin"], a))
        wf, wc, wn = (spread(pick(params[x], a)) for x in ("fundamental_weight",
                                                           "chart_weight", "noise_weight"))
        mrt = spread(pick(params["mean_reversion_time"], a))
        ns = spread(pick(params["noise_scale"], a))
        w = t_.minimum(t_.cast(t, f64), tau)
        back = t - t_.cast(w, i64)
        past = t_.gather_nd(hist, t_.stack([back, markets], 1))
        past = t_.where(w > 0, past, price)
        fundamental = t_.math.log(fund / price) / t_.maximum(mrt, 1.0)
        chart = spread(t_.gather(chart_sign, a)) * t_.math.log(price / past) / t_.maximum(w, 1.0)
        noise = ns * _normal(u[1])
        r = (wf * fundamental + wc * chart + wn * noise) / (wf + wc + wn)
        expected = price * t_.exp(r * tau)
        margin_k = k
        if S.learned:
            from .learned import learned_orders
            expected, margin_k = learned_orders(S, a, n_fcn, gid, params, t, price, fund, hist,
                                                expected, k)
        buy = expected > price
        sell = expected < price
        fixed = t_.where(buy, expected * (1 - margin_k), expected * (1 + margin_k))
        if any_normal_margin:
            normal_price = expected + _normal(u[3]) * k
            value = t_.where(spread(t_.gather(margin_normal, a)), normal_price, fixed)
        else:
            value = fixed
        for i, e in enumerate(S.events):
            limited = e.limit_price(value, p0)
            value = limited if K == 1 or limited is value else t_.where(masks[i], limited,
                                                                        value)
        raw = tick_level(value, tick, buy)
        level = t_.clip_by_value(raw, 1, level_cap)
        side = t_.where(buy, 1, t_.where(sell, -1, 0))
        if K > 1:
            if venue is None:
                venue = t_.reshape(t_.gather(access, a), [-1])
            side = t_.where(venue, side, 0)
        return t_.cast(side, i64), level, t_.cast(tau, i64), (raw > level_cap) & (side != 0)

    def ask_others(t, u, price, fund, hist, side, level, ttl, place):
        """pams asks agents in a shuffled order until one orders: where the first agent
        placed none (E == P exactly, possible only for agents without noise), ask the
        others in a uniformly random order (argsort of fresh uniforms), first agent
        excluded, until one orders or all were asked."""
        first = t_.minimum(t_.cast(u[0] * N, i64), N - 1)

        def asking():
            perm = t_.argsort(rng.uniform(key, [M, N], f64, stream=3, step=t), axis=1,
                              stable=True)
            perm = t_.cast(perm, i64)

            def more(k, side, level, ttl):
                return (k < N) & t_.reduce_any(side == 0)

            def ask(k, side, level, ttl):
                a = perm[:, k]
                u2 = rng.uniform(key, [n_draws, M], f64, stream=4, step=t * N + k)
                s2, l2, t2, _ = order(t, u2, price, fund, hist, a)
                redo = (side == 0) & (a != first)
                return (k + 1, t_.where(redo, s2, side), t_.where(redo, l2, level),
                        t_.where(redo, t2, ttl))

            out = t_.while_loop(more, ask, [t_.constant(0, i64), side, level, ttl])
            return tuple(out[1:])

        return t_.cond(place & t_.reduce_any(side == 0), asking, lambda: (side, level, ttl))

    def clearing(t, book, active=None, start=None, more=None):
        """Pair off the best bid and ask while they cross (where ``active``; all markets
        if None), as pams executes after each order while the market runs: the book
        crossed during the warm-up or a halt clears at once, an order of volume > 1
        trades against every order it crosses.  ``book`` may hold any number of
        markets' columns (:func:`clear_some` passes a few).  Returns ``(book, bk, ak,
        nb, na, vol, lvl)``: the bests and depths of the cleared book, the volume and
        the level of the last pair.  ``start``: ``(bk, ak, nb, na, vol, lvl)`` of a
        pairing already made on ``book`` (:func:`masked_pass`), the loop going on from
        it while ``more`` (a bool tensor; default: from scratch)."""
        xtra_of = (lambda b: extra_keys(t, b)) if S.extra_order else (lambda b: None)

        def cond(book, bk, ak, nb, na, vol, lvl, more):
            return more

        def step(book, bk, ak, nb, na, vol, lvl, more):
            xtra = xtra_of(book)
            bk, ak, nb, na = bests(t, book, xtra)
            book2, crossed, pl = pair(t, book, bk, ak, active, xtra)
            c = t_.cast(crossed, i64)
            return (book2, bk, ak, nb - c, na - c, vol + c, t_.where(crossed, pl, lvl),
                    t_.reduce_any(crossed))

        if start is None:
            z = t_.zeros([book[2].shape[chunks.col_axis]], i64)
            start, more = (z,) * 6, t_.constant(True)
        out = t_.while_loop(cond, step, [book, *start, more])
        return tuple(out[:-1])

    def masked_pass(t, book, active):
        """:func:`clearing` for a step where only the arrival (volume 1) can cross:
        one pairing, the same result."""
        xtra = extra_keys(t, book) if S.extra_order else None
        bk, ak, nb, na = bests(t, book, xtra)
        book2, crossed, lvl = pair(t, book, bk, ak, active, xtra)
        vol = t_.cast(crossed, i64)
        gone_b = gone_a = vol
        if xtra is not None:         # the order outside the ring stays while it has volume
            stays = book2[5] > 0
            gone_b = t_.cast(crossed & ~((bk == xtra[0]) & (bk != _IMIN) & stays), i64)
            gone_a = t_.cast(crossed & ~((ak == xtra[1]) & (ak != _IMAX) & stays), i64)
        return book2, bk, ak, nb - gone_b, na - gone_a, vol, t_.where(crossed, lvl, 0)

    def sweep_some(t, book, active, need):
        """:func:`clearing` where ``need`` (a halt just ended, an order of volume > 1
        arrived), :func:`masked_pass` at the other ``active`` markets, whose book was
        uncrossed before the arrival of one unit: the result of :func:`clearing`
        everywhere.  A few such markets clear in sub-books of :data:`SWEEP_MARKETS`
        columns (``Structure.sweep_markets``, :func:`clear_some`), so that the loop's
        trips do not cost the whole block; more than a quarter of the block loops whole."""
        n = t_.reduce_sum(t_.cast(need, i64))

        def loop():
            if not S.sweep_markets:
                return clearing(t, book, active)
            return t_.cond(n > L // 4, lambda: clearing(t, book, active),
                           lambda: clear_some(t, book, active, need, n))

        return t_.cond(n == 0, lambda: masked_pass(t, book, active), loop)

    def clear_some(t, book, active, need, n):
        """:func:`sweep_some` for ``n`` markets that ``need`` the loop: chunks of
        ``G`` of them gathered into a sub-book, cleared, and put back (one market per
        member: the book is ``[rows, L]``, :class:`flowsim.markets.book_chunks.Whole`)."""
        if chunks.col_axis != 1:
            raise NotImplementedError("clear_some gathers markets on the book's last axis; "
                                      f"{type(chunks).__name__} keeps them on axis "
                                      f"{chunks.col_axis}")
        G = min(L, S.sweep_markets)
        out = masked_pass(t, book, active & ~need)
        rank = t_.cumsum(t_.cast(need, i64)) - 1
        slots = t_.range(G, dtype=i64)

        def chunk(c, book, *rest):
            take = need & (rank // G == c)
            slot = rank - c * G
            hit = take[None, :] & (slot[None, :] == slots[:, None])           # [G, L]
            sel = t_.reduce_max(t_.where(hit, markets[None, :], -1), axis=1)
            sub = tuple(t_.gather(x, t_.maximum(sel, 0), axis=-1) for x in book)
            done = clearing(t, sub, sel >= 0)
            back = t_.clip_by_value(slot, 0, G - 1)
            merged = [t_.where(take, t_.gather(x, back, axis=-1), y)
                      for x, y in zip(done[0] + done[1:], book + rest)]
            return (c + 1, tuple(merged[:len(book)])) + tuple(merged[len(book):])

        out = t_.while_loop(lambda c, *_: c * G < n, chunk, (t_.constant(0, i64),) + out)
        return tuple(out[1:])

    def collect(t, u, price, fund, hist, place, vols=None):
        """The step's orders, all decided on the state at its start (pams collects
        ``maxNormalOrders`` agents' orders, then processes them): ``R`` lists of
        ``(side, level, ttl)`` over the ``[M K]`` markets, and whether a level left the
        packed range."""
        out, chosen, over = [], [], None
        for j in range(R):
            uj = _order_draws(S, u, j, n_draws, M)
            a = None if R == 1 else _distinct(uj[0], chosen, N)
            if a is not None:
                chosen.append(a)
            venue = None
            if S.by_volume:
                if a is None:
                    a = t_.minimum(t_.cast(uj[0] * N, i64), N - 1)
                venue = venue_pick(t, u[pick_rows + j], a, vols)
            side, level, ttl, ov = order(t, uj, price, fund, hist, a, venue)
            if S.may_abstain:
                side, level, ttl = ask_others(t, u, price, fund, hist, side, level, ttl, place)
            if j > 0:                      # this session's maxNormalOrders
                side = t_.where(j < orders_at[t], side, t_.zeros_like(side))
            side = t_.where(place, side, t_.zeros_like(side))
            over = ov if over is None else over | ov
            out.append([side, level, ttl])
        return out, over & place

    def body(t, price, traded, fund, book, hist, fhist, acc):
        place, running, clear = place_at[t], run_at[t], clear_at[t]
        book = chunks.fresh(t, book)
        if S.events:
            est = list(acc["events"])
            for i, e in enumerate(S.events):
                shocked, est[i] = e.before_step(t, fund, est[i])
                fund = shocked if K == 1 else t_.where(masks[i], shocked, fund)
        u = rng.uniform(key, [n_rows, L], f64, stream=2, step=t)
        vols = (acc["volume"], acc["vcum"]) if S.by_volume else None
        orders, over = collect(t, u, price, fund, hist, place, vols)
        need = None             # markets whose book may cross more than once this step
        if S.extra_order:
            side = orders[0][0]
            for e in S.events:
                mistake = e.mistake_order(t, side, price, tick)
                if mistake is not None:
                    fire, m_side, m_level, m_ttl, m_vol = mistake
                    m_packed = t_.bitwise.left_shift(
                        t_.clip_by_value(m_level, 1, level_cap), tb)
                    fire = fire & place
                    book = book[:3] + (
                        t_.where(fire & (m_side > 0), t_.bitwise.bitwise_or(m_packed, tmax - t),
                                 book[3]),
                        t_.where(fire & (m_side < 0), t_.bitwise.bitwise_or(m_packed, t),
                                 book[4]),
                        t_.where(fire, t_.constant(m_vol, i64), book[5]),
                        t_.where(fire, t + m_ttl, book[6]))
                    side = t_.where(fire, t_.zeros_like(side), side)
                    need = fire if need is None else need | fire
            orders[0][0] = side
        vol_sum = None
        cleared = acc.get("cleared")
        for j, (side, level, ttl) in enumerate(orders):
            q = S.layout.normal(t, j)
            if j == 0:              # the step's first writes wait for fresh()'s reads
                q = q + chunks.after_fresh(book)
            book, price, traded, did, vol, nb, na, active, cleared = process(
                t, q, side, level, ttl, book, price, traded, running,
                clear if j == 0 else t_.constant(False), need if j == 0 else None,
                est if S.events else None, cleared)
            vol_sum = vol if vol_sum is None else vol_sum + vol
            if S.hifreq:
                go = hf.go(t, side, u[rate_rows + j])
                carry = hifreq.Carry(traded, cleared, running, est if S.events else None,
                                     nb, na)
                book, price, carry, h_vol, h_over = hifreq.phase(S, hf, t, j, go, book,
                                                                 price, fund, carry)
                traded, cleared, nb, na = carry.traded, carry.cleared, carry.nb, carry.na
                vol_sum, over = vol_sum + h_vol, over | h_over
        vol = vol_sum
        hist = t_.tensor_scatter_nd_update(hist, [[t]], price[None])
        if fhist is not None:
            fhist = t_.tensor_scatter_nd_update(fhist, [[t]], fund[None])
        inside = t >= S.t0
        after = t > S.t0
        vol_f = t_.cast(vol, f64)
        acc = {
            "mispricing": acc["mispricing"] + t_.where(
                inside, t_.abs(t_.math.log(price / fund)), 0.0),
            "trades": acc["trades"] + t_.where(after, vol_f, 0.0),
            "clearing": acc["clearing"] + t_.where(t == S.t0, vol_f, 0.0),
            "depth_bid": acc["depth_bid"] + t_.where(inside, t_.cast(nb, f64), 0.0),
            "depth_ask": acc["depth_ask"] + t_.where(inside, t_.cast(na, f64), 0.0),
            "overflow": acc["overflow"] | over,
            **({"cleared": cleared} if K > 1 else {}),
            **({"events": acc["events"]} if S.events else {}),
        }
        if S.by_volume:                  # executed volume: the total, and before step t + 1
            acc["volume"] = vols[0] + vol
            acc["vcum"] = t_.tensor_scatter_nd_update(vols[1], [[t + 1]], acc["volume"][None])
        if S.events:
            for i, e in enumerate(S.events):
                est[i] = e.after_match(t, active, did, price, p0, est[i])
            acc["events"] = tuple(est)
        fund = _fundamental_step(S, fund, _normal(u[2]), drift, volatility, chol, M)
        return t + 1, price, traded, fund, book, hist, fhist, acc

    def process(t, q, side, level, ttl, book, price, traded, running, clear, need, est,
                cleared):
        """Place one order per market (slot ``q mod C`` of the ring, ``q`` its
        placement number) and match it as pams executes after each order; update the
        market price.  With several markets a market executes only where an order
        arrived (pams's ``_process_order``), so the book crossed during the warm-up
        clears at the first order of a running market (``cleared``: markets that had
        one).  Returns ``(book, price, traded, did, vol, nb, na, active, cleared)``."""
        bidkey, askkey, expiry = book[:3]
        s = slot(q)
        packed = t_.bitwise.left_shift(level, tb)
        new_bid = t_.where(side > 0, t_.bitwise.bitwise_or(packed, tmax - q), _IMIN)
        new_ask = t_.where(side < 0, t_.bitwise.bitwise_or(packed, q), _IMAX)
        new_exp = t_.where(side != 0, t + ttl, -1 * t_.ones_like(ttl))
        bidkey = chunks.write(bidkey, s, new_bid)
        askkey = chunks.write(askkey, s, new_ask)
        expiry = chunks.write(expiry, s, new_exp)
        book = chunks.placed(t, (bidkey, askkey, expiry) + book[3:], s, new_bid, new_ask,
                             new_exp)

        def no_match():
            bk, ak, nb, na = bests(t, book)
            zero = t_.zeros([L], i64)
            return book, bk, ak, nb, na, zero, t_.zeros([L], i64)

        def one_pass():
            bk, ak, nb, na = bests(t, book)
            book2, crossed, lvl = pair(t, book, bk, ak)
            vol = t_.cast(crossed, i64)
            return book2, bk, ak, nb - vol, na - vol, vol, t_.where(crossed, lvl, 0)

        if K > 1:
            active = running & (side != 0)
            # one pairing for every market, then (no cond around the book: XLA copied
            # it out of the branches at every pass) the loop of :func:`clearing` goes
            # on from there, zero trips unless a market clears its first book and the
            # pass paired somewhere (what clearing from scratch would do)
            first = masked_pass(t, book, active)
            more = t_.reduce_any(active & ~cleared) & t_.reduce_any(first[5] > 0)
            book, bk, ak, nb, na, vol, lvl = clearing(t, first[0], active, first[1:], more)
            cleared = cleared | active
        elif S.halts or S.extra_order:
            halted = [h for h in (e.halted(x) for e, x in zip(S.events, est)) if h is not None]
            active = running & t_.ones([L], t_.bool)
            for h in halted:
                active = active & ~h
            for e, x in zip(S.events, est):
                resumed = e.resumed(x)
                if resumed is not None:
                    need = resumed if need is None else need | resumed
            book, bk, ak, nb, na, vol, lvl = t_.cond(
                clear, lambda: clearing(t, book, active),
                lambda: sweep_some(t, book, active, need & active))
        else:
            active = running
            book, bk, ak, nb, na, vol, lvl = t_.cond(
                running, lambda: t_.cond(clear, lambda: clearing(t, book), one_pass), no_match)
        # bk/ak are the bests before the last pairing: after a trade the market price is
        # the trade's; without any trade yet, the mid of the (uncrossed) book
        did = vol > 0
        has_both = (bk != _IMIN) & (ak != _IMAX)
        b_level = t_.cast(t_.bitwise.right_shift(bk, tb), f64)
        a_level = t_.cast(t_.bitwise.right_shift(ak, tb), f64)
        mid = (b_level * tick + a_level * tick) / 2.0
        new_price = t_.where(did, t_.cast(lvl, f64) * tick,
                             t_.where(~traded & has_both, mid, price))
        price = t_.where(active, new_price, price)
        return book, price, traded | did, did, vol, nb, na, active, cleared

    zero = t_.zeros([L], f64)
    # ring slots (R orders a step, C steps of life, padded): [C, L], or [L, C] with chunks
    book = chunks.new_book(L)
    hist = t_.zeros([T + 1, L], f64)
    fhist = t_.zeros([T + 1, L], f64) if S.paths else None
    acc = {k: zero for k in ("mispricing", "trades", "clearing", "depth_bid", "depth_ask")}
    acc["overflow"] = t_.zeros([L], t_.bool)
    if K > 1:
        acc["cleared"] = t_.zeros([L], t_.bool)
    acc.update(volume_acc)
    if S.events:
        acc["events"] = tuple(e.init_state(L) for e in S.events)
    if S.extra_order:
        book = book + (t_.fill([L], t_.constant(_IMIN, i64)), t_.fill([L], t_.constant(_IMAX, i64)),
                       t_.zeros([L], i64), t_.fill([L], t_.constant(-1, i64)))
    loop = [t_.constant(0, i64), zero + p0, t_.zeros([L], t_.bool), zero + f0, book, hist,
            fhist, acc]
    if fhist is None:
        loop[6] = t_.zeros([0], f64)

        def body_(t, price, traded, fund, book, hist, fh, acc):
            out = body(t, price, traded, fund, book, hist, None, acc)
            return out[:6] + (fh,) + out[7:]
    else:
        body_ = body
    if S.hifreq:
        hf = hifreq_context(S, M, tick, spread, bests, process, level_cap, tb)
    t_end, price, traded, fund, book, hist, fhist, acc = t_.while_loop(
        lambda t, *_: t < T, body_, loop)
    hist = t_.tensor_scatter_nd_update(hist, [[T]], price[None])
    if S.paths:
        fhist = t_.tensor_scatter_nd_update(fhist, [[T]], fund[None])
    else:
        fhist = None
    return venue_statistics(S, M, hist, acc), hist, fhist


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
        t.reduce_mean(t.cast(t.equal(r1, 0.0), t.float64), axis=0),
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


def hifreq_context(S, M, tick, spread, bests, process, level_cap, tb):
    """What a high-frequency agent's turn uses of the compiled step (:mod:`.hifreq`):
    sizes, the markets' ticks, ``bests(t, book)``, ``process(t, q, side, level, ttl,
    book, price, carry)`` (``carry``: a :class:`flowsim.markets.hifreq.Carry`; an order
    placed and matched as a normal one is, after the first clearing), the step's
    ``maxHighFrequencyOrders`` and whether a phase runs (``go``: the normal agent
    placed an order and the rate passed the draw)."""
    t_ = tf()
    K = S.n_venues
    i64 = t_.int64
    max_at = t_.constant(np.array([m for m, _ in S.hifreq_at], np.int64))
    rate_at = t_.constant(np.array([r for _, r in S.hifreq_at], np.float64))

    def hf_process(t, q, side, level, ttl, book, price, carry):
        book, price, traded, _, vol, nb, na, _, cleared = process(
            t, q, side, level, ttl, book, price, carry.traded, carry.running,
            t_.constant(False), None, carry.events, carry.cleared)
        return book, price, carry._replace(traded=traded, cleared=cleared, nb=nb, na=na), vol

    def go(t, side, u):
        """pams skips the phase where the rate is below the draw (``u [M K]``, one per
        member) or the normal agent placed nothing."""
        placed = t_.reduce_any(t_.reshape(side != 0, [M, K]), axis=1)
        return placed & (t_.reshape(u, [M, K])[:, 0] <= rate_at[t]) & (max_at[t] > 0)

    return SimpleNamespace(
        M=M, K=K, L=M * K, tick=tick, tb=tb, level_cap=level_cap, IMIN=_IMIN, IMAX=_IMAX,
        spread=spread, tick_level=tick_level, process=hf_process, go=go,
        bests=bests,
        max_hifreq_at=t_.cast(max_at, i64))
