"""pams JSON configurations: read what flowsim.markets runs, refuse the rest (no TensorFlow).

:func:`parse` turns a pams config (a dict, a JSON string path or an open file) into a
:class:`MarketConfig`, with pams 0.3.0's meaning.  It only dispatches: each pams class
and event has its own module, registered by class name (:mod:`flowsim.markets.registry`):

* the market: ``Market`` (:mod:`flowsim.markets.venues.market`), one per config;
* agent groups: ``FCNAgent`` (:mod:`flowsim.markets.agents.fcn`);
* events: ``FundamentalPriceShock``, ``PriceLimitRule``, ``TradingHaltRule``,
  ``OrderMistakeShock`` (:mod:`flowsim.markets.events`);
* ``simulation``: ``markets``, ``agents``, ``sessions``
  (:mod:`flowsim.markets.sessions`); ``extends`` anywhere pams allows it.

Keys pams ignores by convention (``"MEMO"``, comments) pass; a key read by neither
pams nor flowsim gives a :class:`~flowsim.markets.registry.ConfigWarning` naming it
and where; a key or class pams runs and flowsim does not (several markets,
``fundamentalCorrelations``, ``IndexMarket``, ``ArbitrageAgent``, ``MarketMakerAgent``,
``MarketShareFCNAgent``, ``maxNormalOrders`` other than 1) is refused with a
``ValueError`` naming it.  User classes (pams's ``register_classes``) run when
``classes=`` maps them to a class flowsim runs: ``classes={"UserDefinedFCNAgent":
"FCNAgent"}``, or ``(class, [extra keys the class reads])``.

Parameter values are pams's JSON random values: a number, ``{"const": [v]}``,
``[a, b]`` or ``{"uniform": [a, b]}``, ``{"normal": [mu, sigma]}``, ``{"expon": [lam]}``.
"""
import math
from dataclasses import dataclass, field

from . import agents, events, venues  # noqa: F401  (register the classes)
from .agents.fcn import FCN_PARAMS, MAX_TIME_WINDOW, FCNGroup, check_group  # noqa: F401
from .registry import EVENTS, check_keys, lookup
from .sessions import Session, parse_session  # noqa: F401
from .values import Dist, extends, load  # noqa: F401
from .venues.market import MAX_LEVEL, TIME_BITS  # noqa: F401

_SIMULATION_KEYS = {"markets", "agents", "sessions"}
#: simulation keys pams reads and flowsim does not run.
_SIMULATION_PAMS_ONLY = {"fundamentalCorrelations"}


@dataclass(frozen=True)
class MarketConfig:
    """One pams market with FCN groups, sessions and events, validated."""

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
        out = MarketConfig(self.tick_size, self.market_price, self.fundamental_price,
                           self.fundamental_drift, self.fundamental_volatility,
                           self.sessions, tuple(groups), self.source, self.events,
                           self.market_name)
        return out.validate()

    def validate(self):
        for g in self.groups:
            check_group(g)
        if self.n_steps < 2:
            raise ValueError("sessions: the run needs at least 2 steps")
        t0 = self.first_execution
        if t0 is None or t0 > self.n_steps - 3:
            raise ValueError("sessions: the statistics need at least 3 steps with "
                             "withOrderExecution true")
        if sum(e.extra_order for e in self.events) > 1:
            raise ValueError("events: flowsim.markets runs one OrderMistakeShock per config; "
                             "keep one")
        self._check_price_room()
        return self

    def _check_price_room(self):
        """Refuse a fundamental walk that could carry prices beyond the packed tick
        levels (``2**(62 - TIME_BITS)``): its drift over the run plus 10 standard
        deviations, with a factor 4 for the market price straying from it."""
        top = max(self.market_price, self.fundamental_price) / self.tick_size
        room = math.log(2 ** (62 - TIME_BITS) / top) - math.log(4.0)
        reach = (abs(self.fundamental_drift) * self.n_steps
                 + 10.0 * self.fundamental_volatility * math.sqrt(self.n_steps))
        if reach > room:
            raise ValueError(
                f"fundamentalDrift {self.fundamental_drift} and fundamentalVolatility "
                f"{self.fundamental_volatility} over {self.n_steps} steps could move prices "
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
        if self.events:
            out["events"] = [e.describe() for e in self.events]
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


def _market(settings, sim, classes):
    names = _names(sim, "markets")
    if len(names) != 1:
        raise ValueError(f"simulation.markets: flowsim.markets runs one market, got "
                         f"{names!r}; several markets (and index markets, arbitrage, "
                         f"market makers, market share) are not implemented yet: keep one, "
                         f"or run this config in pams")
    market = _entry(settings, names[0], "simulation.markets")
    parse, extra = lookup("market", market.get("class"), names[0], classes)
    return parse(names[0], market, extra)


def _groups(settings, sim, market_names, classes):
    groups = []
    for name in _names(sim, "agents"):
        g = _entry(settings, name, "simulation.agents")
        parse, extra = lookup("agent", g.get("class"), name, classes)
        groups.append(parse(name, g, market_names, extra))
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
            cls, _ = lookup("event", e.get("class"), name)
            event = cls.parse(name, e, start, market_names)
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
    ("Market", ["tradeVolume"])}``.
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
    market = _market(settings, sim, classes)
    groups = _groups(settings, sim, [market.name], classes)
    sessions, evs = _sessions(settings, sim, [market.name])
    return MarketConfig(market.tick_size, market.market_price, market.fundamental_price,
                        market.fundamental_drift, market.fundamental_volatility,
                        sessions, groups, settings, evs, market.name).validate()


#: pams event classes flowsim.markets runs.
EVENT_CLASSES = EVENTS
