"""Public names of a package imported on first use (PEP 562), from one table.

Usage, in a package's ``__init__.py``::

    from ..core.lazy import attach

    __getattr__, __dir__, __all__ = attach(__name__, {"timeline": "timeline",
                                                      "grid": "convergence"})

``package.grid`` then imports ``package.convergence`` and returns its ``grid``;
every name the table takes from that submodule is bound on the package at once
(so a submodule named like one of its functions, ``timeline``, does not shadow
the function).  ``submodules`` are names that import as ``package.<name>``;
``needs`` completes the ``ImportError`` of a name whose submodule's optional
dependency is missing (``"gymnasium: pip install 'flowsim[envs]'"``).
In the style of the ``lazy_loader`` package; importing this module imports
nothing else.
"""
import importlib
import sys


def attach(package, names, submodules=(), needs=None):
    """``(__getattr__, __dir__, __all__)`` for ``package`` (its ``__name__``) with
    ``names``: ``{public name: submodule, relative to the package}``."""
    submodules = frozenset(submodules)

    def __getattr__(name):
        if name in submodules:
            return importlib.import_module(f"{package}.{name}")
        if name not in names:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        where = names[name]
        try:
            module = importlib.import_module(f"{package}.{where}")
        except ImportError as exc:
            if needs is None:
                raise
            raise ImportError(f"{package}.{name} needs {needs} ({exc})") from exc
        namespace = vars(sys.modules[package])
        for other, other_where in names.items():
            if other_where == where:
                namespace[other] = getattr(module, other)
        return namespace[name]

    def __dir__():
        return sorted(set(vars(sys.modules[package])) | set(names) | submodules)

    return __getattr__, __dir__, list(names)
