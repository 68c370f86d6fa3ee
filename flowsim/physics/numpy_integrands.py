"""numpy integrands: a numpy/Python function run inside flowsim's TensorFlow kernel.

``flowsim.integrate(g, dim, ..., numpy=True)`` or :func:`numpy_integrand`
wraps ``g`` (numpy ``x`` ``[n, dim]`` in, numpy ``[n]`` or ``[n, k]`` out)
as a TF-traceable integrand through ``tf.numpy_function``.
"""
import numpy as np

from ..core.lazy_tf import tf


class NumpyIntegrand:
    """``function`` (numpy in, numpy out) as an integrand flowsim can trace.

    Parameters
    ----------
    function : callable
        ``function(x, **kwargs)`` with ``x`` a numpy ``[n, dim]`` array,
        returning ``[n]`` or ``[n, k]`` numbers (cast to ``x``'s dtype).
    components : int or None
        0 for ``[n]`` output, k for ``[n, k]``.  Default: found by calling
        ``function`` once on two points at the first trace.
    keywords : sequence of str
        Keyword arguments the caller passes as tensors (converted to numpy).

    Cost: every block leaves the compiled kernel, copies its points to numpy,
    runs Python, and copies the values back; the kernel cannot be compiled
    with XLA (flowsim turns ``jit_compile`` off for it), and the Python call
    holds the GIL, so threads on several devices do not run it in parallel.
    Expect it to be several times slower than the same integrand written in
    TensorFlow (figures: ``docs/performance.rst``); vectorise ``function``
    over the ``n`` points, never loop over them in Python.

    Picklable when ``function`` is (a module-level function; lambdas need
    ``cloudpickle``): every backend can ship it to its workers.
    """

    #: Recognised by flowsim's ``integrate`` to turn XLA off.
    needs_jit = False

    def __init__(self, function, components=None, keywords=()):
        if not callable(function):
            raise TypeError(f"numpy integrand must be callable, got {function!r}")
        self.function = function
        self.components = components
        self.keywords = tuple(keywords)
        self.__name__ = getattr(function, "__name__", "numpy_integrand")

    def _probe(self, dim, dtype, kwargs):
        x = np.full((2, dim), 0.5, dtype=dtype)
        values = {k: (np.ones(2, dtype) if len(getattr(v, 'shape', ()) or ()) else v)
                  for k, v in kwargs.items()}
        return self._check(self.function(x, **values), 2, dim)

    def _check(self, out, n, dim):
        out = np.asarray(out)
        if out.ndim == 1 and out.shape[0] == n:
            return 0
        if out.ndim == 2 and out.shape[0] == n:
            return out.shape[1]
        raise ValueError(f"numpy integrand {self.__name__} must return shape [n] or [n, k] "
                         f"for x of shape [n, {dim}]: got shape {list(out.shape)} for "
                         f"n = {n}; return one value (or one row) per point of x")

    def _run(self, k, dim, x, *values):
        out = np.asarray(self.function(x, **dict(zip(self.keywords, values))))
        if self._check(out, x.shape[0], dim) != k:
            raise ValueError(f"numpy integrand {self.__name__} returned shape "
                             f"{list(out.shape)}, but {k or 'no'} components when probed")
        return out.astype(getattr(x.dtype, "as_numpy_dtype", x.dtype), copy=False)

    def __call__(self, x, **kwargs):
        t = tf()
        dim = int(x.shape[1])
        dtype = x.dtype.as_numpy_dtype
        if self.components is None:
            self.components = self._probe(dim, dtype, kwargs)
        k = self.components
        values = [t.convert_to_tensor(kwargs[name]) for name in self.keywords]
        out = self._outside(lambda *a: self._run(k, dim, *a), [x, *values], x.dtype)
        out.set_shape([x.shape[0]] + ([k] if k else []))
        return out

    def _outside(self, fn, inputs, dtype):
        """The op running ``fn`` on ``inputs`` outside the graph."""
        return tf().numpy_function(fn, inputs, dtype, stateful=False)

    def __getstate__(self):
        return {"function": self.function, "components": self.components,
                "keywords": self.keywords, "__name__": self.__name__}

    def __setstate__(self, state):
        self.__dict__.update(state)


def numpy_integrand(function=None, *, components=None):
    """Decorator (or function) making a numpy integrand: ``@flowsim.numpy_integrand``.

    See :class:`NumpyIntegrand` for the cost.  Pass the result to
    :func:`flowsim.integrate` or any Simulation as the integrand; flowsim
    runs it without XLA.
    """
    if function is None:
        return lambda f: NumpyIntegrand(f, components=components)
    return NumpyIntegrand(function, components=components)
