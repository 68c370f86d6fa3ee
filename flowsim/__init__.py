"""flowsim: reproducible Monte Carlo on every device, MPI rank and Spark executor.

The same seed gives the same float64 bits whatever the device count, chunk size
or backend: the random numbers of an event are a pure function of (seed,
iteration, block) and per-block partial sums are added in block order.
"""
import importlib as _importlib

from ._version import __version__
from .core.configuration import configure
from .core.lazy_tf import logical_devices, set_virtual_cpus
from .core.log import FlowsimWarning

# Importing flowsim changes nothing in the process (no environment variable, no
# directory): flowsim.configure() sets TensorFlow's and XLA's options, called by
# flowsim on its first load of TensorFlow unless the user called it before.

# Old module paths (flowsim.flow, flowsim.vegas, ...) import as their new modules, with a
# DeprecationWarning: flowsim._moved.
_importlib.import_module("._moved", __name__).install()

from .algorithms.sweep import Sweep, sweep  # noqa: E402  (loads no TensorFlow)

# `flowsim.sweep` is the function and also an old module path: the path is bound in
# sys.modules now (without the warning the other old paths give), so that a later
# `import flowsim.sweep` finds it there and does not rebind the package's name.
_importlib.import_module("sys").modules.setdefault(f"{__name__}.sweep",
                                                    _importlib.import_module(".algorithms.sweep",
                                                                             __name__))

__all__ = ["Flow", "FlowsimWarning", "Histogram", "Plain", "Result", "Simulation", "Sweep",
           "configure", "integrate", "logical_devices", "numpy_integrand", "register_backend",
           "scan", "set_virtual_cpus", "sweep", "tf_integral", "__version__"]

# Public names and the submodule that defines each, imported on first use (PEP 562)
# so that `flowsim --version`, `import flowsim.schedule` etc. load no TensorFlow.
# `submodules`: those `import flowsim` used to load, so `flowsim.flow.X` keeps working
# (the moved ones with a DeprecationWarning).
__getattr__, __dir__, _ = _importlib.import_module(".core.lazy", __name__).attach(
    __name__,
    {"Flow": "core.flow", "Histogram": "algorithms.histogram", "Plain": "algorithms.plain",
     "Result": "core.result", "Simulation": "core.simulation", "integrate": "physics.integrator",
     "Vegas": "algorithms.vegas", "VegasPlus": "algorithms.vegasplus",
     "scan": "physics.scans", "tf_integral": "physics.gradients",
     "numpy_integrand": "physics.numpy_integrands", "register_backend": "distribution.registry",
     "unweighted": "physics.unweighted", "unbounded": "physics.unbounded"},
    submodules={"algorithms", "api", "backends", "blocks", "checkpoint", "domain", "flow",
                "gradients", "histogram", "integrands", "integrator", "kernel", "log", "math",
                "numpy_integrands", "physics", "plain", "reduce", "result", "rng", "scans",
                "simulation", "stats"})
