"""What a job's ``run_cli(args)`` reads of the command line's ``argparse.Namespace``,
the way ``flowsim run`` reads it: ``kwargs = flow_options(args)`` gives the Flow
keywords of the options given, ``"iters" in given(args)`` whether an option was given.

No TensorFlow, no flowsim import: a job module of any layer may import this at its top
(:mod:`flowsim.cli_options` is the same functions under the command line's name).
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
