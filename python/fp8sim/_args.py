"""fp8sim._args: every public function's arguments checked in one place, before the C++ core.

nanobind (and torch's op schemas) report an argument they cannot convert -- an int beyond
the C++ type, a float, None or a ``Path`` where an int or a str is expected -- as a
multi-line ``TypeError`` listing every overload, without naming the argument. ``checked``
wraps a function so that each argument is checked against its annotation first and a bad
one raises one line naming it::

    TypeError: fp8sim.encode(): seed: expected an integer, got float (2.5)
    ValueError: fp8sim.encode(): seed = 18446744073709551616 is out of range (0..2**64-1)

Annotations read (strings, as ``from __future__ import annotations`` leaves them): ``int``,
``float``, ``bool``, ``str``, ``Sequence[int]``, ``Sequence[str]``, ``Sequence[float]``,
each optionally ``Optional[...]``; others (arrays, callables, unions) are left to the
function. An int must be an integer (numpy integers too; not a bool, a float or a string) in
the range of the C++ type it becomes: ``int`` (-2**31..2**31-1) unless the function names
another range (``seed`` is a uint64 throughout). A str must be a str (a ``str`` parameter
listed in ``paths`` also takes an ``os.PathLike``, converted with ``os.fspath``) and not
empty unless its default is "". A Sequence must be a list or tuple (a str is refused: it is
not a list of names) of such values.
"""
from __future__ import annotations

import collections.abc
import functools
import inspect
import numbers
import os
import types

import numpy as _np

INT32 = (-2**31, 2**31 - 1)
INT64 = (-2**63, 2**63 - 1)
UINT64 = (0, 2**64 - 1)
MAX_DIM = 2**30  # sim/base/limits.hpp kMaxDim
# Ranges by parameter name wherever it occurs (the C++ type it becomes), before a
# function's own.
_NAMED = {"seed": UINT64, "pairs": INT64}


def _show(v) -> str:
    text = repr(v)
    return text if len(text) <= 60 else text[:57] + "..."


def _range_text(lo: int, hi: int) -> str:
    def one(x):
        for name, v in (("2**64-1", 2**64 - 1), ("2**63-1", 2**63 - 1), ("-2**63", -2**63),
                        ("2**31-1", 2**31 - 1), ("-2**31", -2**31), ("2**30", 2**30)):
            if x == v:
                return name
        return str(x)
    return f"{one(lo)}..{one(hi)}"


def _kind(annotation) -> tuple[str, bool]:
    """('int' | 'float' | 'bool' | 'str' | 'seq:int' | ... | '', optional) of an annotation."""
    text = annotation if isinstance(annotation, str) else getattr(annotation, "__name__", "")
    text = text.replace(" ", "")
    optional = False
    if text.startswith("Optional[") and text.endswith("]"):
        text, optional = text[len("Optional["):-1], True
    elif text.endswith("|None"):
        text, optional = text[:-len("|None")], True
    if text in ("int", "float", "bool", "str"):
        return text, optional
    for seq in ("Sequence[", "list[", "tuple["):
        if text.startswith(seq) and text.endswith("]") and text[len(seq):-1] in (
                "int", "float", "str"):
            return "seq:" + text[len(seq):-1], optional
    return "", optional


class _Checker:
    def __init__(self, qualname: str, kind: str, name: str, rng, path: bool, empty_ok: bool):
        self.where, self.kind, self.name = qualname, kind, name
        self.rng, self.path, self.empty_ok = rng, path, empty_ok

    def fail(self, exc, text):
        raise exc(f"{self.where}(): {self.name}: {text}") from None

    def one(self, kind: str, v, what: str):
        if kind == "int":
            if isinstance(v, (bool, _np.bool_)) or not isinstance(v, (numbers.Integral,
                                                                        _np.integer)):
                self.fail(TypeError, f"expected an integer{what}, got {type(v).__name__} "
                                     f"({_show(v)})")
            v = int(v)
            lo, hi = self.rng
            if not lo <= v <= hi:
                raise ValueError(f"{self.where}(): {self.name} = {v} is out of range "
                                 f"({_range_text(lo, hi)})") from None
            return v
        if kind == "float":
            if isinstance(v, (bool, _np.bool_)) or not isinstance(v, (numbers.Real,
                                                                        _np.floating)):
                self.fail(TypeError, f"expected a real number{what}, got {type(v).__name__} "
                                     f"({_show(v)})")
            return float(v)
        if kind == "bool":
            if not isinstance(v, (bool, _np.bool_)):
                self.fail(TypeError, f"expected True or False{what}, got {type(v).__name__} "
                                     f"({_show(v)})")
            return bool(v)
        if kind == "str":
            if self.path and isinstance(v, os.PathLike):
                v = os.fspath(v)
            if not isinstance(v, str):
                self.fail(TypeError, f"expected a string{what}, got {type(v).__name__} "
                                     f"({_show(v)})")
            if v == "" and not self.empty_ok:
                self.fail(ValueError, f"an empty string{what} (leave the argument out for "
                                      "its default)")
            return v
        return v

    def __call__(self, v):
        if self.kind.startswith("seq:"):
            if isinstance(v, (str, bytes)) or not (
                    isinstance(v, collections.abc.Sequence)
                    or (isinstance(v, _np.ndarray) and v.ndim == 1)):
                self.fail(TypeError, f"expected a list of {self.kind[4:]} values, got "
                                     f"{type(v).__name__} ({_show(v)})")
            return [self.one(self.kind[4:], x, " in the list") for x in v]
        return self.one(self.kind, v, "")


def arguments(fn, name: str, paths: tuple[str, ...] = (), **ranges):
    """A function ``check(*args, **kwargs) -> (args, kwargs)`` that binds a call of ``fn``
    to its signature and checks each argument (the module docstring's rules; ``ranges`` an
    int parameter's (lo, hi) where it is not the C++ ``int``'s, ``paths`` the str parameters
    that take an ``os.PathLike``), returning the arguments converted (numpy integers as int,
    paths as str) or raising one line naming the argument."""
    sig = inspect.signature(fn)
    checks = {}
    for p in sig.parameters.values():
        kind, optional = _kind(p.annotation)
        if not kind:
            continue
        rng = ranges.get(p.name, _NAMED.get(p.name, INT32))
        checks[p.name] = (optional, _Checker(name, kind, p.name, rng, p.name in paths,
                                             p.default == ""))

    bind = _binder(sig)

    def check(*args, **kwargs):
        bound = bind(args, kwargs)
        if bound is None:  # anything else: Signature.bind, and its one line where wrong
            try:
                bound = sig.bind(*args, **kwargs)
            except TypeError as e:  # a missing or unknown argument: Python's own one line
                raise TypeError(f"{name}(): {e}") from None
        arguments = bound.arguments
        for key, value in arguments.items():
            c = checks.get(key)
            if c is None or (value is None and c[0]):
                continue
            if value is None:
                raise TypeError(f"{name}(): {key}: None is not allowed here") from None
            arguments[key] = c[1](value)
        return bound.args, bound.kwargs
    return check


class _Bound:
    """What check reads of inspect.BoundArguments (arguments, args, kwargs), for _binder's
    signatures: args the leading positional parameters given, kwargs the rest."""
    __slots__ = ("arguments", "_positional")

    def __init__(self, arguments: dict, positional: list):
        self.arguments, self._positional = arguments, positional

    @property
    def args(self) -> tuple:
        out = []
        for n in self._positional:
            if n not in self.arguments:
                break
            out.append(self.arguments[n])
        return tuple(out)

    @property
    def kwargs(self) -> dict:
        lead = self._positional[:len(self.args)]
        return {k: v for k, v in self.arguments.items() if k not in lead}


def _binder(sig: inspect.Signature):
    """``bind(args, kwargs)``: the call bound as ``sig.bind`` binds it (a _Bound), for the
    calls it can bind at once (no more positional arguments than positional parameters, known
    names given once, every required one given), else None: Signature.bind then, which took
    20 us of a small ``gemm``'s 54 (2-core machine, 2026-11-27). For signatures of
    positional-or-keyword and keyword-only parameters only."""
    params = sig.parameters
    simple = all(p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY) for p in params.values())
    positional = [n for n, p in params.items() if p.kind is p.POSITIONAL_OR_KEYWORD]
    required = frozenset(n for n, p in params.items() if p.default is p.empty)
    order = list(params)

    def bind(args, kwargs):
        if not simple or len(args) > len(positional):
            return None
        given = dict(zip(positional, args))
        for key in kwargs:
            if key not in params or key in given:
                return None
        given.update(kwargs)
        if not required <= given.keys():
            return None
        return _Bound({n: given[n] for n in order if n in given}, positional)
    return bind


def checked(fn=None, *, name: str | None = None, paths: tuple[str, ...] = (), **ranges):
    """``fn`` with its arguments checked first (``arguments``); usable as ``@checked`` or
    ``@checked(...)``. ``name`` names it in errors (default: module.qualname)."""
    if fn is None:
        return lambda f: checked(f, name=name, paths=paths, **ranges)
    check = arguments(fn, name or f"{fn.__module__}.{fn.__qualname__}", paths, **ranges)

    def call(*args, **kwargs):
        args, kwargs = check(*args, **kwargs)
        return fn(*args, **kwargs)

    # The wrapper as a function of fn's own module (its globals), so that doctest and
    # inspect.getmodule still find fn's examples there; its body reads only its closure.
    wrapper = types.FunctionType(call.__code__, fn.__globals__, fn.__name__, None,
                                 call.__closure__)
    return functools.update_wrapper(wrapper, fn)
