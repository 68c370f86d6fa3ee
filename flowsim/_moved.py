"""Old module paths of flowsim, kept importing: one table instead of a file each.

``import flowsim.flow`` (and ``flowsim.flow`` as an attribute) gives the module
object of :mod:`flowsim.core.flow` itself, so patching an old path patches the
running code, with a :class:`DeprecationWarning` naming the new path.
``flowsim.sweep`` stays the function :func:`flowsim.sweep` on the package even
after ``import flowsim.sweep``: that one path is bound in ``sys.modules`` when
flowsim loads, so it gives no warning.
"""
import importlib
import importlib.abc
import importlib.util
import sys
import warnings

#: Old module path -> where its code lives now.  A module that moved twice keeps both
#: old paths, its first one listed first: fingerprints hash a module under its first
#: name (:func:`first_names`), so checkpoints written before a move stay valid.
MOVED = {
    "flowsim.simulation": "flowsim.core.simulation", "flowsim.flow": "flowsim.core.flow",
    "flowsim.backend": "flowsim.core.backend", "flowsim.kernel": "flowsim.core.kernel",
    "flowsim.blocks": "flowsim.core.blocks", "flowsim.reduce": "flowsim.core.sums",
    "flowsim.rng": "flowsim.core.rng", "flowsim.domain": "flowsim.core.integrand",
    "flowsim.stats": "flowsim.core.stats", "flowsim.result": "flowsim.core.result",
    "flowsim.checkpoint": "flowsim.core.checkpoint",
    "flowsim.fingerprint": "flowsim.core.fingerprint", "flowsim._tf": "flowsim.core.lazy_tf",
    "flowsim.log": "flowsim.core.log", "flowsim.plain": "flowsim.algorithms.plain",
    "flowsim.vegas": "flowsim.algorithms.vegas",
    "flowsim.vegasplus": "flowsim.algorithms.vegasplus",
    "flowsim.histogram": "flowsim.algorithms.histogram",
    "flowsim.sweep": "flowsim.algorithms.sweep", "flowsim.api": "flowsim.physics.integrator",
    "flowsim.backends": "flowsim.distribution.registry", "flowsim.examples": "flowsim.targets",
    "flowsim.finance.sweep": "flowsim.finance.backtest",
    "flowsim.integrator": "flowsim.physics.integrator",
    "flowsim.integrands": "flowsim.physics.integrands",
    "flowsim.numpy_integrands": "flowsim.physics.numpy_integrands",
    "flowsim.gradients": "flowsim.physics.gradients", "flowsim.scans": "flowsim.physics.scans",
    "flowsim.math": "flowsim.core.fastmath", "flowsim.finance.fastmath": "flowsim.core.fastmath",
    "flowsim.envs.market": "flowsim.envs.stocks",
    "flowsim.envs.history": "flowsim.envs.portfolio_history",
    "flowsim.envs.render": "flowsim.envs.portfolio_render",
}

#: Modules whose old path is a package now, its former code moved inside: the path
#: imports as the package (no alias), fingerprints still hash the code under it.
FOLDED = {"flowsim.algorithms": "flowsim.algorithms.registry"}


def first_names():
    """New module path -> the first name its code had (from :data:`MOVED` and
    :data:`FOLDED`): what fingerprints hash, so they do not change when a module moves."""
    names = {}
    for old, new in [*FOLDED.items(), *MOVED.items()]:
        names.setdefault(new, old)
    return names


def warn(old, stacklevel=3):
    warnings.warn(f"{old} moved to {MOVED[old]}; import that (the old path will go)",
                  DeprecationWarning, stacklevel=stacklevel)


class MovedFinder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Finds the old paths of :data:`MOVED` and loads each as its new module."""

    def find_spec(self, name, path=None, target=None):
        if name in MOVED:
            return importlib.util.spec_from_loader(name, self)
        return None

    def create_module(self, spec):
        warn(spec.name, stacklevel=6)
        return importlib.import_module(MOVED[spec.name])

    def exec_module(self, module):
        """The new module ran already."""


def install():
    if not any(isinstance(f, MovedFinder) for f in sys.meta_path):
        sys.meta_path.insert(0, MovedFinder())
