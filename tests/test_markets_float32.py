"""Market ensembles in float32: the kernel computes in float32, the statistics stay
within a few standard errors of float64's.

float32 draws the same uniforms to 24 bits and rounds prices, returns and order
prices to float32, which flips some agents' decisions: the markets are other draws
of the same model, so float32 is compared with float64 statistically, not bit for bit.
"""
import collections

import numpy as np
import pytest

from flowsim import Flow
from flowsim.testing import cases_markets
from flowsim.testing.cases_markets import dtype_differences

#: Largest float32 - float64 difference allowed, in float64 standard errors.  Were the
#: float32 markets independent draws of the same model, the difference of two means
#: would have sqrt(2) standard errors, and a statistic would pass 6 of them by chance
#: with probability P(|N(0, 1)| > 6 / sqrt(2)) = 2.2e-5; over the 2 x 19 statistics
#: checked at most 38 times that, 8.4e-4: the false-failure rate of a correct float32
#: kernel on another seed, an upper bound (float32 shares float64's random numbers to
#: 24 bits, so its markets are far closer than independent ones: docs/markets.rst).
MAX_Z = 6.0
MARKETS = 256


@pytest.mark.parametrize("case", ["markets_small", "markets_events"])
def test_float32_statistics_are_within_a_few_standard_errors_of_float64(case):
    found = dtype_differences(case, MARKETS, seed=3)
    assert len(found) == 19
    far = {name: round(z, 2) for name, (_, _, z) in found.items() if abs(z) > MAX_Z}
    assert not far, f"{case}: float32 - float64 beyond {MAX_Z} standard errors: {far}"
    # the statistics without spread (NaN z) must agree exactly
    flat = {name: (v64, v32) for name, (v64, v32, z) in found.items()
            if np.isnan(z) and v64 != v32}
    assert not flat, f"{case}: statistics without spread differ: {flat}"
    # float32 ran: some statistic moved
    assert any(v64 != v32 for v64, v32, _ in found.values()), case


def _op_dtypes(sim, dtype, markets=64):
    """``Counter((dtype name, op type))`` of the real-valued ops of the traced market
    kernel (:func:`flowsim.markets.kernel.run`), its loop bodies included."""
    import tensorflow as tf

    from flowsim.markets.kernel import run
    state = {k: tf.constant(v) for k, v in sim.state().items()}
    fn = tf.function(lambda key: run(sim.structure, key, markets, state, dtype),
                     autograph=False)
    graph = fn.get_concrete_function(tf.TensorSpec([2], tf.int64)).graph.as_graph_def()
    nodes = list(graph.node) + [n for f in graph.library.function for n in f.node_def]
    reals = {tf.float32.as_datatype_enum: "float32", tf.float64.as_datatype_enum: "float64"}
    found = collections.Counter()
    for node in nodes:
        for attr in ("T", "dtype", "DstT"):
            if attr in node.attr and node.attr[attr].type in reals:
                found[reals[node.attr[attr].type], node.op] += 1
    return found


@pytest.mark.parametrize("case", ["markets_small", "markets_events", "markets_hifreq"])
def test_float32_kernel_has_no_float64_work(case):
    """In float32 the only float64 tensors of the step are the state's constants it
    casts once (distribution arguments, the markets' columns); in float64 no op
    computes in float32 (``tf.repeat`` keeps float32 constants of its own)."""
    sim = cases_markets.case_ensemble(case)
    ops32 = _op_dtypes(sim, "float32")
    assert {op for dtype, op in ops32 if dtype == "float64"} == {"Const"}, ops32
    assert ops32["float32", "Exp"] > 0 and ops32["float32", "Log"] > 0
    ops64 = _op_dtypes(sim, "float64")
    assert {op for dtype, op in ops64 if dtype == "float32"} <= {"Const"}, ops64


def test_float32_results_differ_from_float64_and_repeat_bit_for_bit():
    def run(dtype):
        r = Flow(cases_markets.small(), n_events=128, seed=5, block_size=64, quiet=True,
                 dtype=dtype).run(1)
        return np.asarray(r.value).tobytes() + np.asarray(r.error).tobytes()
    f32 = run("float32")
    assert f32 == run("float32")
    assert f32 != run("float64")
