"""Old import path, kept working: the code lives in :mod:`flowsim.core.sums`."""
import sys

from .core import sums as _module

sys.modules[__name__] = _module  # one module object under both names
