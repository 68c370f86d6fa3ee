"""Per-core changes of how XLA computes a block never change its bits."""


def test_moments_of_one_value_per_event_are_the_general_arithmetic():
    """Plain's moments of ``[n, 1]`` take a path of their own (the same operations on
    ``[n]``, which XLA compiles to cheaper loops): without XLA, where both paths add in
    the same tree, they give the general path's bits (its first of two equal columns),
    masked events and a mean that dwarfs the spread included."""
    import numpy as np

    from flowsim.algorithms.plain import moments
    from flowsim.core.lazy_tf import tf
    t = tf()
    n = 64 * 300
    v = 1e8 + np.random.default_rng(7).standard_normal((n, 1))
    valid = t.constant(np.arange(n) < n - 1000)
    one = moments(t.constant(v), valid)
    two = moments(t.constant(np.hstack([v, v])), valid)
    assert one["sum"].shape == (1,) and one["m2"].shape == (1,)
    for acc in ("sum", "m2"):
        assert one[acc].numpy().tobytes() == two[acc].numpy()[:1].tobytes(), acc
    assert one["count"].numpy() == two["count"].numpy() == n - 1000
