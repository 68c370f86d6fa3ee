"""Device memory: defaults chosen from a GPU's memory where TensorFlow reports it (a
CPU keeps today's), and an out-of-memory error as one line naming the device, the
blocks tried and the keyword that lowers them (the error simulated)."""
import pytest

import flowsim
from flowsim.core import blocks, kernel, tf_private
from flowsim.core.backend import LocalExecutor
from flowsim.core.lazy_tf import tf
from flowsim.distribution import ThreadPoolFlow
from flowsim.targets import double_gaussian


def test_memory_defaults_keep_todays_choice_without_a_reported_memory():
    assert blocks.memory_defaults(None, 4, 10**6) == (blocks.MAX_BLOCK, 10**6)


def test_memory_defaults_lower_the_events_limit_then_the_block_on_small_devices():
    per_event = blocks.EVENT_BYTES * 5                                  # dim 4
    assert blocks.memory_defaults(2**34, 4, 10**6) == (blocks.MAX_BLOCK, 10**6)
    assert blocks.memory_defaults(2**30, 4, 10**6) == (blocks.MAX_BLOCK, 2**29 // per_event)
    fits = 2**22 // per_event                                           # 8 MiB device
    assert blocks.memory_defaults(2**23, 4, 10**6) == (fits // 64 * 64, fits)
    assert blocks.memory_defaults(2**10, 4, 10**6) == (64, 64)
    assert blocks.memory_defaults(2**24, None, 10**6) == (2**23 // blocks.EVENT_BYTES,) * 2


def test_device_memory_reads_the_smallest_local_gpu_and_never_a_cpu(monkeypatch):
    monkeypatch.setattr(tf_private, "device_memory_limits",
                        lambda: {"CPU:0": 2**28, "GPU:0": 2**33, "GPU:1": 2**32})
    assert blocks.device_memory(["GPU:0", "GPU:1"]) == 2**32
    assert blocks.device_memory(["GPU:0", "CPU:0"]) == 2**33
    assert blocks.device_memory(["CPU:0"]) is None
    assert blocks.device_memory(["GPU:5", "spark local[2]: GPU:0"]) is None


class ReportedGPU(LocalExecutor):
    """Runs on CPU:0 but names GPU:0 (the device whose memory the Flow reads)."""

    def devices(self):
        return ["GPU:0"]


def test_a_flow_on_a_small_gpu_takes_its_defaults_from_the_memory(monkeypatch):
    monkeypatch.setattr(tf_private, "device_memory_limits", lambda: {"GPU:0": 2**23})
    flow = flowsim.Flow(flowsim.Plain(double_gaussian, 4), 10**5, seed=1,
                        executor=ReportedGPU("CPU:0"))
    largest, limit = blocks.memory_defaults(2**23, 4, 10**6)
    assert flow.grid.block_size == blocks.default_block_size(10**5, largest) < blocks.MAX_BLOCK
    assert flow.events_limit == limit < 10**6
    given = flowsim.Flow(flowsim.Plain(double_gaussian, 4), 10**5, seed=1, block_size=4096,
                         events_limit=8192, executor=ReportedGPU("CPU:0"))
    assert (given.grid.block_size, given.events_limit) == (4096, 8192)


def test_a_flow_on_a_cpu_keeps_todays_defaults():
    flow = flowsim.Flow(flowsim.Plain(double_gaussian, 4), 10**5, seed=1, device="CPU:0")
    assert flow.grid.block_size == blocks.default_block_size(10**5) == 50048
    assert flow.events_limit == 10**6


@pytest.fixture
def out_of_memory(monkeypatch):
    """Every chunk fails as TensorFlow does when a device's allocator is exhausted."""
    def build(simulation, spec, device):
        def run(*args, short_run=False):
            raise tf().errors.ResourceExhaustedError(
                None, None, "OOM when allocating tensor with shape[2048,4] and type double "
                            "on /job:localhost/replica:0/task:0/device:GPU:0 by allocator "
                            "GPU_0_bfc\n\t [[{{node one_block}}]]\nHint: ...")
        return run
    monkeypatch.setattr(kernel, "compiled", build)


def test_out_of_memory_on_a_chunk_is_one_line_naming_events_limit(out_of_memory):
    flow = flowsim.Flow(flowsim.Plain(double_gaussian, 4), 6144, seed=1, block_size=2048,
                        events_limit=6144, device="CPU:0", quiet=True)
    with pytest.raises(tf().errors.ResourceExhaustedError) as info:
        flow.run(1)
    assert str(info.value) == (
        "CPU:0 ran out of memory on a chunk of 3 blocks of 2,048 events (blocks 0..2, "
        "6,144 events); lower events_limit= (--events-limit) below 6,144: the bits stay "
        "the same")
    assert info.value.__suppress_context__


def test_out_of_memory_on_one_block_is_one_line_naming_block_size(out_of_memory):
    flow = ThreadPoolFlow(flowsim.Plain(double_gaussian, 4), 4096, seed=1, devices=["CPU:0"],
                          block_size=2048, events_limit=4096, quiet=True)
    with pytest.raises(tf().errors.ResourceExhaustedError) as info:
        flow.run(1)
    message = str(info.value)
    assert message.startswith("CPU:0 ran out of memory on one block of 2,048 events (block ")
    assert message.endswith("; lower block_size= (--block-size) below 2,048: a new block "
                            "size changes the random stream")
    assert "\n" not in message
