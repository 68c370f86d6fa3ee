"""Every bad input gets a clear error naming the argument and the value."""
import os

import numpy as np
import pytest

import flowsim
from flowsim.core.lazy_tf import tf
from flowsim.testing import GENZ

f = GENZ["gaussian"].f


@pytest.fixture(scope="module")
def sim():
    return flowsim.Plain(f, 2)


def run(integrand, dim=2, **kw):
    return flowsim.Flow(flowsim.Plain(integrand, dim), 1000, seed=1, block_size=128,
                        jit_compile=False, quiet=True, **kw).run(1)


@pytest.mark.parametrize("value, error, message", [
    (0, ValueError, "n_events must be >= 1, got 0"),
    (-5, ValueError, "n_events must be >= 1, got -5"),
    (1e6, TypeError, "n_events must be an integer, got the float 1000000.0; write 1000000"),
    (2.5, TypeError, "n_events must be an integer, got 2.5"),
    ("100", TypeError, "n_events must be an integer, got '100'"),
    (True, TypeError, "n_events must be an integer, got True"),
    (None, TypeError, "n_events must be an integer, got None"),
])
def test_bad_n_events(sim, value, error, message):
    with pytest.raises(error, match=message):
        flowsim.Flow(sim, value)
    with pytest.raises(error, match=message):
        flowsim.integrate(f, 2, value, 1)


@pytest.mark.parametrize("value, error, message", [
    (0, ValueError, "dim must be >= 1, got 0"),
    (-1, ValueError, "dim must be >= 1, got -1"),
    (2.0, TypeError, "dim must be an integer, got the float 2.0; write 2"),
    ("2", TypeError, "dim must be an integer, got '2'"),
])
def test_bad_dim(value, error, message):
    with pytest.raises(error, match=message):
        flowsim.Plain(f, value)
    with pytest.raises(error, match=message):
        flowsim.integrate(f, value, 1000, 1)


@pytest.mark.parametrize("value, error, message", [
    (0, ValueError, "n_iter must be >= 1, got 0"),
    (-3, ValueError, "n_iter must be >= 1, got -3"),
    (2.5, TypeError, "n_iter must be an integer, got 2.5"),
    (3.0, TypeError, "n_iter must be an integer, got the float 3.0; write 3"),
])
def test_bad_n_iter(sim, value, error, message):
    flow = flowsim.Flow(sim, 1000, seed=1, quiet=True)
    with pytest.raises(error, match=message):
        flow.run(value)


def test_bad_skip(sim):
    flow = flowsim.Flow(sim, 1000, seed=1, quiet=True)
    with pytest.raises(ValueError, match=r"skip \(2\) must be smaller than n_iter \(2\)"):
        flow.run(2, skip=2)
    with pytest.raises(ValueError, match="skip must be >= 0, got -1"):
        flow.run(2, skip=-1)


@pytest.mark.parametrize("limits, message", [
    ([[0, 1], [0, 1], [0, 1]], r"limits must have shape \[dim, 2\] = \[2, 2\] \(or be one "
                               r"\(low, high\) pair\), got shape \[3, 2\]"),
    ([0, 1, 2], r"limits must have shape \[dim, 2\] = \[2, 2\].*got shape \[3\]"),
    ([[0, 1], [1, 1]], r"limits: low must be < high in every dimension; dimension 1 has "
                       r"low=1\.0 >= high=1\.0"),
    ([[2, 1], [0, 1]], r"dimension 0 has low=2\.0 >= high=1\.0"),
    ((1, 0), r"dimension 0 has low=1\.0 >= high=0\.0"),
    ([[0, np.nan], [0, 1]], r"limits must be finite, got \[\[0\.0, nan\], \[0\.0, 1\.0\]\]"),
    ("abc", r"limits must be numbers shaped \[dim, 2\], got 'abc'"),
    ([[0, 1], [0]], r"limits must be numbers shaped \[dim, 2\]"),
])
def test_bad_limits(limits, message):
    with pytest.raises(ValueError, match=message):
        flowsim.Plain(f, 2, limits=limits)
    with pytest.raises(ValueError, match=message):
        flowsim.integrate(f, 2, 1000, 1, limits=limits)


def test_infinite_limits_name_the_change_of_variables():
    with pytest.raises(ValueError, match=r"limits must be finite, got \[\[0\.0, inf\], \[0\.0, "
                                         r"1\.0\]\]; for infinite limits call flowsim\.integrate "
                                         r"\(it changes variables\) or wrap the integrand: f, "
                                         r"limits = flowsim\.unbounded\(f, limits\)"):
        flowsim.Plain(f, 2, limits=[[0, np.inf], [0, 1]])
    for limits, d in (([[0, 1], [np.inf, np.inf]], 1), ([[-np.inf, -np.inf], [0, 1]], 0)):
        with pytest.raises(ValueError, match=rf"limits: dimension {d} is \[.*\]; an infinite "
                                             r"limit must be -inf below or \+inf above"):
            flowsim.integrate(f, 2, 1000, 1, limits=limits)


@pytest.mark.parametrize("integrand, error, message", [
    (lambda x: x[:, :, None], ValueError,
     r"integrand must return shape \[n\] or \[n, k\] for x of shape \[n, 2\], "
     r"got \(None, 2, 1\)"),
    (lambda x: x[1:, 0], ValueError,
     r"integrand must return one value per point: expected shape \[128\], got \[127\]"),
    (lambda x: tf().concat([x, x], axis=0), ValueError,
     r"expected shape \[128, 2\], got \[256, 2\]"),
    (lambda x: tf().cast(x[:, 0], tf().float32), TypeError,
     r"integrand must return float64 values for x of dtype float64 \(expected \[n\] or "
     r"\[n, k\] float64\), got float32"),
    (lambda x: tf().cast(x[:, 0] * 10, tf().int32), TypeError,
     r"must return float64 values .* got int32"),
    (lambda x: (x[:, 0], x[:, 1]), TypeError,
     r"integrand must return one tensor of shape \[n\] or \[n, k\], got tuple"),
    (lambda x: np.sum(x.numpy(), axis=1), TypeError,
     r"integrand must be TensorFlow-traceable on x of shape \[n, 2\]: tracing it failed "
     r"with AttributeError"),
])
def test_bad_integrand_found_at_first_trace(integrand, error, message):
    with pytest.raises(error, match=message):
        run(integrand)


@pytest.mark.parametrize("integrand", [
    lambda x: 1.0, lambda x: tf().constant(1.0), lambda x: tf().reduce_sum(x, axis=[0, 1])])
def test_scalar_integrand_is_named_as_such(integrand):
    with pytest.raises(ValueError, match=r"integrand returns a scalar, expected shape \[n\]: one "
                                         r"value per point of x \[n, 2\]"):
        run(integrand)


class TwoArgs(Exception):
    def __init__(self, a, b):
        super().__init__(f"{a} and {b}")


def raise_boom(x):
    raise ZeroDivisionError("boom")


def raise_message(x):
    raise ValueError("my message")


def divide_by_zero(x):
    return x[:, 0] / (1 / 0)


def raise_two_args(x):
    raise TwoArgs(1, 2)


def raise_in_kernel_only(x):        # the probe traces [None, dim], the kernel [block_size, dim]
    if x.shape[0] is not None:
        raise KeyError("only in the kernel")
    return x[:, 0]


@pytest.mark.parametrize("jit", [False, True])
@pytest.mark.parametrize("integrand, error, message", [
    (raise_boom, ZeroDivisionError, "boom"), (raise_message, ValueError, "my message"),
    (divide_by_zero, ZeroDivisionError, "division by zero"), (raise_two_args, TwoArgs, "1 and 2"),
    (raise_in_kernel_only, KeyError, "'only in the kernel'")])
def test_integrand_exceptions_keep_their_type_and_message(integrand, error, message, jit):
    for sim in (flowsim.Plain, flowsim.Vegas):
        flow = flowsim.Flow(sim(integrand, 2), 1000, seed=1, block_size=128, jit_compile=jit,
                            quiet=True)
        with pytest.raises(error) as info:
            flow.run(1)
        assert type(info.value) is error and str(info.value) == message
        assert info.value.__notes__[0] in (      # the context, as a note
            f"(raised by the integrand {integrand.__name__} while flowsim traced it on x of "
            f"shape [n, 2])", f"(raised while flowsim traced the {sim.__name__} kernel)")


def test_integrand_ignoring_dtype_is_caught_under_float32():
    def f64(x):
        return tf().cast(x[:, 0], tf().float64)
    assert run(f64).value > 0                      # fine in float64
    with pytest.raises(TypeError, match=r"integrand must return float32 values for x of "
                                        r"dtype float32 .* got float64"):
        run(f64, dtype="float32")


def test_float32_only_integrand_works_in_float32():
    def f32(x):
        return x[:, 0] * tf().constant(2.0, tf().float32)
    r = run(f32, dtype="float32")
    assert abs(r.value - 1.0) < 5 * r.error
    with pytest.raises(TypeError, match="float32 that does not match type float64"):
        run(f32)


def test_integrand_not_callable():
    with pytest.raises(TypeError, match="integrand must be callable, got 3"):
        flowsim.Plain(3, 2)
    with pytest.raises(TypeError, match=r"simulation must be a flowsim Simulation \(e\.g\. "
                                        r"flowsim\.Plain\), got function"):
        flowsim.Flow(f.__func__, 100)


def nan_everywhere(x):
    return x[:, 0] / 0.0 * 0.0


def test_nan_integrand_raises_with_iteration_and_block():
    with pytest.raises(FloatingPointError,
                       match=r"Plain: the integrand gave 1000 NaN/Inf value\(s\) in iteration 1,"
                             r" first in block 0 \(events 0\.\.127\); pass nonfinite='drop'"):
        run(nan_everywhere)
    last = flowsim.Flow(flowsim.Plain(nan_everywhere, 2), 100, seed=1, block_size=128,
                        jit_compile=False, quiet=True)
    with pytest.raises(FloatingPointError, match=r"gave 100 NaN/Inf .* first in block 0 "
                                                 r"\(events 0\.\.99\)"):
        last.run(1)
    r = run(nan_everywhere, nonfinite="drop")
    assert r.iterations[0]["nonfinite"] == 1000 and r.value == 0.0


@pytest.mark.parametrize("device, error, message", [
    ("GPU:7", ValueError, r"unknown device 'GPU:7'; this machine has CPU:0"),
    ("TPU:0", ValueError, r"unknown device 'TPU:0'; this machine has"),
    ("CPU:5", ValueError, r"unknown device 'CPU:5'"),
    ("cpu0", ValueError, r"device must look like 'CPU:0' or 'GPU:1', got 'cpu0'"),
    (0, TypeError, r"device must be a string like 'CPU:0' or 'GPU:1', got 0"),
])
def test_unknown_device(sim, device, error, message):
    with pytest.raises(error, match=message):
        flowsim.Flow(sim, 1000, device=device)


def test_device_names_are_normalised(sim):
    assert flowsim.Flow(sim, 1000, device="cpu:0").device == "CPU:0"
    assert flowsim.Flow(sim, 1000, device="/device:CPU:0").devices() == ["CPU:0"]


@pytest.mark.parametrize("seed, error, message", [
    (-1, ValueError, r"seed must be in \[0, 2\*\*63\), got -1"),
    (2**63, ValueError, r"seed must be in \[0, 2\*\*63\), got 9223372036854775808"),
    (1.0, TypeError, r"seed must be an integer, got 1\.0"),
    ("7", TypeError, r"seed must be an integer, got '7'"),
    (True, TypeError, r"seed must be an integer, got True"),
])
def test_bad_seed(sim, seed, error, message):
    with pytest.raises(error, match=message):
        flowsim.Flow(sim, 1000, seed=seed)


def test_largest_seed_and_numpy_seed_work(sim):
    r = flowsim.Flow(sim, 1000, seed=2**63 - 1, quiet=True).run(1)
    assert r.meta["seed"] == 2**63 - 1
    assert flowsim.Flow(sim, 1000, seed=np.int64(5)).seed == 5


@pytest.mark.parametrize("dtype", ["float16", "int32", "double", 5])
def test_bad_dtype(sim, dtype):
    with pytest.raises(ValueError, match=rf"dtype must be one of \('float64', 'float32'\), "
                                         rf"got {dtype!r}"):
        flowsim.Flow(sim, 1000, dtype=dtype)


def test_dtype_objects_mean_their_names(sim):
    for dtype in (np.float32, np.dtype("float32"), tf().float32, "float32"):
        assert flowsim.Flow(sim, 1000, dtype=dtype).spec.dtype == "float32"
    assert flowsim.Flow(sim, 1000, dtype=tf().float64).config()["dtype"] == "float64"


def test_events_limit_and_block_size(sim):
    with pytest.raises(ValueError, match=r"events_limit \(100\) must be at least block_size "
                                         r"\(1024\); pass a smaller block_size="):
        flowsim.Flow(sim, 1000, events_limit=100)
    with pytest.raises(ValueError, match="events_limit must be >= 1, got 0"):
        flowsim.Flow(sim, 1000, events_limit=0)
    with pytest.raises(TypeError, match="events_limit must be an integer, got the float"):
        flowsim.Flow(sim, 1000, events_limit=1e6)
    with pytest.raises(ValueError, match="block_size must be a multiple of 64, got 100"):
        flowsim.Flow(sim, 1000, block_size=100)
    with pytest.raises(ValueError, match="block_size must be >= 1, got 0"):
        flowsim.Flow(sim, 1000, block_size=0)


def test_other_options(sim):
    with pytest.raises(ValueError, match=r"nonfinite must be one of \('raise', 'drop'\), "
                                         r"got 'ignore'"):
        flowsim.Flow(sim, 1000, nonfinite="ignore")
    with pytest.raises(ValueError, match=r"rng must be one of \('splitmix', 'philox', "
                                         r"'philox4x32'\), got 'mt'"):
        flowsim.Flow(sim, 1000, rng="mt")
    with pytest.raises(ValueError, match=r"unknown algorithm 'magic'; choose one of 'plain'"):
        flowsim.integrate(f, 2, 1000, 1, algorithm="magic")
    with pytest.raises(ValueError, match=r"unknown backend 'cloud'; choose None, one of "
                                         r"'flow'.*or 'module:factory'"):
        flowsim.integrate(f, 2, 1000, 1, backend="cloud")


def test_bad_histograms():
    obs = GENZ["polynomial"].f
    with pytest.raises(ValueError, match="bins must be >= 1, got 0"):
        flowsim.Histogram(obs, 0, (0, 1))
    with pytest.raises(ValueError, match=r"range must have low < high, got \(1, 0\)"):
        flowsim.Histogram(obs, 3, (1, 0))
    with pytest.raises(TypeError, match="observable must be callable, got 'x'"):
        flowsim.Histogram("x", 3, (0, 1))
    with pytest.raises(TypeError, match="histograms must be flowsim.Histogram objects"):
        flowsim.Plain(f, 2, histograms=[obs])
    h = flowsim.Histogram(obs, 3, (0, 1), name="h")
    with pytest.raises(ValueError, match=r"histogram names must be unique, got \['h', 'h'\]"):
        flowsim.Plain(f, 2, histograms=[h, h])
    bad = flowsim.Histogram(obs, 3, (0, 1), name="p", component=2)
    with pytest.raises(ValueError, match=r"histogram 'p' is weighted by integrand component 2, "
                                         r"but the integrand returns 1 component\(s\)"):
        flowsim.Flow(flowsim.Plain(f, 2, histograms=[bad]), 1000, seed=1, quiet=True).run(1)


def test_histogram_too_big_for_memory_is_refused_before_compiling():
    from flowsim.algorithms.histogram import available_memory, check_memory
    from flowsim.core.kernel import trace_counts
    h = flowsim.Histogram(GENZ["polynomial"].f, 10**9, (0, 1), name="h")
    flow = flowsim.Flow(flowsim.Plain(f, 2, histograms=[h]), 1000, seed=1, block_size=128,
                        quiet=True)
    traces = sum(trace_counts.values())
    with pytest.raises(ValueError, match=r"Plain: the accumulators need 14\.9 GiB per block row "
                                         r"\(histogram 'h' has 1,000,000,000 bins x 2 "
                                         r"accumulators; 2,000,000,004 float64\) x 8 blocks = "
                                         r"119\.2 GiB, but only .* of memory is free; use fewer "
                                         r"histogram bins"):
        flow.run(1)
    assert flow.timeline == [] and sum(trace_counts.values()) == traces   # nothing compiled
    assert 0 < available_memory() < 2**60
    small = flowsim.Plain(f, 2, histograms=[flowsim.Histogram(GENZ["polynomial"].f, 100, (0, 1))])
    width = 2 * 100 + 4                       # hist, hist2; sum, m2, count, nonfinite
    check_memory(small, 10, available=8 * width * 10)          # fits exactly
    with pytest.raises(ValueError, match=r"1\.6 KiB per block row .* x 11 blocks = 17\.5 KiB, "
                                         r"but only 15\.9 KiB"):
        check_memory(small, 11, available=8 * width * 10)


def test_checkpoint_in_missing_directory_fails_before_any_work(sim, tmp_path):
    flow = flowsim.Flow(sim, 1000, seed=1, quiet=True)
    missing = tmp_path / "no" / "such" / "x.ckpt"
    with pytest.raises(ValueError, match=r"checkpoint .*x\.ckpt': directory .*such' does "
                                         r"not exist"):
        flow.run(2, checkpoint=missing)
    assert flow.timeline == []                    # nothing ran
    with pytest.raises(ValueError, match="is a directory, not a file"):
        flow.run(2, checkpoint=tmp_path)


def test_never_a_half_written_checkpoint(sim, tmp_path, monkeypatch):
    """A write that dies half way leaves the previous checkpoint and no debris."""
    path = tmp_path / "run.ckpt"
    flowsim.Flow(sim, 1000, seed=1, quiet=True).run(1, checkpoint=path)
    saved = path.read_bytes()
    real_fsync = os.fsync

    def dying_fsync(fd):
        real_fsync(fd)
        raise KeyboardInterrupt("killed while writing the checkpoint")

    monkeypatch.setattr(os, "fsync", dying_fsync)
    with pytest.raises(KeyboardInterrupt):
        flowsim.Flow(sim, 1000, seed=1, quiet=True).run(2, checkpoint=path)
    monkeypatch.undo()
    assert path.read_bytes() == saved
    assert os.listdir(tmp_path) == ["run.ckpt"]
    resumed = flowsim.Flow(sim, 1000, seed=1, quiet=True).run(2, checkpoint=path)
    whole = flowsim.Flow(sim, 1000, seed=1, quiet=True).run(2)
    assert resumed.value == whole.value
