"""VEGAS+: the VEGAS map plus adaptive stratified sampling (Lepage 2021, arXiv 2009.05112).

The unit cube of ``y`` is cut into ``H = prod(nstrat)`` hypercubes.  Each
iteration gives hypercube ``h`` ``n_h`` events (at least two), chosen between
iterations from the standard deviation ``sigma_h`` of the hypercube's estimate
measured in it: ``n_h - n_min`` proportional to ``sigma_h ** beta``.  The
integral is the sum of the hypercube means and its variance the sum of their
variances.

Distributable like any Simulation: the allocation is numpy state fixed before an
iteration starts (:meth:`VegasPlus.prepare`), the events of the iteration are laid
out on the block grid in hypercube order (a cumulative-count table in the state
tells the kernel which hypercube event ``e`` belongs to), and the per-hypercube
sums are per-block accumulators added in block order.  So any chunking, device
count or backend gives the same bits, and exactly ``n_events`` events run.
The map trains on events weighted by the inverse of their hypercube's event
density, as if ``y`` were uniform (unlike ``vegas``: :class:`VegasPlus`).
"""
import numpy as np

from ..core.blocks import check_count
from ..core.kernel import columns
from ..core.lazy_tf import tf
from ..core.simulation import Simulation
from ..core.sums import count_true, segment_block_sum
from . import strata
from .histogram import estimate_record
from .vegas import MAX_STRATA_PER_AXIS, Vegas, check_fraction

#: Default cap on the number of hypercubes (the host keeps a few numbers per hypercube).
MAX_HCUBES = 1 << 24
#: Fewest average events per hypercube used to choose ``nstrat``; in ``dim``
#: dimensions the default is :func:`events_per_hcube`.
EVENTS_PER_HCUBE = 4
#: From this many dimensions on, the default ``nstrat`` follows ``vegas``'s budget and
#: is even once that affords 4 strata per axis (:func:`choose_nstrat`).
MANY_DIMS = 7
#: Most hypercube slots a block returns: with more hypercubes, a block returns the
#: sums of a window of this many consecutive hypercubes starting at its first.
HCUBE_WINDOW = 1 << 16
#: How events weigh in the map's training (``config()["map_training"]``): each
#: by ``n / (H n_h)``, the inverse of its hypercube's event density.
MAP_TRAINING = "n/(H n_h) weights"


def events_per_hcube(dim):
    """Default average events per hypercube in ``dim`` dimensions: ``max(4, 2 ** (dim / 2))``."""
    return max(EVENTS_PER_HCUBE, 2.0 ** (dim / 2.0))


def _largest_strata(dim, limit):
    """The largest ``s <= MAX_STRATA_PER_AXIS`` with ``s ** dim <= max(1, limit)``."""
    s = 1
    while s < MAX_STRATA_PER_AXIS and float(s + 1) ** dim <= limit:
        s += 1
    return s


def choose_nstrat(dim, n_events, max_hcubes=MAX_HCUBES, per_hcube=None, neval_frac=0.75):
    """The same strata ``s`` on every axis: the largest ``s <= MAX_STRATA_PER_AXIS`` with
    ``s ** dim <= min(max_hcubes, n / per_hcube)`` (default :func:`events_per_hcube`).

    From :data:`MANY_DIMS` dimensions on (with the default ``per_hcube``), once
    ``vegas``'s budget of ``2 / (1 - neval_frac)`` events per hypercube (two from
    the evenly spread share; at most :func:`events_per_hcube`) affords 4 strata per
    axis, the largest even ``s`` within that budget instead.

        >>> choose_nstrat(8, 10**8).tolist()     # 6**8 hypercubes: vegas's 8**5 x 7**3
        [6, 6, 6, 6, 6, 6, 6, 6]
    """
    per = events_per_hcube(dim) if per_hcube is None else per_hcube
    s = _largest_strata(dim, min(max_hcubes, n_events / per))
    if dim >= MANY_DIMS and per_hcube is None:
        per_vegas = min(per, 2.0 / (1.0 - neval_frac))
        even = _largest_strata(dim, min(max_hcubes, n_events / per_vegas))
        even -= even % 2
        if even >= 4:
            s = even
    return np.full(dim, s, dtype=np.int64)


def allocate(weights, n_events, n_min):
    """Integer events per hypercube: ``n_min`` each plus the rest in proportion
    to ``weights`` (largest remainders, ties to the lower index); sums to ``n_events``."""
    weights = np.asarray(weights, dtype=np.float64)
    h = weights.size
    rest = n_events - h * n_min
    total = weights.sum()
    if not (total > 0 and np.isfinite(total)):
        weights, total = np.ones(h), float(h)
    share = rest * (weights / total)
    base = np.floor(share).astype(np.int64)
    left = int(rest - base.sum())
    if left > 0:
        order = np.argsort(-(share - base), kind="stable")
        base[order[:left]] += 1
    return n_min + base


def _cumsum(x, group=64):
    """Inclusive cumulative sum of an int32 vector whose size is a multiple of ``group``,
    in two short levels (XLA lowers one long cumsum to a quadratic window reduction)."""
    t = tf()
    rows = t.reshape(x, [-1, group])
    inner = t.math.cumsum(rows, axis=1)
    outer = t.math.cumsum(inner[:, -1], exclusive=True)
    return t.reshape(inner + outer[:, None], [-1])


def _ends_at_or_below(ends, first, h):
    """How many of the increasing ``ends`` ``[h]`` are ``<= first`` (an int32 scalar):
    counted, up to :data:`HCUBE_WINDOW` hypercubes (a block already spends ``O(h)``
    on their sums); beyond, a binary search of at most ``ceil(log2(h + 1))`` steps in
    a loop (the same integer; a loop, not unrolled steps, keeps the traced graph
    small)."""
    t = tf()
    if h <= HCUBE_WINDOW:
        return t.reduce_sum(t.cast(ends <= first, t.int32))

    def halve(lo, hi):
        mid = (lo + hi) // 2
        below = t.gather(ends, t.minimum(mid, h - 1)) <= first
        return t.where(below, mid + 1, lo), t.where(below, hi, mid)

    lo, _ = t.while_loop(lambda lo, hi: lo < hi, halve,
                         (t.constant(0, t.int32), t.constant(h, t.int32)),
                         maximum_iterations=int(h).bit_length())
    return lo


def _hypercube_of(ends, first, size, h):
    """Hypercube of events ``first .. first+size-1``: ``i`` with ``ends[i-1] <= e < ends[i]``.

    O(size + log h) per block: the hypercube of the first event is the number of
    ``ends`` at or below it (:func:`_ends_at_or_below`); the hypercubes starting
    inside the block (at most ``size`` of them, as each has at least one event) mark
    their first event, and a cumulative sum of the marks numbers the rest.  Padding
    events past the last end get ``h - 1``.
    """
    t = tf()
    h0 = _ends_at_or_below(ends, first, h)
    width = min(h, size)
    start = t.minimum(h0, h - width)
    window = t.gather(ends, start + t.range(width)) - first               # [width]
    inside = (window > 0) & (window < size)
    pos = t.where(inside, t.cast(window, t.int32), size)
    marks = t.math.unsorted_segment_sum(t.ones([width], t.int32), pos, size + 1)[:size]
    return t.minimum(h0 + _cumsum(marks), h - 1)


class VegasPlus(Vegas):
    """VEGAS+ integration: the VEGAS map plus adaptive stratified sampling.

    Parameters
    ----------
    integrand, dim, limits, train, histograms, grid
        As for :class:`flowsim.Vegas` (``train`` also picks which component's
        ``sigma_h`` drives the allocation, or their quadrature sum for
        ``"norm"``).
    n_bins : int
        Increments of the map per axis (default 200, >= 2), as for
        :class:`flowsim.Vegas`.
    alpha : float
        Damping of the map refinement, >= 0.  Default 0.75, between
        ``vegas``'s 0.5 and Vegas' 1.5: with stratification the
        per-increment training data is noisier, and a map that follows the
        noise samples worse (1.5 lost precision on the 8-dim double
        Gaussian), while 0.5 adapts too slowly for a run of a few
        iterations.  The damping and ``n_bins`` go together: with 50
        increments 1.0 over-reacts on the 8-dim double Gaussian at 2*10^6
        events per iteration, and a map that improves fast makes the
        combined error of a short run overestimated (figures:
        ``docs/performance.rst``, "vegas.py").  Lower it if the
        per-iteration errors jump about once the map has converged; raise it
        if the map is still improving after many iterations (the
        per-iteration errors still falling).
    beta : float
        Damping of the stratification, in [0, 1] (default 0.75, as in
        ``vegas``).  0 gives every hypercube the same events (plain
        stratification); 1 allocates in proportion to ``sigma_h`` (defined
        below; noisy estimates of ``sigma_h`` make it over-react).
    nstrat : sequence of int or None
        Strata per axis.  Default: chosen at the first iteration from its
        event count ``n``, the same ``s`` on every axis: the largest ``s``
        with ``s ** dim <= min(max_hcubes, n / m)`` and ``s <= 32``, where
        ``m = max(4, 2 ** (dim / 2))`` is the average of events per hypercube
        (4 up to 4 dimensions, 8 in 6, 16 in 8).  From 7 dimensions on, once
        ``vegas``'s budget, ``2 / (1 - neval_frac)`` events per hypercube (8
        by default: two from the evenly spread share), affords 4 strata per
        axis, ``s`` is instead the largest even number within that budget
        (below, 3 stays 3: with 2 strata per axis short runs at 2*10^5 events
        over-estimated their errors).  So the default depends on the first
        iteration's ``n``: at 2*10^6 events, 26^4 hypercubes in 4
        dimensions, 7^6 in 6, 4^8 in 8; at 10^5, 12^4, 4^6 and 2^8; in 8
        dimensions 3^8 from 1.05*10^5 events, 4^8 from 5.2*10^5, 6^8 from
        1.3*10^7 and 8^8 from 1.3*10^8, so the error keeps falling as ``n``
        grows (``benchmarks/vegasplus_sizes.py``).  Fixed afterwards (the
        kernel's state shapes depend on it): a run whose later iterations are
        much larger keeps the first one's hypercubes.  The rule is a
        compromise, chosen on the peaked integrands of
        ``benchmarks/_peaked.py`` (``docs/performance.rst``, "vegas.py"):
        many small hypercubes help low-dimensional peaks at large budgets; in
        many dimensions only a few strata per axis are affordable, and their
        parity matters when the map puts structure at the middle of ``y``
        (the 8-dim double Gaussian's two peaks, after the map, lie on either
        side of ``y = 1/2``: an odd ``s`` cuts them, and 3^8 or 5^8
        hypercubes give errors 2 to 9 times those of 4^8 or 6^8; ``vegas``'s
        mixed 5 and 4 strata lose as much).  The same ``s`` on every axis,
        because ``s + 1`` on some axes did worse there.  The cap of 32 strata
        per axis (as :class:`flowsim.Vegas`) keeps a few events in each
        stratum of 1 to 3 dimensions, where thousands of tiny strata
        under-estimate the error of integrable singularities.  Pass
        ``nstrat`` to choose otherwise, e.g. for an integrand whose structure
        an even or odd ``s`` cuts.
    max_hcubes : int
        Cap on the number of hypercubes when ``nstrat`` is chosen (default
        16,777,216 = 8^8, which the rule reaches at 1.3*10^8 events in 8
        dimensions).  Each block returns ``2 k`` floats per hypercube
        for at most ``HCUBE_WINDOW`` (65,536) hypercubes: with more, a block
        returns a window of consecutive hypercubes from its first (so blocks
        may have at most about ``2 * HCUBE_WINDOW`` events), added at their
        place on the host.  The host keeps ``O(H)`` numbers per iteration
        (about 40 bytes per hypercube) and ``O(HCUBE_WINDOW)`` per block.
    neval_frac : float
        Fraction of the events allocated adaptively, in [0, 1) (default 0.75);
        the others are spread evenly (at least 2 per hypercube).
    freeze_after : int or None
        Train the map and the allocation for this many iterations, then
        freeze both (default None), as :class:`flowsim.Vegas`'s
        ``freeze_after``.

    ``sigma_h`` is the standard deviation of the hypercube's estimate in
    the last iteration, ``V_h std_h(f J) / sqrt(n_h)``, as in ``vegas``: it
    also depends on the ``n_h`` that iteration gave the hypercube, which
    damps the allocation further (at a fixed point ``n_h`` grows as
    ``std_h ** (beta / (1 + beta / 2))``, ``std_h ** 0.55`` for 0.75).
    The allocation uses only the last iteration (no averaging), like ``vegas``.

    The map trains as :class:`flowsim.Vegas`'s does, on the average of
    ``(f J)^2`` over each increment, but each event counts with the weight
    ``n / (H n_h)``: the inverse of the density of events the allocation
    gives its hypercube, so that the averages are those of uniform ``y``.
    ``vegas`` averages over the events as they fall; since the allocation
    puts most events in the few hypercubes of large ``sigma_h``, its map
    then follows them, narrows iteration after iteration, and long runs
    lose precision (the hypercubes left with ``n_min`` events come to
    dominate the variance).  Weighted, the map settles and the
    per-iteration errors keep falling or stay level.

    An iteration of ``n_events`` needs ``n_events >= 2 H``.  The stratified
    estimate is ``sum_h V_h mean_h(f J)`` with variance ``sum_h V_h^2
    var_h(f J) / n_h``.  Histograms weight each event by ``V_h n / n_h``;
    their errors use the unstratified formula (an approximation: it
    ignores the stratification).  :meth:`sample` draws from the map only.
    """

    #: Its stratification is what Vegas' advice points to: the general advice.
    inconsistency_advice = Simulation.inconsistency_advice

    _count_increments = True          # y is stratified: the map trains on real counts
    _equal_strata = False             # the allocation is VegasPlus's own

    def __init__(self, integrand, dim, limits=None, n_bins=200, alpha=0.75, beta=0.75,
                 nstrat=None, max_hcubes=MAX_HCUBES, neval_frac=0.75, train=0,
                 histograms=(), grid=None, freeze_after=None):
        self.beta = check_fraction("beta", beta, 0.0, 1.0)
        self.max_hcubes = check_count("max_hcubes", max_hcubes)
        self.neval_frac = check_fraction("neval_frac", neval_frac, 0.0, 1.0)
        if self.neval_frac >= 1.0:
            raise ValueError(f"neval_frac must be in [0, 1), got {neval_frac!r}")
        self.nstrat = None
        self.sigf = None                   # sigma_h ** beta, per hypercube
        self._alloc = None                 # (n_events, counts) of the next iteration
        super().__init__(integrand, dim, limits=limits, n_bins=n_bins, alpha=alpha,
                         train=train, histograms=histograms, grid=grid,
                         freeze_after=freeze_after)
        if nstrat is not None:
            self._set_nstrat(nstrat)

    # -- the stratification --------------------------------------------------------
    def _set_nstrat(self, nstrat):
        self.nstrat = strata.check_nstrat(nstrat, self.dim)
        if self.sigf is None or self.sigf.size != self.n_hcubes:
            self.sigf = np.ones(self.n_hcubes)
        self._alloc = None

    def prepare(self, n_events):
        """Fix the hypercube allocation of the next iteration of ``n_events`` events."""
        n_events = check_count("n_events", n_events)
        if self.nstrat is None:
            self._set_nstrat(choose_nstrat(self.dim, n_events, self.max_hcubes,
                                            neval_frac=self.neval_frac))
        h = self.n_hcubes
        if n_events < 2 * h:
            raise ValueError(f"VegasPlus needs n_events >= 2 * hypercubes = {2 * h} "
                             f"(nstrat={self.nstrat.tolist()}), got {n_events}; pass a "
                             f"smaller nstrat or max_hcubes")
        if self._alloc is None or self._alloc[0] != n_events:
            n_min = max(2, int((1.0 - self.neval_frac) * n_events / h))
            n_min = min(n_min, n_events // h)
            weights = self.sigf if self.beta > 0 else np.ones(h)
            self._alloc = (n_events, allocate(weights, n_events, n_min))

    @property
    def counts(self):
        """Events per hypercube of the next iteration (after :meth:`prepare`)."""
        return None if self._alloc is None else self._alloc[1]

    # -- the Simulation contract ---------------------------------------------------
    def accumulators(self):
        acc = super().accumulators()
        k = max(self.components, 1)
        del acc["sum"], acc["m2"], acc["count"]
        h = self._need_nstrat()
        acc["hcube"] = (min(h, HCUBE_WINDOW), 2 * k)
        if h > HCUBE_WINDOW:
            acc["hcube_first"] = ()
        return acc

    def state(self):
        h = self._need_nstrat()
        if self._alloc is None:
            raise RuntimeError("VegasPlus.state() before prepare(n_events)")
        n_events, counts = self._alloc
        cum = np.concatenate([[0], np.cumsum(counts)]).astype(np.int64)
        stride = np.concatenate([[1], np.cumprod(self.nstrat)[:-1]]).astype(np.int64)
        st = super().state()
        st.update({"ends": cum[1:], "nstrat": self.nstrat.copy(), "stride": stride,
                   "hweight": (n_events / h) / counts.astype(np.float64)})
        return st

    def inputs(self, key, first_event, size, dtype, state):
        u = super().inputs(key, first_event, size, dtype, state)
        return {"u": u, "first": first_event}

    def block(self, inputs, valid, state):
        t = tf()
        u, first = inputs["u"], inputs["first"]
        size = u.shape[0]
        h = self.n_hcubes
        cube = _hypercube_of(state["ends"], first, size, h)
        y = strata.point_in_hypercube(cube, u, state["nstrat"], state["stride"])
        x, v, keep, bad = self._core(y, valid, state["left"], state["width"])
        # n / (H n_h): the inverse of the event density the allocation gives y
        hweight = t.gather(state["hweight"], cube)
        out = {"nonfinite": count_true(bad),
               **self._train(self._training_value(v), y, keep, state, hweight)}
        both = t.concat([v, v * v], axis=1)
        if h <= HCUBE_WINDOW:
            seg = t.where(keep, cube, h)
            out["hcube"] = segment_block_sum(both, seg, h + 1)[:h]
        else:
            # every hypercube has >= 2 events, so a block meets <= size // 2 + 2 of them
            if size // 2 + 2 > HCUBE_WINDOW:
                raise ValueError(f"VegasPlus with {h} hypercubes needs blocks of at most "
                                 f"{2 * (HCUBE_WINDOW - 2)} events, got {size}: pass a "
                                 f"smaller block_size (or max_hcubes <= {HCUBE_WINDOW})")
            start = cube[0]
            seg = t.where(keep, cube - start, HCUBE_WINDOW)
            out["hcube"] = segment_block_sum(both, seg, HCUBE_WINDOW + 1)[:HCUBE_WINDOW]
            out["hcube_first"] = t.cast(start, t.float64)
        if self.histograms:
            w = v * hweight[:, None]
            for hist in self.histograms:
                out.update(hist.block(x, w[:, hist.component]))
        return out

    def combine(self, rows, n_events):
        """Rows added in block order; with more than ``HCUBE_WINDOW`` hypercubes each
        block's window of hypercube sums is added at its place, in block order (the
        same bits as full rows: the hypercubes outside a window would add zeros)."""
        totals = super().combine(rows, n_events)
        self._windowed = None
        h = self.n_hcubes
        if h is not None and h > HCUBE_WINDOW:
            cols = columns(self)
            (a, b), (f0, _) = cols["hcube"], cols["hcube_first"]
            full = np.zeros((h, (b - a) // HCUBE_WINDOW))
            for row in np.asarray(rows, dtype=np.float64):
                start = int(row[f0])
                stop = min(h, start + HCUBE_WINDOW)
                full[start:stop] += row[a:b].reshape(HCUBE_WINDOW, -1)[:stop - start]
            self._windowed = (n_events, full)
        return totals

    def _hcube_sums(self, totals, n_events):
        windowed = getattr(self, "_windowed", None)
        if self.n_hcubes > HCUBE_WINDOW:
            if windowed is None or windowed[0] != n_events:
                raise RuntimeError("VegasPlus: estimate() before combine() of the iteration")
            return windowed[1]
        return totals["hcube"]

    def _hcube_stats(self, totals, n_events):
        if self._alloc is None or self._alloc[0] != n_events:
            raise RuntimeError("VegasPlus: totals do not match the prepared allocation")
        counts = self._alloc[1].astype(np.float64)[:, None]
        k = max(self.components, 1)
        sums = self._hcube_sums(totals, n_events)
        s1, s2 = sums[:, :k], sums[:, k:]
        dv = 1.0 / self.n_hcubes
        mean = s1 / counts
        var = np.maximum(s2 - s1 * mean, 0.0) / (counts - 1.0)   # per-event variance
        return dv * mean, dv * dv * var, counts

    def estimate(self, totals, n_events):
        mean, var, counts = self._hcube_stats(totals, n_events)
        value = mean.sum(axis=0)
        error = np.sqrt((var / counts).sum(axis=0))
        return estimate_record(value, error, self.components, self.histograms, totals,
                               n_events)

    def adapt(self, totals, n_events):
        if self.frozen:
            return
        _, var, counts = self._hcube_stats(totals, n_events)
        var = var / counts                 # the variance of each hypercube's mean
        sigma2 = var.sum(axis=1) if self.train == "norm" else var[:, self.train]
        if self.beta > 0:
            self.sigf = np.sqrt(sigma2) ** self.beta
        super().adapt(totals, n_events)
        self._alloc = None

    # -- save / load, checkpoints ----------------------------------------------------
    def _strata(self):
        """``nstrat`` and ``sigf`` (none before the hypercubes are chosen)."""
        if self.nstrat is None:
            return {}
        return {"nstrat": self.nstrat.copy(), "sigf": self.sigf.copy()}

    def _set_strata(self, arrays):
        """Restore what :meth:`_strata` gave; False if ``arrays`` has none."""
        if "nstrat" not in arrays:
            return False
        self._set_nstrat(arrays["nstrat"])
        self.sigf = np.array(arrays["sigf"], dtype=np.float64)
        return True

    def _grid_arrays(self):
        return {"edges": self.edges, **self._strata()}

    def _set_grid_arrays(self, arrays):
        self.set_edges(arrays["edges"])
        self._set_strata(arrays)

    def config(self):
        cfg = super().config()
        # "sigma_h": what the allocation follows (absent from older checkpoints, where it
        # was the per-event standard deviation and nstrat another rule: those are
        # refused, naming it).  "map_training": the weights of the map's training (absent
        # from older checkpoints, whose events trained it unweighted: refused, naming it)
        cfg.update({"beta": self.beta, "neval_frac": self.neval_frac,
                    "max_hcubes": self.max_hcubes, "sigma_h": "of the mean",
                    "map_training": MAP_TRAINING})
        return cfg

    def get_state(self):
        return {**super().get_state(), **self._strata()}

    def set_state(self, state):
        super().set_state(state)
        if not self._set_strata(state) and self.nstrat is not None:
            # a state from before any iteration
            self.sigf = np.ones(self.n_hcubes)
        self._alloc = None
