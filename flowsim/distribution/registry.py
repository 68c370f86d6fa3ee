"""Backend names (``None``, "threads", "mpi", ...) to Flow classes, for :func:`flowsim.integrate`,
the CLI and the finance helpers.

A name maps to ``"module:Class"``; the module is imported only when the backend
is asked for, so MPI and Spark stay optional dependencies.
"""
import importlib

BACKENDS = {
    None: "flowsim.core.flow:Flow",
    "flow": "flowsim.core.flow:Flow",
    "threads": "flowsim.distribution.threads:ThreadPoolFlow",
    "scheduled": "flowsim.distribution.threads:ScheduledFlow",
    "mpi": "flowsim.distribution.mpi:MPIFlow",
    "spark": "flowsim.distribution.spark:SparkFlow",
    "joblib": "flowsim.distribution.joblib:JoblibFlow",
}
#: Backends that take ``schedule=`` (how an iteration is cut among workers).
SCHEDULE_BACKENDS = ("threads", "scheduled", "mpi")


def flow_class(backend):
    """The Flow class for ``backend`` (None or one of :data:`BACKENDS`)."""
    if isinstance(backend, type):
        return backend
    if backend not in BACKENDS:
        names = ", ".join(repr(k) for k in BACKENDS if k)
        raise ValueError(f"unknown backend {backend!r}; choose None or one of {names}")
    module, _, name = BACKENDS[backend].partition(":")
    try:
        mod = importlib.import_module(module)
    except ImportError as exc:
        extra = {"mpi": "mpi", "spark": "spark"}.get(backend)
        hint = f" (pip install 'flowsim[{extra}]')" if extra else ""
        raise ImportError(f"backend {backend!r} is not available{hint}: {exc}") from exc
    return getattr(mod, name)
