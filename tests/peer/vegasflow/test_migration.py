"""A VegasFlow script moves to :mod:`flowsim.compat.vegasflow` with its import line
changed: integrands XLA cannot compile, ``vegasflow.utils``, VegasFlow's example
scripts and its printed iteration lines."""
import logging

import numpy as np
import tensorflow as tf

from flowsim.compat.vegasflow import VegasFlow


def _through_python(xarr):
    """x0 * x1 computed in Python (``tf.py_function``), which XLA cannot compile."""
    def product(x):
        return np.prod(x.numpy(), axis=1)
    out = tf.py_function(product, [xarr], Tout=tf.float64)
    return tf.reshape(out, [-1])


def test_python_integrand_runs_without_xla_with_a_note(caplog):
    integrator = VegasFlow(2, 10_000, verbose=False)
    integrator.set_seed(7)
    integrator.compile(_through_python)
    with caplog.at_level(logging.WARNING, logger="flowsim"):
        value, error = integrator.run_integration(2)
    notes = [r.getMessage() for r in caplog.records if r.name == "flowsim"]
    assert notes == ["Vegas: XLA cannot compile EagerPyFunc; running without XLA "
                     "(jit_compile=False)"]
    assert abs(value - 0.25) < 4 * error
