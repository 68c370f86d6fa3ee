"""Bundled example targets for ``flowsim run NAME`` and the benchmarks.

Each target is a function of keyword options returning a Simulation; integrands
here are module-level so they pickle (MPI, Spark).
"""
import math

from .core.lazy_tf import tf

#: Width of the double-Gaussian peaks (VegasFlow's and vegas's benchmark).
DOUBLE_GAUSSIAN_A = 0.1


def double_gaussian(x):
    """``½(a√π)^-d [exp(-Σ(x-¼)²/a²) + exp(-Σ(x-¾)²/a²)]``; integral ≈ 1 on the unit cube."""
    t = tf()
    a = tf().constant(DOUBLE_GAUSSIAN_A, x.dtype)
    d = x.shape[1]
    norm = t.constant(0.5 * (DOUBLE_GAUSSIAN_A * math.sqrt(math.pi)) ** (-d), x.dtype)
    e1 = t.reduce_sum(t.square(x - 0.25), axis=1)
    e2 = t.reduce_sum(t.square(x - 0.75), axis=1)
    return norm * (t.exp(-e1 / (a * a)) + t.exp(-e2 / (a * a)))


def double_gaussian_exact(dim, a=DOUBLE_GAUSSIAN_A):
    """Exact integral of :func:`double_gaussian` over the unit cube."""
    one = 0.5 * (math.erf(0.75 / a) + math.erf(0.25 / a))
    return one ** dim


def _sim(algorithm, f, dim, **options):
    from .algorithms.registry import algorithm_class
    return algorithm_class(algorithm)(f, dim, **options)


def gaussian8(algorithm="plain", dim=8, **options):
    """The flagship job: 8-dim double Gaussian (a = 0.1), exact value ≈ 1."""
    return _sim(algorithm, double_gaussian, dim, **options)


def backtest():
    """Moving-average crossover sweep over the bundled bars (a job: prints its table)."""
    from .finance.jobs import backtest as job
    return job()


def heston_call():
    """Heston European call by path simulation (a job; ``--events`` = paths)."""
    from .finance.jobs import heston_call as job
    return job()


def markets():
    """pams FCN market ensemble (a job; --config pams.json --markets N)."""
    from .markets.job import markets as job
    return job()


EXAMPLES = {"gaussian8": gaussian8, "backtest": backtest, "heston-call": heston_call,
            "markets": markets}
