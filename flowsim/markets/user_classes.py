"""The ``classes=`` mapping of pams user classes to the classes flowsim runs.

Forms of a mapping (``classes={key: mapping}``)::

    {"UserDefinedFCNAgent": "FCNAgent"}                    # behaves as FCNAgent
    {"ExtendedMarket": ("Market", ["tradeVolume"])}        # and reads these keys
    {"ContrarianFCNAgent": ("FCNAgent", {"is_chart_following": False})}
    {ContrarianFCNAgent: "FCNAgent"}                        # the class itself: checked

The third form states the attributes the user class sets in code (pams's FCNAgent has
``is_chart_following``, True, which no config key sets: a contrarian subclass sets it
False in ``setup``).  A list ``[base, keys, attributes]`` is the JSON form (``--classes``).

With the class itself as the key (its name is the config's ``"class"``), flowsim
compares it with pams's class: it runs when the class overrides only ``setup`` (or
``__init__``) and they only call pams's and set :data:`ATTRIBUTES` to constants (read
from their source, e.g. ``self.is_chart_following = False``); any other override is
refused naming the class and the methods, since flowsim would run the base class's
rules in their place.  With a name, flowsim cannot see the class and runs the mapping
as given.
"""
import ast
import inspect
import textwrap

#: Attributes a user class may set (per base class) and the flowsim-only config key
#: each becomes.
ATTRIBUTES = {"FCNAgent": {"is_chart_following": "flowsim.isChartFollowing"}}
#: Methods an override of which flowsim can read (attribute assignments only).
READABLE = ("setup", "__init__")


def _user_methods(cls):
    """``{method name: function}`` defined by ``cls`` and its bases up to pams's."""
    found = {}
    for klass in cls.__mro__:
        if klass is object or klass.__module__.split(".")[0] == "pams":
            break
        for name, value in vars(klass).items():
            if inspect.isfunction(value) and name not in found:
                found[name] = value
    return found


def _assignments(function, where):
    """``{attribute: constant}`` that ``function`` sets on ``self``, or None when its
    body does anything else than call pams's method and set constants."""
    try:
        tree = ast.parse(textwrap.dedent(inspect.getsource(function)))
    except (OSError, TypeError, SyntaxError):
        return None
    out = {}
    for stmt in tree.body[0].body:
        if isinstance(stmt, ast.Expr) and isinstance(stmt.value, (ast.Call, ast.Constant)):
            if isinstance(stmt.value, ast.Call) and not _is_super_call(stmt.value):
                return None
            continue
        if (isinstance(stmt, ast.Assign) and len(stmt.targets) == 1
                and isinstance(stmt.targets[0], ast.Attribute)
                and isinstance(stmt.targets[0].value, ast.Name)
                and stmt.targets[0].value.id == "self"
                and isinstance(stmt.value, ast.Constant)):
            out[stmt.targets[0].attr] = stmt.value.value
            continue
        return None
    return out


def _is_super_call(call):
    func = call.func
    return (isinstance(func, ast.Attribute) and isinstance(func.value, ast.Call)
            and isinstance(func.value.func, ast.Name) and func.value.func.id == "super")


def inspect_class(cls, base, where):
    """The attributes user class ``cls`` sets (read from its source), or a ValueError
    naming what flowsim cannot run as ``base``."""
    methods = _user_methods(cls)
    unreadable = sorted(set(methods) - set(READABLE))
    attributes = {}
    for name in READABLE:
        if name in methods:
            found = _assignments(methods[name], where)
            if found is None:
                unreadable.append(name)
            else:
                attributes.update(found)
    known = ATTRIBUTES.get(base, {})
    unknown = sorted(set(attributes) - set(known))
    if unreadable or unknown:
        what = (f"overrides {', '.join(unreadable)}" if unreadable else
                f"sets {', '.join(unknown)}")
        raise ValueError(
            f"{where}: user class {cls.__name__!r} {what} of pams's {base}; flowsim.markets "
            f"would run {base}'s rules in their place, so the markets would differ from "
            f"pams's: run this config in pams, or, if the class only changes "
            f"{', '.join(known) or 'nothing flowsim models'}, map it as "
            f"classes={{{cls.__name__!r}: ({base!r}, {{...}})}}")
    return attributes


def normalise(classes):
    """``{class name: (base, extra keys, attributes, user class or None)}`` of a
    ``classes=`` mapping (refusing malformed entries, naming them)."""
    out = {}
    for key, mapped in (classes or {}).items():
        user = key if isinstance(key, type) else None
        name = key.__name__ if user is not None else key
        if not isinstance(name, str):
            raise TypeError(f"classes= keys must be class names or classes, got {key!r}")
        out[name] = (*_parts(name, mapped), user)
    return out


def _parts(name, mapped):
    if isinstance(mapped, str):
        return mapped, (), {}
    if not isinstance(mapped, (tuple, list)) or not mapped or not isinstance(mapped[0], str):
        raise TypeError(f"classes={{{name!r}: {mapped!r}}}: map a user class to a class name, "
                        f"or to (class name, [extra keys], {{attributes}})")
    keys, attributes = (), {}
    for part in mapped[1:]:
        if isinstance(part, dict):
            attributes = dict(part)
        elif isinstance(part, (list, tuple)):
            keys = tuple(part)
        else:
            raise TypeError(f"classes={{{name!r}: {mapped!r}}}: after the class name give a "
                            f"list of extra keys and/or a dict of attributes, got {part!r}")
    return mapped[0], keys, attributes


def attribute_keys(base, attributes, where):
    """``{flowsim-only config key: value}`` of the attributes a user class of ``base``
    sets (refusing those flowsim does not model, naming them)."""
    known = ATTRIBUTES.get(base, {})
    unknown = sorted(set(attributes) - set(known))
    if unknown:
        raise ValueError(f"{where}: classes= gives attributes {', '.join(unknown)} for a "
                         f"{base}; flowsim.markets models "
                         f"{', '.join(known) or 'none'} on {base}")
    return {known[a]: v for a, v in attributes.items()}
