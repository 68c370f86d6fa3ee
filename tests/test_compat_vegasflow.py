"""flowsim.compat.vegasflow beyond VegasFlow's own tests (tests/peer/vegasflow):
flowsim's semantics where VegasFlow's were wrong."""
import numpy as np
import pytest

from flowsim.compat import vegasflow as vf
from flowsim.core.lazy_tf import tf

N = 3000          # not a multiple of 64: the last block has padding events


def gauss(xarr):
    t = tf()
    return t.exp(-t.reduce_sum(t.square(xarr - 0.5), axis=1) / 0.02) / (0.02 * np.pi)


def gauss_np(xarr):
    return np.exp(-np.sum((xarr - 0.5) ** 2, axis=1) / 0.02) / (0.02 * np.pi)


def test_same_seed_same_bits_whatever_the_events_limit():
    out = []
    for limit in (10 ** 6, 1024):
        inst = vf.VegasFlow(2, N, events_limit=limit, verbose=False)
        inst.compile(gauss)
        inst.set_seed(7)
        out.append(inst.run_integration(3))
    assert out[0] == out[1]


def test_same_seed_same_bits_on_one_and_two_devices(python):
    code = (
        "import flowsim; flowsim.set_virtual_cpus(2)\n"
        "from tests.test_compat_vegasflow import gauss\n"
        "from flowsim.compat import vegasflow as vf\n"
        "res = []\n"
        "for devices in (['CPU'], None):\n"
        "    inst = vf.VegasFlowPlus(2, 20000, list_devices=devices, verbose=False,\n"
        "                            adaptive=True)\n"
        "    assert (len(inst.devices) == 2) if devices else inst.devices is None\n"
        "    inst.compile(gauss); inst.set_seed(11)\n"
        "    res.append(inst.run_integration(3))\n"
        "print(res[0] == res[1], res)\n")
    proc = python(code)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stdout.startswith("True"), proc.stdout


def test_a_new_run_draws_new_numbers():
    inst = vf.PlainFlow(2, N, verbose=False)
    inst.compile(gauss)
    inst.set_seed(1)
    a = inst.run_integration(1)
    b = inst.run_integration(1)
    assert a != b
    inst.set_seed(1)
    assert inst.run_integration(1) == a


@pytest.mark.parametrize("cls", [vf.PlainFlow, vf.VegasFlow])
def test_histograms_filled_with_weight_add_up_to_each_iteration(cls):
    t = tf()
    hist = t.Variable(t.zeros([10], t.float64))

    def integrand(xarr, weight=None):
        f = gauss(xarr)
        counts = t.math.unsorted_segment_sum(
            f * weight, t.minimum(t.cast(xarr[:, 0] * 10, t.int32), 9), 10)
        hist.assign_add(counts)
        return f

    inst = cls(2, N, verbose=False)
    inst.compile(integrand)
    inst.set_seed(5)
    inst.run_integration(3, histograms=(hist,))
    for value, _, (h,) in inst.history:
        # padding events of the last block carry weight 0: each event counted once
        np.testing.assert_allclose(np.sum(h.numpy()), value, rtol=1e-10)


def test_numpy_integrand_with_compilable_false_matches_the_tf_one():
    out = []
    for f, compilable in ((gauss, True), (gauss_np, False)):
        inst = vf.VegasFlow(2, N, verbose=False)
        inst.compile(f, compilable=compilable)
        inst.set_seed(3)
        out.append(inst.run_integration(2))
    np.testing.assert_allclose(out[0], out[1], rtol=1e-10)


@pytest.mark.parametrize("sampler", [vf.plain_sampler, vf.vegas_sampler,
                                     vf.vegasflowplus_sampler])
def test_sampler_weights_estimate_the_integral(sampler):
    sample = sampler(gauss, 2, 20000, training_steps=2)
    x, w = sample(40000)
    f = gauss(x).numpy() * w.numpy()
    err = np.std(f) * np.sqrt(len(f))
    assert abs(np.sum(f) - 1.0) < 5 * err       # 5 sigma: false failure < 1e-6


def test_save_grid_writes_vegasflows_json_keys(tmp_path):
    import json
    inst = vf.VegasFlow(3, N, verbose=False)
    inst.compile(gauss)
    inst.run_integration(1)
    inst.save_grid(tmp_path / "g.json")
    saved = json.loads((tmp_path / "g.json").read_text())
    assert set(saved) == {"dimensions", "ALPHA", "BINS", "integrand", "grid"}
    assert saved["BINS"] == 51 and saved["integrand"] == "gauss"
    other = vf.VegasFlow(3, N, verbose=False)
    other.load_grid(file_name=tmp_path / "g.json")
    np.testing.assert_array_equal(other.divisions.numpy(), inst.divisions.numpy())
