"""pams agent classes flowsim.markets runs, one module each (registered by class name)."""
from . import arbitrage, fcn, market_maker, market_share_fcn  # noqa: F401
