"""The backend conformance runs for flowsim's own suite, over the shipped cases
(:mod:`flowsim.testing.conformance`: the core ones and the workloads').

``tests/test_conformance.py`` compares each backend's summaries with
:class:`flowsim.Flow`'s, key by key.  Run as a script it serves the backends
that need their own processes::

    python tests/helpers/conformance.py threads OUT    # 4 logical CPUs; on 1, 2, 4 of them
    mpirun -n K python tests/helpers/conformance.py mpi OUT

and writes ``OUT/threads.json`` (MPI: ``OUT/rank<r>.json``, one file per rank,
written last, so a missing file means that rank did not finish).
"""
import json
import os
import sys

import flowsim
from flowsim.testing import conformance as shipped

ERROR_TEXT = shipped.ERROR_TEXT
#: Every shipped case.
CASES = shipped.CASES
#: Each shipped workload module's case names.
BY_MODULE = {module: list(shipped.cases_from(module)) for module in shipped.SHIPPED}
#: The core cases (Plain, Vegas, ... errors) run on every configuration of every
#: backend.
CORE = shipped.CORE
#: The workloads' cases every backend runs besides CORE (on one configuration: MPI on 2
#: ranks, Spark, joblib on loky): every kind of Simulation the workloads bring (a
#: market ensemble, a Rollout, a PortfolioRollout sweep keeping per-episode values, a
#: strategy sweep, a VEGAS+ scan with components, a complex integrand), so that every
#: backend ships, runs and gathers each kind; and the first case of a module that
#: has none of these.  Their kernels are long loops that take up to a minute to
#: compile per device: the other workload cases (the same Simulation classes on other
#: settings) run on threads (2 logical CPUs, weighted schedule), which runs them all.
SAMPLE = tuple(n for n in ("markets_small", "rollout_coin", "portfolio_sweep",
                           "finance_rsi_sweep", "physics_scan_vegasplus",
                           "physics_complex_plain") if n in CASES)
SAMPLE += tuple(dict.fromkeys(names[0] for names in BY_MODULE.values()
                              if names and not set(names) & set(SAMPLE)))
#: CORE and SAMPLE.
CHECKED = CORE + tuple(n for n in SAMPLE if n not in CORE)


def prototypes():
    return shipped.prototypes_of(CASES)


def run_case(name, make_flow, protos, tmpdir, label="flow"):
    return shipped.run_case(name, make_flow, protos, tmpdir, label)


def run_all(make_flow, tmpdir, names=None):
    return shipped.run_all(make_flow, tmpdir, names, CASES)


def compare(got, want, label, names=None):
    return shipped.compare(got, want, label, names, CASES)


#: Logical CPUs of the threads process, and the device counts checked on them.
VIRTUAL_CPUS, DEVICE_COUNTS = 4, (1, 2, 4)


def _threads(out):
    """ThreadPoolFlow / ScheduledFlow on the first 1, 2 and 4 of 4 logical CPUs in one
    process (each kernel compiles once per device, whatever the count)."""
    flowsim.set_virtual_cpus(VIRTUAL_CPUS)
    from flowsim.distribution import ScheduledFlow, ThreadPoolFlow
    from flowsim.schedule.policies import POLICIES
    protos = prototypes()
    results = {"devices": flowsim.logical_devices()}

    def flow_of(make, n, **options):
        def make_flow(sim, **kw):
            flow = make(sim, quiet=True, devices=n, **options, **kw)
            used.setdefault(n, flow.executor.devices())
            return flow
        return make_flow

    used = {}
    for n in DEVICE_COUNTS:
        flows = {s: flow_of(ThreadPoolFlow, n, schedule=s) for s in POLICIES}
        flows["dynamic,chunk=3"] = flow_of(ScheduledFlow, n, schedule="dynamic", chunk=3)
        results[n] = {}
        for label, make_flow in flows.items():
            names = CASES if (n, label) == (2, "weighted") else CORE
            results[n][label] = {name: run_case(name, make_flow, protos, out,
                                                f"threads{n}-{label}") for name in names}
        results[n]["devices"] = used[n]
    from flowsim.distribution.threads import ThreadExecutor
    results["mixed"] = {n: shipped.mixed_device_types(lambda n=n: ThreadExecutor(devices=n),
                                                      CASES, tmpdir=out)
                        for n in DEVICE_COUNTS}
    with open(os.path.join(out, "threads.json"), "w") as fh:
        json.dump(results, fh)


def _mpi(out):
    from flowsim.distribution import MPIFlow
    schedule = {3: "weighted"}

    def make_flow(sim, **kw):
        return MPIFlow(sim, quiet=True, schedule=schedule.get(size), **kw)

    from mpi4py import MPI
    size, rank = MPI.COMM_WORLD.Get_size(), MPI.COMM_WORLD.Get_rank()
    results = {"size": size, "cases": run_all(make_flow, out, CHECKED if size == 2 else CORE)}
    with open(os.path.join(out, f"rank{rank}.json"), "w") as fh:
        json.dump(results, fh)


if __name__ == "__main__":
    if sys.argv[1] == "threads":
        _threads(sys.argv[2])
    elif sys.argv[1] == "mpi":
        _mpi(sys.argv[2])
    else:
        raise SystemExit(f"usage: {sys.argv[0]} threads OUT | mpi OUT")
