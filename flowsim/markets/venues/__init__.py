"""pams market classes flowsim.markets runs, one module each (registered by class name)."""
from . import market  # noqa: F401
