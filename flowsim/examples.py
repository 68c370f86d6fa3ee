"""Old import path, kept working: the code lives in :mod:`flowsim.targets`."""
import sys

from . import targets as _module

sys.modules[__name__] = _module  # one module object under both names
