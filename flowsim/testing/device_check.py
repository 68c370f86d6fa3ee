"""``flowsim devices --check``: each device type of this machine on three short cases.

Usage::

    flowsim devices --check            # a table, then the GPU readiness reports
    flowsim devices --check --json     # the same as JSON

    from flowsim.testing.device_check import check_devices
    found = check_devices()            # {"rows": [...], "readiness": [GpuReadiness, ...]}

For the first device of each type (``GPU:0``, ``CPU:0``...) it runs a short
Plain and a short Vegas integration of the double Gaussian (dimension 4) and a
small market ensemble, in float64 and in float32: one warm-up iteration
(tracing and XLA compilation), then :data:`ITERATIONS` timed ones.  A row gives
the events per second of each and the float32 value minus the float64 one (in
units of the float64 error; of several statistics, the one furthest in those
units).  Then :func:`flowsim.testing.check_gpu_ready`
reads each case's kernels against this TensorFlow build's GPU kernels (no GPU
needed).  It takes well under a minute on a CPU.

The timings are this machine's, of runs too short to rank devices by: time your
own workload at its own size (``Result.meta`` and ``Result.timeline`` have the
seconds of every chunk) before choosing weights for a mix of devices.
"""
import time

import numpy as np

from ..algorithms.plain import Plain
from ..algorithms.vegas import Vegas
from ..core.flow import Flow
from ..targets import double_gaussian
from .gpu_ready import check_gpu_ready

__all__ = ["CASES", "ITERATIONS", "check_devices", "table"]

#: Timed iterations of each run (after one warm-up iteration).
ITERATIONS = 2


def plain_case():
    """Plain Monte Carlo of the double Gaussian in dimension 4."""
    return Plain(double_gaussian, 4)


def vegas_case():
    """VEGAS on the double Gaussian in dimension 4."""
    return Vegas(double_gaussian, 4)


def markets_case():
    """A small market ensemble (:func:`flowsim.testing.cases_markets.small`)."""
    from .cases_markets import small
    return small()


#: name -> (simulation factory, Flow settings).
CASES = {
    "plain": (plain_case, {"n_events": 1 << 20}),
    "vegas": (vegas_case, {"n_events": 1 << 18}),
    "markets": (markets_case, {"n_events": 512, "block_size": 64}),
}


def device_types():
    """The first logical device of each type, GPUs first: ``["GPU:0", "CPU:0"]``."""
    from ..core.lazy_tf import logical_devices
    first = {}
    for name in logical_devices():
        first.setdefault(name.split(":")[0], name)
    return sorted(first.values(), key=lambda name: (not name.startswith("GPU"), name))


def timed_run(factory, settings, device, dtype):
    """``(events per second, value, error)`` of ``ITERATIONS`` iterations after a
    warm-up one."""
    flow = Flow(factory(), seed=1, device=device, dtype=dtype, quiet=True, **settings)
    flow.run(1)
    start = time.perf_counter()
    result = flow.run(ITERATIONS)
    seconds = time.perf_counter() - start
    return ITERATIONS * settings["n_events"] / seconds, result.value, result.error


def case_row(name, device):
    """One row of the table: the case on ``device`` in float64 and float32."""
    factory, settings = CASES[name]
    rate64, value64, error64 = timed_run(factory, settings, device, "float64")
    row = {"case": name, "device": device, "float64_events_per_s": rate64,
           "float32_events_per_s": None, "float32_minus_float64": None, "sigmas": None,
           "note": ""}
    try:
        rate32, value32, _ = timed_run(factory, settings, device, "float32")
    except ValueError as exc:           # a workload that computes in float64 only
        row["note"] = str(exc)
        return row
    row.update(zip(("float32_minus_float64", "sigmas"),
                   furthest(value32, value64, error64)), float32_events_per_s=rate32)
    return row


def furthest(value32, value64, error64):
    """``(difference, sigmas)`` of the statistic whose float32 value is furthest from
    its float64 one in units of its float64 error (the first if no error is positive;
    ``sigmas`` None then)."""
    value32, value64, error64 = (np.atleast_1d(np.asarray(x, np.float64))
                                 for x in (value32, value64, error64))
    difference = value32 - value64
    with np.errstate(invalid="ignore", divide="ignore"):
        sigmas = np.where(error64 > 0, difference / error64, np.nan)
    if np.all(np.isnan(sigmas)):
        return float(difference[0]), None
    i = int(np.nanargmax(np.abs(sigmas)))
    return float(difference[i]), float(sigmas[i])


def check_devices(devices=None, cases=None):
    """Run ``cases`` (default all of :data:`CASES`) on ``devices`` (default: the first
    device of each type) and check their GPU readiness; ``{"rows": [...],
    "readiness": [GpuReadiness, ...]}``."""
    names = list(cases or CASES)
    rows = [case_row(name, device) for device in devices or device_types() for name in names]
    readiness = [check_gpu_ready(CASES[name][0], n_events=CASES[name][1]["n_events"])
                 for name in names]
    for name, report in zip(names, readiness):
        report.workload = name
    return {"rows": rows, "readiness": readiness}


def _rate(value):
    return "n/a" if value is None else f"{value:.3g}"


def _difference(row):
    if row["float32_minus_float64"] is None:
        return f"n/a: {row['note']}" if row["note"] else "n/a"
    sigmas = "" if row["sigmas"] is None else f" ({row['sigmas']:+.2g} sigma)"
    return f"{row['float32_minus_float64']:+.3g}{sigmas}"


def table(found):
    """The text ``flowsim devices --check`` prints for :func:`check_devices`' result."""
    devices = sorted({row["device"] for row in found["rows"]})
    lines = [f"flowsim devices --check: {ITERATIONS} timed iterations after a warm-up, "
             f"on {', '.join(devices)} (the first device of each type)",
             f"{'case':<9}{'device':<8}{'float64 events/s':>18}{'float32 events/s':>18}"
             f"  float32 - float64"]
    lines += [f"{row['case']:<9}{row['device']:<8}{_rate(row['float64_events_per_s']):>18}"
              f"{_rate(row['float32_events_per_s']):>18}  {_difference(row)}"
              for row in found["rows"]]
    lines += ["Timings of runs this short do not rank devices: time your own workload "
              "(Result.timeline has every chunk's seconds).",
              "GPU readiness (this TensorFlow build's kernels; no GPU is run):"]
    lines += [str(report) for report in found["readiness"]]
    return "\n".join(lines)


def as_json(found):
    """:func:`check_devices`' result as plain data (the reports as their fields)."""
    return {"rows": found["rows"],
            "readiness": [{"workload": r.workload, "ok": r.ok, "report": str(r),
                           "missing": [u.op for u in r.missing]}
                          for r in found["readiness"]]}
