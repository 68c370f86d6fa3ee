"""Old import path, kept working: the code lives in :mod:`flowsim.algorithms.histogram`."""
import sys

from .algorithms import histogram as _module

sys.modules[__name__] = _module  # one module object under both names
