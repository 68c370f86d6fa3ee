"""Quiet, lazy access to TensorFlow and its devices.

TensorFlow is imported on first use, with its C++ and Python log noise turned
down first (set ``FLOWSIM_TF_VERBOSE=1`` to keep it).  Everything that needs
``tf`` calls :func:`tf` so that ``import flowsim`` stays cheap and so that
:func:`set_virtual_cpus` can still run before TensorFlow initialises.

``import flowsim`` calls :func:`quiet_import`: it sets the environment
TensorFlow reads when it loads and puts :class:`_QuietImport` on
``sys.meta_path``, so TensorFlow's first import is silenced whoever makes it
(flowsim's :func:`tf`, or the user's ``import tensorflow`` after
``import flowsim``).  A TensorFlow imported before flowsim has printed what it
prints; :func:`tf` still turns its Python logger down.
"""
import contextlib
import logging
import os
import sys

_TF = None
_VIRTUAL_CPUS = None


def _verbose():
    return bool(os.environ.get("FLOWSIM_TF_VERBOSE"))


def quiet_import():
    """Before TensorFlow loads: its environment defaults and the silencing import hook."""
    if _verbose():
        return
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    os.environ.setdefault("TF_ENABLE_ONEDNN_OPTS", "0")
    if "tensorflow" not in sys.modules and not any(
            isinstance(f, _QuietImport) for f in sys.meta_path):
        sys.meta_path.insert(0, _QuietImport())


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
