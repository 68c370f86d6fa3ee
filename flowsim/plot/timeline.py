"""Gantt chart of a run's chunks: one row per device, one bar per chunk.

Uses matplotlib's object API with the Agg canvas (no pyplot state, no display
needed), so it works headless, in threads and in notebooks alike.
"""
from .convergence import figure


def _order(device):
    kind, _, index = device.rpartition(":")
    return (kind != "GPU", kind, int(index) if index.isdigit() else index)


def timeline(result, ax=None, title=None):
    """Draw ``result.timeline`` as a Gantt chart and return the matplotlib Figure.

    Parameters
    ----------
    result : flowsim.Result or list of dict
        A run's result (or its ``timeline``: records with ``iteration``,
        ``device``, ``first_block``, ``blocks``, ``start``, ``end`` seconds).
    ax : matplotlib Axes or None
        Draw into this Axes (e.g. one of your pyplot subplots); default a new
        Figure on the Agg canvas.
    title : str or None
        Default: backend, schedule and load-balance efficiency.

    Each device is a row (GPUs first); each chunk a bar from its start to its
    end, coloured by iteration (alternating shades) and labelled with its block
    range when wide enough.  A chunk that failed (out of memory, retried
    elsewhere) is drawn hatched in red.
    """
    chunks = list(getattr(result, "timeline", result))
    devices = sorted({c["device"] for c in chunks}, key=_order)
    if ax is None:
        fig = figure(width=9.0, height=1.2 + 0.45 * max(len(devices), 1))
        ax = fig.add_subplot()
    else:
        fig = ax.figure
    if not chunks:
        ax.text(0.5, 0.5, "empty timeline", ha="center", va="center", transform=ax.transAxes)
        ax.set_axis_off()
        return fig
    colours = ("#4c72b0", "#86a8d8", "#55a868", "#93c9a0")
    span = max(c["end"] for c in chunks) - min(c["start"] for c in chunks)
    row = {d: i for i, d in enumerate(devices)}
    for c in chunks:
        y = row[c["device"]]
        width = max(c["end"] - c["start"], 0.0)
        failed = c.get("failed")
        ax.broken_barh([(c["start"], width)], (y - 0.38, 0.76),
                       facecolors="#f4b6b6" if failed else
                       colours[c["iteration"] % len(colours)],
                       edgecolors="#c0392b" if failed else "white", linewidth=0.6,
                       hatch="///" if failed else None)
        if span > 0 and width > 0.06 * span:
            last = c["first_block"] + c["blocks"] - 1
            label = str(c["first_block"]) if c["blocks"] == 1 else f"{c['first_block']}-{last}"
            ax.text(c["start"] + width / 2, y, label, ha="center", va="center", fontsize=7,
                    color="#7b241c" if failed else "white", clip_on=True)
    ax.set_yticks(range(len(devices)), devices)
    ax.set_ylim(len(devices) - 0.5, -0.5)
    ax.set_xlabel("seconds since the run started")
    ax.grid(axis="x", alpha=0.3)
    if title is None:
        meta = getattr(result, "meta", {}) or {}
        parts = [meta.get("backend", ""), meta.get("schedule", "")]
        eff = getattr(result, "efficiency", None)
        if eff is not None and eff == eff:
            parts.append(f"load balance {100 * eff:.0f}%")
        iters = len({c["iteration"] for c in chunks})
        parts.append(f"{len(chunks)} chunks, {iters} iteration(s)")
        title = " | ".join(p for p in parts if p)
    ax.set_title(title, fontsize=10)
    return fig


def save_timeline(result, path, dpi=120, **kwargs):
    """Save :func:`timeline` of ``result`` to ``path`` (PNG, or any format by suffix).

    Returns ``path``.  Extra keywords go to :func:`timeline`.
    """
    fig = timeline(result, **kwargs)
    fig.savefig(path, dpi=dpi)
    return path
