"""Pictures of a trading episode (matplotlib): price with the positions held, and the
portfolio's valuation."""
import numpy as np


def episode_figure(close, episode, name="Stock", path=None):
    """A two-panel figure of ``episode`` (a list of dicts with ``idx``, ``position``,
    ``portfolio_valuation``): the price over the episode's rows, shaded by the
    position held (green long, red short, darker with leverage), and the valuation.
    Saved to ``path`` when given."""
    from matplotlib.figure import Figure
    fig = Figure(figsize=(8, 5), dpi=80)
    ax_price, ax_value = fig.subplots(2, 1, sharex=True)
    if episode:
        idx = np.array([e["idx"] for e in episode], dtype=np.int64)
        position = np.array([e["position"] for e in episode], dtype=np.float64)
        value = np.array([e["portfolio_valuation"] for e in episode], dtype=np.float64)
        ax_price.plot(idx, close[idx], color="black", lw=1)
        top = max(float(np.abs(position).max()), 1.0)
        for i in range(len(idx) - 1):
            x = position[i + 1]            # held from row idx[i] to idx[i + 1]
            if x != 0:
                ax_price.axvspan(idx[i], idx[i + 1], lw=0, alpha=0.15 + 0.35 * abs(x) / top,
                                 color="green" if x > 0 else "red")
        ax_value.plot(idx, value, color="navy", lw=1)
    ax_price.set_title(f"{name}: price and positions (green long, red short)")
    ax_value.set_title("portfolio valuation")
    ax_value.set_xlabel("row")
    fig.tight_layout()
    if path is not None:
        fig.savefig(path)
    return fig


def draw_episode(close, episode, name="Stock"):
    """:func:`episode_figure` as an RGB array ``[H, W, 3]`` uint8."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    fig = episode_figure(close, episode, name)
    canvas = FigureCanvasAgg(fig)
    canvas.draw()
    return np.asarray(canvas.buffer_rgba())[..., :3].copy()
