"""Payoffs for path simulation: European, Asian (arithmetic, geometric), up-and-out.

A payoff watches the simulated log-price after every time step (``observe``)
and gives the undiscounted value at expiry (``value``).  All are frozen
dataclasses (hashable, picklable).  Time steps are ``T / n_steps`` apart; the
payoff's dates must fall on that grid (Asian fixings: ``n_steps`` a multiple of
``n_fixings``).
"""
import math
from dataclasses import dataclass

from ..core.lazy_tf import tf
from .models import POSITIVE, check_fields


def _positive_int(name, value):
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"{name} must be a positive integer, got {value!r}")
    return value


class Payoff:
    """Base class: ``K`` strike, ``T`` expiry in years."""

    def check(self, n_steps):
        """Raise if the payoff's dates do not fall on a grid of ``n_steps`` steps."""

    def initial(self, lanes, dtype):
        return ()

    def observe(self, acc, x, step, n_steps):
        """``acc`` after seeing log-price ``x`` [lanes] at step ``step`` (1-based)."""
        return acc

    def value(self, acc, x):
        """Undiscounted payoff per lane from ``acc`` and the final log-price ``x``."""
        raise NotImplementedError


@dataclass(frozen=True)
class _Struck(Payoff):
    """Payoffs with fields strike ``K`` and expiry ``T`` (both > 0)."""

    K: float
    T: float

    def __post_init__(self):
        check_fields(self, K=POSITIVE, T=POSITIVE)


@dataclass(frozen=True)
class EuropeanCall(_Struck):
    """``max(S_T - K, 0)`` at expiry ``T`` (years)."""

    def value(self, acc, x):
        t = tf()
        return t.maximum(t.exp(x) - self.K, 0)


@dataclass(frozen=True)
class EuropeanPut(_Struck):
    """``max(K - S_T, 0)`` at expiry ``T`` (years)."""

    def value(self, acc, x):
        t = tf()
        return t.maximum(self.K - t.exp(x), 0)


@dataclass(frozen=True)
class _Fixings(_Struck):
    """Payoffs on ``n_fixings`` equally spaced fixings up to ``T``."""

    n_fixings: int

    def __post_init__(self):
        super().__post_init__()
        _positive_int("n_fixings", self.n_fixings)

    def check(self, n_steps):
        if n_steps % self.n_fixings:
            raise ValueError(f"n_steps ({n_steps}) must be a multiple of n_fixings "
                             f"({self.n_fixings}) so every fixing falls on a time step")

    def initial(self, lanes, dtype):
        return (tf().zeros([lanes], dtype),)

    def observe(self, acc, x, step, n_steps):
        t = tf()
        every = n_steps // self.n_fixings
        fix = t.equal(step % every, 0)
        (total,) = acc
        return (t.cond(fix, lambda: total + self._term(x), lambda: total),)


@dataclass(frozen=True)
class AsianCall(_Fixings):
    """Call on the arithmetic mean of ``S(k T / n_fixings)``, k = 1..n_fixings.

    Under :class:`~flowsim.finance.GBM`, :func:`~flowsim.finance.price` uses the
    geometric-mean call on the same fixings (closed form) as a control variate,
    which cuts the error several-fold; under other models it prices plainly.
    """

    @staticmethod
    def _term(x):
        return tf().exp(x)

    def value(self, acc, x):
        t = tf()
        return t.maximum(acc[0] / self.n_fixings - self.K, 0)

    def control(self):
        """The payoff used as control variate (the geometric-mean call)."""
        return GeometricAsianCall(self.K, self.T, self.n_fixings)


@dataclass(frozen=True)
class GeometricAsianCall(_Fixings):
    """Call on the geometric mean of ``S(k T / n_fixings)``, k = 1..n_fixings.

    Closed form under GBM (:meth:`flowsim.finance.GBM.geometric_asian`): the
    control variate of :class:`AsianCall` and a test of the path machinery.
    """

    @staticmethod
    def _term(x):
        return x

    def value(self, acc, x):
        t = tf()
        return t.maximum(t.exp(acc[0] / self.n_fixings) - self.K, 0)


@dataclass(frozen=True)
class UpAndOutCall(Payoff):
    """``max(S_T - K, 0)`` unless ``S >= barrier`` at a monitoring date.

    Discrete monitoring: the spot is checked after every time step of the
    simulation (``n_steps`` dates, ``T / n_steps`` apart, expiry included; not
    at t = 0).  More steps means more monitoring dates, hence a lower price
    approaching the continuously monitored one.
    """

    K: float
    barrier: float
    T: float

    def __post_init__(self):
        check_fields(self, K=POSITIVE, T=POSITIVE, barrier=POSITIVE)

    def initial(self, lanes, dtype):
        return (tf().ones([lanes], dtype),)

    def observe(self, acc, x, step, n_steps):
        t = tf()
        (alive,) = acc
        return (t.where(x < math.log(self.barrier), alive, t.zeros_like(alive)),)

    def value(self, acc, x):
        t = tf()
        return acc[0] * t.maximum(t.exp(x) - self.K, 0)
