"""Old import path, kept working: the code lives in :mod:`flowsim.core.simulation`."""
import sys

from .core import simulation as _module

sys.modules[__name__] = _module  # one module object under both names
