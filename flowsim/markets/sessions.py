"""pams's sessions (``pams/session.py``): steps, placement and execution flags, events.

Keys: ``sessionName``, ``iterationSteps`` (int), ``withOrderPlacement``,
``withOrderExecution``, ``withPrint`` (booleans, required as pams requires them),
``maxNormalOrders`` (default 1: the number of agents, drawn without replacement from
all groups, whose orders a step collects before it processes them), ``maxHighFrequencyOrders`` /
``maxHifreqOrders`` and ``highFrequencySubmitRate`` / ``hifreqSubmitRate`` (defaults 1
and 1.0; no effect without high-frequency agents, which flowsim has none of), and
``events`` (names of event entries, see :mod:`flowsim.markets.events`).
"""
from dataclasses import dataclass

from .registry import check_keys
from .values import flag, integer, pams_int

KEYS = {"sessionName", "iterationSteps", "withOrderPlacement", "withOrderExecution",
        "withPrint", "maxNormalOrders", "maxHighFrequencyOrders", "maxHifreqOrders",
        "highFrequencySubmitRate", "hifreqSubmitRate", "events"}


@dataclass(frozen=True)
class Session:
    steps: int
    placement: bool
    execution: bool
    max_orders: int = 1


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
    events = s.get("events", [])
    if not isinstance(events, list) or not all(isinstance(e, str) for e in events):
        raise ValueError(f"{where}.events must be a list of event names, got {events!r}")
    return Session(steps, *flags, max_orders), events
