"""VegasFlow 1.3's public API on flowsim's engine.

Replace ``import vegasflow`` (or ``from vegasflow import ...``) by::

    from flowsim.compat import vegasflow
    from flowsim.compat.vegasflow import VegasFlow, vegas_wrapper, float_me

and a VegasFlow script runs on flowsim: ``VegasFlow(n_dim, n_events)``,
``.compile(f)``, ``.run_integration(n_iter)`` -> ``(value, error)``; the
classes ``PlainFlow``, ``VegasFlow``, ``VegasFlowPlus`` with ``set_seed``,
``freeze_grid``/``unfreeze_grid``, ``save_grid``/``load_grid`` (VegasFlow's
JSON), ``make_differentiable``, ``run_event``, ``xmin``/``xmax``,
``main_dimension``, ``events_limit``, ``list_devices``; the wrappers
``vegas_wrapper``, ``plain_wrapper``, ``vegasflowplus_wrapper`` and samplers
``plain_sampler``, ``vegas_sampler``, ``vegasflowplus_sampler``; ``float_me``,
``int_me``, ``run_eager``, ``DTYPE``, ``DTYPEINT``.  Integrands may take
``f(xarr)``, ``f(xarr, n_dim=None)``, ``f(xarr, weight=None)`` or
``f(xarr, n_dim=None, weight=None)``; histograms are ``tf.Variable`` the
integrand fills with ``weight``, passed as ``run_integration(n,
histograms=(h,))``.  The submodules ``configflow``, ``monte_carlo``,
``plain``, ``utils``, ``vflow``, ``vflowplus`` mirror VegasFlow's.  Each
iteration prints a line as in VegasFlow (the ``vegasflow`` logger's console
handler, added at import when it has none: :mod:`.configflow`).  An integrand
XLA cannot compile runs without XLA (one line on the ``flowsim`` logger); one
compiled with ``compilable=False`` or under ``run_eager(True)`` receives eager
tensors.

Where VegasFlow's behaviour was wrong, this module has flowsim's:

* **Seeds.** ``set_seed(s)`` fixes every bit of every later iteration
  whatever the devices, their number and ``events_limit`` (VegasFlow called
  ``tf.random.set_seed``: every device drew the same numbers, so with a
  seed the chunks repeated each other, the error was under-estimated, and
  the result changed with the device count).
* **Combining iterations** follows :class:`flowsim.Result` (iterations of one
  state pooled; an adapting grid's averaged with floored weights), not the
  plain ``1 / error**2`` average.
* **Histograms** the integrand fills are emptied before each iteration and
  combined as in VegasFlow; the ``weight`` is 0 for a block's padding
  events.  Under threads their ``assign_add`` is TensorFlow's, atomic per
  op (VegasFlow's ``var.assign(partial + var)`` pattern loses events under
  threads: write ``var.assign_add``).  flowsim's own
  :class:`flowsim.Histogram` is exact on every backend.
* **VegasFlowPlus** runs in blocks on any number of devices and accepts
  vector integrands; ``load_grid`` refuses arrays that are not a map
  (edges from 0 to 1, increasing on every axis).
* ``run_event`` (the function :meth:`make_differentiable` returns) gives the
  ``(value, error)`` of one iteration, differentiable, in place of
  VegasFlow's raw per-call sums.

Not provided: ``set_distribute`` (dask; it raises NotImplementedError): use flowsim's backends
(``flowsim.integrate(..., backend="mpi" | "spark" | "joblib")``).
"""
from .configflow import DTYPE, DTYPEINT, float_me, int_me, run_eager
from .plain import PlainFlow, plain_sampler, plain_wrapper
from .vflow import VegasFlow, vegas_sampler, vegas_wrapper
from .vflowplus import VegasFlowPlus, vegasflowplus_sampler, vegasflowplus_wrapper

__version__ = "1.3.0"

__all__ = ["DTYPE", "DTYPEINT", "PlainFlow", "VegasFlow", "VegasFlowPlus", "float_me",
           "int_me", "plain_sampler", "plain_wrapper", "run_eager", "vegas_sampler",
           "vegas_wrapper", "vegasflowplus_sampler", "vegasflowplus_wrapper"]
