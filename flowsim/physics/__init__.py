"""Integration as a physicist calls it: :func:`flowsim.integrate` and what it takes.

``integrator`` (:func:`flowsim.integrate`), ``integrands`` (vector, covariant and
dual integrands: what ``integrate`` builds from them), ``numpy_integrands``
(numpy integrands, :func:`flowsim.numpy_integrand`), ``gradients``
(:func:`flowsim.tf_integral`: integrals TensorFlow differentiates), ``scans``
(:func:`flowsim.scan`: an integral over a table of parameters), ``unweighted``
(:func:`flowsim.unweighted`: unweighted events from an adapted map), ``unbounded``
(:func:`flowsim.unbounded`: infinite limits by a change of variables).  Importing this
package loads no TensorFlow.
"""
