"""gym-trading-env's ``History`` indexing over every environment at once.

A reward or dynamic-feature function of gym-trading-env takes its ``History``
and reads entries as ``history["portfolio_valuation", -1]`` (the last step),
``history["position", -2]`` (the step before) or ``history["data_close", 0]``
(the episode's first step).  :class:`History` answers the same indexing with
the values of *all* environments of a batch: a :class:`Values` wrapping a
tensor (or numpy array) ``[num_envs]``.  :class:`Values` has Python's
arithmetic and comparison operators, and numpy's ufuncs (``np.log``,
``np.exp``, ``np.maximum``, ...) and ``np.where`` / ``np.clip`` dispatch to it,
so a function written for gym-trading-env, such as::

    def reward_function(history):
        return np.log(history["portfolio_valuation", -1]
                      / history["portfolio_valuation", -2])

runs unchanged inside flowsim's compiled step, on every environment at once.
Python's ``max``/``min``/``if`` on values need one number and do not work:
write ``np.maximum``, ``np.minimum``, ``np.where``.

Only the entries a step keeps are readable: index ``0`` (the episode's first
entry) and the last ``history_length`` entries (``-1 .. -history_length``);
:class:`flowsim.envs.PortfolioVectorEnv` takes ``history_length`` (default 2).
"""
import math
import numbers
import operator

import numpy as np

from ..core.lazy_tf import tf

#: numpy ufuncs a Values answers, by name, with the TensorFlow function of that name.
_TF_UFUNCS = {
    "add": "add", "subtract": "subtract", "multiply": "multiply", "divide": "divide",
    "true_divide": "divide", "power": "pow", "negative": "negative", "absolute": "abs",
    "log": "math.log", "log1p": "math.log1p", "log2": None, "log10": None, "exp": "exp",
    "expm1": "math.expm1", "sqrt": "sqrt", "square": "square", "tanh": "tanh",
    "sign": "sign", "maximum": "maximum", "minimum": "minimum", "floor": "floor",
    "ceil": "math.ceil", "greater": "greater", "greater_equal": "greater_equal",
    "less": "less", "less_equal": "less_equal", "equal": "equal", "not_equal": "not_equal",
    "logical_and": "logical_and", "logical_or": "logical_or", "logical_not": "logical_not",
    "isnan": "math.is_nan", "isfinite": "math.is_finite", "fmax": "maximum",
    "fmin": "minimum",
}
_LOGICAL = {"logical_and", "logical_or", "logical_not"}
#: Types of values computed with numpy (checked before :attr:`Values.is_tf`).
_HOST_TYPES = frozenset({float, int, np.float64, np.float32, np.ndarray, np.bool_})
_COMPARE = {"greater", "greater_equal", "less", "less_equal", "equal", "not_equal"}


def _tf_function(name):
    t = tf()
    if name == "log2":
        return lambda x: t.math.log(x) / np.log(2.0)
    if name == "log10":
        return lambda x: t.math.log(x) / np.log(10.0)
    target = t
    for part in _TF_UFUNCS[name].split("."):
        target = getattr(target, part)
    return target


def unwrap(x):
    """The tensor or array inside a :class:`Values` (anything else unchanged)."""
    return x.x if isinstance(x, Values) else x


def _real_dtype(args):
    """float32 when every float tensor among ``args`` is float32 (an environment computing
    in float32; Python numbers follow, as under numpy's NEP 50), else float64."""
    t = tf()
    floats = {a.dtype for a in args if not isinstance(a, numbers.Number) and a.dtype.is_floating}
    return t.float32 if floats == {t.float32} else t.float64


def _tf_operands(name, args):
    """Operands of a TF ufunc: floats in :func:`_real_dtype` (bools/ints too, unless
    logical)."""
    t = tf()
    args = [t.convert_to_tensor(a) if not isinstance(a, numbers.Number) else a
            for a in map(unwrap, args)]
    real = _real_dtype(args)
    out = []
    for a in args:
        if isinstance(a, numbers.Number) and not isinstance(a, bool):
            a = t.constant(float(a), real)
        elif isinstance(a, bool):
            a = t.constant(a)
        if name in _LOGICAL:
            a = a if a.dtype == t.bool else t.not_equal(a, t.zeros_like(a))
        elif a.dtype == t.bool or a.dtype.is_integer or a.dtype.is_floating:
            a = t.cast(a, real)
        out.append(a)
    return out


class Values:
    """Per-environment values ``[num_envs]`` (a tensor or numpy array) with numpy's
    operators and ufuncs: what :class:`History` returns."""

    __slots__ = ("x",)
    __array_priority__ = 1000
    #: numpy ufuncs computed otherwise on numpy values (:class:`LibmValues`).
    host_functions = {}

    def __init__(self, x):
        self.x = x

    @property
    def is_tf(self):
        x = self.x
        return type(x) is not np.ndarray and type(x) is not float and not isinstance(
            x, (np.generic, numbers.Number))

    def apply(self, name, *args):
        """numpy ufunc ``name`` of ``args`` (Values, arrays, numbers) as Values."""
        raw = [a.x if isinstance(a, Values) else a for a in args]
        if all(type(x) in _HOST_TYPES for x in raw) or not any(
                isinstance(a, Values) and a.is_tf for a in args):
            function = self.host_functions.get(name) or getattr(np, name)
            return type(self)(function(*raw))
        if name not in _TF_UFUNCS:
            raise TypeError(f"np.{name} is not available on flowsim's batched history "
                            f"values; write the function with "
                            f"{', '.join(sorted(_TF_UFUNCS))}, np.where or np.clip")
        return Values(_tf_function(name)(*_tf_operands(name, args)))

    def __array_ufunc__(self, ufunc, method, *inputs, **kwargs):
        if method != "__call__" or kwargs:
            raise TypeError(f"np.{ufunc.__name__}.{method} with {sorted(kwargs)} is not "
                            f"available on flowsim's batched history values")
        return self.apply(ufunc.__name__, *inputs)

    def __array_function__(self, func, types, args, kwargs):
        if func is np.where and not kwargs and len(args) == 3:
            cond, a, b = args
            if not any(isinstance(v, Values) and v.is_tf for v in args):
                return type(self)(np.where(*map(unwrap, args)))
            t = tf()
            cond = self.apply("not_equal", cond, 0.0).x if not (
                isinstance(unwrap(cond), t.Tensor) and unwrap(cond).dtype == t.bool) \
                else unwrap(cond)
            a, b = _tf_operands("add", (a, b))
            return Values(t.where(cond, a + t.zeros_like(b), b + t.zeros_like(a)))
        if func is np.clip and len(args) == 3 and not kwargs:
            x, low, high = args
            return self.apply("minimum", self.apply("maximum", x, low), high)
        if not any(isinstance(v, Values) and v.is_tf for v in args):
            return func(*map(unwrap, args), **kwargs)
        raise TypeError(f"np.{func.__name__} is not available on flowsim's batched history "
                        f"values (only ufuncs, np.where and np.clip)")

    def __array__(self, dtype=None, copy=None):
        if self.is_tf:
            return np.asarray(self.x.numpy(), dtype=dtype)
        return np.asarray(self.x, dtype=dtype)

    def __bool__(self):
        raise TypeError("a flowsim history value holds one number per environment: "
                        "`if`, `and`, `or`, `max()` and `min()` need one; use np.where, "
                        "np.maximum, np.minimum, & and |")

    def __float__(self):
        return float(np.asarray(self).reshape(-1)[0]) if np.size(np.asarray(self)) == 1 \
            else self.__bool__()

    def __repr__(self):
        return f"Values({self.x!r})"

    # Python operators: the ufunc of the same meaning
    def __add__(self, o): return self.apply("add", self, o)
    def __radd__(self, o): return self.apply("add", o, self)
    def __sub__(self, o): return self.apply("subtract", self, o)
    def __rsub__(self, o): return self.apply("subtract", o, self)
    def __mul__(self, o): return self.apply("multiply", self, o)
    def __rmul__(self, o): return self.apply("multiply", o, self)
    def __truediv__(self, o): return self.apply("true_divide", self, o)
    def __rtruediv__(self, o): return self.apply("true_divide", o, self)
    def __pow__(self, o): return self.apply("power", self, o)
    def __rpow__(self, o): return self.apply("power", o, self)
    def __neg__(self): return self.apply("negative", self)
    def __pos__(self): return self
    def __abs__(self): return self.apply("absolute", self)
    def __lt__(self, o): return self.apply("less", self, o)
    def __le__(self, o): return self.apply("less_equal", self, o)
    def __gt__(self, o): return self.apply("greater", self, o)
    def __ge__(self, o): return self.apply("greater_equal", self, o)
    def __eq__(self, o): return self.apply("equal", self, o)
    def __ne__(self, o): return self.apply("not_equal", self, o)
    def __and__(self, o): return self.apply("logical_and", self, o)
    def __rand__(self, o): return self.apply("logical_and", o, self)
    def __or__(self, o): return self.apply("logical_or", self, o)
    def __ror__(self, o): return self.apply("logical_or", o, self)
    def __invert__(self): return self.apply("logical_not", self)
    __hash__ = None


#: The processor's NaN of an invalid operation (``0 / 0``; its sign is the processor's).
_INVALID = math.inf * 0.0


def divide(a, b):
    """``a / b`` of Python floats with the processor's infinities and NaN (numpy's)
    where Python raises."""
    if b:
        return a / b
    if a != a:
        return a
    if a == 0:
        return _INVALID
    return math.copysign(math.inf, a) * math.copysign(1.0, b)


def libm_log_float(x):
    """The C library's ``log`` of a Python float (``math.log``) with IEEE's ``-inf``
    and NaN where Python raises."""
    return math.log(x) if x > 0 else (-math.inf if x == 0 else math.nan)


def libm_log(x):
    """``np.log`` of a float64 array, each value the C library's ``log`` (Python's
    ``math.log``), as XLA computes it on CPUs; numpy's own differs in the last bit
    for about 2 % of values.  ``log(0) = -inf``, ``log(x < 0) = nan``."""
    if type(x) is float or type(x) is np.float64:
        return np.float64(libm_log_float(x))
    values = np.asarray(x, np.float64)
    out = [libm_log_float(v) for v in values.reshape(-1).tolist()]
    return np.array(out, np.float64).reshape(values.shape)


class LibmValues(Values):
    """:class:`Values` of numpy arrays whose ``np.log`` (``log2``, ``log10``) is the C
    library's (:func:`libm_log`): the numbers of an XLA-compiled history function on
    CPUs, for :mod:`flowsim.envs.portfolio_eager`.  Other transcendental ufuncs
    (``np.exp``, ``np.tanh``, ...) are numpy's, which XLA's own may differ from in
    the last bit."""

    __slots__ = ()
    host_functions = {"log": libm_log,
                      "log2": lambda x: libm_log(x) / np.log(2.0),
                      "log10": lambda x: libm_log(x) / np.log(10.0)}


def _maximum(a, b):
    """numpy's ``maximum`` of two floats: NaN wins, ``b`` on a tie (``0.0, -0.0``)."""
    return a if a != a or a > b else b


def _minimum(a, b):
    """numpy's ``minimum`` of two floats: NaN wins, ``b`` on a tie (``0.0, -0.0``)."""
    return a if a != a or a < b else b


#: ufuncs a :class:`LibmScalar` of Python floats computes in Python: the operations
#: whose float64 result numpy's (and XLA's on CPUs) is exactly.
_FLOAT_UFUNCS = {
    "add": operator.add, "subtract": operator.sub, "multiply": operator.mul,
    "true_divide": divide, "divide": divide, "negative": operator.neg,
    "absolute": abs, "log": libm_log_float, "maximum": _maximum, "minimum": _minimum,
    "greater": operator.gt,
    "greater_equal": operator.ge, "less": operator.lt, "less_equal": operator.le,
    "equal": operator.eq, "not_equal": operator.ne,
}
#: The one-operand ufuncs of :data:`_FLOAT_UFUNCS`, by ufunc.
_FLOAT_UNARY = {np.absolute: abs, np.negative: operator.neg, np.log: libm_log_float}
#: Python ints exactly representable as floats (numpy converts them so).
_EXACT_INT = 2 ** 53


def _is_real(x):
    return type(x) is float or (type(x) is int and -_EXACT_INT <= x <= _EXACT_INT)


class LibmScalar(LibmValues):
    """:class:`LibmValues` of one environment, whose value is usually a Python float:
    its arithmetic, comparisons, ``np.abs``, ``np.log``, ``np.maximum``,
    ``np.minimum`` and ``np.where`` run on Python floats (the same IEEE operations as
    numpy's float64, without numpy's per-call cost); anything else (another ufunc,
    an array operand) as :class:`LibmValues` computes it."""

    __slots__ = ()

    def apply(self, name, *args):
        raw = [a.x if type(a) is LibmScalar else a for a in args]
        function = _FLOAT_UFUNCS.get(name)
        if function is not None and all(map(_is_real, raw)) and float in map(type, raw):
            return LibmScalar(function(*raw))
        with np.errstate(all="ignore"):
            out = super().apply(name, *args)
        return LibmScalar(float(out.x)) if type(out.x) is np.float64 else out

    def __array_ufunc__(self, ufunc, method, *inputs, **kwargs):
        if len(inputs) == 1 and type(self.x) is float and method == "__call__" and not kwargs:
            function = _FLOAT_UNARY.get(ufunc)
            if function is not None:
                return LibmScalar(function(self.x))
        return super().__array_ufunc__(ufunc, method, *inputs, **kwargs)

    def __array_function__(self, func, types, args, kwargs):
        if func is np.where and not kwargs and len(args) == 3:
            cond, a, b = (v.x if type(v) is LibmScalar else v for v in args)
            if type(cond) in (bool, float) and type(a) is float and type(b) is float:
                return LibmScalar(a if cond else b)
        with np.errstate(all="ignore"):
            return super().__array_function__(func, types, args, kwargs)

    def _binary(name, reverse=False):
        function = _FLOAT_UFUNCS[name]

        def method(self, o):
            a, b = self.x, o.x if type(o) is LibmScalar else o
            if type(a) is float and (type(b) is float or _is_real(b)):
                return LibmScalar(function(b, a) if reverse else function(a, b))
            return self.apply(name, o, self) if reverse else self.apply(name, self, o)
        method.__name__ = name
        return method

    __add__, __radd__ = _binary("add"), _binary("add", True)
    __sub__, __rsub__ = _binary("subtract"), _binary("subtract", True)
    __mul__, __rmul__ = _binary("multiply"), _binary("multiply", True)
    __truediv__, __rtruediv__ = _binary("true_divide"), _binary("true_divide", True)
    __lt__, __le__ = _binary("less"), _binary("less_equal")
    __gt__, __ge__ = _binary("greater"), _binary("greater_equal")
    __eq__, __ne__ = _binary("equal"), _binary("not_equal")
    __hash__ = None
    del _binary


_MISSING = object()


class History:
    """The entries of a batch of episodes, indexed as gym-trading-env's ``History``.

    ``history[column, t]`` is :class:`Values` ``[num_envs]``: ``t = 0`` the
    episode's first entry, ``t = -1`` the last, down to ``-history_length``.
    ``columns`` lists the names (``idx``, ``step``, ``position_index``,
    ``position``, ``real_position``, ``portfolio_valuation``,
    ``portfolio_distribution_*``, ``reward`` and ``data_<column>`` of each
    numeric non-feature column of the DataFrame).

    ``entries`` holds the rows: ``entries[0]`` the first entry, ``entries[-k]``
    the k-th last; each ``[len(columns), num_envs]`` (tensors or arrays).
    """

    def __init__(self, columns, first, last):
        self.columns = list(columns)
        self._index = {c: i for i, c in enumerate(self.columns)}
        self._first = first
        self._last = list(last)          # last[0] is entry -1, last[1] entry -2, ...
        self._length = len(self._last)
        self._values = None

    #: What ``history[column, t]`` returns the values as.
    values_class = Values

    @classmethod
    def of_values(cls, columns, values, history_length, values_class=Values):
        """A history holding only ``values``: ``{(column, t): tensor [n]}`` (what
        :func:`reads` found the functions read); reading another entry is refused.
        ``values_class``: :class:`Values` or :class:`LibmValues`."""
        history = cls(columns, None, [])
        history._values, history._length = dict(values), int(history_length)
        history.values_class = values_class
        return history

    @property
    def history_length(self):
        return self._length

    def _check(self, arg):
        """``(column, t)`` of ``history[arg]``, refused with gym-trading-env's message
        for an unknown column and flowsim's for an entry it does not keep."""
        if type(arg) is tuple and len(arg) == 2 and type(arg[1]) is int and \
                arg[0] in self._index and -self._length <= arg[1] <= 0:
            return arg                              # the usual read, checked quickly
        if not (isinstance(arg, tuple) and len(arg) == 2):
            raise TypeError(f"history[{arg!r}]: flowsim's batched history reads one entry "
                            f"at a time, history[column, t] with t = 0 or -1 .. "
                            f"-{self.history_length} (history_length)")
        column, t = arg
        if column not in self._index:
            raise ValueError(f"Feature {column} does not exist ... Check the available "
                             f"features : {self.columns}")
        if isinstance(t, bool) or not isinstance(t, numbers.Integral) or not (
                t == 0 or -self.history_length <= t <= -1):
            raise IndexError(f"history[{column!r}, {t!r}]: flowsim keeps the first entry (0) "
                             f"and the last history_length={self.history_length} (-1 .. "
                             f"-{self.history_length}); raise history_length to read further "
                             f"back")
        return column, int(t)

    def __getitem__(self, arg):
        if type(arg) is tuple and len(arg) == 2 and type(arg[1]) is int and \
                self._values is not None:
            value = self._values.get(arg, _MISSING)
            if value is not _MISSING:
                return self.values_class(value)                 # a kept entry, quickly
        column, t = self._check(arg)
        if self._values is not None:
            if (column, t) not in self._values:
                raise RuntimeError(
                    f"history[{column!r}, {t}] was not read when flowsim first traced the "
                    f"reward and feature functions (it keeps only the entries they read): "
                    f"a function must read the same history entries on every call")
            return self.values_class(self._values[column, t])
        entry = self._first if t == 0 else self._last[-t - 1]
        return Values(entry[self._index[column]])

    def __len__(self):
        raise TypeError("len(history): flowsim's batched history has one length per "
                        "environment; read history['step', -1] + 1")


class _Recording(History):
    """A history that notes each ``(column, t)`` read and answers a placeholder."""

    def __init__(self, columns, history_length, placeholder):
        super().__init__(columns, None, [])
        self._length, self._placeholder, self.read = int(history_length), placeholder, set()

    def __getitem__(self, arg):
        key = self._check(arg)
        self.read.add(key)
        return Values(self._placeholder)


def reads(functions, columns, history_length):
    """The entries ``{(column, t)}`` that ``functions`` read from a history.

    Each function is called once on a recording history whose values are
    float64 placeholders ``[None]`` of a throwaway TF graph (nothing runs), so a
    compiled step can keep just those entries instead of every column of the
    last ``history_length`` entries.  A function must read the same entries on
    every call (it cannot branch on values anyway: see :class:`Values`).
    Errors a function raises (an unknown column, an entry beyond
    ``history_length``) surface here, when the environment is built.
    """
    t = tf()
    with t.Graph().as_default():
        placeholder = t.compat.v1.placeholder(t.float64, [None])
        history = _Recording(columns, history_length, placeholder)
        for function in functions:
            try:
                function(history)
            except (TypeError, ValueError, KeyError, IndexError) as exc:
                name = getattr(function, "__name__", repr(function))
                raise type(exc)(f"{name}(history): {exc}") from exc
    return history.read


def last_position_taken(history):
    """gym-trading-env's default dynamic feature: the position last chosen."""
    return history["position", -1]


def real_position(history):
    """gym-trading-env's default dynamic feature: the portfolio's real position."""
    return history["real_position", -1]


def log_return(history):
    """gym-trading-env's default reward: the log of the portfolio's return over the step."""
    return np.log(history["portfolio_valuation", -1] / history["portfolio_valuation", -2])
