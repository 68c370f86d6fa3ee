"""What ``flowsim run`` shares with the jobs it runs (a job's ``run_cli(args)``).

A job gets the command line's ``argparse.Namespace``; these read it the way
``flowsim run`` does, so a job needs nothing private of :mod:`flowsim.cli`.
The functions live in :mod:`flowsim.core.job_options`, which a domain package's job
imports (no domain package imports the command-line layer).
"""
from .core.job_options import flow_options, given

__all__ = ["flow_options", "given"]
