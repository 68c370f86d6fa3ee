"""The ``flowsim`` logger and :class:`FlowsimWarning`.

As Python's libraries do, flowsim logs to the ``flowsim`` logger, which has only
a ``NullHandler``: nothing shows unless the application configures logging, or
calls :func:`verbose`.  What makes a *result* untrustworthy (iterations that
disagree, NaN/Inf values dropped) also reaches an API user where they look:
``Result.warnings`` (printed with the result table) and a
:class:`FlowsimWarning` through :func:`warnings.warn`.
"""
import logging

logger = logging.getLogger("flowsim")
logger.addHandler(logging.NullHandler())

#: ``extra=`` of the log records whose message a :class:`~flowsim.Result` also carries
#: in ``Result.warnings``: the command line prints those with the result, once.
RESULT_WARNING = {"flowsim_result_warning": True}


class FlowsimWarning(UserWarning):
    """A result that should not be trusted as it stands: its iterations disagree
    beyond their errors (chi²/dof above its 99.9 % point), or NaN/Inf values were
    dropped (``nonfinite="drop"``).  The same text is in ``Result.warnings``.

    Shown once per place by Python's default filter; to stop on one::

        import warnings, flowsim
        warnings.simplefilter("error", flowsim.FlowsimWarning)

    (``"ignore"`` silences it).  pytest's ``-W error::flowsim.FlowsimWarning`` and
    ``filterwarnings`` accept it by name; Python's own ``-W`` and ``PYTHONWARNINGS``
    read their categories before site-packages are on the path, so there only
    built-in ones resolve: ``python -W error::UserWarning job.py``.
    """

    __module__ = "flowsim"          # shown and filtered as flowsim.FlowsimWarning


def verbose(level=logging.INFO):
    """Send flowsim's log records to stderr at ``level``."""
    handler = logging.StreamHandler()
    handler.setFormatter(logging.Formatter("[flowsim] %(levelname)s %(message)s"))
    logger.addHandler(handler)
    logger.setLevel(level)
    return logger
