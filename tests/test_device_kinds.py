"""Which blocks each device type runs (pure logic of flowsim.distribution.device_kinds)
and the simulated fleet of flowsim.testing.device_types; the threads run of a mixed
fleet is in tests/test_threads.py."""
import numpy as np
import pytest

from flowsim.distribution import device_kinds as kinds
from flowsim.testing import device_types

DEVICES = ["GPU:0", "GPU:1", "CPU:0"]


def test_one_type_is_one_range_of_every_worker():
    assert kinds.kind_split(100, ["CPU:0", "CPU:1"]) == [("CPU", [0, 1], 0, 100)]


def test_types_get_contiguous_ranges_by_their_declared_weights():
    """Default weights: a GPU counts 20, CPU:0 1 -> 40 : 1 of 82 blocks, CPU first."""
    assert kinds.kind_split(82, DEVICES) == [("CPU", [2], 0, 2), ("GPU", [0, 1], 2, 80)]
    assert kinds.kind_split(82, DEVICES, type_weights={"GPU": 1, "CPU": 2}) == [
        ("CPU", [2], 0, 41), ("GPU", [0, 1], 41, 41)]
    assert kinds.kind_split(10, DEVICES, weights=[3.0, 1.0, 1.0]) == [
        ("CPU", [2], 0, 2), ("GPU", [0, 1], 2, 8)]
    # the split depends on nothing else: same answer every time
    assert kinds.kind_split(82, DEVICES) == kinds.kind_split(82, DEVICES)


def test_type_weights_are_checked():
    with pytest.raises(ValueError, match="type_weights must be finite and >= 0"):
        kinds.type_weights_of(DEVICES, type_weights={"GPU": -1})
    with pytest.raises(ValueError, match="the device types' weights are all 0"):
        kinds.kind_split(10, DEVICES, weights=[0.0, 0.0, 0.0])


def test_simulated_types_and_their_rounding():
    rows = np.array([[1.5, 3.0, 0.1]])
    with device_types({"CPU:2": "gpu"}, delays={"CPU:2": 0.5}) as fleet:
        assert fleet.kinds == {"CPU:2": "GPU"}
        assert kinds.kind_of("CPU:2") == "GPU" and kinds.kind_of("CPU:0") == "CPU"
        moved = kinds.simulate("CPU:2", rows)
        assert moved[0, 1] == 3.0                             # counts stay
        assert moved[0, 0] == np.nextafter(1.5, 2) and moved[0, 2] == np.nextafter(0.1, 1)
        assert kinds.simulate("CPU:0", rows) is rows
        assert kinds.delay("CPU:2") == 0.5 and kinds.delay("CPU:0") == 0.0
        with device_types({"CPU:2": "GPU"}, rounding="same"):
            assert kinds.simulate("CPU:2", rows) is rows
        assert kinds.SIMULATED is fleet                       # restored
    assert kinds.SIMULATED is None and kinds.kind_of("CPU:2") == "CPU"


@pytest.mark.parametrize("kwargs, message", [
    ({"rounding": "random"}, "rounding must be 'perturbed' or 'same', got 'random'"),
    ({"delays": {"CPU:1": -1}}, r"delays must be seconds >= 0"),
])
def test_bad_fleets_are_refused(kwargs, message):
    with pytest.raises(ValueError, match=message):
        with device_types({"CPU:1": "GPU"}, **kwargs):
            pass
