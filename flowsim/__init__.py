"""flowsim: reproducible Monte Carlo on every device, MPI rank and Spark executor.

The same seed gives the same float64 bits whatever the device count, chunk size
or backend: the random numbers of an event are a pure function of (seed,
iteration, block) and per-block partial sums are added in block order.
"""
__version__ = "0.1.0"

import os as _os

if not _os.environ.get("FLOWSIM_TF_VERBOSE"):
    # Before anything imports TensorFlow: silence its C++ start-up noise.
    _os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

from ._tf import logical_devices, set_virtual_cpus, tf as _load_tf

_load_tf()  # now, with stderr silenced, so a later `import tensorflow` prints nothing
from .api import integrate
from .flow import Flow
from .histogram import Histogram
from .plain import Plain
from .result import Result
from .simulation import Simulation
from .sweep import Sweep, sweep

__all__ = ["Flow", "Histogram", "Plain", "Result", "Simulation", "Sweep", "integrate",
           "logical_devices", "set_virtual_cpus", "sweep", "__version__"]


def __getattr__(name):
    # Algorithms that live in their own modules load on first use.
    lazy = {"Vegas": "flowsim.vegas", "VegasPlus": "flowsim.vegasplus"}
    if name in lazy:
        import importlib
        return getattr(importlib.import_module(lazy[name]), name)
    raise AttributeError(f"module 'flowsim' has no attribute {name!r}")
