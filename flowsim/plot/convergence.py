"""Convergence of a run (per-iteration estimates, cumulative value) and the VEGAS map.

matplotlib's object API on the Agg canvas (no pyplot state, no display), so it
works headless, in threads and in notebooks.
"""
import numpy as np


def figure(width=8.0, height=4.5):
    """A headless matplotlib Figure (Agg canvas, constrained layout), for every plot of flowsim.

    Parameters
    ----------
    width, height : float
        Size in inches (default 8 x 4.5).
    """
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure
    fig = Figure(figsize=(width, height), layout="constrained")
    FigureCanvasAgg(fig)
    return fig



def _cumulative(values, errors, events, states):
    """The combined estimate of iterations ``0..i`` for every ``i`` (as Result combines)."""
    from ..core.stats import combine
    out_v, out_e = [], []
    for i in range(len(values)):
        m, e, _ = combine(values[:i + 1, None], errors[:i + 1, None], events[:i + 1],
                          states[:i + 1])
        out_v.append(m[0])
        out_e.append(e[0])
    return np.array(out_v), np.array(out_e)


def convergence(result, component=0, ax=None, title=None):
    """Per-iteration estimates with error bars and the cumulative value.

    Parameters
    ----------
    result : flowsim.Result
        A finished run.
    component : int
        Which component of a vector integrand to draw (default 0).
    ax : matplotlib Axes or None
        Draw into this Axes; default a new Figure on the Agg canvas.
    title : str or None
        Default: the simulation name, final value, error and chi2/dof.

    Iterations left out of the result (warm-up, ``skip``) are drawn hollow;
    the cumulative line and band use only the kept iterations, so its last
    point is ``result.value +/- result.error``.  Returns the Figure.
    """
    recs = result.iterations
    if not recs:
        raise ValueError("convergence: the result has no iterations")
    it = np.array([r["iteration"] for r in recs])
    val = np.array([np.atleast_1d(r["value"])[component] for r in recs], dtype=float)
    err = np.array([np.atleast_1d(r["error"])[component] for r in recs], dtype=float)
    kept = np.array([r.get("kept", True) for r in recs])
    fig = ax.figure if ax is not None else figure()
    ax = ax if ax is not None else fig.add_subplot()
    if np.any(~kept):
        ax.errorbar(it[~kept], val[~kept], yerr=err[~kept], fmt="o", mfc="none",
                    color="0.5", capsize=3, label="warm-up (not kept)")
    ax.errorbar(it[kept], val[kept], yerr=err[kept], fmt="o", color="C0", capsize=3,
                label="iteration")
    if np.any(kept):
        _draw_cumulative(ax, recs, it, val, err, kept)
    ax.set_xlabel("iteration")
    ax.set_ylabel("estimate")
    ax.set_xticks(it)
    ax.set_title(_convergence_title(result, component) if title is None else title,
                 fontsize="medium")
    ax.legend(fontsize="small")
    return fig


def _draw_cumulative(ax, recs, it, val, err, kept):
    """The cumulative estimate of the kept iterations, as a line and a one-error band."""
    events = [r["events"] for r, k in zip(recs, kept) if k]
    states = [r.get("state_id") for r, k in zip(recs, kept) if k]
    cv, ce = _cumulative(val[kept], err[kept], events, states)
    ax.plot(it[kept], cv, "-", color="C1", label="cumulative")
    ax.fill_between(it[kept], cv - ce, cv + ce, color="C1", alpha=0.25, linewidth=0)


def _convergence_title(result, component):
    v = np.atleast_1d(result.value)[component]
    e = np.atleast_1d(result.error)[component]
    title = f"{result.meta.get('simulation', 'run')}: {v:.8g} +/- {e:.3g}"
    if result.chi2_dof is not None:
        title += f"   chi2/dof = {np.atleast_1d(result.chi2_dof)[component]:.3g}"
    return title


def grid(vegas, ax=None, dims=None):
    """The trained VEGAS map: increment edges per dimension.

    Parameters
    ----------
    vegas : flowsim.Vegas or flowsim.VegasPlus
        A (trained) simulation; its ``grid`` (edges in the integration limits)
        is drawn.
    ax : matplotlib Axes or None
        Draw into this Axes; default a new Figure.
    dims : sequence of int or None
        Dimensions to draw (default all).

    Each dimension is a row of vertical ticks at the edges of its increments
    (dense where the map samples most); the x axis is the fraction of each
    axis' range, so dimensions with different limits share the plot.
    Returns the Figure.
    """
    edges = np.asarray(vegas.edges)                       # fractions of each axis
    dims = list(range(edges.shape[0])) if dims is None else list(dims)
    fig = ax.figure if ax is not None else figure(height=1.0 + 0.35 * len(dims))
    ax = ax if ax is not None else fig.add_subplot()
    for row, d in enumerate(dims):
        ax.vlines(edges[d], row - 0.4, row + 0.4, color="C0", linewidth=0.6)
    ax.set_yticks(range(len(dims)))
    ax.set_yticklabels([f"x{d}" for d in dims])
    ax.set_ylim(len(dims) - 0.5, -0.5)
    ax.set_xlim(0.0, 1.0)
    ax.set_xlabel("fraction of the axis range (increment edges)")
    ax.set_title(f"{type(vegas).__name__} map: {edges.shape[1] - 1} increments per axis",
                 fontsize="medium")
    return fig


def save_convergence(result, path, simulation=None, dpi=120):
    """Write the convergence plot (and the map, if ``simulation`` is a Vegas) to ``path``
    in the format its extension names (``.png``, ``.pdf``, ``.svg``... any format
    matplotlib writes; PNG without an extension).

    Parameters
    ----------
    result : flowsim.Result
    path : str or path-like
        Output file.
    simulation : Simulation or None
        The run's simulation; a :class:`flowsim.Vegas` (or VegasPlus) adds a
        second panel with its trained grid.
    dpi : int
    """
    from ..algorithms.vegas import Vegas
    with_grid = isinstance(simulation, Vegas)
    n_dims = simulation.dim if with_grid else 0
    fig = figure(height=4.5 + (1.0 + 0.3 * n_dims if with_grid else 0.0))
    if with_grid:
        top, bottom = fig.subplots(2, 1, height_ratios=[4.5, 1.0 + 0.3 * n_dims])
        convergence(result, ax=top)
        grid(simulation, ax=bottom)
    else:
        convergence(result, ax=fig.add_subplot())
    fig.savefig(path, dpi=dpi)
    return path

