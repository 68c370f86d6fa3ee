"""``tf_integral``: a Monte Carlo integral as TensorFlow ops, differentiable.

Usage::

    theta = tf.Variable(0.3, dtype=tf.float64)
    with tf.GradientTape() as tape:
        value, error = flowsim.tf_integral(f, 2, 10**5, params={"s": theta}, seed=1)
        loss = (value - 1.0) ** 2
    tape.gradient(loss, theta)

It works inside ``tf.function`` and ``tf.GradientTape`` on whatever device the
caller runs.  Its custom gradient with respect to the parameters (and to
variables the integrand captures) is ``mean(df/dtheta(x) J(x))`` on the same
events, recomputed block by block: an unbiased estimate of ``dI/dtheta``
(the map does not depend on ``theta``).  With ``seed``, ``iteration`` and
``block_size`` of a Flow's run, the events are that run's: the value equals
``flowsim.integrate``'s to rounding.  To importance-sample, train a :class:`flowsim.Vegas` or
:class:`flowsim.VegasPlus` with a Flow first and pass it as ``grid``: its
map is used frozen (VegasPlus's stratification is not: its map alone).
"""
from ..core import rng
from ..core.lazy_tf import tf

__all__ = ["map_unit", "tf_integral"]


def map_unit(edges, y):
    """A VEGAS map as TF ops: unit-cube ``y`` ``[n, dim]`` and ``edges``
    ``[dim, bins + 1]`` (fractions of each axis) -> ``(x01, jacobian)``."""
    t = tf()
    e = t.cast(edges, y.dtype)
    dim, n = int(e.shape[0]), int(e.shape[1]) - 1
    z = y * n
    iy = t.minimum(t.cast(z, t.int32), n - 1)
    ids = iy + t.range(dim, dtype=t.int32) * n
    left = t.gather(t.reshape(e[:, :-1], [-1]), ids)
    width = t.gather(t.reshape(e[:, 1:] - e[:, :-1], [-1]), ids)
    return left + width * (z - t.cast(iy, y.dtype)), t.reduce_prod(width * n, axis=1)


def tf_integral(f, dim, n_events, params=None, seed=0, iteration=0, limits=None, grid=None,
                dtype="float64", block_size=65536):
    """``(value, error)`` tensors of ``integral f(x, **params) dx`` over ``limits``.

    Parameters
    ----------
    f : callable
        TF integrand ``f(x, **params)``, ``x`` ``[n, dim]`` -> ``[n]`` (or ``[n, k]``).
    dim, n_events : int
        Dimension; events of the estimate.
    params : dict or None
        Keyword arguments of ``f``: tensors or ``tf.Variable`` (what gradients
        flow to), or numbers.
    seed : int
        Random stream (flowsim's SplitMix64, as a Flow's).
    iteration : int or scalar int tensor
        Which draw of the stream (default 0).  The same ``iteration`` gives the
        same events at every call, so the integral is a smooth, deterministic
        function of ``params`` (what a fit or optimiser wants); pass the step
        counter for fresh events at each step.
    limits : array [dim, 2] or None
        Integration box (default unit cube; taken from ``grid`` if given).
    grid : flowsim.Vegas or flowsim.VegasPlus or None
        A trained map, used frozen (its edges are read at trace time).
    dtype : {"float64", "float32"}
        Precision of the points and of ``f``.
    block_size : int
        Events per random-number block (part of the stream).

    The error is the standard error of the mean of ``f J`` over the events.
    The gradient is a custom one: the backward pass recomputes the integrand
    block by block, so its memory is that of one block whatever ``n_events``;
    the error is treated as a constant (no gradient flows through it).
    """
    from ..core.integrand import Domain
    t = tf()
    dtype = t.as_dtype(dtype)
    domain = grid.domain if grid is not None else Domain(dim, limits)
    names = list(params or {})
    theta = [t.convert_to_tensor(params[k], dtype=dtype) for k in names]
    n_events = int(n_events)
    edges = None if grid is None else grid.edges
    starts = range(0, n_events, int(block_size))

    def block(b, values):
        """Sums of ``v = f J V`` and ``v^2`` over block ``b``."""
        size = min(int(block_size), n_events - starts[b])
        key = t.stack([t.constant(int(seed), t.int64),
                       t.bitwise.left_shift(t.cast(iteration, t.int64), 32) + b])
        y = rng.uniform(key, [size, dim], dtype, algorithm="splitmix")
        jac = t.ones([size], dtype)
        if edges is not None:
            y, jac = map_unit(edges, y)
        v = t.cast(f(domain.map(y), **dict(zip(names, values))), t.float64)
        w = t.cast(jac, t.float64) * domain.volume
        v = v * (w if v.shape.rank == 1 else w[:, None])
        return t.reduce_sum(v, axis=0), t.reduce_sum(v * v, axis=0)

    @t.custom_gradient
    def integral(*values):
        total = sq = 0.0
        for b in range(len(starts)):
            s1, s2 = block(b, values)
            total, sq = total + s1, sq + s2
        mean = total / n_events
        var = t.maximum(sq / n_events - mean * mean, 0.0) * n_events / max(n_events - 1, 1)

        def grad(d_value, d_error, variables=None):
            # block by block, each with its own tape: memory of one block, not of n_events
            del d_error                                   # the error is treated as constant
            wrt = list(values) + list(variables or [])
            acc = [t.zeros_like(w) for w in wrt]
            for b in range(len(starts)):
                with t.GradientTape() as tape:
                    tape.watch(values)
                    s1, _ = block(b, values)
                g = tape.gradient(s1, wrt, output_gradients=d_value / n_events,
                                  unconnected_gradients=t.UnconnectedGradients.ZERO)
                acc = [a + t.cast(gi, a.dtype) for a, gi in zip(acc, g)]
            k = len(values)
            return (acc[:k], acc[k:]) if variables is not None else acc[:k]

        return (mean, t.sqrt(var / n_events)), grad

    return integral(*theta)
