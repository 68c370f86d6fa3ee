"""Quiet, lazy access to TensorFlow and its devices.

TensorFlow is imported on first use.  Everything that needs ``tf`` calls
:func:`tf` so that ``import flowsim`` stays cheap and so that
:func:`set_virtual_cpus` can still run before TensorFlow initialises.  The first
:func:`tf` calls :func:`flowsim.configure` (unless it ran before): the XLA and
TensorFlow options flowsim runs with, and TensorFlow's start-up noise turned down
(set ``FLOWSIM_TF_VERBOSE=1`` to keep it); see :mod:`flowsim.core.configuration`.
"""
import sys

from . import configuration

#: What lived here before :func:`flowsim.configure`, importable from here as before.
VECTOR_WIDTH_FLAG = configuration.VECTOR_WIDTH_FLAG
xla_flags = configuration.xla_flags
quiet_import = configuration.quiet_import
quiet_loaded_tensorflow = configuration.quiet_loaded_tensorflow

_TF = None
_VIRTUAL_CPUS = None


def tf():
    """Return the ``tensorflow`` module, importing it quietly the first time."""
    global _TF
    if _TF is None:
        configuration.configure_once()
        with configuration.quiet_stderr():
            import tensorflow
            tensorflow.config.list_physical_devices()
        configuration.quiet_logger(tensorflow)
        _TF = tensorflow
        if _VIRTUAL_CPUS:
            _split_cpu(_VIRTUAL_CPUS)
    return _TF


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
