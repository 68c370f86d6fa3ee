"""Old import path, kept working: the code lives in :mod:`flowsim.core.lazy_tf`."""
import sys

from .core import lazy_tf as _module

sys.modules[__name__] = _module  # one module object under both names
