"""Combining per-iteration estimates: inverse-variance weights and chi^2/dof."""
import numpy as np


def weighted_average(values, errors):
    """Combine iteration estimates ``values ± errors`` (shape ``[n_iter, ...]``).

    Returns ``(mean, error, chi2_dof)``, elementwise for vector estimates.  The
    weights are ``1/error^2``; ``chi2_dof`` is ``sum((v - mean)^2 / error^2) /
    (n_iter - 1)`` (NaN for a single iteration).  Where an iteration has zero
    error (an exactly constant integrand) the zero-error iterations are averaged
    plainly and the error is 0.
    """
    v = np.asarray(values, dtype=np.float64)
    e = np.asarray(errors, dtype=np.float64)
    if v.shape != e.shape or v.ndim == 0 or v.shape[0] == 0:
        raise ValueError(f"values and errors must share a shape [n_iter, ...], "
                         f"got {v.shape} and {e.shape}")
    n = v.shape[0]
    zero = e == 0
    with np.errstate(divide="ignore", invalid="ignore"):
        w = np.where(zero, 0.0, 1.0 / np.where(zero, 1.0, e) ** 2)
        wsum = w.sum(axis=0)
        mean = (w * v).sum(axis=0) / wsum
        err = 1.0 / np.sqrt(wsum)
        chi2 = (w * (v - mean) ** 2).sum(axis=0) / (n - 1) if n > 1 else np.full(mean.shape, np.nan)
    anyzero = zero.any(axis=0)
    if np.any(anyzero):
        plain = np.where(zero, v, 0.0).sum(axis=0) / np.maximum(zero.sum(axis=0), 1)
        mean = np.where(anyzero, plain, mean)
        err = np.where(anyzero, 0.0, err)
        chi2 = np.where(anyzero, np.nan, chi2)
    return mean, err, chi2


def mean_and_error(total, m2, n):
    """Mean of ``n`` samples and the standard error of that mean.

    ``total`` is the sum of the samples, ``m2`` the sum of their squared
    deviations from the mean (see :func:`flowsim.plain.moments`).
    """
    mean = total / n
    var = np.maximum(m2, 0.0) / n / max(n - 1, 1)
    return mean, np.sqrt(var)
