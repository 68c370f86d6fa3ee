"""Flow with another executor (:mod:`flowsim.core.backend`): where chunks run.

``ThreadPoolFlow`` / ``ScheduledFlow`` (every device of one machine), ``MPIFlow``
(MPI ranks), ``SparkFlow`` (Spark executors), ``JoblibFlow`` (joblib worker
processes: loky, or a Dask cluster).  Each loads on first use so that mpi4py,
pyspark and dask stay optional.
"""
import importlib

_WHERE = {"ThreadPoolFlow": "threads", "ScheduledFlow": "threads",
          "MPIFlow": "mpi", "SparkFlow": "spark", "SparkTaskError": "spark",
          "NoExecutorError": "spark", "JoblibFlow": "joblib", "WorkerLostError": "joblib"}

__all__ = list(_WHERE)


def __getattr__(name):
    if name in _WHERE:
        return getattr(importlib.import_module(f"{__name__}.{_WHERE[name]}"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
