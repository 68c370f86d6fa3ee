"""PPO on flowsim's batched trading environments, data-parallel over a backend's devices.

Usage::

    from flowsim.envs import PortfolioVectorEnv, portfolio_rollout, train_ppo

    rules = dict(positions=[-1, 0, 1], trading_fees=0.001, windows=10,
                 max_episode_duration=65)
    env = PortfolioVectorEnv(train_df, 256, **rules)
    trained = train_ppo(env, 300_000, seed=1)               # backend="threads", "joblib", ...
    trained.curve                  # mean rollout return per update
    trained.weights                # the policy's variables, a list of numpy arrays
    portfolio_rollout(trained.policy, test_df, 8192, seed=9, **rules).episode_return

:func:`train_ppo` runs proximal policy optimisation (clipped objective,
generalised advantage estimation, epochs of minibatches) on the rules of a
:class:`~flowsim.envs.PortfolioVectorEnv` (gym-trading-env's ``TradingEnv``).
Each update rolls out ``env.num_envs`` environments for ``n_steps`` steps in one
compiled ``tf.while_loop`` (:class:`RolloutCollector`: policy, action draw, step
and autoreset in the graph), then takes ``epochs * minibatches`` gradient
steps.  A gradient step is one iteration of a :class:`flowsim.Flow` over the
minibatch (:class:`PPOGradient`, one event per sample): each block of
``block_size`` samples computes its gradient on whatever device the backend
gives it, the Flow adds the blocks' rows in block order, and the Adam step
runs on the driver between iterations.  So the trained weights are the same
bits with no backend, on threads over any number of devices or on joblib
workers (the test suite checks these three): only ``block_size`` (default: a
quarter of a minibatch, rounded down to a multiple of 64) fixes them.  Every
random number (initial weights, start rows, actions, minibatch order) comes
from the seed through stateless generators.
"""
import json
import math
import os
from collections import namedtuple

import numpy as np

from ..core.lazy_tf import tf
from ..core.simulation import Simulation

#: :func:`train_ppo`'s options and their defaults.
DEFAULTS = {"n_steps": 64, "epochs": 1, "minibatches": 16, "learning_rate": 3e-3,
            "clip": 0.2, "gamma": 0.99, "lam": 0.95, "value_coef": 0.5,
            "entropy_coef": 0.01, "max_grad_norm": 0.5, "hidden": (32,),
            "reward_scale": 1.0, "block_size": None, "checkpoint": None, "flow_kwargs": None}
#: Adam's constants (Kingma and Ba's defaults).
ADAM = (0.9, 0.999, 1e-8)
#: Columns of :attr:`PPOResult.stats` (means over an update's gradient steps).
STAT_COLUMNS = ("policy_loss", "value_loss", "entropy", "clip_fraction", "approx_kl")
#: Seed streams: ``[seed, STREAM + counter]`` of ``tf.random.stateless_uniform``.
INIT_STREAM, ACTION_STREAM, ORDER_STREAM = 0, 1 << 40, 2 << 40

PPOResult = namedtuple("PPOResult", "weights curve policy stats updates env_steps devices")
PPOResult.__doc__ = """What :func:`train_ppo` returns.

``weights``: the policy's variables (list of numpy arrays, :attr:`ActorCritic.weights`);
``curve``: numpy ``[updates]``, the mean return of each update's rollout (rewards of
``n_steps`` steps summed per environment, averaged over environments); ``policy``: the
trained :class:`ActorCritic`; ``stats``: numpy ``[updates, 5]``, :data:`STAT_COLUMNS`;
``updates`` and ``env_steps``: how many were done; ``devices``: the devices the gradient
blocks ran on (sorted names)."""


# -- the policy ------------------------------------------------------------------------
def dense_stack(layers, x):
    """``x`` through ``layers`` (``[(W, b), ...]``, arrays or tensors): tanh between,
    linear at the end."""
    t = tf()
    for w, b in layers[:-1]:
        x = t.tanh(t.matmul(x, w) + b)
    w, b = layers[-1]
    return t.matmul(x, w) + b


def stateless_glorot(shape, seed, stream, scale=1.0):
    """Glorot-uniform float32 numpy weights of ``shape`` from ``(seed, stream)``."""
    t = tf()
    limit = scale * math.sqrt(6.0 / (shape[0] + shape[1]))
    u = t.random.stateless_uniform(shape, seed=[int(seed), int(stream)], minval=-limit,
                                   maxval=limit, dtype=t.float32, alg="philox")
    return u.numpy()


class ActorCritic:
    """A softmax policy over positions and a value function: two tanh MLPs on the
    flattened observation.

    Usage::

        policy = ActorCritic.random(n_inputs=40, n_actions=3, hidden=(32,), seed=0)
        probs = policy(obs)              # [batch, 3]: what flowsim.envs rollouts take
        values = policy.value(obs)       # [batch]

    ``actor`` and ``critic`` are lists of ``(W, b)`` float32 numpy pairs; plain
    numbers, so the policy pickles to any worker.  :attr:`weights` lists every
    array (the actor's, then the critic's) and :meth:`with_weights` rebuilds a
    policy from such a list.
    """

    def __init__(self, actor, critic):
        self.actor = [(np.asarray(w, np.float32), np.asarray(b, np.float32)) for w, b in actor]
        self.critic = [(np.asarray(w, np.float32), np.asarray(b, np.float32))
                       for w, b in critic]

    @classmethod
    def random(cls, n_inputs, n_actions, hidden=(32,), seed=0):
        """Glorot-uniform weights drawn statelessly from ``seed`` (the actor's last
        layer scaled by 0.01, so the first policy is nearly uniform), zero biases."""
        def layers(sizes, first_stream, last_scale):
            out = []
            for i, (a, b) in enumerate(zip(sizes[:-1], sizes[1:])):
                scale = last_scale if i == len(sizes) - 2 else 1.0
                out.append((stateless_glorot((a, b), seed, INIT_STREAM + first_stream + i,
                                             scale), np.zeros(b, np.float32)))
            return out
        hidden = tuple(hidden)
        return cls(layers([n_inputs, *hidden, n_actions], 0, 0.01),
                   layers([n_inputs, *hidden, 1], 1000, 1.0))

    @property
    def weights(self):
        """Every variable, actor then critic, ``[W1, b1, W2, b2, ...]``."""
        return [a for pair in self.actor + self.critic for a in pair]

    def with_weights(self, weights):
        """A policy of this one's shapes with ``weights`` (a list as :attr:`weights`)."""
        weights = [np.asarray(w, np.float32) for w in weights]
        n = 2 * len(self.actor)
        pairs = list(zip(weights[0::2], weights[1::2]))
        return type(self)(pairs[:n // 2], pairs[n // 2:])

    @staticmethod
    def flat(obs):
        t = tf()
        return t.reshape(t.cast(obs, t.float32), [t.shape(obs)[0], -1])

    def logits(self, obs, actor=None):
        return dense_stack(self.actor if actor is None else actor, self.flat(obs))

    def __call__(self, obs):
        """Probabilities ``[batch, n_actions]`` of each position."""
        return tf().nn.softmax(self.logits(obs))

    def value(self, obs, critic=None):
        """Values ``[batch]`` of observations."""
        out = dense_stack(self.critic if critic is None else critic, self.flat(obs))
        return out[:, 0]

    def __repr__(self):
        sizes = [self.actor[0][0].shape[0]] + [w.shape[1] for w, _ in self.actor]
        return f"ActorCritic({'-'.join(map(str, sizes))})"


def split_layers(weights, n_actor_layers):
    """``(actor, critic)`` layer lists from a flat list of variables (tensors)."""
    pairs = list(zip(weights[0::2], weights[1::2]))
    return pairs[:n_actor_layers], pairs[n_actor_layers:]


# -- options ---------------------------------------------------------------------------
def check_options(options):
    """:data:`DEFAULTS` updated with ``options``; unknown names and bad values refused."""
    unknown = sorted(set(options) - set(DEFAULTS))
    if unknown:
        raise TypeError(f"train_ppo: unknown options {unknown}; known: {sorted(DEFAULTS)}")
    out = dict(DEFAULTS, **options)
    from ..core.blocks import check_count
    for name in ("n_steps", "epochs", "minibatches"):
        out[name] = check_count(name, out[name])
    for name in ("learning_rate", "clip", "reward_scale"):
        if not (isinstance(out[name], (int, float)) and out[name] > 0):
            raise ValueError(f"{name} must be a number > 0, got {out[name]!r}")
    for name in ("gamma", "lam"):
        if not (isinstance(out[name], (int, float)) and 0 <= out[name] <= 1):
            raise ValueError(f"{name} must be a number in [0, 1], got {out[name]!r}")
    for name in ("value_coef", "entropy_coef", "max_grad_norm"):
        if not (isinstance(out[name], (int, float)) and out[name] >= 0):
            raise ValueError(f"{name} must be a number >= 0, got {out[name]!r}")
    hidden = out["hidden"]
    out["hidden"] = tuple(check_count("hidden", h) for h in
                          ((hidden,) if isinstance(hidden, int) else hidden))
    return out


def env_rules(env):
    """``(rules, num_envs)`` of a PortfolioVectorEnv (or a PortfolioEnv: one environment)."""
    vec = getattr(env, "_vec", env)
    rules = getattr(vec, "portfolio", None)
    if rules is None or not hasattr(vec, "num_envs"):
        raise TypeError(f"env must be a flowsim.envs.PortfolioVectorEnv or PortfolioEnv, got "
                        f"{type(env).__name__}")
    if rules.action_space != "discrete":
        raise ValueError("train_ppo: env must have action_space='discrete' (PPO here draws "
                         "positions from a softmax)")
    return rules, int(vec.num_envs)


# -- rollouts --------------------------------------------------------------------------
#: Keys of the rules' state whose first axis is the environment (the others: the last).
BATCH_FIRST = ("dyn",)


def merge(mask, new, old):
    """``where(mask, new, old)`` key by key of the rules' state (mask ``[n]``)."""
    t = tf()
    out = {}
    for k in old:
        m = mask[:, None, None] if k in BATCH_FIRST else mask
        out[k] = t.where(m, new[k], old[k])
    return out


#: Compiled rollout loops of this process, by rules object, sizes and policy shapes
#: (each holds its rules, so their id stays theirs): a second run on the same env
#: does not compile again.
COLLECTORS = {}
MAX_COLLECTORS = 8


class RolloutCollector:
    """``n_envs`` environments of ``rules`` stepped ``n_steps`` times per call, in one
    compiled loop: the policy's probabilities, an action drawn from them with
    stateless uniforms of ``(seed, update, step)``, the step, and the autoreset of
    environments whose episode ended (start rows and positions from ``(seed,
    environment, episode)``, as :meth:`PortfolioRules.draws`)."""

    def __init__(self, rules, n_envs, n_steps, seed, template):
        self.rules, self.n_envs, self.n_steps, self.seed = rules, n_envs, n_steps, int(seed)
        self.template = template
        key = (id(rules), n_envs, n_steps, len(template.actor),
               tuple(w.shape for w in template.weights))
        if key not in COLLECTORS:
            while len(COLLECTORS) >= MAX_COLLECTORS:
                COLLECTORS.pop(next(iter(COLLECTORS)))
            t = tf()
            c = dict(rules.constants(), rules=t.tile(
                t.constant(rules.rule_rows())[:, None], [1, n_envs]))
            COLLECTORS[key] = (rules, c, t.function(self._collect_fn, jit_compile=True,
                                                           autograph=False))
        _, self.c, self._collect = COLLECTORS[key]

    def first_state(self):
        """The environments' state before the first update (episode 0 of each)."""
        t = tf()
        seeds = t.constant(self.seed * 1_000_003 + np.arange(self.n_envs, dtype=np.int64))
        episodes = t.zeros([self.n_envs], t.int64)
        start, index = self.rules.draws(seeds, episodes)
        s, _ = self.rules.fresh(self.c, start, index)
        return {"s": s, "seeds": seeds, "episodes": episodes,
                "obs": self.rules.observe(self.c, s)}

    def _policy_step(self, actor, critic, obs, u):
        from .portfolio_rollout import choose
        t = tf()
        logits = self.template.logits(obs, actor)
        action = choose(t.nn.softmax(logits), u, len(self.rules.positions))
        logp = t.gather(t.nn.log_softmax(logits), action, batch_dims=1)
        return action, logp, self.template.value(obs, critic)

    def _autoreset(self, env, s, done):
        t = tf()
        episodes = env["episodes"] + t.cast(done, t.int64)
        start, index = self.rules.draws(env["seeds"], episodes)
        fresh, _ = self.rules.fresh(self.c, start, index)
        s = merge(done, fresh, s)
        return {"s": s, "seeds": env["seeds"], "episodes": episodes,
                "obs": self.rules.observe(self.c, s)}

    def _collect_fn(self, weights, env, update, seed):
        t = tf()
        actor, critic = split_layers(weights, len(self.template.actor))
        n, steps = self.n_envs, self.n_steps
        arrays = [t.TensorArray(dtype, size=steps) for dtype in
                  (t.float32, t.int32, t.float32, t.float32, t.float64, t.bool)]

        def body(i, env, arrays):
            key = t.stack([seed, ACTION_STREAM + update * steps + t.cast(i, t.int64)])
            u = t.random.stateless_uniform([n], seed=key, dtype=t.float64, alg="philox")
            action, logp, value = self._policy_step(actor, critic, env["obs"], u)
            target = t.gather(self.c["positions"], action)
            s, reward, terminated, truncated, _ = self.rules.step(self.c, env["s"], target,
                                                                 action)
            done = terminated | truncated
            record = (env["obs"], action, logp, value, reward, done)
            arrays = [a.write(i, x) for a, x in zip(arrays, record)]
            return i + 1, self._autoreset(env, s, done), arrays

        _, env, arrays = t.while_loop(lambda i, *_: i < steps, body,
                                      (t.constant(0, t.int32), env, arrays))
        last_value = self.template.value(env["obs"], critic)
        return [a.stack() for a in arrays], last_value, env

    def collect(self, weights, env, update):
        """``(batch, last_value, env)``: numpy ``obs [T, n, ...]``, ``action``, ``logp``,
        ``value``, ``reward`` (float64), ``done`` ``[T, n]``; the values of the final
        observations ``[n]``; the environments' state after the ``T`` steps."""
        t = tf()
        arrays, last, env = self._collect(
            [t.constant(w) for w in weights], env, t.constant(int(update), t.int64),
            t.constant(self.seed, t.int64))
        names = ("obs", "action", "logp", "value", "reward", "done")
        return {k: a.numpy() for k, a in zip(names, arrays)}, last.numpy(), env


def advantages(batch, last_value, gamma, lam, reward_scale):
    """Generalised advantage estimates and value targets ``[T, n]`` (float32): an
    ended episode's step bootstraps nothing (its next observation starts a new one)."""
    reward = batch["reward"] * reward_scale
    value = batch["value"].astype(np.float64)
    keep = 1.0 - batch["done"].astype(np.float64)
    adv = np.zeros_like(reward)
    running = np.zeros(reward.shape[1])
    following = last_value.astype(np.float64)
    for i in range(reward.shape[0] - 1, -1, -1):
        delta = reward[i] + gamma * following * keep[i] - value[i]
        running = delta + gamma * lam * keep[i] * running
        adv[i] = running
        following = value[i]
    returns = adv + value
    adv = (adv - adv.mean()) / (adv.std() + 1e-8)
    return adv.astype(np.float32), returns.astype(np.float32)


# -- gradient steps as flowsim iterations ----------------------------------------------
class Adam:
    """Adam on float32 numpy weights, moments in float64 (bits fixed by the inputs)."""

    def __init__(self, weights, learning_rate):
        self.learning_rate = float(learning_rate)
        self.m = [np.zeros(w.shape) for w in weights]
        self.v = [np.zeros(w.shape) for w in weights]
        self.count = 0

    def step(self, weights, grads):
        beta1, beta2, eps = ADAM
        self.count += 1
        out = []
        for i, (w, g) in enumerate(zip(weights, grads)):
            self.m[i] = beta1 * self.m[i] + (1 - beta1) * g
            self.v[i] = beta2 * self.v[i] + (1 - beta2) * g * g
            m_hat = self.m[i] / (1 - beta1 ** self.count)
            v_hat = self.v[i] / (1 - beta2 ** self.count)
            step = self.learning_rate * m_hat / (np.sqrt(v_hat) + eps)
            out.append((w.astype(np.float64) - step).astype(np.float32))
        return out

    def get_state(self):
        return {"count": np.array(self.count), **{f"m{i}": m for i, m in enumerate(self.m)},
                **{f"v{i}": v for i, v in enumerate(self.v)}}

    def set_state(self, state):
        self.count = int(state["count"])
        self.m = [np.array(state[f"m{i}"]) for i in range(len(self.m))]
        self.v = [np.array(state[f"v{i}"]) for i in range(len(self.v))]


def clip_by_global_norm(grads, max_norm):
    """``grads`` scaled so their global norm is at most ``max_norm`` (0: unclipped)."""
    norm = math.sqrt(sum(float(np.sum(g * g)) for g in grads))
    if max_norm <= 0 or norm <= max_norm:
        return grads
    return [g * (max_norm / norm) for g in grads]


def ppo_losses(template, weights, sample, options):
    """Per-sample PPO loss ``[size]`` and the per-sample statistics ``[size, 5]``
    (:data:`STAT_COLUMNS`) of minibatch rows ``sample``."""
    t = tf()
    actor, critic = split_layers(weights, len(template.actor))
    logits = template.logits(sample["obs"], actor)
    logp_all = t.nn.log_softmax(logits)
    logp = t.gather(logp_all, sample["action"], batch_dims=1)
    log_ratio = logp - sample["logp"]
    ratio = t.exp(log_ratio)
    clip = options["clip"]
    adv = sample["adv"]
    policy = -t.minimum(ratio * adv, t.clip_by_value(ratio, 1 - clip, 1 + clip) * adv)
    value = template.value(sample["obs"], critic)
    value_loss = 0.5 * t.square(value - sample["returns"])
    entropy = -t.reduce_sum(t.exp(logp_all) * logp_all, axis=1)
    loss = policy + options["value_coef"] * value_loss - options["entropy_coef"] * entropy
    clipped = t.cast(t.abs(ratio - 1) > clip, t.float32)
    kl = (ratio - 1) - log_ratio
    return loss, t.stack([policy, value_loss, entropy, clipped, kl], axis=1)


#: The rollout arrays a gradient block reads, by name.
SAMPLE_KEYS = ("obs", "action", "logp", "adv", "returns")


class PPOGradient(Simulation):
    """One PPO gradient step per Flow iteration: one event is one sample of the
    minibatch, a block returns its samples' summed gradient (float64, flattened)
    and statistics, and :meth:`adapt` takes the Adam step on the driver with the
    blocks' total, added in block order by the Flow, so the weights do not depend
    on where blocks ran.  :meth:`set_batch` gives it an update's rollout; the
    iterations then walk the minibatches of ``epochs`` stateless shuffles."""

    dim = 0
    autograph = False

    def __init__(self, policy, options, seed):
        self.template = policy
        self.options = {k: options[k] for k in ("clip", "value_coef", "entropy_coef")}
        self.epochs, self.minibatches = options["epochs"], options["minibatches"]
        self.max_grad_norm = float(options["max_grad_norm"])
        self.seed = int(seed)
        self.weights = policy.weights
        self.sizes = [w.size for w in self.weights]
        self.adam = Adam(self.weights, options["learning_rate"])
        self._data = None
        self._orders = None
        self._minibatch = None
        self._step = 0

    # driver-only state stays home: a copy keeps the weights and the current minibatch
    def __getstate__(self):
        return dict(self.__dict__, _data=None, _orders=None, adam=None)

    @property
    def minibatch(self):
        return self._orders.shape[-1]

    def set_batch(self, data, update):
        """The samples of update ``update`` (flattened ``[T * n, ...]`` arrays) and the
        minibatch order of each epoch (``tf.random.experimental.stateless_shuffle``)."""
        t = tf()
        self._data = data
        size = data["action"].shape[0]
        per = size // self.minibatches
        orders = []
        for epoch in range(self.epochs):
            seed = [self.seed, ORDER_STREAM + update * self.epochs + epoch]
            order = t.random.experimental.stateless_shuffle(
                t.range(size, dtype=t.int32), seed=seed).numpy()
            orders.extend(order[:per * self.minibatches].reshape(self.minibatches, per))
        self._orders = np.stack(orders)
        self._step = 0
        self._minibatch = None

    def accumulators(self):
        return {"grad": (sum(self.sizes),), "stats": (len(STAT_COLUMNS),)}

    def state(self):
        # only this step's minibatch travels to the devices, in its shuffled order
        # (gathered once per step: the Flow asks for the state several times)
        step = self._step if self._data is None else min(self._step, len(self._orders) - 1)
        if self._data is not None and (self._minibatch is None or self._minibatch[0] != step):
            order = self._orders[step]
            self._minibatch = (step, {k: np.take(self._data[k], order, axis=0)
                                      for k in SAMPLE_KEYS})     # (faster than [order])
        out = {f"weight_{i:02d}": w for i, w in enumerate(self.weights)}
        out.update(self._minibatch[1])
        return out

    def inputs(self, key, first_event, size, dtype, state):
        del key, dtype, state
        return first_event, size

    def block(self, inputs, valid, state):
        t = tf()
        first_event, size = inputs
        last = t.cast(t.shape(state["action"], out_type=t.int64)[0] - 1, t.int64)
        rows = t.minimum(first_event + t.range(size, dtype=t.int64), last)
        sample = {k: t.gather(state[k], rows) for k in SAMPLE_KEYS}
        weights = [state[f"weight_{i:02d}"] for i in range(len(self.sizes))]
        mask = t.cast(valid, t.float32)
        with t.GradientTape() as tape:
            tape.watch(weights)
            loss, stats = ppo_losses(self.template, weights, sample, self.options)
            total = t.reduce_sum(loss * mask)
        grads = tape.gradient(total, weights)
        flat = t.concat([t.reshape(g, [-1]) for g in grads], axis=0)
        return {"grad": t.cast(flat, t.float64),
                "stats": t.cast(t.reduce_sum(stats * mask[:, None], axis=0), t.float64)}

    def estimate(self, totals, n_events):
        return {"value": totals["stats"] / n_events, "error": np.zeros(len(STAT_COLUMNS))}

    def adapt(self, totals, n_events):
        flat = totals["grad"] / n_events
        grads = [g.reshape(w.shape) for g, w in
                 zip(np.split(flat, np.cumsum(self.sizes)[:-1]), self.weights)]
        self.weights = self.adam.step(self.weights, clip_by_global_norm(grads,
                                                                        self.max_grad_norm))
        self._step += 1

    def get_state(self):
        return {}

    def count_adaptation(self, state):
        """The gradient steps taken before this iteration (the state changes at every
        one; counted, not hashed again: the Flow already hashes each state once)."""
        del state
        return {"adapted_before": self.adam.count - 1}

    def trace_key(self):
        """The kernel depends on the weights' shapes and the loss's constants only:
        runs with equal ones share one compilation."""
        return ("PPOGradient", len(self.template.actor),
                tuple(w.shape for w in self.weights), tuple(sorted(self.options.items())))

    def config(self):
        return {"class": "PPOGradient", "sizes": list(self.sizes), "seed": self.seed,
                "options": self.options, "epochs": self.epochs,
                "minibatches": self.minibatches}

    @property
    def iterations(self):
        """Gradient steps per update."""
        return self.epochs * self.minibatches


# -- the trainer -----------------------------------------------------------------------
def initial_policy(policy, rules, hidden, seed):
    """``policy`` checked against the rules' shapes, or a new :class:`ActorCritic`."""
    n_inputs = int(np.prod(rules.observation_shape))
    n_actions = len(rules.positions)
    if policy is None:
        return ActorCritic.random(n_inputs, n_actions, hidden, seed)
    if not isinstance(policy, ActorCritic):
        raise TypeError(f"policy must be None or a flowsim.envs.ppo.ActorCritic (e.g. a "
                        f"train_ppo result's .policy), got {type(policy).__name__}")
    shape = (policy.actor[0][0].shape[0], policy.actor[-1][0].shape[1])
    if shape != (n_inputs, n_actions):
        raise ValueError(f"policy maps {shape[0]} inputs to {shape[1]} positions; the env "
                         f"needs {n_inputs} inputs and {n_actions} positions")
    return policy


def flat_samples(batch, adv, returns):
    """The rollout arrays ``[T, n, ...]`` as samples ``[T * n, ...]``."""
    def flat(a):
        return a.reshape((-1,) + a.shape[2:])
    return {"obs": flat(batch["obs"]).astype(np.float32, copy=False),
            "action": flat(batch["action"]),
            "logp": flat(batch["logp"]), "adv": flat(adv), "returns": flat(returns)}


def gradient_flow(sim, minibatch, seed, backend, options):
    """The Flow of ``backend`` that runs ``sim``'s gradient steps."""
    from ..core.blocks import BLOCK_QUANTUM
    from ..distribution.registry import flow_class
    block_size = options["block_size"] or max(BLOCK_QUANTUM, minibatch // 4 // BLOCK_QUANTUM
                                              * BLOCK_QUANTUM)
    flow_kwargs = dict(options["flow_kwargs"] or {})
    return flow_class(backend)(sim, n_events=minibatch, seed=seed, quiet=True,
                               block_size=block_size, **flow_kwargs)


class Trainer:
    """The state of a :func:`train_ppo` run: collector, gradient simulation, curve."""

    def __init__(self, env, seed, policy, options):
        rules, n_envs = env_rules(env)
        self.options, self.seed = options, int(seed)
        policy = initial_policy(policy, rules, options["hidden"], seed)
        self.collector = RolloutCollector(rules, n_envs, options["n_steps"], seed, policy)
        self.gradient = PPOGradient(policy, options, seed)
        self.samples = n_envs * options["n_steps"]
        if self.samples < options["minibatches"]:
            raise ValueError(f"minibatches={options['minibatches']} is more than the "
                             f"{self.samples} samples of an update (num_envs * n_steps)")
        self.env = self.collector.first_state()
        self.curve, self.stats, self.update = [], [], 0
        self.devices = set()

    def run_update(self, flow):
        o = self.options
        batch, last, self.env = self.collector.collect(self.gradient.weights, self.env,
                                                       self.update)
        adv, returns = advantages(batch, last, o["gamma"], o["lam"], o["reward_scale"])
        self.gradient.set_batch(flat_samples(batch, adv, returns), self.update)
        self.stats.append(self.gradient_steps(flow))
        self.curve.append(float(batch["reward"].sum(axis=0).mean()))
        self.update += 1

    def gradient_steps(self, flow):
        """The update's gradient steps, each the blocks of one Flow iteration added in
        block order (what ``flow.run`` does, without its per-iteration record: a hash
        of the minibatch, estimates that are not meant to agree); the mean of their
        statistics."""
        from ..core.kernel import unpack
        sim, n_events = self.gradient, flow.n_events
        first = self.update * sim.iterations
        stats = []
        for iteration in range(first, first + sim.iterations):
            totals = unpack(sim, sim.combine(flow.run_blocks(iteration), n_events))
            stats.append(sim.estimate(totals, n_events)["value"])
            sim.adapt(totals, n_events)
        self.devices.update(str(entry["device"]) for entry in flow.timeline)
        flow.timeline.clear()
        return np.mean(stats, axis=0)

    def result(self):
        policy = self.gradient.template.with_weights(self.gradient.weights)
        return PPOResult(policy.weights, np.array(self.curve), policy,
                         np.array(self.stats).reshape(-1, len(STAT_COLUMNS)), self.update,
                         self.update * self.samples, tuple(sorted(self.devices)))

    # -- checkpoints: the driver's whole state after an update -------------------------
    def run_config(self):
        """What a checkpoint must share with the run resuming it (JSON-able)."""
        options = {k: v for k, v in self.options.items()
                   if k not in ("checkpoint", "flow_kwargs")}
        return {"seed": self.seed, "samples": self.samples, **json.loads(json.dumps(options)),
                "shapes": [list(w.shape) for w in self.gradient.weights]}

    def save(self, path):
        t = tf()
        out = {f"weight_{i:02d}": w for i, w in enumerate(self.gradient.weights)}
        out.update({f"adam_{k}": v for k, v in self.gradient.adam.get_state().items()})
        flat_env = t.nest.flatten(self.env)
        out.update({f"env_{i:03d}": np.asarray(x) for i, x in enumerate(flat_env)})
        out.update(curve=np.array(self.curve), stats=np.array(self.stats),
                   update=np.array(self.update), run=np.array(json.dumps(self.run_config())))
        tmp = f"{path}.tmp.npz"
        np.savez(tmp, **out)
        os.replace(tmp, path)

    def load(self, path):
        t = tf()
        with np.load(path) as saved:
            theirs, mine = json.loads(str(saved["run"])), self.run_config()
            differ = sorted(k for k in {*theirs, *mine} if theirs.get(k) != mine.get(k))
            if differ:
                raise ValueError(f"checkpoint {path!r} was written by another run: "
                                 + ", ".join(f"{k} {theirs.get(k)!r} there, {mine.get(k)!r} "
                                             f"here" for k in differ))
            n = len(self.gradient.weights)
            self.gradient.weights = [saved[f"weight_{i:02d}"] for i in range(n)]
            self.gradient.adam.set_state({k[5:]: saved[k] for k in saved.files
                                          if k.startswith("adam_")})
            flat_env = [t.constant(saved[f"env_{i:03d}"])
                        for i in range(len(t.nest.flatten(self.env)))]
            self.env = t.nest.pack_sequence_as(self.env, flat_env)
            self.curve = list(saved["curve"])
            self.stats = list(saved["stats"])
            self.update = int(saved["update"])


def train_ppo(env, total_steps, seed, policy=None, backend=None, **ppo_options):
    """Train a policy with PPO on ``env``'s rules; the same bits on every backend.

    Usage::

        trained = train_ppo(PortfolioVectorEnv(df, 256, positions=[-1, 0, 1],
                                               trading_fees=0.001, windows=10,
                                               max_episode_duration=65),
                            300_000, seed=1, backend="threads")
        trained.weights, trained.curve, trained.policy

    Parameters
    ----------
    env : PortfolioVectorEnv or PortfolioEnv
        Its rules (data, positions, fees, windows, reward...) and ``num_envs``,
        the environments of each rollout (``action_space="discrete"``).  The env
        object itself is not stepped: the rollouts run in a compiled loop.
    total_steps : int
        Environment steps to train for, rounded up to whole updates of
        ``num_envs * n_steps`` steps.
    seed : int
        Every random number: initial weights, episode starts, actions, minibatch
        order.
    policy : ActorCritic or None
        Start from this policy (a result's ``.policy``); default a new one.
    backend : None, "threads", "joblib", "mpi", ... (:func:`flowsim.integrate`'s)
        Where the gradient blocks run.  The result does not depend on it.
    **ppo_options
        ``n_steps`` (64, steps per environment per update), ``epochs`` (1)
        and ``minibatches`` (16 per epoch): 16 gradient steps per update, each
        sample in one of them (see below), ``learning_rate`` (3e-3, Adam),
        ``clip`` (0.2), ``gamma`` (0.99), ``lam`` (0.95, GAE), ``value_coef``
        (0.5), ``entropy_coef`` (0.01), ``max_grad_norm`` (0.5; 0 for none),
        ``hidden`` ((32,), the tanh layers of actor and critic),
        ``reward_scale`` (1.0, multiplies rewards in the advantages),
        ``block_size`` (samples per gradient block, default a quarter of a
        minibatch rounded down to a multiple of 64; it fixes the bits),
        ``checkpoint`` (a path: the state is saved there after every update,
        and a run given an existing checkpoint of the same seed and sizes
        resumes from it) and
        ``flow_kwargs`` (a dict for the backend's Flow: ``n_jobs``,
        ``devices``, ``events_limit``...).

    Returns a :class:`PPOResult`: ``weights``, ``curve``, ``policy``, ``stats``,
    ``updates``, ``env_steps``.

    The defaults were ``epochs=4, minibatches=4`` before (pass them for those
    bits): as many gradient steps per update, on minibatches four times as
    large, so four times the gradient work per environment step.  On the
    held-out test of ``tests/test_ppo.py`` (eight seeds) one pass of 16
    minibatches learns as well as four passes of 4, and the default call
    trains about twice as many environment steps per second; what learning
    asks for here is the number of gradient steps, not passes over the data.
    """
    from ..core.blocks import check_count
    total_steps = check_count("total_steps", total_steps)
    options = check_options(ppo_options)
    trainer = Trainer(env, seed, policy, options)
    updates = -(-total_steps // trainer.samples)
    path = options["checkpoint"]
    if path is not None and os.path.exists(path):
        trainer.load(path)
    minibatch = trainer.samples // options["minibatches"]
    flow = gradient_flow(trainer.gradient, minibatch, seed, backend, options)
    try:
        while trainer.update < updates:
            trainer.run_update(flow)
            if path is not None:
                trainer.save(path)
    finally:
        flow.close()
    return trainer.result()
