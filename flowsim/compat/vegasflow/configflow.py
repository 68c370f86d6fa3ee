"""VegasFlow's constants and casts (``vegasflow.configflow``) on flowsim.

``DTYPE`` is ``tf.float64`` unless ``VEGASFLOW_FLOAT=32``; ``DTYPEINT`` is
``tf.int32`` unless ``VEGASFLOW_INT=64``, as in VegasFlow.

The ``vegasflow`` logger prints to stderr as VegasFlow's does
(``[INFO] (vegasflow.monte_carlo) Result for iteration 0: ...``), at the level
``VEGASFLOW_LOG_LEVEL`` names (0 errors, 1 warnings, 2 information (default),
3 debugging), unless the application gave it a handler before the import.
Only that logger is set up: not the root logger, nor TensorFlow's.
"""
import logging
import os

import numpy as np

from ...core.lazy_tf import tf as _tf

BINS_MAX = 50
ALPHA = 1.5
BETA = 0.75
TECH_CUT = 1e-8
MAX_EVENTS_LIMIT = int(1e6)
MAX_NEVAL_HCUBE = int(1e4)
DEFAULT_ACTIVE_DEVICES = ["GPU"]

LOG_DICT = {"0": logging.ERROR, "1": logging.WARNING, "2": logging.INFO, "3": logging.DEBUG}

logger = logging.getLogger("vegasflow")


def print_to_console(log, level_name):
    """VegasFlow's console output on ``log`` (a logger without handlers; one with
    a handler is left alone): ``[LEVEL] (name) message`` lines to stderr from the
    level ``level_name`` names in :data:`LOG_DICT` (None or another name:
    information, as in VegasFlow)."""
    if log.handlers:
        return
    level = LOG_DICT.get(level_name, logging.INFO)
    log.setLevel(level)
    console = logging.StreamHandler()
    console.setLevel(level)
    console.setFormatter(logging.Formatter("[%(levelname)s] (%(name)s) %(message)s"))
    log.addHandler(console)


print_to_console(logger, os.environ.get("VEGASFLOW_LOG_LEVEL"))

_tf_ = _tf()
DTYPE = _tf_.float32 if os.environ.get("VEGASFLOW_FLOAT", "64") == "32" else _tf_.float64
DTYPEINT = _tf_.int64 if os.environ.get("VEGASFLOW_INT", "32") == "64" else _tf_.int32
FMAX = _tf_.constant(np.finfo(DTYPE.as_numpy_dtype).max, dtype=DTYPE)


def run_eager(flag=True):
    """Run every ``tf.function`` eagerly (``tf.config.run_functions_eagerly``).

    flowsim's kernels are then run eagerly too: slow, for debugging only.
    """
    _tf().config.run_functions_eagerly(flag)


def int_me(i):
    """Cast the input to ``DTYPEINT``."""
    return _tf().cast(i, dtype=DTYPEINT)


def float_me(i):
    """Cast the input to ``DTYPE``."""
    return _tf().cast(i, dtype=DTYPE)


ione = int_me(1)
izero = int_me(0)
fone = float_me(1)
fzero = float_me(0)
