"""flowsim.core.fastmath.log against numpy over the whole range: within 2 ulp for every finite
positive input (subnormals included), numpy's special values elsewhere, with and without
XLA; float32 against numpy's float64 log rounded to float32."""
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import flowsim.core.fastmath as fm
from flowsim.core.lazy_tf import tf

SPECIAL = [0.0, -0.0, -1.0, -5e-324, np.inf, -np.inf, np.nan, 1.0]


def ulps(got, want):
    """|got - want| in units of the last place of ``want`` (its own dtype)."""
    want = np.asarray(want)
    scale = np.spacing(np.abs(want)).astype(np.float64)
    return np.abs(got.astype(np.float64) - want.astype(np.float64)) / scale


def reference(x):
    with np.errstate(divide="ignore", invalid="ignore"):
        if x.dtype == np.float32:
            return np.log(x.astype(np.float64)).astype(np.float32)
        return np.log(x)


def check(x, jit, max_ulp=2.0):
    t = tf()
    fn = t.function(fm.log, jit_compile=True) if jit else fm.log
    got = fn(t.constant(x)).numpy()
    want = reference(x)
    assert got.dtype == x.dtype
    finite = np.isfinite(want)
    bad = ulps(got[finite], want[finite]) > max_ulp
    assert not bad.any(), (x[finite][bad][:5], got[finite][bad][:5], want[finite][bad][:5])
    # -inf, inf and nan exactly where numpy has them
    assert np.array_equal(got[~finite], want[~finite], equal_nan=True)


def sweep64():
    """Every binade from the smallest subnormal to the largest double, densely near 1."""
    gen = np.random.default_rng(1)
    bits = gen.integers(1, 0x7FF0000000000000, size=400_000, dtype=np.int64)
    edges = np.array([1, 2, 3, 0x000FFFFFFFFFFFFF, 0x0010000000000000, 0x0010000000000001,
                      0x7FEFFFFFFFFFFFFF], dtype=np.int64)
    near1 = 1.0 + np.arange(-20_000, 20_000) * 2.0 ** -52
    return np.concatenate([bits.view(np.float64), edges.view(np.float64), near1,
                           np.linspace(0.5, 2.0, 200_001), np.geomspace(1e-308, 1e308, 100_001),
                           SPECIAL])


@pytest.mark.parametrize("jit", [False, True])
def test_log_float64_within_2_ulp_of_numpy_over_the_whole_range(jit):
    check(sweep64(), jit)


@pytest.mark.parametrize("jit", [False, True])
def test_log_float32_within_2_ulp_over_every_binade(jit):
    gen = np.random.default_rng(2)
    bits = gen.integers(1, 0x7F800000, size=400_000, dtype=np.int32)
    x = np.concatenate([bits.view(np.float32), np.linspace(0.5, 2, 100_001, dtype=np.float32),
                        np.array([1e-45, 1.1754942e-38, 1.1754944e-38, 3.4028235e38],
                                 dtype=np.float32),
                        np.array(SPECIAL, dtype=np.float32)])
    check(x, jit)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.floats(allow_nan=True, allow_infinity=True, allow_subnormal=True),
                min_size=1, max_size=64))
def test_log_float64_matches_numpy_on_any_doubles(values):
    check(np.array(values, dtype=np.float64), jit=False)


@settings(max_examples=100, deadline=None)
@given(st.lists(st.floats(width=32, allow_subnormal=True), min_size=1, max_size=64))
def test_log_float32_matches_numpy_on_any_floats(values):
    check(np.array(values, dtype=np.float32), jit=False)


def test_log_with_and_without_xla_differ_by_at_most_1_ulp():
    """XLA may contract multiply-adds into FMAs: the last bit may differ, no more."""
    t = tf()
    x = sweep64()
    eager = fm.log(t.constant(x)).numpy()
    xla = t.function(fm.log, jit_compile=True)(t.constant(x)).numpy()
    finite = np.isfinite(eager)
    assert ulps(xla[finite], eager[finite]).max() <= 1.0
    assert np.array_equal(xla[~finite], eager[~finite], equal_nan=True)


def test_log_refuses_other_dtypes():
    with pytest.raises(TypeError, match="float64 or float32, got int32"):
        fm.log(tf().constant([1, 2]))


def test_importing_fastmath_loads_no_tensorflow(python):
    r = python("import sys, flowsim.core.fastmath; print('tensorflow' in sys.modules)")
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "False"


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_is_finite_gives_tf_is_finite_booleans_with_and_without_xla(dtype):
    t = tf()
    info = np.finfo(dtype)
    x = np.array([0.0, -0.0, 1.0, -1.0, info.max, -info.max, info.tiny, info.smallest_subnormal,
                  np.inf, -np.inf, np.nan, -np.nan], dtype=dtype)
    want = t.math.is_finite(t.constant(x)).numpy()
    assert want.tolist() == [True] * 8 + [False] * 4
    for fn in (fm.is_finite, t.function(fm.is_finite, jit_compile=True)):
        got = fn(t.constant(x)).numpy()
        assert got.dtype == np.bool_ and np.array_equal(got, want)
