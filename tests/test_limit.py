"""The per-core settings of issue 25 that change how XLA runs a block, never what it computes.

On machines of few cores flowsim turns off XLA's CPU pass that splits a compiled
function's large loops into intra-op tasks (:func:`flowsim.core.lazy_tf.xla_split_flags`):
each task computes the same elements with the same code, so a block's rows must be the
same bits with the split and without it.
"""
import hashlib
import os

import flowsim
from flowsim.core.lazy_tf import NO_SPLIT_FLAG, NO_SPLIT_MAX_CPUS, xla_split_flags
from flowsim.targets import double_gaussian


def test_xla_splitting_is_turned_off_only_on_few_cores_and_when_unset():
    assert xla_split_flags(None, 2) == NO_SPLIT_FLAG
    wide = "--xla_cpu_prefer_vector_width=512"
    assert xla_split_flags(wide, NO_SPLIT_MAX_CPUS) == f"{wide} {NO_SPLIT_FLAG}"
    assert xla_split_flags(wide, NO_SPLIT_MAX_CPUS + 1) == wide     # the split fills big machines
    assert xla_split_flags(wide, None) == wide                      # unknown core count
    mine = "--xla_disable_hlo_passes=algsimp"
    assert xla_split_flags(mine, 2) == mine                         # the user's list is theirs


# Blocks of 65,536 float64 events: XLA splits their [n, 1] loops in two (512 KiB each)
# on a machine of two cores or more, so the rows below compare split and unsplit code.
_ROWS = """
import hashlib, flowsim
from flowsim.targets import double_gaussian
flow = flowsim.Flow(flowsim.Plain(double_gaussian, 8), 2 * 65536, seed=3, block_size=65536,
                    quiet=True)
print(hashlib.sha256(flow.run_blocks(1).tobytes()).hexdigest())
"""


def test_block_rows_are_the_same_bits_with_and_without_xla_splitting(python):
    """This process's rows against a fresh process's with the other setting (a pass name
    that matches nothing keeps XLA's split; :data:`NO_SPLIT_FLAG` turns it off)."""
    split_off = NO_SPLIT_FLAG in os.environ.get("XLA_FLAGS", "")
    other = "--xla_disable_hlo_passes=no-such-pass" if split_off else NO_SPLIT_FLAG
    flow = flowsim.Flow(flowsim.Plain(double_gaussian, 8), 2 * 65536, seed=3, block_size=65536,
                        quiet=True)
    here = hashlib.sha256(flow.run_blocks(1).tobytes()).hexdigest()
    run = python(_ROWS, env={"XLA_FLAGS": other})
    assert run.returncode == 0, run.stderr[-2000:]
    assert run.stdout.split() == [here]


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
