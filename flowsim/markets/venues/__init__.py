"""pams market classes flowsim.markets runs, one module each (registered by class name)."""
from . import index_market, market  # noqa: F401
