"""pams JSON configurations: read what flowsim.markets runs, refuse the rest (no TensorFlow).

:func:`parse` turns a pams config (a dict, a JSON string path or an open file) into a
:class:`MarketConfig`, with pams 0.3.0's meaning.  It only dispatches: each pams class
and event has its own module, registered by class name (:mod:`flowsim.markets.registry`):

* markets: ``Market`` (:mod:`flowsim.markets.venues.market`), with ``numMarkets`` and
  ``prefix``, ``IndexMarket`` (:mod:`flowsim.markets.venues.index_market`);
  ``fundamentalCorrelations`` (:mod:`flowsim.markets.venues.correlations`);
* agent groups: ``FCNAgent`` (:mod:`flowsim.markets.agents.fcn`),
  ``MarketShareFCNAgent`` (:mod:`flowsim.markets.agents.market_share_fcn`); the
  high-frequency ``MarketMakerAgent`` (:mod:`flowsim.markets.agents.market_maker`) and
  ``ArbitrageAgent`` (:mod:`flowsim.markets.agents.arbitrage`), which trade in pams's
  high-frequency phase (:mod:`flowsim.markets.hifreq`);
* events: ``FundamentalPriceShock``, ``PriceLimitRule``, ``TradingHaltRule``,
  ``OrderMistakeShock`` (:mod:`flowsim.markets.events`);
* ``simulation``: ``markets`` (several: each statistic per market, see
  :func:`flowsim.markets.stats.names`), ``agents``, ``sessions``
  (:mod:`flowsim.markets.sessions`), ``fundamentalCorrelations``; ``extends``
  anywhere pams allows it.

Keys pams ignores by convention (``"MEMO"``, comments) pass; a key read by neither
pams nor flowsim gives a :class:`~flowsim.markets.registry.ConfigWarning` naming it
and where; a key or class pams runs and flowsim does not (``HighFrequencyAgent``,
pams's abstract base, ``TestAgent``) is refused with a ``ValueError`` naming it.
User classes (pams's ``register_classes``) run when ``classes=`` maps them to a
class flowsim runs: ``classes={"UserDefinedFCNAgent": "FCNAgent"}``, or ``(class,
[extra keys the class reads])``.

Parameter values are pams's JSON random values: a number, ``{"const": [v]}``,
``[a, b]`` or ``{"uniform": [a, b]}``, ``{"normal": [mu, sigma]}``, ``{"expon": [lam]}``.
"""
import dataclasses
import math
from dataclasses import dataclass, field

from . import agents, events, hifreq, venues  # noqa: F401  (register the classes)
from .agents.fcn import FCN_PARAMS, MAX_TIME_WINDOW, FCNGroup, check_group  # noqa: F401
from .registry import EVENTS, check_keys, lookup
from .sessions import Session, parse_session  # noqa: F401
from .values import Dist, extends, load  # noqa: F401
from .venues.correlations import parse_correlations
from .venues.index_market import resolve
from .venues.market import MAX_LEVEL, TIME_BITS, level_bits  # noqa: F401

_SIMULATION_KEYS = {"markets", "agents", "sessions", "fundamentalCorrelations"}
#: simulation keys pams reads and flowsim does not run.
_SIMULATION_PAMS_ONLY = set()
#: Standard deviations of the fundamental walk the tick levels must hold (a market
#: beyond them gets NaN statistics; the chance is about 1e-12 per market).
REACH_SIGMAS = 7.0


@dataclass(frozen=True)
class MarketConfig:
    """pams markets with FCN groups, sessions and events, validated.  ``tick_size`` ...
    ``market_name`` are the first market's; ``venues`` holds every market
    (:class:`flowsim.markets.venues.market.MarketSpec`, in config order) and
    ``correlations`` the fundamentals' ``(i, j, corr)``."""

    tick_size: float
    market_price: float
    fundamental_price: float
    fundamental_drift: float
    fundamental_volatility: float
    sessions: tuple
    groups: tuple
    source: dict = field(default=None, compare=False, hash=False, repr=False)
    events: tuple = ()
    market_name: str = "Market"
    venues: tuple = ()
    correlations: tuple = ()
    #: IndexMarkets: ``((venue, (component venues), (outstanding shares)), ...)``
    indexes: tuple = ()
    #: high-frequency agent groups (:mod:`flowsim.markets.hifreq`); ``groups`` holds
    #: the normal ones
    hifreq: tuple = ()

    @property
    def n_venues(self):
        return max(len(self.venues), 1)

    @property
    def market_names(self):
        return tuple(v.name for v in self.venues) or (self.market_name,)

    @property
    def max_orders(self):
        """Most agents whose orders one step processes (``maxNormalOrders``)."""
        return max(s.max_orders for s in self.sessions)

    @property
    def positions(self):
        """Placement numbers a step takes: normal orders and the high-frequency orders
        after each (:class:`flowsim.markets.hifreq.Layout`)."""
        return self.max_orders * (1 + hifreq.orders_per_phase(self))

    @property
    def n_steps(self):
        return sum(s.steps for s in self.sessions)

    @property
    def n_agents(self):
        return sum(g.n_agents for g in self.groups)

    @property
    def first_execution(self):
        """First step with execution (start of the statistics window)."""
        t = 0
        for s in self.sessions:
            if s.execution:
                return t
            t += s.steps
        return None

    @property
    def max_time_window(self):
        return max(g.max_time_window for g in self.groups)

    def step_flags(self):
        """``(placement, execution)`` lists of bools, one per step."""
        placement, execution = [], []
        for s in self.sessions:
            placement += [s.placement] * s.steps
            execution += [s.execution] * s.steps
        return placement, execution

    def with_params(self, group, **params):
        """A copy with FCN parameters of ``group`` (name or index) replaced:
        ``with_params(0, noiseScale=0.002, chartWeight={"expon": [0.5]})``."""
        groups = list(self.groups)
        idx = group if isinstance(group, int) else [g.name for g in groups].index(group)
        groups[idx] = groups[idx].with_params(**params)
        return dataclasses.replace(self, groups=tuple(groups)).validate()

    def validate(self):
        for g in self.groups:
            check_group(g)
        if self.n_steps < 2:
            raise ValueError("sessions: the run needs at least 2 steps")
        t0 = self.first_execution
        if t0 is None or t0 > self.n_steps - 3:
            raise ValueError("sessions: the statistics need at least 3 steps with "
                             "withOrderExecution true")
        hifreq.check(self)
        for v in self.venues or (self,):
            self._check_price_room(v)
        return self

    def _check_price_room(self, v):
        """Refuse a fundamental walk that could carry prices beyond the packed tick
        levels (:func:`flowsim.markets.venues.market.level_bits`): its drift over the
        run plus :data:`REACH_SIGMAS` standard deviations, with a factor 2 for the
        market price straying from it."""
        bits = level_bits(self.n_steps, self.positions)
        top = max(v.market_price, v.fundamental_price) / v.tick_size
        room = math.log(2 ** bits / top) - math.log(2.0)
        reach = (abs(v.fundamental_drift) * self.n_steps
                 + REACH_SIGMAS * v.fundamental_volatility * math.sqrt(self.n_steps))
        if reach > room:
            name = f"{v.name}: " if self.venues else ""
            raise ValueError(
                f"{name}fundamentalDrift {v.fundamental_drift} and fundamentalVolatility "
                f"{v.fundamental_volatility} over {self.n_steps} steps could move prices "
                f"by a factor exp({reach:.1f}); integer tick levels leave room for "
                f"exp({room:.1f}) from {top:.3g} ticks: use a smaller volatility or drift, "
                f"fewer steps or a larger tickSize")

    def describe(self):
        """JSON-able summary (for checkpoints and fingerprints)."""
        out = {"tick_size": self.tick_size, "market_price": self.market_price,
               "fundamental_price": self.fundamental_price,
               "fundamental_drift": self.fundamental_drift,
               "fundamental_volatility": self.fundamental_volatility,
               "sessions": [[s.steps, s.placement, s.execution] for s in self.sessions],
               "groups": [g.describe() for g in self.groups]}
        if self.n_venues > 1:
            out["venues"] = [_venue_json(v) for v in self.venues]
            out["correlations"] = [list(c) for c in self.correlations]
            out["indexes"] = [[i, list(c), list(w)] for i, c, w in self.indexes]
        if self.max_orders > 1:
            out["max_orders"] = [s.max_orders for s in self.sessions]
        if self.events:
            out["events"] = [e.describe() for e in self.events]
        if self.hifreq:
            out["hifreq"] = [g.describe() for g in self.hifreq]
            out["hifreq_sessions"] = [[s.max_hifreq, s.hifreq_rate] for s in self.sessions]
        return out


def _venue_json(v):
    """A market's summary (its initial ``trade_volume`` only where there is one, so
    that configs without one keep their fingerprints)."""
    out = dataclasses.asdict(v)
    if not out["trade_volume"]:
        del out["trade_volume"]
    return out


def _entry(settings, name, where, excludes=("from", "to")):
    if not isinstance(name, str) or name not in settings:
        raise ValueError(f"{where} names {name!r}, which the config lacks: add an entry "
                         f"{name!r} or fix the name")
    entry = settings[name]
    if not isinstance(entry, dict):
        raise ValueError(f"{name} must be an object, got {type(entry).__name__}")
    return extends(settings, name, entry, excludes)


def _names(sim, key):
    value = sim.get(key)
    if not isinstance(value, list) or not value:
        raise ValueError(f"simulation.{key} is required: a non-empty list of entry names")
    return value


def _markets(settings, sim, classes):
    """``(specs, {entry name: [market indices]})`` of ``simulation.markets``."""
    specs, groups = [], {}
    for name in _names(sim, "markets"):
        if name in groups:
            raise ValueError(f"simulation.markets lists {name!r} twice; list it once")
        market = _entry(settings, name, "simulation.markets")
        parse, extra, keys = lookup("market", market.get("class"), name, classes)
        new = parse(name, {**market, **keys}, extra)
        groups[name] = list(range(len(specs), len(specs) + len(new)))
        specs += new
    names = [s.name for s in specs]
    for n in names:
        if names.count(n) > 1:
            raise ValueError(f"simulation.markets: two markets are named {n!r}; give the "
                             f"groups different prefixes")
    return specs, groups


def _groups(settings, sim, market_names, classes):
    groups = []
    for name in _names(sim, "agents"):
        g = _entry(settings, name, "simulation.agents")
        parse, extra, keys = lookup("agent", g.get("class"), name, classes)
        groups.append(parse(name, {**g, **keys}, market_names, extra))
    return tuple(groups)


def _sessions(settings, sim, market_names):
    if not isinstance(sim.get("sessions"), list) or not sim["sessions"]:
        raise ValueError("simulation.sessions must be a non-empty list of sessions")
    sessions, evs, start = [], [], 0
    for i, s in enumerate(sim["sessions"]):
        session, names = parse_session(s, f"simulation.sessions[{i}]")
        for name in names:
            e = _entry(settings, name, f"simulation.sessions[{i}].events",
                       ("numMarkets", "from", "to", "prefix"))
            cls, _, _ = lookup("event", e.get("class"), name)
            event = cls.parse(name, e, start, market_names)
            if event is not None and len(market_names) > 1:
                # the kernel applies an event's hooks to its target markets only
                targets = [e["target"]] if "target" in e else e.get("targetMarkets", [])
                event.targets = tuple(market_names.index(m) for m in targets)
            if event is not None:
                evs.append(event)
        sessions.append(session)
        start += session.steps
    return tuple(sessions), tuple(evs)


def parse(config, classes=None):
    """:class:`MarketConfig` of a pams config (see the module docstring for what runs).

    ``classes`` maps user class names (pams's ``runner.class_register``) to a class
    flowsim runs, ``{"UserDefinedFCNAgent": "FCNAgent"}``, or to ``(class, [extra
    keys])`` when the user class reads keys of its own: ``{"ExtendedMarket":
    ("Market", ["tradeVolume"])}`` (the ``market_share`` sample's market; flowsim reads
    ``tradeVolume`` as that class does, an executed volume at t = 0, see
    :mod:`flowsim.markets.venues.market`; other extra keys are accepted and unused).
    """
    if isinstance(config, MarketConfig):
        return config
    settings = load(config)
    if not isinstance(settings, dict) or "simulation" not in settings:
        raise ValueError("config: 'simulation' is required (a pams config)")
    if classes is not None and not isinstance(classes, dict):
        raise TypeError(f"classes must be a dict from user class names to flowsim classes, "
                        f"got {type(classes).__name__}")
    sim = settings["simulation"]
    check_keys(sim, _SIMULATION_KEYS, "simulation", pams_only=_SIMULATION_PAMS_ONLY)
    for key in ("markets", "agents", "sessions"):
        if key not in sim:
            raise ValueError(f"simulation.{key} is required")
    specs, market_groups = _markets(settings, sim, classes)
    specs, indexes = resolve(specs)
    names = [s.name for s in specs]
    groups, hf = hifreq.split(_groups(settings, sim, market_groups, classes))
    hf = tuple(g.resolve(specs) for g in hf)
    sessions, evs = _sessions(settings, sim, names)
    hf = hifreq.with_events(hf, evs)
    correlations = ()
    if "fundamentalCorrelations" in sim:
        correlations = parse_correlations(sim["fundamentalCorrelations"], specs)
    m = specs[0]
    return MarketConfig(m.tick_size, m.market_price, m.fundamental_price,
                        m.fundamental_drift, m.fundamental_volatility,
                        sessions, groups, settings, evs, m.name,
                        specs if len(specs) > 1 else (), correlations, indexes,
                        hf).validate()


#: pams event classes flowsim.markets runs.
EVENT_CLASSES = EVENTS
