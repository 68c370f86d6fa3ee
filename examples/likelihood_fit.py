"""Maximum-likelihood fit of a density whose normalisation has no closed form.

The model on the box [0, 2] x [0, 2]::

    p(x, y; a, b) = exp(-a x^2 - b y^2 - x^2 y^2) / N(a, b)

``N(a, b)``, the integral of the numerator over the box, is computed by
:func:`flowsim.tf_integral` inside the negative log-likelihood, so TensorFlow
differentiates the whole thing (normalisation included) and scipy's BFGS
minimises it.  The events of the normalisation integral are fixed
(``iteration=0``), which makes the NLL a smooth deterministic function of
``(a, b)``.  Parameter errors come from the inverse Hessian of the NLL.

Run:  python examples/likelihood_fit.py   (about a minute on a laptop CPU)
"""
import numpy as np
import scipy.optimize
import tensorflow as tf

import flowsim

TRUE = (1.0, 2.0)
BOX = [[0.0, 2.0], [0.0, 2.0]]


def density(x, a, b):
    """Unnormalised model density at points ``x`` ``[n, 2]``."""
    return tf.exp(-a * x[:, 0] ** 2 - b * x[:, 1] ** 2 - x[:, 0] ** 2 * x[:, 1] ** 2)


def generate(n, seed):
    """``n`` events of the model at TRUE, by accept-reject (numpy)."""
    rng = np.random.default_rng(seed)
    out = []
    while sum(len(o) for o in out) < n:
        x = rng.uniform(0.0, 2.0, size=(4 * n, 2))
        p = density(tf.constant(x), *TRUE).numpy()          # max of p is 1, at 0
        out.append(x[rng.uniform(size=len(x)) < p])
    return np.concatenate(out)[:n]


def fit(data, n_events=200_000, seed=7):
    """``(params, errors, covariance)`` of the ML fit of ``data``."""
    data = tf.constant(data)
    n = float(data.shape[0])

    def nll(theta):
        norm, _ = flowsim.tf_integral(density, 2, n_events, limits=BOX, seed=seed,
                                      params={"a": theta[0], "b": theta[1]})
        logp = tf.math.log(density(data, theta[0], theta[1]))
        return -tf.reduce_sum(logp) + n * tf.math.log(norm)

    @tf.function(autograph=False)
    def value_and_grad(theta):
        with tf.GradientTape() as tape:
            tape.watch(theta)
            v = nll(theta)
        return v, tape.gradient(v, theta)

    @tf.function(autograph=False)
    def hessian(theta):
        with tf.GradientTape() as outer:
            outer.watch(theta)
            with tf.GradientTape() as inner:
                inner.watch(theta)
                v = nll(theta)
            g = inner.gradient(v, theta)
        return outer.jacobian(g, theta)

    def scipy_fun(theta):
        v, g = value_and_grad(tf.constant(theta, tf.float64))
        return float(v), g.numpy()

    best = scipy.optimize.minimize(scipy_fun, x0=[0.5, 1.0], jac=True, method="BFGS")
    cov = np.linalg.inv(hessian(tf.constant(best.x, tf.float64)).numpy())
    return best.x, np.sqrt(np.diag(cov)), cov


def main(n=5000, seed=1):
    data = generate(n, seed)
    params, errors, _ = fit(data)
    for name, true, p, e in zip("ab", TRUE, params, errors):
        print(f"{name} = {p:.4f} +/- {e:.4f}   (generated with {true}, pull {(p - true) / e:+.2f})")
    return params, errors


if __name__ == "__main__":
    main()
