"""The backend conformance check: does an executor give :class:`flowsim.Flow`'s bits?

Usage (a third-party backend's test suite)::

    from flowsim.testing import check_executor
    from mypkg import PoolExecutor

    def test_pool_gives_flows_bits():
        check_executor(lambda: PoolExecutor(workers=2))

:func:`check_executor` runs every case of :data:`CASES` twice, on a plain
:class:`flowsim.Flow` (the reference) and on ``Flow(..., executor=factory())``,
and raises ``AssertionError`` naming the first case and value that differ.  The
cases: Plain, Vegas and VegasPlus (values, errors and the adapted state of
every iteration), a path price (Heston), a parameter sweep, a resume from a
checkpoint, the per-block rows of one iteration, an exception raised by the
integrand in Python and one raised by TensorFlow at run time (the same type
and text must surface), and the workloads' cases (:mod:`.cases_markets`,
:mod:`.cases_envs`, :mod:`.cases_finance`, :mod:`.cases_physics`).  Every run's
timeline must cover every block of every iteration exactly once.

A case module holds ``CASES = {name: {"factory": "module:function", "n_events":
int, "n_iters": int, optional "block_size", "events_limit", "seed"}}`` where
``factory()`` returns a Simulation; :func:`cases_from` reads one (a module or
its name), so ``check_executor(factory, cases={**CASES, **cases_from("mycases")})``
adds a workload's own.

It takes a few minutes on two cores (each kernel compiles once per process and
device: the cases' simulations are copies of one prototype each).  Several
backends of one process can share the reference: ``ref = reference()`` once,
then ``check_executor(factory, reference=ref)`` for each.
"""
import importlib
import os
import pickle
import struct
import tempfile

import numpy as np

from ..algorithms.plain import Plain
from ..algorithms.sweep import Sweep, run_sweep
from ..algorithms.vegas import Vegas
from ..algorithms.vegasplus import VegasPlus
from ..core import kernel
from ..core.flow import Flow
from ..targets import double_gaussian

__all__ = ["CASES", "CORE", "check_executor", "compare", "cases_from", "kernel_path_faults",
           "path_cuts", "reference", "run_all", "run_case"]

#: One grid for the integrands: 20 blocks of 2048, at most 3 blocks per device call.
GRID = {"n_events": 40_000, "block_size": 2048, "events_limit": 6144, "seed": 12345}
#: The text of the exception :class:`Broken` raises.
ERROR_TEXT = "deliberately broken integrand kernel"
#: Modules of the workloads' cases shipped with flowsim.
SHIPPED = ("flowsim.testing.cases_markets", "flowsim.testing.cases_envs",
           "flowsim.testing.cases_finance", "flowsim.testing.cases_physics")


class Broken(Plain):
    """User code that fails inside the kernel (traced on the worker that runs it)."""

    def block(self, u, valid, state):
        raise ValueError(ERROR_TEXT)


def asserting_integrand(x):
    """Fails at run time, inside TensorFlow (``InvalidArgumentError``; XLA drops
    assertions, hence ``jit_compile=False`` for this case)."""
    from ..core.lazy_tf import tf
    t = tf()
    t.debugging.assert_less(t.reduce_max(x), t.constant(-1.0, x.dtype),
                            message="integrand out of range")
    return t.reduce_sum(x, axis=1)


def sweep_kernel(params, data):
    """A per-row kernel of a strategy-like sweep: two outputs per parameter row."""
    from ..core.lazy_tf import tf
    t = tf()
    prices = data["prices"]
    weights = t.exp(-params[:, :1] * t.range(prices.shape[0], dtype=prices.dtype)[None, :])
    level = t.reduce_sum(weights * prices[None, :], axis=1) / t.reduce_sum(weights, axis=1)
    return {"level": level * params[:, 1], "spread": t.sqrt(params[:, 0] + params[:, 1])}


def _sweep():
    rows = np.stack(np.meshgrid(np.linspace(0.01, 1.0, 50), np.linspace(0.5, 2.0, 60)),
                    -1).reshape(-1, 2)
    prices = 100.0 + np.cumsum(np.sin(np.arange(64) * 0.37))
    return Sweep(sweep_kernel, rows, {"prices": prices}, block_rows=256)


def _plain():
    return Plain(double_gaussian, 4)


def _vegas():
    return Vegas(double_gaussian, 4)


def _vegasplus():
    return VegasPlus(double_gaussian, 4)


def _path():
    from ..finance import EuropeanCall, Heston
    from ..finance.pricing import PathSimulation
    return PathSimulation(Heston(100.0, 0.03, 0.04, 1.5, 0.04, 0.3, -0.7),
                          EuropeanCall(100.0, 1.0), n_steps=12)


def _broken():
    return Broken(double_gaussian, 4)


def _asserting():
    return Plain(asserting_integrand, 4)


#: name -> (factory, run settings): the cases every backend runs.  Adaptive ones run
#: without XLA (compile time).  ``rows``: the per-block rows of one iteration;
#: ``message``: the text an expected exception must contain.
CASES = {
    "plain": (_plain, dict(GRID, n_iters=3)),
    "vegas": (_vegas, dict(GRID, n_iters=3, jit_compile=False)),
    "vegasplus": (_vegasplus, dict(GRID, n_iters=3, jit_compile=False)),
    "path": (_path, {"n_events": 12_000, "block_size": 1024, "events_limit": 3072,
                     "seed": 7, "n_iters": 2}),
    "sweep": (_sweep, {"sweep": True}),
    "resume": (_plain, dict(GRID, n_iters=3, resume=True)),
    "rows": (_plain, dict(GRID, rows=True)),
    "error": (_broken, dict(GRID, n_iters=1)),
    "tf_error": (_asserting, dict(GRID, n_iters=1, jit_compile=False,
                                  message="integrand out of range")),
}
#: The core cases (no workload's).
CORE = tuple(CASES)


def cases_from(module):
    """The cases of a case module (or its name): ``{name: (factory, settings)}`` with
    the defaults filled in (``seed`` 2024: without one each Flow would draw its own;
    ``n_iters`` 1)."""
    if isinstance(module, str):
        module = importlib.import_module(module)
    found = {}
    for name, spec in module.CASES.items():
        spec = dict(spec)
        where, _, func = spec.pop("factory").partition(":")
        factory = getattr(importlib.import_module(where), func)
        found[name] = (factory, dict({"seed": 2024, "n_iters": 1}, **spec))
    return found


for _module in SHIPPED:
    CASES.update(cases_from(_module))


def hexbits(x):
    """The float64 bits of ``x`` as hex (what the summaries compare)."""
    return np.ascontiguousarray(np.asarray(x, dtype=np.float64)).tobytes().hex()


def coverage_faults(timeline, n_blocks):
    """Iterations whose timeline does not cover each block exactly once."""
    bad = []
    for it in sorted({c["iteration"] for c in timeline}):
        seen = np.zeros(n_blocks, int)
        for c in timeline:
            if c["iteration"] == it and not c.get("failed"):
                seen[c["first_block"]:c["first_block"] + c["blocks"]] += 1
        if not (seen == 1).all():
            bad.append(it)
    return bad


def summary(result, sim, flow):
    """The bits of a run: every iteration's value and error, the adapted state, and
    the timeline's faults."""
    state = sim.get_state()
    return {"iterations": [[hexbits(r["value"]), hexbits(r["error"])]
                           for r in result.iterations],
            "value": hexbits(result.value), "error": hexbits(result.error),
            "state": {k: hexbits(state[k]) for k in sorted(state)},
            "timeline_faults": coverage_faults(result.timeline, flow.grid.n_blocks),
            "timeline_iterations": sorted({c["iteration"] for c in result.timeline})}


class Prototypes:
    """One never-run Simulation per case; copies share its compiled kernels
    (a pickled copy keeps the trace key), so each kernel compiles once per device."""

    def __init__(self, cases=None):
        self.cases = CASES if cases is None else cases
        self.sims = {}

    def fresh(self, name):
        if name not in self.sims:
            self.sims[name] = self.cases[name][0]()
            self.sims[name].trace_key()
        return pickle.loads(pickle.dumps(self.sims[name]))


def _run(name, spec, make_flow, prototypes, tmpdir, label):
    sim = prototypes.fresh(name)
    if spec.pop("sweep", False):
        flow = make_flow(sim, n_events=sim.n_rows, seed=0, block_size=sim.block_rows,
                         events_limit=4 * sim.block_rows)
        outputs = run_sweep(flow)
        return {"outputs": {k: hexbits(v) for k, v in sorted(outputs.items())},
                "timeline_faults": coverage_faults(flow.timeline, flow.grid.n_blocks)}
    if spec.pop("rows", False):
        spec.pop("n_iters", None)           # one iteration's rows
        flow = make_flow(sim, **spec)
        rows = flow.run_blocks(0)
        return {"rows": [hexbits(r) for r in rows], "shape": list(np.shape(rows)),
                "timeline_faults": coverage_faults(flow.timeline, flow.grid.n_blocks)}
    n_iters, resume = spec.pop("n_iters"), spec.pop("resume", False)
    if resume:
        path = os.path.join(tmpdir, f"{name}-{label}.ckpt.npz")
        make_flow(sim, **spec).run(n_iters - 1, checkpoint=path)
        sim = prototypes.fresh(name)
    flow = make_flow(sim, **spec)
    return summary(flow.run(n_iters, checkpoint=path if resume else None), sim, flow)


def run_case(name, make_flow, prototypes, tmpdir, label="flow"):
    """Summary of case ``name`` on the Flow ``make_flow(sim, **settings)`` builds
    (``tmpdir`` must be new for each ``label``: checkpoints go there), or the
    exception it raised (``{"raised": type name, "message": text}``)."""
    spec = dict(prototypes.cases[name][1])
    spec.pop("message", None)
    try:
        return _run(name, spec, make_flow, prototypes, tmpdir, label)
    except Exception as exc:  # noqa: BLE001 - compared with what Flow raised
        return {"raised": type(exc).__name__, "message": str(exc)}


#: Prototypes by case table, shared by the checks of one process.
_SHARED = {}


def prototypes_of(cases=None):
    """The :class:`Prototypes` of a case table, one per process (so each case's
    kernels compile once, whatever the number of checks)."""
    cases = CASES if cases is None else cases
    key = id(cases)
    if key not in _SHARED or _SHARED[key].cases is not cases:
        _SHARED[key] = Prototypes(cases)
    return _SHARED[key]


def run_all(make_flow, tmpdir, names=None, cases=None, label="flow"):
    """Summaries of every case (or ``names``) on the Flows ``make_flow`` builds."""
    prototypes = prototypes_of(cases)
    return {name: run_case(name, make_flow, prototypes, tmpdir, label)
            for name in (names or prototypes.cases)}


def _float(hexed):
    data = bytes.fromhex(hexed)
    values = struct.unpack(f"<{len(data) // 8}d", data)
    return values[0] if len(values) == 1 else list(values)


def _first_iteration(mine, ref):
    if len(mine) != len(ref):
        return f"{len(mine)} iterations, Flow {len(ref)}"
    for i, (got, want) in enumerate(zip(mine, ref)):
        for what, g, w in zip(("value", "error"), got, want):
            if g != w:
                return f"iteration {i + 1} {what} {_float(g)!r}, Flow {_float(w)!r}"
    return None


def _first_key(mine, ref):
    k = next(k for k in sorted(set(ref) | set(mine)) if mine.get(k) != ref.get(k))
    got, want = mine.get(k), ref.get(k)
    return (f"{k!r} {_float(got) if got else got!r}, "
            f"Flow {_float(want) if want else want!r}")[:600]


def _difference(key, mine, ref):
    """One readable line: where ``mine`` (a summary's ``key``) first differs from ``ref``."""
    if key == "iterations" and isinstance(mine, list):
        return _first_iteration(mine, ref)
    if key == "rows" and isinstance(mine, list) and len(mine) == len(ref):
        b = next(i for i, (g, w) in enumerate(zip(mine, ref)) if g != w)
        return f"block {b}'s row {_float(mine[b])!r}, Flow {_float(ref[b])!r}"
    if isinstance(ref, dict) and isinstance(mine, dict):
        return _first_key(mine, ref)
    if isinstance(ref, str) and isinstance(mine, str):
        return f"{_float(mine)!r}, Flow {_float(ref)!r}"
    return f"{mine!r}, Flow {ref!r}"[:600]


def compare(got, want, label, names=None, cases=None):
    """Differences between a backend's summaries and Flow's for cases ``names``
    (default: every case of ``want``), as readable lines."""
    cases = CASES if cases is None else cases
    problems = []
    for name in names or want:
        ref, mine = want[name], got.get(name)
        if mine is None:
            problems.append(f"{label} {name}: no result")
            continue
        if "raised" in ref:
            phrase = cases[name][1].get("message", ref["message"])
            if mine.get("raised") != ref["raised"] or phrase not in mine.get("message", ""):
                problems.append(f"{label} {name}: raised {mine.get('raised')}: "
                                f"{mine.get('message', '')[:300]!r}, want {ref['raised']}: "
                                f"{ref['message'][:300]!r}")
            continue
        if "raised" in mine:
            problems.append(f"{label} {name}: raised {mine['raised']}: {mine['message'][:2000]}")
            continue
        for key in ref:
            if key != "timeline_faults" and mine.get(key) != ref[key]:
                problems.append(f"{label} {name}: {key} differs from Flow: "
                                f"{_difference(key, mine.get(key), ref[key])}")
        if mine.get("timeline_faults"):
            problems.append(f"{label} {name}: timeline misses or repeats blocks in iterations "
                            f"{mine['timeline_faults']}")
    return problems


#: Chunk lengths, in turn, of :func:`path_cuts`.
CUT_LENGTHS = (2, 3, 1)


def path_cuts(n_blocks):
    """Chunks ``[(first block, blocks)]`` covering a grid of ``n_blocks``: runs of 2, 3
    and 1 blocks in turn (:data:`CUT_LENGTHS`, so chunks start at odd blocks and the
    last one ends with the grid's last, possibly partial, block), then one chunk of
    every block but the first."""
    cuts, first, i = [], 0, 0
    while first < n_blocks:
        n = min(CUT_LENGTHS[i % len(CUT_LENGTHS)], n_blocks - first)
        cuts.append((first, n))
        first, i = first + n, i + 1
    return cuts + ([(1, n_blocks - 1)] if n_blocks > 1 else [])


def _flow_settings(simulation, spec):
    if spec.get("sweep"):
        return dict(n_events=simulation.n_rows, seed=0, block_size=simulation.block_rows)
    return {k: spec[k] for k in ("n_events", "seed", "block_size", "dtype", "jit_compile")
            if k in spec}


def kernel_path_faults(name, cases=None, iterations=(0, 1, 2)):
    """Where case ``name``'s rows differ from :class:`flowsim.Flow`'s when every chunk
    runs block by block, and when every chunk runs in the chunk function
    (:func:`flowsim.core.kernel.forced_path`), on the chunks of :func:`path_cuts`, in
    each of ``iterations``; one line per block that differs, [] when all agree.

    Usage::

        assert not kernel_path_faults("path")

    Under XLA the two ways must give the same bits (which one a chunk takes depends on
    its size, the run's and, on several devices, the measured speeds); without XLA
    there is one way, and this checks the chunk cuts alone.
    """
    prototypes = prototypes_of(cases)
    simulation = prototypes.fresh(name)
    flow = Flow(simulation, quiet=True,
                **_flow_settings(simulation, prototypes.cases[name][1]))
    device, cuts = flow.executor.devices()[0], path_cuts(flow.grid.n_blocks)
    faults = []
    for iteration in iterations:
        want = [hexbits(row) for row in flow.run_blocks(iteration)]
        task = flow.task(iteration)
        for path in ("blocks", "chunk"):
            with kernel.forced_path(path):
                for first, n in cuts:
                    rows = kernel.run_chunk(task, first, n, device)
                    faults += [f"{name}: iteration {iteration}, {path}, chunk of blocks "
                               f"{first}..{first + n - 1}: block {first + i}'s row "
                               f"{_float(hexbits(row))!r}, Flow {_float(want[first + i])!r}"
                               for i, row in enumerate(rows) if hexbits(row) != want[first + i]]
    return faults


def reference(cases=None, names=None, tmpdir=None):
    """Flow's summaries of the cases (the reference of :func:`check_executor`)."""
    with tempfile.TemporaryDirectory(dir=tmpdir) as where:
        return run_all(lambda sim, **kw: Flow(sim, quiet=True, **kw), where, names, cases)


def check_executor(factory, cases=None, *, names=None, reference=None, label=None,
                   tmpdir=None):
    """Check that the executors ``factory()`` makes give :class:`flowsim.Flow`'s bits.

    Parameters
    ----------
    factory : callable
        ``factory()`` returns a :class:`flowsim.core.backend.Executor`; it is
        called for every Flow (several per case) and may return the same
        executor each time (one pool for every case).  Each distinct executor is
        closed at the end.
    cases : dict or None
        ``{name: (simulation factory, settings)}``; default :data:`CASES` (add a
        workload's own with :func:`cases_from`).
    names : list of str or None
        Only these cases (default: all).
    reference : dict or None
        Flow's summaries (:func:`reference`), to share between several checks;
        default: computed here.
    label : str or None
        Names the backend in the message (default: the factory's ``__name__``).
    tmpdir : path or None
        Where checkpoints go (default: a temporary directory).

    Raises ``AssertionError`` whose first line names the first case and the value
    that differs (an iteration's value or error, a block's row, a state array, a
    sweep output, an exception of another type or text, a timeline that misses
    or repeats a block), followed by every other difference.  Returns the
    backend's summaries when everything agrees.
    """
    cases = CASES if cases is None else cases
    label = label or getattr(factory, "__name__", "executor")
    if reference is None:
        reference = globals()["reference"](cases, names, tmpdir)
    raised = {k: v for k, v in reference.items() if "raised" in v and "message" not in
              cases[k][1] and k not in ("error",)}
    if raised:
        raise RuntimeError(f"check_executor: Flow itself fails on {sorted(raised)}: {raised}")

    made = []

    def make_flow(sim, **kw):
        executor = factory()
        if not any(executor is e for e in made):
            made.append(executor)
        return Flow(sim, quiet=True, executor=executor, **kw)

    try:
        with tempfile.TemporaryDirectory(dir=tmpdir) as where:
            got = run_all(make_flow, where, names or list(reference), cases, label)
    finally:
        for executor in made:
            executor.close()
    problems = compare(got, reference, label, names or list(reference), cases)
    mixed = mixed_device_types(factory, cases, reference, tmpdir,
                               devices=made[0].devices() if made else [])
    if mixed is not None:
        got[MIXED] = mixed
        problems += mixed["problems"]
    if problems:
        raise AssertionError("\n".join(problems))
    return got


#: The name of the case :func:`mixed_device_types` adds to :func:`check_executor`.
MIXED = "mixed device types"


def mixed_device_types(factory, cases=None, reference=None, tmpdir=None, name="plain",
                       devices=None):
    """The ``"mixed device types"`` case of :func:`check_executor`: on an executor of
    at least two local devices, the second half counted as GPUs
    (:func:`flowsim.testing.device_types`, rows rounded one ulp apart), case ``name``
    runs twice, without delays and with the first device slowed; the two runs must
    give the same bits (timing never moves a block between types) and differ from
    Flow's (the other type's rounding is live).  None when the executor has fewer
    than two local devices (one type: the other cases cover it) or ``cases`` has no
    case ``name``.  ``devices``: the executor's devices, if known (else one executor
    is made to ask)."""
    cases = CASES if cases is None else cases
    if name not in cases:
        return None
    devices = _local_devices(factory, devices)
    if devices is None:
        return None
    mapping = {d: "GPU" for d in devices[len(devices) // 2:]}
    runs = _mixed_runs(factory, cases, name, mapping, devices[0], tmpdir)
    problems = []
    if runs[0] != runs[1]:
        problems.append(f"{MIXED}: {name} changed with the timing of the devices "
                        f"({', '.join(mapping)} counted as GPUs)")
    if reference is not None and name in reference and runs[0] == reference[name]:
        problems.append(f"{MIXED}: {name} gave Flow's bits although {', '.join(mapping)} "
                        f"were counted as GPUs (their rounding is not live)")
    return {"runs": runs, "problems": problems, "mapping": mapping}


def _local_devices(factory, devices):
    """The executor's distinct devices (asking one ``factory()`` makes when not given),
    or None when they are fewer than two or not local devices."""
    if devices is None:
        executor = factory()
        try:
            devices = executor.devices()
        finally:
            executor.close()
    devices = list(dict.fromkeys(devices))
    if len(devices) < 2 or not all(d.startswith(("CPU:", "GPU:")) for d in devices):
        return None
    return devices


def _mixed_runs(factory, cases, name, mapping, slowed, tmpdir):
    """Case ``name`` under ``device_types(mapping)``: without delays, then with device
    ``slowed`` 10 ms slower per chunk."""
    from .fleet import device_types
    made, runs = [], []

    def make_flow(sim, **kw):
        made.append(factory())
        return Flow(sim, quiet=True, executor=made[-1], **kw)

    try:
        for delays in (None, {slowed: 0.01}):
            with device_types(mapping, delays=delays), \
                    tempfile.TemporaryDirectory(dir=tmpdir) as where:
                runs.append(run_all(make_flow, where, [name], cases, MIXED)[name])
    finally:
        for e in {id(e): e for e in made}.values():
            e.close()
    return runs
