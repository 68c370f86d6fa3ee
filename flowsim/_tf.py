"""Quiet, lazy access to TensorFlow and its devices.

TensorFlow is imported on first use, with its C++ and Python log noise turned
down first (set ``FLOWSIM_TF_VERBOSE=1`` to keep it).  Everything that needs
``tf`` calls :func:`tf` so that ``import flowsim`` stays cheap and so that
:func:`set_virtual_cpus` can still run before TensorFlow initialises.
"""
import contextlib
import logging
import os
import sys

_TF = None
_VIRTUAL_CPUS = None


def tf():
    """Return the ``tensorflow`` module, importing it quietly the first time."""
    global _TF
    if _TF is None:
        if not os.environ.get("FLOWSIM_TF_VERBOSE"):
            os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
            os.environ.setdefault("TF_ENABLE_ONEDNN_OPTS", "0")
        with _quiet_stderr():
            import tensorflow
            tensorflow.config.list_physical_devices()

        if not os.environ.get("FLOWSIM_TF_VERBOSE"):
            tensorflow.get_logger().setLevel(logging.ERROR)
            logging.getLogger("tensorflow").setLevel(logging.ERROR)
        _TF = tensorflow
        if _VIRTUAL_CPUS:
            _split_cpu(_VIRTUAL_CPUS)
    return _TF


@contextlib.contextmanager
def _quiet_stderr():
    """Silence file descriptor 2 (absl/C++ start-up lines) unless verbose."""
    if os.environ.get("FLOWSIM_TF_VERBOSE"):
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
