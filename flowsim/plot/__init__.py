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
        module = importlib.import_module(f"{__name__}.{_WHERE[name]}")
        # Importing the submodule binds its name (e.g. ``timeline``) on this
        # package; rebind every function it provides so that the names stay
        # functions, not modules.
        for key, where in _WHERE.items():
            if where == _WHERE[name]:
                globals()[key] = getattr(module, key)
        return globals()[name]
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
