"""Sweeps: the same machinery with parameter rows instead of random events.

A block is a run of ``block_size`` consecutive rows; a chunk a run of blocks.
Each block returns its rows' outputs and the driver gathers them in row order,
so the output is the same on every backend and for any ``events_limit``.
"""
import numpy as np

from ..core.blocks import check_count
from ..core.lazy_tf import tf
from ..core.simulation import Simulation


def _as_structure(out):
    t = tf()
    if isinstance(out, dict):
        return {k: t.convert_to_tensor(v) for k, v in out.items()}
    return {"": t.convert_to_tensor(out)}


def param_rows(params):
    """``params`` as a non-empty numeric ``[rows, n_params]`` array (1-D: one column)."""
    params = np.asarray(params)
    if params.ndim == 1:
        params = params[:, None]
    if params.ndim != 2 or params.shape[0] == 0:
        raise ValueError(f"params must be a non-empty array of shape [rows, n_params], "
                         f"got shape {list(params.shape)}")
    if not np.issubdtype(params.dtype, np.number):
        raise TypeError(f"params must be numeric, got dtype {params.dtype}")
    return params


class Sweep(Simulation):
    """Evaluate ``kernel(params_rows, data)`` over every row of ``params``.

    ``kernel`` is TF-traceable; it receives a ``[rows, n_params]`` tensor and
    ``data`` (a tensor, a dict of tensors, or None) and returns ``[rows]`` or
    ``[rows, k]`` values, or a dict of such tensors.  Floating-point ``params``
    and ``data`` are cast to the Flow's dtype.
    """

    dim = 0

    def __init__(self, kernel, params, data=None, block_rows=None):
        if not callable(kernel):
            raise TypeError(f"kernel must be callable, got {kernel!r}")
        self.kernel = kernel
        self.params = param_rows(params)
        self.data = data
        self._outputs = None
        if block_rows is None:
            from ..core.blocks import default_block_size
            block_rows = default_block_size(self.n_rows, max_block=4096)
        #: Rows per block; the Flow running this sweep must use it as block_size.
        self.block_rows = check_count("block_rows", block_rows)

    @property
    def n_rows(self):
        return self.params.shape[0]

    def _data_dict(self):
        if self.data is None:
            return {}
        if isinstance(self.data, dict):
            return {f"data/{k}": np.asarray(v) for k, v in self.data.items()}
        return {"data": np.asarray(self.data)}

    def state(self):
        return {"params": self.params, **self._data_dict()}

    def _data_arg(self, state, dtype):
        t = tf()

        def cast(v):
            return t.cast(v, dtype) if v.dtype.is_floating else v

        if self.data is None:
            return None
        if isinstance(self.data, dict):
            return {k[len("data/"):]: cast(v) for k, v in state.items() if k.startswith("data/")}
        return cast(state["data"])

    def outputs(self):
        """``{name: k}`` of the kernel's outputs, found by tracing it once."""
        if self._outputs is None:
            t = tf()
            state = self.state()
            specs = {k: t.TensorSpec(v.shape, t.as_dtype(v.dtype)) for k, v in state.items()}

            def probe(st):
                p = st["params"]
                p = t.cast(p, t.float64) if p.dtype.is_floating else p
                return _as_structure(self.kernel(p, self._data_arg(st, t.float64)))

            try:
                out = t.function(probe).get_concrete_function(specs).structured_outputs
            except Exception as exc:
                raise TypeError(f"kernel must be TensorFlow-traceable as kernel(params_chunk, "
                                f"data): tracing failed with {type(exc).__name__}: {exc}") from exc
            self._outputs = {}
            for name, v in out.items():
                if v.shape.rank not in (1, 2) or (v.shape.rank == 2 and v.shape[1] is None):
                    raise ValueError(f"kernel output {name or 'value'!r} must have shape [rows] "
                                     f"or [rows, k], got {v.shape}")
                self._outputs[name] = 0 if v.shape.rank == 1 else int(v.shape[1])
        return self._outputs

    def _width(self):
        return sum(max(k, 1) for k in self.outputs().values())

    def accumulators(self):
        return {"rows": (self.block_rows * self._width(),)}

    def inputs(self, key, first_event, size, dtype, state):
        t = tf()
        if size != self.block_rows:
            raise ValueError(f"this Sweep was built for block_size={self.block_rows}, "
                             f"the Flow uses {size}")
        idx = t.minimum(first_event + t.range(size, dtype=t.int64), self.n_rows - 1)
        p = t.gather(state["params"], idx)
        # Floating data takes the Flow's dtype (not the params' dtype: int params
        # must not truncate float data).
        return (t.cast(p, dtype) if p.dtype.is_floating else p), self._data_arg(state, dtype)

    def block(self, inputs, valid, state):
        t = tf()
        rows, data = inputs
        out = _as_structure(self.kernel(rows, data))
        cols = []
        for name, k in self.outputs().items():
            v = t.cast(out[name], t.float64)
            v = t.reshape(v, [-1, max(k, 1)])
            if v.shape[0] is not None and v.shape[0] != rows.shape[0]:
                raise ValueError(f"kernel output {name or 'value'!r} must have one row per "
                                 f"parameter row ({rows.shape[0]}), got {v.shape[0]}")
            cols.append(v)
        flat = t.concat(cols, axis=1)
        flat = t.where(valid[:, None], flat, t.zeros_like(flat))
        return {"rows": t.reshape(flat, [-1])}

    def combine(self, rows, n_events):
        width = self._width()
        return np.asarray(rows).reshape(-1, width)[:n_events].reshape(-1)

    def split(self, gathered):
        """Gathered ``[rows * width]`` -> the kernel's output structure as numpy arrays."""
        table = gathered.reshape(self.n_rows, self._width())
        out, col = {}, 0
        for name, k in self.outputs().items():
            w = max(k, 1)
            out[name] = table[:, col] if k == 0 else table[:, col:col + w]
            col += w
        return out[""] if list(out) == [""] else out

    def config(self):
        from ..core.fingerprint import digest, fingerprint
        return {"class": "Sweep", "rows": self.n_rows, "kernel": fingerprint(self.kernel),
                "params": {"content": digest(self.params)},
                "data": {"content": digest(self._data_dict())}}


def run_sweep(flow):
    """Rows of a Flow over a :class:`Sweep`, gathered in row order."""
    sim = flow.simulation
    rows = flow.run_blocks(0)
    return sim.split(sim.combine(rows, flow.n_events))


def run_rows(sim, backend=None, dtype="float64", events_limit=None, **flow_kwargs):
    """Outputs of :class:`Sweep` ``sim`` run by a Flow of ``backend``, in row order.

    The Flow uses ``sim.block_rows`` as its block size and, unless
    ``events_limit`` is given, runs all rows in chunks of up to 10**6.
    """
    from ..distribution.registry import flow_class
    sim.outputs()
    cls = flow_class(backend)
    if events_limit is None:
        events_limit = max(sim.block_rows, 1_000_000)
    flow = cls(sim, n_events=sim.n_rows, seed=0, events_limit=events_limit, dtype=dtype,
               block_size=sim.block_rows, quiet=True, **flow_kwargs)
    return run_sweep(flow)


def sweep(kernel, params, data=None, events_limit=None, backend=None, dtype="float64",
          block_size=None, **flow_kwargs):
    """Evaluate ``kernel(params_chunk, data)`` for every row of ``params``.

    Parameters
    ----------
    kernel : callable
        TF-traceable; ``[rows, n_params]`` parameters (and ``data``) in,
        ``[rows]`` / ``[rows, k]`` values (or a dict of them) out.
    params : array [n_rows, n_params]
        One parameter combination per row.
    data : array, dict of arrays, or None
        Shared inputs (price series...), passed to every chunk unchanged.
    events_limit : int or None
        Most rows per device call (default: all of them in chunks of 10**6).
        Below the default block of rows (up to 4096) it also shrinks the block
        to a multiple of 64 <= ``events_limit``; per-row kernels give the same
        outputs either way.
    backend : None or str
        ``None`` (one device), ``"threads"``, ``"mpi"`` or ``"spark"``.
    dtype : {"float64", "float32"}
        Floating-point type the kernel sees for params and floating data.

    Returns numpy arrays in row order: one ``[n_rows]`` / ``[n_rows, k]`` array,
    or a dict of them if the kernel returns a dict.
    """
    from ..core.blocks import BLOCK_QUANTUM
    sim = Sweep(kernel, params, data, block_rows=block_size)
    if block_size is None and events_limit is not None:
        # Rows are independent: smaller blocks change no output, so honour the limit.
        limit = check_count("events_limit", events_limit)
        if limit < sim.block_rows:
            sim = Sweep(kernel, params, data,
                        block_rows=max(BLOCK_QUANTUM, limit // BLOCK_QUANTUM * BLOCK_QUANTUM))
    return run_rows(sim, backend, dtype, events_limit, **flow_kwargs)
