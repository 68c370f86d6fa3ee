"""Which blocks each device *type* runs, so that mixed types give bits without timing.

A GPU and CPU:0 may round the same block differently.  On a mix of types,
:class:`flowsim.distribution.threads.ThreadExecutor` therefore first cuts an
iteration's blocks into one contiguous range per type (:func:`kind_split`), a pure
function of the number of blocks, the devices and their declared weights; within a
type, the schedule hands its blocks to any of its devices (devices of one type round
alike, so that part of the schedule never changes the bits).  On one type the whole
iteration is one range: the bits are those of :class:`flowsim.Flow`.

Declared weights: the ``devices={"GPU:0": 40, "CPU:0": 1}`` dict, else
``type_weights=`` (per type, per device), else :data:`TYPE_WEIGHTS`.  Measured
speeds never move blocks between types; the weights used are in
``Result.meta["type_weights"]``, and passing them back as ``type_weights=`` repeats
the run bit for bit.

:func:`flowsim.testing.device_types` simulates other types on logical CPUs
(:data:`SIMULATED`): what they are called, a deterministic rounding difference in
their rows, and per-chunk delays.
"""
import math

import numpy as np

from ..schedule.policies import static_shares

#: Declared relative speed of one device of each type (per device), by default.
TYPE_WEIGHTS = {"GPU": 20.0, "CPU": 1.0}

#: The simulated fleet of :func:`flowsim.testing.device_types` (None: the real types).
SIMULATED = None


class Fleet:
    """Logical devices treated as another type: ``kinds`` ``{device: type}``, rows of
    those devices moved by one ulp (``rounding="perturbed"``), ``delays`` ``{device:
    seconds}`` slept before each chunk."""

    def __init__(self, kinds, rounding="perturbed", delays=None):
        if rounding not in ("perturbed", "same"):
            raise ValueError(f"rounding must be 'perturbed' or 'same', got {rounding!r}")
        self.kinds = {str(d): str(k).upper() for d, k in dict(kinds).items()}
        self.rounding = rounding
        self.delays = {str(d): float(s) for d, s in dict(delays or {}).items()}
        bad = [d for d, s in self.delays.items() if not (math.isfinite(s) and s >= 0)]
        if bad:
            raise ValueError(f"delays must be seconds >= 0, got {self.delays}")


def native_kind(device):
    """``"GPU"`` or ``"CPU"`` from a device name (``"GPU:1"``, ``"/device:CPU:0"``)."""
    return "GPU" if "GPU" in device.upper() else "CPU"


def kind_of(device):
    """The type a device counts as (a simulated one under ``device_types``)."""
    if SIMULATED is not None and device in SIMULATED.kinds:
        return SIMULATED.kinds[device]
    return native_kind(device)


def type_weights_of(devices, weights=None, type_weights=None):
    """``{type: weight}``: the sum of the declared weights of each type's devices."""
    if type_weights is not None:
        bad = [k for k, w in dict(type_weights).items() if not (w >= 0 and math.isfinite(w))]
        if bad:
            raise ValueError(f"type_weights must be finite and >= 0, got {type_weights}")
    totals = {}
    for i, device in enumerate(devices):
        kind = kind_of(device)
        if weights is not None:
            w = weights[i]
        elif type_weights is not None and kind in type_weights:
            w = type_weights[kind]
        else:
            w = TYPE_WEIGHTS.get(kind, 1.0)
        totals[kind] = totals.get(kind, 0.0) + float(w)
    return totals


def kind_split(n_blocks, devices, weights=None, type_weights=None):
    """``[(type, worker indices, first block, blocks)]``, types in name order, each a
    contiguous range in proportion to its weight (:func:`type_weights_of`)."""
    totals = type_weights_of(devices, weights, type_weights)
    kinds = sorted(totals)
    if len(kinds) == 1:
        return [(kinds[0], list(range(len(devices))), 0, n_blocks)]
    if not sum(totals.values()) > 0:
        raise ValueError(f"the device types' weights are all 0: {totals}")
    shares = static_shares(n_blocks, [totals[k] for k in kinds])
    return [(k, [i for i, d in enumerate(devices) if kind_of(d) == k], first, n)
            for k, (first, n) in zip(kinds, shares)]


def simulate(device, rows):
    """``rows`` as the simulated type of ``device`` computes them: non-integer values
    one ulp up when the device is simulated as another type with
    ``rounding="perturbed"`` (counts, integers, stay)."""
    if (SIMULATED is None or SIMULATED.rounding != "perturbed"
            or device not in SIMULATED.kinds
            or SIMULATED.kinds[device] == native_kind(device)):
        return rows
    rows = np.asarray(rows)
    return np.where(rows != np.round(rows), np.nextafter(rows, np.inf), rows)


def delay(device):
    """Seconds to sleep before a chunk on ``device`` (simulated fleets only)."""
    return 0.0 if SIMULATED is None else SIMULATED.delays.get(device, 0.0)
