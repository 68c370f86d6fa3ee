"""Old import path, kept working: the code lives in :mod:`flowsim.core.integrand`."""
import sys

from .core import integrand as _module

sys.modules[__name__] = _module  # one module object under both names
