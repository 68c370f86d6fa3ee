"""The engine on one device: bit-identity, seeds, dtypes, histograms, NaN/Inf,
tracing, XLA, checkpoints, Result and the progress bar."""
import concurrent.futures
import json
import os
import sys

import numpy as np
import pytest
from helpers import ROOT, Points, run_python

import flowsim
from flowsim.core import kernel
from flowsim.core.lazy_tf import tf
from flowsim.testing import GENZ

BS = 256                 # block size of most tests: 3000 events = 12 blocks, the last partial
N = 3000
LIMITS = [BS, 3 * BS, 5 * BS, 12 * BS, 10**6]   # 1 block per chunk ... everything in one chunk


G = np.uint64(0x9E3779B97F4A7C15)


def mix64(z):
    """SplitMix64's finaliser in numpy (uint64 arithmetic wraps)."""
    z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return z ^ (z >> np.uint64(31))


def splitmix_bits(key, n, stream=0):
    """The ``n`` 64-bit outputs of block ``key`` = (seed, word), per flowsim.core.rng's docs."""
    with np.errstate(over="ignore"):
        k0, k1 = (np.array([v], dtype=np.int64).view(np.uint64) for v in key)
        h = mix64(k0 + G)
        h = mix64((h ^ k1) + G)
        k = mix64(h + np.uint64((stream + 1) * int(G) % 2**64))
        return mix64(k + np.arange(1, n + 1, dtype=np.uint64) * G)


def regen(seed, iteration, block, bs, dim, rng="splitmix", dtype="float64"):
    """The uniforms of one block, drawn here independently of the engine."""
    key = (seed, (iteration << 32) + block)
    if rng == "philox":
        return tf().random.stateless_uniform([bs, dim], seed=tf().constant(key, tf().int64),
                                             dtype=dtype, alg="philox").numpy()
    z = splitmix_bits(key, bs * dim)
    if dtype == "float32":
        return ((z >> np.uint64(40)).astype(np.float32) * np.float32(2.0 ** -24)).reshape(bs, dim)
    return ((z >> np.uint64(11)).astype(np.float64) * 2.0 ** -53).reshape(bs, dim)


def all_points(seed, iteration, n, bs, dim, rng="splitmix"):
    nb = -(-n // bs)
    return np.concatenate([regen(seed, iteration, b, bs, dim, rng) for b in range(nb)])[:n]


def column(sim, name):
    """Index of accumulator ``name`` (a scalar or first element) in a block row."""
    return next(a for acc, _, a, _ in kernel.layout(sim)[0] if acc == name)


def sum_obs(x):
    return tf().reduce_sum(x, axis=1)


def first_coord(x):
    return x[:, 0]


def bilinear(x):
    return 1.0 + x[:, 0] * x[:, 1]


@pytest.fixture(scope="module")
def vector_sim():
    """A vector integrand with two histograms: one trace serves the module."""
    return flowsim.Plain(GENZ["vector"].f, 3, histograms=[
        flowsim.Histogram(sum_obs, 12, (0.0, 3.0)),
        flowsim.Histogram(first_coord, 5, (0.2, 0.7), component=1)])


def fingerprint(result):
    """Every float the run produced, as bytes."""
    parts = [np.asarray(result.value), np.asarray(result.error), np.asarray(result.chi2_dof)]
    for r in result.iterations:
        parts += [np.asarray(r["value"]), np.asarray(r["error"])]
        for h in r.get("histograms", {}).values():
            parts += [h["values"], h["errors"]]
    return b"".join(np.ascontiguousarray(p, dtype=np.float64).tobytes() for p in parts)


# -- bit-identity ------------------------------------------------------------------
def test_bits_identical_for_every_events_limit(vector_sim):
    results = {lim: flowsim.Flow(vector_sim, N, seed=42, events_limit=lim, block_size=BS,
                                 quiet=True).run(3) for lim in LIMITS}
    chunks = {lim: sum(1 for c in r.timeline if c["iteration"] == 1)
              for lim, r in results.items()}
    assert chunks == {BS: 12, 3 * BS: 4, 5 * BS: 3, 12 * BS: 1, 10**6: 1}
    ref = fingerprint(results[BS])
    for lim, r in results.items():
        assert fingerprint(r) == ref, f"events_limit={lim} changed the bits"
    # raw block rows too, and a second run of the same Flow repeats itself
    flow = flowsim.Flow(vector_sim, N, seed=42, events_limit=3 * BS, block_size=BS, quiet=True)
    rows = flow.run_blocks(1)
    assert rows.shape[0] == 12
    assert rows.tobytes() == flowsim.Flow(vector_sim, N, seed=42, events_limit=BS,
                                          block_size=BS).run_blocks(1).tobytes()
    assert fingerprint(flow.run(3)) == ref


THREADS_CODE = r"""
import json, sys
import numpy as np
import tensorflow as tf
n = int(sys.argv[1])
tf.config.threading.set_intra_op_parallelism_threads(n)
tf.config.threading.set_inter_op_parallelism_threads(n)
import flowsim
from flowsim.testing import GENZ
out = {}
for name, jit in (("gaussian", False), ("vector", True)):
    sim = flowsim.Plain(GENZ[name].f, 5)
    r = flowsim.Flow(sim, 2 * 65536, seed=11, jit_compile=jit, quiet=True).run(1)  # 2 blocks
    assert r.meta["block_size"] == 65536
    out[name] = np.asarray([r.value, r.error], dtype=np.float64).tobytes().hex()
out["threads"] = tf.config.threading.get_intra_op_parallelism_threads()
print("RESULT" + json.dumps(out))
"""


def test_bits_identical_with_1_and_2_intra_op_threads():
    """flowsim.core.sums.block_sum's claim: the bits do not depend on TF's thread count."""
    with concurrent.futures.ThreadPoolExecutor(2) as pool:
        runs = list(pool.map(lambda n: run_python(THREADS_CODE, timeout=240, args=[str(n)]),
                             [1, 2]))
    outs = []
    for p in runs:
        assert p.returncode == 0, p.stderr[-3000:]
        line = [ln for ln in p.stdout.splitlines() if ln.startswith("RESULT")][-1]
        outs.append(json.loads(line[len("RESULT"):]))
    assert [o["threads"] for o in outs] == [1, 2]
    assert outs[0]["gaussian"] == outs[1]["gaussian"]
    assert outs[0]["vector"] == outs[1]["vector"]


@pytest.mark.parametrize("rng, dtype, jit", [("splitmix", "float64", True),
                                             ("splitmix", "float64", False),
                                             ("splitmix", "float32", True),
                                             ("philox", "float64", False)])
def test_block_inputs_are_the_documented_counter_based_stream(rng, dtype, jit):
    """Block b of iteration i draws from key [seed, (i << 32) + b] only (flowsim.core.rng)."""
    bs, dim, n, seed = 64, 3, 3 * 64 - 10, 2**40 + 3
    flow = flowsim.Flow(Points(dim, bs), n, seed=seed, block_size=bs, rng=rng, dtype=dtype,
                        jit_compile=jit, quiet=True)
    for it in (0, 5):
        rows = flow.run_blocks(it)
        for b in range(3):
            want = regen(seed, it, b, bs, dim, rng, dtype).astype(np.float64)
            if b == 2:
                want[n - 2 * bs:] = 0.0          # padding events are masked
            assert rows[b].tobytes() == want.ravel().tobytes(), (it, b)
    assert flow.run(2).value > 0


@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_tiles_draw_the_blocks_own_numbers(dtype):
    """kernel.tile_events: tile i of T events draws the block's events i*T.., the last
    tile running past the block (1000 events = 7 tiles of 143, one event dropped)."""
    t = tf()
    seed, word, size, dim = 2**40 + 3, (5 << 32) + 2, 1000, 3
    fn = t.function(lambda k: kernel.tile_events(
        lambda u, state: t.cast(u, t.float64), k, size, dim, getattr(t, dtype), {},
        tile_numbers=450), jit_compile=True)
    got = fn(t.constant([seed, word], t.int64)).numpy()
    want = regen(seed, 5, 2, size, dim, dtype=dtype).astype(np.float64)
    assert got.shape == (size, dim) and got.tobytes() == want.tobytes()


def test_plain_evaluates_blocks_in_tiles_when_it_can(monkeypatch):
    """Plain splits its block into per-event values and a reduction; the tiled kernel
    gives the rows of the whole-block one (to the last bits or so: XLA may contract a
    multiply-add differently in the two), for a scalar and a vector integrand.  Vegas
    (its own block) and histograms (they need the points) keep the whole block."""
    assert flowsim.Plain(GENZ["gaussian"].f, 5).block_parts() is not None
    assert flowsim.Vegas(GENZ["gaussian"].f, 5).block_parts() is None
    hist = flowsim.Histogram(lambda x: x[:, 0], 4, (0, 1))
    assert flowsim.Plain(GENZ["gaussian"].f, 5, histograms=[hist]).block_parts() is None
    for name in ("gaussian", "vector"):
        rows = []
        for numbers in (600, 1 << 62):         # 3 tiles of 86 events per block, or none
            monkeypatch.setattr(kernel, "TILE_NUMBERS", numbers)
            flow = flowsim.Flow(flowsim.Plain(GENZ[name].f, 5), N, seed=3, block_size=BS,
                                quiet=True)
            rows.append(flow.run_blocks(1))
        np.testing.assert_allclose(rows[0], rows[1], rtol=1e-13, atol=0)


def test_philox_under_xla_is_xlas_philox_and_chunk_independent():
    """XLA's stateless Philox draws another stream than TF's kernel (flow.py says so)."""
    bs, dim, n, seed = 64, 2, 4 * 64, 12
    runs = [flowsim.Flow(Points(dim, bs), n, seed=seed, block_size=bs, rng="philox",
                         events_limit=lim, quiet=True).run_blocks(1) for lim in (bs, 4 * bs)]
    assert runs[0].tobytes() == runs[1].tobytes()
    t = tf()
    xla = t.function(lambda k: t.random.stateless_uniform([bs, dim], seed=k, dtype=t.float64,
                                                          alg="philox"), jit_compile=True)
    want = xla(t.constant([seed, (1 << 32) + 3], t.int64)).numpy()
    assert runs[0][3].tobytes() == want.ravel().tobytes()
    assert runs[0][3].tobytes() != regen(seed, 1, 3, bs, dim, "philox").ravel().tobytes()


# -- seeds -------------------------------------------------------------------------
def test_same_seed_same_bits_new_simulation_object():
    def run():
        sim = flowsim.Plain(GENZ["oscillatory"].f, 2)
        return flowsim.Flow(sim, 1000, seed=9, block_size=128, jit_compile=False,
                            quiet=True).run(2)
    assert fingerprint(run()) == fingerprint(run())


def test_seeds_give_independent_streams():
    sim = flowsim.Plain(first_coord, 2)
    # per-block sums of 64 uniforms for adjacent seeds and adjacent iterations
    n_blocks = 400
    sums = {}
    for seed in range(5):
        flow = flowsim.Flow(sim, 64 * n_blocks, seed=seed, block_size=64, quiet=True)
        for it in range(2):
            rows = flow.run_blocks(it)
            sums[seed, it] = rows[:, column(sim, "sum")]
    assert len({s.tobytes() for s in sums.values()}) == len(sums)
    pairs = [((s, 0), (s + 1, 0)) for s in range(4)] + [((s, 0), (s, 1)) for s in range(5)] \
        + [((s, 1), (s + 1, 0)) for s in range(4)]
    for a, b in pairs:
        r = np.corrcoef(sums[a], sums[b])[0, 1]
        assert abs(r) < 4 / np.sqrt(n_blocks), (a, b, r)
    # the block sums themselves look like sums of 64 independent uniforms
    allsums = np.concatenate(list(sums.values()))
    assert abs(allsums.mean() - 32.0) < 4 * np.sqrt(64 / 12 / allsums.size)
    assert abs(allsums.var() / (64 / 12) - 1) < 4 * np.sqrt(2 / allsums.size)


def test_per_iteration_values_uncorrelated_across_adjacent_seeds():
    sim = flowsim.Plain(GENZ["gaussian"].f, 3)
    n_seeds, n_iter = 25, 8
    vals = np.array([[r["value"] for r in flowsim.Flow(sim, 512, seed=1000 + s, block_size=64,
                                                       quiet=True).run(n_iter).iterations]
                     for s in range(n_seeds)])
    assert len(set(vals.ravel().tolist())) == vals.size       # all different
    x, y = vals[:-1].ravel(), vals[1:].ravel()
    r = np.corrcoef(x, y)[0, 1]
    assert abs(r) < 4 / np.sqrt(x.size), r
    # and they scatter as much as their errors say (a shared stream would not)
    exact = GENZ["gaussian"].exact(3)
    assert abs(vals.std() / np.mean(np.abs(vals - exact)) - np.sqrt(np.pi / 2)) < 0.2


def test_seed_none_draws_one_and_reports_it():
    sim = flowsim.Plain(first_coord, 1)
    a = flowsim.Flow(sim, 256, block_size=64, quiet=True)
    b = flowsim.Flow(sim, 256, block_size=64, quiet=True)
    assert a.seed != b.seed and 0 <= a.seed < 2**63
    ra = a.run(1)
    assert ra.meta["seed"] == a.seed
    again = flowsim.Flow(sim, 256, seed=ra.meta["seed"], block_size=64, quiet=True).run(1)
    assert again.value == ra.value


# -- dtypes, vectors ----------------------------------------------------------------
def test_float32_runs_in_float32():
    seen = []

    def f(x):
        seen.append(x.dtype)
        return GENZ["gaussian"].f(x)

    sim = flowsim.Plain(f, 4)
    r32 = flowsim.Flow(sim, 20000, seed=3, dtype="float32", quiet=True).run(2)
    assert tf().float32 in seen
    exact = GENZ["gaussian"].exact(4)
    assert abs(r32.value - exact) < 5 * r32.error
    r64 = flowsim.Flow(sim, 20000, seed=3, dtype="float64", quiet=True).run(2)
    assert r32.value != r64.value and abs(r32.value - r64.value) < 1e-4 * abs(exact)
    assert r32.meta["dtype"] == "float32"


def test_vector_integrand(vector_sim):
    r = flowsim.Flow(vector_sim, 20000, seed=8, quiet=True).run(2)
    exact = GENZ["vector"].exact(3)
    assert r.value.shape == r.error.shape == r.chi2_dof.shape == (3,)
    assert np.all(np.abs(r.value - exact) < 5 * r.error)
    assert r.iterations[0]["value"].shape == (3,)
    # each component has the error of the same function integrated alone
    alone = flowsim.Flow(flowsim.Plain(GENZ["polynomial"].f, 3), 20000, seed=8,
                         quiet=True).run(2)
    assert alone.error == pytest.approx(r.error[1], rel=1e-12)
    assert alone.value == pytest.approx(r.value[1], rel=1e-12)


# -- histograms ---------------------------------------------------------------------
def test_histograms_sum_to_integral_and_match_numpy():
    seed, n, bs, n_iter = 21, 3000, 128, 2
    full = flowsim.Histogram(sum_obs, 8, (0.0, 2.0))
    part = flowsim.Histogram(first_coord, 5, (0.2, 0.7))
    sim = flowsim.Plain(bilinear, 2, histograms=[full, part])
    r = flowsim.Flow(sim, n, seed=seed, block_size=bs, events_limit=3 * bs, quiet=True).run(n_iter)
    for it, rec in enumerate(r.iterations):
        x = all_points(seed, it, n, bs, 2)
        w = 1.0 + x[:, 0] * x[:, 1]
        h = rec["histograms"]
        # range covering every event: the bins add up to the integral
        assert h["sum_obs"]["values"].sum() == pytest.approx(rec["value"], rel=1e-13)
        # partial range: the bins add up to the in-range part of the integral
        inside = (x[:, 0] >= 0.2) & (x[:, 0] < 0.7)
        assert h["first_coord"]["values"].sum() == pytest.approx(w[inside].sum() / n, rel=1e-13)
        for hist, obs in ((full, x.sum(axis=1)), (part, x[:, 0])):
            counts, edges = np.histogram(obs, hist.bins, hist.range, weights=w)
            counts2, _ = np.histogram(obs, hist.bins, hist.range, weights=w * w)
            got = h[hist.name]
            np.testing.assert_allclose(got["values"], counts / n, rtol=1e-12, atol=0)
            var = np.maximum(counts2 / n - (counts / n) ** 2, 0) / (n - 1)
            np.testing.assert_allclose(got["errors"], np.sqrt(var), rtol=1e-9)
            np.testing.assert_array_equal(got["edges"], edges)
    assert set(r.histograms) == {"sum_obs", "first_coord"}
    assert r.histograms["sum_obs"]["values"].shape == (8,)
    # combined like the value: pooled, one sample of all iterations' events
    x = np.concatenate([all_points(seed, it, n, bs, 2) for it in range(n_iter)])
    w = 1.0 + x[:, 0] * x[:, 1]
    counts, _ = np.histogram(x.sum(axis=1), 8, (0.0, 2.0), weights=w)
    counts2, _ = np.histogram(x.sum(axis=1), 8, (0.0, 2.0), weights=w * w)
    total = n * n_iter
    np.testing.assert_allclose(r.histograms["sum_obs"]["values"], counts / total, rtol=1e-12)
    var = (counts2 / total - (counts / total) ** 2) / (total - 1)
    np.testing.assert_allclose(r.histograms["sum_obs"]["errors"], np.sqrt(var), rtol=1e-8)


def test_histograms_race_free_and_chunk_independent(vector_sim):
    # Accumulators, not tf.Variable writes: the same bits for every chunking.
    ref = None
    for lim in (BS, 5 * BS, 10**6):
        r = flowsim.Flow(vector_sim, N, seed=5, events_limit=lim, block_size=BS,
                         quiet=True).run(1)
        h = r.iterations[0]["histograms"]
        bits = b"".join(h[k]["values"].tobytes() for k in sorted(h))
        ref = ref or bits
        assert bits == ref
    # weighted by the chosen component (1: polynomial), and all events land in range
    x = all_points(5, 0, N, BS, 3)
    poly = GENZ["polynomial"].f(tf().constant(x)).numpy()
    inside = (x[:, 0] >= 0.2) & (x[:, 0] < 0.7)
    assert h["first_coord"]["values"].sum() == pytest.approx(poly[inside].sum() / N, rel=1e-12)
    assert h["sum_obs"]["values"].sum() == pytest.approx(r.iterations[0]["value"][0], rel=1e-12)


# -- NaN / Inf ----------------------------------------------------------------------
THRESHOLD = 1 / 6000


def rare_nan(x):
    return tf().where(x[:, 0] < THRESHOLD, tf().constant(np.nan, x.dtype), 1.0 + x[:, 1])


def test_nonfinite_raise_names_iteration_and_block():
    seed, n, bs = 10, 2560, 128
    first = next((it, b) for it in range(3) for b in range(n // bs)
                 if (regen(seed, it, b, bs, 2)[:, 0] < THRESHOLD).any())
    assert first[0] >= 1        # the first iterations are clean: the message must say which
    flow = flowsim.Flow(flowsim.Plain(rare_nan, 2), n, seed=seed, block_size=bs, quiet=True)
    it, b = first
    with pytest.raises(FloatingPointError,
                       match=rf"gave 1 NaN/Inf value\(s\) in iteration {it + 1}, first in "
                             rf"block {b} \(events {b * bs}\.\.{(b + 1) * bs - 1}\); "
                             rf"pass nonfinite='drop'"):
        flow.run(3)


def test_nonfinite_drop_counts_and_ignores_padding(tmp_path):
    def nan_and_inf(x):
        t = tf()
        bad = t.where(x[:, 0] < 0.05, t.constant(np.inf, x.dtype), t.constant(np.nan, x.dtype))
        return t.where(x[:, 0] < 0.1, bad, 1.0 + x[:, 1])

    seed, n, bs = 2, 1000, 128              # 8 blocks, 24 padding events in the last one
    sim = flowsim.Plain(nan_and_inf, 2)
    with pytest.warns(flowsim.FlowsimWarning, match=r"NaN/Inf value\(s\) dropped"):
        r = flowsim.Flow(sim, n, seed=seed, block_size=bs, nonfinite="drop", quiet=True).run(3)
    assert r.warnings == [f"{sum(rec['nonfinite'] for rec in r.iterations)} NaN/Inf value(s) "
                          f"dropped (counted as 0) in iteration(s) 1, 2, 3: the value is biased "
                          f"unless they are where the integrand is truly 0"]
    pad_bad = []
    for it, rec in enumerate(r.iterations):
        x = all_points(seed, it, n, bs, 2)
        bad = x[:, 0] < 0.1
        assert rec["nonfinite"] == bad.sum() > 0
        f = np.where(bad, 0.0, 1.0 + x[:, 1])
        assert rec["value"] == pytest.approx(f.mean(), rel=1e-13)
        pad = regen(seed, it, 7, bs, 2)[n - 7 * bs:]
        pad_bad.append(int((pad[:, 0] < 0.1).sum()))
    assert sum(pad_bad) > 0          # padding events drew bad points too: not counted
    assert np.isfinite(r.value) and np.isfinite(r.error)
    assert "nonfinite" in json.loads(r.to_json())["iterations"][0]


# -- tracing ------------------------------------------------------------------------
def test_no_retracing_over_iterations_chunk_sizes_and_event_counts():
    sim = flowsim.Plain(GENZ["continuous"].f, 2)
    key = ("Plain", "CPU:0")
    before = kernel.trace_counts[key]
    for lim in (BS, 3 * BS, 7 * BS, 10**6):
        flowsim.Flow(sim, N, seed=1, events_limit=lim, block_size=BS, quiet=True).run(4)
    for n in (BS, 2000, 5 * BS + 1):
        flowsim.Flow(sim, n, seed=2, events_limit=2 * BS, block_size=BS, quiet=True).run(3)
    # under XLA: the block kernel once, and the loop over a chunk's blocks once (built
    # for the first chunk of more than kernel.DIRECT_BLOCKS blocks)
    assert kernel.trace_counts[key] - before == 2
    assert kernel.cached_kernels(sim) == 1


@pytest.mark.parametrize("algorithm", ["plain", "vegasplus"])
def test_block_by_block_calls_and_the_loop_give_the_same_bits(monkeypatch, algorithm):
    """Under XLA short runs call the block kernel once per block (kernel.DIRECT_BLOCKS);
    the loop over blocks inside one TensorFlow function must give the same bits."""
    def run(**kw):
        sim = flowsim.Plain(GENZ["gaussian"].f, 3) if algorithm == "plain" else \
            flowsim.VegasPlus(GENZ["gaussian"].f, 3)
        return flowsim.Flow(sim, N, seed=4, block_size=BS, quiet=True, **kw).run(3)

    direct = run()
    monkeypatch.setattr(kernel, "DIRECT_BLOCKS", 0)
    for lim in (BS, 5 * BS, 10**6):
        loop = run(events_limit=lim)
        assert np.asarray(loop.value).tobytes() == np.asarray(direct.value).tobytes()
        assert np.asarray(loop.error).tobytes() == np.asarray(direct.error).tobytes()
        assert [r["value"] for r in loop.iterations] == [r["value"] for r in direct.iterations]


@pytest.mark.parametrize("algorithm", ["plain", "vegasplus"])
def test_short_runs_call_blocks_directly_with_the_bits_of_the_loop(monkeypatch, algorithm):
    """Under XLA a run of at most kernel.SHORT_RUN_BLOCKS blocks (and SHORT_ITERATION_BLOCKS
    per iteration) calls the block kernel block by block and never builds the loop; a
    longer run builds it, later short runs use it; every path gives the same bits."""
    import pickle

    sim = (flowsim.Plain if algorithm == "plain" else flowsim.VegasPlus)(
        GENZ["oscillatory"].f, 3)
    sim.trace_key()                 # drawn before the copies, so they share it
    fresh = pickle.dumps(sim)

    def flow(n=1000):       # 4 blocks of 256 per iteration; copies share one kernel
        return flowsim.Flow(pickle.loads(fresh), n, seed=7, block_size=BS, quiet=True)

    key = ("Plain" if algorithm == "plain" else "VegasPlus", "CPU:0")
    kernel._KERNELS.clear()
    before = kernel.trace_counts[key]
    short = flow().run(3)                               # 12 blocks: short
    assert kernel.trace_counts[key] - before == 1       # the block kernel only
    monkeypatch.setattr(kernel, "SHORT_RUN_BLOCKS", 11)
    f = flow()
    f.run(1)                                            # 4 blocks: short, no loop yet
    assert kernel.trace_counts[key] - before == 1
    longer = f.run(2)                                   # 8 blocks <= 11: short
    assert kernel.trace_counts[key] - before == 1
    monkeypatch.setattr(kernel, "SHORT_RUN_BLOCKS", 7)
    f2 = flow()
    f2.run(1)
    loop = f2.run(2)                                    # 8 blocks > 7: builds the loop
    assert kernel.trace_counts[key] - before == 2
    again = flow().run(3)                               # short, but the loop is built
    assert kernel.trace_counts[key] - before == 2
    bits = [r["value"] for r in short.iterations]
    assert [r["value"] for r in again.iterations] == bits
    assert [r["value"] for r in longer.iterations] == bits[1:]
    assert [r["value"] for r in loop.iterations] == bits[1:]
    monkeypatch.setattr(kernel, "SHORT_RUN_BLOCKS", 64)
    wide = flow(n=9 * BS)                               # 9 blocks per iteration: not short
    kernel._KERNELS.clear()
    before = kernel.trace_counts[key]
    wide.run(1)
    assert kernel.trace_counts[key] - before == 2


def test_forced_path_names_the_two_ways_and_restores_the_rules():
    with kernel.forced_path("chunk"):
        assert kernel._takes_chunk_function(1, True)
        with kernel.forced_path("blocks"):
            assert not kernel._takes_chunk_function(5, False)
        assert kernel.FORCED_PATH == "chunk"
    assert kernel.FORCED_PATH is None
    assert kernel._takes_chunk_function(kernel.DIRECT_BLOCKS + 1, False)
    with pytest.raises(ValueError, match="path must be 'blocks' or 'chunk', got 'program'"):
        with kernel.forced_path("program"):
            pass


def _branchy(x):
    """Python ``if`` and ``for`` on tensors: needs AutoGraph."""
    t = tf()
    total = t.zeros_like(x[:, 0])
    for d in t.range(t.shape(x)[1]):
        total += x[:, d]
    if t.reduce_max(total) > 1e9:          # never: the integral of sum(x) is dim / 2
        return -total
    return total


def _branchy_observable(x):
    if tf().reduce_min(x) < -1.0:           # never
        return x[:, 1]
    return x[:, 0]


@pytest.mark.parametrize("algorithm", ["plain", "vegas", "vegasplus"])
def test_integrands_and_observables_with_python_control_flow_on_tensors(algorithm):
    # the engine's own code is traced without AutoGraph; the user's functions keep it
    hist = flowsim.Histogram(_branchy_observable, bins=4, range=(0.0, 1.0))
    r = flowsim.integrate(_branchy, 2, 4000, 2, seed=3, algorithm=algorithm, block_size=BS,
                          quiet=True, algorithm_options={"histograms": [hist]})
    assert r.value == pytest.approx(1.0, abs=5 * r.error)
    assert np.sum(r.histograms["_branchy_observable"]["values"]) == pytest.approx(
        r.value, abs=5 * r.error)


def test_jit_compile_on_and_off_agree():
    sim = flowsim.Plain(GENZ["product_peak"].f, 3)
    plain = flowsim.Flow(sim, 2000, seed=6, block_size=BS, jit_compile=False, quiet=True).run(2)
    xla = flowsim.Flow(sim, 2000, seed=6, block_size=BS, jit_compile=True, quiet=True).run(2)
    assert xla.value == pytest.approx(plain.value, rel=1e-12)
    assert xla.error == pytest.approx(plain.error, rel=1e-9)
    assert kernel.cached_kernels(sim) == 2    # one function per spec
    before = sum(kernel.trace_counts.values())
    for jit in (False, True):
        flowsim.Flow(sim, 1500, seed=7, block_size=BS, events_limit=BS, jit_compile=jit,
                     quiet=True).run(3)
    assert sum(kernel.trace_counts.values()) == before


# -- checkpoints --------------------------------------------------------------------
_SIMS = {}


def make_flow(seed=17, n=N, dim=3, fresh=False, **kw):
    """A Flow of the Gaussian family (one compiled simulation per dim unless fresh)."""
    sim = flowsim.Plain(GENZ["gaussian"].f, dim) if fresh else \
        _SIMS.setdefault(dim, flowsim.Plain(GENZ["gaussian"].f, dim))
    kw.setdefault("quiet", True)
    return flowsim.Flow(sim, n, seed=seed, block_size=BS, **kw)


def test_checkpoint_resume_gives_the_same_bits(tmp_path):
    path = tmp_path / "run.ckpt"
    whole = make_flow().run(5)
    first = make_flow(events_limit=BS).run(2, checkpoint=path)      # "killed" after 2
    assert len(first.iterations) == 2
    resumed = make_flow(events_limit=5 * BS, fresh=True).run(5, checkpoint=path)
    assert fingerprint(resumed) == fingerprint(whole)
    assert [r["iteration"] for r in resumed.iterations] == [1, 2, 3, 4, 5]
    assert resumed.n_events == 5 * N
    # chunks ran only for the 3 new iterations
    assert {c["iteration"] for c in resumed.timeline} == {3, 4, 5}
    assert os.listdir(tmp_path) == ["run.ckpt"]               # no temp files left
    # running again with the same n_iter does no work and gives the same result
    again = make_flow().run(5, checkpoint=path)
    assert fingerprint(again) == fingerprint(whole) and again.timeline == []


def test_checkpoint_resume_with_histograms_vectors_and_skip(tmp_path, vector_sim):
    path = tmp_path / "h.ckpt"

    def flow():
        return flowsim.Flow(vector_sim, N, seed=3, block_size=BS, quiet=True)

    whole = flow().run(4, skip=1)
    flow().run(2, checkpoint=path)
    resumed = flow().run(4, checkpoint=path, skip=1)
    assert fingerprint(resumed) == fingerprint(whole)
    for name, h in whole.histograms.items():
        assert resumed.histograms[name]["values"].tobytes() == h["values"].tobytes()
    rec = resumed.iterations[0]
    assert isinstance(rec["value"], np.ndarray) and rec["value"].shape == (3,)
    assert isinstance(rec["histograms"]["sum_obs"]["values"], np.ndarray)
    # asking for fewer iterations than the checkpoint holds reports the first ones
    short = flow().run(2, checkpoint=path)
    assert len(short.iterations) == 2
    assert fingerprint(short) == fingerprint(flow().run(2))


@pytest.mark.parametrize("change, message", [
    ({"seed": 18}, r"seed: checkpoint has 17, this run has 18"),
    ({"n": 2000}, r"n_events: checkpoint has 3000, this run has 2000"),
    ({"dim": 4}, r"simulation\.dim: checkpoint has 3, this run has 4"),
    ({"dtype": "float32"}, r"dtype: checkpoint has 'float64', this run has 'float32'"),
    ({"rng": "philox"}, r"rng: checkpoint has 'splitmix', this run has 'philox'"),
])
def test_checkpoint_of_another_configuration_is_refused(tmp_path, change, message):
    path = tmp_path / "c.ckpt"
    make_flow().run(1, checkpoint=path)
    saved = path.read_bytes()
    with pytest.raises(ValueError, match=r"was made for another configuration: .*" + message):
        make_flow(**change).run(3, checkpoint=path)
    assert path.read_bytes() == saved


def test_checkpoint_write_is_atomic(tmp_path, monkeypatch):
    path = tmp_path / "a.ckpt"
    make_flow().run(1, checkpoint=path)
    saved = path.read_bytes()

    def half_write(fh, **arrays):
        fh.write(b"PK\x03\x04 half a zip file")
        raise OSError("disk full (simulated)")

    monkeypatch.setattr(np, "savez", half_write)
    with pytest.raises(OSError, match="disk full"):
        make_flow().run(3, checkpoint=path)
    assert path.read_bytes() == saved
    assert os.listdir(tmp_path) == ["a.ckpt"]
    monkeypatch.undo()
    # and the intact checkpoint still resumes to the uninterrupted bits
    assert fingerprint(make_flow().run(3, checkpoint=path)) == fingerprint(make_flow().run(3))


def test_unreadable_checkpoint_is_refused(tmp_path):
    path = tmp_path / "junk.ckpt"
    path.write_bytes(b"not a checkpoint")
    with pytest.raises(ValueError, match="is not a readable flowsim checkpoint"):
        make_flow().run(2, checkpoint=path)
    assert path.read_bytes() == b"not a checkpoint"


# -- Result -------------------------------------------------------------------------
def test_result_to_dict_json_round_trip_and_str(vector_sim):
    r = flowsim.Flow(vector_sim, N, seed=1, block_size=BS, events_limit=4 * BS,
                     quiet=True).run(3)
    d = r.to_dict()
    back = json.loads(r.to_json())
    assert back == json.loads(json.dumps(d))
    assert back["value"] == r.value.tolist() and back["error"] == r.error.tolist()
    assert back["chi2_dof"] == r.chi2_dof.tolist()
    assert [it["value"] for it in back["iterations"]] == [x["value"].tolist()
                                                          for x in r.iterations]
    assert back["n_events"] == 3 * N and back["meta"]["seed"] == 1
    assert back["meta"]["block_size"] == BS and back["meta"]["n_blocks"] == 12
    assert len(back["timeline"]) == 9 and 0 < back["efficiency"] <= 1
    assert back["histograms"]["sum_obs"]["edges"] == np.linspace(0, 3, 13).tolist()
    s = str(r)
    lines = s.splitlines()
    assert lines[0] == "flowsim: Plain on flow (CPU:0), seed 1"
    assert sum(ln.startswith("result[") for ln in lines) == 3
    assert f"result[1] = {r.value[1]:.12g} +/- {r.error[1]:.4g}" in s
    assert "9,000 events in" in lines[-1] and lines[-1].endswith("events/s")
    assert repr(r).startswith("Result(value=array([")

    scalar = flowsim.Flow(flowsim.Plain(first_coord, 1), 1000, seed=2, block_size=128,
                          quiet=True).run(2)
    assert isinstance(scalar.value, float) and isinstance(scalar.chi2_dof, float)
    assert json.loads(scalar.to_json())["value"] == scalar.value
    # one iteration: no chi2/dof (None, JSON null, left out of the table)
    one = flowsim.Flow(flowsim.Plain(first_coord, 1), 1000, seed=2, block_size=128,
                       quiet=True).run(1)
    assert one.chi2_dof is None and one.to_dict()["chi2_dof"] is None
    assert "chi2/dof" not in str(one)

    def refuse(constant):
        raise ValueError(f"non-standard JSON constant {constant}")

    assert json.loads(one.to_json(), parse_constant=refuse)["chi2_dof"] is None
    # one event: its error is unknown (inf in Python, null in strict JSON), never 0
    single = flowsim.Flow(flowsim.Plain(first_coord, 1), 1, seed=2, block_size=64,
                          quiet=True).run(1)
    assert single.error == np.inf
    assert json.loads(single.to_json(), parse_constant=refuse)["error"] is None
    assert f"result = {scalar.value:.12g} +/- {scalar.error:.4g}" in str(scalar)


# -- progress bar -------------------------------------------------------------------
class FakeStderr:
    def __init__(self, tty):
        self.tty = tty

    def isatty(self):
        return self.tty

    def write(self, s):
        return len(s)

    def flush(self):
        pass


@pytest.mark.parametrize("tty, quiet, shown", [(False, False, False), (True, True, False),
                                               (True, False, True)])
def test_progress_bar_only_on_a_terminal(monkeypatch, tty, quiet, shown):
    import tqdm.auto
    bars = []

    class Bar:
        def __init__(self, total, **kw):
            self.total, self.n = total, 0
            bars.append(self)

        def update(self, k):
            self.n += k

        def close(self):
            self.closed = True

    monkeypatch.setattr(tqdm.auto, "tqdm", Bar)
    monkeypatch.setattr(sys, "stderr", FakeStderr(tty))
    flow = make_flow(events_limit=4 * BS, quiet=quiet)
    flow.run(3)
    assert len(bars) == int(shown)
    if shown:
        assert bars[0].total == bars[0].n == 3 * N and bars[0].closed


def test_second_run_continues_the_stream():
    """run(1) then run(3) on one Flow equals the last three iterations of run(4)."""
    import tensorflow as tf

    import flowsim

    def f(x):
        return tf.reduce_sum(x * x, axis=1)

    def make():
        return flowsim.Flow(flowsim.Plain(f, 2), n_events=4096, seed=11, block_size=1024,
                            quiet=True)

    whole = make().run(4)
    flow = make()
    first = flow.run(1)
    rest = flow.run(3)
    assert first.iterations[0]["value"].tobytes() == whole.iterations[0]["value"].tobytes()
    assert [r["iteration"] for r in rest.iterations] == [2, 3, 4]
    assert [np.asarray(r["value"]).tobytes() for r in rest.iterations] == \
        [np.asarray(r["value"]).tobytes() for r in whole.iterations[1:]]


# -- combining iterations ----------------------------------------------------------------
def test_plain_iterations_pool_into_one_sample_of_their_blocks():
    """run(5) at n events = one iteration of 5n events drawn in those blocks
    (their rows concatenated), up to the order of additions."""
    sim = flowsim.Plain(first_coord, 1)
    flow = flowsim.Flow(sim, 1000, seed=4, block_size=128, quiet=True)
    res = flow.run(5)
    again = flowsim.Flow(sim, 1000, seed=4, block_size=128, quiet=True)
    rows = np.concatenate([again.run_blocks(i) for i in range(5)])
    totals = kernel.unpack(sim, sim.combine(rows, 5000))
    one = sim.estimate(totals, 5000)
    assert res.value == pytest.approx(one["value"], rel=1e-13)
    assert res.error == pytest.approx(one["error"], rel=1e-10)
    assert len({r["state_id"] for r in res.iterations}) == 1


def test_plain_combination_is_not_pulled_to_iterations_that_missed_the_peak():
    """The trial's case: 3 iterations of 2e5 on the 8-d double Gaussian, seed 7,
    whose third iteration missed a peak.  Inverse-variance weights gave
    0.5488 +/- 0.0977 (-4.6 sigma); pooled, the result covers the exact value."""
    from flowsim.targets import double_gaussian, double_gaussian_exact
    res = flowsim.Flow(flowsim.Plain(double_gaussian, 8), 200_000, seed=7,
                       quiet=True).run(3)
    exact = double_gaussian_exact(8)
    assert abs(res.value - exact) < 3 * res.error
    values = [r["value"] for r in res.iterations]
    assert res.value == pytest.approx(np.mean(values), rel=1e-12)


def test_inconsistent_iterations_are_warned_about(caplog):
    """chi2/dof above its 99.9 % point logs one warning naming the cure."""
    from flowsim.core.result import Result, warn_if_inconsistent
    recs = [{"iteration": i + 1, "value": v, "error": 0.01, "events": 1000, "seconds": 0.1}
            for i, v in enumerate([1.0, 1.0, 0.5, 1.0])]
    with caplog.at_level("WARNING", logger="flowsim"):
        assert warn_if_inconsistent(Result(recs, 1.0, meta={"simulation": "Vegas"},
                                           inconsistency_advice=flowsim.Vegas.inconsistency_advice))
    assert "disagree" in caplog.text and "VegasPlus" in caplog.text
    caplog.clear()
    with caplog.at_level("WARNING", logger="flowsim"):      # the simulation's advice, or
        assert warn_if_inconsistent(Result(recs, 1.0, meta={"simulation": "Vegas"}))
    assert "skip more warm-up iterations" in caplog.text and "VegasPlus" not in caplog.text
    caplog.clear()
    calm = [dict(r, value=1.0 + 0.01 * d) for r, d in zip(recs, [0.3, -1.0, 0.5, 0.2])]
    with caplog.at_level("WARNING", logger="flowsim"):
        assert not warn_if_inconsistent(Result(calm, 1.0, meta={"simulation": "Vegas"}))
        assert not warn_if_inconsistent(Result(recs[:1], 1.0))
    assert caplog.text == ""


def test_untrusted_result_reaches_an_api_user_as_result_warnings_and_a_user_warning():
    """chi2/dof ~12 does not come back in silence (the logger has a NullHandler)."""
    import logging
    import warnings

    from flowsim.examples import double_gaussian
    assert issubclass(flowsim.FlowsimWarning, UserWarning)
    assert any(isinstance(h, logging.NullHandler) for h in logging.getLogger("flowsim").handlers)
    flow = flowsim.Flow(flowsim.Plain(double_gaussian, dim=8), n_events=200000, seed=5)
    with pytest.warns(flowsim.FlowsimWarning, match=r"disagree \(chi2/dof = 1\d\.\d") as caught:
        res = flow.run(6)
    assert res.chi2_dof > 5 and len(caught) == 1
    assert len(res.warnings) == 1 and "chi2/dof" in res.warnings[0]
    assert f"warning: {res.warnings[0]}" in str(res).splitlines()
    assert json.loads(res.to_json())["warnings"] == res.warnings
    with warnings.catch_warnings():                 # what -W error::flowsim.FlowsimWarning does
        warnings.simplefilter("error", flowsim.FlowsimWarning)
        with pytest.raises(flowsim.FlowsimWarning, match="chi2/dof"):
            flowsim.Flow(flow.simulation, n_events=200000, seed=5).run(6)   # same kernel
    calm = flowsim.Flow(flow.simulation, n_events=200000, seed=5)
    with warnings.catch_warnings():
        warnings.simplefilter("error", flowsim.FlowsimWarning)
        assert calm.run(1).warnings == []           # one iteration: nothing to distrust


def test_warning_filters_on_the_command_line_reach_flowsim_warning(tmp_path):
    """``python -W error::UserWarning`` (Python reads -W before site-packages are on its
    path, so there only built-in categories resolve) and pytest's
    ``-W error::flowsim.FlowsimWarning`` turn it into an error; no TensorFlow loads."""
    import subprocess
    code = "import warnings, flowsim\nwarnings.warn('untrusted', flowsim.FlowsimWarning)\n"
    env = dict(os.environ, PYTHONPATH=ROOT)
    shown = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                           timeout=120, env=env)
    assert shown.returncode == 0 and "FlowsimWarning: untrusted" in shown.stderr
    strict = subprocess.run([sys.executable, "-W", "error::UserWarning", "-c", code],
                            capture_output=True, text=True, timeout=120, env=env)
    assert strict.returncode == 1 and strict.stderr.splitlines()[-1] == \
        "flowsim.FlowsimWarning: untrusted", strict.stderr
    (tmp_path / "test_w.py").write_text("def test_w():\n    " + code.replace("\n", "\n    "))
    under_pytest = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                                   "-W", "error::flowsim.FlowsimWarning", "test_w.py"],
                                  capture_output=True, text=True, timeout=120, env=env,
                                  cwd=tmp_path)
    assert under_pytest.returncode == 1, under_pytest.stdout
    assert "FlowsimWarning: untrusted" in under_pytest.stdout


def test_user_subclass_of_plain_with_python_control_flow_in_block_still_converts():
    """flowsim traces its own Plain kernel without AutoGraph; a user's subclass that
    branches on tensors in Python in its own block is converted, as before."""
    import tensorflow as tf

    from flowsim.core.integrand import autograph_kernel

    class Clipped(flowsim.Plain):
        def block(self, u, valid, state):
            out = super().block(u, valid, state)
            if tf.reduce_any(out["sum"] > 1e9):
                out = dict(out, sum=out["sum"] * 0.0)
            return out

    class Declared(Clipped):
        autograph = False

    def f(x):
        return tf.reduce_sum(x, axis=1)

    assert not autograph_kernel(flowsim.Plain(f, 2))
    assert autograph_kernel(Clipped(f, 2)) and not autograph_kernel(Declared(f, 2))
    for jit in (True, False):
        r = flowsim.Flow(Clipped(f, 2), n_events=10_000, seed=1, quiet=True,
                         jit_compile=jit).run(1)
        assert abs(r.value - 1.0) < 5 * r.error


def _sum_of_squares(x):
    return tf().reduce_sum(x * x, axis=1)


def _branch_on_block_shape(x):
    """A tensor ``if`` only where the batch size is static (the kernel, not the probe)."""
    if x.shape[0] is not None and tf().reduce_max(x) > 2.0:     # never on the unit cube
        return -x[:, 0]
    return x[:, 0]


def test_integrands_without_python_control_flow_on_tensors_skip_autograph(monkeypatch):
    """AutoGraph converts only integrands whose trace without it fails: the others are
    traced as they are (same operations), and Python control flow on tensors, even on
    one shape only, still works."""
    from flowsim.core import integrand

    integrand._enabled_context()
    converted = []
    ctx, real = integrand._CONTEXT
    monkeypatch.setattr(integrand, "_CONTEXT",
                        [ctx, lambda fn, ctx: converted.append(fn) or real(fn, ctx)])
    for f in (_sum_of_squares, _branch_on_block_shape, _branchy):
        r = flowsim.integrate(f, 2, 4000, 2, seed=5, block_size=BS, quiet=True)
        assert r.value == pytest.approx(2 / 3 if f is _sum_of_squares else
                                        1.0 if f is _branchy else 0.5, abs=5 * r.error)
    assert _sum_of_squares not in converted
    assert _branch_on_block_shape in converted and _branchy in converted
    assert integrand._PLAIN[_sum_of_squares] == {(None, "float64"): True}
    assert integrand._PLAIN[_branchy] == {(None, "float64"): False}


def test_a_run_starts_from_the_state_its_simulation_holds_and_meta_says_which(tmp_path):
    """A second run of the same Simulation starts from its adapted VEGAS map, and its
    meta says so (``start_state``), so "same bits as Flow" is claimed only from the same
    start."""
    import copy

    def run(sim, n_iter=2, **kw):
        return flowsim.Flow(sim, 4096, seed=1, block_size=1024, quiet=True,
                            jit_compile=False).run(n_iter, **kw)

    sim = flowsim.Vegas(GENZ["gaussian"].f, 2)
    pristine = copy.deepcopy(sim)                   # before its first run: a fresh copy
    first = run(sim)
    assert first.meta["start_state"] == "fresh"
    again = run(sim)                                # the map adapted: another start
    assert again.meta["start_state"] == "adapted: 2 iterations"
    assert again.meta["start_state_id"] != first.meta["start_state_id"]
    assert again.iterations[0]["value"] != first.iterations[0]["value"]
    fresh = run(pristine)
    assert fresh.meta["start_state"] == "fresh" and fresh.value == first.value
    assert fresh.meta["start_state_id"] == first.meta["start_state_id"]
    assert json.loads(first.to_json())["meta"]["start_state"] == "fresh"
    plain = flowsim.Plain(GENZ["gaussian"].f, 2)    # nothing adapts: every run is fresh
    assert run(plain).meta == run(plain).meta and run(plain).meta["start_state"] == "fresh"
    # a resumed run says which state its first iteration started from, and counts on
    path = tmp_path / "run.ckpt"
    run(flowsim.Vegas(GENZ["gaussian"].f, 2), 1, checkpoint=path)
    resumed_sim = flowsim.Vegas(GENZ["gaussian"].f, 2)
    resumed = run(resumed_sim, 3, checkpoint=path)
    assert resumed.meta["start_state"] == "fresh"
    assert [r["adapted_before"] for r in resumed.iterations] == [0, 1, 2]
    assert run(resumed_sim, 1).meta["start_state"] == "adapted: 3 iterations"


def test_on_iteration_sees_each_record_as_it_finishes():
    seen = []
    flow = flowsim.Flow(flowsim.Plain(lambda x: x[:, 0], 2), 4096, seed=1, quiet=True,
                        jit_compile=False)
    res = flow.run(3, on_iteration=lambda record: seen.append(record["iteration"]))
    assert seen == [1, 2, 3] and [r["iteration"] for r in res.iterations] == seen
    with pytest.raises(TypeError, match="on_iteration must be callable or None, got 5"):
        flow.run(1, on_iteration=5)
