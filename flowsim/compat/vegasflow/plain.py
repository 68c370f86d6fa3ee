"""VegasFlow's ``PlainFlow`` (``vegasflow.plain``): plain Monte Carlo on :class:`flowsim.Plain`."""
from .monte_carlo import MonteCarloFlow, sampler, wrapper


class PlainFlow(MonteCarloFlow):
    """Plain Monte Carlo: uniform points, mean of the integrand times the volume.

    Takes :class:`~flowsim.compat.vegasflow.monte_carlo.MonteCarloFlow`'s
    arguments; vector integrands ``[n, k]`` are integrated component-wise.
    """

    _CAN_RUN_VECTORIAL = True

    def _simulation(self, integrand):
        from ...algorithms.plain import Plain
        return self._simulation_class(Plain)(integrand, self.n_dim, limits=self.limits)


def plain_wrapper(*args, **kwargs):
    """``plain_wrapper(integrand, n_dim, n_iter, total_n_events)`` -> ``(value, error)``."""
    return wrapper(PlainFlow, *args, **kwargs)


def plain_sampler(*args, **kwargs):
    """``plain_sampler(integrand, n_dim, n_events, training_steps=5, return_class=False)``."""
    return sampler(PlainFlow, *args, **kwargs)
