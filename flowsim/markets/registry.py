"""Which pams classes and events flowsim.markets runs, and how a config's keys are read.

Each pams class lives in its own module (``agents/fcn.py``, ``venues/market.py``,
``events/price_limit.py`` ...) that registers itself here under pams's class name with
:func:`register`; :func:`flowsim.markets.config.parse` only dispatches on ``"class"``.

Keys are read as pams reads them (:func:`check_keys`): keys pams ignores by convention
(``"MEMO"`` and comment keys) pass silently; a key pams reads but flowsim does not
implement is refused naming it; a key unknown to both gets a :class:`ConfigWarning`
naming it and where it is (pams ignores it too, so the run goes on).
"""
import warnings

#: pams class name -> flowsim module object, per kind.
AGENTS, MARKETS, EVENTS = {}, {}, {}
_KINDS = {"agent": AGENTS, "market": MARKETS, "event": EVENTS}

#: Keys pams's samples use as comments (pams reads none of them).
IGNORED_KEYS = frozenset({"MEMO", "memo", "Memo", "COMMENT", "comment", "comments",
                          "description", "note"})
#: Keys pams's own loop reads on every group (count, names, inheritance).
GROUP_KEYS = frozenset({"class", "extends", "from", "to", "prefix"})
#: Keys of pams's ``Agent`` that every agent class reads (and the group keys).
AGENT_KEYS = GROUP_KEYS | {"numAgents", "markets", "cashAmount", "assetVolume"}


#: pams 0.3.0 classes flowsim.markets does not run (refused naming them).
PAMS_NOT_RUN = frozenset({"HighFrequencyAgent",
                          "TestAgent"})


class ConfigWarning(UserWarning):
    """A config key that neither pams 0.3.0 nor flowsim.markets reads (ignored)."""


def register(kind, *names):
    """Class decorator: register ``cls`` as the flowsim part of pams classes ``names``."""
    table = _KINDS[kind]

    def deco(cls):
        for name in names:
            table[name] = cls
        return cls
    return deco


def is_comment(key):
    return key in IGNORED_KEYS or key.startswith(("#", "//", "_"))


def check_keys(settings, implemented, where, pams_only=(), extra_ok=()):
    """Refuse ``pams_only`` keys present in ``settings`` (pams reads them, flowsim does
    not), warn on keys in neither ``implemented`` nor ``extra_ok``."""
    for key in settings:
        if is_comment(key) or key in implemented or key in extra_ok:
            continue
        if key in pams_only:
            raise ValueError(f"{where}: pams key {key!r} is not implemented by "
                             f"flowsim.markets; remove it to run without it "
                             f"(flowsim reads {', '.join(sorted(implemented))})")
        warnings.warn(f"{where}: key {key!r} is read by neither pams 0.3.0 nor "
                      f"flowsim.markets and is ignored; check its spelling "
                      f"(known: {', '.join(sorted(implemented))})", ConfigWarning,
                      stacklevel=4)


def warn_ignored(g, key, fix, where):
    """A ConfigWarning: ``key`` is in the config, pams ignores it, so flowsim does."""
    if key in g:
        warnings.warn(f"{where}: key {key!r} is ignored: pams 0.3.0 does not read it, so "
                      f"flowsim.markets does not either (the same config gives the same "
                      f"markets in both); {fix}", ConfigWarning, stacklevel=5)


def lookup(kind, class_name, where, classes=None):
    """``(module, extra keys, {flowsim key: value})`` of pams class ``class_name`` after
    the user's ``classes`` mapping (:mod:`flowsim.markets.user_classes`; the attributes
    a user class sets, as the flowsim-only keys that model them), or a ValueError naming
    it and the ``classes=`` keyword."""
    from .user_classes import attribute_keys, inspect_class, normalise
    table = _KINDS[kind]
    classes = normalise(classes)
    mapped, extra, attributes, user = classes.get(class_name, (class_name, (), {}, None))
    if mapped in table:
        if user is not None and not attributes:
            attributes = inspect_class(user, mapped, where)
        return table[mapped], frozenset(extra), attribute_keys(mapped, attributes, where)
    known = ", ".join(sorted(table))
    if mapped in PAMS_NOT_RUN:
        raise ValueError(f"{where}: pams's {kind} class {mapped!r} is not implemented in "
                         f"flowsim.markets (it runs {known}); run this config in pams, or "
                         f"replace the class")
    if class_name in classes:
        raise ValueError(f"{where}: classes= maps {class_name!r} to {mapped!r}, which is "
                         f"not a {kind} class flowsim.markets runs ({known})")
    raise ValueError(f"{where}: unsupported {kind} class {class_name!r}; flowsim.markets "
                     f"runs {known}; a user class that behaves as one of them runs with "
                     f"classes={{{class_name!r}: 'FCNAgent'}} (or (kind, [extra keys]))"
                     if kind == "agent" else
                     f"{where}: unsupported {kind} class {class_name!r}; flowsim.markets "
                     f"runs {known}; a user class that behaves as one of them runs with "
                     f"the classes= mapping, e.g. classes={{{class_name!r}: "
                     f"({sorted(table)[0]!r}, ['extraKey'])}}")
