"""One test per shim of flowsim.core.tf_private: each fails when the TensorFlow installed
no longer has what the shim's fast path needs (flowsim would still run, on the slower
public path: this is where a TensorFlow release that takes a fast path away shows)."""
import os

from flowsim.core import tf_private
from flowsim.core.lazy_tf import tf


def _concrete(fn):
    t = tf()
    return t.function(fn).get_concrete_function(t.TensorSpec([2], t.float64))


def test_set_cpp_min_log_level_finds_absl_in_tensorflows_library():
    level = min(max(int(os.environ.get("TF_CPP_MIN_LOG_LEVEL", "3")), 0), 3)
    assert tf_private.set_cpp_min_log_level(tf(), level) == level


def test_route_function_names_names_traced_functions_by_content():
    from flowsim.core.stable_names import _install, stable_names
    assert _install() is True
    with stable_names(("tf_private test",)):
        concrete = _concrete(lambda x: x * 5.0)
    name = concrete.name.decode() if isinstance(concrete.name, bytes) else concrete.name
    assert name.startswith("__inference_<lambda>_"), name
    assert int(name.rpartition("_")[2]) >= 2**60, name       # stable_names' count, not TF's


def test_autograph_context_gives_the_conversion_context_and_tf_convert():
    from flowsim.core import integrand
    found = tf_private.autograph_context(())
    assert found is not None
    context, convert = found
    assert callable(convert) and hasattr(context, "__enter__")
    assert integrand._enabled_context() is not None


def test_graph_function_finds_the_function_a_concrete_function_calls():
    concrete = _concrete(lambda x: x + 1.0)
    atomic = tf_private.graph_function(concrete)
    assert atomic is not None
    t = tf()
    (out,) = atomic.call_flat(t.constant([1.0, 2.0], t.float64), *concrete.captured_inputs)
    assert out.numpy().tolist() == [2.0, 3.0]


def test_quick_call_goes_straight_to_tensorflows_executor():
    t = tf()
    offset = t.constant([10.0, 20.0], t.float64)
    concrete = _concrete(lambda x: x * 2.0 + offset)         # one captured input
    run = tf_private.quick_call(tf_private.graph_function(concrete),
                                tuple(concrete.captured_inputs))
    assert run.quick, "quick_execute is gone: env steps take call_flat's slower path"
    (out,) = run(t.constant([1.0, 2.0], t.float64))
    assert out.numpy().tolist() == [12.0, 24.0]


def test_registered_kernels_lists_gpu_and_xla_gpu_kernels_with_their_constraints():
    kernels = tf_private.registered_kernels("AddV2")
    assert kernels is not None, "no kernel registry: check_gpu_ready cannot read kernels"
    devices = {device for device, _, _ in kernels}
    assert {"CPU", "GPU", "XLA_GPU_JIT"} <= devices, devices
    gpu_types = {dt for device, allowed, _ in kernels if device == "GPU"
                 for dt in allowed.get("T", ())}
    assert tf().float32.as_datatype_enum in gpu_types
    assert {device for device, _, _ in tf_private.registered_kernels("StringJoin")} == {"CPU"}


def test_device_memory_limits_reports_the_memory_of_local_devices():
    limits = tf_private.device_memory_limits()
    assert limits is not None, "device_lib is gone: GPU memory defaults are not chosen"
    assert limits["CPU:0"] > 0
