"""Learned agents: a group whose orders come from a TensorFlow callable.

The case pams's ``TorchAgentParallelRunner`` exists for, stepped inside the same
compiled loop as the FCN groups: when an agent of a :class:`LearnedAgents` group is
chosen, its order comes from ``policy(features)``, evaluated for all markets of the
block at once with weights shared by every market and never written.
"""
import uuid

import numpy as np

from ..core.lazy_tf import tf
from .agents.fcn import FCN_PARAMS, FCNGroup, check_group
from .values import Dist


class LearnedAgents:
    """A group of ``n_agents`` agents acting through ``policy``.

    Parameters
    ----------
    policy : callable
        TensorFlow-traceable ``policy(features) -> outputs`` (a function, a
        ``tf.Module``, a Keras model...).  ``features`` is ``[M, lags + 3]`` (one row per
        market of the block, in ``dtype``): the last ``lags`` one-step log returns of the
        market price, newest first (0 before the run's start), ``ln(F / P)``, and the
        acting agent's own time window and order margin.  ``outputs`` is ``[M]`` or
        ``[M, 1]``: the expected log return ``r`` over the agent's horizon, so the
        expected price is ``E = P exp(r)``; or ``[M, 2]``: ``r`` and the order margin
        (clipped to [0, 1]) instead of the agent's own.  The order is then an FCN's
        with a fixed margin: buy at ``E (1 - k)`` if ``E > P``, sell at ``E (1 + k)``
        if ``E < P``, volume 1, time-to-live the time window.  Rows of markets whose
        acting agent is not of this group are computed and discarded.
    n_agents : int
        Agents in the group; the agent acting at a step is uniform over all agents of
        all groups, as in pams.
    time_window, order_margin : pams JSON random values
        Per-agent draws, as for FCN agents (bounded time window: it is the orders'
        time-to-live and sizes the book).
    lags : int
        Past returns in the features.
    dtype : str
        Dtype of ``features`` (``"float32"`` for a default Keras model); outputs are
        cast to the Flow's dtype (the prices').  With ``Flow(..., dtype="float32")``
        the features are float32 already.
    name : str
        The group's name in messages.
    book : bool
        Also give the policy the book as the step found it (before its orders): 4 more
        features after the others, ``ln(best bid / P)`` and ``ln(best ask / P)`` (0
        where that side is empty) and the numbers of live bids and asks.  The rule of
        a user's own agent as a function of the book state, e.g. a liquidity taker
        (examples/markets_book_agent.py).

    The policy must be deterministic (no dropout, no random ops): markets then give
    the same bits on every backend.  Pickling a simulation pickles the policy, so
    process backends (joblib, MPI, Spark) need a picklable one: a module-level
    function or a small class holding numpy weights (:class:`MLP`).
    """

    def __init__(self, policy, n_agents, time_window=(20, 60), order_margin=(0.0, 0.05),
                 lags=10, dtype="float64", name="LearnedAgents", book=False):
        if not callable(policy):
            raise TypeError(f"{name}: policy must be callable, got {policy!r}")
        if isinstance(n_agents, bool) or not isinstance(n_agents, int) or n_agents < 1:
            raise ValueError(f"{name}: n_agents must be a positive integer, got {n_agents!r}")
        if isinstance(lags, bool) or not isinstance(lags, int) or lags < 1:
            raise ValueError(f"{name}: lags must be a positive integer, got {lags!r}")
        self.policy, self.n_agents, self.lags, self.dtype, self.name = (
            policy, n_agents, lags, dtype, name)
        self.book = bool(book)
        tw = list(time_window) if isinstance(time_window, tuple) else time_window
        om = list(order_margin) if isinstance(order_margin, tuple) else order_margin
        params = {"fundamental_weight": Dist("const", (1.0,)),
                  "chart_weight": Dist("const", (0.0,)),
                  "noise_weight": Dist("const", (0.0,)),
                  "noise_scale": Dist("const", (0.0,)),
                  "time_window": Dist.parse(tw, f"{name}.time_window"),
                  "order_margin": Dist.parse(om, f"{name}.order_margin"),
                  "mean_reversion_time": Dist("const", (1.0,))}
        self.group = FCNGroup(name, n_agents, tuple((a, params[a]) for a in FCN_PARAMS.values()))
        check_group(self.group)
        self._token = uuid.uuid4().hex

    @property
    def max_time_window(self):
        return self.group.max_time_window

    def trace_key(self):
        """Per object (kept by pickling): a copy sent to a worker reuses its compilation."""
        return (self.name, self.n_agents, self.lags, self.dtype, self._token) + (
            ("book",) if self.book else ())

    def describe(self):
        from ..core.fingerprint import fingerprint
        try:
            policy = fingerprint(self.policy)
        except Exception:  # noqa: BLE001 - any callable runs; not all fingerprint
            policy = type(self.policy).__qualname__
        out = {"name": self.name, "n_agents": self.n_agents, "lags": self.lags,
               "dtype": self.dtype, "policy": policy,
               "params": {a: d.to_json() for a, d in self.group.params}}
        if self.book:
            out["book"] = True
        return out

    @property
    def n_features(self):
        """Columns of the policy's ``features``: ``lags + 3``, 4 more with ``book``."""
        return self.lags + 3 + 4 * self.book


class MLP:
    """A small multilayer perceptron with numpy weights: picklable, deterministic.

    ``MLP([W1, b1, W2, b2, ...])`` computes ``tanh`` hidden layers and a linear output,
    in float64.  ``MLP.from_keras(model)`` copies a Keras ``Sequential`` of ``Dense``
    layers (tanh hidden activations) so a trained model can travel to worker processes.
    """

    def __init__(self, weights):
        self.weights = [np.asarray(w, np.float64) for w in weights]
        if len(self.weights) % 2:
            raise ValueError("MLP weights come in pairs (kernel, bias)")

    @classmethod
    def from_keras(cls, model):
        return cls([w for layer in model.layers for w in layer.get_weights()])

    @classmethod
    def random(cls, sizes, seed=0, scale=0.3):
        """An MLP of layer ``sizes`` (e.g. ``[13, 8, 1]``) with normal weights."""
        g = np.random.default_rng(seed)
        weights = []
        for n_in, n_out in zip(sizes[:-1], sizes[1:]):
            weights += [g.normal(0, scale / np.sqrt(n_in), (n_in, n_out)), np.zeros(n_out)]
        return cls(weights)

    def __call__(self, x):
        t = tf()
        x = t.cast(x, t.float64)
        pairs = list(zip(self.weights[::2], self.weights[1::2]))
        for i, (w, b) in enumerate(pairs):
            x = t.matmul(x, t.constant(w)) + t.constant(b)
            if i < len(pairs) - 1:
                x = t.tanh(x)
        return x


def book_features(book, price):
    """``[M, 4]``: :class:`LearnedAgents`'s book features from ``book`` ``(best bid
    price, best ask price, bid depth, ask depth)`` ``[M]`` each (a price NaN where its
    side is empty)."""
    t_ = tf()
    bid, ask, nb, na = book

    def log_ratio(x):
        return t_.where(t_.math.is_finite(x), t_.math.log(t_.where(t_.math.is_finite(x), x,
                                                                   price) / price), 0.0)

    return t_.stack([log_ratio(bid), log_ratio(ask), t_.cast(nb, price.dtype),
                     t_.cast(na, price.dtype)], 1)


def learned_orders(S, a, n_fcn, gid, params, t, price, fund, hist, expected, k, book=None):
    """``(expected price, margin)`` with the rows of learned agents replaced (``book``:
    the step's book for groups that read it, :func:`book_features`)."""
    tf_ = tf()
    start = n_fcn
    for lg in S.learned:
        end = start + lg.n_agents
        idx = t - tf_.range(1, lg.lags + 1, dtype=tf_.int64)              # t-1 .. t-lags
        rows = tf_.gather(hist, tf_.maximum(idx, 0))                      # [lags, M]
        seq = tf_.concat([price[None], rows], 0)                          # P_t, P_t-1, ..
        ret = tf_.math.log(seq[:-1] / seq[1:])
        ret = tf_.where((idx >= 0)[:, None], ret, 0.0)
        tau = tf_.gather(params["time_window"], a, batch_dims=1)
        margin = tf_.gather(params["order_margin"], a, batch_dims=1)
        feats = [tf_.transpose(ret), tf_.math.log(fund / price)[:, None], tau[:, None],
                 margin[:, None]] + ([book_features(book, price)] if lg.book else [])
        feats = tf_.concat(feats, 1)
        out = tf_.cast(lg.policy(tf_.cast(feats, lg.dtype)), price.dtype)
        if out.shape.rank == 1:
            out = out[:, None]
        r = out[:, 0]
        mine = (a >= start) & (a < end)
        expected = tf_.where(mine, price * tf_.exp(r), expected)
        if out.shape[1] >= 2:
            k = tf_.where(mine, tf_.clip_by_value(out[:, 1], 0.0, 1.0), k)
        start = end
    return expected, k
