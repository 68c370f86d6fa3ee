"""pams's sessions (``pams/session.py``): steps, placement and execution flags, events.

Keys: ``sessionName``, ``iterationSteps`` (int), ``withOrderPlacement``,
``withOrderExecution``, ``withPrint`` (booleans, required as pams requires them),
``maxNormalOrders`` (default 1: the number of agents, drawn without replacement from
all groups, whose orders a step collects before it processes them), ``maxHighFrequencyOrders`` /
``maxHifreqOrders`` (default 1: how many high-frequency agents submit after each
normal agent's orders, :mod:`flowsim.markets.hifreq`) and ``highFrequencySubmitRate`` /
``hifreqSubmitRate`` (default 1.0: the chance of that phase, pams skips it when the
rate is below a uniform draw); the old names count only without the new ones, as in
pams (which refuses both together); and ``events`` (names of event entries, see
:mod:`flowsim.markets.events`).
"""
from dataclasses import dataclass

from .registry import check_keys
from .values import flag, integer, number, pams_int

KEYS = {"sessionName", "iterationSteps", "withOrderPlacement", "withOrderExecution",
        "withPrint", "maxNormalOrders", "maxHighFrequencyOrders", "maxHifreqOrders",
        "highFrequencySubmitRate", "hifreqSubmitRate", "events"}


@dataclass(frozen=True)
class Session:
    steps: int
    placement: bool
    execution: bool
    max_orders: int = 1
    #: ``maxHighFrequencyOrders`` and ``highFrequencySubmitRate``
    max_hifreq: int = 1
    hifreq_rate: float = 1.0


def parse_session(s, where):
    """``(Session, event names)`` of one entry of ``simulation.sessions``."""
    if not isinstance(s, dict):
        raise ValueError(f"{where} must be an object")
    check_keys(s, KEYS, where)
    if "sessionName" not in s:
        raise ValueError(f"{where}.sessionName is required (pams requires it): add e.g. "
                         f"\"sessionName\": 0")
    steps = integer(s.get("iterationSteps"), f"{where}.iterationSteps")
    flags = [flag(s.get(key), f"{where}.{key}")
             for key in ("withOrderPlacement", "withOrderExecution")]
    max_orders = pams_int(s.get("maxNormalOrders", 1), f"{where}.maxNormalOrders")
    if max_orders < 1:
        raise ValueError(f"{where}.maxNormalOrders must be >= 1 (flowsim.markets needs an "
                         f"order per step), got {s['maxNormalOrders']!r}")
    max_hifreq, rate = _hifreq(s, where)
    events = s.get("events", [])
    if not isinstance(events, list) or not all(isinstance(e, str) for e in events):
        raise ValueError(f"{where}.events must be a list of event names, got {events!r}")
    return Session(steps, *flags, max_orders, max_hifreq, rate), events


def _hifreq(s, where):
    """``(maxHighFrequencyOrders, highFrequencySubmitRate)`` of session ``s``, the old
    key names read as pams reads them."""
    out = []
    for new, old, default, read in (("maxHighFrequencyOrders", "maxHifreqOrders", 1, pams_int),
                                    ("highFrequencySubmitRate", "hifreqSubmitRate", 1.0,
                                     number)):
        if new in s and old in s:
            raise ValueError(f"{where}: {old} is replaced by {new} in pams, which refuses "
                             f"both: delete {old}")
        key = new if new in s else old
        value = read(s[key], f"{where}.{key}") if key in s else default
        if value < 0:
            raise ValueError(f"{where}.{key} must be >= 0, got {s[key]!r}")
        out.append(value)
    return tuple(out)
