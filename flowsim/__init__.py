"""flowsim: reproducible Monte Carlo on every device, MPI rank and Spark executor.

The same seed gives the same float64 bits whatever the device count, chunk size
or backend: the random numbers of an event are a pure function of (seed,
iteration, block) and per-block partial sums are added in block order.
"""
__version__ = "0.1.0"

import importlib as _importlib
import sys as _sys
import types as _types

from ._tf import logical_devices, set_virtual_cpus
from ._tf import quiet_import as _quiet_import

# Before anything imports TensorFlow: its start-up noise silenced (FLOWSIM_TF_VERBOSE=1
# keeps it) whoever imports it first.  TensorFlow itself loads when compute starts.
_quiet_import()

__all__ = ["Flow", "Histogram", "Plain", "Result", "Simulation", "Sweep", "integrate",
           "logical_devices", "set_virtual_cpus", "sweep", "__version__"]

# Public names and the submodule that defines each, imported on first use (PEP 562)
# so that `flowsim --version`, `import flowsim.schedule` etc. load no TensorFlow.
_LAZY = {"Flow": "flow", "Histogram": "histogram", "Plain": "plain", "Result": "result",
         "Simulation": "simulation", "Sweep": "sweep", "sweep": "sweep", "integrate": "api",
         "Vegas": "vegas", "VegasPlus": "vegasplus"}

# Submodules that `import flowsim` used to load, so `flowsim.flow.X` keeps working.
_SUBMODULES = {"algorithms", "api", "backends", "blocks", "checkpoint", "domain", "flow",
               "histogram", "kernel", "log", "plain", "reduce", "result", "rng", "simulation",
               "stats"}

# Submodules whose name is also a function of theirs: `flowsim.sweep` stays the function.
_SHADOWED = {"sweep"}


def __getattr__(name):
    if name in _LAZY:
        value = getattr(_importlib.import_module(f"{__name__}.{_LAZY[name]}"), name)
        globals()[name] = value
        return value
    if name in _SUBMODULES:
        return _importlib.import_module(f"{__name__}.{name}")
    raise AttributeError(f"module 'flowsim' has no attribute {name!r}")


def __dir__():
    return sorted(set(globals()) | set(_LAZY) | _SUBMODULES)


class _Package(_types.ModuleType):
    """Importing ``flowsim.sweep`` binds the module on the package; keep the function."""

    def __setattr__(self, name, value):
        if (name in _SHADOWED and isinstance(value, _types.ModuleType)
                and value.__name__ == f"{__name__}.{name}"):
            value = getattr(value, name)
        super().__setattr__(name, value)


_sys.modules[__name__].__class__ = _Package
