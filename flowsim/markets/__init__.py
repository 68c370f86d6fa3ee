"""Agent-based market ensembles: pams's FCN markets, many at once, on every backend.

``from_pams(config)`` builds a :class:`MarketEnsemble` (a :class:`flowsim.Simulation`
whose events are whole market runs); ``ensemble(config, n_markets, seed=...)`` runs one
and returns a :class:`flowsim.Result` of named statistics; ``grid`` runs a parameter
study into a DataFrame.  Importing this package loads no TensorFlow.
"""
import importlib as _importlib

from .config import MarketConfig, parse  # noqa: F401
from .stats import NAMES  # noqa: F401

__all__ = ["MarketEnsemble", "LearnedAgents", "MLP", "from_pams", "ensemble", "grid",
           "report", "parse", "NAMES", "CONFIGS", "config_path"]

_LAZY = {"MarketEnsemble": "ensembles", "from_pams": "ensembles", "ensemble": "ensembles",
         "grid": "ensembles", "report": "ensembles", "LearnedAgents": "learned",
         "MLP": "learned"}

#: Bundled pams configs: ``ci2002`` (pams's sample) and ``two_groups``.
CONFIGS = ("ci2002", "two_groups")


def config_path(name):
    """Path of a bundled config (:data:`CONFIGS`)."""
    import os
    if name not in CONFIGS:
        raise ValueError(f"unknown bundled config {name!r}; one of {', '.join(CONFIGS)}")
    return os.path.join(os.path.dirname(__file__), "configs", f"{name}.json")


def __getattr__(name):
    if name in _LAZY:
        module = _importlib.import_module(f"{__name__}.{_LAZY[name]}")
        value = getattr(module, name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'flowsim.markets' has no attribute {name!r}")
