"""Drop-in APIs of other integrators on flowsim's engine.

* :mod:`flowsim.compat.vegasflow`: VegasFlow 1.3's public API (``VegasFlow``,
  ``PlainFlow``, ``VegasFlowPlus``, the wrappers and samplers): replace
  ``import vegasflow`` by ``from flowsim.compat import vegasflow``.
* :mod:`flowsim.compat.vegas`: the everyday part of Lepage's ``vegas``
  (``Integrator(limits)(f, nitn=, neval=)``, ``batchintegrand``, ``AdaptiveMap``,
  ``PDFIntegrator``...).

Importing this package loads neither TensorFlow nor the submodules.
"""
