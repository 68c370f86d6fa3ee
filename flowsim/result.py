"""Old import path, kept working: the code lives in :mod:`flowsim.core.result`."""
import sys

from .core import result as _module

sys.modules[__name__] = _module  # one module object under both names
