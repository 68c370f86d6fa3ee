"""Heston path simulation: flowsim.finance.price vs QuantLib's MCEuropeanHestonEngine.

Both price the same European call under the same Heston model with the same
scheme (Andersen's QE with martingale correction: QuantLib's default
``HestonProcess`` discretisation), 252 steps over one year, plain pseudo-random
paths (no antithetics, so paths = samples on both sides), each in a Python
process of its own.  Prints path-steps per second of each and the ratio (target
>= 5x), plus both prices against QuantLib's semi-analytic AnalyticHestonEngine.

    .venv/bin/python benchmarks/paths.py [--paths 100000] [--ql-paths 100000] [--steps 252]

flowsim is timed warm (a first run compiles the XLA kernel; its time is
printed separately).  QuantLib is single-threaded; flowsim uses what TF and XLA
use on the machine (compare ratios, not absolute rates: the machine may be shared).
Needs the ``bench`` extra (QuantLib).
"""
import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from _common import Timed, isolated  # noqa: E402

PARAMS = dict(s0=100.0, v0=0.04, kappa=1.5, theta=0.04, xi=0.5, rho=-0.7, r=0.03)
K, T = 100.0, 1.0


def quantlib(n_paths, n_steps, seed=42):
    """(price, error, seconds, CPU seconds, analytic price) from QuantLib."""
    import QuantLib as ql
    today = ql.Date(2, 1, 2025)
    ql.Settings.instance().evaluationDate = today
    dc = ql.Actual365Fixed()
    rts = ql.YieldTermStructureHandle(ql.FlatForward(today, PARAMS["r"], dc))
    qts = ql.YieldTermStructureHandle(ql.FlatForward(today, 0.0, dc))
    proc = ql.HestonProcess(rts, qts, ql.QuoteHandle(ql.SimpleQuote(PARAMS["s0"])),
                            PARAMS["v0"], PARAMS["kappa"], PARAMS["theta"], PARAMS["xi"],
                            PARAMS["rho"], ql.HestonProcess.QuadraticExponentialMartingale)
    expiry = today + 365                      # T = 1 year in Actual/365
    payoff = ql.PlainVanillaPayoff(ql.Option.Call, K)
    option = ql.VanillaOption(payoff, ql.EuropeanExercise(expiry))
    option.setPricingEngine(ql.MCEuropeanHestonEngine(
        proc, "pseudorandom", timeSteps=n_steps, requiredSamples=n_paths, seed=seed,
        antitheticVariate=False))
    with Timed() as tm:
        value = option.NPV()
    exact = ql.VanillaOption(payoff, ql.EuropeanExercise(expiry))
    exact.setPricingEngine(ql.AnalyticHestonEngine(ql.HestonModel(proc)))
    return value, option.errorEstimate(), tm.wall, tm.cpu, exact.NPV()


def flowsim_price(n_paths, n_steps, seed):
    from flowsim.finance import EuropeanCall, Heston, price
    with Timed() as tm:
        result = price(Heston(**PARAMS), EuropeanCall(K, T), n_paths, n_steps, seed=seed,
                       antithetic=False)
    return result, tm.wall, tm.cpu


def flowsim_runs(n_paths, n_steps, repeat):
    """(first run's seconds, best warm seconds, its CPU seconds, value, error)."""
    _, cold, _ = flowsim_price(n_paths, n_steps, seed=1)
    runs = [flowsim_price(n_paths, n_steps, seed=2 + i) for i in range(repeat)]
    result, wall, cpu = min(runs, key=lambda r: r[1])
    return cold, wall, cpu, float(result.value), float(result.error)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--paths", type=int, default=100_000, help="flowsim paths")
    p.add_argument("--ql-paths", type=int, default=100_000, help="QuantLib paths")
    p.add_argument("--steps", type=int, default=252)
    p.add_argument("--repeat", type=int, default=3, help="warm flowsim runs (best kept)")
    args = p.parse_args(argv)

    cold, ours, ours_cpu, value, error = isolated("paths", "flowsim_runs", args.paths,
                                                  args.steps, args.repeat)
    q_value, q_error, q_seconds, q_cpu, exact = isolated("paths", "quantlib", args.ql_paths,
                                                         args.steps)
    ours_rate = args.paths * args.steps / ours
    q_rate = args.ql_paths * args.steps / q_seconds
    print(f"Heston QE-M, {args.steps} steps, European call K={K:g} T={T:g}; "
          f"semi-analytic {exact:.5f}")
    print(f"  flowsim  {args.paths:>9,} paths  {value:.5f} +/- {error:.5f}  "
          f"{ours:7.3f} s warm ({cold:.1f} s first run, with compile)  "
          f"{ours_rate / 1e6:8.2f} M path-steps/s")
    print(f"  QuantLib {args.ql_paths:>9,} paths  {q_value:.5f} +/- {q_error:.5f}  "
          f"{q_seconds:7.3f} s                              "
          f"{q_rate / 1e6:8.2f} M path-steps/s")
    ratio = ours_rate / q_rate
    cpu_ratio = (args.paths / ours_cpu) / (args.ql_paths / q_cpu)
    print(f"  ratio flowsim / QuantLib: {ratio:.1f}x wall (target >= 5x); "
          f"{cpu_ratio:.1f}x per CPU second (flowsim {ours_cpu:.2f} s, QuantLib {q_cpu:.2f} s "
          f"of CPU: robust to other load on the machine)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
