"""Algorithm names used by :func:`flowsim.integrate` and the CLI."""
import importlib

ALGORITHMS = {
    "plain": "flowsim.plain:Plain",
    "vegas": "flowsim.vegas:Vegas",
    "vegasplus": "flowsim.vegasplus:VegasPlus",
}


def algorithm_class(name):
    if name not in ALGORITHMS:
        raise ValueError(f"unknown algorithm {name!r}; choose one of "
                         f"{', '.join(repr(k) for k in ALGORITHMS)}")
    module, _, cls = ALGORITHMS[name].partition(":")
    return getattr(importlib.import_module(module), cls)
