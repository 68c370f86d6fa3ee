"""What ``flowsim run`` shares with the jobs it runs (a job's ``run_cli(args)``).

A job gets the command line's ``argparse.Namespace``; these read it the way
``flowsim run`` does, so a job needs nothing private of :mod:`flowsim.cli`.
No TensorFlow, no flowsim import: a job module may import this at its top.
"""


def flow_options(args):
    """Flow keywords of the options given: ``--events-limit``, ``--no-jit``, ``--rng``."""
    kwargs = {}
    if args.events_limit is not None:
        kwargs["events_limit"] = args.events_limit
    if args.no_jit:
        kwargs["jit_compile"] = False
    if args.rng is not None:
        kwargs["rng"] = args.rng
    return kwargs


def given(args):
    """Names (``dest``, e.g. ``"iters"``) of the options given on the command line with
    a value other than their default, as ``flowsim run`` recorded them in ``args.given``
    before calling the job (empty for a Namespace it did not build)."""
    return tuple(getattr(args, "given", ()))
