"""Backend names to Flow factories, for :func:`flowsim.integrate`, the CLI and the
finance, markets and envs helpers (``backend=``).

Built-in names (``None``/"flow", "threads", "scheduled", "mpi", "spark",
"joblib") map to ``"module:factory"``; the module is imported only when the
backend is asked for, so MPI and Spark stay optional dependencies.

Other backends join in one of three ways, each giving an *executor factory*:
``factory(**backend_keywords)`` returns a :class:`flowsim.core.backend.Executor`.

* :func:`register_backend` ``(name, factory, schedules=False)`` in the running process;
* an entry point of an installed package, group ``flowsim.backends``
  (``[project.entry-points."flowsim.backends"] pool = "mypkg.backend:PoolExecutor"``
  in its ``pyproject.toml``); loaded when the name is first asked for.  A
  factory with a true ``schedules`` attribute takes ``schedule=``;
* a ``"module:factory"`` string in place of a name (``flowsim run --backend
  mypkg.backend:PoolExecutor``).

The keywords given with such a backend (``integrate(f, 4, 10**6, 5,
backend="pool", workers=4)``) are split: those of :class:`flowsim.Flow`
(``events_limit``, ``dtype``, ``quiet``...) go to the Flow, the others (and
``device``) to the factory.
"""
import importlib
import inspect

BACKENDS = {
    None: "flowsim.core.flow:Flow",
    "flow": "flowsim.core.flow:Flow",
    "threads": "flowsim.distribution.threads:ThreadPoolFlow",
    "scheduled": "flowsim.distribution.threads:ScheduledFlow",
    "mpi": "flowsim.distribution.mpi:MPIFlow",
    "spark": "flowsim.distribution.spark:SparkFlow",
    "joblib": "flowsim.distribution.joblib:JoblibFlow",
}
#: Built-in backends that take ``schedule=`` (how an iteration is cut among workers).
SCHEDULE_BACKENDS = ("threads", "scheduled", "mpi")
#: The entry point group of installed backends.
ENTRY_POINT_GROUP = "flowsim.backends"

#: name -> (executor factory, takes schedule=): :func:`register_backend`'s table.
REGISTERED = {}


def register_backend(name, factory, *, schedules=False):
    """Make ``factory`` the backend ``name`` of :func:`flowsim.integrate`, the
    helpers that take ``backend=`` and ``flowsim run --backend NAME``.

    Parameters
    ----------
    name : str
        The backend's name; not one of the built-in names (:data:`BACKENDS`).
        Registering a name again replaces its factory.
    factory : callable
        ``factory(**backend_keywords)`` returns a
        :class:`flowsim.core.backend.Executor` (a subclass is a factory).
        It receives the keywords a caller gives that are not
        :class:`flowsim.Flow`'s, plus ``device`` when given.
    schedules : bool
        Whether the backend takes ``schedule=`` (``--schedule`` in the CLI);
        default False, and then ``--schedule`` is refused for it.
    """
    if not isinstance(name, str) or not name or ":" in name:
        raise ValueError(f"register_backend: name must be a non-empty string without ':', "
                         f"got {name!r}")
    if name in BACKENDS:
        raise ValueError(f"register_backend: {name!r} is a built-in backend; choose another "
                         f"name")
    if not callable(factory):
        raise TypeError(f"register_backend: factory must be callable (returning a "
                        f"flowsim Executor), got {type(factory).__name__}")
    REGISTERED[name] = (factory, bool(schedules))


def _entry_point(name):
    """The executor factory an installed package registers as ``name``, or None."""
    from importlib.metadata import entry_points
    for ep in entry_points(group=ENTRY_POINT_GROUP):
        if ep.name == name:
            factory = ep.load()
            register_backend(name, factory, schedules=bool(getattr(factory, "schedules",
                                                                   False)))
            return REGISTERED[name]
    return None


def _dotted(spec):
    module, _, attr = spec.partition(":")
    try:
        obj = importlib.import_module(module)
    except ImportError as exc:
        raise ImportError(f"backend {spec!r}: cannot import module {module!r}: {exc}") from exc
    for part in attr.split("."):
        if not hasattr(obj, part):
            raise ValueError(f"backend {spec!r}: module {module!r} has no {attr!r}")
        obj = getattr(obj, part)
    if not callable(obj):
        raise TypeError(f"backend {spec!r} is not callable (want an Executor factory)")
    return obj, bool(getattr(obj, "schedules", False))


def _third_party(backend):
    """``(factory, schedules)`` for a registered, installed or "module:factory" backend,
    or None."""
    if not isinstance(backend, str):
        return None
    if ":" in backend:
        return _dotted(backend)
    return REGISTERED.get(backend) or _entry_point(backend)


def names():
    """Every backend name known now: built-in, registered, installed."""
    from importlib.metadata import entry_points
    found = [k for k in BACKENDS if k] + sorted(REGISTERED)
    found += sorted(ep.name for ep in entry_points(group=ENTRY_POINT_GROUP)
                    if ep.name not in found)
    return found


def takes_schedule(backend):
    """Whether ``backend`` takes ``schedule=``."""
    if backend in SCHEDULE_BACKENDS:
        return True
    if backend in BACKENDS:
        return False
    found = _third_party(backend)
    return bool(found and found[1])


def flow_class(backend):
    """A Flow factory for ``backend``: called as ``(simulation, n_events=..., seed=...,
    **keywords)`` it returns a :class:`flowsim.Flow` (for ``None``: Flow itself).

    ``backend`` is None, a built-in name, a registered or installed name, a
    ``"module:factory"`` string, or a class/function that builds a Flow
    (returned as is)."""
    if callable(backend) and not isinstance(backend, str):
        return backend
    if backend in BACKENDS:
        module, _, name = BACKENDS[backend].partition(":")
        try:
            mod = importlib.import_module(module)
        except ImportError as exc:
            extra = {"mpi": "mpi", "spark": "spark"}.get(backend)
            hint = f" (pip install 'flowsim[{extra}]')" if extra else ""
            raise ImportError(f"backend {backend!r} is not available{hint}: {exc}") from exc
        return getattr(mod, name)
    found = _third_party(backend)
    if found is None:
        raise ValueError(f"unknown backend {backend!r}; choose None, one of "
                         f"{', '.join(map(repr, names()))}, or 'module:factory' (an "
                         f"Executor factory; flowsim.register_backend adds a name)")
    return executor_flow(backend, found[0])


def _flow_keywords():
    from ..core.flow import Flow
    return set(inspect.signature(Flow).parameters) - {"simulation", "n_events", "seed",
                                                      "executor", "device"}


def executor_flow(name, factory):
    """A Flow factory for the executor factory ``factory`` (backend ``name``): Flow's
    keywords go to :class:`flowsim.Flow`, the others (and ``device``) to ``factory``."""
    from ..core.backend import Executor
    from ..core.flow import backend_flow

    def make_flow(simulation, n_events, seed=None, **keywords):
        flow_keywords = _flow_keywords()
        mine = {k: v for k, v in keywords.items() if k not in flow_keywords}
        theirs = {k: v for k, v in keywords.items() if k in flow_keywords}
        try:
            inspect.signature(factory).bind(**mine)
        except TypeError as exc:
            raise TypeError(f"backend {name!r} does not take {', '.join(sorted(mine))}: "
                            f"{exc}") from None
        except ValueError:                 # no signature (a builtin): let the call decide
            pass

        def executor():
            made = factory(**mine)
            if not isinstance(made, Executor):
                raise TypeError(f"backend {name!r}: its factory returned "
                                f"{type(made).__name__}, not a flowsim.core.backend.Executor")
            return made
        return backend_flow(f"backend {name!r}", executor, simulation, n_events, seed, theirs)

    make_flow.__name__ = make_flow.__qualname__ = f"flow_of_{name}".replace(":", "_") \
        .replace(".", "_")
    return make_flow
