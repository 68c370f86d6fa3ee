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
    their values are; otherwise each component is weighted by ``1 / error**2``
    (the covariance of that weighted average; :func:`flowsim.core.stats.combine`
    floors the weights of its values, which this ignores).
    """
    if not records or any("covariance" not in r for r in records):
        return None
    cov = [np.asarray(r["covariance"], dtype=np.float64) for r in records]
    values = [np.atleast_1d(r["value"]).astype(np.float64) for r in records]
    events = np.array([r["events"] for r in records], dtype=np.float64)
    states = [r.get("state_id") for r in records]
    if states[0] is not None and all(s == states[0] for s in states):
        return _pooled(cov, values, events)
    w = [1.0 / np.maximum(np.diag(c), 1e-300) for c in cov]
    total = sum(w)
    return sum(np.outer(wi, wi) * c for wi, c in zip(w, cov)) / np.outer(total, total)


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
