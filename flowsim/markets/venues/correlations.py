"""pams's ``simulation.fundamentalCorrelations`` (``pams/runners/sequential.py``,
``pams/fundamentals.py``): correlated fundamental walks of several markets.

``{"pairwise": [[market1, market2, corr], ...]}``: both markets need a
``fundamentalVolatility`` > 0 and ``-1 < corr < 1``.  Each step the log-returns of the
markets with volatility are ``drift + L z`` (``z`` independent N(0, 1), ``L`` the lower
Cholesky factor of ``vol_i corr_ij vol_j``; no ``-vol**2 / 2``), those of markets
without volatility their drift.  A correlation matrix that is not positive definite
is refused, as pams's Cholesky refuses it.
"""
import numpy as np


def parse_correlations(value, specs):
    """``((i, j, corr), ...)`` of ``fundamentalCorrelations`` for markets ``specs``."""
    where = "simulation.fundamentalCorrelations"
    names = [s.name for s in specs]
    if not isinstance(value, dict):
        raise ValueError(f"{where} must be an object {{\"pairwise\": [[m1, m2, corr], ...]}}")
    out = []
    for key, pairs in value.items():
        if key != "pairwise":
            raise ValueError(f"{where}.{key} is not supported (pams supports only "
                             f"'pairwise'): use \"pairwise\": [[m1, m2, corr], ...]")
        if not isinstance(pairs, list) or any(not isinstance(p, list) or len(p) != 3
                                              for p in pairs):
            raise ValueError(f"{where}.pairwise must be a list of [market1, market2, corr]")
        out += [_pair(p, specs, names, where) for p in pairs]
    cholesky(specs, out)
    return tuple(out)


def _pair(pair, specs, names, where):
    m1, m2, corr = pair
    for m in (m1, m2):
        if m not in names:
            raise ValueError(f"{where}.pairwise names {m!r}, which is not a market "
                             f"of the config ({', '.join(names)})")
        if specs[names.index(m)].fundamental_volatility == 0:
            raise ValueError(f"{where}.pairwise: {m} needs fundamentalVolatility > 0 "
                             f"for a fundamental correlation (pams requires it)")
    if m1 == m2:
        raise ValueError(f"{where}.pairwise: {m1} is correlated with itself; name "
                         f"two different markets")
    if isinstance(corr, bool) or not isinstance(corr, (int, float)) or not -1.0 < corr < 1.0:
        raise ValueError(f"{where}.pairwise: corr of {m1}, {m2} must be in (-1, 1), "
                         f"got {corr!r}")
    return names.index(m1), names.index(m2), float(corr)


def cholesky(specs, correlations):
    """``[K, K]`` lower factor of the fundamentals' log-return covariance (pams's
    ``Fundamentals._generate_log_return``): rows and columns of markets without
    volatility are 0."""
    vols = np.array([s.fundamental_volatility for s in specs])
    noisy = [i for i, v in enumerate(vols) if v != 0]
    corr = np.eye(len(noisy))
    for i, j, c in correlations:
        a, b = noisy.index(i), noisy.index(j)
        corr[a, b] = corr[b, a] = c
    v = vols[noisy]
    try:
        low = np.linalg.cholesky(v * corr * v.reshape(-1, 1))
    except np.linalg.LinAlgError:
        raise ValueError("simulation.fundamentalCorrelations: the correlations are not a "
                         "valid (positive definite) correlation matrix, so pams's Cholesky "
                         "fails too; remove a circle of correlations") from None
    out = np.zeros((len(specs), len(specs)))
    out[np.ix_(noisy, noisy)] = low
    return out
