"""Algorithm names ("plain", "vegas", "vegasplus") to Simulation classes (integrate, CLI)."""
import importlib

ALGORITHMS = {
    "plain": "flowsim.algorithms.plain:Plain",
    "vegas": "flowsim.algorithms.vegas:Vegas",
    "vegasplus": "flowsim.algorithms.vegasplus:VegasPlus",
}


def algorithm_class(name):
    if name not in ALGORITHMS:
        raise ValueError(f"unknown algorithm {name!r}; choose one of "
                         f"{', '.join(repr(k) for k in ALGORITHMS)}")
    module, _, cls = ALGORITHMS[name].partition(":")
    return getattr(importlib.import_module(module), cls)
