"""Old import path, kept working: the code lives in :mod:`flowsim.core.fingerprint`."""
import sys

from .core import fingerprint as _module

sys.modules[__name__] = _module  # one module object under both names
