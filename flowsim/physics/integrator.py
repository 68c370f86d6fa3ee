"""`integrate`: an integrand to a :class:`flowsim.Result` in one call."""
from ..algorithms.registry import algorithm_class
from ..distribution.registry import flow_class


def integrate(f, dim, n_events, n_iter, seed=None, algorithm="plain", limits=None,
              backend=None, checkpoint=None, skip=0, algorithm_options=None, params=None,
              numpy=False, covariance=None, freeze_after=None, **flow_kwargs):
    """Integrate ``f`` over ``limits`` and return a :class:`flowsim.Result`.

    Parameters
    ----------
    f : callable
        TF-traceable integrand, ``x`` ``[n, dim]`` -> ``[n]`` or ``[n, k]``.
    dim : int
        Number of variables.
    n_events : int
        Events per iteration.
    n_iter : int
        Iterations (the combined estimate uses all but the first ``skip``).
    seed : int or None
        Random seed; same seed, same bits on every backend.
    algorithm : {"plain", "vegas", "vegasplus"}
        Monte Carlo algorithm.
    limits : array of shape (dim, 2) or None
        Integration box (default unit cube); entries may be ``-np.inf`` /
        ``np.inf``: infinite axes are sampled after the change of variables of
        :mod:`flowsim.physics.unbounded`.
    backend : None, str or callable
        Where chunks run: None (default, one device), ``"threads"``,
        ``"scheduled"``, ``"mpi"``, ``"spark"``, ``"joblib"``, a name given to
        :func:`flowsim.register_backend` or an installed package's entry point
        (group ``flowsim.backends``), or ``"module:factory"``
        (:mod:`flowsim.distribution.registry`).
    checkpoint : path or None
        Resume from / write to this checkpoint.
    algorithm_options : dict or None
        Extra keywords for the algorithm class (e.g. ``{"n_bins": 100}``).
    params : dict or None
        ``{name: number}``: ``f`` is called as ``f(x, **params)`` with TF scalars,
        and ``Result.gradient[name]`` is ``(dI/dname, error)``, estimated from
        the same events (:mod:`flowsim.physics.integrands`).
    numpy : bool
        ``f`` is a numpy function (numpy ``x`` in, numpy values out), run
        through ``tf.numpy_function`` without XLA
        (:class:`flowsim.physics.numpy_integrands.NumpyIntegrand`: several times slower).
    covariance : bool or None
        Accumulate the covariance of a vector integrand's components
        (``Result.covariance``, ``Result.ratio``, ``Result.difference``):
        cross-products per block with plain Monte Carlo; with VEGAS(+) the
        ``k (k - 1) / 2`` pair sums as extra components.  Default: only for
        complex integrands, whose value is then complex with
        ``Result.correlation`` of its parts.
    freeze_after : int or None
        With ``"vegas"`` or ``"vegasplus"``: the first ``freeze_after`` of the
        ``n_iter`` iterations train the map, then it is frozen and the result
        combines only the later iterations (``skip`` becomes at least
        ``freeze_after``; the training iterations stay in the table).  The
        measured iterations share one map, so they pool as one sample and the
        value and its gradients carry no bias from a map trained on their own
        events.  Default None: the map trains at every iteration.
    **flow_kwargs
        Passed to the Flow (``events_limit``, ``device``, ``dtype``, ...) and
        the backend (``devices``, ``schedule``, ``n_jobs``... or a registered
        backend's own keywords).
    """
    from .integrands import Plan
    if freeze_after is not None:
        skip, algorithm_options = _frozen_after(freeze_after, algorithm, n_iter, skip,
                                                algorithm_options)
    plan = Plan(f, algorithm, params=params, numpy=numpy, covariance=covariance)
    if plan.numpy:
        flow_kwargs.setdefault("jit_compile", False)
    sim = plan.simulation(algorithm_class(algorithm), dim, limits,
                          dict(algorithm_options or {}), n_events=n_events)
    flow = flow_class(backend)(sim, n_events=n_events, seed=seed, **flow_kwargs)
    return plan.finish(flow.run(n_iter, checkpoint=checkpoint, skip=skip))


def _frozen_after(freeze_after, algorithm, n_iter, skip, algorithm_options):
    """``(skip, algorithm_options)`` of ``integrate(..., freeze_after=k)``."""
    if algorithm not in ("vegas", "vegasplus"):
        raise ValueError(f"freeze_after needs an adaptive algorithm (\"vegas\" or "
                         f"\"vegasplus\"), got algorithm={algorithm!r}; drop freeze_after "
                         f"for plain Monte Carlo")
    if isinstance(freeze_after, bool) or not isinstance(freeze_after, int) or freeze_after < 1:
        raise ValueError(f"freeze_after must be an int >= 1, got {freeze_after!r}")
    if freeze_after >= n_iter:
        raise ValueError(f"freeze_after ({freeze_after}) must be smaller than n_iter "
                         f"({n_iter}): the iterations after it are the result")
    return max(skip, freeze_after), {**(algorithm_options or {}), "freeze_after": freeze_after}
