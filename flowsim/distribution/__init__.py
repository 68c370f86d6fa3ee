"""The backends: where chunks run, each one :class:`~flowsim.core.backend.Executor`.

``ThreadExecutor`` (every device of one machine), ``MPIExecutor`` (MPI ranks),
``SparkExecutor`` (Spark executors), ``JoblibExecutor`` (joblib worker
processes: loky, a Dask or a Ray cluster), used as ``Flow(sim, n, seed=1,
executor=ThreadExecutor())``; ``ThreadPoolFlow`` / ``ScheduledFlow``,
``MPIFlow``, ``SparkFlow``, ``JoblibFlow`` build those Flows in one call.
Backend names for ``backend=``: :mod:`flowsim.distribution.registry`.  Each
loads on first use so that mpi4py, pyspark and dask stay optional.
"""
from ..core.lazy import attach

__getattr__, __dir__, __all__ = attach(
    __name__,
    {"ThreadPoolFlow": "threads", "ScheduledFlow": "threads", "ThreadExecutor": "threads",
     "MPIFlow": "mpi", "MPIExecutor": "mpi", "SparkFlow": "spark",
     "SparkExecutor": "spark", "SparkTaskError": "spark", "NoExecutorError": "spark",
     "JoblibFlow": "joblib", "JoblibExecutor": "joblib", "WorkerLostError": "joblib",
     "register_backend": "registry"})
