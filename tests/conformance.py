"""The backend conformance suite's cases and checks, shared by every backend.

Each case builds a Simulation, runs it on the Flow a backend gives and returns a
JSON-able summary: the bits of every iteration's value and error, the adapted
state, the outputs of a sweep, the checkpoint resume's bits, the exception an
integrand raised (type and text) and whether the timeline covers every block of
every iteration exactly once.  ``tests/test_conformance.py`` compares each
backend's summaries with :class:`flowsim.Flow`'s, key by key.

Run as a script it serves the backends that need their own processes::

    python tests/conformance.py threads N OUT      # N logical CPUs, every schedule
    mpirun -n K python tests/conformance.py mpi OUT

and writes ``OUT/<label>.json`` (MPI: one file per rank, written last, so a
missing file means that rank did not finish).

More cases plug in from ``tests/cases_*.py``: ``CASES = {name: {"factory":
"module:function", "n_events": int, "n_iters": int, ...}}`` where ``factory()``
returns a Simulation (optional keys: ``block_size``, ``events_limit``, ``seed``
(default 2024), ``n_iters`` (default 1)).
"""
import glob
import importlib
import json
import os
import pickle
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
if HERE not in sys.path:
    sys.path.insert(0, HERE)

import flowsim  # noqa: E402
from flowsim.algorithms.sweep import Sweep, run_sweep  # noqa: E402
from flowsim.finance import EuropeanCall, Heston  # noqa: E402
from flowsim.finance.pricing import PathSimulation  # noqa: E402
from flowsim.targets import double_gaussian  # noqa: E402

#: One grid for the integrands: 20 blocks of 2048, at most 3 blocks per device call.
GRID = {"n_events": 40_000, "block_size": 2048, "events_limit": 6144, "seed": 12345}
ERROR_TEXT = "deliberately broken integrand kernel"


class Broken(flowsim.Plain):
    """User code that fails inside the kernel (traced on the worker that runs it)."""

    def block(self, u, valid, state):
        raise ValueError(ERROR_TEXT)


def asserting_integrand(x):
    """Fails at run time, inside TensorFlow (``InvalidArgumentError``; XLA drops
    assertions, hence ``jit_compile=False`` for this case)."""
    from flowsim.core.lazy_tf import tf
    t = tf()
    t.debugging.assert_less(t.reduce_max(x), t.constant(-1.0, x.dtype),
                            message="integrand out of range")
    return t.reduce_sum(x, axis=1)


def sweep_kernel(params, data):
    """A per-row kernel of a strategy-like sweep: two outputs per parameter row."""
    from flowsim.core.lazy_tf import tf
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


#: name -> (factory, run settings).  Adaptive ones run without XLA (compile time).
CASES = {
    "plain": (lambda: flowsim.Plain(double_gaussian, 4), dict(GRID, n_iters=3)),
    "vegas": (lambda: flowsim.Vegas(double_gaussian, 4),
              dict(GRID, n_iters=3, jit_compile=False)),
    "vegasplus": (lambda: flowsim.VegasPlus(double_gaussian, 4),
                  dict(GRID, n_iters=3, jit_compile=False)),
    "path": (lambda: PathSimulation(Heston(100.0, 0.03, 0.04, 1.5, 0.04, 0.3, -0.7),
                                    EuropeanCall(100.0, 1.0), n_steps=12),
             {"n_events": 12_000, "block_size": 1024, "events_limit": 3072, "seed": 7,
              "n_iters": 2}),
    "sweep": (_sweep, {"sweep": True}),
    "resume": (lambda: flowsim.Plain(double_gaussian, 4), dict(GRID, n_iters=3, resume=True)),
    "error": (lambda: Broken(double_gaussian, 4), dict(GRID, n_iters=1)),
    "tf_error": (lambda: flowsim.Plain(asserting_integrand, 4),
                 dict(GRID, n_iters=1, jit_compile=False, message="integrand out of range")),
}


def _plugged_cases():
    """Cases from ``tests/cases_*.py`` (markets, environments...)."""
    found = {}
    for path in sorted(glob.glob(os.path.join(HERE, "cases_*.py"))):
        module = importlib.import_module(os.path.basename(path)[:-3])
        for name, spec in module.CASES.items():
            spec = dict(spec)
            mod, _, func = spec.pop("factory").partition(":")
            factory = getattr(importlib.import_module(mod), func)
            # a seed for every case: without one each Flow would draw its own
            found[name] = (factory, dict({"seed": 2024, "n_iters": 1}, **spec))
    return found


#: Cases from tests/cases_*.py.  Their kernels are long loops that take up to a
#: minute to compile per device, so they run on one configuration of each backend
#: (threads: 2 logical CPUs, weighted; MPI: 2 ranks; Spark; joblib on loky), the
#: core cases above on all of them.
PLUGGED = _plugged_cases()
CORE = tuple(CASES)
CASES.update(PLUGGED)


def hexbits(x):
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

    def __init__(self):
        self.sims = {}

    def fresh(self, name):
        if name not in self.sims:
            self.sims[name] = CASES[name][0]()
            self.sims[name].trace_key()
        return pickle.loads(pickle.dumps(self.sims[name]))


def run_case(name, make_flow, prototypes, tmpdir, label="flow"):
    """Summary of case ``name`` on the Flow ``make_flow(sim, **settings)`` builds
    (``tmpdir`` must be new for each ``label``: checkpoints go there)."""
    _, spec = CASES[name]
    spec = dict(spec)
    spec.pop("message", None)
    sim = prototypes.fresh(name)
    try:
        if spec.pop("sweep", False):
            flow = make_flow(sim, n_events=sim.n_rows, seed=0, block_size=sim.block_rows,
                             events_limit=4 * sim.block_rows)
            outputs = run_sweep(flow)
            return {"outputs": {k: hexbits(v) for k, v in sorted(outputs.items())},
                    "timeline_faults": coverage_faults(flow.timeline, flow.grid.n_blocks)}
        n_iters, resume = spec.pop("n_iters"), spec.pop("resume", False)
        if resume:
            path = os.path.join(tmpdir, f"{name}-{label}.ckpt.npz")
            make_flow(sim, **spec).run(n_iters - 1, checkpoint=path)
            sim = prototypes.fresh(name)
            flow = make_flow(sim, **spec)
            return summary(flow.run(n_iters, checkpoint=path), sim, flow)
        flow = make_flow(sim, **spec)
        return summary(flow.run(n_iters), sim, flow)
    except Exception as exc:
        return {"raised": type(exc).__name__, "message": str(exc)}


def run_all(make_flow, tmpdir, names=None):
    prototypes = Prototypes()
    return {name: run_case(name, make_flow, prototypes, tmpdir) for name in (names or CASES)}


def compare(got, want, label, names=None):
    """Differences between a backend's summaries and Flow's for cases ``names``
    (default: every case of ``want``), as readable lines."""
    problems = []
    for name in names or want:
        ref = want[name]
        mine = got.get(name)
        if mine is None:
            problems.append(f"{label} {name}: no result")
            continue
        if "raised" in ref:
            phrase = CASES[name][1].get("message", ref["message"])
            if mine.get("raised") != ref["raised"] or phrase not in mine.get("message", ""):
                problems.append(f"{label} {name}: raised {mine.get('raised')}: "
                                f"{mine.get('message', '')[:300]!r}, want {ref['raised']}: "
                                f"{ref['message'][:300]!r}")
            continue
        if "raised" in mine:
            problems.append(f"{label} {name}: raised {mine['raised']}: {mine['message'][:2000]}")
            continue
        for key in ref:
            if mine.get(key) != ref[key]:
                problems.append(f"{label} {name}: {key} differs from Flow")
        if mine.get("timeline_faults"):
            problems.append(f"{label} {name}: timeline misses or repeats blocks in iterations "
                            f"{mine['timeline_faults']}")
    return problems


def _threads(n, out):
    flowsim.set_virtual_cpus(n)
    from flowsim.distribution import ScheduledFlow, ThreadPoolFlow
    from flowsim.schedule.policies import POLICIES
    results, prototypes = {"devices": flowsim.logical_devices()}, Prototypes()

    def flow_of(cls, **options):
        return lambda sim, **kw: cls(sim, quiet=True, **options, **kw)

    flows = {s: flow_of(ThreadPoolFlow, schedule=s) for s in POLICIES}
    flows["dynamic,chunk=3"] = flow_of(ScheduledFlow, schedule="dynamic", chunk=3)
    for label, make_flow in flows.items():
        names = CASES if (n, label) == (2, "weighted") else CORE
        results[label] = {name: run_case(name, make_flow, prototypes, out, f"threads{n}-{label}")
                          for name in names}
    with open(os.path.join(out, f"threads{n}.json"), "w") as fh:
        json.dump(results, fh)


def _mpi(out):
    from flowsim.distribution import MPIFlow
    schedule = {3: "weighted"}

    def make_flow(sim, **kw):
        return MPIFlow(sim, quiet=True, schedule=schedule.get(size), **kw)

    from mpi4py import MPI
    size, rank = MPI.COMM_WORLD.Get_size(), MPI.COMM_WORLD.Get_rank()
    results = {"size": size, "cases": run_all(make_flow, out, None if size == 2 else CORE)}
    with open(os.path.join(out, f"rank{rank}.json"), "w") as fh:
        json.dump(results, fh)


if __name__ == "__main__":
    if sys.argv[1] == "threads":
        _threads(int(sys.argv[2]), sys.argv[3])
    elif sys.argv[1] == "mpi":
        _mpi(sys.argv[2])
    else:
        raise SystemExit(f"usage: {sys.argv[0]} threads N OUT | mpi OUT")
