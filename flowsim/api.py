"""Old import path, kept working: the code lives in :mod:`flowsim.integrator`."""
import sys

from . import integrator as _module

sys.modules[__name__] = _module  # one module object under both names
