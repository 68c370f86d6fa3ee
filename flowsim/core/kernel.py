"""Compiling and running one chunk of blocks on one device.

Every backend runs work through :func:`run_chunk`: given an :class:`IterationTask`
(picklable: simulation, seed, iteration, state) and a run of blocks, it returns
the ``[n_blocks, width]`` float64 rows.  The TensorFlow function behind it is
traced once per (simulation, device, kernel spec): the block count, the first
block, the iteration and the adaptive state are all tensor arguments, so new
chunk sizes and new iterations never retrace.  Under XLA the block kernel is
its own compiled function, called either directly from Python (chunks of one
block, :data:`DIRECT_BLOCKS`, and every chunk of a short run,
:data:`SHORT_RUN_BLOCKS`) or from a TensorFlow loop over the chunk's blocks;
both give the same bits.

The compiled functions live in one cache, here (:func:`compiled`), keyed by
what determines the trace: the simulation's
:meth:`~flowsim.Simulation.trace_key`, the shapes and dtypes of its state,
the :class:`KernelSpec` and the device.  Pickled copies of a simulation (the
task a worker process receives) share its key, so a worker compiles once and
reuses the kernel for every later task of that simulation.
"""
import collections
import concurrent.futures
import contextlib
import dataclasses
import os
import re
import threading
from dataclasses import dataclass, field

import numpy as np

from . import interrupts, rng
from .blocks import layout, out_of_memory_message  # noqa: F401  (public: kernel.layout)
from .integrand import autograph_kernel, block_state, user_error
from .lazy_tf import tf
from .simulation import full_state
from .stable_names import content_key, stable_names

#: Traces per (simulation class, device): the block kernel and, under XLA, the loop
#: over a chunk's blocks; tests assert each is traced once.
trace_counts = collections.Counter()
_lock = threading.Lock()
#: Compiled chunk functions, least recently used first (:func:`compiled`).
_KERNELS = collections.OrderedDict()
#: Most compiled functions kept per process.
MAX_KERNELS = 32
#: Under XLA, chunks of at most this many blocks call the block function directly
#: (one call per block) instead of the loop function.  A run whose chunks are single
#: blocks then never builds the loop (its trace, TensorFlow's graph optimisation and
#: the block's second conversion to HLO inside it), and one call of a small block
#: costs a quarter of a loop call.  Not more: a direct call of a large block costs
#: more than in the loop, and letting the first chunks of
#: a run go direct moved the loop's building into later iterations.
DIRECT_BLOCKS = 1
#: Under XLA, a run (one ``Flow.run`` call) of at most this many blocks in all, and
#: at most :data:`SHORT_ITERATION_BLOCKS` per iteration, calls the block function
#: directly for every chunk (:attr:`IterationTask.short_run`), unless this process
#: has already built the loop for the kernel: the loop's building (~0.15 CPU-s) is
#: left to runs long enough to pay it back.
SHORT_RUN_BLOCKS = 64
#: Iterations of more blocks than this do not make a short run: a one-iteration
#: warm-up at a size where the loop pays off (e.g. 2*10^6 events, 31 blocks) still
#: builds it, so the timed run after it does not.
SHORT_ITERATION_BLOCKS = 8
#: Threads calling the block function of a chunk's blocks at once on the direct path,
#: as the loop runs several blocks at once (its ``parallel_iterations``); 1: one after
#: another.  A block's rows do not depend on which thread computes them.
DIRECT_THREADS = min(os.cpu_count() or 1, 8)
#: Under XLA, how every chunk runs, whatever its size and the run's: None (the rules
#: above), ``"blocks"`` (the block function, block by block) or ``"chunk"`` (the chunk
#: function over all its blocks); set by :func:`forced_path`.
FORCED_PATH = None
_POOL = []

DTYPES = ("float64", "float32")
#: The start of TensorFlow's error when XLA cannot compile an op of a kernel (a
#: ``tf.py_function``, ``tf.numpy_function``...): such a kernel runs without XLA.
XLA_REFUSAL = "Detected unsupported operations when trying to compile graph"


def dtype_name(dtype):
    """``"float32"`` for ``"float32"``, ``np.float32``, ``np.dtype("float32")``
    or ``tf.float32``."""
    if isinstance(dtype, str):
        return dtype
    try:
        return np.dtype(getattr(dtype, "as_numpy_dtype", dtype)).name
    except TypeError:
        return dtype


@dataclass(frozen=True)
class KernelSpec:
    """How blocks are computed: float dtype, block size, XLA, random generator."""

    dtype: str = "float64"
    block_size: int = 1 << 16
    jit_compile: bool = True
    rng: str = "splitmix"

    def __post_init__(self):
        # np.float32, np.dtype("float32") and tf.float32 all mean "float32".
        object.__setattr__(self, "dtype", dtype_name(self.dtype))
        if self.dtype not in DTYPES:
            raise ValueError(f"dtype must be one of {DTYPES}, got {self.dtype!r}")
        if self.rng not in rng.ALGORITHMS:
            raise ValueError(f"rng must be one of {rng.ALGORITHMS}, got {self.rng!r}")


@dataclass
class IterationTask:
    """Everything a worker needs to run blocks of one iteration."""

    simulation: object
    spec: KernelSpec
    seed: int
    iteration: int
    n_events: int
    state: dict
    #: Part of a short run (:data:`SHORT_RUN_BLOCKS`): chunks call the block kernel
    #: block by block.  Same rows either way.
    short_run: bool = False
    _tensors: dict = field(default_factory=dict, repr=False, compare=False)

    def __getstate__(self):
        # The simulation's trace key is drawn here, before the copy leaves, so every
        # copy a worker receives names the kernel that worker compiled for the first.
        if self.simulation is not None:
            self.simulation.trace_key()
        d = dict(self.__dict__)
        d["_tensors"] = {}
        return d

    def state_tensors(self, device):
        """The state as constants on ``device`` (inside its ``tf.device`` scope), made
        once per device and task (and shared by the tasks :meth:`at` makes)."""
        tensors = self._tensors.get(device)
        if tensors is None:
            t = tf()
            tensors = self._tensors[device] = {k: t.constant(v) for k, v in self.state.items()}
        return tensors

    def at(self, iteration):
        """The same run at another ``iteration``, with this task's state (and tensors)."""
        return IterationTask(self.simulation, self.spec, self.seed, iteration, self.n_events,
                             self.state, self.short_run, self._tensors)

    def same_run(self, other):
        """Whether ``other`` computes the same rows (iteration, seed, spec, state alike)."""
        return (self.iteration == other.iteration and self.seed == other.seed
                and self.spec == other.spec and self.n_events == other.n_events
                and same_state(self.state, other.state))


def same_state(a, b):
    """Bitwise equality of two simulation states (dicts of arrays)."""
    if a is b:
        return True
    if a.keys() != b.keys():
        return False
    for k in a:
        x, y = np.asarray(a[k]), np.asarray(b[k])
        if x.dtype != y.dtype or x.shape != y.shape or x.tobytes() != y.tobytes():
            return False
    return True


def columns(simulation):
    """``{name: (start, stop)}``: where each accumulator lies in a flat row."""
    return {name: (a, b) for name, _, a, b in layout(simulation)[0]}


def unpack(simulation, row):
    """Split a flat row (or totals vector) back into named accumulators."""
    fields, _ = layout(simulation)
    return {name: np.asarray(row[a:b]).reshape(shape) for name, shape, a, b in fields}


#: Uniforms drawn per tile by :func:`tile_events` (256 KiB of float64: they stay in L2).
TILE_NUMBERS = 1 << 15
#: Fewest events per tile (many dimensions: fewer, longer tiles rather than a loop of
#: tiny ones).
MIN_TILE_EVENTS = 64


def tile_events(per_event, key, size, dim, dtype, state, tile_numbers=None):
    """``per_event(u, state)`` over the ``size`` events of block ``key``, a tile at a time.

    The same as ``per_event(rng.uniform(key, [size, dim], dtype), state)``, number for
    number (SplitMix64 only): tile ``i`` of ``T`` events draws the stream's batch
    ``i`` of ``T * dim`` numbers (:func:`flowsim.core.rng.uniform`'s ``step``), which
    are the block's numbers of events ``i*T .. i*T+T-1``.  Under XLA the loop keeps a
    tile's uniforms and temporaries in cache, and each number is drawn once:
    evaluated over a whole block, XLA recomputed the generator in every fusion
    reading it (twice for the double Gaussian, once per exponential).  The values
    are stacked back to ``[size, ...]``; the last tile may run past the block: its
    extra events are dropped.
    """
    t = tf()
    n_tiles = max(1, min(-(-size * dim // (tile_numbers or TILE_NUMBERS)),
                         size // MIN_TILE_EVENTS))
    if n_tiles == 1:
        return per_event(rng.uniform(key, [size, dim], dtype), state)
    tile = -(-size // n_tiles)

    shapes = []

    def body(i, values):
        out = per_event(rng.uniform(key, [tile, dim], dtype, step=i), state)
        if out.dtype != t.float64 or not out.shape[1:].is_fully_defined():
            raise TypeError(f"per_event must return float64 [n, ...] of a known shape, got "
                            f"{out.dtype.name} {out.shape}")
        shapes.append(out.shape[1:])
        return i + 1, values.write(t.cast(i, t.int32), out)

    # XLA finds the element shape from the loop body (which while_loop traces here).
    values = t.TensorArray(t.float64, size=n_tiles)
    _, values = t.while_loop(lambda i, _: i < n_tiles, body, [t.constant(0, t.int64), values])
    return t.reshape(values.stack(), [n_tiles * tile, *shapes[-1]])[:size]


def fusion_barrier(fence, *xs):
    """``xs`` unchanged (a tuple), computed once: XLA does not fuse across a conditional.

    ``fence``: a scalar bool tensor that is true and that XLA cannot fold (a loop
    counter ``>= 0``); None returns ``xs`` as they are, without a conditional.  Without
    it XLA's loop fusion copies shared sub-expressions of a loop body into each output
    that reads them (a backtest's bar step: about 30 times the work; an env rollout
    step: 753 HLO instructions instead of 546).  It may change where XLA contracts
    products and sums into FMAs, so place it where the bits are fixed by a test.
    """
    if fence is None:
        return xs
    t = tf()
    return t.cond(fence, lambda: xs, lambda: xs)


def _build(simulation, spec, device, names=None):
    t = tf()
    dtype = getattr(t, spec.dtype)
    bs = spec.block_size
    fields, width = layout(simulation)
    state_spec = {k: t.TensorSpec(np.shape(v), t.as_dtype(np.asarray(v).dtype))
                  for k, v in full_state(simulation).items()}
    name = type(simulation).__name__
    convert = autograph_kernel(simulation)

    # Tiles on CPUs only: a GPU wants the whole block in few large kernels.
    tiles = spec.jit_compile and spec.rng == "splitmix" and "CPU" in str(device).upper()
    split = simulation.block_parts() if tiles else None

    def one_block(key, first_event, n_events, state):
        with _lock:
            trace_counts[(name, device)] += 1
        with rng.using(spec.rng):
            return _one_block(key, first_event, n_events, state)

    def _one_block(key, first_event, n_events, state):
        valid = first_event + t.range(bs, dtype=t.int64) < n_events
        with block_state(state):
            if split is None:
                x = simulation.inputs(key, first_event, bs, dtype, state)
                out = simulation.block(x, valid, state)
            else:
                per_event, reduce = split
                values = tile_events(per_event, key, bs, simulation.dim, dtype, state)
                out = reduce(values, valid, state)
        parts = []
        for acc, shape, _, _ in fields:
            if acc not in out:
                raise KeyError(f"{name}.block did not return accumulator {acc!r} "
                               f"(it returned {sorted(out)})")
            value = t.convert_to_tensor(out[acc])
            if value.dtype != t.float64:
                raise TypeError(f"{name}.block: accumulator {acc!r} must be float64, "
                                f"got {value.dtype.name}")
            if tuple(value.shape) != shape:
                raise ValueError(f"{name}.block: accumulator {acc!r} has shape "
                                 f"{list(value.shape)}, expected {list(shape)}")
            parts.append(t.reshape(value, [-1]))
        return t.concat(parts, axis=0)

    signature = [t.TensorSpec([2], t.int64), t.TensorSpec([], t.int64),
                 t.TensorSpec([], t.int64), t.TensorSpec([], t.int64), state_spec]
    if spec.jit_compile:
        one_block = t.function(one_block, jit_compile=True, autograph=convert,
                               input_signature=[signature[0]] + signature[2:])

    @t.function(input_signature=signature, autograph=convert)
    def chunk(base, first_block, n_blocks, n_events, state):
        if spec.jit_compile:        # the loop's own trace (one_block counts the kernel's)
            with _lock:
                trace_counts[(name, device)] += 1
        return _loop(base, first_block, n_blocks, n_events, state)

    def _loop(base, first_block, n_blocks, n_events, state):
        rows = t.TensorArray(t.float64, size=t.cast(n_blocks, t.int32),
                             element_shape=[width])

        def body(i, rows):
            b = first_block + i
            key = t.stack([base[0], base[1] + b])
            row = one_block(key, b * bs, n_events, state)
            return i + 1, rows.write(t.cast(i, t.int32), row)

        _, rows = t.while_loop(lambda i, _: i < n_blocks, body,
                               [t.constant(0, t.int64), rows])
        return rows.stack()

    if not spec.jit_compile:
        def plain(*args, short_run=False):
            return chunk(*args)
        plain.chunk = chunk
        return plain

    concrete = []       # the block function's one concrete function (looked up once)
    plain = []          # the kernel without XLA, once XLA refused the block

    def run(base, first_block, n_blocks, n_events, state, short_run=False):
        """Rows of the chunk (:func:`_xla_rows`); without XLA when XLA cannot
        compile the block (:func:`_without_xla`)."""
        args = (base, first_block, n_blocks, n_events, state)
        if not plain:
            try:
                return _xla_rows(*args, short_run=short_run)
            except tf().errors.InvalidArgumentError as exc:
                if XLA_REFUSAL not in str(exc):
                    raise
                plain.append(_without_xla(simulation, spec, device, names, exc))
        return plain[0](*args)

    def _xla_rows(base, first_block, n_blocks, n_events, state, short_run=False):
        """Rows of the chunk: block by block (:data:`DIRECT_BLOCKS`, a short run
        while the loop is not built), or the loop."""
        first, n = int(first_block), int(n_blocks)
        if not concrete:        # traced alone, not inside chunk's trace: the names XLA's
            with stable_names((names, "block")):      # cache sees are the same either way
                concrete.append(one_block.get_concrete_function())
        traced = chunk.experimental_get_tracing_count() > 0
        if _takes_chunk_function(n, short_run and not traced):
            if traced:
                return chunk(base, first_block, n_blocks, n_events, state)
            with stable_names((names, "chunk")):
                return chunk(base, first_block, n_blocks, n_events, state)
        block = concrete[0]
        seed, word = base.numpy()

        def call(b):
            with t.device(device):      # the device scope does not cross threads
                return block(t.constant([seed, word + np.int64(b)], t.int64),
                             t.constant(b * bs, t.int64), n_events, state)

        if n > 1 and DIRECT_THREADS > 1:
            rows = list(_pool().map(call, range(first, first + n)))
        else:
            rows = [call(b) for b in range(first, first + n)]
        return t.stack(rows) if rows else t.zeros([0, width], t.float64)

    run.chunk = chunk
    return run


def _takes_chunk_function(n_blocks, short_run_before_loop):
    """Whether a chunk of ``n_blocks`` runs in the chunk function (else block by block)."""
    if FORCED_PATH is not None:
        return FORCED_PATH == "chunk" and n_blocks > 0
    return n_blocks > DIRECT_BLOCKS and not short_run_before_loop


@contextlib.contextmanager
def forced_path(path):
    """Within this block every chunk under XLA runs ``path``: ``"blocks"`` (the block
    function called once per block) or ``"chunk"`` (the chunk function over all of the
    chunk's blocks, also for one block and in short runs).  Which one a chunk takes
    depends on its size, on the run's and, on several devices, on the measured speeds,
    so both must give the same rows, bit for bit
    (:func:`flowsim.testing.conformance.kernel_path_faults` checks it)::

        with kernel.forced_path("chunk"):
            rows = flow.run_blocks(0)

    Both call the one compiled block function: the block compiled again inside one XLA
    program of the whole chunk rounds some events' values differently (the Heston
    path case: one block in 48), so the chunk function is a TensorFlow loop over it.
    """
    global FORCED_PATH
    if path not in ("blocks", "chunk"):
        raise ValueError(f"path must be 'blocks' or 'chunk', got {path!r}")
    old, FORCED_PATH = FORCED_PATH, path
    try:
        yield
    finally:
        FORCED_PATH = old


def _without_xla(simulation, spec, device, names, refusal):
    """The kernel of ``simulation`` built with ``jit_compile=False``, after XLA
    refused to compile its block (``refusal``: TensorFlow's error, e.g. for a
    ``tf.py_function`` in the integrand); one line on the ``flowsim`` logger and a
    :class:`~flowsim.FlowsimWarning` (seen by a user who configured no logging) say so."""
    import warnings

    from .log import FlowsimWarning, logger
    first = str(refusal).split("\n", 1)[0]
    ops = re.search(r"_JIT: (.*?) \(", first)
    message = (f"{type(simulation).__name__}: XLA cannot compile "
               f"{ops.group(1) if ops else 'the integrand'}; running without XLA "
               f"(jit_compile=False)")
    logger.warning("%s", message)
    warnings.warn(message, FlowsimWarning, stacklevel=2)
    return _build(simulation, dataclasses.replace(spec, jit_compile=False), device, names)


def _pool():
    """The threads of the direct path (:data:`DIRECT_THREADS`), started on first use
    in each process (a forked child has none of its parent's threads)."""
    with _lock:
        if not _POOL or _POOL[0] != os.getpid():
            _POOL[:] = [os.getpid(), concurrent.futures.ThreadPoolExecutor(
                DIRECT_THREADS, thread_name_prefix="flowsim-block")]
        return _POOL[1]


def trace_key(simulation, spec, device):
    """What determines the trace of ``simulation``'s chunk function."""
    shapes = tuple((k, np.shape(v), np.asarray(v).dtype.str)
                   for k, v in sorted(full_state(simulation).items()))
    return (type(simulation).__qualname__, simulation.trace_key(), shapes, spec, device)


def compiled(simulation, spec, device):
    """The chunk function of ``simulation`` for ``device``: built once per
    :func:`trace_key`, kept in a cache of the last ``MAX_KERNELS``."""
    key = trace_key(simulation, spec, device)
    with _lock:
        fn = _KERNELS.get(key)
        if fn is not None:
            _KERNELS.move_to_end(key)
            return fn
    names = (simulation.__dict__.get("_trace_names") or content_key(key[:3]), spec, device)
    fn = _build(simulation, spec, device, names)  # outside the lock: tracing is lazy anyway
    with _lock:
        fn = _KERNELS.setdefault(key, fn)
        _KERNELS.move_to_end(key)
        while len(_KERNELS) > MAX_KERNELS:
            _KERNELS.popitem(last=False)
    return fn


def traced_chunk(simulation, spec, device):
    """The concrete function of ``simulation``'s chunk loop as :func:`compiled` builds
    it for ``device`` (``"GPU:0"`` takes a GPU's path even where there is none):
    traced, never run, and not kept in the cache.  Its graph holds every op a chunk
    runs, the block kernel's among them (:func:`flowsim.testing.check_gpu_ready`)."""
    return _build(simulation, spec, device).chunk.get_concrete_function()


def cached_kernels(simulation):
    """How many compiled functions the cache holds for ``simulation``."""
    key = simulation.trace_key()
    with _lock:
        return sum(1 for k in _KERNELS
                   if k[0] == type(simulation).__qualname__ and k[1] == key)


def _out_of_memory(exc, device, first_block, n_blocks, spec):
    """``exc`` (TensorFlow's out-of-memory error, pages long) as one line of the same
    type (:func:`flowsim.core.blocks.out_of_memory_message`); TensorFlow's text goes
    to the ``flowsim`` logger at debug level."""
    from .log import logger
    logger.debug("out of memory on %s: %s", device, exc)
    return type(exc)(getattr(exc, "node_def", None), getattr(exc, "op", None),
                     out_of_memory_message(device, first_block, n_blocks, spec.block_size))


def check_seed(seed):
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)):
        raise TypeError(f"seed must be an integer, got {seed!r}")
    if not 0 <= seed < 2**63:
        raise ValueError(f"seed must be in [0, 2**63), got {seed!r}")
    return int(seed)


def run_chunk(task, first_block, n_blocks, device):
    """Rows ``[n_blocks, width]`` of blocks ``first_block ..`` of ``task`` on ``device``.

    A Ctrl-C during the chunk is raised when it has finished (:mod:`.interrupts`), so
    no TensorFlow call of it (nor a thread of the direct path) is left half-done."""
    with interrupts.held():
        return _run_chunk(task, first_block, n_blocks, device)


def _run_chunk(task, first_block, n_blocks, device):
    t = tf()
    fn = compiled(task.simulation, task.spec, device)
    with t.device(device):
        tensors = task.state_tensors(device)
        base = t.constant([task.seed, task.iteration << 32], t.int64)
        try:
            rows = fn(base, t.constant(first_block, t.int64), t.constant(n_blocks, t.int64),
                      t.constant(task.n_events, t.int64), tensors, short_run=task.short_run)
        except t.errors.ResourceExhaustedError as exc:
            raise _out_of_memory(exc, device, first_block, n_blocks, task.spec) from None
        except Exception as exc:
            own = user_error(exc) if hasattr(exc, "ag_error_metadata") else None
            if own is None or own is exc:
                raise
            own.add_note(f"(raised while flowsim traced the {type(task.simulation).__name__} "
                         f"kernel)")
            raise own from None     # the integrand's own error, not AutoGraph's copy
    return rows.numpy()
