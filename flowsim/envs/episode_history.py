"""gym-trading-env's history of a whole episode, for the metrics of ``add_metric``.

gym-trading-env calls a metric with the episode's history (``historical_info``):
``history["position"]`` is every entry's position from the reset on,
``history["position", -1]`` the last, ``history[-1]`` the last entry as a dict,
``history[["a", "b"]]`` an array of columns, ``len(history)`` the entries.
:class:`EpisodeHistory` answers the same for one environment; :class:`EpisodeRecorder`
keeps, for a batch of environments, the columns the metrics read (found by calling
each metric once when it is added, on a short probe history) from each environment's
last reset on.
"""
import numpy as np


class EpisodeHistory:
    """One episode's entries: ``columns`` -> arrays ``[entries]`` (gym-trading-env's
    ``History`` indexing; an unknown column is refused as it refuses it)."""

    def __init__(self, arrays):
        self.arrays = dict(arrays)
        self.columns = list(self.arrays)
        self.read = set()

    def __len__(self):
        return len(next(iter(self.arrays.values()))) if self.arrays else 0

    def _column(self, column):
        if column not in self.arrays:
            raise ValueError(f"Feature {column} does not exist ... Check the available "
                             f"features : {self.columns}")
        self.read.add(column)
        return self.arrays[column]

    def __getitem__(self, arg):
        if isinstance(arg, tuple):
            column, t = arg
            return self._column(column)[t]
        if isinstance(arg, (int, np.integer)):
            return {c: self._column(c)[arg] for c in self.columns}
        if isinstance(arg, str):
            return self._column(arg)
        if isinstance(arg, list):
            return np.stack([self._column(c) for c in arg], axis=1)
        raise TypeError(f"a history is indexed by a column name, (column, t), t or a list "
                        f"of columns, got {arg!r}")


def probe(columns, entries=3):
    """A history of ``entries`` entries of ones in every column (positions alternate 0/1,
    so differences are not all zero): what a metric is first called on."""
    arrays = {c: np.ones(entries) for c in columns}
    for c in ("position", "real_position", "position_index"):
        if c in arrays:
            arrays[c] = np.arange(entries) % 2.0
    return EpisodeHistory(arrays)


def check_metric(name, function, columns):
    """The columns ``function`` reads, after calling it on :func:`probe`; a TypeError
    naming the metric and the function when it cannot work on a history."""
    if not callable(function):
        raise TypeError(f"add_metric({name!r}, ...): the metric must be a function of the "
                        f"history, got {function!r}")
    history = probe(columns)
    try:
        function(history)
    except Exception as exc:  # noqa: BLE001 - any failure is the user's to see, now
        label = getattr(function, "__name__", repr(function))
        raise TypeError(f"add_metric({name!r}, {label}): calling it on an episode's history "
                        f"of {len(history)} entries raised "
                        f"{type(exc).__name__}: {exc}; a metric takes gym-trading-env's "
                        f"history: history['position'] is the episode's positions, "
                        f"history['portfolio_valuation', -1] the last valuation") from exc
    return sorted(history.read) or list(columns)


class EpisodeRecorder:
    """The entries of ``columns`` of ``num_envs`` environments since each one's reset
    (each environment's own rows: a partial reset appends to the reset ones only)."""

    def __init__(self, columns, num_envs):
        self.columns, self.num_envs = list(columns), num_envs
        self.rows = {c: np.zeros((64, num_envs)) for c in self.columns}
        self.start = np.zeros(num_envs, dtype=np.int64)
        self.end = np.zeros(num_envs, dtype=np.int64)

    def add(self, infos, fresh, envs=None):
        """Append the entries ``infos`` (columns -> ``[num_envs]``) of environments
        ``envs`` (indices; default all); environments ``fresh`` (indices, among
        ``envs``) start an episode with them."""
        envs = np.arange(self.num_envs) if envs is None else np.asarray(envs, np.int64)
        self._room()
        self.start[fresh] = self.end[fresh]
        at = self.end[envs]
        for c in self.columns:
            self.rows[c][at, envs] = np.asarray(infos[c], np.float64)[envs]
        self.end[envs] += 1

    def episode(self, env):
        """:class:`EpisodeHistory` of environment ``env`` from its reset to now."""
        first, last = self.start[env], self.end[env]
        return EpisodeHistory({c: self.rows[c][first:last, env].copy()
                               for c in self.columns})

    def _room(self):
        """Drop the rows no episode needs; grow when one environment's rows are full."""
        keep = int(self.start.min())
        if keep:
            size = int(self.end.max())
            for c in self.columns:
                self.rows[c][:size - keep] = self.rows[c][keep:size]
            self.start -= keep
            self.end -= keep
        capacity = len(next(iter(self.rows.values())))
        if int(self.end.max()) == capacity:
            for c in self.columns:
                self.rows[c] = np.concatenate([self.rows[c], np.zeros_like(self.rows[c])])
