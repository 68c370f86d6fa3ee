"""pams's high-frequency phase (pams 0.3.0, ``runners/sequential.py``, ``_handle_orders``).

A step collects the normal agents' orders (``maxNormalOrders`` agents), then processes
them agent by agent; after each agent's orders, unless the session's
``highFrequencySubmitRate`` is below a fresh uniform draw, the high-frequency agents
(shuffled) are asked in order until ``maxHighFrequencyOrders`` of them submitted, each
agent's orders processed (and executed, where the market runs) before the next is
asked.  An agent that submits nothing does not count.  A normal agent that placed no
order has no list, so no phase follows it.  In a session without execution (pams's
warm-up) the phase runs too: the orders rest in the book.  pams's order hooks run on
these orders too: a ``PriceLimitRule`` moves their prices
(:func:`flowsim.markets.kernel.limit_at`).

Events run as pams runs them on these orders too: a ``TradingHaltRule`` is checked
after each order's executions (an ArbitrageAgent's orders then go one market after the
other, index first, :meth:`flowsim.markets.agents.arbitrage.ArbitrageGroup.with_halts`),
an ``OrderMistakeShock`` replaces the step's first order in its target market whoever
placed it.  One combination is refused: a mistaken order in an ArbitrageAgent's
IndexMarket together with a halt (its statistics differ from pams's).

flowsim runs one high-frequency group per config (``MarketMakerAgent``,
:mod:`flowsim.markets.agents.market_maker`, or ``ArbitrageAgent``,
:mod:`flowsim.markets.agents.arbitrage`) whose agents are identical, so the shuffle
does not matter: a phase is up to ``min(maxHighFrequencyOrders, numAgents)`` turns of
one agent, and it ends at the first turn that submits nothing (every other agent would
find the same state and submit nothing either).

Orders keep their placement order in the book's priority keys: a step has ``P = R (1 +
H)`` placement numbers (``R`` normal orders, each followed by at most ``H``
high-frequency unit orders).  Normal orders keep their ring of :func:`Layout.slot`, the
high-frequency orders have a ring of their own sized by their time-to-live.
"""
from collections import namedtuple

import numpy as np

from ..core.lazy_tf import tf

#: What a phase's turns carry besides the book and the prices, shared by
#: :func:`flowsim.markets.kernel.step` and ``process``, :func:`phase` and :func:`_turn_loop`:
#: ``traded`` / ``cleared`` (markets that traded / cleared their first book),
#: ``running`` (markets executing this step), ``events`` (the events' state or None),
#: ``nb`` / ``na`` (the book's depths after the last pass), ``mistaken`` (markets
#: where a mistaken order replaced one this step, or None without such events).
Carry = namedtuple("Carry", "traded cleared running events nb na mistaken", defaults=(None,))
#: The fields of :class:`Carry` a turn changes (the others stay the step's), besides
#: ``events`` and ``mistaken`` where the config's events change them (:func:`turn_fields`).
TURN_FIELDS = ("traded", "cleared", "nb", "na")


def turn_fields(carry, halts):
    """The fields of ``carry`` a turn changes: :data:`TURN_FIELDS`, the events' states
    where a halt may fire (``halts``), the mistaken markets where a mistake may."""
    return (TURN_FIELDS + (("events",) if halts else ())
            + (("mistaken",) if carry.mistaken is not None else ()))


def split(groups):
    """``(normal groups, high-frequency groups)`` of parsed agent groups."""
    normal = tuple(g for g in groups if not getattr(g, "high_frequency", False))
    return normal, tuple(g for g in groups if getattr(g, "high_frequency", False))


def with_events(groups, events):
    """The high-frequency ``groups`` as the config's ``events`` run them: where a
    halt may fire, each group's ``with_halts()`` (its orders processed one market
    after the other, a halt checked after each)."""
    if not any(e.halts for e in events):
        return groups
    return tuple(g.with_halts() if hasattr(g, "with_halts") else g for g in groups)


def check(cfg):
    """Refuse what the high-frequency phase does not run yet, naming it and the fix."""
    hf = cfg.hifreq
    if not hf:
        return
    if len(hf) > 1:
        raise ValueError(f"simulation.agents: flowsim.markets runs one high-frequency group "
                         f"per config, this one has {', '.join(g.name for g in hf)}: keep one")
    halts = any(e.halts for e in cfg.events)
    index = getattr(hf[0], "index", None)
    for e in cfg.events:
        if halts and e.extra_order and index is not None and index in e.targets:
            raise ValueError(f"events: an OrderMistakeShock in the IndexMarket of "
                             f"{hf[0].name} (ArbitrageAgent) together with a TradingHaltRule "
                             f"does not match pams in flowsim.markets yet: target a "
                             f"component market, drop one of the events, or run the "
                             f"config in pams")
    if not cfg.groups:
        raise ValueError(f"simulation.agents: {hf[0].name} trades only after normal agents' "
                         f"orders (pams's high-frequency phase); add a normal agent group")


def turns(cfg):
    """High-frequency turns a phase can take (``0`` without high-frequency agents)."""
    if not cfg.hifreq:
        return 0
    g = cfg.hifreq[0]
    return min(max(s.max_hifreq for s in cfg.sessions), g.n_agents)


def orders_per_phase(cfg):
    """``H``: unit orders one phase can place."""
    return turns(cfg) * cfg.hifreq[0].orders_per_turn if cfg.hifreq else 0


class Layout:
    """Placement numbers and book rows.  ``R`` normal orders a step, each followed by
    ``H`` high-frequency ones; ``steps`` of normal life, ``hf_steps`` of high-frequency
    life.  Without high-frequency orders the numbers are ``t R + j`` and the ring
    ``steps R`` rows, as before."""

    def __init__(self, R, H, steps, hf_steps=0):
        self.R, self.H = R, H
        self.P = R * (1 + H)
        self.normal_rows = steps * R
        self.hf_rows = hf_steps * R * H
        self.rows = self.normal_rows + self.hf_rows

    def normal(self, t, j):
        """Placement number of normal order ``j`` of step ``t``."""
        return t if self.P == 1 else t * self.P + j * (1 + self.H)

    def hifreq(self, t, j):
        """Placement number of the first high-frequency order after normal order ``j``."""
        return t * self.P + j * (1 + self.H) + 1

    def offsets(self):
        """Position of each high-frequency row in its phase (numpy ``[hf_rows]``)."""
        return np.arange(self.hf_rows) % max(self.H, 1)

    def slot(self, q):
        """Book row of placement number ``q`` (int64 tensor)."""
        t_ = tf()
        if not self.H:
            return q % self.normal_rows
        step, pos = q // self.P, q % self.P
        j, h = pos // (1 + self.H), pos % (1 + self.H)
        n = step * self.R + j
        return t_.where(h == 0, n % self.normal_rows,
                        self.normal_rows + (n * self.H + h - 1) % self.hf_rows)


def phase(S, ctx, t, j, go, book, price, fund, carry):
    """The high-frequency phase after normal order ``j`` of step ``t`` where ``go``
    (``[M]``): the group's turns, each on the state the previous left.  ``carry``: a
    :class:`Carry`.  Returns ``(book, price, carry, volume [M K], over [M K])``."""
    g = S.hifreq[0]
    q = S.layout.hifreq(t, j)
    if S.hifreq_turns > 1:
        return _turn_loop(S, ctx, t, q, go, book, price, fund, carry)
    book, price, carry, volume, over, _ = g.turn(ctx, t, q, go & (0 < ctx.max_hifreq_at[t]),
                                                 book, price, fund, carry)
    return book, price, carry, volume, over


def _turn_loop(S, ctx, t, q, go, book, price, fund, carry):
    """:func:`phase`'s turns as one XLA loop (its body compiled once, not once a turn),
    ending after the last turn in which some member's agent submitted (in pams's
    warm-up, where ``maxHighFrequencyOrders`` is 0, before the first).  A turn not
    taken would have placed and paired nothing in any market, only reported the
    book's depths (its pass's), so those are the step's depths after such an end:
    the bits of running every turn."""
    t_ = tf()
    g = S.hifreq[0]
    n = S.hifreq_turns
    fields = turn_fields(carry, S.halts)

    def more(turn, go, *_):
        return (turn < n) & t_.reduce_any(go & (turn < ctx.max_hifreq_at[t]))

    def body(turn, go, book, price, state, volume, over):
        go = go & (turn < ctx.max_hifreq_at[t])
        full = carry._replace(**dict(zip(fields, state)))
        book, price, full, vol, bad, go = g.turn(ctx, t, q + turn * g.orders_per_turn, go,
                                                 book, price, fund, full)
        return (turn + 1, go, book, price, tuple(getattr(full, k) for k in fields),
                volume + vol, over | bad)

    state = tuple(getattr(carry, k) for k in fields)
    out = t_.while_loop(more, body,
                        [t_.constant(0, t_.int64), go, book, price, state,
                         t_.zeros([ctx.L], t_.int64), t_.zeros([ctx.L], t_.bool)])
    turn, _, book, price, state, volume, over = out
    carry = carry._replace(**dict(zip(fields, state)))
    _, _, nb, na = ctx.bests(t, book)
    ended = turn < n
    carry = carry._replace(nb=t_.where(ended, nb, carry.nb), na=t_.where(ended, na, carry.na))
    return book, price, carry, volume, over
