"""VEGAS: adaptive importance sampling with a separable map and stratified sampling
(Lepage 1978, 2021).

The map sends ``y`` uniform in the unit cube to ``x`` in the integration box,
one axis at a time: axis ``d`` is cut into ``n_bins`` increments of equal
probability in ``y`` whose widths in ``x`` adapt between iterations, so that
each increment carries about the same share of ``sum(J^2 f^2)``.  The map is
numpy state handed to every block as a tensor (the kernel never retraces); the
per-axis training sums are per-block accumulators made with
:func:`flowsim.core.sums.segment_block_sum` (O(events * dim), no dense masks),
added in block order like every other sum, so a trained grid has the same
bits on every backend and for every ``events_limit``.  By default ``y`` is
stratified in hypercubes of equal events (:mod:`flowsim.algorithms.strata`).
"""
import numbers
import os

import numpy as np

from ..core.blocks import check_count
from ..core.fastmath import is_finite
from ..core.integrand import evaluate
from ..core.kernel import columns
from ..core.lazy_tf import tf
from ..core.sums import count_true, segment_block_sum
from . import strata
from .histogram import estimate_record
from .plain import Plain, moments

#: Keeps empty increments from collapsing to zero width (as in ``vegas``).
TINY = 1e-300
GRID_FORMAT = 1
#: Events per hypercube from which Vegas chooses ``nstrat`` (as ``vegas``'s ``beta=0``).
EVENTS_PER_HCUBE = 2
#: Cap on Vegas's default strata per axis: in one to three dimensions thousands of
#: strata of two events each under-estimate the error of integrable singularities.
MAX_STRATA_PER_AXIS = 32
#: Default ``alpha`` of Vegas with and without stratification.
ALPHA_STRATIFIED, ALPHA_UNIFORM = 0.5, 1.5


def check_n_bins(n_bins):
    if isinstance(n_bins, bool) or not isinstance(n_bins, (int, np.integer)):
        raise TypeError(f"n_bins must be an integer >= 2, got {n_bins!r}")
    if n_bins < 2:
        raise ValueError(f"n_bins must be >= 2, got {n_bins!r}")
    return int(n_bins)


def check_fraction(name, value, low, high=None):
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise TypeError(f"{name} must be a real number, got {value!r}")
    value = float(value)
    if not np.isfinite(value) or value < low or (high is not None and value > high):
        span = f"in [{low}, {high}]" if high is not None else f">= {low}"
        raise ValueError(f"{name} must be {span}, got {value!r}")
    return value


def smooth_and_regrid(edges, sum_f, n_f, alpha):
    """New edges ``[dim, n+1]`` from per-increment training sums (Lepage's rule).

    The average training value of each increment is smoothed with its
    neighbours (weights 1/8, 6/8, 1/8), normalised, compressed as
    ``((1 - r) / -ln r) ** alpha`` (``alpha`` damps the change: 0 keeps the
    grid) and the new edges cut the cumulative sum into ``n`` equal parts,
    interpolating linearly inside the old increments.
    """
    edges = np.asarray(edges, dtype=np.float64)
    dim, n1 = edges.shape
    n = n1 - 1
    if alpha == 0:
        return edges.copy()
    avg = np.where(n_f > 0, sum_f / np.where(n_f > 0, n_f, 1.0), 0.0)
    avg = np.abs(avg)
    sm = np.empty_like(avg)
    sm[:, 0] = (7.0 * avg[:, 0] + avg[:, 1]) / 8.0
    sm[:, -1] = (7.0 * avg[:, -1] + avg[:, -2]) / 8.0
    sm[:, 1:-1] = (6.0 * avg[:, 1:-1] + avg[:, :-2] + avg[:, 2:]) / 8.0
    total = sm.sum(axis=1, keepdims=True)
    new = np.empty_like(edges)
    for d in range(dim):
        if not total[d, 0] > 0 or not np.isfinite(total[d, 0]):
            new[d] = edges[d]           # no information on this axis: keep it
            continue
        r = sm[d] / total[d, 0] + TINY
        with np.errstate(divide="ignore", invalid="ignore"):
            w = np.where((r > 0) & (r <= 0.99999999), (-(1.0 - r) / np.log(r)) ** alpha, r)
        cum = np.concatenate([[0.0], np.cumsum(w)])
        targets = cum[-1] * np.arange(1, n) / n
        new[d, 0], new[d, n] = edges[d, 0], edges[d, n]
        new[d, 1:n] = np.interp(targets, cum, edges[d])
    return new


def _check_train(train):
    """``train``: a component index >= 0 or ``"norm"``."""
    if not (train == "norm" or (isinstance(train, (int, np.integer))
                                 and not isinstance(train, bool) and train >= 0)):
        raise ValueError(f"train must be a component index >= 0 or 'norm', got {train!r}")
    return train if train == "norm" else int(train)


class Vegas(Plain):
    """VEGAS adaptive Monte Carlo integration of ``integrand`` over ``limits``.

    Parameters
    ----------
    integrand : callable
        TensorFlow-traceable ``f(x)``, ``x`` of shape ``[n, dim]`` in ``limits``
        (dtype of the Flow), returning ``[n]`` or ``[n, k]`` of the same dtype.
    dim : int
        Number of integration variables (> 0).
    limits : array [dim, 2] or (low, high) or None
        Integration box; default the unit cube.
    n_bins : int
        Increments of the map per axis (default 100, >= 2).  More increments
        follow sharper peaks but need more events per iteration to train
        (a few hundred events per increment is comfortable: with fewer than
        about 50 per increment, lower ``n_bins``) and make the map improve
        over more iterations.  ``vegas`` uses up to 1,000; on peaked
        integrands at 10^5 to 2*10^6 events per iteration 100 to 500 gave
        smaller errors than 50, and more than 100 made the combined error of
        a short run overestimated, as the map was still improving
        (figures: ``docs/performance.rst``, "vegas.py").
    alpha : float or None
        Damping of the grid refinement, >= 0.  Larger adapts faster (and
        noisier); 0 never changes the grid.  Default (None): 0.5 with
        stratification (as ``vegas``), 1.5 without.  Stratified sampling
        measures the integrand in every region at every iteration, so a map
        that adapts fast (1.5) can lock onto one of several peaks and keep
        it, with an error far too small.  0.5 kept both peaks of the double
        Gaussian with honest pulls, and was the value that did not lose to
        ``vegas``'s ``beta=0`` on any of the peaked integrands measured;
        0.75 gave smaller errors on separable peaks, so raise it towards 0.75
        for those.  Without stratification every event trains the map and
        1.5 did best, 0.5 leaving errors several times larger (figures:
        ``docs/performance.rst``, "vegas.py").
        Lower it if the map still changes a lot from one iteration to the
        next once it has converged (the per-iteration errors jump about).
    train : int or "norm"
        For vector integrands ``[n, k]``: which component trains the grid
        (default 0), or ``"norm"`` for the Euclidean norm of all components.
        Every component is estimated either way.
    histograms : sequence of :class:`flowsim.Histogram`
        Observables to histogram, weighted by the integrand's contribution.
    grid : array [dim, n_bins+1] or path or None
        Start from these map edges, given as fractions of each axis of
        ``limits`` (0 ... 1, strictly increasing), or from a file written by
        :meth:`save_grid`.  Default: the uniform map.
    stratify : bool
        Stratified sampling of ``y`` in hypercubes of equal events (default
        True).  False samples ``y`` uniformly, without strata: the kernel of
        flowsim's first versions, with its bits, which resumes checkpoints
        written by it (they are refused without it, naming ``stratify``).
    nstrat : sequence of int or None
        Strata per axis (needs ``stratify=True``).  Default: chosen at the
        first iteration from its event count, as even as possible with
        about two events per hypercube (``H <= n / 2``, as ``vegas``'s
        ``beta=0``) and at most 32 strata per axis, then fixed (a checkpoint
        or saved grid keeps it).  The cap matters in one to three
        dimensions: there thousands of strata of two events each make the
        error of an integrable singularity (``x^-0.4``) too small on some
        seeds, while 16-256 strata keep it honest.  An iteration needs
        ``n_events >= 2 H``.  Fewer hypercubes give steadier
        per-iteration error estimates on integrands that are nearly zero in
        most of the cube.
    freeze_after : int or None
        Train the map for this many iterations, then freeze it (default None:
        train at every iteration until :meth:`freeze`).  Adapt-then-measure in
        one run: ``Flow.run(k + m, skip=k)`` with ``freeze_after=k`` reports
        ``m`` iterations of one frozen map, pooled as one sample, so the
        result carries no bias from a map trained on the events it measures
        (``flowsim.integrate(..., freeze_after=k)`` does this).  The count and
        the frozen map are part of the checkpointed state.

    One iteration estimates the integral as the mean of ``f(x) J(y)`` over its
    events (error from the sample variance), then, unless frozen, refines the
    map from the per-increment sums of ``(f J)^2`` of that iteration.  The first
    iterations of a fresh grid are poor: leave them out of the result with
    ``Flow.run(n_iter, skip=k)``.  Call :meth:`freeze` to stop training (the
    kernel then skips the training sums).  ``chi2_dof`` of the result near 1
    says the per-iteration errors are consistent; the Flow logs a warning when
    it is above the 99.9 % point of chi^2 (:func:`flowsim.core.result.warn_if_inconsistent`).

    Caveat: the map is separable, so it cannot tell two peaks apart on the
    diagonal.  On integrands with several peaks it can adapt to one of them and
    lose the others: later iterations then all miss the same peak, agree with
    each other and report a small error about the wrong value, and no chi^2 test
    can see it.  On the 8-dim double Gaussian (``flowsim run gaussian8
    --algorithm vegas``) at 2e5 events per iteration this happened for some
    seeds without stratification (how many: ``docs/performance.rst``);
    Lepage's ``vegas`` does the same.  Stratification (the default) keeps
    sampling every region and mostly recovers, but not always within a few
    iterations.  Use :class:`flowsim.VegasPlus`, whose allocation follows the
    peaks, for integrands that may have more than one peak, or many more
    events per iteration.  Discontinuous integrands (the indicator of a small box) meet
    a milder form of the same problem: the map moves every increment edge inside
    the box, so thin strips along the box's edges fall in the wide first and
    last increments and are hit rarely, with large weights; at a few hundred
    events per increment the iterations then come out low with errors far too
    small (figures: ``docs/performance.rst``).  Give such integrands many more
    events per iteration.

    Caveat of the stratification: an integrable singularity (``x^-0.4`` at
    0) lies in a hypercube whose few events rarely see its tail, so with many
    small hypercubes the iterations come out low with errors too small on
    some seeds (``vegas``'s ``beta=0`` does the same).  The default cap of 32
    strata per axis keeps ``x^-0.4`` in 1-d honest; if you pass ``nstrat``
    for such an integrand, keep a few hundred events per hypercube, or use
    ``stratify=False`` or :class:`flowsim.VegasPlus`.

    With ``stratify=True`` (the default, as in ``vegas``'s ``beta=0`` and
    Lepage's 1978 VEGAS) the ``y`` cube is cut into ``H = prod(nstrat)``
    hypercubes and every hypercube gets the same number of events (``n // H``
    or one more); the estimate is the sum of the hypercube means over ``H``,
    its variance the sum of their variances.  On smooth peaks this gives much
    smaller errors for the same events than uniform ``y``, and it keeps
    sampling every region of the cube.  The events are laid out in hypercube
    order, the hypercube of event ``e`` follows from ``e`` alone, and a block
    returns a few numbers per component whatever ``H`` is
    (:mod:`flowsim.algorithms.strata`), so any ``H`` up to ``n / 2`` costs
    little.  :class:`flowsim.VegasPlus` adds the adaptive allocation of
    events to hypercubes.

    Iterations are combined as :func:`flowsim.core.stats.combine` describes: a
    weighted average over iterations whose weights are capped, so that an
    iteration that missed a peak (low value, low error) or had no hit (error 0)
    cannot take over the result.  Iterations of a frozen map (or ``alpha=0``)
    run in one state and are pooled as one sample.

    Per event the kernel does O(dim) work: the increment of each axis is
    ``floor(y * n_bins)`` (the increments are uniform in ``y``), a gather of
    its edge and width, and one segment sum of ``(f J)^2`` into
    ``dim * n_bins`` bins.  Under the Flow's default ``jit_compile=True`` XLA
    fuses all of it with the integrand.  Stratified, an event also gets its
    hypercube number and a block two segment sums over the hypercubes it
    meets.
    """

    #: Whether ``stratify`` means hypercubes of equal events (VegasPlus allocates its own).
    _equal_strata = True
    inconsistency_advice = ("use more events per iteration, skip more warm-up iterations, or "
                            "VegasPlus, whose stratification keeps every peak in view")

    def __init__(self, integrand, dim, limits=None, n_bins=100, alpha=None, train=0,
                 histograms=(), grid=None, stratify=True, nstrat=None, freeze_after=None):
        super().__init__(integrand, dim, limits=limits, histograms=histograms)
        self.freeze_after = (None if freeze_after is None
                             else check_count("freeze_after", freeze_after))
        self._trained = 0
        if not isinstance(stratify, (bool, np.bool_)):
            raise TypeError(f"stratify must be True or False, got {stratify!r}")
        self.stratify = bool(stratify)
        self._given_nstrat = None
        if not hasattr(self, "nstrat"):
            self.nstrat = None
        if self._equal:
            if nstrat is not None:
                self._given_nstrat = strata.check_nstrat(nstrat, self.dim)
            self.nstrat = self._given_nstrat
        elif nstrat is not None and self._equal_strata:
            raise ValueError("nstrat needs stratify=True")
        self.n_bins = check_n_bins(n_bins)
        if alpha is None:
            alpha = ALPHA_STRATIFIED if self.stratify else ALPHA_UNIFORM
        self.alpha = check_fraction("alpha", alpha, 0.0)
        self.train = _check_train(train)
        self.frozen = False
        self.edges = np.tile(np.linspace(0.0, 1.0, self.n_bins + 1), (self.dim, 1))
        if grid is not None:
            if isinstance(grid, (str, os.PathLike)):
                self.load_grid(grid)
            else:
                self.set_edges(grid)

    # -- the map -------------------------------------------------------------------
    def _check_components(self, k):
        if self.train != "norm" and self.train >= max(k, 1):
            raise ValueError(f"train={self.train} but the integrand has "
                             f"{max(k, 1)} component(s)")

    def set_edges(self, edges):
        """Replace the map by ``edges`` ``[dim, n_bins+1]`` (fractions of each axis)."""
        e = np.array(edges, dtype=np.float64)
        if e.shape != (self.dim, self.n_bins + 1):
            raise ValueError(f"grid must have shape [dim, n_bins+1] = [{self.dim}, "
                             f"{self.n_bins + 1}], got {list(e.shape)}")
        if not np.all(np.isfinite(e)) or np.any(np.diff(e, axis=1) <= 0):
            raise ValueError("grid edges must be finite and strictly increasing on every axis")
        if not (np.all(e[:, 0] == 0.0) and np.all(e[:, -1] == 1.0)):
            raise ValueError("grid edges must start at 0 and end at 1 on every axis")
        self.edges = e

    @property
    def grid(self):
        """Edges of the map in the coordinates of ``limits``, ``[dim, n_bins+1]``."""
        return self.domain.low[:, None] + self.edges * self.domain.width[:, None]

    def freeze(self, frozen=True):
        """Stop (or with ``False`` resume) training the map between iterations."""
        self.frozen = bool(frozen)
        return self

    @property
    def _equal(self):
        """Stratified in hypercubes of equal events (Vegas with ``stratify=True``)."""
        return self._equal_strata and self.stratify

    @property
    def n_hcubes(self):
        """Number of hypercubes (None before they are chosen, or unstratified)."""
        return int(np.prod(self.nstrat)) if self.nstrat is not None else None

    def prepare(self, n_events):
        """Choose ``nstrat`` from the first iteration's ``n_events`` (if not given)
        and check that every hypercube gets at least two events."""
        if not self._equal:
            return
        n_events = check_count("n_events", n_events)
        if self.nstrat is None:
            self.nstrat = strata.choose_nstrat(self.dim, n_events, n_events, EVENTS_PER_HCUBE,
                                                MAX_STRATA_PER_AXIS)
        h = self.n_hcubes
        if n_events < 2 * h:
            raise ValueError(f"{type(self).__name__} needs n_events >= 2 * hypercubes = "
                             f"{2 * h} (nstrat={self.nstrat.tolist()}), got {n_events}; "
                             f"pass a smaller nstrat")
        self._n_events = n_events

    def map(self, y):
        """Map unit-cube points ``y`` ``[n, dim]`` (numpy) to ``(x, jacobian)``.

        ``x`` is in ``limits``; ``jacobian`` includes the box volume, so the
        mean of ``f(x) * jacobian`` over uniform ``y`` is the integral.
        """
        y = np.asarray(y, dtype=np.float64)
        n = self.n_bins
        z = y * n
        iy = np.minimum(z.astype(np.int64), n - 1)
        d = np.arange(self.dim)
        left = self.edges[d, iy]
        width = self.edges[d, iy + 1] - left
        x01 = left + width * (z - iy)
        jac = np.prod(width * n, axis=1) * self.domain.volume
        return self.domain.low + x01 * self.domain.width, jac

    def sample(self, n, seed=None, dtype="float64"):
        """Draw ``n`` points from the trained map and weight them.

        Returns ``(x, weights)``: ``x`` ``[n, dim]`` in ``limits`` distributed
        as the map's density, and ``weights = f(x) * jacobian`` (``[n]`` or
        ``[n, k]``), whose mean is an unbiased estimate of the integral (the
        ``sum(weights) / n`` of an event sample; unweight by accepting with
        probability ``weights / max(weights)``).  Random numbers are Philox,
        from ``seed`` (default drawn from the OS), in blocks of 65,536.
        """
        import secrets

        from ..core.blocks import check_count
        from ..core.kernel import check_seed
        t = tf()
        n = check_count("n", n)
        seed = check_seed(secrets.randbits(62) if seed is None else seed)
        tdtype = getattr(t, dtype)
        xs, ws = [], []
        step = 1 << 16
        for b, start in enumerate(range(0, n, step)):
            size = min(step, n - start)
            y = t.random.stateless_uniform([size, self.dim], seed=[seed, b], dtype=tdtype,
                                           alg="philox").numpy().astype(np.float64)
            x, jac = self.map(y)
            f = evaluate(self.integrand, t.constant(x, tdtype), self.components).numpy()
            f = f.astype(np.float64) * jac[:, None]
            xs.append(x)
            ws.append(f if self.components else f[:, 0])
        return np.concatenate(xs), np.concatenate(ws)

    # -- save / load -----------------------------------------------------------------
    def _grid_arrays(self):
        if self._equal and self.nstrat is not None:
            return {"edges": self.edges, "nstrat": self.nstrat}
        return {"edges": self.edges}

    def save_grid(self, path):
        """Write the trained map to ``path`` (``.npz``); :meth:`load_grid` reads it."""
        arrays = {f"grid/{k}": np.asarray(v) for k, v in self._grid_arrays().items()}
        np.savez(path, format=np.array(GRID_FORMAT), cls=np.array(type(self).__name__),
                 dim=np.array(self.dim), n_bins=np.array(self.n_bins),
                 limits=self.domain.limits, **arrays)

    def load_grid(self, path):
        """Read a map written by :meth:`save_grid` (same dim and n_bins)."""
        with np.load(path, allow_pickle=False) as data:
            if int(data["format"]) != GRID_FORMAT:
                raise ValueError(f"grid file {str(path)!r} has format {int(data['format'])}, "
                                 f"this flowsim reads {GRID_FORMAT}")
            dim, n_bins = int(data["dim"]), int(data["n_bins"])
            if (dim, n_bins) != (self.dim, self.n_bins):
                raise ValueError(f"grid file {str(path)!r} is for dim={dim}, n_bins={n_bins}; "
                                 f"this {type(self).__name__} has dim={self.dim}, "
                                 f"n_bins={self.n_bins}")
            arrays = {k[len("grid/"):]: data[k] for k in data.files if k.startswith("grid/")}
        self._set_grid_arrays(arrays)
        return self

    def _set_grid_arrays(self, arrays):
        self.set_edges(arrays["edges"])
        if self._equal and "nstrat" in arrays:
            self.nstrat = strata.check_nstrat(arrays["nstrat"], self.dim)

    # -- the Simulation contract ---------------------------------------------------
    #: Whether the training also counts the events of each increment (``train_n``).
    #: Vegas' ``y`` is uniform, so every increment expects ``n / n_bins`` and the
    #: counts are not needed; VegasPlus stratifies ``y`` and counts.
    _count_increments = False

    def accumulators(self):
        acc = {**super().accumulators(), "train_f2": (self.dim * self.n_bins,)}
        if self._count_increments:
            acc["train_n"] = (self.dim * self.n_bins,)
        if self._equal:
            self._need_nstrat()
            k = max(self.components, 1)
            del acc["sum"], acc["m2"], acc["count"]
            acc.update({"strat_sum": (k,), "strat_var": (k,),
                        "strat_edges": (2, strata.EDGE_HEAD + 2 * k)})
        return acc

    def _need_nstrat(self):
        if self.nstrat is None:
            raise RuntimeError(f"{type(self).__name__}: the hypercubes are chosen from the "
                               f"first iteration's size; run it in a Flow (or call "
                               f"prepare(n_events) or pass nstrat=) first")
        return self.n_hcubes

    def state(self):
        left = self.edges[:, :-1].reshape(-1)
        width = np.diff(self.edges, axis=1).reshape(-1)
        st = {"left": left, "width": width, "train": np.array(not self.frozen)}
        if self._equal:
            if getattr(self, "_n_events", None) is None:
                raise RuntimeError(f"{type(self).__name__}.state() before prepare(n_events)")
            per, extra = divmod(self._n_events, self._need_nstrat())
            st.update({"per": np.array(per, np.int64), "extra": np.array(extra, np.int64),
                       "nstrat": self.nstrat.copy(), "stride": strata.strides(self.nstrat)})
        return st

    def inputs(self, key, first_event, size, dtype, state):
        u = super().inputs(key, first_event, size, dtype, state)
        return {"u": u, "first": first_event} if self._equal else u

    def _core(self, y, valid, left, width):
        """Map, integrand and mask for one block.

        ``y`` ``[n, dim]`` in the unit cube -> ``x`` ``[n, dim]`` in ``limits``,
        ``v = f(x) J(y) V`` (float64 ``[n, k]``, zero where masked or
        non-finite), ``keep`` and ``bad`` (valid but non-finite).
        """
        t = tf()
        n = self.n_bins
        z, iy, ids = self._increments(y)
        w = t.gather(t.cast(width, y.dtype), ids)
        x01 = t.gather(t.cast(left, y.dtype), ids) + w * (z - t.cast(iy, y.dtype))
        jac = t.cast(t.reduce_prod(w * n, axis=1), t.float64) * self.domain.volume
        x = self.domain.map(x01)
        f = evaluate(self.integrand, x, self.components)
        v = t.cast(f, t.float64) * jac[:, None]
        finite = t.reduce_all(is_finite(v), axis=1)
        keep = finite & valid
        v = t.where(keep[:, None], v, t.zeros_like(v))
        return x, v, keep, valid & ~finite

    def map_state(self):
        """The map as :meth:`weighted_points` takes it: ``{"left", "width"}`` of every
        increment (``[dim * n_bins]`` each)."""
        return {"left": self.edges[:, :-1].reshape(-1),
                "width": np.diff(self.edges, axis=1).reshape(-1)}

    def weighted_points(self, y, valid, state):
        """:meth:`flowsim.Plain.weighted_points` through the map: ``x`` is the map's
        image of ``y`` and ``J`` its Jacobian (times the box volume)."""
        return self._core(y, valid, state["left"], state["width"])

    def _increments(self, y):
        """``z = y n_bins``, the increment ``iy`` of each coordinate of ``y`` and
        its slot ``iy + d n_bins`` in the training sums (int32 ``[n, dim]`` each)."""
        t = tf()
        n = self.n_bins
        z = y * n
        iy = t.minimum(t.cast(z, t.int32), n - 1)
        return z, iy, iy + t.range(self.dim, dtype=t.int32) * n

    def _training_value(self, v):
        t = tf()
        if self.train == "norm":
            return t.reduce_sum(v * v, axis=1)
        return t.square(v[:, self.train])

    def _train(self, g, y, keep, state, weight=None):
        """Per-increment sums of ``g`` (and event counts, if counted), ``[dim * n_bins]``
        each, as the ``train_f2`` (and ``train_n``) accumulators; zeros when frozen.
        With ``weight`` ``[n]`` (counted increments only), each event adds ``weight g``
        and counts ``weight``.
        The increments of ``y`` are found again inside the branch, where XLA fuses
        them with the segment ids instead of storing them for it."""
        t = tf()
        m = self.dim * self.n_bins
        count = self._count_increments

        def accumulate():
            ids = self._increments(y)[2]
            flat = t.reshape(t.where(keep[:, None], ids, m), [-1])
            vals = t.reshape(t.broadcast_to(g[:, None], t.shape(ids)), [-1])
            if not count:
                return {"train_f2": segment_block_sum(vals, flat, m + 1)[:m]}
            ones = t.ones_like(vals)
            if weight is not None:
                w = t.reshape(t.broadcast_to(weight[:, None], t.shape(ids)), [-1])
                vals, ones = vals * w, w
            both = t.stack([vals, ones], axis=1)
            s = segment_block_sum(both, flat, m + 1)[:m]
            return {"train_f2": s[:, 0], "train_n": s[:, 1]}

        def skip():
            z = t.zeros([m], t.float64)
            return {"train_f2": z, "train_n": z} if count else {"train_f2": z}

        return t.cond(state["train"], accumulate, skip)

    def block(self, u, valid, state):
        if self._equal:
            return self._stratified_block(u, valid, state)
        x, v, keep, bad = self._core(u, valid, state["left"], state["width"])
        out = {**moments(v, valid),
               "nonfinite": count_true(bad),
               **self._train(self._training_value(v), u, keep, state)}
        for h in self.histograms:
            out.update(h.block(x, v[:, h.component]))
        return out

    def _stratified_block(self, inputs, valid, state):
        t = tf()
        u, first = inputs["u"], inputs["first"]
        size = u.shape[0]
        events = t.cast(first, t.float64) + t.range(size, dtype=t.float64)
        per, extra = state["per"], state["extra"]
        cube = strata.uniform_hypercube_of(events, t.cast(per, t.float64),
                                           t.cast(extra, t.float64))
        cube = t.cast(t.minimum(cube, self.n_hcubes - 1.0), t.int64)   # padding past the end
        y = strata.point_in_hypercube(cube, u, state["nstrat"], state["stride"])
        x, v, keep, bad = self._core(y, valid, state["left"], state["width"])
        out = {**strata.block_strata(v, valid, cube, per, extra, self.n_hcubes),
               "nonfinite": count_true(bad),
               **self._train(self._training_value(v), y, keep, state)}
        if self.histograms:
            # weight n / (H n_h): ~1, exactly what makes the histogram the stratified sum
            n_h = t.cast(t.where(cube < extra, per + 1, per), t.float64)
            n_over_h = t.cast(per, t.float64) + t.cast(extra, t.float64) / self.n_hcubes
            w = v * (n_over_h / n_h)[:, None]
            for hist in self.histograms:
                out.update(hist.block(x, w[:, hist.component]))
        return out

    def combine(self, rows, n_events):
        """Rows added in block order; stratified: the hypercubes split between blocks
        pooled (:func:`flowsim.algorithms.strata.pool_edges`) into ``strat_var``."""
        totals = super().combine(rows, n_events)
        if self._equal:
            cols = columns(self)
            (e0, e1), (v0, v1) = cols["strat_edges"], cols["strat_var"]
            per, extra = divmod(n_events, self.n_hcubes)
            edges = rows[:, e0:e1].reshape(-1, (e1 - e0) // 2)
            totals[e0:e1] = 0.0
            totals[v0:v1] = totals[v0:v1] + strata.pool_edges(edges, per, extra)
        return totals

    def estimate(self, totals, n_events):
        if not self._equal:
            return super().estimate(totals, n_events)
        h = self.n_hcubes
        value = totals["strat_sum"] / h
        error = np.sqrt(np.maximum(totals["strat_var"], 0.0)) / h
        return estimate_record(value, error, self.components, self.histograms, totals,
                               n_events)

    def adapt(self, totals, n_events):
        if self.frozen or self.alpha == 0:
            return
        shape = (self.dim, self.n_bins)
        if self._count_increments:
            counts = totals["train_n"].reshape(shape)
        else:
            counts = np.ones(shape)     # uniform y: every increment expects n / n_bins
        self.edges = smooth_and_regrid(self.edges, totals["train_f2"].reshape(shape),
                                       counts, self.alpha)
        self._trained += 1
        if self.freeze_after is not None and self._trained >= self.freeze_after:
            self.frozen = True

    def config(self):
        cfg = {**super().config(), "class": type(self).__name__, "n_bins": self.n_bins,
               "alpha": self.alpha, "train": self.train}
        if self._equal:
            # absent when unstratified: checkpoints from before stratified Vegas match
            # stratify=False exactly
            cfg["stratify"] = True
        if self.freeze_after is not None:   # absent otherwise: older checkpoints match
            cfg["freeze_after"] = self.freeze_after
        return cfg

    def get_state(self):
        st = {"edges": self.edges.copy(), "frozen": np.array(self.frozen)}
        if self.freeze_after is not None:
            st["trained"] = np.array(self._trained)
        if self._equal and self.nstrat is not None:
            st["nstrat"] = self.nstrat.copy()
        return st

    def set_state(self, state):
        self.set_edges(state["edges"])
        self.frozen = bool(state["frozen"])
        if "trained" in state:
            self._trained = int(state["trained"])
        if self._equal:
            self.nstrat = (strata.check_nstrat(state["nstrat"], self.dim) if "nstrat" in state
                           else self._given_nstrat)
