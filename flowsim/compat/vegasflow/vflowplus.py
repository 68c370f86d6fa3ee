"""VegasFlow's ``VegasFlowPlus`` (``vegasflow.vflowplus``): VEGAS with stratified
sampling on :class:`flowsim.Vegas` (``adaptive=False``: hypercubes of equal
events) or :class:`flowsim.VegasPlus` (``adaptive=True``: VEGAS+)."""
import logging

from .monte_carlo import sampler, wrapper
from .vflow import VegasFlow

logger = logging.getLogger("vegasflow.vflowplus")


class VegasFlowPlus(VegasFlow):
    """VEGAS map plus stratified sampling (VEGAS+ with ``adaptive=True``).

    Parameters
    ----------
    n_dim, n_events, train, **kwargs
        As :class:`~flowsim.compat.vegasflow.vflow.VegasFlow`.
    adaptive : bool
        Allocate events to hypercubes by their variance (VEGAS+, flowsim's
        :class:`~flowsim.VegasPlus`); default False: every hypercube gets the
        same events (flowsim's stratified :class:`~flowsim.Vegas`).
    events_limit : int or None
        Unlike VegasFlow, which had to hold an iteration in one device call,
        flowsim runs VEGAS+ in blocks on any number of devices: this only
        bounds memory.

    Vector integrands are integrated too (VegasFlow refused them).  Samples
    (:meth:`generate_random_array`) come from the map alone, with weights
    ``J(x) V / n`` (VegasFlow's weights were those of the hypercube
    allocation times ``1 / n_h``, whose sum was not the integral).  The
    ``weight`` passed to integrands is the map's ``J V / n_events``, which
    ignores the allocation factor ``n / (H n_h)`` of ``adaptive=True``.
    """

    def __init__(self, n_dim, n_events, train=True, adaptive=False, events_limit=None,
                 **kwargs):
        if events_limit is not None:
            kwargs["events_limit"] = events_limit
        super().__init__(n_dim, n_events, train, **kwargs)
        if n_dim > 13 and adaptive:
            logger.warning("Disabling adaptive mode from VegasFlowPlus, too many dimensions!")
            adaptive = False
        self._adaptive = bool(adaptive)

    @property
    def _options(self):
        return {} if self._adaptive else {"stratify": True}

    def _flowsim_class(self):
        from ...algorithms.vegas import Vegas
        from ...algorithms.vegasplus import VegasPlus
        return VegasPlus if self._adaptive else Vegas


def vegasflowplus_wrapper(integrand, n_dim, n_iter, total_n_events, **kwargs):
    """``vegasflowplus_wrapper(integrand, n_dim, n_iter, total_n_events)`` -> ``(value, error)``."""
    return wrapper(VegasFlowPlus, integrand, n_dim, n_iter, total_n_events, **kwargs)


def vegasflowplus_sampler(*args, **kwargs):
    """``vegasflowplus_sampler(integrand, n_dim, n_events, training_steps=5)``."""
    return sampler(VegasFlowPlus, *args, **kwargs)
