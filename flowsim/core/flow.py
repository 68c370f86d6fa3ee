"""Flow: the loop of a run.  *Where* chunks run is its executor's business.

A Flow owns the iterations, the timeline, the progress bar, checkpoints,
Ctrl-C handling and the :class:`~flowsim.Result`; it hands each iteration to
an :class:`~flowsim.core.backend.Executor` (default: every block on one device,
one call after another).  Each backend of :mod:`flowsim.distribution` is one
executor; ``ThreadPoolFlow(sim, ...)`` and friends are :func:`backend_flow`:
a Flow with that executor.  No Flow knows an algorithm.
"""
import logging
import secrets
import sys
import time

import numpy as np

from . import checkpoint as ckpt
from . import kernel
from .backend import Executor, Iteration, LocalExecutor
from .blocks import (
    BlockGrid,
    check_count,
    check_memory,
    default_block_size,
    device_memory,
    memory_defaults,
)
from .kernel import IterationTask, KernelSpec, check_seed, layout, same_state, unpack
from .log import RESULT_WARNING, logger
from .result import Result, jsonable, warn_if_inconsistent
from .simulation import full_state
from .simulation import state_digest as state_id

NONFINITE = ("raise", "drop")
DEFAULT_EVENTS_LIMIT = 1_000_000
#: Runs of at least this many events (n_events x iterations) log their estimated duration.
LONG_RUN_EVENTS = 10**11


def interrupted_message(iteration, checkpoint, saved, cli=False):
    """One line: where a run stopped (Ctrl-C), what ``checkpoint`` holds, how to resume."""
    said = f"interrupted during iteration {iteration}"
    if checkpoint is None:
        how = "--checkpoint PATH" if cli else "checkpoint=PATH to run()"
        return f"{said} (no checkpoint: pass {how} to make runs resumable)"
    return f"{said}; {resume_message(checkpoint, saved, cli)}"


def resume_message(checkpoint, saved, cli=False):
    """What ``checkpoint`` holds (``saved`` iterations) and how to resume from it."""
    held = ("no iteration yet" if not saved else "iteration 1" if saved == 1
            else f"iterations 1-{saved}")
    how = "run the same command again" if cli else "call run() again with this checkpoint"
    return f"checkpoint {str(checkpoint)!r} holds {held}: {how} to resume"


def _duration(seconds):
    for unit, size in (("days", 86400), ("h", 3600), ("min", 60)):
        if seconds >= size:
            return f"{seconds / size:.1f} {unit}"
    return f"{seconds:.0f} s"


class Flow:
    """Run a :class:`~flowsim.core.simulation.Simulation` for a number of iterations.

    Usage::

        import flowsim
        from flowsim.targets import double_gaussian
        flow = flowsim.Flow(flowsim.Vegas(double_gaussian, dim=4), n_events=10**6, seed=1)
        result = flow.run(5, skip=1)         # a flowsim.Result: value, error, chi2/dof
        print(result)

    Where the chunks run is the ``executor``'s business: by default every block on
    one device, one call after another; ``Flow(sim, n, seed=1,
    executor=ThreadExecutor())`` runs them on every device of the machine, an
    ``MPIExecutor`` across MPI ranks, a ``SparkExecutor`` as Spark tasks
    (:mod:`flowsim.distribution`; ``ThreadPoolFlow(sim, ...)`` and friends build
    the same Flow).  Whatever the executor, the same seed gives the same float64
    bits.

    Parameters
    ----------
    simulation : Simulation
        What each block computes (e.g. :class:`flowsim.Plain`, :class:`flowsim.Vegas`).
    n_events : int
        Events per iteration (> 0).  Exactly this many are run.
    seed : int or None
        Seed of the counter-based random stream, in [0, 2**63).  Default None
        draws one from the OS; it is reported in ``Result.meta["seed"]`` so the
        run can be repeated.  Same seed gives the same float64 bits whatever
        ``events_limit``, device count or backend.
    events_limit : int or None
        Most events handed to a device in one call (default 10**6, less on a
        GPU whose memory TensorFlow reports and that would not hold them:
        :func:`flowsim.core.blocks.memory_defaults`).  Bounds memory and Python
        overhead against latency; it does *not* change the result.  Must be at
        least ``block_size``.  Lower it if a device runs out of memory (the
        error says so, naming the device and the blocks tried).
    device : str or None
        ``"CPU:0"``, ``"GPU:1"``...  Default: the first GPU, else CPU:0.  Give
        ``device`` or ``executor``, not both.
    dtype : {"float64", "float32"}
        Precision of the random numbers and of the integrand (default
        ``"float64"``).  Accumulators are always float64.  float32 is faster on
        GPUs; its bits differ from float64's.
    block_size : int or None
        Events per block (multiple of 64).  Default: the iteration cut into
        equal blocks of at most 65,536 events (fewer only on a GPU too small for
        one such block).  It is part of the random stream:
        changing it changes the bits (unlike ``events_limit``).
    jit_compile : bool
        Compile the block kernel (random numbers + integrand + in-block sums)
        with XLA (default True: XLA fuses them; ``docs/performance.rst`` has
        the figures).  Turn it off for integrands using ops XLA cannot
        compile.  With ``rng="splitmix"`` or ``"philox4x32"`` the random
        numbers are the same either way (with ``"philox"`` they are not); the
        integrand's rounding may differ, so it is part of the configuration a
        checkpoint records.
    rng : {"splitmix", "philox4x32", "philox"}
        Counter-based generator (:mod:`flowsim.core.rng`); changes the random
        stream.  ``"splitmix"`` (default): SplitMix64 in integer ops fused by
        XLA, the fastest on CPU; its block-streams can overlap with
        probability about ``S**2 * L / 2**64`` for ``S`` blocks x iterations
        of ``L`` numbers each: negligible for ordinary runs, worth avoiding
        for runs of 10^9 events x 100 iterations and beyond.
        ``"philox4x32"``: Philox4x32-10 in integer ops, its counter holding
        (iteration, block, position, stream) explicitly, so streams never
        overlap; the same numbers on every device with or without XLA, but
        slower on CPU; choose it for those very long runs.  ``"philox"``:
        TensorFlow's stateless Philox, kept so older runs and checkpoints
        resume; its stream depends on ``jit_compile``.
    nonfinite : {"raise", "drop"}
        What a NaN/Inf integrand value does: ``"raise"`` (default) stops with
        an error naming the iteration and block; ``"drop"`` counts the event
        as 0 and reports the count in the iteration record.
    quiet : bool
        No progress bar (default False; it is also off when stderr is not a
        terminal).
    executor : Executor or None
        Where chunks run (:class:`flowsim.core.backend.Executor`; the built-in
        ones are in :mod:`flowsim.distribution`, writing one:
        ``docs/backends.rst``).  Default: a
        :class:`~flowsim.core.backend.LocalExecutor` on ``device``.  The Flow
        uses it as it is; :meth:`close` (or ``with``) closes it.

    Caveats: a second :meth:`run` on the same Flow continues where the first
    stopped (see :meth:`run`); a Simulation adapts in place, so a new Flow on
    the same Simulation starts from its adapted state.
    """

    backend = "flow"

    def __init__(self, simulation, n_events, seed=None, events_limit=None, device=None,
                 dtype="float64", block_size=None, jit_compile=True, rng="splitmix",
                 nonfinite="raise", quiet=False, executor=None):
        if executor is None:
            executor = LocalExecutor(device)
        elif device is not None:
            raise ValueError("give device= or executor=, not both")
        elif not isinstance(executor, Executor):
            raise TypeError(f"executor must be a flowsim.core.backend.Executor, "
                            f"got {type(executor).__name__}")
        self.executor = executor
        self.device = executor.device
        try:        # an error on one process of an SPMD run reaches the others
            self._check_arguments(simulation, n_events, events_limit, block_size, nonfinite)
            self.spec = KernelSpec(dtype=dtype, block_size=self.grid.block_size,
                                   jit_compile=bool(jit_compile), rng=rng)
            self.quiet = bool(quiet)
            self.seed = check_seed(executor.processes.agree(
                secrets.randbits(62) if seed is None else seed))
            executor.processes.agree_run(self)
        except Exception as exc:
            executor.processes.failed(exc)
            raise
        self.timeline = []
        self._next_iteration = 0
        self._last_iteration = -1     # of the current run() call
        self._last_state = None       # of the last task executed
        self._short_run = False       # the current run() call is short (kernel.SHORT_RUN_BLOCKS)
        self._t0 = None
        self._bar = None
        self._on_iteration = None     # run(on_iteration=...) of the current call
        self._eta = None

    def _check_arguments(self, simulation, n_events, events_limit, block_size, nonfinite):
        from .simulation import Simulation
        if not isinstance(simulation, Simulation):
            raise TypeError(f"simulation must be a flowsim Simulation (e.g. flowsim.Plain), "
                            f"got {type(simulation).__name__}")
        self.simulation = simulation
        self.n_events = check_count("n_events", n_events)
        largest, limit = memory_defaults(
            None if block_size is not None and events_limit is not None
            else device_memory(self.executor.devices()),
            getattr(simulation, "dim", 1), DEFAULT_EVENTS_LIMIT)
        if block_size is None:
            block_size = default_block_size(self.n_events, max_block=largest)
        self.grid = BlockGrid(self.n_events, check_count("block_size", block_size))
        if events_limit is None:
            events_limit = max(limit, self.grid.block_size)
        self.events_limit = check_count("events_limit", events_limit)
        if self.events_limit < self.grid.block_size:
            raise ValueError(
                f"events_limit ({self.events_limit}) must be at least block_size "
                f"({self.grid.block_size}); pass a smaller block_size= (it changes the "
                f"random stream) or a larger events_limit")
        if nonfinite not in NONFINITE:
            raise ValueError(f"nonfinite must be one of {NONFINITE}, got {nonfinite!r}")
        self.nonfinite = nonfinite

    def devices(self):
        """Devices this Flow runs chunks on (its executor's)."""
        return list(self.executor.devices())

    def is_root(self):
        """Whether this process writes checkpoints, logs and shows progress (the
        root of an MPI job; always True in one process)."""
        return self.executor.processes.is_root()

    def close(self):
        """Release the executor's workers or session (idempotent)."""
        self.executor.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def _execute(self, task):
        """Hand ``task`` to the executor; return its rows ``[n_blocks, width]``."""
        steady = self._last_state is not None and same_state(self._last_state, task.state)
        self._last_state = task.state
        self._t0 = self._t0 or time.perf_counter()
        it = Iteration(task, self.grid, self.events_limit, steady,
                       max(self._last_iteration, task.iteration), self._t0,
                       self._on_chunk, self._on_progress)
        return self.executor.execute(it)

    def _on_chunk(self, entry, events):
        self.timeline.append(entry)
        self._on_progress(events)
        if self._eta is not None and "failed" not in entry and entry["blocks"]:
            # chunks reported without progress (other MPI ranks' work) still time the run
            self._estimate(entry["device"], self.grid.events_in(entry["first_block"],
                                                                entry["blocks"]),
                           entry["end"] - entry["start"], entry["end"])

    def _on_progress(self, events):
        if self._bar is not None:
            self._bar.update(events)

    def _estimate(self, device, events, seconds, end):
        """Log a long run's duration once, measured on the first chunk of a device that
        ran one before (its first includes tracing and XLA compilation)."""
        if device not in self._eta["warm"]:
            self._eta["warm"].add(device)
            return
        rate = events / max(seconds, 1e-9) * len(self.devices())
        total = end + self._eta["events"] / rate
        self._eta = None
        logger.warning("estimated duration ~%s (%.3g events/s measured on the first chunk "
                       "after compilation, x%d device(s))", _duration(total), rate,
                       len(self.devices()))

    def _failed(self, exc, checkpoint):
        """Note on ``exc`` (raised by an iteration of a run with ``checkpoint``) what
        the checkpoint holds and how to resume."""
        if not self.is_root():
            return
        try:
            saved = len(ckpt.load(checkpoint)[1])
        except Exception:  # noqa: BLE001 - absent or unreadable: holds nothing
            saved = 0
        exc.add_note("flowsim: " + resume_message(checkpoint, saved))

    def _interrupted(self, exc, iteration, checkpoint):
        """Note on ``exc`` (a KeyboardInterrupt) where the run stopped and how to resume."""
        if not self.is_root():
            exc.flowsim_interrupted = None       # the root process reports it
            return
        saved = 0
        if checkpoint is not None:
            try:
                saved = len(ckpt.load(checkpoint)[1])
            except Exception:  # noqa: BLE001 - absent (None) or unreadable: holds nothing
                saved = 0
            iteration = saved + 1           # the first it lacks (also if stopped saving it)
        exc.flowsim_interrupted = (iteration, checkpoint, saved)
        exc.add_note("flowsim: " + interrupted_message(iteration, checkpoint, saved))

    # -- the loop -------------------------------------------------------------------
    def config(self):
        """What determines the bits of a run (checked when resuming): the
        simulation's :meth:`~flowsim.Simulation.config` (with its fingerprint,
        :mod:`flowsim.core.fingerprint`) and the Flow settings that change the bits."""
        return {"simulation": jsonable(self.simulation.config()),
                "n_events": self.n_events, "seed": self.seed,
                "block_size": self.grid.block_size, "dtype": self.spec.dtype,
                "jit_compile": self.spec.jit_compile, "rng": self.spec.rng}

    def task(self, iteration):
        """The picklable description of iteration ``iteration``."""
        self.simulation.prepare(self.n_events)
        # a copy: adapt() may change the simulation's arrays in place
        return IterationTask(self.simulation, self.spec, self.seed, iteration,
                             self.n_events, {k: np.array(v) for k, v in
                                             full_state(self.simulation).items()},
                             self._short_run)

    def run_blocks(self, iteration=0):
        """Rows ``[n_blocks, width]`` of one iteration, without estimate or adaptation."""
        return self._execute(self.task(iteration))

    def run(self, n_iter, checkpoint=None, skip=0, on_iteration=None):
        """Run ``n_iter`` iterations and return a :class:`~flowsim.Result`.

        Parameters
        ----------
        n_iter : int
            Iterations to run.  With ``checkpoint``, iterations in total,
            counting those already in the checkpoint.  Without, a second call
            on the same Flow continues where the first stopped (next iteration
            numbers, so fresh random numbers, and the adapted state): ``run(1)``
            then ``run(4)`` gives the bits of ``run(5)``'s last four iterations.
        checkpoint : path or None
            Write the state here after every iteration (only the root process
            writes, atomically: :mod:`flowsim.core.checkpoint`).  If the file exists
            and was made by the same configuration the run resumes from it and
            ends with the same bits as an uninterrupted run.  The configuration
            is this Flow's :meth:`config`: seed, events, dtype... and the
            simulation's fingerprint (its class; the integrand's code and its
            values at fixed points, limits, histograms; see
            :mod:`flowsim.core.fingerprint`).  Refused with a ``ValueError``, before
            any work: a checkpoint of another configuration (naming what
            differs), a file flowsim did not write, one damaged (checksum) or of
            an older format, a directory that is missing or not writable, and a
            path another run is using (the root process holds ``PATH.lock``
            until this call returns).
        skip : int
            Leading iterations left out of the combined estimate (warm-up of
            adaptive algorithms).  They are still listed in the table.
        on_iteration : callable or None
            Called with each iteration's record (``iteration``, ``value``,
            ``error``, ``events``, ``seconds``...) as soon as it finishes, on the root
            process (the command line prints a line per iteration with it).
        """
        n_iter = check_count("n_iter", n_iter)
        if on_iteration is not None and not callable(on_iteration):
            raise TypeError(f"on_iteration must be callable or None, got {on_iteration!r}")
        self._on_iteration = on_iteration if self.is_root() else None
        skip = check_count("skip", skip, minimum=0)
        if skip >= n_iter:
            raise ValueError(f"skip ({skip}) must be smaller than n_iter ({n_iter})")
        procs = self.executor.processes
        with procs.running():
            try:
                records, wall = self._run_iterations(n_iter, checkpoint)
            except Exception as exc:
                procs.failed(exc)
                raise
            records, wall = procs.finish(records, wall)
        result = Result(records, wall, self.timeline, meta=self._meta(), skip=skip,
                        inconsistency_advice=self.simulation.inconsistency_advice)
        if self.is_root():
            warn_if_inconsistent(result)
        return result

    def _run_iterations(self, n_iter, checkpoint):
        """``(records, wall_time)`` of :meth:`run`."""
        records, elapsed = [], 0.0
        first = 0 if checkpoint is not None else self._next_iteration
        self._last_iteration = first + n_iter - 1
        config = self.config() if checkpoint is not None else None
        unlock, opened = None, False
        try:
            if checkpoint is not None:
                records, elapsed, unlock = self._open_checkpoint(checkpoint, config, n_iter)
                opened = True
            self.timeline = []
            self._t0 = time.perf_counter()
            self._begin(max(n_iter - len(records), 0))
            for iteration in range(first + len(records), first + n_iter):
                records.append(self._iterate(iteration))
                self._next_iteration = iteration + 1
                if checkpoint is not None and self.is_root():
                    ckpt.save(checkpoint, config, jsonable(records),
                              elapsed + time.perf_counter() - self._t0,
                              self.simulation.get_state())
                if self._on_iteration is not None:
                    self._on_iteration(records[-1])
        except KeyboardInterrupt as exc:
            self._interrupted(exc, first + len(records) + 1, checkpoint)
            raise
        except Exception as exc:
            if opened:
                self._failed(exc, checkpoint)
            raise
        finally:
            self._last_iteration = -1
            self._short_run = False
            if self._bar is not None:
                self._bar.close()
                self._bar = None
            if unlock is not None:
                unlock()
        return records, elapsed + time.perf_counter() - self._t0

    def _open_checkpoint(self, checkpoint, config, n_iter):
        """``(records, elapsed, unlock)`` of a run with ``checkpoint``: its lock
        (root), and what it holds when it exists."""
        records, elapsed, unlock = [], 0.0, None
        if self.is_root():
            ckpt.check_path(checkpoint)     # before any work, not after iteration 1
            unlock = ckpt.lock(checkpoint)  # one run per file, until this one ends
        try:
            saved = self.executor.processes.load_checkpoint(checkpoint)
            if saved is not None:
                records, elapsed = self._resume(checkpoint, saved, config)
        except BaseException:
            if unlock is not None:
                unlock()
            raise
        if len(records) > n_iter:       # the checkpoint ran further: report n_iter
            logger.info("checkpoint has %d iterations; reporting the first %d",
                        len(records), n_iter)
            records = records[:n_iter]
        return records, elapsed, unlock

    def _begin(self, remaining):
        """Before the first iteration of a run of ``remaining`` iterations: the
        memory check, the duration estimate, the progress bar."""
        self._short_run = (self.grid.n_blocks <= kernel.SHORT_ITERATION_BLOCKS and
                           remaining * self.grid.n_blocks <= kernel.SHORT_RUN_BLOCKS)
        if remaining:                   # before any compiling
            self.simulation.prepare(self.n_events)      # (the layout may depend on it)
            check_memory(self.simulation, self.grid.n_blocks)
        long_run = self.is_root() and remaining * self.n_events >= LONG_RUN_EVENTS
        self._eta = {"events": remaining * self.n_events, "warm": set()} if long_run else None
        show = (not self.quiet and self.is_root() and sys.stderr.isatty()
                and remaining * self.n_events >= 10 * self.grid.block_size)
        if show:
            from tqdm.auto import tqdm
            self._bar = tqdm(total=remaining * self.n_events, unit="ev", unit_scale=True,
                             desc=type(self.simulation).__name__, leave=False)

    def _resume(self, path, saved, config):
        saved_config, records, elapsed, state = saved
        diff = ckpt.differences(saved_config, config)
        if diff:
            raise ValueError(f"checkpoint {str(path)!r} was made for another configuration: "
                             + "; ".join(diff))
        self.simulation.set_state(state)
        self.simulation.restore_adaptations(records)
        for r in records:
            r["value"] = np.asarray(r["value"], dtype=np.float64)
            r["error"] = np.asarray(r["error"], dtype=np.float64)
            for h in r.get("histograms", {}).values():      # JSON lists -> arrays again
                for k in ("edges", "values", "errors"):
                    if k in h:
                        h[k] = np.asarray(h[k], dtype=np.float64)
        if self.is_root():
            logger.warning("resuming from iteration %d: checkpoint %r holds %d iteration(s)",
                           len(records) + 1, str(path), len(records))
        return records, elapsed

    def _iterate(self, iteration):
        start = time.perf_counter()
        task = self.task(iteration)
        rows = self._execute(task)
        self._check_nonfinite(rows, iteration)
        totals = unpack(self.simulation, self.simulation.combine(rows, self.n_events))
        est = dict(self.simulation.estimate(totals, self.n_events))
        self.simulation.adapt(totals, self.n_events)
        adapted = self.simulation.count_adaptation(task.state)     # Result.meta["start_state"]
        record = {"iteration": iteration + 1, "events": self.n_events,
                  "seconds": time.perf_counter() - start, "state_id": state_id(task.state),
                  **adapted, **est}
        if "nonfinite" in totals:
            record["nonfinite"] = int(totals["nonfinite"])
        if logger.isEnabledFor(logging.INFO):     # (formatting arrays is not free)
            logger.info("iteration %d: %s +/- %s (%.3f s)", iteration + 1,
                        np.array2string(np.atleast_1d(est["value"]), precision=8),
                        np.array2string(np.atleast_1d(est["error"]), precision=3),
                        record["seconds"])
        return record

    def _check_nonfinite(self, rows, iteration):
        fields, _ = layout(self.simulation)
        col = [a for name, _, a, _ in fields if name == "nonfinite"]
        if not col:
            return
        counts = rows[:, col[0]]
        bad = np.flatnonzero(counts)
        if bad.size == 0:
            return
        total = int(counts.sum())
        if self.nonfinite == "raise":
            b = int(bad[0])
            raise FloatingPointError(
                f"{type(self.simulation).__name__}: the integrand gave {total} NaN/Inf "
                f"value(s) in iteration {iteration + 1}, first in block {b} (events "
                f"{b * self.grid.block_size}.."
                f"{min((b + 1) * self.grid.block_size, self.n_events) - 1}); "
                f"pass nonfinite='drop' to count them and treat them as 0")
        logger.warning("iteration %d: dropped %d NaN/Inf value(s)", iteration + 1, total,
                       extra=RESULT_WARNING)     # also in Result.warnings

    def _meta(self):
        return {"simulation": type(self.simulation).__name__, "backend": self.executor.name,
                "devices": ", ".join(self.devices()), "seed": self.seed,
                "n_events_per_iteration": self.n_events, "block_size": self.grid.block_size,
                "n_blocks": self.grid.n_blocks, "events_limit": self.events_limit,
                "dtype": self.spec.dtype, **self.executor.meta()}

    def __repr__(self):
        return (f"{type(self).__name__}({type(self.simulation).__name__}, "
                f"n_events={self.n_events}, "
                f"seed={self.seed}, devices={self.devices()})")


def backend_flow(who, make_executor, simulation, n_events, seed, flow_kwargs):
    """``Flow(simulation, n_events, seed=seed, executor=make_executor(), **flow_kwargs)``:
    what the factories of :mod:`flowsim.distribution` (``ThreadPoolFlow``,
    ``MPIFlow``...) return.  ``who`` names the factory in the refusal of an
    ``executor=`` keyword; the executor is closed if the Flow cannot be built."""
    if "executor" in flow_kwargs:
        raise TypeError(f"{who} builds its own executor; to give one, call "
                        f"flowsim.Flow(simulation, n_events, executor=...)")
    executor = make_executor()
    try:
        return Flow(simulation, n_events, seed=seed, executor=executor, **flow_kwargs)
    except BaseException:
        executor.close()
        raise
