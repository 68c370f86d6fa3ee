"""Agent-based market ensembles: pams's FCN markets, many at once, on every backend.

``from_pams(config)`` builds a :class:`MarketEnsemble` (a :class:`flowsim.Simulation`
whose events are whole market runs); ``ensemble(config, n_markets, seed=...)`` runs one
and returns a :class:`flowsim.Result` of named statistics; ``grid`` runs a parameter
study into a DataFrame.  Importing this package loads no TensorFlow.
"""
from ..core.lazy import attach
from .config import MarketConfig, parse  # noqa: F401
from .registry import ConfigWarning  # noqa: F401
from .stats import NAMES  # noqa: F401

__all__ = ["MarketEnsemble", "LearnedAgents", "MLP", "from_pams", "ensemble", "grid",
           "report", "parse", "NAMES", "CONFIGS", "PAMS_SAMPLES", "config_path",
           "ConfigWarning"]

__getattr__, __dir__, _ = attach(__name__, {
    "MarketEnsemble": "ensembles", "from_pams": "ensembles", "ensemble": "ensembles",
    "grid": "ensembles", "report": "ensembles", "LearnedAgents": "learned", "MLP": "learned"})

#: pams 0.3.0's nine sample configs, bundled as pams ships them (its licence beside
#: them, ``configs/LICENSE-pams``): ``market_share_mm`` is ``market_share/config-mm.json``.
PAMS_SAMPLES = ("ci2002", "fat_finger", "price_limit", "trading_halt", "market_share",
                "market_share_mm", "shock_transfer", "test", "user_class")
#: Every bundled config: pams's samples and flowsim's ``two_groups``.
CONFIGS = PAMS_SAMPLES + ("two_groups",)


def config_path(name):
    """Path of a bundled config (:data:`CONFIGS`): ``config_path("price_limit")``.

    The pams samples are as pams ships them: ``user_class`` needs
    ``classes={"UserDefinedFCNAgent": "FCNAgent"}`` to run (pams's own sample
    registers that class in its ``main.py``).
    """
    import os
    if name not in CONFIGS:
        raise ValueError(f"unknown bundled config {name!r}; one of {', '.join(CONFIGS)}")
    return os.path.join(os.path.dirname(__file__), "configs", f"{name}.json")

