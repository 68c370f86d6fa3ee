"""The backend conformance cases for flowsim's own suite: the shipped ones
(:mod:`flowsim.testing.conformance`) plus any ``tests/cases_*.py``.

``tests/test_conformance.py`` compares each backend's summaries with
:class:`flowsim.Flow`'s, key by key.  Run as a script it serves the backends
that need their own processes::

    python tests/conformance.py threads N OUT      # N logical CPUs, every schedule
    mpirun -n K python tests/conformance.py mpi OUT

and writes ``OUT/<label>.json`` (MPI: one file per rank, written last, so a
missing file means that rank did not finish).

More cases plug in from ``tests/cases_*.py``: ``CASES = {name: {"factory":
"module:function", "n_events": int, "n_iters": int, ...}}`` where ``factory()``
returns a Simulation (optional keys: ``block_size``, ``events_limit``, ``seed``
(default 2024), ``n_iters`` (default 1)); :func:`flowsim.testing.cases_from`
reads them.
"""
import glob
import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
if HERE not in sys.path:
    sys.path.insert(0, HERE)

import flowsim  # noqa: E402
from flowsim.testing import conformance as shipped  # noqa: E402

ERROR_TEXT = shipped.ERROR_TEXT
#: The shipped cases plus tests/cases_*.py.
CASES = dict(shipped.CASES)
for _path in sorted(glob.glob(os.path.join(HERE, "cases_*.py"))):
    CASES.update(shipped.cases_from(os.path.basename(_path)[:-3]))
#: The core cases (Plain, Vegas, ... errors) run on every configuration of every
#: backend; the workloads' cases (their kernels are long loops that take up to a
#: minute to compile per device) on one configuration of each (threads: 2 logical
#: CPUs, weighted; MPI: 2 ranks; Spark; joblib on loky).
CORE = shipped.CORE
PLUGGED = {k: v for k, v in CASES.items() if k not in CORE}


def prototypes():
    return shipped.prototypes_of(CASES)


def run_case(name, make_flow, protos, tmpdir, label="flow"):
    return shipped.run_case(name, make_flow, protos, tmpdir, label)


def run_all(make_flow, tmpdir, names=None):
    return shipped.run_all(make_flow, tmpdir, names, CASES)


def compare(got, want, label, names=None):
    return shipped.compare(got, want, label, names, CASES)


def _threads(n, out):
    flowsim.set_virtual_cpus(n)
    from flowsim.distribution import ScheduledFlow, ThreadPoolFlow
    from flowsim.schedule.policies import POLICIES
    results, protos = {"devices": flowsim.logical_devices()}, prototypes()

    def flow_of(make, **options):
        return lambda sim, **kw: make(sim, quiet=True, **options, **kw)

    flows = {s: flow_of(ThreadPoolFlow, schedule=s) for s in POLICIES}
    flows["dynamic,chunk=3"] = flow_of(ScheduledFlow, schedule="dynamic", chunk=3)
    for label, make_flow in flows.items():
        names = CASES if (n, label) == (2, "weighted") else CORE
        results[label] = {name: run_case(name, make_flow, protos, out, f"threads{n}-{label}")
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
