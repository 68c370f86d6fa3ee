"""A simulated fleet of device types on logical CPUs: :func:`device_types`.

Usage (4 logical CPUs, two of them counted as GPUs)::

    flowsim.set_virtual_cpus(4)
    with flowsim.testing.device_types({"CPU:2": "GPU", "CPU:3": "GPU"},
                                      delays={"CPU:0": 0.01}):
        res = ThreadPoolFlow(sim, 10**6, seed=1).run(3)

Under it, every schedule and Flow treats the named devices as that type
(:mod:`flowsim.distribution.device_kinds`): an iteration's blocks are cut per type
by the declared weights, and each device's rows carry its type's rounding
(``rounding="perturbed"``: non-integer values one ulp up on a device simulated as
another type, so a block that moved between types would change the bits;
``"same"``: none).  ``delays`` (seconds per chunk, per device) imitate devices of
other speeds.  The previous fleet is restored on exit.
"""
import contextlib

from ..distribution import device_kinds


@contextlib.contextmanager
def device_types(mapping, rounding="perturbed", delays=None):
    """Treat the logical devices of ``mapping`` (``{"CPU:2": "GPU"}``) as those types.

    Parameters
    ----------
    mapping : dict
        Device name -> type (``"GPU"``, ``"CPU"``...).
    rounding : "perturbed" or "same"
        Whether a device counted as another type rounds its rows differently
        (default "perturbed").
    delays : dict or None
        Device name -> seconds slept before each chunk it runs (default none).
    """
    fleet = device_kinds.Fleet(mapping, rounding, delays)
    before = device_kinds.SIMULATED
    device_kinds.SIMULATED = fleet
    try:
        yield fleet
    finally:
        device_kinds.SIMULATED = before
