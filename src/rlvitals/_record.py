"""``@record``: a dataclass that costs nothing to define.

``dataclasses.dataclass`` writes a class's ``__init__``, ``__repr__``, ``__eq__`` (and, frozen,
``__hash__``, ``__setattr__``, ``__delattr__``) as Python source and compiles it when the class
is defined: about 4 M instructions (~1 ms) per frozen class on CPython 3.11 to 3.13 alike. A
``rlvitals doctor`` start-up defines ~45 such classes (every detector's ``Knobs``, the run, the
findings...), which was half of its own start-up time.

``@record`` makes the class a real dataclass with nothing compiled (``dataclass(init=False,
repr=False, eq=False)``: ``dataclasses.fields``, ``replace``, ``asdict``, ``is_dataclass``,
pickling and ``match`` all work) and gives it shared methods that do what the generated ones
do, by walking the fields: ``__init__`` (positional or keyword arguments, defaults,
``default_factory``, ``__post_init__``, the same ``TypeError``\\ s), ``__repr__``, ``__eq__``
(same class, fields in order), and with ``frozen=True`` the ``FrozenInstanceError`` on
assignment and a hash of the fields. ``inspect.signature`` of the class lists the fields.
Constructing one costs a few microseconds more than a generated ``__init__``: records are for
classes defined at import and built a handful of times per run, not per row.

Not supported (use ``dataclasses.dataclass``): ``InitVar``, ``kw_only``, ``field(init=False)``,
``slots``, ``order``; a frozen stdlib dataclass cannot subclass a record (its parameters say
not frozen).

>>> @record(frozen=True)
... class Knobs:
...     window: int = 10
...     ratio: float = 2.0
>>> k = Knobs(5)
>>> k, k == Knobs(5, 2.0), dataclasses.replace(k, ratio=3.0).ratio
(Knobs(window=5, ratio=2.0), True, 3.0)
>>> k.window = 1
Traceback (most recent call last):
dataclasses.FrozenInstanceError: cannot assign to field 'window'
"""

from __future__ import annotations

import dataclasses
from typing import Any, TypeVar

__all__ = ["record"]

T = TypeVar("T", bound=type)

_MISSING = dataclasses.MISSING
_set = object.__setattr__


class _Spec:
    """What the shared methods need, computed once per class."""

    __slots__ = ("defaults", "factories", "frozen", "index", "names", "post_init", "repr")

    def __init__(self, cls: type, frozen: bool):
        fields = dataclasses.fields(cls)
        for f in fields:
            if not f.init or f.kw_only is True:
                raise TypeError(f"@record does not support field(init=False) or kw_only: {f.name}")
        self.names = tuple(f.name for f in fields)
        self.index = frozenset(self.names)
        self.defaults = {f.name: f.default for f in fields if f.default is not _MISSING}
        self.factories = {
            f.name: f.default_factory for f in fields if f.default_factory is not _MISSING
        }
        self.repr = tuple(f.name for f in fields if f.repr)
        self.frozen = frozen
        self.post_init = hasattr(cls, "__post_init__")


def _init(self: Any, *args: Any, **kwargs: Any) -> None:
    cls = type(self)
    spec: _Spec = cls.__record__
    names = spec.names
    if len(args) > len(names):
        raise TypeError(
            f"{cls.__qualname__}.__init__() takes {len(names) + 1} positional arguments "
            f"but {len(args) + 1} were given"
        )
    for k in kwargs:
        if k not in spec.index:
            raise TypeError(
                f"{cls.__qualname__}.__init__() got an unexpected keyword argument {k!r}"
            )
    missing = []
    for i, name in enumerate(names):
        if i < len(args):
            if name in kwargs:
                raise TypeError(
                    f"{cls.__qualname__}.__init__() got multiple values for argument {name!r}"
                )
            value = args[i]
        elif name in kwargs:
            value = kwargs[name]
        elif name in spec.defaults:
            value = spec.defaults[name]
        elif name in spec.factories:
            value = spec.factories[name]()
        else:
            missing.append(name)
            continue
        _set(self, name, value)
    if missing:
        quoted = [repr(m) for m in missing]
        listed = quoted[0] if len(quoted) == 1 else ", ".join(quoted[:-1]) + " and " + quoted[-1]
        plural = "s" if len(missing) > 1 else ""
        raise TypeError(
            f"{cls.__qualname__}.__init__() missing {len(missing)} required positional "
            f"argument{plural}: {listed}"
        )
    if spec.post_init:
        self.__post_init__()


def _repr(self: Any) -> str:
    fields = ", ".join(f"{n}={getattr(self, n)!r}" for n in type(self).__record__.repr)
    return f"{type(self).__qualname__}({fields})"


def _values(self: Any) -> tuple:
    return tuple(getattr(self, n) for n in type(self).__record__.names)


def _eq(self: Any, other: Any) -> Any:
    if other.__class__ is not self.__class__:
        return NotImplemented
    return _values(self) == _values(other)


def _hash(self: Any) -> int:
    return hash(_values(self))


def _frozen_setattr(self: Any, name: str, value: Any) -> None:
    if type(self).__record__.frozen:
        raise dataclasses.FrozenInstanceError(f"cannot assign to field {name!r}")
    _set(self, name, value)


def _frozen_delattr(self: Any, name: str) -> None:
    if type(self).__record__.frozen:
        raise dataclasses.FrozenInstanceError(f"cannot delete field {name!r}")
    object.__delattr__(self, name)


class _Signature:
    """``inspect.signature(cls)``: the fields, built on first access (not at import)."""

    def __get__(self, obj: Any, owner: type) -> Any:
        import inspect

        params = []
        for f in dataclasses.fields(owner):
            default = f.default
            if default is _MISSING and f.default_factory is not _MISSING:
                default = f.default_factory()
            params.append(
                inspect.Parameter(
                    f.name,
                    inspect.Parameter.POSITIONAL_OR_KEYWORD,
                    default=inspect.Parameter.empty if default is _MISSING else default,
                    annotation=f.type,
                )
            )
        return inspect.Signature(params, return_annotation=None)


_SIGNATURE = _Signature()


def record(cls: T | None = None, /, *, frozen: bool = False) -> Any:
    """Decorator: ``@record`` or ``@record(frozen=True)``, like ``@dataclass`` (module doc)."""

    def wrap(c: T) -> T:
        own_doc = c.__dict__.get("__doc__")
        if not own_doc:  # else dataclass would call inspect.signature to write one
            c.__doc__ = c.__name__
        c = dataclasses.dataclass(c, init=False, repr=False, eq=False)
        c.__record__ = _Spec(c, frozen)
        c.__init__ = _init
        c.__repr__ = _repr
        c.__eq__ = _eq
        c.__hash__ = _hash if frozen else None  # as dataclass: eq without frozen is unhashable
        if frozen:
            c.__setattr__ = _frozen_setattr
            c.__delattr__ = _frozen_delattr
        c.__signature__ = _SIGNATURE
        if not own_doc:  # dataclass's fallback docstring, without inspect.signature at import
            c.__doc__ = f"{c.__name__}({', '.join(c.__record__.names)})"
        return c

    return wrap if cls is None else wrap(cls)
