"""How :func:`flowsim.finance.from_signals` lines up its inputs and reads the bar length.

    >>> frames, index, columns = conform({"close": close, "entries": entries})
    >>> step, assumed = bar_length(None, index)   # 1 hour on hourly bars, inferred

The rules are vectorbt's (``Portfolio.from_signals`` broadcasting its inputs):

- **index**: every pandas input has the same bar index (labels and name), unless
  its index is a plain ``0..n-1`` range; anything else is refused, naming the
  input (vectorbt: "Broadcasting index is not allowed").  Plain arrays are
  matched by position.  The result takes that index.
- **columns**: inputs with several columns but different counts are aligned by
  the column levels they share (signals on ``(window, symbol)`` columns against
  closes on ``symbol``); inputs with the same count are matched by position and
  the result's columns stack the labels that differ, so entries given in another
  column order show up in the labels (``('a', 'b'), ('b', 'a')``) instead of
  taking ``close``'s names.  A series' name never conflicts.
- **freq**: given (``"1D"``, ``"D"``, ``"1h"``, ``"h"``, ``"15min"``, a
  timedelta) or read from a datetime index (its ``freq``, else the frequency
  pandas infers); when neither gives one (a range index, irregular or business-day
  bars) one day is assumed, with a warning, where vectorbt leaves the ratios out.
"""
import re
import warnings

import numpy as np

#: The annualised metrics: they depend on the bar length.
FREQ_METRICS = ("sharpe_ratio", "calmar_ratio", "omega_ratio", "sortino_ratio")


# -- bar length ----------------------------------------------------------------------------
def to_timedelta(freq):
    """``freq`` as a :class:`pandas.Timedelta`: ``"D"`` reads as ``"1D"``, ``"h"`` as ``"1h"``."""
    import pandas as pd
    if isinstance(freq, str) and re.fullmatch(r"\s*[\d.]*\s*d\s*", freq):
        freq = freq.replace("d", "D")         # "1d": pandas deprecates the lower-case unit
    if isinstance(freq, str) and freq and not freq[0].isdigit():
        return pd.Timedelta(1, unit=freq)
    return pd.Timedelta(freq)


def infer_step(index):
    """The bar length of a datetime / timedelta / period ``index``, or None."""
    import pandas as pd
    if not isinstance(index, (pd.DatetimeIndex, pd.TimedeltaIndex, pd.PeriodIndex)):
        return None
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")        # pandas: inferred_freq will become an offset
        freq = index.freq if index.freq is not None else (
            index.inferred_freq if len(index) >= 3 else None)
    if freq is None:
        return None
    try:
        offset = pd.tseries.frequencies.to_offset(freq)
        return pd.Timedelta(offset)
    except (ValueError, TypeError):
        return None                 # calendar offsets (business days, months): no fixed length


def bar_length(freq, index, stacklevel=3):
    """``(pd.Timedelta, assumed)``: the given ``freq``, the index's, or one day (warned).

    ``assumed`` is True when neither ``freq`` nor ``index`` gave a length: then
    vectorbt leaves Sharpe, Calmar, Omega and Sortino out of ``stats()``; flowsim
    computes them for one-day bars and says so.
    """
    import pandas as pd
    if freq is not None:
        return to_timedelta(freq), False
    step = infer_step(index)
    if step is not None:
        return step, False
    what = "plain arrays have no index" if index is None else (
        f"the bars' {type(index).__name__} has no fixed frequency")
    warnings.warn(f"freq=None and {what}: one-day bars assumed for "
                  f"{', '.join(FREQ_METRICS)} (vectorbt leaves them out). "
                  f"Pass freq, e.g. freq='1D' or freq='1h'",
                  UserWarning, stacklevel=stacklevel)
    return pd.Timedelta(1, unit="D"), True


# -- index -------------------------------------------------------------------------------
def _same(a, b):
    """Equal labels and names (vectorbt's strict index equality)."""
    import pandas as pd
    if isinstance(a, pd.MultiIndex) != isinstance(b, pd.MultiIndex):
        return False
    return list(a.names) == list(b.names) and a.equals(b)


def _is_range(labels):
    import pandas as pd
    return _same(labels, pd.RangeIndex(len(labels)))


def _difference(name, labels, ref_name, ref):
    if len(labels) != len(ref):
        return f"{len(labels)} labels against {len(ref)}"
    if list(labels.names) != list(ref.names):
        return f"named {list(labels.names)} against {list(ref.names)}"
    try:
        bad = np.flatnonzero(np.asarray(labels != ref))
    except TypeError:
        bad = np.zeros(0, dtype=np.int64)
    if bad.size == 0:
        return "of another type"
    i = int(bad[0])
    return f"bar {i} is {labels[i]!r} in {name}, {ref[i]!r} in {ref_name}"


def pandas_inputs(args):
    """The Series and DataFrames among ``{name: value}``."""
    return {n: x for n, x in args.items()
            if hasattr(x, "index") and hasattr(x, "to_numpy") and np.ndim(x) in (1, 2)}


def common_index(args):
    """The bar index the pandas values of ``{name: value}`` share (None if none).

    Refuses one whose index differs from another's, unless it is a plain range.
    """
    frames = pandas_inputs(args)
    ref_name, ref = None, None
    first = sorted(frames, key=lambda n: n != "close")          # close is the reference
    for name, x in ((n, frames[n]) for n in first):
        labels = x.index
        if _is_range(labels):
            continue
        if ref is None:
            ref_name, ref = name, labels
        elif not _same(labels, ref):
            why = _difference(name, labels, ref_name, ref)
            raise ValueError(
                f"{name} has another index than {ref_name} ({why}):"
                f" bars are matched by label, and vectorbt refuses it too ('Broadcasting "
                f"index is not allowed'). Align it first, e.g. {name}.reindex({ref_name}.index), "
                f"or pass {name} as a plain array to match by position")
    if ref is None:
        return next(iter(frames.values())).index if frames else None
    return ref


# -- columns -----------------------------------------------------------------------------
def column_labels(x):
    """A DataFrame's columns, a Series' name as one label (0 when unnamed)."""
    import pandas as pd
    if hasattr(x, "columns"):
        return x.columns
    return pd.Index([x.name if x.name is not None else 0])


def _levels(labels):
    import pandas as pd
    if isinstance(labels, pd.MultiIndex):
        return [labels.get_level_values(i) for i in range(labels.nlevels)]
    return [labels]


def _drop_levels(labels):
    """Drop repeated levels (the last kept) and unnamed constant or ``0..n-1`` levels."""
    import pandas as pd
    if not isinstance(labels, pd.MultiIndex):
        return labels
    seen, drop = [], []
    for i in reversed(range(labels.nlevels)):
        key = (labels.names[i], tuple(labels.get_level_values(i).tolist()))
        if key in seen:
            drop.append(i)
        else:
            seen.append(key)
    labels = labels.droplevel(drop) if drop else labels
    if not isinstance(labels, pd.MultiIndex):
        return labels
    plain = [i for i in range(labels.nlevels) if labels.names[i] is None and (
        (len(labels) > 1 and labels.get_level_values(i).nunique() == 1)
        or _is_range(pd.Index(labels.get_level_values(i), name=None)))]
    if plain and len(plain) < labels.nlevels:
        labels = labels.droplevel(plain)
    return labels


def _stack(a, b):
    import pandas as pd
    return _drop_levels(pd.MultiIndex.from_arrays(_levels(a) + _levels(b)))


def _stack_pair(out, cols, out_name, name):
    if len(cols) != len(out) and min(len(cols), len(out)) > 1:
        raise ValueError(f"{name} has {len(cols)} columns and {out_name} {len(out)}: give "
                         f"one column for all or one per column")
    n = max(len(cols), len(out))
    return _stack(out.repeat(n // len(out)), cols.repeat(n // len(cols)))


def stacked_columns(frames, n_cols):
    """The result's column labels: the inputs' labels, the differing ones stacked."""
    import pandas as pd
    labels = {name: column_labels(x) for name, x in frames.items()}
    values = list(labels.values())
    if values and all(_same(values[0], v) for v in values[1:]):
        out = values[-1]
    else:
        out, out_name = None, None
        for name, x in frames.items():
            cols = labels[name]
            if not hasattr(x, "columns") or _is_range(cols):
                continue                      # series' names and plain ranges never conflict
            if out is None:
                out, out_name = cols, name
            elif not _same(cols, out):
                out = _stack_pair(out, cols, out_name, name)
    if out is None:
        return pd.RangeIndex(n_cols)
    if n_cols > len(out) and len(out) == 1:
        out = out.repeat(n_cols)
    return out


def _positions(short, long, name, long_name):
    """Where each of ``long``'s columns is in ``short``, matched on their shared levels."""
    s_levels, l_levels = _levels(short), _levels(long)
    pairs = []
    for i, sl in enumerate(s_levels):
        for j, ll in enumerate(l_levels):
            if sl.name == ll.name and set(ll).issubset(set(sl)):
                pairs.append((i, j))
    if not pairs:
        raise ValueError(f"{name} has {len(short)} columns and {long_name} {len(long)}, and "
                         f"their column labels share no level to align them by "
                         f"({list(short.names)} vs {list(long.names)}): give one column "
                         f"for all or one per column")
    keys = list(zip(*(s_levels[i] for i, _ in pairs)))
    if len(set(keys)) != len(keys):
        raise ValueError(f"{name}'s columns repeat a label, so they cannot be aligned to "
                         f"{long_name}'s by label")
    where = {k: p for p, k in enumerate(keys)}
    return [where[k] for k in zip(*(l_levels[j] for _, j in pairs))]


def align_columns(frames):
    """DataFrames with several columns but different counts, aligned by shared levels."""
    wide = {n: x for n, x in frames.items() if hasattr(x, "columns") and x.shape[1] > 1}
    if len({x.shape[1] for x in wide.values()}) < 2:
        return frames
    long_name = max(wide, key=lambda n: wide[n].shape[1])
    long = wide[long_name].columns
    out = dict(frames)
    for name, x in wide.items():
        if x.shape[1] != len(long):
            out[name] = x.iloc[:, _positions(x.columns, long, name, long_name)]
    return out


def check_column_keywords(keywords, columns):
    """Refuse a per-column keyword given as a Series labelled otherwise than ``columns``.

    ``columns`` None (no pandas bars or signals): matched by position, as arrays are.
    """
    for name, value in keywords.items():
        if columns is None or not (hasattr(value, "to_numpy") and np.ndim(value) == 1):
            continue                       # plain inputs: one value per column, by position
        if not _is_range(value.index) and list(value.index) != list(columns):
            raise ValueError(f"{name} is labelled {list(value.index)[:6]} but the columns have "
                             f"{list(columns)[:6]}: give one value per column in the "
                             f"columns' order (e.g. {name}.reindex(close.columns)) or a list")


def conform(args):
    """``(args, index, columns)``: ``args`` with their columns aligned, and the labels.

    ``args``: ``{name: value}`` in vectorbt's order (the bars, then the signals);
    ``index`` / ``columns`` are None when no value is a pandas object.  Shapes are
    checked afterwards, by the caller.
    """
    frames = pandas_inputs(args)
    if not frames:
        return args, None, None
    index = common_index(frames)
    frames = align_columns(frames)
    n_cols = max(np.shape(x)[1] if np.ndim(x) == 2 else 1
                 for x in args.values() if x is not None and np.ndim(x) >= 1)
    columns = stacked_columns(frames, n_cols)
    return {**args, **frames}, index, columns
