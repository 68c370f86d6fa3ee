"""The envs conformance cases; they ship in :mod:`flowsim.testing.cases_envs`."""
from flowsim.testing.cases_envs import *  # noqa: F403
from flowsim.testing.cases_envs import CASES  # noqa: F401
