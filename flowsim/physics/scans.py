"""Parameter scans: one integral per row of a table, all on the same events.

Usage::

    import pandas as pd, flowsim

    def f(x, mass, width):                       # TF, keyword parameters
        ...

    table = pd.DataFrame({"mass": np.linspace(0.2, 0.8, 1000), "width": 0.05})
    out = flowsim.scan(f, 2, table, n_events=10**5, n_iter=5, seed=1)
    out[["mass", "value", "error"]]
    out.attrs["covariance"]                      # K x K (plain, K <= 100 by default)

The rows are the components of one vector integrand, ``f(x, **row)`` for every
row at every event (``tf.vectorized_map`` over the rows), so the rows share
their random numbers (common random numbers): differences between rows have
small errors of their own (``Result.difference``).  Any backend gives the same
bits, as for :func:`flowsim.integrate`.
"""
import numpy as np

from ..core.lazy_tf import tf

__all__ = ["ScanIntegrand", "scan", "scan_simulation"]


def _columns(table):
    """``(names, values [K, P] float64, DataFrame)`` of ``table``."""
    import pandas as pd
    if not isinstance(table, pd.DataFrame):
        try:
            table = pd.DataFrame(table)
        except (TypeError, ValueError) as exc:
            raise TypeError(f"table must be a pandas DataFrame (or dict of columns / list of "
                            f"rows) of parameter values, got {type(table).__name__}") from exc
    if table.shape[0] == 0 or table.shape[1] == 0:
        raise ValueError(f"table must have at least one row and one column, got shape "
                         f"{table.shape}")
    names = [str(c) for c in table.columns]
    bad = [n for n in names if not n.isidentifier()]
    if bad:
        raise ValueError(f"table columns must be the integrand's keyword names, got {bad}")
    try:
        values = table.to_numpy(dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise TypeError("table columns must hold numbers (they are passed to the integrand "
                        "as TF scalars)") from exc
    return names, values, table


class ScanIntegrand:
    """``f(x, **row)`` for every row of ``values`` as the columns of one
    ``[n, K]`` integrand (plus their sum as column ``K`` when ``with_sum``).
    Picklable when ``f`` is."""

    def __init__(self, f, names, values, with_sum=False):
        if not callable(f):
            raise TypeError(f"f must be callable, got {f!r}")
        self.f, self.names = f, list(names)
        self.values = np.asarray(values, dtype=np.float64)
        self.with_sum = bool(with_sum)
        self.__name__ = getattr(f, "__name__", "integrand")

    def __call__(self, x):
        t = tf()
        rows = {n: t.constant(self.values[:, j], x.dtype) for j, n in enumerate(self.names)}

        def one(row):
            out = t.convert_to_tensor(self.f(x, **row))
            if out.shape.rank != 1:
                raise ValueError(f"scan: f must return one value per point, shape [n], "
                                 f"for x of shape [n, {x.shape[1]}]; got {out.shape}")
            return out

        out = t.transpose(t.vectorized_map(one, rows))                      # [n, K]
        if self.with_sum:
            out = t.concat([out, t.reduce_sum(out, axis=1, keepdims=True)], axis=1)
        return out


def scan_simulation(f, dim, table, algorithm="plain", limits=None, reference="sum",
                    covariance=None, algorithm_options=None):
    """The Simulation :func:`scan` runs (for a Flow of your own, or a backend).

    Returns ``(simulation, names, values, table)``; see :func:`scan` for the arguments.
    """
    from ..algorithms.plain import Plain
    from ..algorithms.registry import algorithm_class
    from .integrands import CovariantPlain
    names, values, table = _columns(table)
    k = values.shape[0]
    cls = algorithm_class(algorithm)
    options = dict(algorithm_options or {})
    with_sum = False
    if cls is not Plain:
        if reference == "sum":
            with_sum = True
            options.setdefault("train", k)
        elif isinstance(reference, (int, np.integer)) and 0 <= reference < k:
            options.setdefault("train", int(reference))
        else:
            raise ValueError(f"reference must be 'sum' or a row index in [0, {k}), "
                             f"got {reference!r}")
    if covariance is None:
        covariance = cls is Plain and k <= 100
    if covariance:
        if cls is not Plain:
            raise ValueError("covariance=True needs algorithm='plain'")
        cls = CovariantPlain
    integrand = ScanIntegrand(f, names, values, with_sum=with_sum)
    return cls(integrand, dim, limits=limits, **options), names, values, table


def scan(f, dim, table, n_events, n_iter, seed=None, algorithm="plain", limits=None,
         backend=None, skip=0, reference="sum", covariance=None, algorithm_options=None,
         **flow_kwargs):
    """Integrate ``f(x, **row)`` for every row of ``table`` on the same events.

    Parameters
    ----------
    f : callable
        TF-traceable ``f(x, **params)``, ``x`` ``[n, dim]`` -> ``[n]``; the
        parameters are TF scalars named as ``table``'s columns.
    dim, n_events, n_iter, seed, limits, backend, skip, algorithm_options, **flow_kwargs
        As :func:`flowsim.integrate`.
    table : pandas.DataFrame
        One row per integral, one column per keyword parameter of ``f``.
    algorithm : {"plain", "vegas", "vegasplus"}
        With VEGAS(+) one map serves every row: it is adapted on ``reference``.
    reference : "sum" or int
        What trains the VEGAS(+) map: ``"sum"`` (default), the sum of the rows'
        integrands (a map good for all of them on average), or a row index (a
        map made for that row; rows far from it get larger errors).
    covariance : bool or None
        Also compute the ``K x K`` covariance between rows
        (``attrs["covariance"]``); plain only; default True for ``K <= 100``
        rows (its cost grows as ``K**2`` per event).

    Returns a DataFrame: ``table``'s columns, then ``value`` and ``error`` per
    row; ``attrs["result"]`` is the :class:`flowsim.Result` (components = rows)
    and ``attrs["covariance"]`` the covariance or None.
    """
    from ..distribution.registry import flow_class
    sim, names, values, table = scan_simulation(f, dim, table, algorithm, limits, reference,
                                                covariance, algorithm_options)
    flow = flow_class(backend)(sim, n_events=n_events, seed=seed, **flow_kwargs)
    result = flow.run(n_iter, skip=skip)
    k = values.shape[0]
    out = table.copy()
    out["value"] = np.atleast_1d(result.value)[:k]
    out["error"] = np.atleast_1d(result.error)[:k]
    out.attrs["result"] = result
    out.attrs["covariance"] = result.covariance
    return out


def example_bump(x, c, w):
    """``exp(-|x - c|^2 / w^2)``: a Gaussian bump of centre ``c`` (every axis) and
    width ``w``, the example integrand of scans (importable, so it pickles)."""
    t = tf()
    return t.exp(-t.reduce_sum(t.square(x - c), axis=1) / (w * w))


def example_wave(x, k):
    """``exp(i k x_0) (1 + x_1)``: a complex example integrand (picklable)."""
    t = tf()
    phase = t.exp(t.complex(t.zeros_like(x[:, 0]), k * x[:, 0]))
    return phase * t.complex(1.0 + x[:, 1], t.zeros_like(x[:, 1]))
