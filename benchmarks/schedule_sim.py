"""Device-free discrete-event simulation of the schedules of :mod:`flowsim.schedule`.

For each case (device speeds in blocks per unit time, a GPU = 1), every policy
runs several iterations of ``--blocks`` blocks with a per-chunk overhead (launch,
copy, Python; in units of one GPU block).  ``weighted`` learns the speeds from
probe chunks in iteration 1 and carries them over (no prior knowledge);
``static+weights`` is static with the true speeds as weights (an oracle).
Printed per policy: chunks, makespan of iteration 1 and the mean of the later
ones, its ratio to the ideal, and load-balance efficiency (busy time /
(devices x makespan)) of the later iterations.  Ideal makespan = total work /
total speed + one overhead (perfectly divisible work).

    python benchmarks/schedule_sim.py [--blocks 1536] [--overhead 0.5] [--iterations 5]

``--check`` exits 1 unless weighted is within 5 % of ideal on the unequal cases
and guided within 5 % on 8 equal devices.
"""
import argparse
import statistics
import sys

from flowsim.schedule import efficiency, makespan, simulate

CPU = 1 / 50
CASES = {
    "8 equal GPUs": [1.0] * 8,
    "8 GPUs + CPU:0 (1/50)": [1.0] * 8 + [CPU],
    "GPUs 1,1,0.6,0.6 + CPU:0 (1/50)": [1.0, 1.0, 0.6, 0.6, CPU],
}


def policies(dynamic_chunk):
    return [("static", {}), ("static+weights", {"weights": True}),
            (f"dynamic,{dynamic_chunk}", {"chunk": dynamic_chunk}),
            ("guided", {}), ("weighted", {})]


def run_case(speeds, blocks, overhead, iterations, dynamic_chunk, max_chunk):
    ideal = blocks / sum(speeds) + overhead
    rows = []
    for label, opts in policies(dynamic_chunk):
        policy = label.split(",")[0].split("+")[0]
        weights = speeds if opts.get("weights") else None
        runs = simulate(blocks, speeds, policy, chunk=opts.get("chunk"), max_chunk=max_chunk,
                        overhead=overhead, iterations=iterations, known=False, weights=weights)
        later = runs[1:] or runs
        span = statistics.mean(makespan(r) for r in later)
        rows.append({"policy": label, "chunks": len(later[-1]), "first": makespan(runs[0]),
                     "makespan": span, "ratio": span / ideal,
                     "efficiency": statistics.mean(efficiency(r, len(speeds)) for r in later)})
    return ideal, rows


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--blocks", type=int, default=1536, help="blocks per iteration "
                   "(1536 = 10^8 events in blocks of 65,536)")
    p.add_argument("--overhead", type=float, default=0.5, help="per-chunk overhead, in GPU blocks")
    p.add_argument("--iterations", type=int, default=5)
    p.add_argument("--dynamic-chunk", type=int, default=15,
                   help="dynamic's chunk (15 blocks ~ VegasFlow's 10^6-event chunks)")
    p.add_argument("--max-chunk", type=int, default=None, help="events_limit in blocks")
    p.add_argument("--check", action="store_true")
    args = p.parse_args(argv)
    ok = True
    print(f"{args.blocks} blocks per iteration, per-chunk overhead {args.overhead} GPU-block, "
          f"{args.iterations} iterations; makespan in GPU-block times")
    for name, speeds in CASES.items():
        ideal, rows = run_case(speeds, args.blocks, args.overhead, args.iterations,
                               args.dynamic_chunk, args.max_chunk)
        print(f"\n{name}: ideal makespan {ideal:.1f}")
        print(f"  {'policy':<16} {'chunks':>6} {'iter 1':>9} {'later':>9} {'/ideal':>8} "
              f"{'efficiency':>10}")
        for r in rows:
            print(f"  {r['policy']:<16} {r['chunks']:>6} {r['first']:>9.1f} {r['makespan']:>9.1f} "
                  f"{r['ratio']:>8.3f} {r['efficiency']:>10.3f}")
        by = {r["policy"]: r for r in rows}
        if CPU in speeds or len(set(speeds)) > 1:
            ok &= by["weighted"]["ratio"] <= 1.05 and by["weighted"]["first"] / ideal <= 1.05
        else:
            ok &= by["guided"]["ratio"] <= 1.05
    print(f"\nweighted within 5% of ideal on the unequal cases and guided on equal GPUs: {ok}")
    return 0 if ok or not args.check else 1


if __name__ == "__main__":
    sys.exit(main())
