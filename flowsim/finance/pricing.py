"""Monte Carlo pricing by path simulation: every path (or antithetic pair) is an event.

:class:`PathSimulation` is a :class:`flowsim.Simulation` whose ``dim`` is the
number of normals a path needs (``n_steps * model.factors``).  A block's normals
are the inverse normal CDF of its counter-based uniforms (:mod:`flowsim.core.rng`),
so they are a pure function of (seed, block): a price keeps its bits for any
``events_limit``, device count or backend.
"""
import math

import numpy as np

from ..core import rng
from ..core.fastmath import inverse_normal
from ..core.lazy_tf import tf
from ..core.simulation import Simulation
from ..core.sums import block_sum
from .models import GBM, Heston
from .payoffs import AsianCall, Payoff


class PathSimulation(Simulation):
    """Discounted payoff of ``model`` paths over ``n_steps`` steps to ``payoff.T``.

    Parameters
    ----------
    model : GBM or Heston
        The price dynamics.
    payoff : Payoff
        EuropeanCall, EuropeanPut, AsianCall, GeometricAsianCall or UpAndOutCall.
    n_steps : int
        Time steps per path (also the barrier monitoring dates).
    antithetic : bool
        Each event is the pair (z, -z): its value is the pair's mean, so the
        error stays honest (pairs are independent).  Default True.
    control : bool or None
        Use the control variate the model offers for the payoff (geometric-mean
        call for an AsianCall under GBM).  None (default): when available.

    The estimate is the mean over events with its standard error; with a
    control variate ``Y - beta (C - E[C])`` with ``beta = cov(Y, C) / var(C)``
    from the same iteration (bias O(1/n), negligible at pricing sizes).
    """

    def __init__(self, model, payoff, n_steps, antithetic=True, control=None):
        if not isinstance(model, (GBM, Heston)):
            raise TypeError(f"model must be flowsim.finance.GBM or Heston, got {model!r}")
        if not isinstance(payoff, Payoff):
            raise TypeError(f"payoff must be a flowsim.finance payoff (EuropeanCall, ...), "
                            f"got {payoff!r}")
        if isinstance(n_steps, bool) or not isinstance(n_steps, (int, np.integer)) or n_steps < 1:
            raise ValueError(f"n_steps must be a positive integer, got {n_steps!r}")
        if not isinstance(antithetic, bool):
            raise TypeError(f"antithetic must be True or False, got {antithetic!r}")
        n_steps = int(n_steps)
        payoff.check(n_steps)
        self.model, self.payoff, self.n_steps = model, payoff, n_steps
        self.antithetic = antithetic
        available = isinstance(payoff, AsianCall) and isinstance(model, GBM)
        if control and not available:
            raise ValueError(f"control=True: no control variate for {type(payoff).__name__} "
                             f"under {type(model).__name__}")
        self.control = available if control is None else bool(control)
        self.dim = n_steps * model.factors
        self._control_mean = (model.geometric_asian(payoff.K, payoff.T, payoff.n_fixings)
                              if self.control else None)

    def accumulators(self):
        acc = {"sum": (), "sum2": (), "nonfinite": ()}
        if self.control:
            acc.update({"csum": (), "csum2": (), "cross": ()})
        return acc

    def inputs(self, key, first_event, size, dtype, state):
        """Normals ``[n_steps, factors, size]``: inverse normal CDF of the block's uniforms.

        Uniforms ``k * 2**-53`` are moved to the cell midpoints ``(k + 1/2) * 2**-53``
        (2**-24 in float32) so they lie in (0, 1); :func:`inverse_normal` maps them.
        """
        t = tf()
        u = rng.uniform(key, [self.n_steps, self.model.factors, size], dtype)
        half = 2.0 ** -54 if dtype == t.float64 else 2.0 ** -25
        return inverse_normal(u + half)

    def _paths(self, z):
        """Discounted payoffs [lanes] (and the control's) of normals [n_steps, f, lanes]."""
        t = tf()
        lanes = int(z.shape[2])
        dtype = z.dtype
        dt = self.payoff.T / self.n_steps
        payoffs = [self.payoff] + ([self.payoff.control()] if self.control else [])
        state = self.model.initial(lanes, dtype)
        accs = tuple(p.initial(lanes, dtype) for p in payoffs)

        def body(i, state, accs):
            state = self.model.step(state, z[i], dt)
            x = self.model.log_spot(state)
            return i + 1, state, tuple(p.observe(a, x, i + 1, self.n_steps)
                                       for p, a in zip(payoffs, accs))

        _, state, accs = t.while_loop(lambda i, s, a: i < self.n_steps, body,
                                      [t.constant(0, t.int32), state, accs])
        x = self.model.log_spot(state)
        df = math.exp(-self.model.r * self.payoff.T)
        return [df * p.value(a, x) for p, a in zip(payoffs, accs)]

    def block(self, z, valid, state):
        t = tf()
        size = int(z.shape[2])
        if self.antithetic:
            values = [0.5 * (v[:size] + v[size:]) for v in self._paths(t.concat([z, -z], 2))]
        else:
            values = self._paths(z)
        values = [t.cast(v, t.float64) for v in values]
        finite = valid & t.math.is_finite(values[0])
        keep = [t.where(finite, v, t.zeros_like(v)) for v in values]
        y = keep[0]
        out = {"sum": block_sum(y), "sum2": block_sum(y * y),
               "nonfinite": block_sum(t.cast(valid & ~finite, t.float64))}
        if self.control:
            c = keep[1]
            out.update({"csum": block_sum(c), "csum2": block_sum(c * c),
                        "cross": block_sum(y * c)})
        return out

    def estimate(self, totals, n_events):
        if n_events < 2:        # one path says nothing about the spread
            value = float(totals["sum"]) if not self.control else float("nan")
            return {"value": value, "error": math.inf}
        n = float(n_events)
        mean = float(totals["sum"]) / n
        var = max(float(totals["sum2"]) / n - mean * mean, 0.0)
        if not self.control:
            return {"value": mean, "error": math.sqrt(var / (n - 1))}
        cmean = float(totals["csum"]) / n
        cvar = max(float(totals["csum2"]) / n - cmean * cmean, 0.0)
        cov = float(totals["cross"]) / n - mean * cmean
        beta = cov / cvar if cvar > 0 else 0.0
        value = mean - beta * (cmean - self._control_mean)
        resid = max(var - 2 * beta * cov + beta * beta * cvar, 0.0)
        return {"value": value, "error": math.sqrt(resid / (n - 1)),
                "plain_value": mean, "plain_error": math.sqrt(var / (n - 1)),
                "beta": beta}

    def trace_key(self):
        """The settings the kernel depends on: equal ones share a compilation."""
        return (self.model, self.payoff, self.n_steps, self.antithetic, self.control)

    def config(self):
        from ..core.fingerprint import digest
        return {"class": "PathSimulation", "model": repr(self.model),
                "payoff": repr(self.payoff), "n_steps": self.n_steps,
                "antithetic": self.antithetic, "control": self.control,
                "kernel": {"code": digest((type(self.model), type(self.payoff)))}}


def _simulation(model, payoff, n_steps, antithetic, control):
    # repeated prices of equal settings share one compilation (trace_key)
    return PathSimulation(model, payoff, n_steps, antithetic=antithetic, control=control)


def default_block_size(n_events, dim, lanes_per_event=2, budget=1 << 21):
    """Events per block: even blocks with at most ``budget`` normals in flight."""
    from ..core.blocks import BLOCK_QUANTUM
    from ..core.blocks import default_block_size as even
    cap = max(BLOCK_QUANTUM, budget // (dim * lanes_per_event) // BLOCK_QUANTUM * BLOCK_QUANTUM)
    return even(n_events, max_block=cap)


def price(model, payoff, n_paths, n_steps, seed=None, antithetic=True, backend=None,
          control=None, **flow_kwargs):
    """Monte Carlo price of ``payoff`` under ``model``; returns a :class:`flowsim.Result`.

    Parameters
    ----------
    model : GBM or Heston
        Risk-neutral dynamics; ``model.r`` discounts.
    payoff : EuropeanCall, EuropeanPut, AsianCall, GeometricAsianCall or UpAndOutCall
        What is priced, with its expiry ``T``.
    n_paths : int
        Paths simulated.  With ``antithetic`` they come in pairs (must be even)
        and each pair is one event of the block grid.
    n_steps : int
        Time steps per path from 0 to ``T`` (barrier monitoring dates; a multiple
        of an Asian payoff's ``n_fixings``).  GBM steps are exact; Heston's QE-M
        bias shrinks with more steps.
    seed : int or None
        Same seed, same bits on every backend and for every ``events_limit``.
        None draws one (reported in ``Result.meta["seed"]``).
    antithetic : bool
        Antithetic pairs (z, -z) (default True).
    backend : None or str
        ``None`` (one device), ``"threads"``, ``"mpi"`` or ``"spark"``.
    control : bool or None
        Control variate where one pays (geometric Asian for AsianCall under GBM;
        default None = use it when available).  The plain estimate is kept in
        ``Result.iterations[0]["plain_value"]`` / ``["plain_error"]``.
    **flow_kwargs
        Passed to the Flow: ``events_limit``, ``device``, ``dtype``,
        ``block_size`` (part of the random stream; default keeps ~2M normals per
        block), ``jit_compile`` (default True: XLA fuses the time loop), ``rng``.

    ``Result.value`` is the price, ``Result.error`` its standard error.
    """
    from ..core.blocks import check_count
    from ..distribution.registry import flow_class
    n_paths = check_count("n_paths", n_paths)
    if antithetic is True and n_paths % 2:
        raise ValueError(f"n_paths must be even with antithetic=True (paths come in "
                         f"pairs), got {n_paths}")
    sim = _simulation(model, payoff, n_steps, antithetic, control)
    n_events = n_paths // 2 if antithetic else n_paths
    if flow_kwargs.get("block_size") is None:
        flow_kwargs["block_size"] = default_block_size(n_events, sim.dim,
                                                       2 if antithetic else 1)
    flow = flow_class(backend)(sim, n_events=n_events, seed=seed, quiet=True, **flow_kwargs)
    result = flow.run(1)
    result.meta.update({"n_paths": n_paths, "n_steps": sim.n_steps,
                        "antithetic": antithetic, "control": sim.control})
    return result
