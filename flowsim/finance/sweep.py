"""Old import path, kept working: the code lives in :mod:`flowsim.finance.backtest`."""
import sys

from . import backtest as _module

sys.modules[__name__] = _module  # one module object under both names
