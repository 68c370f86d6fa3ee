"""ThreadPoolFlow against Flow on this machine (events/s ratios, same run).

Splits CPU:0 into 2 logical devices, then times, interleaved round by round so
that load from other processes hits every variant alike:

- ``Flow`` on CPU:0 (the anchor);
- ``ThreadPoolFlow`` on one device (CPU:0): its overhead over Flow
  (target: at most 5 %);
- ``ThreadPoolFlow`` on 2 logical CPU devices (target: not slower than Flow).

The integrand is the 8-dim double Gaussian of :mod:`flowsim.targets`, at
2*10^6 events per iteration (31 blocks: a chunk's overhead and the last
blocks' tail weigh most) and at 10^7 (the size of the MPI and Spark
benchmarks).  Every variant must give the same bits (checked).  Prints the median per-round ratio
and its spread, plus the ratio of process CPU time per event (less sensitive to
other processes' load than wall time: it shows the cost ThreadPoolFlow adds).
Usage::

    python benchmarks/threads.py [--events 2000000 10000000] [--rounds 9]
                                 [--schedule weighted] [--chunk N]
"""
import argparse
import resource
import statistics
import sys
import time

import flowsim

flowsim.set_virtual_cpus(2)

from flowsim.distribution import ThreadPoolFlow  # noqa: E402
from flowsim.targets import double_gaussian, double_gaussian_exact  # noqa: E402


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--events", type=int, nargs="+", default=[2_000_000, 10_000_000],
                   help="events per iteration; one table per value")
    p.add_argument("--iters", type=int, default=2, help="iterations per timed run")
    p.add_argument("--rounds", type=int, default=9)
    p.add_argument("--schedule", default=None, help="ThreadPoolFlow schedule (default weighted)")
    p.add_argument("--seed", type=int, default=11)
    p.add_argument("--chunk", type=int, default=None, help="ThreadPoolFlow chunk= (blocks)")
    args = p.parse_args(argv)
    return 0 if all([compare(args, events) for events in args.events]) else 1


def compare(args, events):
    """Time the three variants at ``events`` per iteration; True if their bits agree."""
    def sim():
        return flowsim.Plain(double_gaussian, 8)

    kw = {"seed": args.seed, "quiet": True}
    variants = {
        "Flow (CPU:0)": lambda: flowsim.Flow(sim(), events, device="CPU:0", **kw),
        "ThreadPoolFlow, 1 device": lambda: ThreadPoolFlow(
            sim(), events, devices=["CPU:0"], schedule=args.schedule, chunk=args.chunk, **kw),
        "ThreadPoolFlow, 2 logical CPUs": lambda: ThreadPoolFlow(
            sim(), events, devices=2, schedule=args.schedule, chunk=args.chunk, **kw),
    }
    # ThreadPoolFlow first: its thread settings apply only before TensorFlow starts,
    # and then hold for every variant alike.
    order = ["ThreadPoolFlow, 2 logical CPUs", "ThreadPoolFlow, 1 device", "Flow (CPU:0)"]
    made = {name: variants[name]() for name in order}
    flows = {name: made[name] for name in variants}
    intra, inter = made[order[0]].executor.thread_settings
    for flow in flows.values():        # trace on every device; learn speeds
        flow.run(1)
    rates = {name: [] for name in flows}
    cpu = {name: [] for name in flows}
    bits = {}
    for r in range(args.rounds):
        order = list(flows) if r % 2 == 0 else list(flows)[::-1]
        for name in order:
            ru0 = resource.getrusage(resource.RUSAGE_SELF)
            start = time.perf_counter()
            res = flows[name].run(args.iters)
            seconds = time.perf_counter() - start
            ru1 = resource.getrusage(resource.RUSAGE_SELF)
            rates[name].append(res.n_events / seconds)
            cpu[name].append((ru1.ru_utime + ru1.ru_stime - ru0.ru_utime - ru0.ru_stime)
                             / res.n_events)
            bits[name] = (res.value, [it["value"].tobytes() for it in res.iterations])
    same = len({tuple(b[1]) for b in bits.values()}) == 1
    anchor = "Flow (CPU:0)"
    print(f"8-dim double Gaussian, {events:,} events x {args.iters} iterations, "
          f"{args.rounds} interleaved rounds; exact {double_gaussian_exact(8):.6f}, "
          f"value {bits[anchor][0]:.6f}; same bits on every variant: {same}; "
          f"TF threads intra-op {intra}, inter-op {inter}")
    print(f"{'variant':<32} {'median ev/s':>12} {'ev/s ratio':>11} {'min..max':>15} "
          f"{'CPU s/Mev':>10} {'CPU ratio':>10}")
    for name in flows:
        ratios = [a / b for a, b in zip(rates[name], rates[anchor])]
        cpu_ratio = statistics.median([a / b for a, b in zip(cpu[name], cpu[anchor])])
        print(f"{name:<32} {statistics.median(rates[name]):>12,.0f} "
              f"{statistics.median(ratios):>11.3f} {min(ratios):>7.3f}..{max(ratios):<6.3f} "
              f"{1e6 * statistics.median(cpu[name]):>10.3f} {cpu_ratio:>10.3f}")
    one = statistics.median([a / b for a, b in zip(rates["ThreadPoolFlow, 1 device"],
                                                      rates[anchor])])
    two = statistics.median([a / b for a, b in zip(rates["ThreadPoolFlow, 2 logical CPUs"],
                                                      rates[anchor])])
    print(f"overhead on one device: {100 * (1 / one - 1):+.1f} % (target <= 5 %); "
          f"2 logical CPUs vs Flow: x{two:.3f} (target >= 1)\n")
    return same


if __name__ == "__main__":
    sys.exit(main())
