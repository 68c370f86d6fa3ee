"""Plots (matplotlib, optional: ``pip install 'flowsim[plot]'``).

- :func:`convergence` / :func:`save_convergence`: per-iteration estimates with
  errors and the cumulative value.
- :func:`grid`: the trained VEGAS map per dimension.
- :func:`timeline` / :func:`save_timeline`: Gantt chart of chunks per device.
"""
from ..core.lazy import attach

__getattr__, __dir__, __all__ = attach(
    __name__, {"convergence": "convergence", "save_convergence": "convergence",
               "grid": "convergence", "timeline": "timeline", "save_timeline": "timeline"})
