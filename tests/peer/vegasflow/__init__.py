"""VegasFlow 1.3.0's own tests (src/vegasflow/tests of its sdist, unchanged; Apache-2.0,
LICENSE beside), run with ``vegasflow`` resolved to :mod:`flowsim.compat.vegasflow`."""
