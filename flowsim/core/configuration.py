"""The TensorFlow and XLA options flowsim runs with: :func:`configure`.

Usage::

    import flowsim
    flowsim.configure()                       # what flowsim's first compile does anyway
    flowsim.configure(cache_dir="off")        # no persistent XLA cache
    flowsim.configure(cache_dir="/scratch/xla", quiet=False, vector_width=None)
    import tensorflow as tf                   # after configure(): every option applies

``import flowsim`` changes nothing in the process: no environment variable, no
directory, no import hook.  flowsim's options are environment variables that
TensorFlow and XLA read when they start; :func:`configure` sets them in
``os.environ``, where you see them and can undo them, and returns what it set.
flowsim calls it for you, with its defaults, when it first loads TensorFlow (the
first compile, :func:`flowsim.logical_devices`, ...) unless you called it
before; then that automatic call does nothing.  Processes started afterwards
inherit the variables; a process that imports flowsim calls :func:`configure`
on its own first compile (``FLOWSIM_CACHE_DIR`` and ``FLOWSIM_TF_VERBOSE`` are
read then).

TensorFlow reads ``TF_XLA_FLAGS`` when it first runs a function, XLA reads
``XLA_FLAGS`` when it first compiles one and oneDNN's switch is read at
TensorFlow's import: when TensorFlow was imported before :func:`configure` set
one of them, the option may come too late for this process, and
:func:`configure` says so with a :class:`~flowsim.FlowsimWarning`.  Call it
before importing TensorFlow.
"""
import contextlib
import logging
import os
import sys
import warnings

from . import compile_cache, tf_private
from .log import FlowsimWarning

#: The vector width flowsim asks XLA's CPU backend for where AVX-512 exists.
VECTOR_WIDTH_FLAG = "--xla_cpu_prefer_vector_width=512"
#: The environment variables :func:`configure` may set.
ENVIRONMENT = ("XLA_FLAGS", "TF_XLA_FLAGS", "TF_ENABLE_ONEDNN_OPTS", "TF_CPP_MIN_LOG_LEVEL")
#: Those TensorFlow has read for good once it has run (the log level flowsim sets itself).
_READ_BY_TENSORFLOW = ("XLA_FLAGS", "TF_XLA_FLAGS", "TF_ENABLE_ONEDNN_OPTS")
_state = {"configured": False, "quiet": None, "loaded_quieted": False}


def configure(cache_dir=None, *, vector_width="auto", constant_folding=False, quiet=None,
              onednn=False):
    """Set the TensorFlow and XLA options flowsim runs with, as environment variables.

    Usage::

        flowsim.configure()                          # flowsim's defaults, set now
        flowsim.configure(cache_dir="off")           # no persistent XLA cache
        changed = flowsim.configure(vector_width=256, quiet=False)
        # changed: {"XLA_FLAGS": "--xla_cpu_prefer_vector_width=256", ...}

    Returns ``{variable: new value}`` of what it changed in ``os.environ``.  A
    variable you set yourself keeps your value.  flowsim calls ``configure()`` on
    its first load of TensorFlow unless you called it before.

    Args:
        cache_dir (default None): top directory of the persistent cache of XLA
            executables (``--tf_xla_persistent_cache_directory`` in
            ``TF_XLA_FLAGS``; a subdirectory per TensorFlow and flowsim version,
            CPU and ``XLA_FLAGS``, created now: :mod:`flowsim.core.compile_cache`).
            None: ``FLOWSIM_CACHE_DIR`` if set, else ``$XDG_CACHE_HOME/flowsim`` or
            ``~/.cache/flowsim``; ``"off"`` or False: no cache.  Left alone when
            ``TF_XLA_FLAGS`` names a cache directory already.
        vector_width (default ``"auto"``): the vector width in bits XLA's CPU
            backend asks LLVM for (``--xla_cpu_prefer_vector_width`` in
            ``XLA_FLAGS``).  ``"auto"``: 512 on a CPU with AVX-512 (XLA's default,
            256, halves every vectorised loop there), nothing elsewhere; an int:
            that width; None: XLA's default.  Left alone when ``XLA_FLAGS`` names a
            width already.
        constant_folding (default False): False adds
            ``--tf_xla_disable_constant_folding=true`` to ``TF_XLA_FLAGS`` (unless
            it names the flag): folded, the ranges a kernel computes from constants
            alone become megabytes of literals in every executable.  The same
            values are computed either way.
        quiet (default None: True unless ``FLOWSIM_TF_VERBOSE`` is set): turn
            TensorFlow's start-up and log noise down: ``TF_CPP_MIN_LOG_LEVEL=3``
            unless set, TensorFlow's import with file descriptor 2 silenced (an
            import hook that leaves ``sys.meta_path`` when TensorFlow loads) or,
            when it is loaded already, its C++, Python and absl log levels.
        onednn (default False): False sets ``TF_ENABLE_ONEDNN_OPTS=0`` unless set
            (oneDNN's kernels change the order of floating-point sums); True
            leaves TensorFlow's default.
    """
    _check_vector_width(vector_width)
    before = {name: os.environ.get(name) for name in ENVIRONMENT}
    loaded = "tensorflow" in sys.modules
    _state["configured"] = True
    _state["quiet"] = (not verbose()) if quiet is None else bool(quiet)
    flags = xla_flags(os.environ.get("XLA_FLAGS"), cpu_flags(), vector_width)
    if flags:
        os.environ["XLA_FLAGS"] = flags
    compile_cache.configure(cache_dir, constant_folding=constant_folding)
    if not onednn:
        os.environ.setdefault("TF_ENABLE_ONEDNN_OPTS", "0")
    if _state["quiet"]:
        quiet_import()
    changed = {name: os.environ[name] for name in ENVIRONMENT
               if os.environ.get(name) != before[name]}
    late = [name for name in _READ_BY_TENSORFLOW if name in changed]
    if loaded and late:
        warnings.warn(f"TensorFlow was imported before flowsim.configure() set "
                      f"{', '.join(late)}: TensorFlow may have read them already, and then "
                      f"flowsim's options do not apply in this process; call "
                      f"flowsim.configure() before importing tensorflow",
                      FlowsimWarning, stacklevel=2)
    return changed


def _check_vector_width(vector_width):
    if vector_width is None or vector_width == "auto":
        return
    if isinstance(vector_width, bool) or not isinstance(vector_width, int) or vector_width <= 0:
        raise ValueError(f"configure: vector_width must be 'auto', None or a positive "
                         f"number of bits, got {vector_width!r}")


def configured():
    """Whether :func:`configure` has run in this process."""
    return _state["configured"]


def configure_once():
    """:func:`configure` with its defaults, unless it has run: what flowsim calls on its
    first load of TensorFlow."""
    if not _state["configured"]:
        configure()


def verbose():
    """Whether ``FLOWSIM_TF_VERBOSE`` asks to keep TensorFlow's output."""
    return bool(os.environ.get("FLOWSIM_TF_VERBOSE"))


def quiet():
    """Whether TensorFlow's noise is turned down (:func:`configure`'s ``quiet``)."""
    return (not verbose()) if _state["quiet"] is None else _state["quiet"]


def xla_flags(flags, cpu_flags, vector_width="auto"):
    """``XLA_FLAGS`` with the vector width asked for: with ``"auto"``,
    :data:`VECTOR_WIDTH_FLAG` when the CPU's feature flags (a set of ``/proc/cpuinfo``
    words) include ``avx512f``; with an int, that width; nothing when ``flags`` sets a
    vector width already or ``vector_width`` is None."""
    flags = flags or ""
    if vector_width is None or "xla_cpu_prefer_vector_width" in flags:
        return flags
    if vector_width == "auto":
        if "avx512f" not in cpu_flags:
            return flags
        return f"{flags} {VECTOR_WIDTH_FLAG}".strip()
    return f"{flags} --xla_cpu_prefer_vector_width={vector_width}".strip()


def cpu_flags():
    """The feature flags of this CPU (``/proc/cpuinfo``; empty where there is none)."""
    try:
        with open("/proc/cpuinfo") as fh:
            for line in fh:
                if line.startswith("flags"):
                    return set(line.split(":", 1)[1].split())
    except OSError:
        pass
    return set()


def quiet_import():
    """Quiet TensorFlow: ``TF_CPP_MIN_LOG_LEVEL=3`` unless set, then the silencing import
    hook, or, when TensorFlow is loaded already, :func:`quiet_loaded_tensorflow`."""
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    if "tensorflow" in sys.modules:
        quiet_loaded_tensorflow(sys.modules["tensorflow"])
    elif not any(isinstance(f, _QuietImport) for f in sys.meta_path):
        sys.meta_path.insert(0, _QuietImport())


def quiet_loaded_tensorflow(tensorflow):
    """Turn down what an already imported TensorFlow prints from now on (once per
    process; best effort: a TensorFlow built otherwise keeps its level).

    Returns the C++ minimum log level set, or None if it could not be set.
    """
    if not quiet() or _state["loaded_quieted"]:
        return None
    _state["loaded_quieted"] = True
    quiet_logger(tensorflow)
    absl_logging = sys.modules.get("absl.logging")
    if absl_logging is not None:
        with contextlib.suppress(Exception):
            absl_logging.set_verbosity(absl_logging.ERROR)
    try:
        level = min(max(int(os.environ.get("TF_CPP_MIN_LOG_LEVEL", "3")), 0), 3)
    except ValueError:
        level = 3
    try:
        return tf_private.set_cpp_min_log_level(tensorflow, level)
    except Exception:  # noqa: BLE001 - another build or platform: its lines stay
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
            with quiet_stderr():
                real_exec(module)
            quiet_logger(module)

        try:
            loader.exec_module = exec_module
        except (AttributeError, TypeError):
            pass
        return spec


def quiet_logger(tensorflow):
    """TensorFlow's Python logger at ERROR (unless not :func:`quiet`)."""
    if not quiet():
        return
    with contextlib.suppress(Exception):    # a TensorFlow without get_logger still imports
        tensorflow.get_logger().setLevel(logging.ERROR)
    logging.getLogger("tensorflow").setLevel(logging.ERROR)


@contextlib.contextmanager
def quiet_stderr():
    """Silence file descriptor 2 (absl/C++ start-up lines) unless not :func:`quiet`."""
    if not quiet():
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
