"""Combining iterations into one estimate: pooling, floored weights, chi^2/dof.

Every iteration record carries ``value``, ``error`` (the standard error of
``value``) and ``events``.  How iterations combine depends on whether they are
draws of the *same* estimator:

* Consecutive iterations run with the same kernel state (the same VEGAS map and
  hypercube allocation; plain Monte Carlo, path pricing and any simulation
  whose state never changes) are independent draws of one estimator.  They are
  **pooled**: the combined value and error are those of one iteration with all
  their events (:func:`pool`).  Weighting such iterations by their own
  estimated errors would be biased: an iteration that missed a peak has a low
  value *and* a low error, and would be favoured.
* Stretches of different state (an adapting VEGAS map) are combined by a
  **weighted average**, as Lepage's ``vegas`` does, but with each stretch's
  variance floored (:func:`combine`), so that no stretch gets infinite or
  overwhelming weight from a zero or underestimated error.
"""
import numpy as np


def _pooled_moments(values, errors, events):
    """``(mean, m2, n)`` of the samples behind iterations ``values ± errors``.

    An iteration of ``n`` events with standard error ``e`` had a sum of squared
    deviations ``m2 = e² n (n - 1)`` about its own mean; the pooled ``m2`` adds
    the spread of the iteration means (Chan et al.), as if one sample.
    """
    n = np.asarray(events, dtype=np.float64).reshape((-1,) + (1,) * (values.ndim - 1))
    total = n.sum(axis=0)
    mean = (n * values).sum(axis=0) / total
    with np.errstate(invalid="ignore"):
        own = np.where(n > 1, errors ** 2 * n * (n - 1), 0.0)
    m2 = own.sum(axis=0) + (n * (values - mean) ** 2).sum(axis=0)
    return mean, m2, total


def _variance_of_mean(m2, n):
    """``m2 / (n (n - 1))``: infinite for one event (no spread to measure)."""
    if n < 2:
        return np.full(np.shape(m2), np.inf)
    return m2 / (n * (n - 1))


def pool(values, errors, events):
    """Pool iterations of one estimator: ``(value, error)`` of all their events.

    Exactly one iteration of ``sum(events)`` events (for plain Monte Carlo, up
    to the order of additions).  The error of a single event is infinite.
    """
    v, e = _check(values, errors, events)
    mean, m2, n = _pooled_moments(v, e, events)
    return mean, np.sqrt(_variance_of_mean(m2, n))


def _check(values, errors, events):
    v = np.asarray(values, dtype=np.float64)
    e = np.asarray(errors, dtype=np.float64)
    if v.shape != e.shape or v.ndim == 0 or v.shape[0] == 0:
        raise ValueError(f"values and errors must share a shape [n_iter, ...], "
                         f"got {v.shape} and {e.shape}")
    if np.shape(events) != (v.shape[0],):
        raise ValueError(f"events must have one count per iteration ({v.shape[0]}), "
                         f"got shape {np.shape(events)}")
    return v, e


def _stretches(keys):
    """Runs of consecutive equal keys as index lists (None never pools)."""
    runs = []
    for i, key in enumerate(keys):
        if runs and key is not None and keys[runs[-1][-1]] == key:
            runs[-1].append(i)
        else:
            runs.append([i])
    return runs


def combine(values, errors, events, states=None):
    """Combine iterations ``values ± errors`` (``[n_iter, ...]``, elementwise).

    Parameters
    ----------
    values, errors : array ``[n_iter, ...]``
        Per-iteration estimates and their standard errors.
    events : sequence of int
        Events of each iteration.
    states : sequence or None
        A key per iteration naming the kernel state it ran with (``None``: a
        state of its own).  Consecutive iterations with equal keys are pooled
        (:func:`pool`).  Default: every iteration has its own state.

    Returns ``(value, error, chi2_dof)``.

    One stretch (all iterations in one state) is pooled: exactly one sample.
    Several stretches ``s`` (an adapting map), each pooled, with ``n_s`` events
    and per-event variance ``σ_s² = error_s² n_s``, are averaged with weights
    ``n_s / max(σ_s², F_s)``.  The floor ``F_s`` is the per-event variance of
    stretches ``s - 1, s, ..., last`` pooled as one sample (their spread
    included).  An adapting map improves from one iteration to the next, so a
    stretch may be better than those before it, but one that looks much
    better than its predecessor and its successors together has an error that
    came out low by chance -- typically because its events missed a peak,
    which also made its value low.  A stretch with error 0 (a sparse
    integrand no event hit) measured nothing about its spread: it counts as
    the least precise stretch of the run (or all iterations pooled, if that is
    larger).  So no stretch gets infinite or overwhelming weight,
    while a map that really improves keeps its advantage.  The error is
    ``1 / sqrt(sum of weights)``, multiplied by ``sqrt(chi2_dof)`` when that
    exceeds 1 (the stretches scatter more than their errors allow: the
    Particle Data Group's scale factor).

    ``chi2_dof`` is ``sum_i (v_i - value)² / e_i² / (n_iter - 1)`` over the
    iterations, each ``e_i²`` floored as above: how far they scatter about
    the result compared with their errors.  Near 1 when the errors are honest
    and the iterations agree; well above 1 when they do not, e.g. when an
    adaptive map found a peak it had missed.  ``None`` for one iteration.

    No rule can repair iterations that all missed the same peak (a VEGAS map
    that adapted to one of two peaks): they agree with each other, and only
    more events per iteration, or stratification (:class:`flowsim.VegasPlus`),
    find the peak.
    """
    v, e = _check(values, errors, events)
    n = np.asarray(events, dtype=np.float64)
    k = v.shape[0]
    keys = [None] * k if states is None else list(states)
    if len(keys) != k:
        raise ValueError(f"states must have one key per iteration ({k}), got {len(keys)}")
    column = (-1,) + (1,) * (v.ndim - 1)
    runs = _stretches(keys)
    if len(runs) == 1:
        value, error = pool(v, e, n)
        _, m2, total = _pooled_moments(v, e, n)
        with np.errstate(divide="ignore", invalid="ignore"):
            floored = np.where(e > 0, e ** 2, m2 / (total - 1) / n.reshape(column))
    else:
        value, error, var = _weighted(v, e, n, runs)
        floored = np.concatenate([np.broadcast_to(var[j] * n[idx].sum() / n[idx].reshape(column),
                                                  v[idx].shape)
                                  for j, idx in enumerate(runs)])
    chi2 = None
    if k > 1:
        with np.errstate(divide="ignore", invalid="ignore"):
            terms = np.where(floored > 0, (v - value) ** 2 / floored,
                             np.where(v == value, 0.0, np.inf))
        chi2 = terms.sum(axis=0) / (k - 1)
        if len(runs) > 1:
            error = error * np.sqrt(np.maximum(np.nan_to_num(chi2, posinf=1.0), 1.0))
    return value, error, chi2


def floored_stretches(values, errors, events, states):
    """What :func:`combine` averages: ``(runs, means, variances)``.

    ``runs`` lists the iterations pooled into each stretch (consecutive equal
    ``states``), ``means [S, ...]`` their pooled values and ``variances
    [S, ...]`` the floored variances of those values whose inverses are the
    weights (see :func:`combine`).  Used to combine correlated components with
    the same weights (:func:`flowsim.core.covariance.combine_correlated`).
    """
    v, e = _check(values, errors, events)
    n = np.asarray(events, dtype=np.float64)
    runs = _stretches([None] * v.shape[0] if states is None else list(states))
    sv, _, var = _floored(v, e, n, runs)
    return runs, sv, var


def _floored(v, e, n, runs):
    """Stretch means, events and floored variances of the means (see :func:`combine`)."""
    column = (-1,) + (1,) * (v.ndim - 1)
    moments = [_pooled_moments(v[idx], e[idx], n[idx]) for idx in runs]
    sv = np.array([m for m, _, _ in moments])
    sn = np.array([c for _, _, c in moments]).reshape(column)
    with np.errstate(divide="ignore", invalid="ignore"):
        s2 = np.array([m2 / (c - 1) if c > 1 else np.full(m.shape, np.inf)
                       for m, m2, c in moments])
    _, m2_all, n_all = _pooled_moments(v, e, n)
    everything = m2_all / (n_all - 1)
    floor = []
    for j in range(len(runs)):
        tail = [i for idx in runs[max(j - 1, 0):] for i in idx]
        _, m2, c = _pooled_moments(v[tail], e[tail], n[tail])
        floor.append(m2 / (c - 1))
    floor = np.array(floor)
    measured = np.where(np.isfinite(s2), s2, 0.0).max(axis=0)
    floor = np.where(s2 > 0, floor, np.maximum(floor, np.maximum(everything, measured)))
    return sv, sn, np.maximum(s2, floor) / sn


def _weighted(v, e, n, runs):
    """Floored weighted average of stretches ``runs``: ``(value, error, var_s)``."""
    sv, sn, var = _floored(v, e, n, runs)
    with np.errstate(divide="ignore"):
        w = 1.0 / var
    if not np.all(np.isfinite(w)) or not np.all(w.sum(axis=0) > 0):
        # variance 0 everywhere (a constant) or of single events: pool instead
        value, error = pool(v, e, n)
        return value, error, np.broadcast_to(error ** 2 * n.sum() / sn, sv.shape)
    return (w * sv).sum(axis=0) / w.sum(axis=0), np.sqrt(1.0 / w.sum(axis=0)), var


def chi2_limit(dof, z=3.0902):
    """The ``Φ(z)`` point of chi^2/dof with ``dof`` degrees of freedom.

    Default ``z``: the 99.9 % point.  Wilson-Hilferty's cube-root normal
    approximation: within 3 % of the exact quantile for ``dof = 1`` and 2,
    within 1 % from ``dof = 5``.
    """
    if dof < 1:
        raise ValueError(f"dof must be >= 1, got {dof}")
    a = 2.0 / (9.0 * dof)
    return (1.0 - a + z * np.sqrt(a)) ** 3


def weighted_average(values, errors):
    """Plain inverse-variance average (kept for callers of flowsim <= 0.1).

    Returns ``(mean, error, chi2_dof)`` with weights ``1/error²``; iterations
    with zero error are averaged plainly and give error 0.  It trusts every
    error: use :func:`combine`, which flowsim's results use.
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
    deviations from the mean (see :func:`flowsim.algorithms.plain.moments`).  The error
    of a single sample is infinite: one event says nothing about the spread.
    """
    mean = total / n
    if n < 2:
        return mean, np.full(np.shape(mean), np.inf)
    var = np.maximum(m2, 0.0) / n / (n - 1)
    return mean, np.sqrt(var)
