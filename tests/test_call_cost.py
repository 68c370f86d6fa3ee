"""A call costs what its events cost: flowsim.integrate reuses the compiled kernel of an
earlier call with the same integrand (code, closure, globals it reads), parameter
names, algorithm, options, dimension, limits and events; parameter values are the
kernel's arguments.  Counted in traces, not seconds (benchmarks/loop.py times it)."""
import types

import numpy as np
import pytest

import flowsim
from flowsim.core import kernel
from flowsim.core.lazy_tf import tf

SCALE = 1.0


def bump(x, a):
    return tf().exp(-tf().reduce_sum((x - a) ** 2, axis=1) / 0.1)


def scaled(x):
    return SCALE * tf().reduce_sum(x, axis=1)


def calls_scaled(x):
    return scaled(x)


def traces():
    return sum(kernel.trace_counts.values())


def bits(result):
    return [np.asarray(r[k]).tobytes() for r in result.iterations for k in ("value", "error")]


def run(f, a, seed=3, **kw):
    return flowsim.integrate(f, 4, 20_000, 3, seed=seed, params={"a": a}, quiet=True, **kw)


def test_a_new_parameter_value_runs_the_same_kernel_and_gives_a_fresh_kernels_bits():
    run(bump, 0.3)
    before = traces()
    second = run(bump, 0.45)
    assert traces() == before                       # no new trace, no new compile
    twin = types.FunctionType(bump.__code__, bump.__globals__, "bump_twin")
    fresh = run(twin, 0.45)                         # another function: its own kernel
    assert traces() > before
    assert bits(second) == bits(fresh)
    assert second.gradient["a"][0] != run(bump, 0.3).gradient["a"][0]


def test_vegasplus_calls_share_their_kernel_too():
    run(bump, 0.3, algorithm="vegasplus")
    before = traces()
    run(bump, 0.6, algorithm="vegasplus", seed=4)
    assert traces() == before
    run(bump, 0.6, algorithm="vegasplus", seed=4, dtype="float32")   # another dtype
    assert traces() > before


def test_what_the_integrand_reads_is_never_stale():
    """A global the integrand (or a function it calls) reads, or an array in its
    closure changed in place, gives a new kernel, not the old values."""
    global SCALE
    out = []
    for scale in (1.0, 2.0):
        SCALE = scale
        out.append(flowsim.integrate(calls_scaled, 2, 4096, 1, seed=1, quiet=True).value)
    SCALE = 1.0
    assert out[1] == 2 * out[0]
    weights = np.array([1.0])

    def weighted(x):
        return weights[0] * tf().reduce_sum(x, axis=1)

    first = flowsim.integrate(weighted, 2, 4096, 1, seed=1, quiet=True).value
    weights[0] = 5.0
    again = flowsim.integrate(weighted, 2, 4096, 1, seed=1, quiet=True).value
    assert again == pytest.approx(5 * first, rel=1e-14)


class Scaled:
    """A callable object: its attributes are read when traced."""

    def __init__(self, a):
        self.a = a

    def __call__(self, x):
        return self.a * tf().reduce_sum(x, axis=1)


def test_a_callable_objects_changed_attribute_is_never_stale():
    f = Scaled(1.0)
    first = flowsim.integrate(f, 2, 4096, 1, seed=1, quiet=True).value
    f.a = 3.0
    again = flowsim.integrate(f, 2, 4096, 1, seed=1, quiet=True).value
    assert again == pytest.approx(3 * first, rel=1e-14)
