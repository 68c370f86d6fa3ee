"""Small picklable policies for :func:`flowsim.envs.rollout` (and any TF code).

A policy maps observations float32 ``[batch, window_size, 2]`` (rows of
``(price, diff)``) to actions or probabilities (see
:func:`flowsim.envs.rollout.actions_from`).  These are plain objects holding
numbers, so they pickle to any backend's workers; any TF-traceable callable
(a Keras model, a closure) works the same way on one machine.
"""
import numpy as np

from ..core.lazy_tf import tf


def expected_window(policy):
    """The observation window a policy was built for, when it says: an :class:`MLP`'s
    first layer, or a Keras model's ``input_shape`` ``(None, window, 2)``; else None."""
    if isinstance(policy, MLP):
        return policy.weights[0][0].shape[0] // 2
    shape = getattr(policy, "input_shape", None)
    if isinstance(shape, tuple) and len(shape) == 3 and isinstance(shape[1], int):
        return shape[1]
    return None


def check_window(policy, window_size):
    """Refuse a policy built for observations of another ``window_size``, naming it
    (instead of TensorFlow's shape error from inside the compiled loop)."""
    expected = expected_window(policy)
    if expected is not None and expected != window_size:
        raise ValueError(f"window_size={window_size}: the policy {policy!r} takes "
                         f"observations [batch, {expected}, 2] (window_size={expected}), "
                         f"the environment gives [batch, {window_size}, 2]; pass "
                         f"window_size={expected} or build the policy for {window_size} "
                         f"(e.g. MLP.random({window_size}, ...))")


class Momentum:
    """Buy (go Long) when the last price change exceeds ``threshold``, else Sell.

    With ``params``, the threshold is each episode's ``params[:, 0]``: a
    parametrised rule for sweeps.
    """

    def __init__(self, threshold=0.0):
        self.threshold = float(threshold)

    def __call__(self, obs, params=None):
        t = tf()
        last = obs[:, -1, 1]
        threshold = self.threshold if params is None else t.cast(params[:, 0], last.dtype)
        return t.cast(last > threshold, t.int32)

    def __repr__(self):
        return f"Momentum(threshold={self.threshold})"


class Coin:
    """Buy with probability ``p`` (``params[:, 0]`` with params), whatever is observed:
    the random policy learned policies are compared against."""

    def __init__(self, p=0.5):
        self.p = float(p)

    def __call__(self, obs, params=None):
        t = tf()
        n = t.shape(obs)[0]
        if params is None:
            return t.fill([n], t.constant(self.p, t.float32))
        return t.cast(params[:, 0], t.float32)

    def __repr__(self):
        return f"Coin(p={self.p})"


class MLP:
    """A small multi-layer perceptron: observations -> probabilities of (Sell, Buy).

    The observation is flattened and scaled (prices relative to the window's
    last price, diffs by that price; :meth:`forward`), then passed through
    ``tanh`` hidden layers and a softmax (over two outputs, the sigmoid of the
    logits' difference: :meth:`head_of`).  ``weights`` is a list of ``(W, b)`` numpy pairs;
    :meth:`random` draws them.  Plain numbers, so it pickles to any worker;
    ``variables()`` gives trainable ``tf.Variable`` copies and ``from_variables``
    the policy back (``examples/train_policy.py``).
    """

    def __init__(self, weights):
        self.weights = [(np.asarray(w, np.float32), np.asarray(b, np.float32))
                        for w, b in weights]

    @classmethod
    def random(cls, window_size=30, hidden=(16,), seed=0):
        """Glorot-uniform weights, zero biases, drawn from ``seed``."""
        rng = np.random.default_rng(seed)
        sizes = [window_size * 2, *hidden, 2]
        weights = []
        for a, b in zip(sizes[:-1], sizes[1:]):
            limit = np.sqrt(6.0 / (a + b))
            weights.append((rng.uniform(-limit, limit, (a, b)), np.zeros(b)))
        return cls(weights)

    @staticmethod
    def forward(weights, obs):
        """Probabilities ``[batch, 2]`` of observations under ``weights`` (arrays or tensors).

        The inputs are the observation flattened, prices and diffs divided by the
        window's last price (prices minus 1), times 10.  That scaling is linear per
        observation, so it is applied after the first product (one multiply per
        hidden unit instead of one divide per input: the first layer then costs
        little more than its matrix product).
        """
        return MLP.head_of(weights, MLP.features_of(weights, obs))

    @staticmethod
    def features_of(weights, obs):
        """The first layer's pre-activations ``[batch, hidden]`` of observations (each
        row from its own observation only)."""
        t = tf()
        n = t.shape(obs)[0]
        window = int(obs.shape[1])
        flat = t.reshape(obs, [n, 2 * window])
        scale = 10.0 / obs[:, -1, 0:1]                              # [batch, 1]
        w, b = weights[0]
        price_rows = np.zeros(2 * window, np.float32)
        price_rows[0::2] = 10.0                                      # the "- 1" of prices
        return scale * t.matmul(flat, w) + (b - t.linalg.matvec(t.transpose(w), price_rows))

    @staticmethod
    def head_of(weights, x):
        """Probabilities ``[batch, 2]`` from first-layer pre-activations ``x``.

        The softmax of two logits is the sigmoid of their difference, so the last
        layer is one weighted sum per row (``tanh(x) . (w[:, 1] - w[:, 0])``):
        an elementwise product and a row sum that fuse with the ``tanh``, where a
        ``[batch, hidden] x [hidden, 2]`` matrix product is a separate, poorly
        vectorised call.
        """
        t = tf()
        *hidden, (w, b) = weights[1:]
        for wh, bh in hidden:
            x = t.matmul(t.tanh(x), wh) + bh
        if int(w.shape[-1]) != 2:
            return t.nn.softmax(t.matmul(t.tanh(x), w) + b)
        z = t.reduce_sum(t.tanh(x) * (w[:, 1] - w[:, 0]), axis=1) + (b[1] - b[0])
        p = t.sigmoid(z)
        return t.stack([1.0 - p, p], axis=1)

    def __call__(self, obs):
        return self.forward(self.weights, obs)

    # the split-policy protocol of flowsim.envs.rollout: policy(obs) is
    # head(observation_features(obs)), row by row, so a rollout computes the features
    # once per tick of the price table and gathers them per step
    def observation_features(self, obs):
        """First-layer pre-activations ``[batch, hidden]`` (float32) of observations."""
        return self.features_of(self.weights, obs)

    def head(self, features):
        """Probabilities ``[batch, 2]`` from :meth:`observation_features` rows."""
        return self.head_of(self.weights, features)

    def variables(self):
        t = tf()
        return [(t.Variable(w), t.Variable(b)) for w, b in self.weights]

    @classmethod
    def from_variables(cls, variables):
        return cls([(w.numpy(), b.numpy()) for w, b in variables])

    def __repr__(self):
        sizes = [self.weights[0][0].shape[0]] + [w.shape[1] for w, _ in self.weights]
        return f"MLP({'-'.join(map(str, sizes))})"
