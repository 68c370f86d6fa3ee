"""Monte Carlo algorithms, each a :class:`flowsim.Simulation` in its own module:
:mod:`~flowsim.algorithms.plain`, :mod:`~flowsim.algorithms.vegas`,
:mod:`~flowsim.algorithms.vegasplus`, parameter sweeps (:mod:`~flowsim.algorithms.sweep`)
and histograms filled alongside (:mod:`~flowsim.algorithms.histogram`).

``algorithm_class(name)`` (also ``flowsim.algorithms.algorithm_class``, as before the
package existed) maps "plain", "vegas", "vegasplus" to their classes.
"""
from .registry import ALGORITHMS, algorithm_class

__all__ = ["ALGORITHMS", "algorithm_class"]
