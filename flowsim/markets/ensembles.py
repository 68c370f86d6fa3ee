"""Ensembles of pams markets as a flowsim Simulation: each event is one whole market run.

:class:`MarketEnsemble` runs the markets of a block in one compiled loop
(:mod:`flowsim.markets.kernel`); any Flow runs its blocks (one device, threads, joblib,
MPI, Spark) with the same bits.  :func:`ensemble` is the one-call form, :func:`grid` a
parameter study.
"""
import json
import math

import numpy as np

from ..core.blocks import BLOCK_QUANTUM, check_count, reduce_rows
from ..core.lazy_tf import tf
from ..core.simulation import Simulation
from ..core.sums import block_sum
from . import book_chunks
from . import config as _config
from .stats import balance_names, names

#: Markets per block unless told: enough to vectorise, small enough for a fine progress bar.
DEFAULT_BLOCK_MARKETS = 256


class MarketEnsemble(Simulation):
    """Independent runs of a pams config (one market or several); the estimate is each
    statistic's mean over runs with its standard error (:attr:`names`).

    Parameters
    ----------
    config : dict, path or :class:`flowsim.markets.config.MarketConfig`
        A pams config (:func:`flowsim.markets.config.parse` says what runs).
    learned : sequence of :class:`flowsim.markets.LearnedAgents`
        Groups acting through TensorFlow callables, beside the FCN groups.
    block_markets : int or None
        Markets per block.  Needed for per-market statistics and paths (the rows of a
        block hold its markets); the Flow running this ensemble must then use it as its
        ``block_size``.  None: only the sums over markets are kept (any block size).
    paths : int
        Keep the market and fundamental price paths of the first ``paths`` markets
        (needs ``block_markets``).
    classes : dict or None
        User classes of the config mapped to classes flowsim runs
        (:func:`flowsim.markets.config.parse`): ``{"UserDefinedFCNAgent": "FCNAgent"}``.
    balances : bool
        Keep every agent's cash and units as pams does (each execution moves ``price x
        volume`` of cash from buyer to seller) and add, per agent group, the statistics
        of :func:`flowsim.markets.stats.balance_names` (cash, inventory, wealth and P&L
        at the end of each run: mean, standard deviation and quantiles over the
        group's agents) after the market statistics.  One market per member, FCN groups
        only (no high-frequency agents, learned groups or mistaken orders).  The
        prices are the same bits either way.

    Every market is a pure function of (seed, iteration, block, position in the block):
    ``block_size`` is part of the random stream, ``events_limit``, devices and backends
    are not.

    The Flow's ``dtype`` is the markets': ``Flow(sim, n, dtype="float32")`` draws the
    agents' parameters and computes prices, orders, fundamentals and the per-market
    statistics in float32 (a GPU's fast precision); book levels stay int64 ticks and
    the sums over markets float64.  float32 changes some agents' decisions, so its
    markets are other draws of the same model, not float64's to a few ulp:
    docs/markets.rst gives the measured differences.  A float32 price resolves a
    tick level only below 2**24 ticks (a price of 300 at tick 1e-5 is 3e7 ticks:
    float32 places orders there on even levels and rounds prices to about 3 ticks).
    """

    dim = 0

    def __init__(self, config, learned=(), block_markets=None, paths=0, classes=None,
                 balances=False):
        from .kernel import Structure
        self.market = _config.parse(config, classes=classes)
        self.learned = tuple(learned)
        from .learned import LearnedAgents
        for lg in self.learned:
            if not isinstance(lg, LearnedAgents):
                raise TypeError(f"learned must hold flowsim.markets.LearnedAgents, got {lg!r}")
        if block_markets is not None:
            block_markets = check_count("block_markets", block_markets)
            if block_markets % BLOCK_QUANTUM:
                raise ValueError(f"block_markets must be a multiple of {BLOCK_QUANTUM}, "
                                 f"got {block_markets}")
        self.paths = check_count("paths", paths, minimum=0)
        if self.paths and block_markets is None:
            raise ValueError("paths= needs block_markets= (the rows of a block hold its paths)")
        self.block_markets = block_markets
        if self.market.n_venues > 1 and self.learned:
            raise ValueError("learned= groups trade one market; this config has "
                             f"{self.market.n_venues}: keep one market for learned agents")
        self.structure = Structure(self.market, self.learned, block_markets, self.paths)
        #: statistic names, in the order of ``value`` (:func:`flowsim.markets.stats.names`)
        m = self.market
        self.names = names(m.market_names, [m.market_names[i] for i, _, _ in m.indexes])
        self._rows = None
        self.balances = bool(balances)
        if self.balances:
            _check_balances(self.structure, self.market)
            self.structure.balances = True
            self.names = tuple(self.names) + tuple(balance_names(*_sheet_groups(m)))

    # -- sizes ------------------------------------------------------------------------
    @property
    def n_steps(self):
        return self.market.n_steps

    def bytes_per_market(self, dtype="float64"):
        """Device memory one market of a block holds while it runs (book, price
        history, agents' parameters, events' state), in bytes; prices and parameters
        of ``dtype`` (the Flow's)."""
        S = self.structure
        K = S.n_venues
        real = np.dtype(dtype).itemsize
        book = book_chunks.column_bytes(S) * K        # normal and high-frequency rows
        history = (S.n_steps + 1) * real * (2 if S.paths else 1) * K
        agents = S.n_agents * (len(_config.FCN_PARAMS) + 1) * real
        extra = 4 * 8 * S.extra_slots if S.extra_order else 0   # orders outside the ring
        events = 4 * 8 * sum(e.halts for e in S.events)  # a halt's state
        events += (S.n_steps + 2) * 8 * K if S.by_volume else 0   # volume history
        hf = sum(g.n_agents for g in S.hifreq)
        sheets = (S.layout.rows + 3 * (S.n_agents + hf)) * 8 * K if S.balances else 0
        return book + history + agents + extra + events + sheets

    # -- Simulation -------------------------------------------------------------------
    def state(self):
        from .kernel import dist_arrays
        kind, a, b = dist_arrays(list(self.market.groups) + [lg.group for lg in self.learned])
        m = self.market
        out = {"kind": kind, "a": a, "b": b}
        venues = m.venues or (m,)
        market = np.array([[v.tick_size, v.market_price, v.fundamental_price,
                            v.fundamental_drift, v.fundamental_volatility] for v in venues],
                          np.float64).T
        out["market"] = market[:, 0] if len(venues) == 1 else market
        if self.balances:
            from .kernel import balance_arrays
            for k, x in zip("kab", balance_arrays(m.groups + m.hifreq)):
                out["balance_" + k] = x
        if self.structure.by_volume:       # executed volume at t = 0 (tradeVolume)
            out["volume0"] = np.array([v.trade_volume for v in venues], np.int64)
        if m.correlations:
            from .venues.correlations import cholesky
            out["chol"] = cholesky(m.venues, m.correlations)
        return out

    def get_state(self):
        """Nothing adapts: the state is the config (checked by :meth:`config`)."""
        return {}

    def accumulators(self):
        s = len(self.names)
        acc = {"sum": (s,), "sum2": (s,), "count": (s,)}
        if self.block_markets:
            acc["markets"] = (self.block_markets * s,)
        if self.paths:
            K = self.market.n_venues
            acc["paths"] = ((min(self.paths, self.block_markets),) + ((K,) if K > 1 else ())
                            + (2, self.n_steps + 1))
        return acc

    def inputs(self, key, first_event, size, dtype, state):
        t = tf()
        if self.block_markets is not None and size != self.block_markets:
            raise ValueError(f"this MarketEnsemble was built for block_markets="
                             f"{self.block_markets}; the Flow uses block_size={size}")
        if t.as_dtype(dtype) not in (t.float64, t.float32):
            raise ValueError(f"markets compute in float64 or float32, got dtype "
                             f"{t.as_dtype(dtype).name}")
        return key, first_event, t.as_dtype(dtype)

    def block(self, inputs, valid, state):
        from .kernel import run
        t = tf()
        key, _, dtype = inputs
        M = int(valid.shape[0])
        # plain TensorFlow with Python-level structure: AutoGraph need not convert it
        # (converting the loop body costs seconds of tracing)
        stats, hist, fhist = t.autograph.experimental.do_not_convert(run)(
            self.structure, key, M, state, dtype)
        # the Flow's accumulators are float64 (a no-op for float64 markets)
        stats, hist = t.cast(stats, t.float64), t.cast(hist, t.float64)
        fhist = None if fhist is None else t.cast(fhist, t.float64)
        ok = valid[:, None] & t.math.is_finite(stats)
        x = t.where(ok, stats, 0.0)
        out = {"sum": block_sum(x), "sum2": block_sum(x * x),
               "count": block_sum(t.cast(ok, t.float64))}
        if self.block_markets:
            out["markets"] = t.reshape(t.where(valid[:, None], stats, 0.0), [-1])
        if self.paths:
            k = min(self.paths, self.block_markets)
            K = self.market.n_venues
            if K == 1:
                out["paths"] = t.stack([t.transpose(hist[:, :k]), t.transpose(fhist[:, :k])],
                                       1)
            else:                   # [k, K, 2, T + 1]
                def member(h):
                    return t.transpose(t.reshape(h[:, :k * K], [-1, k, K]), [1, 2, 0])
                out["paths"] = t.stack([member(hist), member(fhist)], 2)
        return out

    def combine(self, rows, n_events):
        """Totals in block order; the rows are kept for :meth:`estimate` (per-market
        statistics and paths are gathered from them, in market order)."""
        self._rows = np.asarray(rows)
        return reduce_rows(rows)

    def estimate(self, totals, n_events):
        n = totals["count"]
        with np.errstate(invalid="ignore", divide="ignore"):
            mean = totals["sum"] / n
            var = np.maximum(totals["sum2"] / n - mean * mean, 0.0) * n / (n - 1)
            error = np.where(n > 1, np.sqrt(var / n), math.inf)
        out = {"value": mean, "error": error}
        rows, self._rows = self._rows, None
        if rows is not None and (self.block_markets or self.paths):
            from ..core.kernel import layout
            fields = {name: (a, b, shape) for name, shape, a, b in layout(self)[0]}
            if self.block_markets:
                a, b, _ = fields["markets"]
                out["markets"] = rows[:, a:b].reshape(-1, len(self.names))[:n_events]
            if self.paths:
                a, b, shape = fields["paths"]
                kb = shape[0]
                paths = rows[:, a:b].reshape((-1,) + shape[1:])   # [blocks * kb, 2, T + 1]
                keep = [blk * kb + i for blk in range(len(rows)) for i in range(kb)
                        if blk * self.block_markets + i < min(self.paths, n_events)]
                out["paths"] = paths[keep]
        return out

    def trace_key(self):
        """The loop's structure: ensembles alike in it (a parameter grid) share one
        compilation; parameter values are state."""
        return ("MarketEnsemble",) + self.structure.key() + (("balances",) if self.balances
                                                               else ())

    def config(self):
        from ..core.fingerprint import digest
        from . import kernel, learned
        out = {"class": "MarketEnsemble", "market": self.market.describe(),
                "learned": [lg.describe() for lg in self.learned],
                "block_markets": self.block_markets, "paths": self.paths,
                "kernel": {"code": digest((type(self), learned.LearnedAgents)
                                          + _own_code(kernel))}}
        if self.balances:
            out["balances"] = [[g.cash.to_json(), g.asset.to_json()]
                               for g in self.market.groups + self.market.hifreq]
        return out


def _check_balances(S, market):
    """Refuse ``balances=True`` where the kernel keeps no balance sheets."""
    missing = [g.name for g in market.groups + market.hifreq
               if getattr(g, "cash", None) is None]
    why = ("learned groups" if S.learned else f"groups without cashAmount "
           f"({', '.join(missing)})" if missing else None)
    if why is None and S.hifreq and (S.halts or S.extra_order):
        why = ("high-frequency agents with a TradingHaltRule or an OrderMistakeShock (their "
               "balance sheets are not checked against pams yet)")
    if why is not None:
        raise ValueError(f"balances=True keeps the balance sheets of the config's agent "
                         f"groups; this config has {why}: run it without balances")


def _sheet_groups(market):
    """:func:`flowsim.markets.stats.balance_names`'s arguments: the groups with balance
    sheets (normal, then high-frequency) and, with several markets, the markets each
    holds units in."""
    groups = market.groups + market.hifreq
    names = [g.name for g in groups]
    if market.n_venues == 1:
        return (names,)
    return names, {g.name: [market.market_names[k] for k in g.venues] for g in groups}


def _own_code(module):
    """The functions and classes ``module`` defines, by name: what a digest of the
    compiled step's code covers (its helpers are module-level functions)."""
    return tuple(v for _, v in sorted(vars(module).items())
                 if callable(v) and getattr(v, "__module__", None) == module.__name__)


def from_pams(config, learned=(), block_markets=None, paths=0, classes=None,
              balances=False):
    """:class:`MarketEnsemble` of a pams config (dict, path or open file).

    ``learned``: :class:`flowsim.markets.LearnedAgents` groups added beside the config's
    FCN groups.  ``classes``: user classes mapped to flowsim's
    (``{"UserDefinedFCNAgent": "FCNAgent"}``).  See :class:`MarketEnsemble` for
    ``block_markets``, ``paths`` and ``balances``.
    """
    return MarketEnsemble(config, learned=learned, block_markets=block_markets, paths=paths,
                          classes=classes, balances=balances)


def default_block_markets(n_markets, largest=DEFAULT_BLOCK_MARKETS):
    """Even blocks of at most ``largest`` markets, a multiple of 64."""
    n_blocks = math.ceil(n_markets / largest)
    return math.ceil(math.ceil(n_markets / n_blocks) / BLOCK_QUANTUM) * BLOCK_QUANTUM


#: Bytes of market state a block should keep within (:func:`cache_block_markets`): a
#: pass of the compiled step reads and writes all over the books, which then stay in
#: the CPU's caches (with one thread a core, ``backend="joblib"``, a block whose books
#: outgrow them runs each market-step slower).  ``make bench`` and
#: ``docs/performance.rst`` give the current figures.
CACHE_BYTES = 6 * 2 ** 20


def cache_block_markets(sim, largest=DEFAULT_BLOCK_MARKETS, budget=CACHE_BYTES):
    """Markets per block for speed on a CPU: the largest multiple of 64 up to
    ``largest`` (default 256) whose markets hold at most ``budget`` bytes (default
    :data:`CACHE_BYTES`) of :meth:`MarketEnsemble.bytes_per_market`, at least 64.
    ``sim``: a :class:`MarketEnsemble`.  The block is part of the random stream: pass
    the same to every run that must give the same bits."""
    fit = budget // max(sim.bytes_per_market(), 1)
    return max(BLOCK_QUANTUM, min(largest, fit // BLOCK_QUANTUM * BLOCK_QUANTUM))


def flow_block_markets(n_markets):
    """The block size a :class:`flowsim.Flow` of ``n_markets`` events picks by itself
    (:func:`flowsim.core.blocks.default_block_size`): :func:`ensemble`'s block on a GPU,
    so that there ``ensemble(cfg, n, seed=s)`` is ``Flow(from_pams(cfg), n,
    seed=s).run(1)``."""
    from ..core.blocks import default_block_size
    return default_block_size(n_markets)


#: Fewest blocks an iteration needs before :func:`ensemble` starts worker processes by
#: itself: fewer run in this process, which need not start a worker (import TensorFlow,
#: compile the kernel) for them.
PROCESS_MIN_BLOCKS = 4


def auto_setup(sim, n_markets, block_markets=None, cores=None, gpus=0):
    """The backend, workers and block :func:`ensemble` runs ``n_markets`` markets of
    ``sim`` (a :class:`MarketEnsemble`) in when it is not told, as the keywords that
    give them: ``{"backend": ..., "n_jobs": ..., "block_markets": ...}``
    (``n_jobs`` None: one process)::

        sim = fm.from_pams(fm.config_path("ci2002"))
        auto_setup(sim, 1024, cores=2)
        # {'backend': 'joblib', 'n_jobs': 2, 'block_markets': 256}

    On a CPU (``gpus`` 0): even blocks of at most :func:`cache_block_markets` markets
    (a multiple of 64; ``block_markets`` if given), then, with at least
    :data:`PROCESS_MIN_BLOCKS` blocks and 2 ``cores`` (default: the cores this process
    may run on, ``os.sched_getaffinity``), ``backend="joblib"`` with one
    single-threaded worker process per core, at most one per block; else
    ``backend="flow"`` in this process.  The block is a function of the config (its
    :meth:`MarketEnsemble.bytes_per_market` in float64, paths left out) and
    ``n_markets`` only, so the same call gives the same bits on every CPU.  With a
    GPU: ``backend="flow"`` on it and the :class:`flowsim.Flow`'s own block
    (:func:`flow_block_markets`, up to 65,536 markets a block).
    """
    if block_markets is None:
        block_markets = (flow_block_markets(n_markets) if gpus else
                         default_block_markets(n_markets, largest=cache_block_markets(sim)))
    workers = joblib_workers(n_markets, block_markets, cores)
    if gpus or workers < 2 or math.ceil(n_markets / block_markets) < PROCESS_MIN_BLOCKS:
        return {"backend": "flow", "n_jobs": None, "block_markets": block_markets}
    return {"backend": "joblib", "n_jobs": workers, "block_markets": block_markets}


def joblib_workers(n_markets, block_markets, cores=None):
    """One worker per core (default: the cores this process may run on), at most one
    per block: ``backend="joblib"``'s ``n_jobs`` when :func:`ensemble` is not told."""
    from ..core.backend import cores as own_cores
    return max(1, min(cores or own_cores(), math.ceil(n_markets / block_markets)))


def _gpus(device):
    """GPUs :func:`ensemble` may run on: ``device``'s kind if given, else TensorFlow's."""
    if device is not None:
        return int("GPU" in str(device).upper())
    return len(tf().config.list_physical_devices("GPU"))


def ensemble(config, n_markets, seed=None, backend=None, paths=0, learned=(),
             block_markets=None, iterations=1, checkpoint=None, quiet=True, classes=None,
             balances=False, **flow_kw):
    """Run ``n_markets`` markets of ``config``; return a :class:`flowsim.Result`::

        result = fm.ensemble(fm.config_path("ci2002"), 1024, seed=1)
        result.meta["setup"]     # on 2 cores, no GPU: the keywords it picked
        # {'backend': 'joblib', 'n_jobs': 2, 'block_markets': 256}

    Not told ``backend``, ``n_jobs`` or ``block_markets``, it picks those that run
    fastest here (:func:`auto_setup`): on a CPU, blocks whose books stay in the
    caches and, with at least 4 of them, one single-threaded joblib worker per core
    running whole blocks; fewer blocks run in this process (no worker to start); on a
    GPU, the GPU in large blocks.  Keywords given always win.  ``Result.meta`` records
    the choice: ``"backend"``, ``"workers"``, ``"block_markets"``, ``"chosen_by"``
    (``"auto"``, ``"given"``, or ``"auto: "`` and the keywords picked) and
    ``"setup"``, the keywords themselves: ``ensemble(cfg, n, seed=s,
    **result.meta["setup"])`` is the same run, bit for bit, anywhere.  The bits
    depend on the seed, the block and ``iterations`` (and ``dtype``), not on the
    backend or the workers; the block picked is a function of the config and
    ``n_markets`` on every CPU, so ``ensemble(cfg, n, seed=s)`` gives the same bits on
    every CPU-only machine and is ``Flow(from_pams(cfg, block_markets=b), n, seed=s,
    block_size=b).run(1)`` with ``b = result.meta["block_markets"]``.

    Parameters
    ----------
    config : dict, path or MarketConfig
        A pams config (:func:`flowsim.markets.config.parse`).
    n_markets : int
        Markets in all (a multiple of ``iterations``).
    seed : int or None
        Same seed and block, same bits on every backend and for every ``events_limit``.
    backend : str, Flow class or None
        ``"flow"`` (one device), ``"threads"``, ``"joblib"``, ``"mpi"``, ``"spark"``...
        Default None: :func:`auto_setup`'s (``"joblib"`` with ``n_jobs`` given).  On a
        CPU, ``"joblib"`` is the fastest: one single-threaded worker process per core,
        each running whole blocks in its own caches (give at least as many blocks as
        cores; docs/markets.rst, "Speed and memory").  The workers stay up for the
        next call (joblib's loky pool) and end when idle for 5 minutes or when this
        process ends.
    paths : int
        Keep the price paths of the first ``paths`` markets: ``Result.paths =
        {"market_price": [paths, T + 1], "fundamental": [paths, T + 1]}`` at times
        ``0 .. T`` (warm-up included), as pams's ``get_market_prices()`` and
        ``get_fundamental_prices()``; with several markets one such dict per market,
        ``Result.paths[MARKET]``.  Does not change the block picked.
    learned : sequence of LearnedAgents
        Learned groups beside the FCN groups.
    block_markets : int or None
        Markets per block (part of the random stream).  Default: :func:`auto_setup`'s.
        Give e.g. 64 for a finer progress bar, or the Flow's block
        (:func:`flow_block_markets`) for the run of ``Flow(from_pams(cfg), n,
        seed=s).run(1)``; a block of ``B`` markets holds ``B`` times
        :meth:`MarketEnsemble.bytes_per_market` while it runs.
    iterations : int
        Run the markets in this many iterations (each ``n_markets / iterations``
        markets); with ``checkpoint`` a stopped run resumes after the last finished one.
    checkpoint : path or None
        See :meth:`flowsim.Flow.run`.
    quiet : bool
        No progress bar (default True; ``quiet=False`` shows one over markets when
        stderr is a terminal and there are at least 10 blocks).
    classes : dict or None
        User classes mapped to flowsim's: ``{"UserDefinedFCNAgent": "FCNAgent"}``
        (:func:`flowsim.markets.config.parse`).
    balances : bool
        Keep the agents' balance sheets and add their statistics per agent group
        (``"GROUP:wealth_mean"``...; :class:`MarketEnsemble`).  Does not change the
        block picked or the other statistics' bits.
    **flow_kw
        ``events_limit`` (markets per device call; default one block, so that every
        device or worker gets blocks to run), ``device``, ``jit_compile``,
        ``rng``, ``dtype`` (``"float32"``: the markets compute in float32, see
        :class:`MarketEnsemble`) and the backend's own keywords (``n_jobs``: joblib's
        worker processes).

    Returns a :class:`flowsim.Result` whose ``value`` and ``error`` are arrays over
    :data:`flowsim.markets.stats.NAMES` (mean over markets, standard error; with
    several markets over :func:`flowsim.markets.stats.names`), plus:
    ``names``; ``table``, ``{name: (value, error)}``; ``per_market``, ``[n_markets,
    len(names)]``; ``paths`` (with ``paths=k``).
    """
    from ..distribution.registry import flow_class
    n_markets = check_count("n_markets", n_markets)
    iterations = check_count("iterations", iterations)
    if n_markets % iterations:
        raise ValueError(f"n_markets ({n_markets}) must be a multiple of iterations "
                         f"({iterations})")
    per_iteration = n_markets // iterations
    market = _config.parse(config, classes=classes)
    setup, picked = _setup(market, learned, per_iteration, backend, block_markets, flow_kw)
    block_markets = setup["block_markets"]
    sim = from_pams(market, learned=learned, block_markets=block_markets,
                    paths=min(paths, per_iteration), balances=balances)
    # one block per device call: every device and worker gets work, the progress bar
    # moves block by block (a market block is long work, so the calls' overhead is not)
    flow_kw.setdefault("events_limit", block_markets)
    cls = flow_class(None if setup["backend"] == "flow" else setup["backend"])
    flow = cls(sim, n_events=per_iteration, seed=seed, block_size=block_markets, quiet=quiet,
               **flow_kw)
    try:
        result = flow.run(iterations, checkpoint=checkpoint)
    finally:
        if cls.__name__ != "Flow":
            flow.close()
    if setup["backend"] == "flow":
        result.meta["workers"] = 1
    result.meta["block_markets"] = block_markets
    result.meta["setup"] = {k: v for k, v in setup.items() if v is not None}
    result.meta["chosen_by"] = ("given" if not picked else "auto" if len(picked) == 3
                                else "auto: " + ", ".join(sorted(picked)))
    return decorate(result, sim)


def _setup(market, learned, n_markets, backend, block_markets, flow_kw):
    """``ensemble``'s keywords (``flow_kw`` gets joblib's ``n_jobs``) and the names of
    those it picked itself."""
    if backend is None and "n_jobs" in flow_kw:
        backend = "joblib"                              # a joblib keyword names it
    picked = [name for name, value in (("backend", backend), ("workers", backend),
                                       ("block_markets", block_markets)) if value is None]
    setup = {"backend": backend, "block_markets": block_markets}
    if picked:
        setup = auto_setup(from_pams(market, learned=learned), n_markets, block_markets,
                           gpus=_gpus(flow_kw.get("device")))
        setup["backend"] = backend or setup["backend"]
    setup["n_jobs"] = None
    if setup["backend"] == "joblib":
        if "n_jobs" not in flow_kw:
            flow_kw["n_jobs"] = joblib_workers(n_markets, setup["block_markets"])
            picked = sorted(set(picked) | {"workers"})
        setup["n_jobs"] = flow_kw["n_jobs"]
    return setup, picked


def decorate(result, sim):
    """Add ``names``, ``table``, ``per_market`` and ``paths`` to a Result of ``sim``."""
    result.names = list(sim.names)
    value, error = np.atleast_1d(result.value), np.atleast_1d(result.error)
    result.table = {n: (float(v), float(e)) for n, v, e in zip(sim.names, value, error)}
    result.meta["statistics"] = list(sim.names)
    result.meta["markets"] = list(sim.market.market_names)
    result.meta["bytes_per_market"] = sim.bytes_per_market(result.meta.get("dtype",
                                                                           "float64"))
    result.meta["n_steps"] = sim.n_steps
    result.meta["first_execution"] = sim.market.first_execution
    result.meta["marks"] = [m for e in sim.market.events for m in e.marks(sim.market.market_price)]
    records = result.iterations
    if records and "markets" in records[0]:
        result.per_market = np.concatenate([np.asarray(r["markets"], np.float64)
                                            for r in records])
    if sim.paths and records and "paths" in records[0]:
        p = np.asarray(records[0]["paths"], np.float64)
        if sim.market.n_venues == 1:
            result.paths = {"market_price": p[:, 0], "fundamental": p[:, 1]}
        else:
            result.paths = {m: {"market_price": p[:, k, 0], "fundamental": p[:, k, 1]}
                            for k, m in enumerate(sim.market.market_names)}
    return result


def report(result):
    """The named statistics of an ensemble Result as a text table."""
    width = max([18] + [len(n) for n in result.table])
    lines = [f"{'statistic':<{width}} {'mean':>14} {'s.e.':>11}"]
    for name, (v, e) in result.table.items():
        lines.append(f"{name:<{width}} {v:>14.6g} {e:>11.3g}")
    return "\n".join(lines)


def grid(config, params, n_markets, group=0, seed=0, backend="flow", **kwargs):
    """A parameter study: one ensemble per combination of FCN parameter values.

    ``params`` maps pams parameter names of ``group`` (a name or index) to lists of
    values (numbers or pams distributions), e.g. ``{"noiseScale": [0.0005, 0.001],
    "chartWeight": [0.0, 0.5, 1.0]}``; every combination runs ``n_markets`` markets
    with the same ``seed`` (common random numbers: differences between rows are not
    blurred by different draws).  Combinations that keep the loop's structure (the
    largest time window) share one compilation.  Returns a pandas DataFrame, one row
    per combination: the parameter values, then ``NAME`` and ``NAME_err`` per
    statistic, and ``seconds``.
    """
    import itertools
    import time

    import pandas as pd
    base = _config.parse(config, classes=kwargs.get("classes"))
    keys = list(params)
    rows = []
    for values in itertools.product(*(params[k] for k in keys)):
        cfg = base.with_params(group, **dict(zip(keys, values)))
        start = time.perf_counter()
        result = ensemble(cfg, n_markets, seed=seed, backend=backend, **kwargs)
        row = {k: (json.dumps(v) if isinstance(v, (list, dict)) else v)
               for k, v in zip(keys, values)}
        for name, (v, e) in result.table.items():
            row[name], row[f"{name}_err"] = v, e
        row["seconds"] = time.perf_counter() - start
        rows.append(row)
    return pd.DataFrame(rows)
