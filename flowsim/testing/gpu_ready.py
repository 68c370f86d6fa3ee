"""Can a workload's compiled kernels run on a GPU?  Checked here, without one.

Usage::

    from flowsim.testing import check_gpu_ready

    report = check_gpu_ready(flowsim.Vegas(f, dim=4))
    print(report)        # ops without a GPU kernel, host round-trips, int64/float64 work
    assert report.ok, report

    check_gpu_ready("markets_small")        # a conformance case, by name
    check_gpu_ready(my_factory, jit_compile=False, dtype="float32")

:func:`check_gpu_ready` traces (never runs) the chunk function a Flow would build
for ``"GPU:0"`` -- the loop over a chunk's blocks and, under XLA, the block kernel
it calls -- and reads every op of the graph and of the functions it calls against
TensorFlow's kernel registry of this build:

* an op in the XLA-compiled block kernel needs an ``XLA_GPU_JIT`` kernel, an op
  outside it a ``GPU`` (or device-independent) kernel for its dtypes.  One
  without is listed, and ``report.ok`` is False.
* host round-trips inside loops (``tf.py_function``, ``tf.numpy_function``, and
  ops whose GPU kernel keeps arguments in host memory, inside a ``while`` body)
  are listed as information: they run, but each one waits for the host.
* int64 and float64 work is counted per op type, as information: GPUs run it at
  a fraction of float32's rate (flowsim's accumulators are float64 by design;
  ``dtype="float32"`` moves the integrand's work to float32).

The workload is a :class:`flowsim.Simulation`, a function of no arguments that
returns one (the factories of :mod:`flowsim.testing.cases_markets` and
friends), or the name of a conformance case (:data:`flowsim.testing.CASES`),
which also gives its block size and XLA setting.  Tracing takes a few seconds
per workload; nothing is computed.
"""
import collections
import copy
import re
from dataclasses import dataclass, field

from ..core import tf_private
from ..core.blocks import default_block_size
from ..core.kernel import KernelSpec, traced_chunk
from ..core.simulation import Simulation

__all__ = ["GpuReadiness", "check_gpu_ready"]

#: Ops that call back into Python on the host.
HOST_CALLS = ("EagerPyFunc", "PyFunc", "PyFuncStateless")
#: Ops whose function attributes are loop bodies (and conditions).
LOOPS = ("While", "StatelessWhile")
#: Ops that move or call rather than compute: not counted as int64/float64 work.
PLUMBING = frozenset({"Const", "Identity", "IdentityN", "NoOp", "Placeholder", "_Arg",
                      "_Retval", "PartitionedCall", "StatefulPartitionedCall", "While",
                      "StatelessWhile", "If", "StatelessIf", "Reshape", "Shape"})
#: The DataType numbers of the slow dtypes, and their names.
SLOW_DTYPES = {2: "float64", 9: "int64"}
#: Events per iteration of a traced workload that does not say (Vegas's
#: hypercubes are chosen from it).
TRACE_EVENTS = 1 << 16
#: The device the chunk function is built for (the GPU path, on any machine).
GPU = "GPU:0"


@dataclass
class OpUse:
    """One op of the traced graph: its type, the function holding it, whether XLA
    compiles it and whether a loop body runs it, and its type attributes."""

    op: str
    function: str
    xla: bool
    in_loop: bool
    types: dict = field(default_factory=dict)


@dataclass
class GpuReadiness:
    """What :func:`check_gpu_ready` found: ``ok`` is True when every op has a GPU
    (or XLA-GPU) kernel; ``str(report)`` says what runs where."""

    workload: str
    jit_compile: bool
    dtype: str
    n_ops: int
    missing: list
    round_trips: list
    slow: dict

    @property
    def ok(self):
        return not self.missing

    def __bool__(self):
        return self.ok

    def __str__(self):
        mode = "XLA" if self.jit_compile else "no XLA"
        head = (f"GPU readiness of {self.workload} ({mode}, {self.dtype}): "
                + ("ready" if self.ok else f"NOT READY: {len(self.missing)} op(s) without "
                                           f"a GPU kernel in this TensorFlow build"))
        lines = [head]
        lines += [f"  no {'XLA-GPU' if u.xla else 'GPU'} kernel: {u.op}"
                  f"{_types_text(u.types)} in {u.function}" for u in self.missing]
        if self.ok:
            lines.append(f"  every op has a GPU kernel ({self.n_ops} ops traced)")
        return "\n".join(lines + self.information())

    def information(self):
        """The lines on host round-trips inside loops and on int64/float64 work."""
        calls = collections.Counter(f"{u.op} in {u.function}" for u in self.round_trips
                                    if u.op in HOST_CALLS)
        held = collections.Counter(u.op for u in self.round_trips if u.op not in HOST_CALLS)
        lines = ["  information: Python calls inside loops (a host round-trip each): "
                 + (", ".join(f"{k} (x{n})" for k, n in sorted(calls.items())) or "none"),
                 "  information: ops with host-memory arguments inside loops (int32 "
                 "indices and shapes TensorFlow keeps on the host): "
                 + (", ".join(f"{op} {n}" for op, n in held.most_common()) or "none")]
        for name in ("float64", "int64"):
            ops = self.slow.get(name, collections.Counter())
            top = ", ".join(f"{op} {n}" for op, n in ops.most_common(6))
            lines.append(f"  information: {name} work (slow on most GPUs): "
                         f"{sum(ops.values())} ops" + (f" ({top})" if top else ""))
        return lines


def check_gpu_ready(workload, *, dtype="float64", jit_compile=None, n_events=None):
    """Trace ``workload``'s chunk function for a GPU and read its ops against this
    TensorFlow's kernel registry; return a :class:`GpuReadiness`.

    Parameters
    ----------
    workload : Simulation, callable or str
        A Simulation (traced on a copy: it is not changed), a function of no
        arguments returning one, or a conformance case's name.
    dtype : {"float64", "float32"}
        The Flow's ``dtype``.
    jit_compile : bool or None
        The Flow's ``jit_compile`` (default: the case's, else True).
    n_events : int or None
        Events per iteration (default: the case's, else the workload's own, else
        65,536); it may decide a layout (Vegas's hypercubes), never the ops.
    """
    name, sim, settings = _workload(workload)
    jit = bool(settings.get("jit_compile", True) if jit_compile is None else jit_compile)
    n = n_events or settings.get("n_events") or getattr(sim, "n_events", None) or TRACE_EVENTS
    sim = copy.deepcopy(sim)
    sim.prepare(int(n))
    block = (getattr(sim, "block_rows", None) or getattr(sim, "block_size", None)
             or settings.get("block_size") or default_block_size(int(n)))
    spec = KernelSpec(dtype=dtype, block_size=int(block), jit_compile=jit)
    uses = graph_ops(traced_chunk(sim, spec, GPU))
    return GpuReadiness(name, jit, spec.dtype, len(uses), missing_kernels(uses),
                        [u for u in uses if u.in_loop and _round_trip(u)], slow_work(uses))


def _workload(workload):
    """``(name, simulation, case settings)`` of what :func:`check_gpu_ready` takes."""
    if isinstance(workload, str):
        from .conformance import CASES
        if workload not in CASES:
            raise ValueError(f"no conformance case {workload!r}; cases: {', '.join(CASES)}")
        factory, settings = CASES[workload]
        return workload, factory(), settings
    if isinstance(workload, Simulation):
        return type(workload).__name__, workload, {}
    if callable(workload):
        sim = workload()
        if isinstance(sim, Simulation):
            return getattr(workload, "__name__", type(sim).__name__), sim, {}
        raise TypeError(f"check_gpu_ready: {workload!r}() returned {type(sim).__name__}, "
                        f"not a flowsim Simulation")
    raise TypeError(f"check_gpu_ready takes a flowsim Simulation, a function returning one "
                    f"or a conformance case's name, got {type(workload).__name__}")


def graph_ops(concrete):
    """Every op of ``concrete``'s graph and of the functions it calls, as :class:`OpUse`
    (a function reached both inside and outside XLA or a loop is listed for each)."""
    graph = concrete.graph.as_graph_def()
    library = {f.signature.name: f for f in graph.library.function}
    uses, seen = [], set()
    pending = [(graph.node, "the chunk loop", False, False)]
    while pending:
        nodes, where, xla, in_loop = pending.pop()
        for node in nodes:
            uses.append(OpUse(node.op, where, xla, in_loop, _type_attrs(node.attr)))
            for called in _called_functions(node):
                fn = library.get(called)
                if fn is None:
                    continue
                inner = (xla or _must_compile(node.attr) or _must_compile(fn.attr),
                         in_loop or node.op in LOOPS)
                if (called, *inner) not in seen:
                    seen.add((called, *inner))
                    pending.append((fn.node_def, _function_name(called, inner[0]), *inner))
    return uses


def _called_functions(node):
    for value in node.attr.values():
        if value.HasField("func"):
            yield value.func.name
        yield from (f.name for f in value.list.func)


def _must_compile(attrs):
    return "_XlaMustCompile" in attrs and attrs["_XlaMustCompile"].b


def _function_name(name, xla):
    short = re.sub(r"^__inference_|_\d+$", "", name)
    return f"the XLA block kernel ({short})" if xla else f"function {short}"


def _type_attrs(attrs):
    """``{attr: (DataType numbers)}`` of a node's type and type-list attributes."""
    found = {}
    for key, value in attrs.items():
        if value.HasField("type"):
            found[key] = (value.type,)
        elif value.HasField("list") and value.list.type:
            found[key] = tuple(value.list.type)
    return found


def _types_text(types):
    from ..core.lazy_tf import tf
    names = sorted({tf().as_dtype(t).name for ts in types.values() for t in ts})
    return f" ({', '.join(names)})" if names else ""


_KERNELS = {}


def kernels_of(op):
    """The registered kernels of ``op`` (:func:`flowsim.core.tf_private.registered_kernels`),
    read once per process."""
    if op not in _KERNELS:
        found = tf_private.registered_kernels(op)
        if found is None:
            raise RuntimeError("this TensorFlow has no kernel registry flowsim can read: "
                               "GPU readiness cannot be checked")
        _KERNELS[op] = found
    return _KERNELS[op]


def gpu_kernel(use):
    """The kernel ``use`` would run on a GPU: ``(device_type, constraints, host memory
    arguments)``, or None when this build has none for its dtypes."""
    wanted = ("XLA_GPU_JIT",) if use.xla else ("GPU", "DEFAULT")
    for device in wanted:
        for kernel in kernels_of(use.op):
            if kernel[0] == device and _allows(kernel[1], use.types):
                return kernel
    return None


def _allows(constraints, types):
    return all(set(types.get(attr, allowed)) <= set(allowed)
               for attr, allowed in constraints.items())


def missing_kernels(uses):
    """The uses (one per op, function and dtypes) with no GPU kernel for their dtypes."""
    missing, seen = [], set()
    for use in uses:
        key = (use.op, use.function, use.xla, tuple(sorted(use.types.items())))
        if key not in seen:
            seen.add(key)
            if gpu_kernel(use) is None:
                missing.append(use)
    return missing


def _round_trip(use):
    """Whether ``use`` waits for the host: a Python call, or (outside XLA) a kernel
    keeping arguments in host memory."""
    if use.op in HOST_CALLS:
        return True
    if use.xla or use.op in PLUMBING:
        return False
    kernel = gpu_kernel(use)
    return kernel is not None and bool(kernel[2])


def slow_work(uses):
    """``{"float64": Counter(op: count), "int64": ...}`` of the ops computing in them."""
    slow = {name: collections.Counter() for name in SLOW_DTYPES.values()}
    for use in uses:
        if use.op in PLUMBING:
            continue
        for number in {t for ts in use.types.values() for t in ts} & set(SLOW_DTYPES):
            slow[SLOW_DTYPES[number]][use.op] += 1
    return slow
