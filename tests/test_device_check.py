"""flowsim devices --check: each device type on short Plain, Vegas and markets cases
(events/s, float32 vs float64) and the GPU readiness of their kernels."""
import json
import re
import time

import flowsim
from flowsim import cli
from flowsim.testing import device_check


def main(capsys, *argv):
    rc = cli.main(list(argv))
    out, err = capsys.readouterr()
    return rc, out, err


def test_devices_check_prints_each_type_and_the_readiness(capsys):
    start = time.perf_counter()
    rc, out, _ = main(capsys, "devices", "--check")
    seconds = time.perf_counter() - start
    assert rc == 0, out
    lines = out.splitlines()
    assert lines[0].startswith("flowsim devices --check: 2 timed iterations after a warm-up, "
                               "on CPU:0")
    assert lines[1].split() == ["case", "device", "float64", "events/s", "float32",
                                "events/s", "float32", "-", "float64"]
    rate = r"\d(\.\d*)?e\+\d\d|\d+(\.\d+)?"          # .3g: 2.67e+04, 3e+04, 987
    for case in ("plain", "vegas", "markets"):
        row = next(line for line in lines if line.startswith(f"{case} "))
        assert re.fullmatch(rf"{case}\s+CPU:0\s+({rate})\s+({rate})\s+[+-]\S+ \([+-]\S+ sigma\)",
                            row), row
    for case in ("plain", "vegas", "markets"):
        assert f"GPU readiness of {case} (XLA, float64): ready" in lines
    assert seconds < 300, f"took {seconds:.0f} s"


def test_devices_check_json_and_a_type_subset():
    found = device_check.check_devices(devices=["CPU:0"], cases=["plain"])
    data = json.loads(json.dumps(device_check.as_json(found)))
    (row,) = data["rows"]
    assert row["case"] == "plain" and row["device"] == "CPU:0"
    assert row["float64_events_per_s"] > 0 and row["float32_events_per_s"] > 0
    assert abs(row["sigmas"]) < 0.01 and row["float32_minus_float64"] != 0
    (ready,) = data["readiness"]
    assert ready["workload"] == "plain" and ready["ok"] and ready["missing"] == []


def test_device_types_lists_the_first_device_of_each_type():
    assert device_check.device_types() == sorted(
        {name.split(":")[0]: name for name in reversed(flowsim.logical_devices())}.values(),
        key=lambda name: (not name.startswith("GPU"), name))
    assert "CPU:0" in device_check.device_types()
