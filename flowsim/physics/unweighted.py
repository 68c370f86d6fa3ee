"""Unweighted events drawn from an adapted map by hit-or-miss.

Usage::

    import flowsim
    from flowsim.targets import double_gaussian

    sim = flowsim.Vegas(double_gaussian, dim=4)
    flowsim.Flow(sim, 10**5, seed=1).run(5)                  # adapt the map first
    events = flowsim.unweighted(sim, 10_000, seed=2)         # [10000, 4] array
    events.info["overflow_fraction"], events.info["efficiency"]

    flowsim.unweighted(sim, 10**7, seed=2, backend="joblib", path="events/")  # to disk

How the events are drawn: candidate points ``x`` are drawn from the map's density
(uniform in the box for :class:`flowsim.Plain`; the adapted VEGAS map for
:class:`flowsim.Vegas` and :class:`flowsim.VegasPlus`, without their hypercube
stratification), each with its weight ``w = f(x) J(x)``, whose mean is the integral.
A candidate is kept when a second uniform number ``r`` gives ``r w_max < w``: kept
points are distributed as ``f`` normalised, up to the candidates whose weight
exceeds ``w_max`` (they are kept with probability 1 instead of ``w / w_max``).

``w_max`` is the largest weight of a pre-sample of ``max_weight_events``
candidates (times ``max_weight_factor``) unless given; ``info["overflow_fraction"]``
states the share of the drawn candidates above it, i.e. how far the events are from
exact (0 means exact).  The candidates of pass ``k`` are the random numbers of block
``b`` of iteration ``k`` of a Flow with ``seed``: the same events, in the same order,
on every backend and device count.
"""
import os

import numpy as np

from ..algorithms.plain import Plain
from ..core.blocks import check_count
from ..core.kernel import columns
from ..core.lazy_tf import tf
from ..core.log import logger
from ..core.simulation import Simulation
from ..core.sums import block_sum, count_true
from ..distribution.registry import flow_class

#: Candidates drawn per pass (one Flow iteration) at most.
PASS_EVENTS = 1 << 20
#: Block size of the candidate kernels (the rows hold every candidate of a block).
BLOCK_EVENTS = 4096
FORMATS = ("npy", "parquet")


class UnweightedEvents(np.ndarray):
    """The ``[n, dim]`` events :func:`unweighted` returns, with ``.info`` (a dict:
    ``max_weight``, ``max_weight_events``, ``overflow_fraction`` (share of the drawn
    candidates above ``max_weight``), ``efficiency`` (kept / drawn candidates),
    ``candidates``, ``nonfinite`` (pre-sample weights that were not finite, never
    kept), ``integral`` and ``integral_error`` (the pre-sample's estimate),
    ``presample_max``, ``files``)."""

    def __array_finalize__(self, obj):
        self.info = getattr(obj, "info", {})


class CandidateSampler(Simulation):
    """Candidates of :func:`unweighted`: per block, the points drawn from the map of
    ``source`` (a Plain or Vegas), their weights ``f J`` and the hit-or-miss test.

    ``mode="max"``: per block the largest weight, the sum of weights and the
    counts of negative and non-finite weights (the pre-sample).  ``mode="draw"``:
    per block the candidates' points (zeros where rejected), the kept mask and the
    count of weights above ``max_weight``."""

    autograph = False

    def __init__(self, source, mode, block_size=BLOCK_EVENTS, component=0, max_weight=1.0):
        if mode not in ("max", "draw"):
            raise ValueError(f"mode must be 'max' or 'draw', got {mode!r}")
        self.source, self.mode, self.component = source, mode, int(component)
        self.block_size = check_count("block_size", block_size)
        self.max_weight = float(max_weight)
        self.dim = source.dim + 1                  # the last uniform decides keep or not

    def accumulators(self):
        if self.mode == "max":
            return {"max": (), "sum": (), "sum2": (), "count": (), "negative": (),
                    "nonfinite": ()}
        return {"points": (self.block_size, self.source.dim), "kept": (self.block_size,),
                "overflow": ()}

    def state(self):
        return self.source.map_state()

    def block(self, u, valid, state):
        t = tf()
        d = self.source.dim
        x, w, keep, bad = self.source.weighted_points(u[:, :d], valid, state)
        w = w[:, self.component]
        if self.mode == "max":
            return {"max": t.reduce_max(t.where(keep, w, t.zeros_like(w))),
                    "sum": block_sum(w), "sum2": block_sum(w * w),
                    "count": count_true(valid), "negative": count_true(keep & (w < 0)),
                    "nonfinite": count_true(bad)}
        r = t.cast(u[:, d], t.float64)
        kept = keep & (r * self.max_weight < w)
        points = t.where(kept[:, None], t.cast(x, t.float64), t.zeros_like(x, t.float64))
        return {"points": points, "kept": t.cast(kept, t.float64),
                "overflow": count_true(keep & (w > self.max_weight))}

    def estimate(self, totals, n_events):
        if self.mode == "max":
            mean = totals["sum"] / n_events
            var = max(totals["sum2"] / n_events - mean * mean, 0.0)
            return {"value": mean, "error": (var / max(n_events - 1, 1)) ** 0.5}
        kept = float(totals["kept"].sum())
        return {"value": kept / n_events, "error": (kept ** 0.5) / n_events}

    def combine(self, rows, n_events):
        if self.mode == "draw":
            return super().combine(rows, n_events)
        totals = super().combine(rows, n_events)
        first, stop = columns(self)["max"]
        totals[first:stop] = rows[:, first:stop].max(axis=0)
        return totals


def unweighted(sim, n_events, seed, backend=None, *, path=None, format="npy", component=0,
               max_weight=None, max_weight_events=None, max_weight_factor=1.0,
               pass_events=None, **flow_kwargs):
    """Draw ``n_events`` unweighted events of ``sim``'s integrand (module doc).

    Returns an :class:`UnweightedEvents` ``[n_events, dim]`` array (the points, in
    ``sim``'s limits), or, with ``path``, writes them there and returns an empty
    ``[0, dim]`` one; its ``.info`` states the maximum weight used, the overflow
    fraction, the efficiency and the files written.

    Parameters
    ----------
    sim : flowsim.Plain, flowsim.Vegas or flowsim.VegasPlus
        Its integrand and (adapted) map; left unchanged.  The integrand must be
        non-negative (component ``component``).
    n_events : int
        Events to return.
    seed : int
        Same seed, same events on every backend.
    backend : None, str or callable
        As in :func:`flowsim.integrate` (default: :class:`flowsim.Flow`).
    path : str or None
        A directory: events are written there in chunks as they are drawn
        (``events-00000.npy``, ...; ``format="parquet"`` writes
        ``events-00000.parquet`` with columns ``x0, x1, ...``, with pyarrow).
    format : "npy" or "parquet"
        File format with ``path`` (default "npy").
    component : int
        Component of a vector integrand that weights the events (default 0).
    max_weight : float or None
        The hit-or-miss maximum; default the largest weight of the pre-sample times
        ``max_weight_factor``.
    max_weight_events : int or None
        Pre-sample size (default ``max(10 n_events, 10**5)``, at most ``10**7``).
    max_weight_factor : float
        Safety factor on the pre-sample's maximum (default 1.0; > 1 lowers the
        overflow fraction and the efficiency).
    pass_events : int or None
        Candidates per pass (default: enough for the events expected, at most
        2**20); each pass is one Flow iteration, written as one file with ``path``.
    **flow_kwargs
        Passed to the Flow and the backend (``dtype``, ``n_jobs``, ``devices``...).
    """
    n_events = check_count("n_events", n_events)
    _check_source(sim, component)
    _check_output(path, format)
    make_flow = flow_class(backend)
    flow_kwargs.setdefault("quiet", True)
    pre = _presample(sim, seed, make_flow, component, max_weight_events or
                     min(max(10 * n_events, 10**5), 10**7), flow_kwargs)
    w_max = (pre["presample_max"] * float(max_weight_factor) if max_weight is None
             else float(max_weight))
    if not w_max > 0:
        raise ValueError(f"max_weight must be > 0, got {w_max!r} (is the integrand zero "
                         f"everywhere in the limits?)")
    efficiency = pre["integral"] / w_max
    per_pass = pass_events or min(PASS_EVENTS, max(BLOCK_EVENTS,
                                                   int(1.1 * n_events / max(efficiency, 1e-9))))
    sampler = CandidateSampler(sim, "draw", BLOCK_EVENTS, component, w_max)
    flow = make_flow(sampler, n_events=check_count("pass_events", per_pass), seed=seed,
                     block_size=BLOCK_EVENTS, **flow_kwargs)
    events, info = _draw(flow, sampler, n_events, path, format)
    info.update(pre, max_weight=w_max)
    info["efficiency"] = info.pop("kept") / info["candidates"]
    info["overflow_fraction"] = info.pop("overflow") / info["candidates"]
    if info["overflow_fraction"] > 0:
        logger.warning("unweighted: %.3g of the candidates weigh more than max_weight=%.6g "
                       "(the events are not exact there); raise max_weight_factor or "
                       "max_weight_events", info["overflow_fraction"], w_max)
    out = events.view(UnweightedEvents)
    out.info = info
    return out


def _check_source(sim, component):
    if not isinstance(sim, Plain):
        raise TypeError(f"sim must be a flowsim.Plain, Vegas or VegasPlus (its integrand and "
                        f"map), got {type(sim).__name__}")
    k = max(sim.components, 1)
    if not isinstance(component, int) or not 0 <= component < k:
        raise ValueError(f"component must be an int in [0, {k}) (the integrand returns {k} "
                         f"component(s)), got {component!r}")


def _check_output(path, format):
    if format not in FORMATS:
        raise ValueError(f"format must be one of {FORMATS}, got {format!r}")
    if path is None:
        return
    os.makedirs(path, exist_ok=True)
    if format == "parquet":
        try:
            import pyarrow  # noqa: F401
        except ImportError as exc:
            raise ImportError("format='parquet' needs pyarrow (pip install pyarrow); "
                              "format='npy' needs nothing") from exc


def _presample(sim, seed, make_flow, component, n, flow_kwargs):
    """Largest weight, integral and error of ``n`` candidates (iteration 0)."""
    sampler = CandidateSampler(sim, "max", BLOCK_EVENTS, component)
    flow = make_flow(sampler, n_events=check_count("max_weight_events", n), seed=seed,
                     block_size=BLOCK_EVENTS, **flow_kwargs)
    try:
        totals = sampler.combine(flow.run_blocks(0), n)
    finally:
        flow.close()
    acc = dict(zip(columns(sampler), (totals[a:b] for a, b in columns(sampler).values())))
    negative = int(acc["negative"][0])
    if negative:
        raise ValueError(f"unweighted events need a non-negative integrand: {negative} of "
                         f"{n} weights of the pre-sample are negative (component "
                         f"{component}); integrate |f| or split f into positive parts")
    est = sampler.estimate({k: float(v[0]) for k, v in acc.items()}, n)
    return {"max_weight_events": n, "integral": est["value"], "integral_error": est["error"],
            "nonfinite": int(acc["nonfinite"][0]), "presample_max": float(acc["max"][0])}


def _draw(flow, sampler, n_events, path, format):
    """Kept points of passes 1, 2, ... until ``n_events``: ``(array, info)``."""
    cols = columns(sampler)
    (p0, p1), (k0, k1), (o0, _) = cols["points"], cols["kept"], cols["overflow"]
    dim, got, chunks, files = sampler.source.dim, 0, [], []
    info = {"candidates": 0, "kept": 0, "overflow": 0, "files": files}
    iteration = 1
    try:
        while got < n_events:
            rows = flow.run_blocks(iteration)
            kept = rows[:, k0:k1].reshape(-1) > 0.5
            points = rows[:, p0:p1].reshape(-1, dim)[kept]
            info["candidates"] += flow.n_events
            info["kept"] += len(points)
            info["overflow"] += int(rows[:, o0].sum())
            points = points[:n_events - got]
            got += len(points)
            if path is None:
                chunks.append(points)
            else:
                files.append(_write(points, path, len(files), format))
            iteration += 1
    finally:
        flow.close()
    empty = np.zeros((0, dim))
    return (np.concatenate(chunks) if chunks else empty), info


def _write(points, path, index, format):
    name = os.path.join(str(path), f"events-{index:05d}.{format}")
    if format == "npy":
        np.save(name, points)
    else:
        import pyarrow as pa
        import pyarrow.parquet as pq
        table = pa.table({f"x{i}": points[:, i] for i in range(points.shape[1])})
        pq.write_table(table, name)
    return name
