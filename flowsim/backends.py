"""Old import path, kept working: the code lives in :mod:`flowsim.distribution.registry`."""
import sys

from .distribution import registry as _module

sys.modules[__name__] = _module  # one module object under both names
