"""Old import path, kept working: the code lives in :mod:`flowsim.algorithms.plain`."""
import sys

from .algorithms import plain as _module

sys.modules[__name__] = _module  # one module object under both names
