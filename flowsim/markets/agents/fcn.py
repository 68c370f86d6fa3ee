"""pams's ``FCNAgent``: keys, defaults and the parse of one group (pams 0.3.0,
``pams/agents/fcn_agent.py``).  Its order rule is the compiled step's
(:func:`flowsim.markets.kernel.order`).

Keys: ``numAgents`` (or ``from``/``to``; pams reads it with ``int()``, so ``"100"`` is
100), ``markets`` (names of market entries: an agent orders, on its turn, in every
market of them, one order each, in the config's market order), ``fundamentalWeight``,
``chartWeight``, ``noiseWeight``,
``noiseScale``, ``timeWindowSize``, ``orderMargin`` (required), ``marginType``
(``"fixed"``, default, or ``"normal"``), ``meanReversionTime`` (default: the time
window), ``cashAmount`` and ``assetVolume`` (required, as pams requires them: each
agent's starting cash and units, drawn once; its balance sheet, which no order rule
reads -- pams's FCN agents have no cash or position limits --,
:class:`flowsim.markets.MarketEnsemble` keeps with ``balances=True``), ``prefix``; and
one flowsim-only key, ``flowsim.isChartFollowing``
(default true; false makes the group contrarian: pams's ``is_chart_following``, set in
code, not from the config; a user class that sets it maps as ``("FCNAgent",
{"is_chart_following": False})``, :mod:`flowsim.markets.user_classes`).  pams ignores
``isChartFollowing``, so flowsim does too, with a ConfigWarning.
"""
import dataclasses
import math
from dataclasses import dataclass

from ..registry import AGENT_KEYS, check_keys, register, warn_ignored
from ..values import Dist, balance, count, flag

#: Largest time window (= order time-to-live) a book is sized for.
MAX_TIME_WINDOW = 4096
#: FCN parameters (pams's names) and the attribute each becomes.
FCN_PARAMS = {"fundamentalWeight": "fundamental_weight", "chartWeight": "chart_weight",
              "noiseWeight": "noise_weight", "noiseScale": "noise_scale",
              "timeWindowSize": "time_window", "orderMargin": "order_margin",
              "meanReversionTime": "mean_reversion_time"}
REQUIRED = ("fundamentalWeight", "chartWeight", "noiseWeight", "noiseScale",
            "timeWindowSize", "orderMargin")
KEYS = set(FCN_PARAMS) | AGENT_KEYS | {"marginType", "flowsim.isChartFollowing"}
#: Keys pams ignores that flowsim once read: ignored too, with a ConfigWarning.
IGNORED = {"isChartFollowing": "a contrarian group is a user class setting "
                               "is_chart_following = False, mapped as classes={'Contrarian"
                               "FCNAgent': ('FCNAgent', {'is_chart_following': False})}, or "
                               "the flowsim-only key 'flowsim.isChartFollowing'"}


@dataclass(frozen=True)
class FCNGroup:
    """A group of FCN agents with the distributions of their parameters."""

    name: str
    n_agents: int
    params: tuple           # ((attribute, Dist), ...) in FCN_PARAMS order
    margin_normal: bool = False
    chart_following: bool = True
    #: indices of the markets the agents order in (``()``: the one market)
    venues: tuple = ()
    #: pams's MarketShareFCNAgent: one market a turn, picked by recent volume
    #: (:mod:`.market_share_fcn`)
    by_volume: bool = False
    #: :class:`~flowsim.markets.values.Dist` of each agent's starting cash
    #: (``cashAmount``) and units (``assetVolume``, ``int()`` of the draw)
    cash: object = None
    asset: object = None

    def dist(self, attribute):
        return dict(self.params)[attribute]

    @property
    def max_time_window(self):
        return self.dist("time_window").max_int()

    def with_params(self, **params):
        """A copy with pams-named parameters replaced (numbers or distributions)."""
        new = dict(self.params)
        for key, value in params.items():
            if key not in FCN_PARAMS:
                raise ValueError(f"unknown FCN parameter {key!r}; one of {', '.join(FCN_PARAMS)}")
            new[FCN_PARAMS[key]] = Dist.parse(value, f"{self.name}.{key}")
        return dataclasses.replace(self, params=tuple((a, new[a]) for a in FCN_PARAMS.values()))

    def describe(self):
        out = {"name": self.name, "n_agents": self.n_agents,
               "params": {a: d.to_json() for a, d in self.params},
               "margin_normal": self.margin_normal,
               "chart_following": self.chart_following}
        if self.venues and self.venues != (0,):
            out["venues"] = list(self.venues)
        if self.by_volume:
            out["by_volume"] = True
        return out


def accessible(name, g, markets):
    """Indices of the markets group ``name`` orders in: ``markets`` maps the config's
    market entry names to their markets' indices (pams's ``markets_group_name2market``)."""
    if not isinstance(g.get("markets"), list) or not g["markets"]:
        raise ValueError(f"{name}.markets is required: a list of market names, e.g. "
                         f"{list(markets)[:1]}")
    out = set()
    for m in g["markets"]:
        if m not in markets:
            raise ValueError(f"{name}.markets names {m!r}, which is not a market entry of "
                             f"simulation.markets ({', '.join(markets)}): fix the name")
        out.update(markets[m])
    return tuple(sorted(out))


@register("agent", "FCNAgent")
def parse_group(name, g, markets, extra_keys=frozenset()):
    """:class:`FCNGroup` of the (extended) settings ``g`` of group ``name``; ``markets``
    maps the config's market entry names to their markets' indices."""
    for key, fix in IGNORED.items():
        warn_ignored(g, key, fix, name)
    check_keys(g, KEYS, name, extra_ok=extra_keys | set(IGNORED))
    venues = accessible(name, g, markets)
    cash, asset = balance(g, name)
    for key in REQUIRED:
        if key not in g:
            raise ValueError(f"{name}.{key} is required (FCNAgent): add it, e.g. "
                             f"\"{key}\": {{\"expon\": [1.0]}}")
    dists = {attr: Dist.parse(g[key], f"{name}.{key}") for key, attr in FCN_PARAMS.items()
             if key in g}
    if "mean_reversion_time" not in dists:           # pams: defaults to the time window
        dists["mean_reversion_time"] = Dist("same", ())
    margin = g.get("marginType", "fixed")
    if margin not in ("fixed", "normal", None):
        raise ValueError(f"{name}.marginType must be 'fixed' or 'normal', got {margin!r}")
    following = flag(g.get("flowsim.isChartFollowing", True),
                     f"{name}.flowsim.isChartFollowing")
    group = FCNGroup(name, count(g, "numAgents", name),
                     tuple((a, dists[a]) for a in FCN_PARAMS.values()),
                     margin == "normal", following, venues, cash=cash, asset=asset)
    check_group(group)
    return group


def _pams_name(attr):
    return {v: k for k, v in FCN_PARAMS.items()}[attr]


def check_group(g):
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
