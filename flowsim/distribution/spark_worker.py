"""SparkFlow's executor side: what runs in Spark's Python workers.

Each Python worker (Spark reuses them) sets itself up once (quiet logs,
TensorFlow threads = the task's cores, GPUs), keeps the latest task by job,
runs its partition's blocks through :func:`flowsim.core.kernel.run_chunk` and
returns ``(iteration, first_block, rows, start, end, label)`` per call.  A
failure travels to the driver as :func:`flowsim.core.backend.describe`'s account,
base64 JSON behind ``ERROR_TAG`` in the exception text (Py4J keeps only text).

PySpark's worker daemon runs a full ``gc.collect()`` after every task of a
reused worker.  With TensorFlow and a compiled kernel loaded it walks every
object of TensorFlow's modules and graphs, and it was most of SparkFlow's
fixed cost per iteration (figures in ``docs/performance.rst``, "Backends").  So
after a task that imported TensorFlow or compiled a kernel, the worker collects
once and then ``gc.freeze()``-s what is there (long-lived: modules, graphs,
kernels); later collections only look at objects made since.
Cyclic garbage of those objects is not collected (e.g. a kernel dropped from
:mod:`flowsim.core.kernel`'s cache of ``MAX_KERNELS``): a bounded leak per distinct
simulation.
"""
import base64
import gc
import json
import logging
import os
import threading
import time

from ..core.backend import describe, set_threads
from ..core.blocks import cut
from ..core.kernel import run_chunk, trace_counts

ERROR_TAG = "flowsim-task-error"

#: Per Python worker: whether TF is set up and the latest task by job key; its
#: compiled kernels stay in :mod:`flowsim.core.kernel`'s cache (a task's simulation
#: keeps its trace key through pickling).
WORKER = {"ready": False, "frozen": False, "tasks": {}}
_WORKER_LOCK = threading.Lock()


def _setup_worker(ctx, requested):
    """Once per Python worker: quiet logs, TF threads = the task's cores, GPUs."""
    if WORKER["ready"]:
        return
    logging.getLogger("flowsim").setLevel(logging.WARNING)
    set_threads(max(1, int(ctx.cpus())), keep=True)   # the task's cores, if still possible
    from ..core.lazy_tf import tf
    t = tf()
    gpus = t.config.list_physical_devices("GPU")
    if gpus and requested is None:
        try:
            if "gpu" in ctx.resources():
                for g in gpus:  # workers of one executor may share a GPU
                    t.config.experimental.set_memory_growth(g, True)
            else:  # Spark gave this task no GPU: leave the GPUs to other tasks
                t.config.set_visible_devices([], "GPU")
        except RuntimeError:
            pass
    WORKER["ready"] = True


def _freeze():
    """Collect once, then keep what is left out of later collections (see module doc)."""
    gc.collect()
    gc.freeze()
    WORKER["frozen"] = True


def task_device(requested, resources, logical):
    """Device for a task: ``requested``, else the GPU Spark assigned, else CPU:0.

    ``resources`` is ``TaskContext.resources()`` (name -> object with
    ``addresses``); ``logical`` the TF device names of this worker.  Spark's
    GPU address is the physical index: used as ``GPU:<address>`` when TF sees
    it, or the only GPU TF sees (a cluster manager that isolates GPUs).
    """
    if requested:
        return requested
    gpu = resources.get("gpu") if resources else None
    addresses = list(getattr(gpu, "addresses", None) or [])
    gpus = [d for d in logical if d.startswith("GPU:")]
    if addresses and gpus:
        name = f"GPU:{addresses[0]}"
        if name in gpus:
            return name
        if len(gpus) == 1:
            return gpus[0]
        raise RuntimeError(f"Spark assigned GPU {addresses[0]!r} but this worker sees "
                           f"{', '.join(gpus)}")
    return "CPU:0"


def _worker_task(payload, job):
    import pickle
    with _WORKER_LOCK:
        task = WORKER["tasks"].get(job)
        if task is None:
            task = pickle.loads(payload if isinstance(payload, bytes) else payload.value)
            WORKER["tasks"] = {job: task}
    return task


def run_partition(payload, job, per_call, requested, iterations, index, chunks):
    from pyspark import TaskContext
    ctx = TaskContext.get()
    chunks = list(chunks)
    blocks = (f"{chunks[0][0]}..{chunks[-1][0] + chunks[-1][1] - 1}" if chunks else "none")
    try:
        _setup_worker(ctx, requested)
        task = _worker_task(payload, job)
        from ..core.lazy_tf import logical_devices
        device = task_device(requested, ctx.resources(), logical_devices())
        label = f"{os.uname().nodename}:{os.getpid()}/{device}"
        out = []
        traces = sum(trace_counts.values())
        for iteration in iterations:
            run = task if iteration == task.iteration else task.at(iteration)
            for b, k in (part for first, n in chunks for part in cut(first, n, per_call)):
                start = time.time()
                rows = run_chunk(run, b, k, device)
                out.append((iteration, b, rows, start, time.time(), label))
        if not WORKER["frozen"] or sum(trace_counts.values()) != traces:
            _freeze()
        return out
    except Exception as exc:
        info = describe(exc, partition=index, attempt=ctx.attemptNumber(), blocks=blocks,
                        host=os.uname().nodename)
        tag = base64.b64encode(json.dumps(info).encode()).decode()
        raise RuntimeError(f"{type(exc).__name__}: {exc}\n{ERROR_TAG}[{tag}]") from exc
