"""JoblibFlow on loky worker processes against Flow in this process (events/s, same run).

Plain on the 8-dim double Gaussian of :mod:`flowsim.targets`, 10^7 events per
iteration by default.  Each variant runs one warm-up iteration first (loky
starts its workers and each compiles its kernel once), then the variants are
timed in interleaved rounds so that load from other processes hits both
alike.  Both must give the same bits (checked).  Prints the median per-round
ratio JoblibFlow / Flow of events per second and its spread.

On 2 cores the two loky workers and Flow's own TensorFlow pool compete for
the same cores: the figure shows what the process boundary costs, not a
speed-up.  JoblibFlow pays off where joblib reaches more cores than one
process has (a Dask cluster).

Usage::

    python benchmarks/joblib_loky.py [--events 10000000] [--jobs 2] [--rounds 5]
"""
import argparse
import statistics
import sys
import time

import flowsim
from flowsim.distribution import JoblibFlow
from flowsim.targets import double_gaussian


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--events", type=int, default=10_000_000, help="events per iteration")
    p.add_argument("--jobs", type=int, default=2, help="loky worker processes")
    p.add_argument("--iters", type=int, default=2, help="iterations per timed run")
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--seed", type=int, default=11)
    args = p.parse_args(argv)

    kw = {"seed": args.seed, "quiet": True}
    flows = {"Flow": flowsim.Flow(flowsim.Plain(double_gaussian, 8), args.events, **kw),
             f"JoblibFlow loky x{args.jobs}": JoblibFlow(flowsim.Plain(double_gaussian, 8),
                                                         args.events, n_jobs=args.jobs, **kw)}
    for flow in flows.values():                   # start workers, compile kernels
        flow.run(1)
    rates = {name: [] for name in flows}
    bits = {}
    for r in range(args.rounds):
        for name in (list(flows) if r % 2 == 0 else list(flows)[::-1]):
            start = time.perf_counter()
            res = flows[name].run(args.iters)
            rates[name].append(args.iters * args.events / (time.perf_counter() - start))
            bits.setdefault(name, []).append(
                [(float(x["value"]).hex(), float(x["error"]).hex()) for x in res.iterations])
    same = len({repr(b) for b in bits.values()}) == 1
    flow_name, joblib_name = list(flows)
    ratios = [j / f for j, f in zip(rates[joblib_name], rates[flow_name])]
    print(f"{args.events:.0e} events/iteration, {args.iters} iterations per run, "
          f"{args.rounds} rounds")
    for name, values in rates.items():
        print(f"  {name:<22} {statistics.median(values) / 1e6:8.2f} M events/s (median)")
    print(f"  ratio {joblib_name} / Flow: median {statistics.median(ratios):.2f} "
          f"(range {min(ratios):.2f}-{max(ratios):.2f})")
    print(f"  same bits: {same}")
    for flow in flows.values():
        flow.close()
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())
