"""Old import path, kept working: the code lives in :mod:`flowsim.algorithms.sweep`."""
import sys

from .algorithms import sweep as _module

sys.modules[__name__] = _module  # one module object under both names
