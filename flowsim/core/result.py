"""The result of a run: estimate, per-iteration table, timing, timeline."""
import json
import warnings as _warnings

import numpy as np

from . import covariance
from .log import RESULT_WARNING, FlowsimWarning, logger
from .stats import chi2_limit, combine


def jsonable(x):
    """``x`` with numpy arrays and scalars turned into lists and Python numbers, tuples
    into lists and keys into strings (what JSON holds)."""
    if isinstance(x, dict):
        return {str(k): jsonable(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [jsonable(v) for v in x]
    if isinstance(x, np.ndarray):
        return x.tolist()
    if isinstance(x, np.generic):
        return x.item()
    return x


_jsonable = jsonable        # the former name (flowsim.core.flow imports it)


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

    Usage::

        result = flowsim.Flow(flowsim.Vegas(f, dim=4), 10**6, seed=1).run(6, skip=1)
        print(result)        # per iteration, then value +/- error, chi2/dof, warnings
        result.value, result.error, result.chi2_dof
        if result.warnings:  # reasons not to trust it as it stands (also FlowsimWarning)
            ...
        result.to_json()     # everything below, strict JSON

    Trust ``value ± error`` when ``warnings`` is empty: the kept iterations agree
    within their errors and no value was dropped.  With several kept iterations
    of an adaptive map, skip the first ones (``skip=``) while the map is still
    moving.

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
        Per chunk: ``iteration`` (numbered from 1, as ``iterations``), ``device``,
        ``first_block``, ``blocks``, ``start``, ``end`` (seconds since the run
        started).
    histograms : dict
        ``{name: {"edges", "values", "errors"}}`` combined over kept iterations.
    meta : dict
        What ran: ``simulation``, ``backend``, ``devices``, ``seed``, events and
        blocks, and which state the run started from: ``start_state``
        (``"fresh"``, or ``"adapted: N iterations"`` when the Simulation had
        adapted before, in an earlier run: a run starts from the state its
        Simulation holds) and ``start_state_id`` (digest of the state the first
        iteration used; equal ids, seeds and events give equal bits).
    warnings : list of str
        Why the result should not be trusted as it stands, one sentence each
        (empty when nothing is wrong): kept iterations that disagree beyond
        their errors (chi²/dof above its 99.9 % point), NaN/Inf values dropped.
        Printed with the result table; :meth:`flowsim.Flow.run` also issues
        each as a :class:`flowsim.FlowsimWarning` and logs it.
    inconsistency_advice : str or None
        What the warning about disagreeing iterations advises: the simulation's
        :attr:`~flowsim.Simulation.inconsistency_advice` (None: the general advice).
    covariance : numpy array [k, k] or None
        Covariance of the components of ``value`` (vector integrands run with
        :func:`flowsim.integrate`'s ``covariance=True``);
        see :meth:`ratio` and :meth:`difference`.
    gradient : dict
        ``{name: (value, error)}``: derivatives of ``value`` with respect to the
        integrand's parameters (:func:`flowsim.integrate`'s ``params``).
    """

    def __init__(self, iterations, wall_time, timeline=(), meta=None, skip=0, warnings=None,
                 inconsistency_advice=None):
        self.iterations = list(iterations)
        self.inconsistency_advice = inconsistency_advice
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
        self.warnings = result_warnings(self) if warnings is None else list(warnings)
        self.meta.update(start_state(self.iterations[:1]) if "start_state" not in self.meta
                         else {})
        # vector integrands whose simulation returns per-iteration covariances
        self.covariance = covariance.combine_covariance(kept)
        self.gradient = {}

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

    def _need_covariance(self, what):
        if self.covariance is None:
            raise ValueError(f"Result.{what} needs the covariance of the components: "
                             f"integrate the vector integrand with covariance=True")
        return self.covariance

    def ratio(self, i, j):
        """``(value[i] / value[j], error)``, the error propagated with the covariance."""
        return covariance.ratio(self.value, self._need_covariance("ratio"), i, j)

    def difference(self, i, j):
        """``(value[i] - value[j], error)``; correlated components (common random
        numbers) make its error much smaller than either component's."""
        return covariance.difference(self.value, self._need_covariance("difference"), i, j)

    def to_dict(self):
        """Plain-Python dictionary (JSON-ready) of everything above."""
        return jsonable({
            "value": self.value, "error": self.error, "chi2_dof": self.chi2_dof,
            "n_events": self.n_events, "wall_time": self.wall_time,
            "events_per_second": self.events_per_second,
            "efficiency": self.efficiency,
            "iterations": self.iterations, "histograms": self.histograms,
            "timeline": self.timeline, "meta": self.meta, "warnings": self.warnings,
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
        lines += [f"warning: {w}" for w in self.warnings]
        return "\n".join(lines)


def start_state(first):
    """``{"start_state", "start_state_id"}`` of a run from its first iteration record
    (in a list; nothing for records from before flowsim counted adaptations)."""
    if not first or "adapted_before" not in first[0]:
        return {}
    n = first[0]["adapted_before"]
    return {"start_state": "fresh" if n == 0 else
            f"adapted: {n} iteration{'s' if n > 1 else ''}",
            "start_state_id": first[0].get("state_id")}


def inconsistency(result):
    """The warning about kept iterations that disagree beyond their errors, or None.

    The threshold is the 99.9 % point of chi^2 with ``n_kept - 1`` degrees of
    freedom (:func:`flowsim.core.stats.chi2_limit`): with honest errors a run is
    warned about once in a thousand.  Typical causes: an adaptive map that
    lost or found a peak between iterations, or a heavy-tailed integrand whose
    per-iteration errors are unreliable at this many events.
    """
    if result.chi2_dof is None:
        return None
    kept = sum(r["kept"] for r in result.iterations)
    worst = float(np.max(np.atleast_1d(result.chi2_dof)))
    limit = chi2_limit(kept - 1)
    if not worst > limit:
        return None
    name = result.meta.get("simulation", "run")
    advice = (getattr(result, "inconsistency_advice", None)
              or "use more events per iteration or skip more warm-up iterations")
    return (f"{name}: the {kept} kept iterations disagree (chi2/dof = {worst:.3g}, above "
            f"{limit:.3g}, the 99.9% point for honest errors): the error may be "
            f"underestimated; {advice}")


def result_warnings(result):
    """What :attr:`Result.warnings` holds: :func:`inconsistency` and dropped NaN/Inf values."""
    out = [] if (chi2 := inconsistency(result)) is None else [chi2]
    dropped = {r["iteration"]: r["nonfinite"] for r in result.iterations if r.get("nonfinite")}
    if dropped:
        out.append(f"{sum(dropped.values())} NaN/Inf value(s) dropped (counted as 0) in "
                   f"iteration(s) {', '.join(map(str, dropped))}: the value is biased unless "
                   f"they are where the integrand is truly 0")
    return out


def warn_if_inconsistent(result, stacklevel=3):
    """Issue ``result.warnings``: each logged on the ``flowsim`` logger and issued as
    a :class:`~flowsim.FlowsimWarning` (``stacklevel`` 3: the line that called
    :meth:`flowsim.Flow.run`).  Returns whether the kept iterations disagree
    (:func:`inconsistency`)."""
    for message in result.warnings:
        logger.warning("%s", message, extra=RESULT_WARNING)
        _warnings.warn(message, FlowsimWarning, stacklevel=stacklevel)
    return inconsistency(result) is not None
