"""A VegasFlow script moves to :mod:`flowsim.compat.vegasflow` with its import line
changed: integrands XLA cannot compile, ``vegasflow.utils``, VegasFlow's example
scripts and its printed iteration lines."""
import io
import logging
import re

import numpy as np
import pytest
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


def _product(xarr):
    return tf.reduce_prod(xarr, axis=1)


def test_iterations_print_as_vegasflow_prints_them():
    from flowsim.compat.vegasflow.configflow import logger
    console = logger.handlers[0]            # set up at import, as VegasFlow's
    stream = io.StringIO()
    previous = console.setStream(stream)
    try:
        integrator = VegasFlow(2, 2_000)
        integrator.set_seed(3)
        integrator.compile(_product)
        integrator.run_integration(2)
    finally:
        console.setStream(previous)
    lines = stream.getvalue().splitlines()
    head = r"\[INFO\] \(vegasflow\.monte_carlo\) "
    patterns = [head + rf"Result for iteration {i}: 0\.\d{{4}} \+/- 0\.\d{{4}}"
                r"\(took \d+\.\d{5} s\)" for i in (0, 1)]
    patterns.append(head + r" > Final results: 0\.2\d* \+/- 0\.\d+")
    assert [bool(re.fullmatch(p, line)) for p, line in zip(patterns, lines)] == [True] * 3, lines
    assert len(lines) == 3


def test_console_only_for_a_logger_without_handlers():
    from flowsim.compat.vegasflow.configflow import print_to_console
    bare = logging.getLogger("flowsim-test-vegasflow-bare")
    print_to_console(bare, "3")
    assert bare.level == logging.DEBUG
    assert [type(h) for h in bare.handlers] == [logging.StreamHandler]
    assert bare.handlers[0].formatter._fmt == "[%(levelname)s] (%(name)s) %(message)s"
    print_to_console(bare, None)
    assert len(bare.handlers) == 1 and bare.level == logging.DEBUG
    bare.handlers.clear()
    print_to_console(bare, "9")             # not a VegasFlow level: information
    assert bare.level == logging.INFO
    bare.handlers.clear()


def test_importing_the_compat_layer_leaves_the_root_logger_alone():
    import flowsim.compat.vegasflow  # noqa: F401
    assert not any(getattr(h, "formatter", None) and "(%(name)s)" in h.formatter._fmt
                   for h in logging.getLogger().handlers)


def _eager_product(xarr, weight=None):
    """An integrand that needs eager tensors, as VegasFlow passes with compilable=False."""
    assert weight is not None
    return np.prod(xarr.numpy(), axis=1)


def test_integrand_not_compilable_gets_eager_tensors():
    integrator = VegasFlow(2, 4_000, verbose=False)
    integrator.set_seed(5)
    integrator.compile(_eager_product, compilable=False)
    value, error = integrator.run_integration(2)
    assert abs(value - 0.25) < 4 * error


def test_the_fallback_gives_the_bits_of_a_kernel_built_without_xla():
    import flowsim
    runs = [flowsim.integrate(_through_python, 2, 5_000, 2, seed=11, algorithm="vegas",
                              **opts) for opts in ({}, {"jit_compile": False})]
    assert runs[0].value == runs[1].value and runs[0].error == runs[1].error
    assert abs(runs[0].value - 0.25) < 4 * runs[0].error


def test_set_distribute_names_flowsim_s_backends():
    with pytest.raises(NotImplementedError, match=r"set_distribute \(Dask\) is not provided"
                       r".*backend='joblib'.*parallel_config\(backend='dask'\)"):
        VegasFlow(2, 1_000).set_distribute(object())
