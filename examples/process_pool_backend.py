"""A backend written from scratch: chunks as tasks of a ``concurrent.futures``
process pool (``docs/backends.rst`` explains each part).

    python examples/process_pool_backend.py

Workers start with the ``spawn`` method: a ``fork`` after TensorFlow has started
copies its runtime's locks in whatever state other threads held them, and the
workers abort (absl mutex), which breaks the pool with no hint of why, so
:func:`flowsim.core.backend.check_start_method` refuses it.
"""
import concurrent.futures
import multiprocessing
import os

import flowsim
from flowsim.core.backend import Executor, check_start_method
from flowsim.core.kernel import run_chunk


def _chunk(task, first, n, device):
    """In a worker: the rows of blocks ``first..first+n-1`` of ``task``, and where."""
    return run_chunk(task, first, n, device), f"pid {os.getpid()}/{device}"


class ProcessPoolExecutor(Executor):
    """Each chunk of an iteration is one task of a process pool.

    Parameters
    ----------
    workers : int
        Worker processes (default 2).  Each imports TensorFlow and compiles the
        kernel once; later tasks of the same simulation reuse it.
    start_method : {"spawn", "forkserver", "fork"}
        How workers start (default ``"spawn"``); ``"fork"`` is refused once
        TensorFlow is loaded in this process.
    device : str
        TensorFlow device in every worker (default ``"CPU:0"``).
    """

    name = "processes"

    def __init__(self, workers=2, start_method="spawn", device="CPU:0"):
        check_start_method(start_method)
        self.device = device
        context = multiprocessing.get_context(start_method)
        self.pool = concurrent.futures.ProcessPoolExecutor(workers, mp_context=context)

    def devices(self):
        return [f"process pool: {self.device} per worker"]

    def execute(self, it):
        rows = it.rows()                   # refuses a missing or repeated block
        started = {}
        for first, n in it.cut():          # chunks of at most events_limit events
            future = self.pool.submit(_chunk, it.task, first, n, self.device)
            started[future] = (first, n, it.now())
        for future in concurrent.futures.as_completed(started):
            first, n, start = started[future]
            block_rows, where = future.result()        # a worker's exception raises here
            rows.add(first, block_rows)                # one row per block, any order
            it.chunk(where, first, n, start, it.now())
        return rows.result()               # in block order: Flow's bits

    def close(self):
        self.pool.shutdown(cancel_futures=True)


if __name__ == "__main__":
    from flowsim.targets import double_gaussian
    sim = flowsim.Vegas(double_gaussian, 4)
    with flowsim.Flow(sim, 200_000, seed=1, executor=ProcessPoolExecutor()) as flow:
        print(flow.run(3))
