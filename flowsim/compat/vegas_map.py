"""``vegas.AdaptiveMap`` in numpy: the same grids and maps as Lepage's ``vegas``.

Usage, as in ``vegas``::

    from flowsim.compat import vegas

    m = vegas.AdaptiveMap([[0, 1], [-1, 1]], ninc=100)   # uniform, 100 increments
    y = np.random.default_rng(1).random((10_000, 2))
    x = np.empty_like(y)
    jac = np.empty(len(y))
    for _ in range(10):
        m.map(y, x, jac)                                  # fills x and jac
        m.add_training_data(y, (jac * f(x)) ** 2)
        m.adapt(alpha=1.5)
    x = m(y)                                              # the adapted map
    integ = vegas.Integrator(m)                           # integrate with it

The map sends ``y`` in the unit cube to ``x``, one axis at a time:
``x[d] = grid[d, i] + inc[d, i] (y[d] ninc[d] - i)`` with ``i = floor(y[d]
ninc[d])``, Jacobian ``dx[d]/dy[d] = inc[d, i] ninc[d]``.  :meth:`adapt`
smooths, compresses and regrids as ``vegas`` does, so the same training data
give the same grid (to rounding, about 1e-15 relative).
"""
import math

import numpy as np

#: Floor of the training counts and weights (``vegas``'s ``TINY``).
TINY = 1e-257
#: The increments per axis :meth:`AdaptiveMap.adapt_to_samples` works with at most
#: (``vegas``'s ``Integrator.defaults['maxinc_axis']``).
MAXINC_AXIS = 1000

__all__ = ["AdaptiveMap"]


def _ninc_array(ninc, dim, name="ninc"):
    """``ninc`` (a number or one per axis) as an int array ``[dim]`` >= 1."""
    if np.shape(ninc) == ():
        out = np.full(dim, int(ninc), dtype=np.intp)
    elif np.shape(ninc) == (dim,):
        out = np.asarray(ninc).astype(np.intp)
    else:
        raise ValueError(f"{name} must be a number or one per axis ({dim}), got shape "
                         f"{list(np.shape(ninc))}")
    if out.min() < 1:
        raise ValueError(f"{name} must be >= 1 on every axis, got {out.tolist()}")
    return out


def _training_weights(sum_f, n_f, ninc, alpha):
    """``vegas``'s weight of each increment of one axis: the average training value,
    smoothed with its neighbours (1/8, 6/8, 1/8), normalised and compressed as
    ``((1 - r) / -ln r) ** alpha`` (raw averages for ``alpha < 0``)."""
    if sum_f is None or ninc < 2:
        return np.ones(ninc)
    n = n_f[:ninc]
    avg = np.where(n > 0, sum_f[:ninc] / np.where(n > 0, n, 1.0), 0.0)
    if alpha < 0:
        return avg
    smooth = np.empty(ninc)
    smooth[0] = abs(7.0 * avg[0] + avg[1]) / 8.0
    smooth[-1] = abs(7.0 * avg[-1] + avg[-2]) / 8.0
    smooth[1:-1] = np.abs(6.0 * avg[1:-1] + avg[:-2] + avg[2:]) / 8.0
    total = np.cumsum(np.concatenate([[smooth[0] + smooth[-1]], smooth[1:-1]]))[-1]
    if not total > 0:
        return np.full(ninc, TINY)
    r = (smooth / total + TINY).tolist()
    # libm's log and pow, as vegas's C code calls them (numpy's may differ in the last bit)
    return np.array([(-(1.0 - v) / math.log(v)) ** alpha if 0 < v <= 0.99999999 else v
                     for v in r])


def _regrid(grid, inc, weights, new_ninc):
    """Nodes ``[new_ninc + 1]`` cutting ``weights`` (one per old increment) into equal
    shares, linear inside each old increment: ``vegas``'s loop, operation for
    operation (the same bits)."""
    old = len(weights)
    w = weights.tolist()
    g, dx = grid.tolist(), inc.tolist()
    share = 0.0
    for v in w:
        share += v
    share /= new_ninc
    new = [g[0]] + [0.0] * (new_ninc - 1) + [g[old]]
    acc, j = 0.0, -1
    for i in range(1, new_ninc):
        while acc < share and j < old - 1:
            j += 1
            acc += w[j]
        if acc < share:
            break
        acc -= share
        new[i] = g[j + 1] - (acc / w[j]) * dx[j]
    return np.array(new)


class AdaptiveMap:
    """Adaptive map ``y -> x(y)`` from the unit cube to a box, one axis at a time,
    as ``vegas.AdaptiveMap``.

    ``AdaptiveMap(grid, ninc=None)``: ``grid[d]`` the nodes of axis ``d`` (at
    least 2, sorted here; axes may have different numbers), e.g. ``[[0, 1],
    [-1, 1]]`` for a box; ``ninc`` (a number or one per axis) re-divides it
    into that many increments keeping the map's density (a uniform grid if
    every axis has one increment).  ``grid`` may also be another map (copied).

    Attributes: ``grid`` ``[dim, max(ninc) + 1]`` (rows past an axis's
    ``ninc[d] + 1`` nodes repeat its last node), ``inc`` (increment widths),
    ``ninc``, ``dim``, and the training sums ``sum_f``, ``n_f`` (None after
    :meth:`clear`).  Not provided: ``show_grid`` (plot :meth:`extract_grid`).
    """

    def __init__(self, grid, ninc=None):
        if isinstance(grid, AdaptiveMap):
            self._set_grid(grid.extract_grid())
        else:
            self._set_grid([sorted(float(v) for v in np.ravel(g)) for g in grid])
        if ninc is not None and not np.all(np.asarray(ninc) == self.ninc):
            if np.all(self.ninc == 1):
                self.make_uniform(ninc=ninc)
            else:
                self.adapt(ninc=ninc)

    def _set_grid(self, rows):
        """Install the node lists ``rows`` (one per axis) and clear the training."""
        if len(rows) == 0:
            raise ValueError("grid must have at least one axis, got none")
        sizes = [len(r) for r in rows]
        if min(sizes) < 2:
            raise ValueError(f"grid[d] must have at least 2 elements, not {min(sizes)}")
        width = max(sizes)
        self.grid = np.array([list(r) + [r[-1]] * (width - len(r)) for r in rows],
                             dtype=np.float64)
        self.inc = np.diff(self.grid, axis=1)
        self.ninc = np.array(sizes, dtype=np.intp) - 1
        if not np.all(np.isfinite(self.grid)):
            raise ValueError("grid nodes must be finite (flowsim's Integrator takes "
                             "infinite limits, with its own change of variables)")
        self.clear()

    @property
    def dim(self):
        """Number of dimensions."""
        return self.grid.shape[0]

    def region(self, d=-1):
        """``(low, high)`` of axis ``d``, or the list of them with ``d`` omitted."""
        if d < 0:
            return [self.region(k) for k in range(self.dim)]
        return (self.grid[d, 0], self.grid[d, self.ninc[d]])

    def extract_grid(self):
        """The nodes of every axis, a list of lists (``AdaptiveMap(m.extract_grid())``
        is a copy of ``m``)."""
        return [list(self.grid[d, :self.ninc[d] + 1]) for d in range(self.dim)]

    def __reduce__(self):
        return (AdaptiveMap, (self.extract_grid(),))

    def settings(self, ngrid=5):
        """Up to ``ngrid`` nodes of each axis, as text (``vegas``'s format)."""
        lines = []
        for d in range(self.dim if ngrid > 0 else 0):
            nodes = self.grid[d, :self.ninc[d] + 1]
            skip = max(1, int(self.ninc[d] // ngrid))
            text = np.array2string(nodes[skip // 2::skip], precision=3,
                                   prefix="    grid[xx] = ")
            lines.append(f"    grid[{d:2d}] = {text}")
        return "\n".join(lines) + "\n"

    def show_grid(self, *args, **kwargs):
        """Not provided: plot the nodes of :meth:`extract_grid` with matplotlib."""
        raise NotImplementedError("AdaptiveMap.show_grid is not provided by flowsim; plot "
                                  "m.extract_grid()[d] (the nodes of axis d) with matplotlib")

    def random(self, n=None):
        """``n`` random points of the map (one point if ``n`` is None), from numpy's
        generator seeded by the OS."""
        rng = np.random.default_rng()
        return self(rng.random(self.dim if n is None else (n, self.dim)))

    def make_uniform(self, ninc=None):
        """Replace the grid by a uniform one of ``ninc`` increments per axis (default:
        as many as now)."""
        ninc = self.ninc.copy() if ninc is None else _ninc_array(ninc, self.dim)
        self._set_grid([np.linspace(self.grid[d, 0], self.grid[d, self.ninc[d]], ninc[d] + 1)
                        .tolist() for d in range(self.dim)])

    # -- the map ------------------------------------------------------------------------
    def _cells(self, y, d):
        """Increment index (clamped to the last), fractional part and ``ninc`` of
        ``y[:, d]``."""
        ninc = int(self.ninc[d])
        y_ninc = y[:, d] * ninc
        iy = np.floor(y_ninc)
        return np.minimum(iy.astype(np.intp), ninc - 1), y_ninc - iy, ninc, iy < ninc

    def map(self, y, x, jac, ny=-1):
        """Fill ``x[j, d]`` with the image of ``y[j, d]`` and ``jac[j]`` with the
        Jacobian ``dx/dy``, for the first ``ny`` points (all with ``ny < 0``);
        ``x`` and ``jac`` are preallocated: ``np.empty(y.shape)``, ``np.empty(len(y))``."""
        y = np.asarray(y, dtype=np.float64)
        ny = _count(ny, y.shape[0], "ny")
        y = y[:ny]
        jac[:ny] = 1.0
        for d in range(self.dim):
            iy, dy, ninc, inside = self._cells(y, d)
            x[:ny, d] = np.where(inside, self.grid[d, iy] + self.inc[d, iy] * dy,
                                 self.grid[d, ninc])
            jac[:ny] *= self.inc[d, iy] * ninc

    def invmap(self, x, y, jac, nx=-1):
        """Fill ``y`` with the points mapped to ``x`` and ``jac`` with ``dx/dy`` there
        (the inverse of :meth:`map`; ``x`` outside the box goes to its edge)."""
        x = np.asarray(x, dtype=np.float64)
        nx = _count(nx, x.shape[0], "nx")
        jac[:nx] = 1.0
        for d in range(self.dim):
            ninc = int(self.ninc[d])
            nodes = self.grid[d, :ninc + 1]
            iy = np.searchsorted(nodes, x[:nx, d], side="right")
            i = np.clip(iy - 1, 0, ninc - 1)
            inside = (iy > 0) & (iy <= ninc)
            with np.errstate(divide="ignore", invalid="ignore"):
                y_in = (i + (x[:nx, d] - nodes[i]) / self.inc[d, i]) / ninc
            y[:nx, d] = np.where(inside, y_in, np.where(iy <= 0, 0.0, 1.0))
            jac[:nx] *= self.inc[d, i] * ninc

    def __call__(self, y):
        """The points ``x`` of ``y`` (one point ``[dim]`` or an array ``[..., dim]``)."""
        y = np.asarray(y, dtype=np.float64)
        flat = y.reshape(-1, y.shape[-1])
        x = np.empty_like(flat)
        self.map(flat, x, np.empty(flat.shape[0]))
        return x.reshape(y.shape)

    def jac1d(self, y):
        """The Jacobian of each axis, ``dx[d]/dy[d]``, at ``y`` (shape of ``y``)."""
        y = np.asarray(y, dtype=np.float64)
        flat = y.reshape(-1, y.shape[-1])
        out = np.empty_like(flat)
        for d in range(self.dim):
            iy, _, ninc, _ = self._cells(flat, d)
            out[:, d] = self.inc[d, iy] * ninc
        return out.reshape(y.shape)

    def jac(self, y):
        """The Jacobian ``dx/dy`` at ``y`` (``y``'s shape without its last axis)."""
        return np.prod(self.jac1d(y), axis=-1)

    # -- training -----------------------------------------------------------------------
    def add_training_data(self, y, f, ny=-1):
        """Add training values ``f[j]`` at the points ``y[j]`` (first ``ny``) for the
        next :meth:`adapt`: increments shrink where ``|f|`` is large."""
        y = np.asarray(y, dtype=np.float64)
        ny = _count(ny, y.shape[0], "ny")
        f = np.abs(np.asarray(f, dtype=np.float64)[:ny])
        if self.sum_f is None:
            self.sum_f = np.zeros(self.inc.shape)
            self.n_f = np.zeros(self.inc.shape) + TINY
        width = self.inc.shape[1]
        for d in range(self.dim):
            yd = y[:ny, d]
            keep = (yd > 0) & (yd < 1)
            iy = np.minimum(np.floor(yd[keep] * self.ninc[d]).astype(np.intp),
                            self.ninc[d] - 1)
            self.sum_f[d] += np.bincount(iy, weights=f[keep], minlength=width)
            self.n_f[d] += np.bincount(iy, minlength=width)

    def adapt(self, alpha=0.0, ninc=None):
        """Move the nodes to the training data added since the last call (projected on
        each axis), damped by ``alpha`` (0: keep the density; larger: faster; < 0:
        the raw averages), with ``ninc`` increments (default: as many as now)."""
        new_ninc = self.ninc.copy() if ninc is None else _ninc_array(ninc, self.dim)
        alpha = float(alpha)
        rows = []
        for d in range(self.dim):
            old = int(self.ninc[d])
            if new_ninc.max() == 1:
                rows.append([self.grid[d, 0], self.grid[d, old]])
                continue
            sum_f = None if self.sum_f is None or alpha == 0 else self.sum_f[d]
            weights = _training_weights(sum_f, None if sum_f is None else self.n_f[d], old,
                                        alpha)
            rows.append(_regrid(self.grid[d], self.inc[d], weights, int(new_ninc[d])))
        self._set_grid([list(r) for r in rows])

    def clear(self):
        """Forget the training data added since the last :meth:`adapt`."""
        self.sum_f = None
        self.n_f = None

    def adapt_to_samples(self, x, f, nitn=5, alpha=1.0, nproc=1):
        """Adapt the map to the samples ``x`` ``[n, dim]`` of ``f`` (a function of
        the batch ``x`` or its values ``[n]``), ``nitn`` times with damping ``alpha``,
        as ``vegas`` does (on ``min(max(ninc, 1000), n / 10)`` increments, then
        back to ``max(ninc, 1000)``).  ``nproc`` other than 1 is refused."""
        if nproc != 1:
            raise ValueError(f"adapt_to_samples(nproc={nproc!r}) is not provided: flowsim "
                             f"trains in one process, vectorised; pass nproc=1")
        x = np.ascontiguousarray(x, dtype=np.float64)
        if x.ndim != 2 or x.shape[1] != self.dim:
            raise ValueError(f"incompatible shape of x: {x.shape} (need [n, {self.dim}])")
        fx = np.ascontiguousarray(f(x) if callable(f) else f, dtype=np.float64)
        if fx.shape[0] != x.shape[0]:
            raise ValueError(f"shape of x and f(x) mismatch: {x.shape} vs {fx.shape}")
        old_ninc = max(int(self.ninc.max()), MAXINC_AXIS)
        tmp_ninc = int(min(old_ninc, x.shape[0] / 10.0))
        if tmp_ninc < 2:
            raise ValueError(f"not enough samples: {x.shape[0]} (need at least 20)")
        y = np.empty(x.shape)
        jac = np.empty(x.shape[0])
        self.adapt(ninc=tmp_ninc)
        for _ in range(nitn):
            self.invmap(x, y, jac)
            self.add_training_data(y, (jac * fx) ** 2)
            self.adapt(alpha=alpha, ninc=tmp_ninc)
        if tmp_ninc != old_ninc:
            self.adapt(ninc=old_ninc)


def _count(n, available, name):
    """The number of points to use: ``n``, or all with ``n < 0``."""
    if n < 0:
        return available
    if n > available:
        raise ValueError(f"{name} > number of points: {n} > {available}")
    return int(n)


def rebinned(edges, n_bins):
    """``edges`` ``[dim, n + 1]`` of a map re-divided into ``n_bins`` increments per
    axis with the same density (``vegas``'s ``adapt(ninc=...)``)."""
    edges = np.asarray(edges, dtype=np.float64)
    if edges.shape[1] == n_bins + 1:
        return edges.copy()
    m = AdaptiveMap(edges.tolist())
    m.adapt(ninc=n_bins)
    return m.grid


def axis_jacobians(grid, x):
    """``dx[d]/dy[d]`` ``[n, dim]`` at points ``x`` ``[n, dim]`` of the map with nodes
    ``grid`` ``[dim, n_bins + 1]`` (the increment of ``x[d]``, times ``n_bins``)."""
    grid = np.asarray(grid, dtype=np.float64)
    n_bins = grid.shape[1] - 1
    out = np.empty(np.shape(x))
    for d in range(grid.shape[0]):
        i = np.clip(np.searchsorted(grid[d], x[:, d], side="right") - 1, 0, n_bins - 1)
        out[:, d] = (grid[d, i + 1] - grid[d, i]) * n_bins
    return out
