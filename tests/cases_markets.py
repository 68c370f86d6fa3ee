"""The markets conformance cases; they ship in :mod:`flowsim.testing.cases_markets`."""
from flowsim.testing.cases_markets import *  # noqa: F403
from flowsim.testing.cases_markets import CASES  # noqa: F401
