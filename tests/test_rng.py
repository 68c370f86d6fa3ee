"""The counter-based generators of flowsim.core.rng: Philox4x32-10 against the
Random123 known answers and a pure-Python reference, its documented counter
layout (iteration, block, position, stream), and streams that never overlap."""
import numpy as np
import pytest
from helpers import Points

import flowsim
from flowsim.core import rng
from flowsim.core.lazy_tf import tf

M0, M1 = 0xD2511F53, 0xCD9E8D57
W0, W1 = 0x9E3779B9, 0xBB67AE85
MASK = 0xFFFFFFFF

#: Random123's kat_vectors for philox4x32_10: (counter, key, output).
KAT = [
    ((0, 0, 0, 0), (0, 0), (0x6627E8D5, 0xE169C58D, 0xBC57AC4C, 0x9B00DBD8)),
    ((MASK,) * 4, (MASK,) * 2, (0x408F276D, 0x41C83B0E, 0xA20BC7C6, 0x6D5451FD)),
    ((0x243F6A88, 0x85A308D3, 0x13198A2E, 0x03707344), (0xA4093822, 0x299F31D0),
     (0xD16CFE09, 0x94FDCCEB, 0x5001E420, 0x24126EA1)),
]


def philox_ref(counter, key, rounds=10):
    """Philox4x32 in plain Python integers, written from the Random123 paper."""
    c0, c1, c2, c3 = counter
    k0, k1 = key
    for r in range(rounds):
        if r:
            k0, k1 = (k0 + W0) & MASK, (k1 + W1) & MASK
        p0, p1 = M0 * c0, M1 * c2
        c0, c1, c2, c3 = ((p1 >> 32) ^ c1 ^ k0, p1 & MASK, (p0 >> 32) ^ c3 ^ k1, p0 & MASK)
    return c0, c1, c2, c3


def uniform_ref(key, n, stream=0, dtype="float64"):
    """rng.uniform(..., algorithm="philox4x32") as its docstring defines it."""
    seed, word = (int(np.int64(v).view(np.uint64)) for v in key)
    groups = (n + 1) // 2
    out = []
    for half in (0, 1):
        for j in range(groups):
            x = philox_ref((j, word & MASK, word >> 32, stream), (seed & MASK, seed >> 32))
            z = (x[2 * half] << 32) | x[2 * half + 1]
            out.append(z)
    z = np.array(out[:n], dtype=np.uint64)
    if dtype == "float32":
        return (z >> np.uint64(40)).astype(np.float32) * np.float32(2.0 ** -24)
    return (z >> np.uint64(11)).astype(np.float64) * 2.0 ** -53


def u64(v):
    return tf().constant(np.uint64(v), tf().uint64)


@pytest.mark.parametrize("counter, key, want", KAT)
def test_philox4x32_10_matches_the_random123_known_answers(counter, key, want):
    assert philox_ref(counter, key) == want
    got = rng.philox4x32([u64(c) for c in counter], [u64(k) for k in key])
    assert tuple(int(w.numpy()) for w in got) == want


@pytest.mark.parametrize("jit", [False, True])
def test_philox4x32_in_tf_matches_the_python_reference_on_many_counters(jit):
    t = tf()
    gen = np.random.default_rng(5)
    counters = gen.integers(0, 2**32, size=(4, 300), dtype=np.uint64)
    counters[:, :4] = [[0] * 4, [MASK] * 4, [1, 0, 0, MASK], [MASK, 0, MASK, 0]]
    keys = [int(k) for k in gen.integers(0, 2**32, size=2, dtype=np.uint64)]

    def fn(c):
        return t.stack(rng.philox4x32([c[i] for i in range(4)], [u64(k) for k in keys]))
    if jit:
        fn = t.function(fn, jit_compile=True)
    got = fn(t.constant(counters)).numpy()
    for j in range(counters.shape[1]):
        want = philox_ref([int(c) for c in counters[:, j]], keys)
        assert tuple(int(w) for w in got[:, j]) == want, j


@pytest.mark.parametrize("dtype", ["float64", "float32"])
@pytest.mark.parametrize("n, stream", [(1, 0), (7, 0), (64 * 3, 2), (10, 2**32 - 1)])
def test_philox4x32_uniforms_follow_the_documented_counter_layout(dtype, n, stream):
    """Counter (j, block, iteration, stream), key = seed, two words per number."""
    t = tf()
    key = (2**62 + 12345, (7 << 32) + 3)
    want = uniform_ref(key, n, stream, dtype)
    for jit in (False, True):
        def fn(k):
            return rng.uniform(k, [n], getattr(t, dtype), stream=stream, algorithm="philox4x32")
        if jit:
            fn = t.function(fn, jit_compile=True)
        got = fn(t.constant(key, t.int64)).numpy()
        assert got.dtype == np.dtype(dtype)
        assert got.tobytes() == want.tobytes(), jit
    assert want.min() >= 0.0 and want.max() < 1.0


def test_philox4x32_float32_numbers_are_the_float64_numbers_truncated():
    key = (3, (1 << 32) + 1)
    u64_ = uniform_ref(key, 101)
    u32_ = uniform_ref(key, 101, dtype="float32")
    assert np.all(u32_.astype(np.float64) <= u64_)
    assert np.all(u64_ - u32_ < 2.0 ** -24)


def test_philox4x32_counters_of_distinct_blocks_iterations_streams_are_distinct():
    """Never overlapping: every (seed, iteration, block, stream, j) is its own Philox input,
    so no two of these draws share a counter (and share no number, by chance or not)."""
    t = tf()
    n = 256
    draws = {}
    for seed in (0, 1, 2**32):
        for it in (0, 1):
            for block in (0, 1, 2**32 - 1):
                for stream in (0, 1):
                    key = t.constant([seed, (it << 32) + block], t.int64)
                    u = rng.uniform(key, [n], t.float64, stream=stream, algorithm="philox4x32")
                    draws[(seed, it, block, stream)] = u.numpy()
    values = np.concatenate(list(draws.values()))
    assert len(np.unique(values)) == len(values)


def test_philox4x32_rejects_streams_beyond_its_counter_word():
    t = tf()
    with pytest.raises(ValueError, match=r"stream must be in \[0, 2\*\*32\)"):
        rng.uniform(t.constant([1, 2], t.int64), [4], t.float64, stream=2**32,
                    algorithm="philox4x32")


def test_philox4x32_uniforms_are_uniform():
    """Mean and variance of 2**18 doubles within 5 standard errors (false failure < 1e-6)."""
    t = tf()
    u = rng.uniform(t.constant([9, 4], t.int64), [2**18], t.float64,
                    algorithm="philox4x32").numpy()
    n = u.size
    assert abs(u.mean() - 0.5) < 5 * np.sqrt(1 / 12 / n)
    assert abs(u.var() - 1 / 12) < 5 * np.sqrt(1 / 180 / n)
    counts = np.histogram(u, bins=64, range=(0, 1))[0]
    chi2 = ((counts - n / 64) ** 2 / (n / 64)).sum()
    assert chi2 < 140        # 63 degrees of freedom: P(chi2 > 140) ~ 1e-7


@pytest.mark.parametrize("dtype, jit", [("float64", True), ("float64", False),
                                        ("float32", True)])
def test_flow_with_philox4x32_draws_block_b_of_iteration_i_from_its_counter(dtype, jit):
    bs, dim, n, seed = 64, 3, 3 * 64 - 10, 2**40 + 3
    flows = [flowsim.Flow(Points(dim, bs), n, seed=seed, block_size=bs, rng="philox4x32",
                          dtype=dtype, jit_compile=jit, events_limit=lim, quiet=True)
             for lim in (bs, 3 * bs)]
    for it in (0, 5):
        rows = [f.run_blocks(it) for f in flows]
        assert rows[0].tobytes() == rows[1].tobytes()
        for b in range(3):
            want = uniform_ref((seed, (it << 32) + b), bs * dim, dtype=dtype)
            want = want.astype(np.float64).reshape(bs, dim)
            if b == 2:
                want[n - 2 * bs:] = 0.0
            assert rows[0][b].tobytes() == want.ravel().tobytes(), (it, b)


def test_philox4x32_integrates_and_differs_from_splitmix():
    from flowsim.targets import double_gaussian, double_gaussian_exact
    runs = {r: flowsim.Flow(flowsim.Plain(double_gaussian, 4), 20_000, seed=3, rng=r,
                            quiet=True).run(3) for r in ("splitmix", "philox4x32")}
    exact = double_gaussian_exact(4)
    for res in runs.values():
        assert abs(res.value - exact) < 5 * res.error
    assert runs["splitmix"].value != runs["philox4x32"].value


@pytest.mark.parametrize("algorithm", ["splitmix", "philox", "philox4x32"])
def test_loop_steps_draw_fresh_reproducible_numbers(algorithm):
    """``step=`` (market and rollout loops): every step its own numbers, the same on
    every call; splitmix's step 0 is the stream without ``step``."""
    t = tf()
    key = t.constant([5, (2 << 32) + 7], t.int64)
    draw = [rng.uniform(key, [64], t.float64, algorithm=algorithm, step=s).numpy()
            for s in range(4)]
    again = rng.uniform(key, [64], t.float64, algorithm=algorithm, step=t.constant(2)).numpy()
    assert np.array_equal(draw[2], again)
    assert len({d.tobytes() for d in draw}) == 4
    if algorithm == "splitmix":
        assert np.array_equal(draw[0], rng.uniform(key, [64], t.float64,
                                                   algorithm=algorithm).numpy())
    steps = [rng.uniform_step(key, t.constant(s), [64], t.float64,
                              algorithm=algorithm).numpy() for s in range(3)]
    assert len({d.tobytes() for d in steps}) == 3


# -- XLA's vector width: the same numbers, computed 8 (not 4) doubles at a time -----
def test_xla_is_asked_for_512_bit_vectors_only_where_avx512_exists_and_unset():
    from flowsim.core.lazy_tf import VECTOR_WIDTH_FLAG, xla_flags
    assert xla_flags(None, {"avx2", "avx512f"}) == VECTOR_WIDTH_FLAG
    dump = "--xla_dump_to=/tmp/d"
    assert xla_flags(dump, {"avx512f"}) == f"{dump} {VECTOR_WIDTH_FLAG}"
    assert xla_flags("--xla_cpu_prefer_vector_width=256", {"avx512f"}) == \
        "--xla_cpu_prefer_vector_width=256"
    assert xla_flags("--xla_dump_to=/tmp/d", {"avx2"}) == "--xla_dump_to=/tmp/d"


_ROWS = """
import hashlib, flowsim
from flowsim.targets import double_gaussian
for cls, dtype in ((flowsim.Plain, "float32"), (flowsim.Vegas, "float64")):
    flow = flowsim.Flow(cls(double_gaussian, 8), 3 * 4096, seed=5, block_size=4096, dtype=dtype,
                        quiet=True)
    flow.run(1)
    print(hashlib.sha256(flow.run_blocks(1).tobytes()).hexdigest())
"""


def test_block_rows_are_the_same_bits_with_256_and_512_bit_vectors():
    """Two processes, one asking XLA for 256-bit vectors and one left to flowsim's default
    (512 on an AVX-512 CPU): the same rows for Plain (float32) and Vegas (float64)."""
    import os
    import subprocess
    import sys
    out = {}
    for width in ("256", None):
        env = dict(os.environ)
        env.pop("XLA_FLAGS", None)
        if width:
            env["XLA_FLAGS"] = f"--xla_cpu_prefer_vector_width={width}"
        run = subprocess.run([sys.executable, "-c", _ROWS], env=env, capture_output=True,
                             text=True, timeout=600)
        assert run.returncode == 0, run.stderr[-2000:]
        out[width] = run.stdout.split()
    assert len(out["256"]) == 2 and out["256"] == out[None]


# -- core.sums.block_sum: one value per event takes the direct reshape ----------------
def test_block_sum_of_one_value_per_event_is_the_two_stage_tree():
    """``[n]`` and ``[n, 1]`` go straight to ``[n/64, 64]``: without XLA the same bits as
    the transposed form several values per event take; with XLA, its own order, close."""
    from flowsim.core.sums import block_sum
    t = tf()
    x = np.random.default_rng(4).random((64 * 1009, 1)) * 1e3

    def transposed(v):
        return t.reduce_sum(t.reduce_sum(t.reshape(t.transpose(v), [1, -1, 64]), -1), -1)

    want = transposed(t.constant(x)).numpy()
    for shape in ([-1], [-1, 1]):
        got = block_sum(t.reshape(t.constant(x), shape)).numpy()
        assert got.shape == tuple(s for s in shape if s != -1)
        assert got.reshape(1).tobytes() == want.tobytes()
    xla = t.function(block_sum, jit_compile=True)(t.constant(x)).numpy()
    assert xla == pytest.approx(want, rel=1e-13)
    two = np.repeat(x, 2, axis=1)
    assert block_sum(t.constant(two)).numpy().tobytes() == np.repeat(want, 2).tobytes()
