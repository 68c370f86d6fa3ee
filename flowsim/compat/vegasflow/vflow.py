"""VegasFlow's ``VegasFlow`` (``vegasflow.vflow``): VEGAS importance sampling on
:class:`flowsim.Vegas` (unstratified, 50 increments per axis, damping 1.5, as
VegasFlow)."""
import json
import logging

import numpy as np

from ...core.lazy_tf import tf
from .configflow import ALPHA, BINS_MAX, DTYPE
from .monte_carlo import MonteCarloFlow, sampler, wrapper

logger = logging.getLogger("vegasflow.vflow")


class VegasFlow(MonteCarloFlow):
    """VEGAS importance sampling.

    Parameters
    ----------
    n_dim, n_events, **kwargs
        As :class:`~flowsim.compat.vegasflow.monte_carlo.MonteCarloFlow`.
    train : bool
        Refine the grid after every iteration (default True); see
        :meth:`freeze_grid`.
    main_dimension : int
        For vector integrands, the component that trains the grid (default 0).

    The grid (:attr:`divisions`, ``[n_dim, BINS_MAX + 1]`` edges in the unit
    cube) lives in the flowsim :class:`~flowsim.Vegas` built by :meth:`compile`.
    """

    #: Keywords of the flowsim Simulation.
    _options = {"stratify": False}

    def __init__(self, n_dim, n_events, train=True, main_dimension=0, **kwargs):
        super().__init__(n_dim, n_events, **kwargs)
        self._train = bool(train)
        self.grid_bins = BINS_MAX + 1
        self._main_dimension = main_dimension
        self._divisions = np.tile(np.linspace(0.0, 1.0, self.grid_bins), (n_dim, 1))

    def _flowsim_class(self):
        from ...algorithms.vegas import Vegas
        return Vegas

    def _simulation(self, integrand):
        sim = self._simulation_class(self._flowsim_class())(
            integrand, self.n_dim, limits=self.limits, n_bins=BINS_MAX,
            train=self._main_dimension, **self._options)
        if self.simulation is not None:         # a recompile keeps the trained grid
            sim.set_edges(self.simulation.edges)
        else:
            sim.set_edges(self._divisions)
        sim.freeze(not self._train)
        return sim

    def _can_run_vectorial(self, expected_shape):
        if self._main_dimension >= expected_shape[-1]:
            raise ValueError(f"The main dimension index ({self._main_dimension}) is greater "
                             f"than the dimensionality of the output ({expected_shape[-1]}).")
        return True

    @property
    def train(self):
        """Whether the grid is refined after each iteration."""
        return self._train

    @train.setter
    def train(self, value):
        self._train = bool(value)
        if self.simulation is not None:
            self.simulation.freeze(not self._train)

    @property
    def divisions(self):
        """The grid: ``[n_dim, BINS_MAX + 1]`` edges in [0, 1] (a read-only tensor;
        change it with :meth:`load_grid`)."""
        return tf().constant(self._edges(), DTYPE)

    def _edges(self):
        return self.simulation.edges if self.simulation is not None else self._divisions

    def make_differentiable(self):
        """Freeze the grid and return :meth:`run_event` (differentiable)."""
        if self._train:
            logger.warning("Freezing the grid")
            self.freeze_grid()
        return super().make_differentiable()

    def freeze_grid(self):
        """Stop refining the grid."""
        self.train = False

    def unfreeze_grid(self):
        """Refine the grid again after each iteration."""
        self.train = True

    def save_grid(self, file_name):
        """Write the grid as VegasFlow's JSON: ``dimensions``, ``ALPHA``, ``BINS``,
        ``integrand`` (its name) and ``grid`` (:attr:`divisions` as lists)."""
        json_dict = {"dimensions": self.n_dim, "ALPHA": ALPHA, "BINS": self.grid_bins,
                     "integrand": getattr(self._integrand, "__name__", "") or "",
                     "grid": np.asarray(self._edges()).tolist()}
        with open(file_name, "w") as f:
            json.dump(json_dict, f, indent=True)

    def load_grid(self, file_name=None, numpy_grid=None):
        """Load a grid from VegasFlow's JSON ``file_name`` or from ``numpy_grid``.

        The edges must start at 0, end at 1 and increase on every axis:
        unlike VegasFlow, flowsim refuses other arrays (ValueError), since
        they are not a VEGAS map.
        """
        if file_name is not None and numpy_grid is not None:
            raise ValueError("Received both a numpy grid and a file_name to load the grid "
                             "from. Ambiguous call to `load_grid`")
        if file_name:
            with open(file_name) as f:
                json_dict = json.load(f)
            grid_dim, grid_bins = json_dict.get("dimensions"), json_dict.get("BINS")
            name = getattr(self._integrand, "__name__", None)
            if name and json_dict.get("integrand") != name:
                logger.warning("The grid was written for the integrand %s, which is "
                               "different from %s", json_dict.get("integrand"), name)
            numpy_grid = np.array(json_dict["grid"])
        elif numpy_grid is not None:
            numpy_grid = np.asarray(numpy_grid)
            grid_dim, grid_bins = numpy_grid.shape[0], numpy_grid.shape[1]
        else:
            raise ValueError("load_grid was called but no grid was provided!")
        if grid_dim is not None and self.n_dim != grid_dim:
            raise ValueError(f"Received a {grid_dim}-dimensional grid while VegasFlow was "
                             f"instantiated with {self.n_dim} dimensions")
        if grid_bins is not None and self.grid_bins != grid_bins:
            raise ValueError(f"The received grid contains {grid_bins} bins while the current "
                             f"settings is of {self.grid_bins} bins")
        if self.simulation is not None:
            self.simulation.set_edges(numpy_grid)
        else:
            from ...algorithms.vegas import Vegas
            probe = Vegas(lambda x: x[:, 0], self.n_dim, n_bins=BINS_MAX)
            probe.set_edges(numpy_grid)           # the same checks before compile
            self._divisions = probe.edges
        if file_name:
            logger.info(" > SUCCESS: Loaded grid from %s", file_name)

    def _map(self, y):
        edges = np.asarray(self._edges())
        n = edges.shape[1] - 1
        z = y * n
        iy = np.minimum(z.astype(np.int64), n - 1)
        d = np.arange(self.n_dim)
        left = edges[d, iy]
        width = edges[d, iy + 1] - left
        x01 = left + width * (z - iy)
        jac = np.prod(width * n, axis=1)
        x, vol = super()._map(x01)
        return x, jac * vol

    def _graph_map(self, y):
        from ...physics.gradients import map_unit
        x01, jac = map_unit(self._weight_vars()[1], y)
        x, vol = super()._graph_map(x01)
        return x, vol * jac


def vegas_wrapper(integrand, n_dim, n_iter, total_n_events, **kwargs):
    """``vegas_wrapper(integrand, n_dim, n_iter, total_n_events)`` -> ``(value, error)``."""
    return wrapper(VegasFlow, integrand, n_dim, n_iter, total_n_events, **kwargs)


def vegas_sampler(*args, **kwargs):
    """``vegas_sampler(integrand, n_dim, n_events, training_steps=5)``: a trained
    grid's ``generate_random_array``."""
    return sampler(VegasFlow, *args, **kwargs)
