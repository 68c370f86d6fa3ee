"""In-block reductions whose bits do not depend on thread counts.

TensorFlow's CPU sum over a long axis splits the work by the number of intra-op
threads, so its rounding changes with them (and MPI ranks or Spark tasks often
run with fewer threads than a lone process).  :func:`block_sum` instead reduces
in a fixed two-stage tree: groups of ``BLOCK_QUANTUM`` consecutive events, then
the group sums.  Each stage is an innermost-axis reduction computed per output
element, which TensorFlow does not split across threads.
"""
from .blocks import BLOCK_QUANTUM
from .lazy_tf import tf


def block_sum(values):
    """Sum ``values`` of shape ``[block_size, ...]`` over axis 0, deterministically.

    One value per event (``[n]`` or ``[n, 1]``) is reshaped to ``[n/Q, Q]`` directly;
    several are transposed first so that each stage still reduces the innermost
    axis.  The direct form is the same reductions, but XLA compiles it to a
    cheaper loop than the transposed one (measured: ``docs/performance.rst``).
    """
    t = tf()
    values = t.convert_to_tensor(values)
    rest = values.shape[1:]
    if int(rest.num_elements() or 1) == 1:
        groups = t.reshape(values, [-1, BLOCK_QUANTUM])                # [n/Q, Q]
        return t.reshape(t.reduce_sum(t.reduce_sum(groups, axis=-1), axis=-1), rest)
    flat = t.reshape(values, [-1, int(rest.num_elements() or 1)])
    cols = t.transpose(flat)                                    # [w, n]
    groups = t.reshape(cols, [t.shape(cols)[0], -1, BLOCK_QUANTUM])
    stage1 = t.reduce_sum(groups, axis=-1)                      # [w, n/Q]
    stage2 = t.reduce_sum(stage1, axis=-1)                      # [w]
    return t.reshape(stage2, rest)


def count_true(mask):
    """How many of the booleans ``mask`` are True, as a float64 scalar.

    The same number as ``block_sum(cast(mask, float64))`` (a sum of zeros and
    ones below 2**53 is exact in any order), from a cheaper integer sum.
    """
    t = tf()
    return t.cast(t.reduce_sum(t.cast(mask, t.int32)), t.float64)


def segment_block_sum(values, ids, n_segments):
    """Per-segment sums of ``values`` ``[n, ...]`` by integer ``ids`` ``[n]``.

    ``tf.math.unsorted_segment_sum`` adds each segment in event order on CPU
    (and deterministically on GPU under op determinism): O(events), no dense
    events-by-bins mask.
    """
    t = tf()
    return t.math.unsorted_segment_sum(values, ids, n_segments)
