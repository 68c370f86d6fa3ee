"""The backends: where chunks run, each one :class:`~flowsim.core.backend.Executor`.

``ThreadExecutor`` (every device of one machine), ``MPIExecutor`` (MPI ranks),
``SparkExecutor`` (Spark executors), ``JoblibExecutor`` (joblib worker
processes: loky, a Dask or a Ray cluster), used as ``Flow(sim, n, seed=1,
executor=ThreadExecutor())``; ``ThreadPoolFlow`` / ``ScheduledFlow``,
``MPIFlow``, ``SparkFlow``, ``JoblibFlow`` build those Flows in one call.
Backend names for ``backend=``: :mod:`flowsim.distribution.registry`.  Each
loads on first use so that mpi4py, pyspark and dask stay optional.
"""
import importlib

_WHERE = {"ThreadPoolFlow": "threads", "ScheduledFlow": "threads", "ThreadExecutor": "threads",
          "MPIFlow": "mpi", "MPIExecutor": "mpi", "SparkFlow": "spark",
          "SparkExecutor": "spark", "SparkTaskError": "spark", "NoExecutorError": "spark",
          "JoblibFlow": "joblib", "JoblibExecutor": "joblib", "WorkerLostError": "joblib",
          "register_backend": "registry"}

__all__ = list(_WHERE)


def __getattr__(name):
    if name in _WHERE:
        return getattr(importlib.import_module(f"{__name__}.{_WHERE[name]}"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
