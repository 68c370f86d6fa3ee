"""The result of a run: estimate, per-iteration table, timing, timeline."""
import json

import numpy as np

from .log import logger
from .stats import chi2_limit, combine


def _jsonable(x):
    if isinstance(x, dict):
        return {str(k): _jsonable(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [_jsonable(v) for v in x]
    if isinstance(x, np.ndarray):
        return x.tolist()
    if isinstance(x, np.generic):
        return x.item()
    return x


def _finite_or_none(x):
    if isinstance(x, dict):
        return {k: _finite_or_none(v) for k, v in x.items()}
    if isinstance(x, list):
        return [_finite_or_none(v) for v in x]
    if isinstance(x, float) and not np.isfinite(x):
        return None
    return x


def _scalar_or_array(a):
    a = np.asarray(a, dtype=np.float64)
    return float(a.reshape(())) if a.size == 1 else a


def _events_and_states(records):
    """Events and state ids of iteration records (records without an id never pool)."""
    return [r["events"] for r in records], [r.get("state_id") for r in records]


class Result:
    """What :meth:`flowsim.Flow.run` returns.

    Attributes
    ----------
    value, error : float or numpy array
        The kept iterations combined (:func:`flowsim.core.stats.combine`) and the
        standard error of that value (arrays for vector-valued integrands).
        Iterations run with the same state (plain Monte Carlo, path pricing,
        a frozen VEGAS map) are pooled: exactly one iteration of all their
        events.  Iterations of an adapting map are averaged with weights whose
        variances are floored by the run's average per-event variance, so no
        iteration gets overwhelming weight from a zero or underestimated error.
    chi2_dof : float, array or None
        How far the kept iterations scatter about ``value`` compared with their
        errors: ``sum (v_i - value)² / e_i² / (n_kept - 1)``, each ``e_i²``
        floored as above.  Near 1 when the errors are honest and the
        iterations agree; well above 1 (say > 2 over several iterations) when
        they disagree, as when an adaptive map found a peak it had missed.
        ``None`` with one kept iteration (nothing to compare).
    iterations : list of dict
        One record per iteration: ``iteration``, ``value``, ``error``,
        ``events``, ``seconds``, ``kept`` and any extras the simulation returns.
    n_events : int
        Events run over all iterations of this call (resumed ones included).
    wall_time, events_per_second : float
    timeline : list of dict
        Per chunk: ``iteration``, ``device``, ``first_block``, ``blocks``,
        ``start``, ``end`` (seconds since the run started).
    histograms : dict
        ``{name: {"edges", "values", "errors"}}`` combined over kept iterations.
    """

    def __init__(self, iterations, wall_time, timeline=(), meta=None, skip=0):
        self.iterations = list(iterations)
        self.wall_time = float(wall_time)
        self.timeline = list(timeline)
        self.meta = dict(meta or {})
        self.skip = int(skip)
        for i, rec in enumerate(self.iterations):
            rec["kept"] = i >= self.skip
        kept = [r for r in self.iterations if r["kept"]] or self.iterations[-1:]
        values = np.array([np.atleast_1d(r["value"]) for r in kept])
        errors = np.array([np.atleast_1d(r["error"]) for r in kept])
        mean, err, chi2 = combine(values, errors, *_events_and_states(kept))
        self.value = _scalar_or_array(mean)
        self.error = _scalar_or_array(err)
        self.chi2_dof = None if chi2 is None else _scalar_or_array(chi2)
        self.n_events = int(sum(r["events"] for r in self.iterations))
        self.events_per_second = (self.n_events / self.wall_time if self.wall_time > 0
                                  else float("nan"))
        self.histograms = self._combine_histograms(kept)

    @staticmethod
    def _combine_histograms(kept):
        names = kept[-1].get("histograms", {}) if kept else {}
        out = {}
        for name in names:
            vals = np.array([r["histograms"][name]["values"] for r in kept])
            errs = np.array([r["histograms"][name]["errors"] for r in kept])
            mean, err, _ = combine(vals, errs, *_events_and_states(kept))
            out[name] = {"edges": np.asarray(kept[-1]["histograms"][name]["edges"]),
                         "values": mean, "errors": err}
        return out

    @property
    def efficiency(self):
        """Load balance: busy device time / (devices x span of the chunks)."""
        if not self.timeline:
            return float("nan")
        devices = {c["device"] for c in self.timeline}
        busy = sum(c["end"] - c["start"] for c in self.timeline)
        span = 0.0
        for it in {c["iteration"] for c in self.timeline}:
            chunks = [c for c in self.timeline if c["iteration"] == it]
            span += max(c["end"] for c in chunks) - min(c["start"] for c in chunks)
        return busy / (len(devices) * span) if span > 0 else float("nan")

    def to_dict(self):
        """Plain-Python dictionary (JSON-ready) of everything above."""
        return _jsonable({
            "value": self.value, "error": self.error, "chi2_dof": self.chi2_dof,
            "n_events": self.n_events, "wall_time": self.wall_time,
            "events_per_second": self.events_per_second,
            "efficiency": self.efficiency,
            "iterations": self.iterations, "histograms": self.histograms,
            "timeline": self.timeline, "meta": self.meta,
        })

    def to_json(self, **kwargs):
        """Strict JSON of :meth:`to_dict`: NaN/Inf (e.g. the error of one event) -> null."""
        return json.dumps(_finite_or_none(self.to_dict()), allow_nan=False, **kwargs)

    def __repr__(self):
        return (f"Result(value={self.value!r}, error={self.error!r}, "
                f"chi2_dof={self.chi2_dof!r}, n_events={self.n_events})")

    def __str__(self):
        meta = self.meta
        head = (f"flowsim: {meta.get('simulation', '?')} on {meta.get('backend', '?')} "
                f"({meta.get('devices', '?')}), seed {meta.get('seed', '?')}")
        lines = [head, f"{'iter':>5} {'value':>22} {'error':>12} {'events':>12} {'time/s':>8}"]
        for r in self.iterations:
            v = np.atleast_1d(r["value"])
            e = np.atleast_1d(r["error"])
            mark = "" if r["kept"] else "  (warm-up)"
            for j in range(v.size):
                label = f"{r['iteration']:>5}" if j == 0 else f"{'':>5}"
                tail = f" {r['events']:>12,} {r['seconds']:>8.3f}{mark}" if j == 0 else ""
                lines.append(f"{label} {v[j]:>22.12g} {e[j]:>12.4g}{tail}")
        v = np.atleast_1d(self.value)
        e = np.atleast_1d(self.error)
        c = None if self.chi2_dof is None else np.atleast_1d(self.chi2_dof)
        lines.append("-" * 64)
        for j in range(v.size):
            comp = f"[{j}]" if v.size > 1 else ""
            chi2 = "" if c is None else f"   chi2/dof = {c[j]:.3g}"
            lines.append(f"result{comp} = {v[j]:.12g} +/- {e[j]:.4g}{chi2}")
        lines.append(f"{self.n_events:,} events in {self.wall_time:.3f} s "
                     f"= {self.events_per_second:,.0f} events/s")
        return "\n".join(lines)


def warn_if_inconsistent(result):
    """Log a warning when the kept iterations disagree beyond their errors.

    The threshold is the 99.9 % point of chi^2 with ``n_kept - 1`` degrees of
    freedom (:func:`flowsim.core.stats.chi2_limit`): with honest errors a run is
    warned about once in a thousand.  Typical causes: an adaptive map that
    lost or found a peak between iterations, or a heavy-tailed integrand whose
    per-iteration errors are unreliable at this many events.
    """
    kept = sum(r["kept"] for r in result.iterations)
    if result.chi2_dof is None:
        return False
    worst = float(np.max(np.atleast_1d(result.chi2_dof)))
    limit = chi2_limit(kept - 1)
    if not worst > limit:
        return False
    name = result.meta.get("simulation", "run")
    advice = ("use more events per iteration, skip more warm-up iterations, or VegasPlus, "
              "whose stratification keeps every peak in view" if name == "Vegas" else
              "use more events per iteration or skip more warm-up iterations")
    logger.warning("%s: the %d kept iterations disagree (chi2/dof = %.3g, above %.3g, the "
                   "99.9%% point for honest errors): the error may be underestimated; %s",
                   name, kept, worst, limit, advice)
    return True


#: Public for core.flow (checkpoint records and configurations as JSON).
jsonable = _jsonable
