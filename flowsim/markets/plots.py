"""Plots of a market ensemble (matplotlib, optional: ``pip install 'flowsim[plot]'``).

matplotlib's object API on the Agg canvas, like :mod:`flowsim.plot`: headless, in
threads and notebooks.  Each function draws into ``ax`` or a new Figure and returns it.

- :func:`paths`: market prices of the first markets with their fundamental.
- :func:`returns`: the distribution of one-step returns against a normal of the same
  variance (log scale: fat tails show).
- :func:`abs_autocorrelation`: autocorrelation of ``|returns|`` by lag, mean over markets.
- :func:`save`: all three into one PNG.
"""
import math

import numpy as np

from ..plot.convergence import figure


def _axes(ax, width=8.0, height=4.0):
    if ax is not None:
        return ax.figure, ax
    fig = figure(width, height)
    return fig, fig.add_subplot()


def _paths(result):
    """``(prices [k, T + 1], fundamentals [k, T + 1])``; with several markets every
    market's kept paths, stacked."""
    if getattr(result, "paths", None) is None:
        raise ValueError("this Result has no paths: run flowsim.markets.ensemble(..., paths=k)")
    if "market_price" in result.paths:
        return result.paths["market_price"], result.paths["fundamental"]
    markets = list(result.paths.values())
    return (np.concatenate([m["market_price"] for m in markets]),
            np.concatenate([m["fundamental"] for m in markets]))


def _lines(result, n):
    """``(label, prices, fundamental)`` to draw: the first ``n`` runs of one market, or
    the first run of each of several markets."""
    if "market_price" in result.paths:
        p, f = result.paths["market_price"], result.paths["fundamental"]
        return [(f"market {i}", p[i], f[i]) for i in range(min(n, len(p)))]
    return [(name, m["market_price"][0], m["fundamental"][0])
            for name, m in list(result.paths.items())[:n]]


def paths(result, ax=None, n=5):
    """Market price (solid) and fundamental (dashed) of the first ``n`` markets (with
    several markets per run: the first run's path of each market, labelled by its
    name, on a log scale), with the config's events marked (``result.meta["marks"]``:
    a shock's or a mistaken order's step as a vertical line, a price limit's bounds as
    horizontal ones) and the first step with execution (dotted)."""
    fig, ax = _axes(ax)
    _paths(result)
    several = "market_price" not in result.paths
    for label, p, f in _lines(result, n):
        line, = ax.plot(p, lw=0.8, label=label)
        ax.plot(f, lw=0.8, ls="--", color=line.get_color())
    if several:
        ax.set_yscale("log")
    t0 = result.meta.get("first_execution")
    if t0:
        ax.axvline(t0, color="0.5", lw=0.6, ls=":", label="execution starts")
    for kind, where, label in result.meta.get("marks", []):
        line = ax.axvline if kind == "time" else ax.axhline
        line(where, color="k", lw=0.8, ls="-." if kind == "time" else ":", label=label)
    if result.meta.get("marks") or several:
        ax.legend(fontsize="small")
    ax.set_xlabel("step")
    ax.set_ylabel("price")
    ax.set_title("market price (solid) and fundamental (dashed)")
    return fig


def _returns(result, t0):
    p, _ = _paths(result)
    return np.diff(np.log(p[:, t0:-1]), axis=1)


def returns(result, t0, ax=None, bins=81):
    """Histogram density of one-step log returns after step ``t0`` (the first with
    execution) against the normal of the same mean and variance."""
    fig, ax = _axes(ax)
    r = _returns(result, t0).ravel()
    sd = r.std() or 1.0
    edges = np.linspace(r.mean() - 6 * sd, r.mean() + 6 * sd, bins)
    dens, edges = np.histogram(r, edges, density=True)
    mid = 0.5 * (edges[1:] + edges[:-1])
    ax.semilogy(mid, np.where(dens > 0, dens, np.nan), ".", label="returns")
    ax.semilogy(mid, np.exp(-0.5 * ((mid - r.mean()) / sd) ** 2) / (sd * math.sqrt(2 * math.pi)),
                label="normal")
    ax.set_xlabel("one-step log return")
    ax.set_ylabel("density")
    ax.legend()
    return fig


def abs_autocorrelation(result, t0, ax=None, max_lag=20):
    """Autocorrelation of ``|returns|`` at lags 1..``max_lag``, mean over the kept paths."""
    fig, ax = _axes(ax)
    x = np.abs(_returns(result, t0))
    d = x - x.mean(axis=1, keepdims=True)
    den = (d * d).sum(axis=1)
    lags = np.arange(1, min(max_lag, x.shape[1] - 1) + 1)
    acf = [np.nanmean((d[:, k:] * d[:, :-k]).sum(axis=1) / den) for k in lags]
    ax.bar(lags, acf)
    ax.axhline(0, color="k", lw=0.5)
    ax.set_xlabel("lag (steps)")
    ax.set_ylabel("autocorrelation of |r|")
    return fig


def save(result, path, t0):
    """The three plots in one PNG at ``path``."""
    fig = figure(8.0, 10.0)
    axes = fig.subplots(3, 1)
    paths(result, axes[0])
    returns(result, t0, axes[1])
    abs_autocorrelation(result, t0, axes[2])
    fig.savefig(path, dpi=100)
    return fig
