"""pams JSON configurations: read what flowsim.markets runs, refuse the rest (no TensorFlow).

:func:`parse` turns a pams config (a dict, a JSON string path or an open file) into a
:class:`MarketConfig`.  Supported, with pams's meaning (pams 0.3.0):

* ``simulation``: ``markets`` (one market group of one market), ``agents`` (groups of
  class ``FCNAgent``), ``sessions`` (``sessionName``, ``iterationSteps``,
  ``withOrderPlacement``, ``withOrderExecution``, ``withPrint``, ``maxNormalOrders``
  equal to 1; ``maxHighFrequencyOrders`` and ``highFrequencySubmitRate`` are accepted
  and have no effect, as there are no high-frequency agents).
* the market: ``class`` ``"Market"``, ``tickSize``, ``marketPrice`` and/or
  ``fundamentalPrice``, ``fundamentalDrift``, ``fundamentalVolatility``,
  ``outstandingShares`` (no effect), ``numMarkets`` 1.
* FCN groups: ``numAgents`` (or ``from``/``to``), ``markets``, ``fundamentalWeight``,
  ``chartWeight``, ``noiseWeight``, ``noiseScale``, ``timeWindowSize``,
  ``orderMargin``, ``marginType`` (``"fixed"`` or ``"normal"``),
  ``meanReversionTime``, ``cashAmount`` and ``assetVolume`` (no effect: pams's FCN
  agents have no cash or position limits), ``prefix``; and one extension pams
  ignores, ``isChartFollowing`` (default true; false makes the group contrarian).
* ``extends`` anywhere pams allows it.

Parameter values are pams's JSON random values: a number, ``{"const": [v]}``,
``[a, b]`` or ``{"uniform": [a, b]}``, ``{"normal": [mu, sigma]}``, ``{"expon": [lam]}``.
Anything else -- another agent or market class, events, correlated fundamentals,
several markets, ``maxNormalOrders`` other than 1, an unknown key -- is refused with a
``ValueError`` naming it.
"""
import json
import math
import os
from dataclasses import dataclass, field

#: Largest time window (= order time-to-live) a book is sized for.
MAX_TIME_WINDOW = 4096
#: Market prices are integer tick levels packed with the placement time in an int64
#: (``level * 2**TIME_BITS + time``): the initial level must leave this much headroom.
TIME_BITS = 21
MAX_LEVEL = 2 ** (62 - TIME_BITS - 10)

_SIMULATION_KEYS = {"markets", "agents", "sessions"}
_SESSION_KEYS = {"sessionName", "iterationSteps", "withOrderPlacement", "withOrderExecution",
                 "withPrint", "maxNormalOrders", "maxHighFrequencyOrders", "maxHifreqOrders",
                 "highFrequencySubmitRate", "hifreqSubmitRate"}
_MARKET_KEYS = {"class", "tickSize", "marketPrice", "fundamentalPrice", "fundamentalDrift",
                "fundamentalVolatility", "outstandingShares", "numMarkets", "prefix"}
#: FCN parameters (pams's names) and the attribute each becomes.
FCN_PARAMS = {"fundamentalWeight": "fundamental_weight", "chartWeight": "chart_weight",
              "noiseWeight": "noise_weight", "noiseScale": "noise_scale",
              "timeWindowSize": "time_window", "orderMargin": "order_margin",
              "meanReversionTime": "mean_reversion_time"}
_AGENT_KEYS = set(FCN_PARAMS) | {"class", "numAgents", "from", "to", "markets", "marginType",
                                 "cashAmount", "assetVolume", "prefix", "isChartFollowing"}


@dataclass(frozen=True)
class Dist:
    """One of pams's JSON random values: ``kind`` in const, uniform, normal, expon."""

    kind: str
    args: tuple

    @classmethod
    def parse(cls, value, where):
        if isinstance(value, bool):
            raise ValueError(f"{where}: expected a number or a pams distribution, got {value!r}")
        if isinstance(value, (int, float)):
            return cls("const", (float(value),))
        if isinstance(value, list):
            return cls("uniform", cls._args(value, 2, where, "[min, max]"))
        if isinstance(value, dict):
            if len(value) != 1:
                raise ValueError(f"{where}: one distribution per value, got {sorted(value)}")
            (kind, args), = value.items()
            shapes = {"const": (1, "[value]"), "uniform": (2, "[min, max]"),
                      "normal": (2, "[mu, sigma]"), "expon": (1, "[lambda]")}
            if kind not in shapes:
                raise ValueError(f"{where}: unknown distribution {kind!r}; pams knows "
                                 f"{', '.join(shapes)}")
            return cls(kind, cls._args(args, *shapes[kind], where))
        raise ValueError(f"{where}: expected a number or a pams distribution, got {value!r}")

    @staticmethod
    def _args(args, n, where, shape):
        if (not isinstance(args, list) or len(args) != n
                or not all(isinstance(a, (int, float)) and not isinstance(a, bool)
                           for a in args)):
            raise ValueError(f"{where}: expected {shape}, got {args!r}")
        return tuple(float(a) for a in args)

    def support(self):
        """``(low, high)`` of the values this draws (``high`` may be inf)."""
        if self.kind == "const":
            return self.args[0], self.args[0]
        if self.kind == "uniform":
            return min(self.args), max(self.args)
        if self.kind == "expon":
            lam = self.args[0]
            return (0.0, 0.0) if lam == 0 else (0.0, math.inf) if lam > 0 else (-math.inf, 0.0)
        return (-math.inf, math.inf) if self.args[1] != 0 else (self.args[0], self.args[0])

    def max_int(self):
        """Largest ``int()`` of a draw.  A uniform draw ``a + u (b - a)`` can round up to
        ``b`` itself although ``u < 1`` (``1 + (1 - 2**-53)`` is 2.0 in float64), so the
        bound is ``int(b)``, not ``b - 1``."""
        return int(self.support()[1])

    def to_json(self):
        return self.args[0] if self.kind == "const" else {self.kind: list(self.args)}


@dataclass(frozen=True)
class FCNGroup:
    """A group of FCN agents with the distributions of their parameters."""

    name: str
    n_agents: int
    params: tuple           # ((attribute, Dist), ...) in FCN_PARAMS order
    margin_normal: bool = False
    chart_following: bool = True

    def dist(self, attribute):
        return dict(self.params)[attribute]

    @property
    def max_time_window(self):
        return self.dist("time_window").max_int()


@dataclass(frozen=True)
class Session:
    steps: int
    placement: bool
    execution: bool


@dataclass(frozen=True)
class MarketConfig:
    """One pams market with FCN groups and sessions, validated."""

    tick_size: float
    market_price: float
    fundamental_price: float
    fundamental_drift: float
    fundamental_volatility: float
    sessions: tuple
    groups: tuple
    source: dict = field(default=None, compare=False, hash=False, repr=False)

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
        g = groups[idx]
        new = dict(g.params)
        for key, value in params.items():
            if key not in FCN_PARAMS:
                raise ValueError(f"unknown FCN parameter {key!r}; one of {', '.join(FCN_PARAMS)}")
            new[FCN_PARAMS[key]] = Dist.parse(value, f"{g.name}.{key}")
        groups[idx] = FCNGroup(g.name, g.n_agents,
                               tuple((a, new[a]) for a in FCN_PARAMS.values()),
                               g.margin_normal, g.chart_following)
        out = MarketConfig(self.tick_size, self.market_price, self.fundamental_price,
                           self.fundamental_drift, self.fundamental_volatility,
                           self.sessions, tuple(groups), self.source)
        out.validate()
        return out

    def validate(self):
        for g in self.groups:
            _check_group(g)
        if self.n_steps < 2:
            raise ValueError("sessions: the run needs at least 2 steps")
        t0 = self.first_execution
        if t0 is None or t0 > self.n_steps - 3:
            raise ValueError("sessions: the statistics need at least 3 steps with "
                             "withOrderExecution true")
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
        return {"tick_size": self.tick_size, "market_price": self.market_price,
                "fundamental_price": self.fundamental_price,
                "fundamental_drift": self.fundamental_drift,
                "fundamental_volatility": self.fundamental_volatility,
                "sessions": [[s.steps, s.placement, s.execution] for s in self.sessions],
                "groups": [{"name": g.name, "n_agents": g.n_agents,
                            "params": {a: d.to_json() for a, d in g.params},
                            "margin_normal": g.margin_normal,
                            "chart_following": g.chart_following} for g in self.groups]}


def _check_group(g):
    """Refuse parameter distributions pams would reject or a book could not hold."""
    where = f"agent group {g.name!r}"
    for attr in ("fundamental_weight", "chart_weight", "noise_weight"):
        key = _pams_name(attr)
        if g.dist(attr).support()[0] < 0:
            raise ValueError(f"{where}: {key} can draw negative values ({g.dist(attr).to_json()})"
                             f"; pams requires weights >= 0")
    if all(g.dist(a).support()[1] <= 0 for a in ("fundamental_weight", "chart_weight",
                                                  "noise_weight")):
        raise ValueError(f"{where}: fundamentalWeight, chartWeight and noiseWeight are all 0; "
                         f"the FCN expected return divides by their sum")
    tw = g.dist("time_window")
    lo, hi = tw.support()
    if math.isinf(hi):
        raise ValueError(f"{where}: timeWindowSize {tw.to_json()} is unbounded; it is the orders' "
                         f"time-to-live, which sizes the fixed-capacity book: give a bounded "
                         f"distribution (a number or [min, max])")
    if int(lo) < 1:
        raise ValueError(f"{where}: timeWindowSize {tw.to_json()} can be below 1; pams's orders "
                         f"need a time-to-live >= 1")
    if tw.max_int() > MAX_TIME_WINDOW:
        raise ValueError(f"{where}: timeWindowSize {tw.to_json()} reaches {tw.max_int()}; the "
                         f"book holds at most {MAX_TIME_WINDOW} + 1 orders per market")
    om = g.dist("order_margin")
    lo, hi = om.support()
    if g.margin_normal and lo < 0:
        raise ValueError(f"{where}: orderMargin {om.to_json()} can be negative; with "
                         f"marginType 'normal' it is a standard deviation (>= 0)")
    if not g.margin_normal and not (0 <= lo and hi <= 1):
        raise ValueError(f"{where}: orderMargin {om.to_json()} leaves [0, 1]; pams requires a "
                         f"fixed margin in [0, 1]")


def _pams_name(attr):
    return {v: k for k, v in FCN_PARAMS.items()}[attr]


def _extends(whole, name, target, excludes=()):
    """pams's ``json_extends``: follow ``extends`` chains, the child's keys winning."""
    out = dict(target)
    seen = [name]
    while "extends" in out:
        parent = out.pop("extends")
        if parent not in whole:
            raise ValueError(f"{name} cannot extend {parent!r}: no such entry in the config")
        if parent in seen:
            raise ValueError(f"{name} has an extends loop ({' -> '.join(seen + [parent])})")
        seen.append(parent)
        out = {**{k: v for k, v in whole[parent].items() if k not in excludes}, **out}
    return out


def _unknown(keys, allowed, where):
    extra = sorted(set(keys) - allowed)
    if extra:
        raise ValueError(f"{where}: unsupported key {extra[0]!r} (flowsim.markets supports "
                         f"{', '.join(sorted(allowed))})")


def _count(settings, key, where):
    if "from" in settings or "to" in settings:
        if "from" not in settings or "to" not in settings:
            raise ValueError(f"{where}: both from and to are required")
        if key in settings:
            raise ValueError(f"{where}: {key} and from/to cannot be used together")
        n = int(settings["to"]) - int(settings["from"]) + 1
    else:
        n = settings.get(key, 1)
    if isinstance(n, bool) or not isinstance(n, int) or n < 1:
        raise ValueError(f"{where}.{key} must be a positive integer, got {n!r}")
    return n


def load(config):
    """A pams config as a dict: a dict, a path to a JSON file, or an open file."""
    if isinstance(config, dict):
        return config
    if isinstance(config, (str, os.PathLike)):
        with open(config, encoding="utf-8") as fh:
            return json.load(fh)
    if hasattr(config, "read"):
        return json.load(config)
    raise TypeError(f"config must be a dict, a path to a pams JSON file or an open file, "
                    f"got {type(config).__name__}")


def parse(config):
    """:class:`MarketConfig` of a pams config (see the module docstring for what runs)."""
    if isinstance(config, MarketConfig):
        return config
    settings = load(config)
    if "simulation" not in settings:
        raise ValueError("config: 'simulation' is required (a pams config)")
    sim = settings["simulation"]
    _unknown(sim, _SIMULATION_KEYS, "simulation")
    for key in ("markets", "agents", "sessions"):
        if key not in sim:
            raise ValueError(f"simulation.{key} is required")
    if not isinstance(sim["markets"], list) or len(sim["markets"]) != 1:
        raise ValueError(f"simulation.markets: flowsim.markets runs one market, got "
                         f"{sim['markets']!r}")
    market_name = sim["markets"][0]
    if market_name not in settings:
        raise ValueError(f"simulation.markets names {market_name!r}, which the config lacks")
    market = _extends(settings, market_name, settings[market_name], ("from", "to"))
    _unknown(market, _MARKET_KEYS, market_name)
    if market.get("class") != "Market":
        raise ValueError(f"{market_name}: unsupported market class {market.get('class')!r} "
                         f"(flowsim.markets runs pams's 'Market')")
    if _count(market, "numMarkets", market_name) != 1:
        raise ValueError(f"{market_name}.numMarkets: flowsim.markets runs one market")
    if "tickSize" not in market:
        raise ValueError(f"{market_name}.tickSize is required")
    tick = _positive(market["tickSize"], f"{market_name}.tickSize")
    if "marketPrice" not in market and "fundamentalPrice" not in market:
        raise ValueError(f"{market_name}: marketPrice or fundamentalPrice is required")
    fundamental = _positive(market.get("fundamentalPrice", market.get("marketPrice")),
                            f"{market_name}.fundamentalPrice")
    price = _positive(market.get("marketPrice", market.get("fundamentalPrice")),
                      f"{market_name}.marketPrice")
    drift = _number(market.get("fundamentalDrift", 0.0), f"{market_name}.fundamentalDrift")
    vol = _number(market.get("fundamentalVolatility", 0.0), f"{market_name}.fundamentalVolatility")
    if vol < 0:
        raise ValueError(f"{market_name}.fundamentalVolatility must be >= 0, got {vol}")
    for what, p in (("marketPrice", price), ("fundamentalPrice", fundamental)):
        if p / tick >= MAX_LEVEL:
            raise ValueError(f"{market_name}.{what} / tickSize = {p / tick:.3g} ticks; "
                             f"flowsim.markets needs fewer than {MAX_LEVEL:.3g} "
                             f"(2**{62 - TIME_BITS - 10}) for integer tick levels with room "
                             f"to move")

    if not isinstance(sim["agents"], list) or not sim["agents"]:
        raise ValueError("simulation.agents must be a non-empty list of group names")
    groups = []
    for name in sim["agents"]:
        if name not in settings:
            raise ValueError(f"simulation.agents names {name!r}, which the config lacks")
        g = _extends(settings, name, settings[name], ("from", "to"))
        if g.get("class") != "FCNAgent":
            raise ValueError(f"{name}: unsupported agent class {g.get('class')!r} "
                             f"(flowsim.markets runs FCNAgent groups)")
        _unknown(g, _AGENT_KEYS, name)
        if g.get("markets") != [market_name]:
            raise ValueError(f"{name}.markets must be [{market_name!r}], got {g.get('markets')!r}")
        for key in ("fundamentalWeight", "chartWeight", "noiseWeight", "noiseScale",
                    "timeWindowSize", "orderMargin"):
            if key not in g:
                raise ValueError(f"{name}.{key} is required (FCNAgent)")
        dists = {attr: Dist.parse(g[key], f"{name}.{key}") for key, attr in FCN_PARAMS.items()
                 if key in g}
        dists.setdefault("mean_reversion_time", None)
        margin = g.get("marginType", "fixed")
        if margin not in ("fixed", "normal", None):
            raise ValueError(f"{name}.marginType must be 'fixed' or 'normal', got {margin!r}")
        following = g.get("isChartFollowing", True)
        if not isinstance(following, bool):
            raise ValueError(f"{name}.isChartFollowing must be true or false, got {following!r}")
        if dists["mean_reversion_time"] is None:        # pams: defaults to the time window
            dists["mean_reversion_time"] = Dist("same", ())
        groups.append(FCNGroup(name, _count(g, "numAgents", name),
                               tuple((a, dists[a]) for a in FCN_PARAMS.values()),
                               margin == "normal", following))

    if not isinstance(sim["sessions"], list) or not sim["sessions"]:
        raise ValueError("simulation.sessions must be a non-empty list")
    sessions = []
    for i, s in enumerate(sim["sessions"]):
        where = f"simulation.sessions[{i}]"
        if not isinstance(s, dict):
            raise ValueError(f"{where} must be an object")
        if "events" in s:
            raise ValueError(f"{where}: unsupported key 'events' (flowsim.markets runs no events)")
        _unknown(s, _SESSION_KEYS, where)
        steps = s.get("iterationSteps")
        if isinstance(steps, bool) or not isinstance(steps, int) or steps < 0:
            raise ValueError(f"{where}.iterationSteps must be an integer >= 0, got {steps!r}")
        flags = []
        for key in ("withOrderPlacement", "withOrderExecution"):
            if not isinstance(s.get(key), bool):
                raise ValueError(f"{where}.{key} must be true or false, got {s.get(key)!r}")
            flags.append(s[key])
        if s.get("maxNormalOrders", 1) != 1:
            raise ValueError(f"{where}.maxNormalOrders: flowsim.markets runs 1 order per step "
                             f"(pams's default), got {s['maxNormalOrders']!r}")
        sessions.append(Session(steps, *flags))
    return MarketConfig(tick, price, fundamental, drift, vol, tuple(sessions), tuple(groups),
                        settings).validate()


def _number(value, where):
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise ValueError(f"{where} must be a finite number, got {value!r}")
    return float(value)


def _positive(value, where):
    value = _number(value, where)
    if value <= 0:
        raise ValueError(f"{where} must be > 0, got {value!r}")
    return value


#: Public for markets.learned.
check_group = _check_group
