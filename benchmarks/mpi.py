"""MPIFlow scaling: 2 ranks x 1 TF thread vs 1 rank x 1 TF thread.

    python benchmarks/mpi.py [--events 10000000] [--iters 6] [--repeat 3] [--no-run-ahead]

Launches ``mpirun -n 1`` and ``mpirun -n 2`` (the ``mpirun`` next to this
python, as installed by ``pip install 'flowsim[mpi]'``) on this very script
with ``--worker``: plain Monte Carlo of the 8-dim double Gaussian, 10^7 events
per iteration, every rank limited to one TensorFlow thread.  Each job first runs
one iteration to compile, then times ``--iters`` iterations (allgather of the
rows included).  The jobs alternate ``--repeat`` times and the best events/s of
each side is kept, since the machine is shared; the median of the ratios of each
2-rank job to the 1-rank job just before it is printed too.  A rank that ends
its share early works ahead on the next iteration (``run_ahead``, the default;
``--no-run-ahead`` to compare).  Prints events/s of both and
their ratio (ideal 2.0 on two free cores), the cores each job actually kept
busy (CPU seconds of its ranks / wall time) and the ratio per busy core, and
checks that both gave the same bits.
"""
import argparse
import json
import os
import resource
import statistics
import subprocess
import sys

MPIRUN = os.path.join(os.path.dirname(sys.executable), "mpirun")
#: Open MPI 5: allow root (containers) and more ranks than cores.
MPI_ENV = {"OMPI_ALLOW_RUN_AS_ROOT": "1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1",
           "PRTE_MCA_rmaps_default_mapping_policy": ":oversubscribe"}
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def worker(args):
    import numpy as np

    import flowsim
    from flowsim.distribution import MPIFlow
    from flowsim.targets import double_gaussian

    sim = flowsim.Plain(double_gaussian, 8)
    flow = MPIFlow(sim, n_events=args.events, seed=11, threads=1, quiet=True,
                   schedule=args.schedule, run_ahead=not args.no_run_ahead)
    flow.run(1)                                          # compile
    before = resource.getrusage(resource.RUSAGE_SELF)
    result = flow.run(args.iters)
    after = resource.getrusage(resource.RUSAGE_SELF)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    cpus = flow.executor.comm.gather(cpu, root=0)
    if flow.is_root():
        print(json.dumps({"ranks": flow.executor.size, "threads": flow.executor.threads,
                          "events_per_second": result.events_per_second,
                          "wall": result.wall_time, "cores_used": sum(cpus) / result.wall_time,
                          "bits": np.asarray(result.value).tobytes().hex()}), flush=True)


def launch(n, args):
    cmd = [MPIRUN, "-n", str(n), sys.executable, os.path.abspath(__file__), "--worker",
           "--events", str(args.events), "--iters", str(args.iters), "--schedule", args.schedule]
    if args.no_run_ahead:
        cmd.append("--no-run-ahead")
    env = dict(os.environ, PYTHONPATH=ROOT, **MPI_ENV)
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=args.timeout, env=env)
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} failed:\n{proc.stderr[-3000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--events", type=int, default=10_000_000, help="events per iteration")
    p.add_argument("--iters", type=int, default=6, help="timed iterations per job")
    p.add_argument("--repeat", type=int, default=3, help="alternating jobs per side")
    p.add_argument("--schedule", default="static", help="MPIFlow schedule: static or weighted")
    p.add_argument("--no-run-ahead", action="store_true",
                   help="MPIFlow(run_ahead=False): early ranks wait idle for the others")
    p.add_argument("--timeout", type=float, default=900)
    p.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.worker:
        return worker(args)
    if not os.path.exists(MPIRUN):
        raise SystemExit(f"no {MPIRUN}: pip install 'flowsim[mpi]'")
    runs = {1: [], 2: []}
    for _ in range(args.repeat):
        for n in (1, 2):
            runs[n].append(launch(n, args))
            r = runs[n][-1]
            print(f"  {n} rank(s) x {r['threads']} thread: {r['events_per_second']:,.0f} "
                  f"events/s ({args.iters} x {args.events:,} events in {r['wall']:.2f} s, "
                  f"{r['cores_used']:.2f} cores busy)", flush=True)
    best = {n: max(runs[n], key=lambda r: r["events_per_second"]) for n in runs}
    cores = {n: best[n]["cores_used"] for n in runs}
    best = {n: best[n]["events_per_second"] for n in runs}
    bits = {r["bits"] for n in runs for r in runs[n]}
    print(f"MPIFlow ({args.schedule} schedule, run_ahead={not args.no_run_ahead}), plain MC, "
          f"8-dim double Gaussian, "
          f"{args.events:,} events/iteration")
    print(f"1 rank  x 1 TF thread: {best[1]:,.0f} events/s")
    print(f"2 ranks x 1 TF thread: {best[2]:,.0f} events/s")
    paired = sorted(b["events_per_second"] / a["events_per_second"]
                    for a, b in zip(runs[1], runs[2]))
    print(f"ratio: {best[2] / best[1]:.2f}x (target >= 1.8x); each 2-rank job over the 1-rank "
          f"job just before it: median {statistics.median(paired):.2f}x "
          f"({', '.join(f'{r:.2f}' for r in paired)})")
    print(f"per busy core: {best[2] / cores[2] / (best[1] / cores[1]):.2f}x "
          f"(2 ranks kept {cores[2]:.2f} cores busy, 1 rank {cores[1]:.2f})")
    if cores[2] < 1.6:
        print("note: the 2-rank job got less than 1.6 of the 2 cores (a busy machine; Linux "
              "shares CPU per session, so 2 ranks get no more than 1): the wall ratio then "
              "measures the scheduler, not MPIFlow")
    print(f"same bits on 1 and 2 ranks: {len(bits) == 1}")


if __name__ == "__main__":
    main()
