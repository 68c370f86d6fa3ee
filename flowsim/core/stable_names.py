"""Names of traced TensorFlow functions that do not depend on the process's history.

TensorFlow names every function it traces (``__inference_one_block_1234``, the
``while_body_1240`` of its loops, ...) with a process-wide counter, ``ops.uid()``.
The names enter the function's signature and its HLO, which name the entries of
the persistent XLA cache (:mod:`.compile_cache`): the same kernel traced by a
process that traced something else first (a loky, Dask, Ray or Spark worker, an
MPI rank that ran another case) missed the cache and compiled again.

Usage::

    key = (content_key(simulation), spec, device)
    with stable_names(key):          # key: what determines the trace (a value)
        fn(*args)                    # traces (if it does) with names fixed by key

Inside, on this thread, each function or loop body TensorFlow names gets the
count of that name so far in the block, plus a start fixed by ``key`` (a SHA-256
of its ``repr``, memory addresses removed) far above TensorFlow's own counter;
the n-th block of one key in a process starts elsewhere, so names stay unique in
the process's function library.  Counting per name, an unrelated function that
one process creates lazily during a trace does not shift the others.  Other
threads keep TensorFlow's names; a nested ``stable_names`` keeps the outer one.
Names change nothing computed.  The same kernel in two processes is then the
same HLO whatever each traced before (for the same path: a block called directly
and the same block called from the loop are two entries).  Should TensorFlow's
private naming functions move, the names are TensorFlow's again (the cache then
only hits in a process that repeats another's history).
"""
import contextlib
import copy
import hashlib
import io
import pickle
import re
import threading

from . import tf_private

#: Each block's names count from a start in 2**34 slots of 2**24 above 2**60
#: (TensorFlow's own counter counts from 0 and never gets there).
_SPAN, _FLOOR, _SLOTS = 2**24, 2**60, 2**34
_local = threading.local()
_lock = threading.Lock()
_traces = {}            # key digest -> how many traces of it this process started
#: TensorFlow's names, with this module's count in place of ``ops.uid()``.
_FORMATS = {"_inference_name": lambda n, k: f"__inference_{n}_{k}",
            "_forward_name": lambda n, k: f"__forward_{n}_{k}",
            "_backward_name": lambda n, k: f"__backward_{n}_{k}",
            "unique_fn_name": lambda scope, n, k: f"{scope}{n}_{k}".replace("/", "_"),
            "unique_grad_fn_name": lambda n, k: f"{n}_grad_{k}"}
#: Memory addresses in reprs (``<function f at 0x7f...>``) differ between processes.
_ADDRESS = re.compile(r" at 0x[0-9a-fA-F]+")


def _install():
    """Route TensorFlow's function and loop-body names through this thread's counts,
    when it has them (once: :func:`flowsim.core.tf_private.route_function_names`).
    Only names: the uids of tensors, graphs and resources keep TensorFlow's counter
    (how many of those a trace takes may depend on what the process built before)."""
    return tf_private.route_function_names(_named)


def _named(which, original):
    def name(*args):
        counts = getattr(_local, "counts", None)
        if counts is None:
            return original(*args)
        base = (which,) + args     # counted per base name: an unrelated function
        k = counts[base] = counts.get(base, -1) + 1     # does not shift the others
        return _FORMATS[which](*args, _local.start + k)
    return name


def _start(key):
    digest = hashlib.sha256(_ADDRESS.sub("", repr(key)).encode()).hexdigest()
    with _lock:
        n = _traces[digest] = _traces.get(digest, -1) + 1
    slot = int(hashlib.sha256(f"{digest}/{n}".encode()).hexdigest(), 16) % _SLOTS
    return _FLOOR + slot * _SPAN


@contextlib.contextmanager
def stable_names(key):
    """Run the block with the names of what it traces fixed by ``key``."""
    if getattr(_local, "counts", None) is not None:
        yield
        return
    _install()
    _local.start, _local.counts = _start(key), {}
    try:
        yield
    finally:
        _local.counts = None


def content_key(obj, drop=("_trace_token", "_trace_names")):
    """A digest of what ``obj`` pickles to (without its attributes ``drop``, and
    without pickle's memo, which records which equal objects happen to be one object),
    the same in every process for an equal object; its type's name when it does not
    pickle (names then stay unique, not stable)."""
    shallow = copy.copy(obj)
    for name in drop:
        getattr(shallow, "__dict__", {}).pop(name, None)
    buffer = io.BytesIO()
    pickler = pickle.Pickler(buffer, protocol=4)
    pickler.fast = True
    try:
        pickler.dump(shallow)
    except Exception:  # noqa: BLE001 - any object: it only costs a cache hit
        return type(obj).__qualname__
    return hashlib.sha256(buffer.getvalue()).hexdigest()
