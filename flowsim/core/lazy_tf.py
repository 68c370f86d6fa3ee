"""Quiet, lazy access to TensorFlow and its devices.

TensorFlow is imported on first use, with its C++ and Python log noise turned
down first (set ``FLOWSIM_TF_VERBOSE=1`` to keep it).  Everything that needs
``tf`` calls :func:`tf` so that ``import flowsim`` stays cheap and so that
:func:`set_virtual_cpus` can still run before TensorFlow initialises.

``import flowsim`` calls :func:`quiet_import`: it sets the environment
TensorFlow reads when it loads and puts :class:`_QuietImport` on
``sys.meta_path``, so TensorFlow's first import is silenced whoever makes it
(flowsim's :func:`tf`, or the user's ``import tensorflow`` after
``import flowsim``).

A TensorFlow imported *before* flowsim has printed its start-up lines (they
cannot be taken back); :func:`quiet_import` then turns down what it would print
later (the XLA service, compiled-cluster and MLIR lines of the first compile):
TensorFlow's C++ log level (absl's minimum log level, set to what
``TF_CPP_MIN_LOG_LEVEL`` says, 3 unless the environment says otherwise), its
Python logger and absl's Python verbosity.  ``FLOWSIM_TF_VERBOSE=1`` keeps all.

On a CPU with AVX-512 it also asks XLA for 512-bit vectors (:func:`xla_flags`):
XLA's CPU backend asks LLVM for 256-bit ones by default, which halves the width
of every vectorised loop of a kernel (the random numbers, the integrand, its
``exp``).  The flag changes how many values one instruction computes, not what
each value is: rows are the same bits either way.  It is read when XLA compiles
its first function, so it works unless the process compiled with XLA before
flowsim was imported; ``XLA_FLAGS`` naming ``--xla_cpu_prefer_vector_width``
(e.g. ``=256`` on a CPU that slows its clock under 512-bit work) is left alone.
"""
import contextlib
import glob
import logging
import mmap
import os
import re
import sys

_TF = None
_VIRTUAL_CPUS = None
_LOADED_QUIETED = False
#: absl's ``SetMinLogLevel(LogSeverityAtLeast)``, with or without its LTS inline namespace.
_SET_MIN_LOG_LEVEL = re.compile(rb"_ZN4absl(?:12lts_\d{8})?14SetMinLogLevelENS\d?_"
                                rb"18LogSeverityAtLeastE")


def _verbose():
    return bool(os.environ.get("FLOWSIM_TF_VERBOSE"))


#: The vector width flowsim asks XLA's CPU backend for where AVX-512 exists.
VECTOR_WIDTH_FLAG = "--xla_cpu_prefer_vector_width=512"


def xla_flags(flags, cpu_flags):
    """``XLA_FLAGS`` with :data:`VECTOR_WIDTH_FLAG` added when the CPU's feature flags
    (a set of ``/proc/cpuinfo`` words) include ``avx512f`` and ``flags`` does not set a
    vector width already."""
    flags = flags or ""
    if "avx512f" not in cpu_flags or "xla_cpu_prefer_vector_width" in flags:
        return flags
    return f"{flags} {VECTOR_WIDTH_FLAG}".strip()


def _cpu_flags():
    try:
        with open("/proc/cpuinfo") as fh:
            for line in fh:
                if line.startswith("flags"):
                    return set(line.split(":", 1)[1].split())
    except OSError:
        pass
    return set()


def quiet_import():
    """Before TensorFlow loads: its environment defaults and the silencing import hook."""
    flags = xla_flags(os.environ.get("XLA_FLAGS"), _cpu_flags())
    if flags:
        os.environ["XLA_FLAGS"] = flags
    if _verbose():
        return
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    os.environ.setdefault("TF_ENABLE_ONEDNN_OPTS", "0")
    if "tensorflow" in sys.modules:
        quiet_loaded_tensorflow(sys.modules["tensorflow"])
    elif not any(isinstance(f, _QuietImport) for f in sys.meta_path):
        sys.meta_path.insert(0, _QuietImport())


def quiet_loaded_tensorflow(tensorflow):
    """Turn down what an already imported TensorFlow prints from now on (once per
    process; best effort: a TensorFlow built otherwise keeps its level).

    Returns the C++ minimum log level set, or None if it could not be set.
    """
    global _LOADED_QUIETED
    if _verbose() or _LOADED_QUIETED:
        return None
    _LOADED_QUIETED = True
    _quiet_logger(tensorflow)
    absl_logging = sys.modules.get("absl.logging")
    if absl_logging is not None:
        with contextlib.suppress(Exception):
            absl_logging.set_verbosity(absl_logging.ERROR)
    try:
        level = min(max(int(os.environ.get("TF_CPP_MIN_LOG_LEVEL", "3")), 0), 3)
    except ValueError:
        level = 3
    try:
        return _set_cpp_min_log_level(tensorflow, level)
    except Exception:  # noqa: BLE001 - another build or platform: its lines stay
        return None


def _set_cpp_min_log_level(tensorflow, level):
    """``absl::SetMinLogLevel(level)`` in TensorFlow's framework library, if it exports it."""
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


class _QuietImport:
    """``sys.meta_path`` entry: the import of ``tensorflow`` runs with fd 2 silenced.

    It finds the real spec with the other finders and wraps only that loader's
    ``exec_module``; a mere ``importlib.util.find_spec("tensorflow")`` imports
    nothing and keeps the hook.  The hook leaves ``sys.meta_path`` when
    TensorFlow executes.
    """

    def find_spec(self, fullname, path=None, target=None):
        if fullname != "tensorflow":
            return None
        for finder in list(sys.meta_path):
            find = getattr(finder, "find_spec", None)
            if finder is self or find is None:
                continue
            spec = find(fullname, path, target)
            if spec is not None:
                break
        else:
            return None
        loader = spec.loader
        real_exec = getattr(loader, "exec_module", None)
        if real_exec is None:
            return spec

        def exec_module(module):
            vars(loader).pop("exec_module", None)   # back to the loader's own method
            with contextlib.suppress(ValueError):
                sys.meta_path.remove(self)
            with _quiet_stderr():
                real_exec(module)
            _quiet_logger(module)

        try:
            loader.exec_module = exec_module
        except (AttributeError, TypeError):
            pass
        return spec


def _quiet_logger(tensorflow):
    if _verbose():
        return
    with contextlib.suppress(Exception):    # a TensorFlow without get_logger still imports
        tensorflow.get_logger().setLevel(logging.ERROR)
    logging.getLogger("tensorflow").setLevel(logging.ERROR)


def tf():
    """Return the ``tensorflow`` module, importing it quietly the first time."""
    global _TF
    if _TF is None:
        quiet_import()
        with _quiet_stderr():
            import tensorflow
            tensorflow.config.list_physical_devices()
        _quiet_logger(tensorflow)
        _TF = tensorflow
        if _VIRTUAL_CPUS:
            _split_cpu(_VIRTUAL_CPUS)
    return _TF


@contextlib.contextmanager
def _quiet_stderr():
    """Silence file descriptor 2 (absl/C++ start-up lines) unless verbose."""
    if _verbose():
        yield
        return
    try:
        sys.stderr.flush()
        saved = os.dup(2)
    except (OSError, ValueError):
        yield
        return
    devnull = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(devnull, 2)
        yield
    finally:
        os.dup2(saved, 2)
        os.close(saved)
        os.close(devnull)


def _split_cpu(n):
    t = _TF
    cpu = t.config.list_physical_devices("CPU")[0]
    try:
        t.config.set_logical_device_configuration(
            cpu, [t.config.LogicalDeviceConfiguration() for _ in range(n)])
    except RuntimeError as exc:
        current = len(t.config.list_logical_devices("CPU"))
        if current != n:
            raise RuntimeError(
                f"set_virtual_cpus({n}) must be called before TensorFlow "
                f"initialises its devices; it already has {current} CPU "
                f"device(s)") from exc


def set_virtual_cpus(n):
    """Split CPU:0 into ``n`` logical devices (CPU:0 ... CPU:n-1).

    Call before any TensorFlow work in the process: TensorFlow fixes its
    devices when it first initialises them.  Meant for tests and for CPU-only
    machines, where it is the way to exercise multi-device code.
    """
    global _VIRTUAL_CPUS
    if not isinstance(n, int) or isinstance(n, bool) or n < 1:
        raise ValueError(f"set_virtual_cpus: n must be a positive integer, got {n!r}")
    _VIRTUAL_CPUS = n
    if _TF is not None:
        _split_cpu(n)
    elif "tensorflow" in sys.modules:   # imported by someone else: apply (or refuse) now
        tf()


def virtual_cpus():
    """Logical CPU devices asked for by :func:`set_virtual_cpus` (None: not split)."""
    return _VIRTUAL_CPUS


def logical_devices():
    """Names of every logical device, GPUs first then CPUs (e.g. ``GPU:0``)."""
    t = tf()
    gpus = [d.name for d in t.config.list_logical_devices("GPU")]
    cpus = [d.name for d in t.config.list_logical_devices("CPU")]
    return [short_name(n) for n in gpus + cpus]


def short_name(name):
    """``/job:localhost/replica:0/task:0/device:GPU:1`` -> ``GPU:1``."""
    name = name.split("device:")[-1]
    kind, _, index = name.rpartition(":")
    return f"{kind.upper()}:{index}"


def default_device():
    """The first GPU, else CPU:0."""
    return logical_devices()[0]


def device_name(device):
    """``"/device:GPU:0"``, ``"gpu:0"`` -> ``"GPU:0"`` (syntax only, no check)."""
    return device.split("device:")[-1].upper()


def resolve_device(device):
    """Check a device name against this machine; ``None`` picks the default."""
    if device is None:
        return default_device()
    if not isinstance(device, str):
        raise TypeError(f"device must be a string like 'CPU:0' or 'GPU:1', got {device!r}")
    name = device_name(device)
    if name.count(":") != 1:
        raise ValueError(f"device must look like 'CPU:0' or 'GPU:1', got {device!r}")
    available = logical_devices()
    if name not in available:
        raise ValueError(f"unknown device {device!r}; this machine has {', '.join(available)}")
    return name


def planned_gpu_workers(devices):
    """GPU workers a ``devices=`` argument will give, without initialising TF."""
    n_gpu = len(tf().config.list_physical_devices("GPU"))
    if devices is None:
        return n_gpu, None
    if isinstance(devices, int) and not isinstance(devices, bool):
        return min(devices, n_gpu), devices
    names = [devices] if isinstance(devices, str) else list(devices)
    return sum(device_name(str(d)).startswith("GPU") for d in names), len(names)


def select_devices(devices):
    """``(device names, weights or None)`` for the ``devices=`` argument."""
    every = logical_devices()
    weights = None
    if devices is None:
        return every, None
    if isinstance(devices, bool):
        raise TypeError(f"devices must be None, a count, a list or a dict, got {devices!r}")
    if isinstance(devices, int):
        if not 1 <= devices <= len(every):
            raise ValueError(f"devices={devices}: this machine has {len(every)} "
                             f"device(s): {', '.join(every)}")
        return every[:devices], None
    if isinstance(devices, str):
        devices = [devices]
    if isinstance(devices, dict):
        weights = [float(w) for w in devices.values()]
        if any(not w >= 0 for w in weights) or not sum(weights) > 0:
            raise ValueError(f"device weights must be >= 0 and not all 0, got {devices}")
    names = [resolve_device(d) for d in devices]
    if not names:
        raise ValueError("devices= is empty")
    if len(set(names)) != len(names):
        raise ValueError(f"devices lists a device twice: {names}")
    return names, weights
