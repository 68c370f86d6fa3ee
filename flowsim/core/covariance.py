"""Covariance between the components of a vector estimate.

A block returns ``cross``, the ``k x k`` sums of products of the deviations of
its events' values from the *block's own* mean (as ``m2`` is for one
component); :func:`pool_cross` pools the blocks about the overall mean (Chan
et al.), in block order, so the same rows give the same bits on every
backend.  An iteration's covariance of its mean is ``cross / (n (n - 1))``;
:func:`combine_covariance` combines iterations as :func:`flowsim.core.stats.combine`
combines their values.
"""
import numpy as np

from .lazy_tf import tf


def block_cross(values, valid):
    """``[k * k]`` sums of ``d_i d_j`` over the block, ``d = values - block mean``
    (rows outside ``valid`` count 0; ``values`` float64 ``[n, k]``)."""
    t = tf()
    w = t.cast(valid, t.float64)[:, None]
    count = t.reduce_sum(w)
    mean = t.reduce_sum(values * w, axis=0) / t.maximum(count, 1.0)
    dev = (values - mean) * w
    return t.reshape(t.matmul(dev, dev, transpose_a=True), [-1])


def pool_cross(sums, crosses, counts):
    """Pooled ``cross`` ``[k * k]`` of blocks given per block (``sums [B, k]``,
    ``crosses [B, k * k]``, ``counts [B]``), added in block order."""
    n = float(np.sum(counts))
    mean = np.sum(sums, axis=0) / max(n, 1.0)
    k = sums.shape[1]
    total = np.zeros((k, k))
    for s, c, m in zip(sums, crosses, counts):
        total += c.reshape(k, k)
        if m > 0:
            d = s / m - mean
            total += m * np.outer(d, d)
    return total.reshape(-1)


def covariance_of_mean(cross, n_events):
    """Covariance ``[k, k]`` of an iteration's mean from its pooled ``cross``."""
    k = int(round(np.sqrt(np.size(cross))))
    c = np.asarray(cross, dtype=np.float64).reshape(k, k)
    if n_events < 2:
        return np.full((k, k), np.inf)
    return c / (n_events * (n_events - 1.0))


def combine_covariance(records):
    """Covariance ``[k, k]`` of the combined value of iteration ``records``
    (each with ``value``, ``error``, ``events``, ``covariance``), or None.

    Iterations of one state (same ``state_id``) are pooled as one sample, as
    their values are.  Otherwise the values are averaged component by component
    with :func:`flowsim.core.stats.combine`'s floored weights: the correlations
    are those of that weighted average (its weights held fixed), the diagonal
    ``combine``'s squared errors.
    """
    if not records or any("covariance" not in r for r in records):
        return None
    cov = [np.asarray(r["covariance"], dtype=np.float64) for r in records]
    values = [np.atleast_1d(r["value"]).astype(np.float64) for r in records]
    events = np.array([r["events"] for r in records], dtype=np.float64)
    states = [r.get("state_id") for r in records]
    if states[0] is not None and all(s == states[0] for s in states):
        return _pooled(cov, values, events)
    errors = np.array([np.atleast_1d(r["error"]).astype(np.float64) for r in records])
    return _weighted_covariance(cov, values, errors, events, states)


def _weighted_covariance(cov, values, e, events, states):
    """:func:`combine_covariance` of iterations averaged with floored weights."""
    from .stats import combine, floored_stretches
    v = np.array(values)
    runs, _, variances = floored_stretches(v, e, events, states)
    with np.errstate(divide="ignore"):
        w = 1.0 / np.asarray(variances)
    if not np.all(np.isfinite(w)):
        w = np.array([1.0 / np.maximum(np.diag(c), 1e-300) for c in cov])
        runs = [[i] for i in range(len(cov))]
    stretch = [_pooled([cov[i] for i in idx], [values[i] for i in idx], events[idx])
               for idx in runs]
    total = w.sum(axis=0)
    sandwich = sum(np.outer(ws, ws) * c for ws, c in zip(w, stretch)) / np.outer(total, total)
    _, error, _ = combine(v, e, events, states)
    return _floored(sandwich, np.asarray(error) ** 2)


def _pooled(cov, values, events):
    """Covariance of the mean of iterations of one estimator, pooled as one sample."""
    n = events.sum()
    mean = sum(e * v for e, v in zip(events, values)) / n
    m2 = sum(c * e * (e - 1.0) + e * np.outer(v - mean, v - mean)
             for c, e, v in zip(cov, events, values))
    return m2 / (n * (n - 1.0)) if n > 1 else np.full_like(m2, np.inf)


def ratio(value, covariance, i, j):
    """``(v_i / v_j, error)`` with the error propagated to first order."""
    v = np.atleast_1d(value)
    c = np.asarray(covariance)
    r = v[i] / v[j]
    var = r * r * (c[i, i] / v[i] ** 2 + c[j, j] / v[j] ** 2 - 2.0 * c[i, j] / (v[i] * v[j]))
    return float(r), float(np.sqrt(max(var, 0.0)))


def difference(value, covariance, i, j):
    """``(v_i - v_j, error)``: the error includes their covariance."""
    v = np.atleast_1d(value)
    c = np.asarray(covariance)
    var = c[i, i] + c[j, j] - 2.0 * c[i, j]
    return float(v[i] - v[j]), float(np.sqrt(max(var, 0.0)))


def pairs(m):
    """The pairs ``(i, j)``, ``i < j``, of ``m`` components, in the order of
    :func:`with_pair_sums`' extra columns."""
    return [(i, j) for i in range(m) for j in range(i + 1, m)]


def with_pair_sums(values):
    """``values [n, m]`` followed by ``values_i + values_j`` for every pair (numpy).

    Every algorithm estimates the error of a column as it does the value's
    (stratified, adaptive), so the pair sums' errors give each iteration's
    covariance (:func:`covariance_from_pair_errors`) for any algorithm.
    """
    v = np.asarray(values)
    extra = [v[:, i] + v[:, j] for i, j in pairs(v.shape[1])]
    return np.concatenate([v, np.stack(extra, axis=1)], axis=1) if extra else v


def covariance_from_pair_errors(errors, m):
    """Covariance ``[m, m]`` of ``m`` components from the errors of
    :func:`with_pair_sums`' columns: ``cov_ij = (e_{i+j}^2 - e_i^2 - e_j^2) / 2``."""
    e = np.asarray(errors, dtype=np.float64)
    c = np.diag(e[:m] ** 2)
    for idx, (i, j) in enumerate(pairs(m)):
        c[i, j] = c[j, i] = (e[m + idx] ** 2 - e[i] ** 2 - e[j] ** 2) / 2.0
    return c


#: Eigenvalues of a correlation matrix below this times its size and largest
#: eigenvalue are dropped when it is inverted (as ``vegas``'s weighted averages do).
EIGEN_CUT = np.finfo(np.float64).eps * 1e4


def inverse(cov):
    """``(pseudo-inverse, rank)`` of a covariance matrix: inverted as a correlation
    matrix, modes with eigenvalues below :data:`EIGEN_CUT` (relative) dropped;
    components of zero variance get zero weight."""
    c = np.asarray(cov, dtype=np.float64)
    d = np.sqrt(np.maximum(np.diag(c), 0.0))
    live = d > 0
    out = np.zeros_like(c)
    if not live.any():
        return out, 0
    sub = c[np.ix_(live, live)] / np.outer(d[live], d[live])
    lam, vec = np.linalg.eigh((sub + sub.T) / 2.0)
    keep = lam > EIGEN_CUT * len(lam) * max(lam.max(), 0.0)
    inv = (vec[:, keep] / lam[keep]) @ vec[:, keep].T
    out[np.ix_(live, live)] = inv / np.outer(d[live], d[live])
    return out, int(keep.sum())


def _floored(cov, variances):
    """``cov`` rescaled so that its diagonal is ``variances`` (correlations kept)."""
    c = np.asarray(cov, dtype=np.float64)
    d = np.sqrt(np.maximum(np.diag(c), 0.0))
    with np.errstate(divide="ignore", invalid="ignore"):
        corr = np.where(np.outer(d, d) > 0, c / np.outer(d, d), 0.0)
    np.fill_diagonal(corr, 1.0)
    s = np.sqrt(variances)
    return corr * np.outer(s, s)


def combine_correlated(values, covariances, events, states=None):
    """Combine iterations of a vector estimate with their covariances.

    ``values [T, k]``, ``covariances [T, k, k]``, ``events [T]``, ``states``
    as for :func:`flowsim.core.stats.combine`.  Returns ``(value [k], covariance
    [k, k], chi2, dof)``.

    Consecutive iterations of one state are pooled as one sample (their
    values as :func:`flowsim.core.stats.combine` pools them).  Stretches of
    different states (an adapting map) are averaged as Lepage's ``vegas``
    averages vectors, each weighted by the inverse of its covariance matrix:
    ``value = C sum_s C_s^-1 v_s`` with ``C = (sum_s C_s^-1)^-1`` -- but each
    ``C_s`` first rescaled (its correlations kept) so that its diagonal is the
    floored variance :func:`flowsim.core.stats.combine` gives that stretch, so no
    stretch gets overwhelming weight from an underestimated error.  ``chi2 =
    sum_s (v_s - value)^T C_s^-1 (v_s - value)`` with ``dof = sum_s rank(C_s) -
    k``; ``C`` is multiplied by ``chi2 / dof`` when that exceeds 1 (the scale
    factor :func:`flowsim.core.stats.combine` applies to errors).  One component
    gives :func:`flowsim.core.stats.combine`'s value and error when every stretch
    is one iteration or all are pooled.
    """
    from .stats import floored_stretches
    v = np.asarray(values, dtype=np.float64)
    cov = np.asarray(covariances, dtype=np.float64)
    n = np.asarray(events, dtype=np.float64)
    errors = np.sqrt(np.maximum(np.diagonal(cov, axis1=1, axis2=2), 0.0))
    runs, means, variances = floored_stretches(v, errors, n, states)
    stretch_cov = [_pooled(list(cov[idx]), list(v[idx]), n[idx]) for idx in runs]
    if len(runs) == 1 or not np.all(np.isfinite(variances)):
        value = sum(e * x for e, x in zip(n, v)) / n.sum()
        return value, _pooled(list(cov), list(v), n), *_scatter(v, cov, value)
    weights = [inverse(_floored(c, var)) for c, var in zip(stretch_cov, variances)]
    total = sum(w for w, _ in weights)
    combined, _ = inverse(total)
    value = combined @ sum(w @ m for (w, _), m in zip(weights, means))
    chi2 = float(sum((m - value) @ w @ (m - value) for (w, _), m in zip(weights, means)))
    dof = sum(r for _, r in weights) - v.shape[1]
    if dof > 0 and chi2 > dof:
        combined = combined * (chi2 / dof)
    return value, combined, chi2, dof


def _scatter(values, covariances, value):
    """``(chi2, dof)`` of iterations about ``value``, each with its own covariance."""
    chi2, rank = 0.0, 0
    for x, c in zip(values, covariances):
        w, r = inverse(c)
        chi2 += float((x - value) @ w @ (x - value))
        rank += r
    return chi2, rank - values.shape[1]
