"""Plots (matplotlib, optional: ``pip install 'flowsim[plot]'``).

- :func:`convergence` / :func:`save_convergence`: per-iteration estimates with
  errors and the cumulative value.
- :func:`grid`: the trained VEGAS map per dimension.
- :func:`timeline` / :func:`save_timeline`: Gantt chart of chunks per device.
"""
import importlib

_WHERE = {"convergence": "convergence", "save_convergence": "convergence", "grid": "convergence",
          "timeline": "timeline", "save_timeline": "timeline"}

__all__ = list(_WHERE)


def __getattr__(name):
    if name in _WHERE:
        return getattr(importlib.import_module(f"{__name__}.{_WHERE[name]}"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
