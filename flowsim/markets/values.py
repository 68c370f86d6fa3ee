"""pams JSON values: random values, counts, numbers, ``extends`` (no TensorFlow)."""
import json
import math
import os
from dataclasses import dataclass


@dataclass(frozen=True)
class Dist:
    """One of pams's JSON random values: ``kind`` in const, uniform, normal, expon."""

    kind: str
    args: tuple

    @classmethod
    def parse(cls, value, where):
        if isinstance(value, bool):
            raise ValueError(f"{where}: expected a number or a pams distribution, got {value!r}")
        if isinstance(value, (int, float)):
            return cls("const", (float(value),))
        if isinstance(value, list):
            return cls("uniform", cls._args(value, 2, where, "[min, max]"))
        if isinstance(value, dict):
            if len(value) != 1:
                raise ValueError(f"{where}: one distribution per value, got {sorted(value)}")
            (kind, args), = value.items()
            shapes = {"const": (1, "[value]"), "uniform": (2, "[min, max]"),
                      "normal": (2, "[mu, sigma]"), "expon": (1, "[lambda]")}
            if kind not in shapes:
                raise ValueError(f"{where}: unknown distribution {kind!r}; pams knows "
                                 f"{', '.join(shapes)}")
            return cls(kind, cls._args(args, *shapes[kind], where))
        raise ValueError(f"{where}: expected a number or a pams distribution, got {value!r}")

    @staticmethod
    def _args(args, n, where, shape):
        if (not isinstance(args, list) or len(args) != n
                or not all(isinstance(a, (int, float)) and not isinstance(a, bool)
                           for a in args)):
            raise ValueError(f"{where}: expected {shape}, got {args!r}")
        return tuple(float(a) for a in args)

    def support(self):
        """``(low, high)`` of the values this draws (``high`` may be inf)."""
        if self.kind == "const":
            return self.args[0], self.args[0]
        if self.kind == "uniform":
            return min(self.args), max(self.args)
        if self.kind == "expon":
            lam = self.args[0]
            return (0.0, 0.0) if lam == 0 else (0.0, math.inf) if lam > 0 else (-math.inf, 0.0)
        return (-math.inf, math.inf) if self.args[1] != 0 else (self.args[0], self.args[0])

    def max_int(self):
        """Largest ``int()`` of a draw.  A uniform draw ``a + u (b - a)`` can round up to
        ``b`` itself although ``u < 1`` (``1 + (1 - 2**-53)`` is 2.0 in float64), so the
        bound is ``int(b)``, not ``b - 1``."""
        return int(self.support()[1])

    def to_json(self):
        return self.args[0] if self.kind == "const" else {self.kind: list(self.args)}


#: The keys of an agent's balance sheet pams requires of every agent group
#: (``Agent.setup``): starting cash and units held in each market it reaches.
BALANCE_KEYS = ("cashAmount", "assetVolume")


def balance(settings, where):
    """``(cash, asset)``: the :class:`Dist` of ``cashAmount`` and ``assetVolume`` of agent
    group ``where`` (pams draws each agent's once; units are ``int()`` of the draw), or
    the ValueError pams raises for a missing one, naming the key and the group."""
    out = []
    for key in BALANCE_KEYS:
        if key not in settings:
            raise ValueError(f"{where}: {key} is a required property of agent settings "
                             f"(pams refuses a group without it): add e.g. "
                             f"\"{key}\": {10000 if key == 'cashAmount' else 50}")
        out.append(Dist.parse(settings[key], f"{where}.{key}"))
    return tuple(out)


def pams_int(value, where):
    """``int(value)`` as pams reads counts (``"100"`` and ``100.0`` are 100), or a
    ValueError naming ``where``."""
    if isinstance(value, bool):
        raise ValueError(f"{where} must be an integer, got {value!r}")
    try:
        return int(value)
    except (TypeError, ValueError):
        raise ValueError(f"{where} must be an integer (pams reads it with int()), got "
                         f"{value!r}") from None


def count(settings, key, where):
    """pams's group size: ``key`` (``numAgents``/``numMarkets``) or ``to - from + 1``."""
    if "from" in settings or "to" in settings:
        if "from" not in settings or "to" not in settings:
            raise ValueError(f"{where}: both from and to are required")
        if key in settings:
            raise ValueError(f"{where}: {key} and from/to cannot be used together; keep one")
        n = (pams_int(settings["to"], f"{where}.to")
             - pams_int(settings["from"], f"{where}.from") + 1)
    else:
        n = pams_int(settings.get(key, 1), f"{where}.{key}")
    if n < 1:
        raise ValueError(f"{where}.{key} must be a positive integer, got {n!r}")
    return n


def number(value, where):
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise ValueError(f"{where} must be a finite number, got {value!r}")
    return float(value)


def positive(value, where):
    value = number(value, where)
    if value <= 0:
        raise ValueError(f"{where} must be > 0, got {value!r}")
    return value


def integer(value, where, minimum=0):
    """A JSON integer as pams's ``isinstance(x, int)`` checks want it."""
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise ValueError(f"{where} must be an integer >= {minimum}, got {value!r}")
    return value


def flag(value, where):
    if not isinstance(value, bool):
        raise ValueError(f"{where} must be true or false, got {value!r}")
    return value


def extends(whole, name, target, excludes=()):
    """pams's ``json_extends``: follow ``extends`` chains, the child's keys winning."""
    out = dict(target)
    seen = [name]
    while "extends" in out:
        parent = out.pop("extends")
        if parent not in whole:
            raise ValueError(f"{name} cannot extend {parent!r}: no such entry in the config")
        if parent in seen:
            raise ValueError(f"{name} has an extends loop ({' -> '.join(seen + [parent])})")
        seen.append(parent)
        out = {**{k: v for k, v in whole[parent].items() if k not in excludes}, **out}
    return out


def load(config):
    """A pams config as a dict: a dict, a path to a JSON file, or an open file."""
    if isinstance(config, dict):
        return config
    if isinstance(config, (str, os.PathLike)):
        with open(config, encoding="utf-8") as fh:
            return json.load(fh)
    if hasattr(config, "read"):
        return json.load(config)
    raise TypeError(f"config must be a dict, a path to a pams JSON file or an open file, "
                    f"got {type(config).__name__}")
