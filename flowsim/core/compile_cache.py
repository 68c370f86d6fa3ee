"""A persistent cache of XLA executables, so a second process does not compile again.

:func:`flowsim.configure` turns on TensorFlow's own persistent XLA cache
(``--tf_xla_persistent_cache_directory`` in ``TF_XLA_FLAGS``; flowsim calls it
on its first load of TensorFlow).  TensorFlow names each entry by the compiled
function's signature and a fingerprint of its HLO, and checks the HLO again when
it loads one: an integrand, limit or flowsim change that changes the computation
compiles anew, never reusing a stale executable.  flowsim adds to the path what the
fingerprint does not cover: the TensorFlow and flowsim versions, the CPU's
model and feature flags (a home directory shared by cluster nodes of different
CPUs must not hand one node code compiled for another's instructions) and
``XLA_FLAGS`` (e.g. ``--xla_cpu_prefer_vector_width=512`` compiles the same
HLO into code whose sums round differently).

Where: ``configure(cache_dir=...)``, else ``FLOWSIM_CACHE_DIR`` if set (``off``,
``0`` or empty turn the cache off), else ``$XDG_CACHE_HOME/flowsim`` or
``~/.cache/flowsim``.  ``flowsim cache dir`` prints it, ``flowsim cache clear``
empties it.  Tracing the Python
function still happens in every process; only XLA's compilation is saved.
TensorFlow names what it traces with a process-wide counter, and the names are
part of an entry's key: flowsim traces its kernels with names fixed by the
simulation's content (:mod:`.stable_names`), so a worker that compiled other
kernels first still finds the one it needs.  (A block called directly and the
same block called from the chunk loop are two entries.)
When ``TF_XLA_FLAGS`` already names a cache directory, flowsim leaves the setting
alone.

:func:`flowsim.configure` also sets ``--tf_xla_disable_constant_folding=true`` (cache on or off,
unless ``TF_XLA_FLAGS`` names it): folded, the ranges a kernel computes from
constants alone became megabytes of literals in every executable (why:
:data:`_NO_FOLD`).  The same values are computed either way, so the bits do not
change.
"""
import hashlib
import os
import platform
import shutil

from .._version import __version__

ENV = "FLOWSIM_CACHE_DIR"
_FLAG = "--tf_xla_persistent_cache_directory"
#: TensorFlow folds the constant parts of a graph before XLA compiles it, turning each
#: ``tf.range`` of a block, and what is computed from it alone (the random stream's
#: counters), into array literals: 3.6 MB of them for a VegasPlus block of 56,000 x 8
#: events.  They made the cached executable 9 MB, slow to load; unfolded, XLA computes
#: them in the kernel, and the executable is 0.24 MB (``docs/performance.rst``).
_NO_FOLD = "--tf_xla_disable_constant_folding"
_OFF = ("", "0", "off", "false", "no")


def root(value=None):
    """The cache's top directory: ``value`` (a path, or ``"off"`` or False for none),
    else ``FLOWSIM_CACHE_DIR``; None when either turns it off."""
    value = os.environ.get(ENV) if value is None else value
    if value is not None:
        value = value if isinstance(value, (str, bool)) else os.fspath(value)
        return None if str(value).strip().lower() in _OFF else os.path.abspath(
            os.path.expanduser(value))
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "flowsim")


def _cpu_tag():
    """Model and feature flags of this CPU, hashed (Linux); the machine name elsewhere."""
    text = platform.machine()
    try:
        with open("/proc/cpuinfo") as fh:
            lines = [ln for ln in fh if ln.startswith(("model name", "flags", "Features"))]
        text += "".join(sorted(set(lines)))
    except OSError:
        text += platform.processor()
    return hashlib.sha256(text.encode()).hexdigest()[:12]


def directory(top=None, xla_flags=None):
    """Where this process's executables go: per TensorFlow and flowsim version, CPU and
    ``xla_flags`` (None: ``XLA_FLAGS``), under ``top`` (:func:`root`'s ``value``)."""
    top = root(top)
    if top is None:
        return None
    from importlib.metadata import PackageNotFoundError, version

    try:
        tf_version = version("tensorflow")
    except PackageNotFoundError:
        tf_version = "unknown"
    name = f"xla-tf{tf_version}-flowsim{__version__}-{_cpu_tag()}"
    if xla_flags is None:
        xla_flags = os.environ.get("XLA_FLAGS", "")
    xla_flags = " ".join(sorted(xla_flags.split()))
    if xla_flags:       # XLA's own options change the code compiled, not the HLO
        name += "-xla" + hashlib.sha256(xla_flags.encode()).hexdigest()[:8]
    return os.path.join(top, name)


def configure(top=None, constant_folding=False):
    """Point TensorFlow's persistent XLA cache at :func:`directory` (of ``top``) and,
    unless ``constant_folding``, turn off TensorFlow's constant folding before XLA
    (unless ``TF_XLA_FLAGS`` already names ``--tf_xla_disable_constant_folding``):
    the ``TF_XLA_FLAGS`` part of :func:`flowsim.configure`, which calls it.

    Returns the directory, or None when off or not flowsim's to set.
    """
    flags = os.environ.get("TF_XLA_FLAGS", "")
    if not constant_folding and _NO_FOLD not in flags:
        flags = os.environ["TF_XLA_FLAGS"] = f"{flags} {_NO_FOLD}=true".strip()
    if _FLAG in flags:
        return None
    path = directory(top)
    if path is None:
        return None
    try:
        os.makedirs(path, exist_ok=True)
    except OSError:
        return None                 # read-only home: run without the cache
    os.environ["TF_XLA_FLAGS"] = f"{flags} {_FLAG}={path}".strip()
    return path


def clear():
    """Remove every cached executable (all versions); returns the bytes freed."""
    top = root()
    if top is None or not os.path.isdir(top):
        return 0
    freed = 0
    for entry in os.listdir(top):
        path = os.path.join(top, entry)
        if entry.startswith("xla-") and os.path.isdir(path):
            for dirpath, _, files in os.walk(path):
                freed += sum(os.path.getsize(os.path.join(dirpath, f)) for f in files)
            shutil.rmtree(path, ignore_errors=True)
    return freed
