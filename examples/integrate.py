"""Integrate the 8-dim double Gaussian with plain Monte Carlo, with a histogram.

    python examples/integrate.py
"""
import flowsim  # noqa: I001 - first: it turns TensorFlow's start-up noise down before TF loads
import tensorflow as tf
from flowsim.targets import double_gaussian, double_gaussian_exact


def radius(x):
    """Distance of a point from the first peak."""
    return tf.sqrt(tf.reduce_sum(tf.square(x - 0.25), axis=1))


def main():
    hist = flowsim.Histogram(radius, bins=10, range=(0.0, 0.5))
    sim = flowsim.Plain(double_gaussian, dim=8, histograms=[hist])
    result = flowsim.Flow(sim, n_events=2_000_000, seed=7).run(n_iter=5)
    print(result)
    print(f"exact = {double_gaussian_exact(8):.12g}")
    h = result.histograms["radius"]
    for lo, hi, v, e in zip(h["edges"][:-1], h["edges"][1:], h["values"], h["errors"]):
        print(f"  r in [{lo:.2f}, {hi:.2f}): {v:.5f} +/- {e:.5f}")


if __name__ == "__main__":
    main()
