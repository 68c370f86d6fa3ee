"""flowsim.sweep: parameter rows instead of random events, gathered in row order."""
import numpy as np
import pytest

import flowsim
from flowsim.core.lazy_tf import tf


def affine(params, data):
    return params[:, 0] * 2.0 + params[:, 1]


def nonlinear(params, data):
    t = tf()
    return t.sin(params[:, 0]) * t.exp(-params[:, 1]) + t.sqrt(params[:, 0] + 1.0)


@pytest.fixture(scope="module")
def grid():
    rng = np.random.default_rng(1)
    return rng.uniform(0, 3, size=(1000, 2))


def test_rows_in_order(grid):
    out = flowsim.sweep(affine, grid)
    assert out.shape == (1000,) and out.dtype == np.float64
    np.testing.assert_array_equal(out, grid[:, 0] * 2.0 + grid[:, 1])
    # reversed params give reversed outputs: order is by row, not by completion
    np.testing.assert_array_equal(flowsim.sweep(affine, grid[::-1]), out[::-1])


def test_bits_identical_across_events_limit(grid):
    ref = flowsim.sweep(nonlinear, grid, block_size=64)
    expect = np.sin(grid[:, 0]) * np.exp(-grid[:, 1]) + np.sqrt(grid[:, 0] + 1.0)
    np.testing.assert_allclose(ref, expect, rtol=1e-14)
    for limit in (64, 192, 640, 1024, 10**6):
        out = flowsim.sweep(nonlinear, grid, events_limit=limit, block_size=64)
        assert out.tobytes() == ref.tobytes(), limit
    # without block_size the limit also picks the block (a multiple of 64 below it)
    for limit in (100, 333, 5000):
        out = flowsim.sweep(nonlinear, grid, events_limit=limit)
        assert out.tobytes() == ref.tobytes(), limit


def test_dict_and_vector_outputs(grid):
    def kernel(p, data):
        t = tf()
        return {"sum": p[:, 0] + p[:, 1], "pair": t.stack([p[:, 0], -p[:, 1]], axis=1),
                "count": t.ones_like(p[:, 0])}

    out = flowsim.sweep(kernel, grid, events_limit=256, block_size=128)
    assert set(out) == {"sum", "pair", "count"}
    np.testing.assert_array_equal(out["sum"], grid[:, 0] + grid[:, 1])
    np.testing.assert_array_equal(out["pair"], np.stack([grid[:, 0], -grid[:, 1]], axis=1))
    assert out["pair"].shape == (1000, 2) and out["count"].sum() == 1000   # padding dropped


def test_data_argument_array_and_dict():
    prices = np.cumsum(np.random.default_rng(2).normal(size=300)) + 100.0
    windows = np.arange(1, 41)

    def mean_of_last(p, data):
        t = tf()
        w = t.cast(p[:, 0], t.int32)
        idx = t.range(t.shape(data)[0])
        mask = t.cast(idx[None, :] >= t.shape(data)[0] - w[:, None], data.dtype)
        return t.reduce_sum(mask * data[None, :], axis=1) / t.cast(w, data.dtype)

    out = flowsim.sweep(mean_of_last, windows, data=prices)
    np.testing.assert_allclose(out, [prices[-w:].mean() for w in windows], rtol=1e-12)

    def scaled(p, data):
        return p[:, 0] * data["scale"] + tf().cast(data["offset"][0], p.dtype)

    out = flowsim.sweep(scaled, np.arange(10.0), data={"scale": 2.5,
                                                       "offset": np.array([3], np.int32)})
    np.testing.assert_array_equal(out, np.arange(10.0) * 2.5 + 3)


def test_integer_params_stay_integers_and_float32():
    seen = []

    def kernel(p, data):
        seen.append(p.dtype)
        return tf().cast(p[:, 0] * 3, tf().float64)

    out = flowsim.sweep(kernel, np.arange(70, dtype=np.int64))
    np.testing.assert_array_equal(out, np.arange(70) * 3.0)
    assert set(seen) == {tf().int64}
    half = flowsim.sweep(lambda p, d: p[:, 0] / 3.0, np.arange(70.0), dtype="float32")
    # float32 arithmetic (XLA may divide by multiplying with 1/3: last-bit differences)
    assert half.dtype == np.float64 and np.array_equal(half, half.astype(np.float32))
    np.testing.assert_allclose(half, np.arange(70) / 3.0, rtol=2.5e-7)
    assert not np.array_equal(half, np.arange(70) / 3.0)


@pytest.mark.parametrize("params, error, message", [
    (np.zeros((0, 2)), ValueError, r"params must be a non-empty array of shape \[rows, "
                                   r"n_params\], got shape \[0, 2\]"),
    (np.zeros((2, 2, 2)), ValueError, r"got shape \[2, 2, 2\]"),
    (np.array([["a", "b"]]), TypeError, r"params must be numeric, got dtype <U1"),
    (np.array([True, False]), TypeError, r"params must be numeric, got dtype bool"),
])
def test_bad_params(params, error, message):
    with pytest.raises(error, match=message):
        flowsim.sweep(affine, params)


@pytest.mark.parametrize("kernel, error, message", [
    (lambda p, d: p[1:, 0], ValueError,
     r"kernel output 'value' must have one row per parameter row \(128\), got 127"),
    (lambda p, d: tf().reduce_sum(p), ValueError,
     r"kernel output 'value' must have shape \[rows\] or \[rows, k\], got \(\)"),
    (lambda p, d: {"x": p[:, :, None]}, ValueError,
     r"kernel output 'x' must have shape \[rows\] or \[rows, k\], got \(10, 2, 1\)"),
    (lambda p, d: p.numpy(), TypeError,
     r"kernel must be TensorFlow-traceable as kernel\(params_chunk, data\): tracing failed"),
    (5, TypeError, r"kernel must be callable, got 5"),
])
def test_bad_kernels(kernel, error, message):
    with pytest.raises(error, match=message):
        flowsim.sweep(kernel, np.ones((10, 2)), block_size=128)


def test_bad_limits_and_blocks():
    with pytest.raises(ValueError, match="events_limit must be >= 1, got 0"):
        flowsim.sweep(affine, np.ones((10, 2)), events_limit=0)
    with pytest.raises(ValueError, match="block_size must be a multiple of 64, got 100"):
        flowsim.sweep(affine, np.ones((10, 2)), block_size=100)
    with pytest.raises(ValueError, match=r"events_limit \(64\) must be at least block_size "
                                         r"\(128\)"):
        flowsim.sweep(affine, np.ones((10, 2)), block_size=128, events_limit=64)
    with pytest.raises(ValueError, match="unknown backend 'gpu'"):
        flowsim.sweep(affine, np.ones((10, 2)), backend="gpu")
