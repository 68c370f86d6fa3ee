"""flowsim.testing.check_gpu_ready: every shipped workload's kernels have GPU kernels in
this TensorFlow build (traced only, nothing run), and a kernel using an op without one
is reported by name."""
import pytest

import flowsim
from flowsim.core.lazy_tf import tf
from flowsim.testing import check_gpu_ready

#: One conformance case per workload family.
FAMILIES = ("plain", "vegas", "vegasplus", "path", "sweep", "markets_small", "markets_learned",
            "rollout_coin", "rollout_mlp", "portfolio_coin", "finance_rsi_sweep",
            "physics_scan_vegasplus", "physics_gradient_vegas", "physics_complex_plain")


@pytest.mark.parametrize("case", FAMILIES)
def test_every_shipped_workload_family_is_gpu_ready(case):
    report = check_gpu_ready(case)
    assert report.ok, str(report)
    text = str(report)
    assert text.startswith(f"GPU readiness of {case} (") and ": ready" in text.splitlines()[0]
    assert "every op has a GPU kernel" in text
    assert report.n_ops > 20 and report.missing == []
    assert report.slow["float64"]["Mul"] + report.slow["float64"]["Sum"] > 0, text


def through_a_string(x):
    """float64 -> text -> float64: string ops have CPU kernels only."""
    t = tf()
    return t.strings.to_number(t.strings.as_string(x[:, 0]), t.float64)


def through_python(x):
    t = tf()
    out = t.py_function(lambda v: v * 2.0, [x[:, 0]], t.float64)
    return t.reshape(out, t.shape(x)[:1])


@pytest.mark.parametrize("jit_compile", [True, False])
def test_an_op_without_a_gpu_kernel_fails_and_is_named(jit_compile):
    report = check_gpu_ready(flowsim.Plain(through_a_string, 2), jit_compile=jit_compile)
    assert not report.ok and not report
    assert {u.op for u in report.missing} == {"AsString", "StringToNumber"}
    text = str(report).splitlines()
    assert "NOT READY: 2 op(s) without a GPU kernel" in text[0]
    kind = "XLA-GPU" if jit_compile else "GPU"
    assert f"  no {kind} kernel: AsString (float64) in " in "\n".join(text)


def test_a_python_call_fails_under_xla_and_is_a_host_round_trip_without():
    under_xla = check_gpu_ready(flowsim.Plain(through_python, 2))
    assert [u.op for u in under_xla.missing] == ["EagerPyFunc"], str(under_xla)
    assert "no XLA-GPU kernel: EagerPyFunc" in str(under_xla)
    plain = check_gpu_ready(flowsim.Plain(through_python, 2), jit_compile=False)
    assert plain.ok, str(plain)
    assert "Python calls inside loops (a host round-trip each): EagerPyFunc in function " \
        "while_body (x1)" in str(plain)


def test_the_workload_is_traced_on_a_copy_and_float32_moves_work_off_float64():
    sim = flowsim.Vegas(flowsim.targets.double_gaussian, 3)
    wide = check_gpu_ready(sim, jit_compile=False)
    narrow = check_gpu_ready(sim, jit_compile=False, dtype="float32")
    assert wide.ok and narrow.ok and "float32" in str(narrow).splitlines()[0]
    assert sum(narrow.slow["float64"].values()) < sum(wide.slow["float64"].values())
    assert sim.nstrat is None         # prepared on a copy only


def test_bad_workloads_say_what_is_taken():
    with pytest.raises(TypeError, match="takes a flowsim Simulation, a function returning "
                                        "one or a conformance case's name, got int"):
        check_gpu_ready(42)
    with pytest.raises(ValueError, match="no conformance case 'plane'; cases: plain, "):
        check_gpu_ready("plane")
    with pytest.raises(TypeError, match=r"returned dict, not a flowsim Simulation"):
        check_gpu_ready(dict)
