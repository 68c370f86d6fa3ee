"""Every use of a TensorFlow private name in flowsim, each behind a guard.

Usage::

    from flowsim.core import tf_private

    tf_private.set_cpp_min_log_level(tensorflow, 3)     # None: not available
    tf_private.route_function_names(name_for)           # False: TensorFlow names them
    tf_private.autograph_context(("flowsim.core.lazy_tf",))  # None: convert everything
    run = tf_private.quick_call(atomic, captures)       # ``call_flat`` when not available
    atomic = tf_private.graph_function(concrete)        # None: call ``concrete`` itself
    kernels = tf_private.registered_kernels("AddV2")    # None: no kernel registry to read
    limits = tf_private.device_memory_limits()          # None: memory not reported

TensorFlow does not promise these names across releases.  Each shim checks that
what it needs is there and, when it is not, returns what says so and flowsim
takes the slower public path: the results are the same, only slower (or, for the
names, the persistent XLA cache hits less often).  Each shim has a test
(``tests/test_tf_private.py``) that fails when a TensorFlow release takes its
fast path away, so a new release is never silently slower.

No other flowsim module uses a TensorFlow name that is not public (the layout
test checks it).
"""
import glob
import importlib
import mmap
import os
import re
import threading

#: The device types of XLA's compilation kernels (registered on XLA's first use).
XLA_JIT_DEVICES = ("XLA_CPU_JIT", "XLA_GPU_JIT")

#: absl's ``SetMinLogLevel(LogSeverityAtLeast)``, with or without its LTS inline namespace.
_SET_MIN_LOG_LEVEL = re.compile(rb"_ZN4absl(?:12lts_\d{8})?14SetMinLogLevelENS\d?_"
                                rb"18LogSeverityAtLeastE")

#: TensorFlow's function-naming functions (``ops.uid()``-counted names) and their modules.
NAMING_FUNCTIONS = {
    "_inference_name": "tensorflow.python.eager.polymorphic_function.concrete_function",
    "_forward_name": "tensorflow.python.eager.polymorphic_function.concrete_function",
    "_backward_name": "tensorflow.python.eager.polymorphic_function.concrete_function",
    "unique_fn_name": "tensorflow.python.ops.control_flow_util_v2",
    "unique_grad_fn_name": "tensorflow.python.ops.control_flow_util_v2",
}

_lock = threading.Lock()
_routed = []


def set_cpp_min_log_level(tensorflow, level):
    """``absl::SetMinLogLevel(level)`` in TensorFlow's framework library, found by its
    mangled name; returns ``level``, or None when no library exports it."""
    import ctypes
    where = os.path.dirname(getattr(tensorflow, "__file__", None) or "")
    for path in sorted(glob.glob(os.path.join(where, "libtensorflow_framework.*"))):
        with open(path, "rb") as fh, mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ) as mm:
            found = _SET_MIN_LOG_LEVEL.search(mm)
            name = None if found is None else bytes(found.group()).decode()
        if name is None:
            continue
        lib = ctypes.CDLL(path, mode=getattr(os, "RTLD_NOLOAD", 0) | ctypes.RTLD_GLOBAL)
        getattr(lib, name)(ctypes.c_int(level))
        return level
    return None


def route_function_names(name_for):
    """Replace TensorFlow's function-naming functions (:data:`NAMING_FUNCTIONS`), once per
    process, by ``name_for(which, original)``: the function TensorFlow then calls in
    place of its function ``which`` (``original`` is TensorFlow's own).  Returns whether
    they are routed (False: this TensorFlow lacks one of them, and names its
    functions itself)."""
    with _lock:
        if not _routed:
            _routed.append(_route(name_for))
        return _routed[0]


def _route(name_for):
    try:
        modules = {which: importlib.import_module(module)
                   for which, module in NAMING_FUNCTIONS.items()}
    except ImportError:
        return False
    originals = {which: getattr(module, which, None) for which, module in modules.items()}
    if not all(callable(f) for f in originals.values()):
        return False
    for which, module in modules.items():
        setattr(module, which, name_for(which, originals[which]))
    return True


def autograph_context(plain_modules):
    """``(context, convert)``: AutoGraph's "conversion on" context and
    ``tf_convert`` (TensorFlow exports ``tf_convert`` but not the context that makes
    it convert), with ``plain_modules`` added to the modules AutoGraph calls as they
    are; None when this TensorFlow lacks them (then flowsim converts everything)."""
    try:
        import tensorflow
        from tensorflow.python.autograph.core import ag_ctx, config
        convert = tensorflow.__internal__.autograph.tf_convert
        context = ag_ctx.ControlStatusCtx(status=ag_ctx.Status.ENABLED)
        rules = tuple(config.DoNotConvert(m) for m in plain_modules)
        config.CONVERSION_RULES = rules + tuple(config.CONVERSION_RULES)
    except (ImportError, AttributeError, TypeError):
        return None
    return context, convert


def graph_function(concrete):
    """The graph function a concrete function calls (with its captured inputs passed
    after the arguments: :func:`quick_call`), or None when this TensorFlow has none."""
    atomic = getattr(concrete, "_inference_function", None)
    if atomic is None or not callable(getattr(atomic, "call_flat", None)):
        return None
    return atomic


def quick_call(atomic, captures):
    """``run(*args)`` -> the flat outputs of graph function ``atomic`` (from
    :func:`graph_function`) on ``args`` and ``captures``: eagerly through
    ``execute.quick_execute``, which skips ``call_flat``'s Python (its error
    rewriting, control and tape scopes, attribute rebuilding); inside a graph, or
    without those names, ``call_flat``.  The call's attributes follow TensorFlow's
    function call options of the calling thread: they are rebuilt whenever TensorFlow
    makes new ones (it does on every ``tf.config`` change).  ``run.quick`` says
    whether the fast path is there."""
    quick = _quick_execute(atomic)
    seen = [None, ()]                       # the options object and its flat attributes

    def run(*args):
        if quick is None or not quick[0].executing_eagerly():
            return atomic.call_flat(*args, *captures)
        ctx, name, n_out, execute = quick
        options = ctx.function_call_options
        if options is not seen[0]:
            seen[:] = options, tuple(x for item in options.as_attrs().items() for x in item)
        return execute(name, n_out, [*args, *captures], seen[1], ctx)
    run.quick = quick is not None
    return run


def _quick_execute(atomic):
    """``(context, function name, output count, quick_execute)`` or None."""
    try:
        from tensorflow.python.eager import context, execute
        ctx = context.context()
        name, n_out = atomic.name.decode(), len(atomic.function_type.flat_outputs)
        quick = execute.quick_execute
        ctx.function_call_options.as_attrs()
    except (ImportError, AttributeError):
        return None
    return ctx, name, n_out, quick


def registered_kernels(op_name):
    """Every kernel this TensorFlow registered for op ``op_name``: a list of
    ``(device_type, {attr: allowed DataType numbers}, host_memory_args)``, XLA's
    compilation kernels (:data:`XLA_JIT_DEVICES`) included -- TensorFlow registers
    those on XLA's first use, so the first call compiles a one-op XLA function.
    None when this TensorFlow has no kernel registry to read."""
    try:
        from tensorflow.python.framework import kernels
        found = kernels.get_registered_kernels_for_op(op_name).kernel
    except (ImportError, AttributeError):
        return None
    if not _xla_kernels_registered:
        _register_xla_kernels(kernels)
        found = kernels.get_registered_kernels_for_op(op_name).kernel
    return [(k.device_type, {c.name: tuple(c.allowed_values.list.type) for c in k.constraint},
             tuple(k.host_memory_arg)) for k in found]


_xla_kernels_registered = []


def _register_xla_kernels(kernels):
    with _lock:
        if _xla_kernels_registered:
            return
        listed = {k.device_type for k in kernels.get_registered_kernels_for_op("AddV2").kernel}
        if not set(XLA_JIT_DEVICES) <= listed:
            import tensorflow
            with tensorflow.device("CPU:0"):
                tensorflow.function(lambda x: x + 1.0, jit_compile=True)(tensorflow.constant(0.0))
        _xla_kernels_registered.append(True)


def device_memory_limits():
    """``{"GPU:0": bytes, ...}``: the memory TensorFlow's allocator may use on each
    local device (``device_lib``'s ``memory_limit``: a GPU's memory, or the limit its
    logical device was given); None when this TensorFlow does not report it."""
    try:
        from tensorflow.python.client import device_lib
        found = device_lib.list_local_devices()
    except (ImportError, AttributeError):
        return None
    return {d.name.rpartition("device:")[2]: int(d.memory_limit) for d in found}
