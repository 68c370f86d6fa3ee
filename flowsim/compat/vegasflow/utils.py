"""VegasFlow's TensorFlow utilities (``vegasflow.utils``) on flowsim.

Fill a histogram inside an integrand::

    from flowsim.compat.vegasflow.utils import consume_array_into_indices
    bins = tf.transpose(tf.histogram_fixed_width_bins(x, [fzero, fone], nbins=2))
    partial = consume_array_into_indices(f * weight, bins, 2)   # [2]: sums per bin

and combine masks (cuts) into one, with the indices where it holds::

    both = generate_condition_function(2, condition="and")
    mask, indices = both(cut_1, cut_2)                          # indices [n_true, 1]
"""
from ...core.lazy_tf import tf as _tf
from .configflow import DTYPE, DTYPEINT, float_me, fzero, int_me

_t = _tf()
_CONDITIONS = {"and": _t.math.logical_and, "or": _t.math.logical_or}


@_t.function(input_signature=[_t.TensorSpec(shape=[None], dtype=DTYPE),
                              _t.TensorSpec(shape=[None, None], dtype=DTYPEINT),
                              _t.TensorSpec(shape=[], dtype=DTYPEINT)])
def consume_array_into_indices(input_arr, indices, result_size):
    """``[result_size]``: the sum of the entries of ``input_arr`` whose row of
    ``indices`` (a column ``[n, 1]``) names each bin.

    ``input_arr = [a, b, c, d]``, ``indices = [[0], [1], [0], [0]]`` and
    ``result_size = 2`` give ``[a + c + d, b]``.  Typed arguments only
    (``DTYPE``, ``DTYPEINT``): :func:`py_consume_array_into_indices` casts.
    """
    all_bins = _t.range(result_size, dtype=DTYPEINT)
    eq = _t.transpose(_t.equal(indices, all_bins))
    return _t.reduce_sum(_t.where(eq, input_arr, fzero), axis=1)


def py_consume_array_into_indices(input_arr, indices, result_size):
    """:func:`consume_array_into_indices` of Python or numpy arguments (cast first)."""
    return consume_array_into_indices(float_me(input_arr), int_me(indices),
                                      int_me(result_size))


def _checked_conditions(n_mask, condition):
    """``condition`` (``"and"``, ``"or"`` or a list of ``n_mask - 1`` of them),
    checked: ValueError otherwise."""
    allowed = list(_CONDITIONS)
    if n_mask < 2:
        raise ValueError("At least two masks needed to generate a wrapper")
    if isinstance(condition, str):
        if condition not in _CONDITIONS:
            raise ValueError(f"Wrong condition {condition}, allowed values are {allowed}")
        return condition
    if len(condition) != n_mask - 1:
        raise ValueError(f"Wrong number of conditions for {n_mask} masks: {len(condition)}")
    for cond in condition:
        if cond not in _CONDITIONS:
            raise ValueError(f"Wrong condition {cond}, allowed values are {allowed}")
    return list(condition)


def generate_condition_function(n_mask, condition="and"):
    """A ``tf.function`` of ``n_mask`` boolean masks ``[n]`` returning ``(mask,
    indices)``: the masks combined and the ``[n_true, 1]`` indices (``DTYPEINT``)
    where the result is true.

    ``condition``: ``"and"`` or ``"or"`` for all masks, or a list of ``n_mask - 1``
    of them applied left to right (``["or", "and"]``: ``(m1 | m2) & m3``).  Fewer
    than two masks, an unknown condition or a list of the wrong length raise
    ValueError.
    """
    condition = _checked_conditions(n_mask, condition)
    t = _tf()

    def combined(*masks):
        if isinstance(condition, list):
            res = masks[0]
            for mask, cond in zip(masks[1:], condition):
                res = _CONDITIONS[cond](res, mask)
        elif condition == "and":
            res = t.math.reduce_all(masks, axis=0)
        else:
            res = t.math.reduce_any(masks, axis=0)
        return res, int_me(t.where(res))

    return t.function(combined, input_signature=n_mask * [t.TensorSpec(shape=[None],
                                                                      dtype=t.bool)])
